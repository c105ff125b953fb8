"""A real ``redis-server`` on a free port, and ``toolcodec worker`` processes, for tests.

Tests that need Redis run against the real binary: a fake would not show how blocking
commands, TTLs, Lua scripts or a restart behave. When the binary is missing the fixture fails
with instructions instead of skipping, so a green run always means Redis was exercised.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import redis

REPO_ROOT = Path(__file__).resolve().parent.parent
INSTALL_HINT = (
    "redis-server was not found on PATH (set REDIS_SERVER to its path to override). "
    "Install it, e.g. `apt-get install -y redis-server` (Debian/Ubuntu) or "
    "`brew install redis` (macOS); `.ci/run` does this on CI."
)


class RedisBinaryMissing(RuntimeError):
    """No ``redis-server`` executable could be found."""


def find_redis_server() -> str:
    """Return the path of the ``redis-server`` binary or raise :class:`RedisBinaryMissing`."""
    path = os.environ.get("REDIS_SERVER") or shutil.which("redis-server")
    if not path or not os.access(path, os.X_OK):
        raise RedisBinaryMissing(INSTALL_HINT)
    return path


def free_port() -> int:
    """Ask the kernel for a TCP port nobody is listening on right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class RedisServer:
    """One ``redis-server`` process without persistence, owned by the test session.

    ``stop()`` and ``start()`` keep the port, so a test can take Redis away and bring it
    back ("Redis restarted mid-run"); the restarted server starts empty, as a real restart
    without persistence would.
    """

    def __init__(self, port: int | None = None, *, binary: str | None = None,
                 extra_args: tuple[str, ...] = ()) -> None:
        self.binary = binary or find_redis_server()
        self.port = port or free_port()
        self.extra_args = tuple(extra_args)
        self.dir = tempfile.mkdtemp(prefix="toolcodec-redis-")
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        """``redis://`` URL of this server, with the password when one is required."""
        args = list(self.extra_args)
        if "--requirepass" in args:
            password = args[args.index("--requirepass") + 1]
            return f"redis://:{password}@127.0.0.1:{self.port}/0"
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self, timeout: float = 10.0) -> None:
        """Start the server (again) on ``self.port`` and wait until it answers PING."""
        if self.proc is not None and self.proc.poll() is None:
            return
        cmd = [
            self.binary, "--port", str(self.port), "--bind", "127.0.0.1",
            "--save", "", "--appendonly", "no", "--daemonize", "no",
            "--dir", self.dir, "--loglevel", "warning", *self.extra_args,
        ]
        with open(os.path.join(self.dir, "redis.log"), "ab") as log:
            self.proc = subprocess.Popen(cmd, stdout=log, stderr=log, cwd=self.dir)
        self._wait_ready(timeout)

    def _wait_ready(self, timeout: float) -> None:
        client = self.client(socket_connect_timeout=0.2, socket_timeout=0.5)
        end = time.monotonic() + timeout
        try:
            while True:
                assert self.proc is not None
                if self.proc.poll() is not None:
                    err = Path(self.dir, "redis.log").read_text(errors="replace")[-2000:]
                    raise RuntimeError(f"redis-server on port {self.port} exited: {err.strip()}")
                try:
                    if client.ping():
                        return
                except redis.exceptions.ConnectionError:
                    pass
                if time.monotonic() > end:
                    raise RuntimeError(f"redis-server on port {self.port} did not answer PING")
                time.sleep(0.01)
        finally:
            client.close()

    def stop(self) -> None:
        """Kill the server at once (no shutdown save) and wait for it to exit."""
        if self.proc is None:
            return
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(timeout=10)
        self.proc = None

    def client(self, **kwargs: object) -> redis.Redis:
        """A fresh client for assertions on what the code under test left in Redis."""
        return redis.Redis.from_url(self.url, **kwargs)

    def close(self) -> None:
        self.stop()
        shutil.rmtree(self.dir, ignore_errors=True)


