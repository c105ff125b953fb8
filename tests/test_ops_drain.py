"""SIGTERM drains ``toolcodec serve`` (issue #26, item 7): readiness fails first, requests are
still answered during ``--shutdown-delay-s``, then the socket closes and the process exits 0."""

from __future__ import annotations

import signal

import httpx
import orjson

from tests.serve_process import ServeProcess


def post(client: httpx.Client, url: str) -> int:
    return client.post(url + "/v1/repair", content=orjson.dumps({"text": "[1,"}),
                       headers={"content-type": "application/json"}, timeout=30).status_code


def test_sigterm_fails_readiness_first_and_keeps_serving_for_the_delay() -> None:
    srv = ServeProcess("--workers", "1", "--timeout-ms", "5000",
                       "--shutdown-delay-s", "15").start()
    try:
        with httpx.Client() as client:
            assert client.get(srv.url + "/readyz", timeout=10).status_code == 200
            srv.proc.send_signal(signal.SIGTERM)
            while client.get(srv.url + "/readyz", timeout=10).status_code != 503:
                pass  # the handler runs on the server's next loop turn
            answered = [post(client, srv.url) for _ in range(30)]
            assert answered == [200] * 30  # not ready, but still serving
            assert srv.proc.poll() is None
        assert srv.proc.wait(60) == 0
        try:
            httpx.get(srv.url + "/healthz", timeout=2)
            raise AssertionError("the socket is still open after exit")
        except httpx.ConnectError:
            pass
    finally:
        srv.stop()


def test_a_second_signal_skips_the_delay() -> None:
    srv = ServeProcess("--workers", "1", "--shutdown-delay-s", "3600").start()
    try:
        srv.proc.send_signal(signal.SIGTERM)
        while httpx.get(srv.url + "/readyz", timeout=10).status_code != 503:
            pass
        srv.proc.send_signal(signal.SIGTERM)
        assert srv.proc.wait(60) == 0  # an hour's delay was not waited for
    finally:
        srv.stop()
