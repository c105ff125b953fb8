"""What the translated routes (``/v1/messages``, ``/v1/responses``) share with the chat route's
endpoint: a client that goes away closes the upstream stream; bodies over ``--max-body`` and
bodies that are not JSON are refused in the route's own error shape.

Upstream is a STAND-IN for a model server (``tests/upstream_standin.py``): ``case:trickle``
is a stream that never ends, and the stand-in counts those still being sent.
"""

from __future__ import annotations

import socket

import httpx
import orjson
import pytest

from tests.serve_process import ServeProcess
from tests.test_proxy_endpoint import trickling, wait_until

BODIES = {
    "/v1/messages": {"model": "m", "max_tokens": 10, "stream": True,
                     "messages": [{"role": "user", "content": "case:trickle"}]},
    "/v1/responses": {"model": "m", "stream": True, "input": "case:trickle"},
}


@pytest.fixture(scope="module")
def proxy(upstream):
    srv = ServeProcess("--upstream", upstream.url, "--workers", "1", "--max-body",
                       "4096").start()
    yield srv
    srv.stop()


@pytest.mark.parametrize("path", list(BODIES))
def test_a_client_that_goes_away_closes_the_upstream_stream(proxy, upstream, path) -> None:
    wait_until(lambda: trickling(upstream) == 0, "other tests' trickles ended")
    body = orjson.dumps(BODIES[path])
    host, port = proxy.url.removeprefix("http://").split(":")
    sock = socket.create_connection((host, int(port)))
    sock.sendall(f"POST {path} HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\n"
                 f"content-length: {len(body)}\r\n\r\n".encode() + body)
    seen = b""
    while b"data:" not in seen:  # the stream is open and relaying
        seen += sock.recv(65536)
    assert seen.startswith(b"HTTP/1.1 200")
    assert b"text/event-stream" in seen
    assert trickling(upstream) == 1
    sock.close()
    wait_until(lambda: trickling(upstream) == 0, "the proxy closed the upstream stream")


def test_refusals_come_in_each_route_s_own_shape(proxy) -> None:
    big = {"model": "m", "input": "x" * 5000, "messages": [], "max_tokens": 1}
    for body, status in ((big, 413), (b"{not json", 400)):
        content = body if isinstance(body, bytes) else orjson.dumps(body)
        messages = httpx.post(proxy.url + "/v1/messages", content=content,
                              headers={"content-type": "application/json"})
        assert messages.status_code == status
        assert messages.json()["type"] == "error"
        assert messages.json()["error"]["type"] == ("request_too_large" if status == 413
                                                    else "invalid_request_error")
        responses = httpx.post(proxy.url + "/v1/responses", content=content,
                               headers={"content-type": "application/json"})
        assert responses.status_code == status
        assert responses.json()["error"]["code"] == ("payload_too_large" if status == 413
                                                     else "bad_request")
