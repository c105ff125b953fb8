"""The proxy's upstream HTTP client (``toolcodec.pool.proxy.http_client``) over real sockets: a
small scripted HTTP/1.1 server on loopback, in the test's own event loop, asyncio's and
uvloop's (the proxy serves on uvloop). Waits are on conditions; the short timeouts are the
client's configuration."""

from __future__ import annotations

import asyncio
import gzip
import shutil
import socket
import ssl
import subprocess
import zlib
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path

import pytest
import uvloop
from toolcodec.pool.proxy.http_client import (
    BodyTooLarge,
    ConnectError,
    ConnectTimeout,
    DecodingError,
    HTTPClient,
    HTTPError,
    PoolTimeout,
    ReadError,
    ReadTimeout,
    RemoteProtocolError,
)
from toolcodec.pool.proxy.upstream import UpstreamError, failure, read_body


@pytest.fixture(params=["asyncio", "uvloop"])
def run(request):
    """Run a test's coroutine function to its end on a new loop of either kind."""
    factory = uvloop.new_event_loop if request.param == "uvloop" else None

    def run(test: Callable[[], Awaitable[None]]) -> None:
        with asyncio.Runner(loop_factory=factory) as runner:
            runner.run(asyncio.wait_for(test(), 60))  # a hung test fails instead of hanging
    return run


@dataclass
class Request:
    method: str
    path: str
    headers: dict[str, str]
    body: bytes
    conn: int  # which of the server's connections it came on (0, 1, ...)


Answer = Callable[[Request, asyncio.StreamReader, asyncio.StreamWriter], Awaitable[bool | None]]


class Server:
    """HTTP/1.1 on loopback: *answer* writes each response; it returns False to close the
    connection after it. Counts connections opened and ended."""

    def __init__(self, answer: Answer, ssl_context: ssl.SSLContext | None = None) -> None:
        self.answer, self.ssl = answer, ssl_context
        self.opened = self.ended = 0
        self.requests: list[Request] = []
        self.writers: list[asyncio.StreamWriter] = []

    async def __aenter__(self) -> Server:
        self.server = await asyncio.start_server(self._serve, "127.0.0.1", 0, ssl=self.ssl)
        self.port = self.server.sockets[0].getsockname()[1]
        scheme = "https" if self.ssl else "http"
        self.url = f"{scheme}://127.0.0.1:{self.port}"
        return self

    async def __aexit__(self, *exc: object) -> None:
        self.server.close()
        for writer in self.writers:
            writer.close()

    def on(self, conn: int) -> list[str]:
        """The paths requested on connection *conn*."""
        return [r.path for r in self.requests if r.conn == conn]

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        index = self.opened
        self.opened += 1
        self.writers.append(writer)
        try:
            while True:
                try:
                    head = await reader.readuntil(b"\r\n\r\n")
                except (asyncio.IncompleteReadError, ConnectionError):
                    return
                lines = head.decode("latin-1").split("\r\n")
                method, path, _ = lines[0].split(" ", 2)
                headers = {}
                for line in filter(None, lines[1:]):
                    name, value = line.split(":", 1)
                    headers[name.strip().lower()] = value.strip()
                body = await reader.readexactly(int(headers.get("content-length", 0)))
                request = Request(method, path, headers, body, index)
                self.requests.append(request)
                if await self.answer(request, reader, writer) is False:
                    return
        except ConnectionError:
            return
        finally:
            self.ended += 1
            writer.close()


def response(body: bytes = b"", status: int = 200, headers: dict[str, str] | None = None
             ) -> bytes:
    fields = {"content-length": str(len(body)), **(headers or {})}
    head = f"HTTP/1.1 {status} OK\r\n" + "".join(f"{k}: {v}\r\n" for k, v in fields.items())
    return (head + "\r\n").encode() + body


def chunked(*parts: bytes) -> bytes:
    return b"".join(b"%x\r\n%s\r\n" % (len(p), p) for p in parts if p) + b"0\r\n\r\n"


CHUNKED_HEAD = b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n"


