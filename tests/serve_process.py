"""``toolcodec serve`` in a subprocess on a free port, for tests that talk real HTTP to it."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx

from tests.redis_server import free_port

REPO_ROOT = Path(__file__).resolve().parent.parent


class ServeProcess:
    """``python -m toolcodec.pool.cli serve --port P *args``; ``url`` is its base URL."""

    def __init__(self, *args: str, env: dict[str, str] | None = None) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.cmd = [sys.executable, "-m", "toolcodec.pool.cli", "serve", "--port", str(self.port),
                    *args]
        self.env = {**os.environ, **(env or {})}
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self, timeout: float = 30.0) -> ServeProcess:
        self.proc = subprocess.Popen(self.cmd, env=self.env, cwd=REPO_ROOT,
                                     stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        end = time.monotonic() + timeout
        while time.monotonic() < end:  # wait for the condition, not for a guessed time
            if self.proc.poll() is not None:
                out = self.proc.stdout.read().decode() if self.proc.stdout else ""
                raise RuntimeError(f"toolcodec serve exited with {self.proc.returncode}: {out}")
            try:
                if httpx.get(self.url + "/healthz", timeout=1.0).status_code == 200:
                    return self
            except httpx.HTTPError:
                pass
            time.sleep(0.05)
        raise RuntimeError(f"toolcodec serve did not come up on {self.url}")

    def terminate(self, timeout: float = 30.0) -> int:
        assert self.proc is not None
        self.proc.send_signal(signal.SIGTERM)
        return self.proc.wait(timeout)

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)