class WorkerProcessGroup:
    """``python -m toolcodec.worker.rq_worker`` (or ``toolcodec worker`` with ``cli``) in a
    subprocess, with fault injection enabled.

    ``start()`` returns once the worker registered itself in Redis; ``stop()`` sends SIGTERM,
    then SIGKILL to the whole process group (the worker's codec children included).
    """

    def __init__(self, redis_url: str, queue: str, *, concurrency: int = 2,
                 metrics_port: int | None = None, env: dict[str, str] | None = None,
                 args: tuple[str, ...] = (), log_path: Path | None = None,
                 cli: bool = False) -> None:
        self.redis_url = redis_url
        self.queue = queue
        self.concurrency = concurrency
        self.metrics_port = metrics_port
        self.args = tuple(args)
        # cli: start it as ``toolcodec worker`` (pool/cli.py) instead of the module's main.
        self.module = "toolcodec.pool.cli" if cli else "toolcodec.worker.rq_worker"
        self.subcommand = ["worker"] if cli else []
        # The worker's stderr (its log) goes here when given, for tests that read the log.
        self.log_path = log_path
        self.env = {**os.environ, "TOOLCODEC_FAULT_INJECTION": "1", **(env or {})}
        self.env["PYTHONPATH"] = os.pathsep.join(
            p for p in (str(REPO_ROOT), self.env.get("PYTHONPATH", "")) if p
        )
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self, timeout: float = 20.0, wait: bool = True) -> None:
        """Start the worker; with ``wait``, return once it registered (see ``wait_ready``)."""
        cmd = [sys.executable, "-m", self.module, *self.subcommand, "--redis-url", self.redis_url,
               "--queue", self.queue, "--concurrency", str(self.concurrency)]
        if self.metrics_port is not None:
            cmd += ["--metrics-port", str(self.metrics_port)]
        cmd += self.args
        if self.log_path is None:
            self.proc = subprocess.Popen(cmd, env=self.env, cwd=REPO_ROOT,
                                         start_new_session=True)
        else:
            with open(self.log_path, "ab") as log:
                self.proc = subprocess.Popen(cmd, env=self.env, cwd=REPO_ROOT, stderr=log,
                                             start_new_session=True)
        if wait:
            self.wait_ready(timeout)

    def log(self) -> str:
        """What the worker wrote to stderr so far (needs ``log_path``)."""
        assert self.log_path is not None, "start the worker with log_path to read its log"
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""

    def wait_ready(self, timeout: float = 20.0) -> None:
        """Wait until ``concurrency`` workers are listening on the queue."""
        from toolcodec.worker.rq_protocol import workers_key

        client = redis.Redis.from_url(self.redis_url, socket_connect_timeout=0.5)
        end = time.monotonic() + timeout
        try:
            while time.monotonic() < end:
                assert self.proc is not None
                if self.proc.poll() is not None:
                    raise RuntimeError(f"worker exited with code {self.proc.returncode}")
                try:
                    if int(client.scard(workers_key(self.queue))) >= self.concurrency:
                        return
                except redis.exceptions.ConnectionError:
                    pass
                time.sleep(0.02)
        finally:
            client.close()
        raise RuntimeError(f"worker on queue {self.queue!r} not ready after {timeout} s")

    def stop(self) -> None:
        if self.proc is None:
            return
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                pass
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        try:
            self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            pass
        self.proc = None


class DroppingListener:
    """A stand-in for a Redis behind a proxy whose backend is down: every TCP connection
    on ``port`` is accepted and closed at once, and counted.

    A refused connection leaves no trace a test can wait on; an accepted one does, so a test
    can wait until a client has retried N times instead of sleeping.
    """

    def __init__(self, port: int) -> None:
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind(("127.0.0.1", port))
        self.sock.listen(64)
        self.sock.settimeout(0.05)
        self.connections = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        while not self._stop.is_set():
            try:
                conn, _ = self.sock.accept()
            except TimeoutError:
                continue
            conn.close()
            self.connections += 1

    def close(self) -> None:
        self._stop.set()
        self._thread.join()
        self.sock.close()