async def echo(request: Request, reader: asyncio.StreamReader,
               writer: asyncio.StreamWriter) -> None:
    writer.write(response(b"answer to " + request.path.encode()))


async def holding(request: Request, reader: asyncio.StreamReader,
                  writer: asyncio.StreamWriter) -> bool | None:
    """``/hold``: 3 of 10 body bytes, and the connection held until the client closes it;
    anything else: ``free``."""
    if request.path == "/hold":
        writer.write(b"HTTP/1.1 200 OK\r\ncontent-length: 10\r\n\r\nabc")
        return await eof(reader)
    writer.write(response(b"free"))
    return None


async def part_or_nothing(request: Request, reader: asyncio.StreamReader,
                          writer: asyncio.StreamWriter) -> bool:
    """``/part``: 3 of 10 body bytes; anything else: no answer. Either way the connection is
    held until the client closes it."""
    if request.path == "/part":
        writer.write(b"HTTP/1.1 200 OK\r\ncontent-length: 10\r\n\r\nabc")
    return await eof(reader)


async def until(condition: Callable[[], bool]) -> None:
    while not condition():
        await asyncio.sleep(0.001)


async def closed(server: Server, client: HTTPClient, ended: int) -> None:
    """Wait until the server has seen *ended* connections end; the client holds none then."""
    await until(lambda: server.ended == ended)
    assert client.open_connections == 0


async def eof(reader: asyncio.StreamReader) -> bool:
    """Wait for the client to close the connection; then close it here too."""
    await reader.read()
    return False


# -- requests and bodies --------------------------------------------------------------------


def test_a_request_goes_out_as_given_under_the_base_path(run) -> None:
    async def test() -> None:
        async with Server(echo) as server:
            client = HTTPClient(server.url + "/api/v1/")
            got = await client.request("POST", "/chat/completions",
                                       {"authorization": "Bearer k",
                                        "content-type": "application/json"}, b'{"a": 1}')
            assert got.status_code == 200
            assert got.headers["content-length"] == str(len(b"answer to /api/v1/chat/completions"))
            assert await got.read() == b"answer to /api/v1/chat/completions"
            sent = server.requests[0]
            assert (sent.method, sent.path, sent.body) == ("POST", "/api/v1/chat/completions",
                                                           b'{"a": 1}')
            assert sent.headers["host"] == f"127.0.0.1:{server.port}"
            assert sent.headers["authorization"] == "Bearer k"
            assert sent.headers["content-type"] == "application/json"
            assert sent.headers["content-length"] == "8"
            assert sent.headers["user-agent"] == "toolcodec"
            assert "accept-encoding" not in sent.headers  # upstream answers identity

            await (await client.request("GET", "/models", {"user-agent": "me"})).read()
            sent = server.requests[1]
            assert (sent.method, sent.path) == ("GET", "/api/v1/models")
            assert "content-length" not in sent.headers and sent.headers["user-agent"] == "me"
            await client.aclose()
    run(test)


def test_a_header_with_a_line_break_is_refused(run) -> None:
    async def test() -> None:
        async with Server(echo) as server:
            client = HTTPClient(server.url)
            with pytest.raises(ValueError):
                await client.request("GET", "/", {"x-a": "1\r\nx-b: 2"})
            assert server.opened == 0 and client.open_connections == 0
    run(test)


def test_a_chunked_body_comes_part_by_part(run) -> None:
    gate = asyncio.Event()

    async def answer(request: Request, reader: asyncio.StreamReader,
                     writer: asyncio.StreamWriter) -> None:
        writer.write(CHUNKED_HEAD + b"5\r\nfirst\r\n")
        await gate.wait()
        writer.write(b"6\r\nsecond\r\n0\r\n\r\n")

    async def test() -> None:
        async with Server(answer) as server:
            client = HTTPClient(server.url)
            got = await client.request("GET", "/")
            assert await got.next_part() == b"first"  # before the rest was even sent
            gate.set()
            assert [part async for part in got.aiter_bytes()] == [b"second"]
            assert client.idle_connections == 1  # read to its end: back in the pool
            gate.clear()
            got = await client.request("GET", "/")
            gate.set()
            assert await got.read() == b"firstsecond"
            assert server.opened == 1
            await client.aclose()
    run(test)


