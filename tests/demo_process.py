"""``toolcodec demo-upstream`` in a subprocess on a free port (the shipped stand-in model
server, as a user runs it)."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import httpx

from tests.redis_server import free_port
from tests.serve_process import REPO_ROOT


class DemoProcess:
    """``python -m toolcodec.pool.cli demo-upstream --port P *args``; ``url`` is its base."""

    def __init__(self, *args: str) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.cmd = [sys.executable, "-m", "toolcodec.pool.cli", "demo-upstream",
                    "--port", str(self.port), *args]
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self, timeout: float = 30.0) -> DemoProcess:
        self.proc = subprocess.Popen(self.cmd, cwd=REPO_ROOT, env=dict(os.environ),
                                     stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        end = time.monotonic() + timeout
        while time.monotonic() < end:  # wait for the condition, not for a guessed time
            if self.proc.poll() is not None:
                out = self.proc.stdout.read().decode() if self.proc.stdout else ""
                raise RuntimeError(f"demo-upstream exited with {self.proc.returncode}: {out}")
            try:
                if httpx.get(self.url + "/v1/models", timeout=1.0).status_code == 200:
                    return self
            except httpx.HTTPError:
                pass
            time.sleep(0.05)
        raise RuntimeError(f"demo-upstream did not come up on {self.url}")

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)
