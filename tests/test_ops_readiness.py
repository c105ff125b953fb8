"""``/readyz`` says "can take work", and a drain closes keep-alive connections cleanly.

Real ``toolcodec serve`` processes over real sockets: a worker held away for its deadline kill
(killed and re-forked after its job overran) leaves the server ready; during the shutdown
delay every answer says ``Connection: close`` and the server closes the connection after it.
"""

from __future__ import annotations

import signal
import socket
import threading

import httpx
import orjson
import pytest

from tests.serve_process import ServeProcess

FAULTS = {"TOOLCODEC_FAULT_INJECTION": "1"}


def restarts(url: str) -> float:
    text = httpx.get(url + "/metrics", timeout=10).text
    prefix = 'toolcodec_worker_restarts_total{backend="process",reason="timeout"} '
    return sum(float(line[len(prefix):]) for line in text.splitlines()
               if line.startswith(prefix))


def test_a_worker_in_its_deadline_kill_is_not_unreadiness() -> None:
    # no spares: the only worker's slot then waits for its re-fork after each kill
    srv = ServeProcess("--workers", "1", "--spares", "0", "--timeout-ms", "300",
                       env=FAULTS).start()
    stop = threading.Event()

    def overrun() -> None:  # each job overruns: the only worker is killed and re-forked
        with httpx.Client() as client:
            while not stop.is_set():
                try:
                    client.post(srv.url + "/v1/_sleep", content=orjson.dumps({"seconds": 5}),
                                headers={"content-type": "application/json"}, timeout=30)
                except httpx.HTTPError:
                    return  # the server was stopped

    thread = threading.Thread(target=overrun, daemon=True)
    try:
        thread.start()
        answers = []
        while restarts(srv.url) < 3:  # readiness read all through three kills and re-forks
            answers.append(httpx.get(srv.url + "/readyz", timeout=10).status_code)
        assert answers and set(answers) == {200}
    finally:
        stop.set()
        srv.stop()
        thread.join(30)


def request(sock: socket.socket, path: str = "/healthz") -> tuple[dict[str, str], bytes]:
    """One keep-alive GET on ``sock``; the answer's headers (lower-cased) and body."""
    sock.sendall(f"GET {path} HTTP/1.1\r\nhost: x\r\n\r\n".encode())
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = sock.recv(65536)
        assert chunk, "the server closed the connection without an answer"
        data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    headers = {k.strip().lower(): v.strip() for k, v in
               (line.split(":", 1) for line in lines[1:])}
    while len(body) < int(headers["content-length"]):
        chunk = sock.recv(65536)
        assert chunk
        body += chunk
    return headers, body


def test_a_drain_answers_connection_close_and_closes_the_connection_after() -> None:
    srv = ServeProcess("--workers", "1", "--shutdown-delay-s", "600").start()
    try:
        with socket.create_connection(("127.0.0.1", srv.port), timeout=30) as sock:
            headers, _ = request(sock)
            assert headers.get("connection", "keep-alive") != "close"
            srv.proc.send_signal(signal.SIGTERM)
            while httpx.get(srv.url + "/readyz", timeout=10).status_code != 503:
                pass  # the handler runs on the server's next loop turn
            headers, body = request(sock)  # the kept-alive connection: still answered
            assert orjson.loads(body) == {"status": "alive"}
            assert headers["connection"] == "close"
            assert sock.recv(1) == b""  # then closed by the server, cleanly (no reset)
        with socket.create_connection(("127.0.0.1", srv.port), timeout=30) as fresh:
            headers, _ = request(fresh, "/readyz")  # new connections are served, and told
            assert headers["connection"] == "close"
        srv.proc.send_signal(signal.SIGTERM)  # a second signal skips the delay
        assert srv.proc.wait(60) == 0
    finally:
        srv.stop()


@pytest.mark.redis
def test_a_redis_blip_leaves_every_replica_ready_and_is_exported(
        own_redis_server, queue_name, start_rq_worker) -> None:
    """Redis stopped (SIGSTOP: it accepts connections and never answers): serve stays ready
    for a blip (every replica shares Redis, failing them all would refuse connections instead
    of answering 503), and toolcodec_rq_redis_up turns 0 at once for the alert."""
    start_rq_worker(server=own_redis_server)
    srv = ServeProcess("--backend", "rq", "--redis-url", own_redis_server.url, "--queue",
                       queue_name).start()
    try:
        while httpx.get(srv.url + "/readyz", timeout=10).status_code != 200:
            pass  # the worker's first heartbeat
        up = f'toolcodec_rq_redis_up{{queue="{queue_name}"}}'
        assert f"{up} 1.0" in httpx.get(srv.url + "/metrics", timeout=10).text
        own_redis_server.proc.send_signal(signal.SIGSTOP)
        try:
            assert f"{up} 0.0" in httpx.get(srv.url + "/metrics", timeout=10).text
            assert httpx.get(srv.url + "/readyz", timeout=10).status_code == 200
        finally:
            own_redis_server.proc.send_signal(signal.SIGCONT)
    finally:
        srv.stop()