def test_a_body_that_ends_with_the_connection_is_read_whole(run) -> None:
    async def answer(request: Request, reader: asyncio.StreamReader,
                     writer: asyncio.StreamWriter) -> bool:
        writer.write(b"HTTP/1.1 200 OK\r\ncontent-type: text/plain\r\n\r\npart one, ")
        await writer.drain()
        writer.write(b"part two")
        return False  # the close ends the body

    async def test() -> None:
        async with Server(answer) as server:
            client = HTTPClient(server.url)
            for _ in range(2):
                got = await client.request("GET", "/")
                assert await got.read() == b"part one, part two"
            assert server.opened == 2  # such a connection cannot be reused
            await until(lambda: client.open_connections == 0)
    run(test)


def test_a_large_body_arrives_whole_through_flow_control(run) -> None:
    body = bytes(range(256)) * (12 * 1024)  # 3 MiB, over the buffer's high-water mark

    async def answer(request: Request, reader: asyncio.StreamReader,
                     writer: asyncio.StreamWriter) -> None:
        writer.write(response(body))
        await writer.drain()

    async def test() -> None:
        async with Server(answer) as server:
            client = HTTPClient(server.url)
            got = await client.request("GET", "/")
            await until(lambda: got._conn.paused)  # the buffer filled: reading paused
            assert await got.read() == body
            assert await (await client.request("GET", "/")).read() == body
            assert server.opened == 1
            await client.aclose()
    run(test)


def test_interim_and_bodiless_answers(run) -> None:
    async def answer(request: Request, reader: asyncio.StreamReader,
                     writer: asyncio.StreamWriter) -> None:
        if request.path == "/continue":
            writer.write(b"HTTP/1.1 100 Continue\r\n\r\n" + response(b"after 100"))
        else:
            writer.write(b"HTTP/1.1 204 No Content\r\n\r\n")

    async def test() -> None:
        async with Server(answer) as server:
            client = HTTPClient(server.url)
            got = await client.request("POST", "/continue", {}, b"x")
            assert (got.status_code, await got.read()) == (200, b"after 100")
            got = await client.request("DELETE", "/empty")
            assert (got.status_code, await got.read()) == (204, b"")
            assert server.opened == 1
            await client.aclose()
    run(test)


# -- keep-alive and the pool ----------------------------------------------------------------


def test_connections_are_kept_alive_and_reused(run) -> None:
    async def answer(request: Request, reader: asyncio.StreamReader,
                     writer: asyncio.StreamWriter) -> None:
        await asyncio.sleep(0.01)  # a few requests overlap
        writer.write(response(request.path.encode()))

    async def one(client: HTTPClient, n: int) -> bytes:
        return await (await client.request("GET", f"/{n}")).read()

    async def test() -> None:
        async with Server(answer) as server:
            client = HTTPClient(server.url, connections=4)
            for n in range(5):
                assert await one(client, n) == f"/{n}".encode()
            assert server.opened == 1 and client.idle_connections == 1
            got = await asyncio.gather(*(one(client, n) for n in range(40)))
            assert got == [f"/{n}".encode() for n in range(40)]
            assert server.opened <= 4 and client.open_connections <= 4
            await client.aclose()
            await until(lambda: server.ended == server.opened)
    run(test)


def test_a_connection_idle_past_the_keepalive_expiry_is_not_reused(run) -> None:
    async def test() -> None:
        async with Server(echo) as server:
            client = HTTPClient(server.url, keepalive_expiry=0.05)
            loop = asyncio.get_running_loop()
            await (await client.request("GET", "/a")).read()
            await (await client.request("GET", "/b")).read()  # at once: reused
            idle = loop.time()
            await until(lambda: loop.time() - idle > 0.1)
            await (await client.request("GET", "/c")).read()
            assert server.on(0) == ["/a", "/b"] and server.on(1) == ["/c"]
            await until(lambda: server.ended == 1)  # the expired one was closed
            assert client.open_connections == 1
            await client.aclose()
    run(test)


