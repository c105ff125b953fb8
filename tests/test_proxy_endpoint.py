"""The chat endpoint as the app calls it directly (``toolcodec.pool.proxy.endpoint``): what the
framework's route did for it — 405 for other methods, a client that goes away cutting its
stream and the upstream's, a failing handler answered with the 500 envelope — still holds.
Real HTTP against ``toolcodec serve``; upstream is the STAND-IN (``tests/upstream_standin.py``).
"""

from __future__ import annotations

import asyncio
import socket
import time

import httpx
import orjson
import pytest

from tests.serve_process import ServeProcess


@pytest.fixture(scope="module")
def proxy(upstream):
    srv = ServeProcess("--upstream", upstream.url, "--workers", "1").start()
    yield srv
    srv.stop()


def trickling(upstream) -> int:
    return httpx.get(upstream.url + "/_trickling").json()["open"]


def wait_until(condition, what: str, timeout: float = 60.0) -> None:
    """Poll *condition* (a bounded wait for a condition, not a timing assertion)."""
    end = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > end:
            raise AssertionError(f"never happened: {what}")
        time.sleep(0.02)


def test_other_methods_get_the_405_envelope(proxy) -> None:
    response = httpx.get(proxy.url + "/v1/chat/completions")
    assert response.status_code == 405
    assert response.json()["error"]["code"] == "bad_request"


def test_a_body_that_is_not_a_chat_request_is_a_400(proxy) -> None:
    response = httpx.post(proxy.url + "/v1/chat/completions", content=b"[1, 2",
                          headers={"content-type": "application/json"})
    assert response.status_code == 400
    assert response.json()["error"]["code"] == "bad_request"
    assert response.headers["content-length"] == str(len(response.content))


def test_a_client_that_goes_away_closes_the_upstream_stream(proxy, upstream) -> None:
    wait_until(lambda: trickling(upstream) == 0, "other tests' trickles ended")
    body = orjson.dumps({"model": "m", "stream": True,
                         "messages": [{"role": "user", "content": "case:trickle"}]})
    host, port = proxy.url.removeprefix("http://").split(":")
    sock = socket.create_connection((host, int(port)))
    sock.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nhost: x\r\n"
                 b"content-type: application/json\r\ncontent-length: "
                 + str(len(body)).encode() + b"\r\n\r\n" + body)
    seen = b""
    while b"data:" not in seen:  # the stream is open and relaying
        seen += sock.recv(65536)
    assert seen.startswith(b"HTTP/1.1 200")
    assert trickling(upstream) == 1
    sock.close()
    wait_until(lambda: trickling(upstream) == 0, "the proxy closed the upstream stream")


def test_a_handler_that_fails_before_answering_gets_the_500_envelope() -> None:
    from prometheus_client import CollectorRegistry
    from toolcodec.pool.api import Pool
    from toolcodec.pool.service.app import Service, build_app

    async def failing(scope, receive, send) -> None:
        raise RuntimeError("broken handler")

    async def ready() -> None:
        return None

    pool = Pool("process", workers=1, registry=CollectorRegistry())
    try:
        service = Service(pool, timeout_ms=50, max_body=1000, registry=CollectorRegistry(),
                          ready=ready)
        app = build_app(service, direct={"/v1/chat/completions": failing})
        sent: list[dict] = []

        async def receive() -> dict:
            return {"type": "http.request", "body": b"{}", "more_body": False}

        async def send(message: dict) -> None:
            sent.append(message)

        scope = {"type": "http", "method": "POST", "path": "/v1/chat/completions",
                 "headers": [], "query_string": b""}
        asyncio.run(app(scope, receive, send))
    finally:
        pool.close()
    assert sent[0]["status"] == 500
    error = orjson.loads(sent[1]["body"])["error"]
    assert error["code"] == "internal_error" and "broken handler" in error["message"]
