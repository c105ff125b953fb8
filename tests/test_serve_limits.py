"""Bounds on request headers in ``toolcodec serve`` (issue #25, item 6), over real sockets.

A real ``toolcodec serve`` subprocess with a short ``--header-timeout-s``; each test waits on
the socket (its EOF or the answer), never on a guessed time. The timeouts passed to the
sockets only stop a broken run from hanging.
"""

from __future__ import annotations

import select
import socket
import time

import orjson
import pytest

from tests.serve_process import ServeProcess

HEADER_TIMEOUT_S = 0.5
MAX_HEADER_BYTES = 16 * 1024
FAULTS = {"TOOLCODEC_FAULT_INJECTION": "1"}
SAFETY_S = 30.0  # a socket wait that reaches this means the server never acted


@pytest.fixture(scope="module")
def server():
    srv = ServeProcess("--workers", "1", "--timeout-ms", "5000",
                       "--header-timeout-s", str(HEADER_TIMEOUT_S),
                       "--max-header-bytes", str(MAX_HEADER_BYTES), env=FAULTS).start()
    yield srv
    srv.stop()


def connect(server) -> socket.socket:
    sock = socket.create_connection(("127.0.0.1", server.port), timeout=SAFETY_S)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return sock


def read_to_eof(sock: socket.socket) -> bytes:
    """Everything the server sends until it closes the connection."""
    out = b""
    while True:
        try:
            chunk = sock.recv(65536)
        except ConnectionResetError:
            return out
        if not chunk:
            return out
        out += chunk


def request(path: str = "/healthz", headers: dict[str, str] | None = None,
            body: bytes = b"", method: str = "GET") -> bytes:
    lines = [f"{method} {path} HTTP/1.1", "Host: test"]
    lines += [f"{k}: {v}" for k, v in (headers or {}).items()]
    if body or method == "POST":
        lines += ["Content-Type: application/json", f"Content-Length: {len(body)}"]
    return ("\r\n".join(lines) + "\r\n\r\n").encode() + body


def read_response(sock: socket.socket) -> tuple[int, bytes]:
    """One response with a Content-Length body; returns (status, body)."""
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = sock.recv(65536)
        assert chunk, f"connection closed after {data!r}"
        data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    status = int(head.split(b" ", 2)[1])
    length = next(int(line.split(b":", 1)[1]) for line in head.split(b"\r\n")[1:]
                  if line.lower().startswith(b"content-length:"))
    while len(body) < length:
        chunk = sock.recv(65536)
        assert chunk, "connection closed inside a body"
        body += chunk
    return status, body


def assert_envelope(answer: bytes, message: str) -> None:
    """Like every answer of the service, a refusal's body is the error envelope."""
    head, _, body = answer.partition(b"\r\n\r\n")
    assert b"content-type: application/json" in head.lower()
    envelope = orjson.loads(body)
    assert envelope["status"] == "error" and envelope["backend"] == "process"
    assert envelope["error"]["code"] == "bad_request"
    assert envelope["error"]["message"].startswith(message), envelope


def test_a_slowloris_connection_is_closed_at_the_header_deadline(server) -> None:
    """Headers trickling in a byte at a time do not hold the connection open."""
    with connect(server) as sock:
        sock.sendall(b"GET /healthz HTTP/1.1\r\nHost: test\r\nX-Slow: ")
        started = time.monotonic()
        sent = 0
        while time.monotonic() - started < SAFETY_S:
            # Wait for the server to answer or close; meanwhile keep the header growing.
            readable, _, _ = select.select([sock], [], [], 0.05)
            if readable:
                break
            try:
                sock.sendall(b"a")
            except (BrokenPipeError, ConnectionResetError):
                break
            sent += 1
        answer = read_to_eof(sock)
    assert answer.startswith(b"HTTP/1.1 408 "), answer
    assert_envelope(answer, "408: request headers not complete within 0.5 s")
    assert sent > 0  # bytes were still arriving when the deadline closed the connection


def test_many_slow_connections_are_all_closed_and_others_still_served(server) -> None:
    """The issue's attack in small: connections holding partial headers. While they are open
    a normal request is answered; each of them ends at the deadline."""
    slow = [connect(server) for _ in range(100)]
    try:
        for sock in slow:
            sock.sendall(b"GET /healthz HTTP/1.1\r\nHost: test\r\nX-Slow: a")
        with connect(server) as sock:
            sock.sendall(request())
            assert read_response(sock)[0] == 200
        answers = [read_to_eof(sock) for sock in slow]
    finally:
        for sock in slow:
            sock.close()
    assert all(a.startswith(b"HTTP/1.1 408 ") for a in answers), {a[:40] for a in answers}


def test_a_connection_that_never_sends_is_closed(server) -> None:
    with connect(server) as sock:
        assert read_to_eof(sock) == b""


def test_a_200_kb_header_is_refused_with_431(server) -> None:
    with connect(server) as sock:
        try:
            sock.sendall(request(headers={"X-Big": "a" * 200_000}))
        except (BrokenPipeError, ConnectionResetError):
            pass  # the server stopped reading; its answer is still readable
        answer = read_to_eof(sock)
    assert answer.startswith(b"HTTP/1.1 431 "), answer[:200]
    assert_envelope(answer, f"431: request line and headers over {MAX_HEADER_BYTES} bytes")


def test_many_headers_over_the_limit_in_small_writes_are_refused(server) -> None:
    """The limit is on the whole header block, however it is cut into writes."""
    with connect(server) as sock:
        sock.sendall(b"GET /healthz HTTP/1.1\r\nHost: test\r\n")
        line = b"X-Many: " + b"b" * 100 + b"\r\n"
        try:
            for _ in range(MAX_HEADER_BYTES // len(line) + 2):
                sock.sendall(line)
        except (BrokenPipeError, ConnectionResetError):
            pass
        answer = read_to_eof(sock)
    assert answer.startswith(b"HTTP/1.1 431 "), answer[:200]


def test_headers_just_under_the_limit_and_a_large_body_are_served(server) -> None:
    """Neither a header block near the limit nor a body many times its size is refused."""
    near = "c" * (MAX_HEADER_BYTES - 200)
    body = b'{"text": "[' + b"1," * 100_000 + b'1"}'
    with connect(server) as sock:
        sock.sendall(request(headers={"X-Near": near}))
        assert read_response(sock)[0] == 200
        # The same kept-alive connection: a 200 KB body in one write with its headers.
        sock.sendall(request("/v1/repair", body=body, method="POST"))
        status, _ = read_response(sock)
        assert status == 200


def test_the_deadline_covers_headers_only_not_the_job(server) -> None:
    """A job that runs longer than the header deadline is answered, not cut off."""
    body = b'{"seconds": ' + str(HEADER_TIMEOUT_S * 3).encode() + b"}"
    with connect(server) as sock:
        sock.sendall(request("/v1/_sleep", body=body, method="POST"))
        status, answer = read_response(sock)
    assert status == 200 and b'"status":"ok"' in answer.replace(b" ", b""), answer


def test_the_cli_refuses_bounds_out_of_range() -> None:
    for args in (["--header-timeout-s", "0"], ["--max-header-bytes", "10"]):
        srv = ServeProcess(*args)
        with pytest.raises(RuntimeError, match="exited with 2"):
            srv.start(timeout=30)