def test_connection_close_from_the_server_is_honoured(run) -> None:
    async def answer(request: Request, reader: asyncio.StreamReader,
                     writer: asyncio.StreamWriter) -> None:
        writer.write(response(b"bye", headers={"connection": "close"}))  # and stays open

    async def test() -> None:
        async with Server(answer) as server:
            client = HTTPClient(server.url)
            assert await (await client.request("GET", "/")).read() == b"bye"
            await closed(server, client, 1)  # the client closed it
            assert await (await client.request("GET", "/")).read() == b"bye"
            assert server.opened == 2
    run(test)


def test_no_free_connection_within_the_pool_timeout_is_pool_timeout(run) -> None:
    async def test() -> None:
        async with Server(holding) as server:
            client = HTTPClient(server.url, connections=1, pool_timeout=0.05)
            held = await client.request("GET", "/hold")
            with pytest.raises(PoolTimeout):
                await client.request("GET", "/other")
            assert server.opened == 1
            await held.aclose()  # unfinished: its connection is closed, its slot freed
            await until(lambda: server.ended == 1)
            assert await (await client.request("GET", "/other")).read() == b"free"
            assert server.opened == 2
            await client.aclose()
    run(test)


def test_a_waiting_request_gets_the_connection_a_finished_one_frees(run) -> None:
    gate = asyncio.Event()

    async def answer(request: Request, reader: asyncio.StreamReader,
                     writer: asyncio.StreamWriter) -> None:
        if request.path == "/slow":
            writer.write(b"HTTP/1.1 200 OK\r\ncontent-length: 6\r\n\r\nabc")
            await gate.wait()
            writer.write(b"def")
        else:
            writer.write(response(b"next"))

    async def test() -> None:
        async with Server(answer) as server:
            client = HTTPClient(server.url, connections=1, pool_timeout=30)
            slow = await client.request("GET", "/slow")
            waiting = asyncio.create_task(client.request("GET", "/next"))
            cancelled = asyncio.create_task(client.request("GET", "/cancelled"))
            await asyncio.sleep(0)  # both wait for the one connection
            cancelled.cancel()
            gate.set()
            assert await slow.read() == b"abcdef"
            assert await (await waiting).read() == b"next"
            with pytest.raises(asyncio.CancelledError):
                await cancelled
            assert server.opened == 1 and server.on(0) == ["/slow", "/next"]
            assert client.open_connections == 1 and client.idle_connections == 1
            await client.aclose()
    run(test)


# -- failures -------------------------------------------------------------------------------


def test_a_refused_connection_is_connect_error(run) -> None:
    async def test() -> None:
        with socket.socket() as sock:  # a port nobody listens on
            sock.bind(("127.0.0.1", 0))
            port = sock.getsockname()[1]
        client = HTTPClient(f"http://127.0.0.1:{port}")
        with pytest.raises(ConnectError) as info:
            await client.request("GET", "/")
        assert "refused" in str(info.value).lower() or "failed" in str(info.value).lower()
        assert client.open_connections == 0
    run(test)


def test_a_connection_not_accepted_in_time_is_connect_timeout(run) -> None:
    async def test() -> None:
        with socket.socket() as listener, socket.socket() as first:
            listener.bind(("127.0.0.1", 0))
            listener.listen(0)
            first.connect(listener.getsockname())  # fills the backlog: the next SYN waits
            port = listener.getsockname()[1]
            client = HTTPClient(f"http://127.0.0.1:{port}", connect_timeout=0.05)
            with pytest.raises(ConnectTimeout):
                await client.request("GET", "/")
            assert client.open_connections == 0
    run(test)


def test_nothing_arriving_within_the_read_timeout_is_read_timeout(run) -> None:
    async def test() -> None:
        async with Server(part_or_nothing) as server:
            client = HTTPClient(server.url, read_timeout=0.05)
            with pytest.raises(ReadTimeout):
                await client.request("GET", "/never")
            await until(lambda: server.ended == 1)  # closed, not left to the pool
            got = await client.request("GET", "/part")
            assert await got.next_part() == b"abc"
            with pytest.raises(ReadTimeout):
                await got.next_part()
            await closed(server, client, 2)
    run(test)


