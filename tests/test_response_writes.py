"""A response's status line and headers leave with its first body bytes, in one write
(``toolcodec.pool.service.one_write``): one system call per whole answer, not two."""

from __future__ import annotations

import asyncio
import socket

import orjson
from toolcodec.pool.service.one_write import HeadWithBody

from tests.serve_process import ServeProcess


class Recorder:
    def __init__(self) -> None:
        self.writes: list[bytes] = []
        self.closed = False

    def write(self, data: bytes) -> None:
        assert not self.closed, "written after close"
        self.writes.append(data)

    def close(self) -> None:
        self.closed = True

    def is_closing(self) -> bool:
        return self.closed

    def get_write_buffer_size(self) -> int:
        return 7


def test_the_head_goes_with_the_first_body_bytes() -> None:
    async def run() -> list[bytes]:
        t = Recorder()
        w = HeadWithBody(t, asyncio.get_running_loop())
        w.write(b"HEAD")
        w.write(b"body")
        w.write(b"more")
        await asyncio.sleep(0)  # the turn's flush finds nothing left
        return t.writes
    assert asyncio.run(run()) == [b"HEADbody", b"more"]


def test_a_head_without_a_body_leaves_at_the_end_of_the_turn() -> None:
    async def run() -> tuple[list[bytes], list[bytes]]:
        t = Recorder()
        w = HeadWithBody(t, asyncio.get_running_loop())
        w.write(b"HEAD")
        before = list(t.writes)
        await asyncio.sleep(0)
        return before, t.writes
    assert asyncio.run(run()) == ([], [b"HEAD"])


def test_close_sends_what_is_held_first_and_a_late_flush_writes_nothing() -> None:
    async def run() -> Recorder:
        t = Recorder()
        w = HeadWithBody(t, asyncio.get_running_loop())
        w.write(b"HEAD")
        w.close()
        await asyncio.sleep(0)  # the scheduled flush runs after the close: nothing to send
        return t
    t = asyncio.run(run())
    assert t.writes == [b"HEAD"] and t.closed


def test_the_rest_is_the_transport_s() -> None:
    async def run() -> int:
        return HeadWithBody(Recorder(), asyncio.get_running_loop()).get_write_buffer_size()
    assert asyncio.run(run()) == 7


def test_pipelined_requests_are_answered_whole_and_in_order() -> None:
    srv = ServeProcess("--workers", "1").start()
    try:
        body = orjson.dumps({"text": "{'a': 1,}"})
        one = (b"POST /v1/repair HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\n"
               b"content-length: " + str(len(body)).encode() + b"\r\n\r\n" + body)
        with socket.create_connection(("127.0.0.1", srv.port), timeout=30) as s:
            s.sendall(one * 3 + b"GET /healthz HTTP/1.1\r\nhost: x\r\nconnection: close\r\n\r\n")
            data = b""
            while chunk := s.recv(65536):
                data += chunk
        answers = data.split(b"HTTP/1.1 ")[1:]
        assert [a.split(b"\r\n", 1)[0] for a in answers] == [b"200 OK"] * 4
        for answer in answers[:3]:
            head, _, rest = answer.partition(b"\r\n\r\n")
            assert orjson.loads(rest)["result"]["value"] == {"a": 1}
    finally:
        srv.stop()