def test_the_read_timeout_is_between_bytes_not_for_the_whole_body(run) -> None:
    async def answer(request: Request, reader: asyncio.StreamReader,
                     writer: asyncio.StreamWriter) -> None:
        writer.write(CHUNKED_HEAD)
        for _ in range(30):  # 1.5 s in all, a piece every 50 ms
            await asyncio.sleep(0.05)
            writer.write(chunked(b".")[:-5])
        writer.write(b"0\r\n\r\n")

    async def test() -> None:
        async with Server(answer) as server:
            client = HTTPClient(server.url, read_timeout=1.0)
            assert await (await client.request("GET", "/")).read() == b"." * 30
            await client.aclose()
    run(test)


def test_a_poke_ends_a_wait_for_the_body_but_never_hides_what_arrived(run) -> None:
    released = asyncio.Event()

    async def answer(request: Request, reader: asyncio.StreamReader,
                     writer: asyncio.StreamWriter) -> None:
        writer.write(CHUNKED_HEAD + chunked(b"a")[:-5])
        await released.wait()  # nothing more until the client has been poked twice
        writer.write(chunked(b"b")[:-5])
        writer.write(b"0\r\n\r\n")

    async def test() -> None:
        async with Server(answer) as server:
            client = HTTPClient(server.url)
            response = await client.request("GET", "/")
            assert await response.next_part() == b"a"
            assert not response.arrived()
            loop = asyncio.get_running_loop()
            loop.call_later(0.05, response.poke)  # while next_part waits
            assert await response.next_part() is None
            response.poke()  # before it waits: the next wait ends at once
            assert await response.next_part() is None
            released.set()
            while not response.arrived():  # the rest, then the end, with no poke
                await asyncio.sleep(0.01)
            response.poke()  # what arrived comes first; the poke waits for a wait
            parts = [await response.next_part(), await response.next_part()]
            assert parts in ([b"b", b""], [b"b", None])
            if parts[1] is None:
                assert await response.next_part() == b""
            assert response.arrived()  # the end is there: next_part answers at once
            await client.aclose()
    run(test)


def test_a_server_that_breaks_off_mid_answer(run) -> None:
    async def answer(request: Request, reader: asyncio.StreamReader,
                     writer: asyncio.StreamWriter) -> bool:
        if request.path == "/length":
            writer.write(b"HTTP/1.1 200 OK\r\ncontent-length: 10\r\n\r\nabc")
        elif request.path == "/chunked":
            writer.write(CHUNKED_HEAD + b"3\r\nabc\r\n")
        else:
            writer.write(b"HTTP/1.1 200 OK\r\ncontent-le")
        return False

    async def test() -> None:
        async with Server(answer) as server:
            client = HTTPClient(server.url)
            for path in ("/length", "/chunked"):
                got = await client.request("GET", path)
                with pytest.raises(RemoteProtocolError):
                    await got.read()
            with pytest.raises(RemoteProtocolError):
                await client.request("GET", "/head")
            assert server.opened == 3 and client.open_connections == 0
    run(test)


def test_garbage_is_a_protocol_error(run) -> None:
    async def answer(request: Request, reader: asyncio.StreamReader,
                     writer: asyncio.StreamWriter) -> bool:
        writer.write(b"SSH-2.0-OpenSSH\r\n\r\n")
        return await eof(reader)

    async def test() -> None:
        async with Server(answer) as server:
            client = HTTPClient(server.url)
            with pytest.raises(RemoteProtocolError):
                await client.request("GET", "/")
            await closed(server, client, 1)
    run(test)


# -- stale connections ----------------------------------------------------------------------


def test_an_idle_connection_the_server_closed_is_not_used(run) -> None:
    async def test() -> None:
        async with Server(echo) as server:
            client = HTTPClient(server.url)
            await (await client.request("GET", "/a")).read()
            server.writers[0].close()  # the server's keep-alive timeout
            await until(lambda: client.idle_connections == 0)
            assert client.open_connections == 0
            assert await (await client.request("GET", "/b")).read() == b"answer to /b"
            assert server.on(0) == ["/a"] and server.on(1) == ["/b"]
            await client.aclose()
    run(test)


def test_a_reused_connection_closed_before_any_answer_is_retried_once(run) -> None:
    async def answer(request: Request, reader: asyncio.StreamReader,
                     writer: asyncio.StreamWriter) -> bool | None:
        if request.conn == 0 and request.path == "/b":
            return False  # closes as the request arrives, answering nothing
        writer.write(response(request.path.encode()))
        return None

    async def test() -> None:
        async with Server(answer) as server:
            client = HTTPClient(server.url)
            await (await client.request("GET", "/a")).read()
            got = await client.request("POST", "/b", {}, b"body")
            assert await got.read() == b"/b"
            assert server.on(0) == ["/a", "/b"] and server.on(1) == ["/b"]
            assert client.open_connections == 1
            await client.aclose()
    run(test)


def test_no_retry_once_a_byte_of_the_answer_came(run) -> None:
    async def answer(request: Request, reader: asyncio.StreamReader,
                     writer: asyncio.StreamWriter) -> bool | None:
        if request.path == "/a":
            writer.write(response(b"a"))
            return None
        writer.write(b"HTTP/1.1 200 OK\r\ncontent-le" if request.path == "/head"
                     else b"HTTP/1.1 200 OK\r\ncontent-length: 10\r\n\r\nabc")
        return False

    async def test() -> None:
        async with Server(answer) as server:
            client = HTTPClient(server.url)
            await (await client.request("GET", "/a")).read()
            with pytest.raises(RemoteProtocolError):
                await client.request("POST", "/head", {}, b"once")
            await (await client.request("GET", "/a")).read()
            got = await client.request("POST", "/body", {}, b"once")
            with pytest.raises(RemoteProtocolError):
                await got.read()
            assert [r.path for r in server.requests] == ["/a", "/head", "/a", "/body"]
    run(test)


def test_a_new_connection_closed_before_any_answer_is_not_retried(run) -> None:
    async def answer(request: Request, reader: asyncio.StreamReader,
                     writer: asyncio.StreamWriter) -> bool:
        return False

    async def test() -> None:
        async with Server(answer) as server:
            client = HTTPClient(server.url)
            with pytest.raises((RemoteProtocolError, ReadError)):
                await client.request("GET", "/")
            assert len(server.requests) == 1 and client.open_connections == 0
    run(test)


def test_bytes_nobody_asked_for_drop_an_idle_connection(run) -> None:
    async def test() -> None:
        async with Server(echo) as server:
            client = HTTPClient(server.url)
            await (await client.request("GET", "/a")).read()
            server.writers[0].write(b"HTTP/1.1 200 OK\r\n")
            await until(lambda: client.open_connections == 0)
            assert await (await client.request("GET", "/b")).read() == b"answer to /b"
            assert server.opened == 2
            await client.aclose()
    run(test)


# -- letting go of a response ---------------------------------------------------------------


def test_a_partly_read_response_closes_its_connection(run) -> None:
    async def answer(request: Request, reader: asyncio.StreamReader,
                     writer: asyncio.StreamWriter) -> bool | None:
        if request.path == "/long":
            writer.write(CHUNKED_HEAD + b"3\r\nabc\r\n")
            return await eof(reader)
        writer.write(response(b"short"))
        return None

    async def test() -> None:
        async with Server(answer) as server:
            client = HTTPClient(server.url)
            got = await client.request("GET", "/long")
            assert await got.next_part() == b"abc"
            await got.aclose()
            await closed(server, client, 1)
            got = await client.request("GET", "/short")
            await got.aclose()  # unread, but all of it had arrived: reusable
            assert await (await client.request("GET", "/short")).read() == b"short"
            assert server.opened == 2 and server.on(1) == ["/short", "/short"]
            await client.aclose()
    run(test)


def test_an_abandoned_body_that_ends_soon_keeps_its_connection(run) -> None:
    gate = asyncio.Event()

    async def answer(request: Request, reader: asyncio.StreamReader,
                     writer: asyncio.StreamWriter) -> bool | None:
        writer.write(CHUNKED_HEAD + b"3\r\nabc\r\n")
        if request.path == "/never":
            return await eof(reader)
        await gate.wait()
        writer.write(b"3\r\ndef\r\n0\r\n\r\n")
        return None

    async def test() -> None:
        async with Server(answer) as server:
            client = HTTPClient(server.url)
            got = await client.request("GET", "/ends")
            assert await got.next_part() == b"abc"
            await got.aclose(linger=30)
            assert client.idle_connections == 0  # still its own until the end arrives
            gate.set()
            await until(lambda: client.idle_connections == 1)
            got = await client.request("GET", "/never")
            await got.aclose(linger=0.05)
            await closed(server, client, 1)
            assert server.opened == 1
    run(test)


def test_a_cancelled_request_closes_its_connection(run) -> None:
    async def test() -> None:
        async with Server(part_or_nothing) as server:
            client = HTTPClient(server.url)
            task = asyncio.create_task(client.request("GET", "/never"))
            await until(lambda: len(server.requests) == 1)
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task
            await closed(server, client, 1)

            got = await client.request("GET", "/part")
            with pytest.raises(TimeoutError):  # the proxy's deadline, while reading the body
                async with asyncio.timeout(0.05):
                    await got.read()
            await closed(server, client, 2)
    run(test)


def test_aclose_closes_every_connection(run) -> None:
    async def test() -> None:
        async with Server(holding) as server:
            client = HTTPClient(server.url)
            held = await client.request("GET", "/hold")  # one busy
            await (await client.request("GET", "/")).read()  # one idle
            assert (client.open_connections, client.idle_connections) == (2, 1)
            await client.aclose()
            await until(lambda: server.ended == 2)
            with pytest.raises(HTTPError):
                await held.read()
            with pytest.raises(ConnectError):
                await client.request("GET", "/")
    run(test)


# -- encodings and sizes --------------------------------------------------------------------


def test_compressed_bodies_are_decoded(run) -> None:
    text = b"the model's answer " * 2000
    raw = zlib.compressobj(wbits=-zlib.MAX_WBITS)
    bodies = {"/gzip": ("gzip", gzip.compress(text)), "/deflate": ("deflate", zlib.compress(text)),
              "/raw": ("deflate", raw.compress(text) + raw.flush()),
              "/bad": ("gzip", b"not gzip at all")}

    async def answer(request: Request, reader: asyncio.StreamReader,
                     writer: asyncio.StreamWriter) -> None:
        encoding, body = bodies[request.path]
        third = len(body) // 3
        writer.write(CHUNKED_HEAD.replace(b"\r\n\r\n", f"\r\ncontent-encoding: {encoding}"
                                          "\r\n\r\n".encode())
                     + chunked(body[:third], body[third:2 * third], body[2 * third:]))

    async def test() -> None:
        async with Server(answer) as server:
            client = HTTPClient(server.url)
            for path in ("/gzip", "/deflate", "/raw"):
                assert await (await client.request("GET", path)).read() == text, path
            with pytest.raises(DecodingError):
                await (await client.request("GET", "/bad")).read()
            assert client.open_connections == 0  # a body that fails closes its connection
            assert await (await client.request("GET", "/gzip")).read() == text
            assert server.opened == 2
            await client.aclose()
    run(test)


def test_a_compressed_body_is_inflated_a_bounded_piece_at_a_time(run) -> None:
    bomb = gzip.compress(b"\0" * (64 << 20))  # 64 MiB from about 64 KiB

    async def answer(request: Request, reader: asyncio.StreamReader,
                     writer: asyncio.StreamWriter) -> None:
        writer.write(response(bomb, headers={"content-encoding": "gzip"}))

    async def test() -> None:
        async with Server(answer) as server:
            client = HTTPClient(server.url)
            got = await client.request("GET", "/")
            sizes = [len(await got.next_part()) for _ in range(4)]
            assert 0 < max(sizes) <= 256 * 1024
            await got.aclose()
            with pytest.raises(BodyTooLarge):
                await (await client.request("GET", "/")).read(1 << 20)
            assert client.open_connections == 0
    run(test)


def test_bodies_over_the_limit_are_refused_and_not_reused(run) -> None:
    body = b"x" * (2 << 20)  # more than the client buffers before reading pauses

    async def answer(request: Request, reader: asyncio.StreamReader,
                     writer: asyncio.StreamWriter) -> None:
        writer.write(response(body) if request.path == "/length"
                     else CHUNKED_HEAD + chunked(*(body[i:i + 4096]
                                                   for i in range(0, len(body), 4096))))
        await writer.drain()

    async def test() -> None:
        async with Server(answer) as server:
            client = HTTPClient(server.url)
            for path in ("/length", "/chunked"):
                with pytest.raises(BodyTooLarge):
                    await (await client.request("GET", path)).read(60_000)
                assert client.open_connections == 0  # the rest is not read to reuse it
            assert await (await client.request("GET", "/chunked")).read(len(body)) == body
            assert server.opened == 3
            await client.aclose()
    run(test)


def test_read_body_refuses_an_answer_over_the_limit_by_its_length_or_as_it_comes(run) -> None:
    async def answer(request: Request, reader: asyncio.StreamReader,
                     writer: asyncio.StreamWriter) -> None:
        body = b"x" * 100
        writer.write(response(body) if request.path == "/length"
                     else CHUNKED_HEAD + chunked(body[:50], body[50:]))

    async def test() -> None:
        async with Server(answer) as server:
            client = HTTPClient(server.url)
            for path in ("/length", "/chunked"):
                with pytest.raises(UpstreamError) as info:
                    await read_body(await client.request("GET", path), 60)
                assert info.value.code == "upstream_too_large"
            assert await read_body(await client.request("GET", "/chunked"), 100) == b"x" * 100
            await client.aclose()
    run(test)


# -- https ----------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def certificate(tmp_path_factory) -> Path:
    """A self-signed certificate for 127.0.0.1 (its key beside it)."""
    if shutil.which("openssl") is None:
        pytest.skip("openssl is not installed")
    where = tmp_path_factory.mktemp("tls")
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
                    "-keyout", str(where / "key.pem"), "-out", str(where / "cert.pem"),
                    "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1"],
                   check=True, capture_output=True)
    return where


def test_https_with_a_trusted_certificate_and_not_without(run, certificate: Path) -> None:
    server_tls = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    server_tls.load_cert_chain(certificate / "cert.pem", certificate / "key.pem")

    async def test() -> None:
        async with Server(echo, server_tls) as server:
            trusting = ssl.create_default_context(cafile=str(certificate / "cert.pem"))
            client = HTTPClient(server.url + "/v1", ssl_context=trusting)
            for _ in range(2):
                got = await client.request("GET", "/models")
                assert await got.read() == b"answer to /v1/models"
            assert server.opened == 1
            await client.aclose()
            with pytest.raises(ConnectError) as info:  # the system's roots do not know it
                await HTTPClient(server.url).request("GET", "/")
            assert "certificate" in str(info.value).lower()
    run(test)


# -- the proxy's answers --------------------------------------------------------------------


@pytest.mark.parametrize(("error", "status", "code", "message"), [
    (PoolTimeout("x"), 503, "upstream_busy",
     "every connection to the model server is in use; try again"),
    (ReadTimeout("x"), 504, "upstream_timeout",
     "the model server did not answer in time (ReadTimeout)"),
    (ConnectTimeout("x"), 504, "upstream_timeout",
     "the model server did not answer in time (ConnectTimeout)"),
    (ConnectError("refused"), 502, "upstream_unavailable",
     "cannot connect to the model server: refused"),
    (RemoteProtocolError("x"), 502, "upstream_error",
     "the model server failed: RemoteProtocolError"),
    (ReadError("x"), 502, "upstream_error", "the model server failed: ReadError"),
])
def test_transport_failures_map_to_the_proxys_answers(error, status, code, message) -> None:
    answer = failure(error)
    assert (answer.status, answer.code, str(answer)) == (status, code, message)
    assert answer.headers == ({"retry-after": "1"} if status == 503 else {})
