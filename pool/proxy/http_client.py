"""Keep-alive HTTP/1.1 connections to one origin: the proxy's client for its model server.

Why not httpx: per request it builds a request model, parses URLs, enters anyio cancel scopes,
validates through h11 and polls its pool; under load that was half of the proxy's event-loop
CPU. This client does what the proxy needs and no more: one origin (http, or https with the
default SSL context), requests with a body in bytes, responses read whole or part by part as
they arrive, and errors the proxy maps to its answers (``upstream.failure``).

- Pool: at most ``connections`` connections; a request waits ``pool_timeout`` for one to be
  free (``PoolTimeout``). Idle connections are reused, most recently used first; one the server
  closed while idle is dropped as soon as the loop sees it close, one idle for longer than
  ``keepalive_expiry`` is closed (a peer or middlebox may have dropped it silently).
- A reused connection that fails before any byte of the response arrived (the server closed it
  as the request went out) is retried once on a new connection; never once a byte arrived.
- Timeouts: ``connect_timeout`` (``ConnectTimeout``), ``read_timeout`` between two bytes while
  a response is awaited (``ReadTimeout``). Overall deadlines are the caller's (cancel the task).
- A response goes back to the pool once all of it has arrived and the server keeps the
  connection alive; one abandoned before its end, failed, or whose task was cancelled, closes
  its connection (``aclose(linger=...)`` may wait a little for the end instead).
- No ``accept-encoding`` is sent; a gzip or deflate body is decoded all the same.
"""

from __future__ import annotations

import asyncio
import ssl
import zlib
from collections import deque
from collections.abc import AsyncIterator
from urllib.parse import urlsplit

import httptools

__all__ = ["BodyTooLarge", "ConnectError", "ConnectTimeout", "DecodingError", "HTTPClient",
           "HTTPError", "PoolTimeout", "ReadError", "ReadTimeout", "RemoteProtocolError",
           "Response", "TimeoutException"]

_HIGH_WATER = 512 * 1024  # body bytes buffered before reading the socket pauses
_LOW_WATER = 128 * 1024  # and resumes
_INFLATE_PIECE = 256 * 1024  # largest piece a compressed body is inflated into at once
_LINGER_BYTES = 1024 * 1024  # most bytes discarded while waiting for an abandoned body's end
_OWN_HEADERS = frozenset({"host", "content-length", "transfer-encoding", "connection"})
_IDLE, _BUSY, _GONE = 0, 1, 2


class HTTPError(Exception):
    """The upstream could not be used: a transport or protocol failure."""


class TimeoutException(HTTPError):
    pass


class PoolTimeout(TimeoutException):
    """No connection became free within the pool timeout."""


class ConnectTimeout(TimeoutException):
    pass


class ReadTimeout(TimeoutException):
    """Nothing arrived for ``read_timeout`` seconds while a response was awaited."""


class ConnectError(HTTPError):
    """The connection could not be made (refused, unreachable, TLS failed)."""


class ReadError(HTTPError):
    """The connection broke while a response was awaited or read."""


class RemoteProtocolError(HTTPError):
    """The server broke HTTP: a response that does not parse, or one cut before its end."""


class DecodingError(HTTPError):
    """A gzip or deflate body that does not inflate."""


class BodyTooLarge(Exception):
    """A body over the limit given to ``Response.read``; its connection is closed."""

    def __init__(self, limit: int) -> None:
        super().__init__(f"the body is over the limit of {limit} bytes")
        self.limit = limit


class _Connection(asyncio.Protocol):
    """One connection and the exchange on it: the parser's callbacks fill the response's
    state, the reading task waits on ``waiter``."""

    def __init__(self, client: HTTPClient, loop: asyncio.AbstractEventLoop) -> None:
        self.client, self.loop = client, loop
        self.transport: asyncio.Transport | None = None
        self.parser = httptools.HttpResponseParser(self)
        self.state = _BUSY  # idle in the pool, busy with an exchange, or gone (closed, freed)
        self.closed = False  # closed by either side: never reused
        self.reused = False  # has answered before: a failure with no answer may be a stale close
        self.idle_since = 0.0
        self.timer: asyncio.TimerHandle | None = None
        self.last_data = self.wait_since = 0.0
        self.waiter: asyncio.Future[None] | None = None
        self.begin()

    def begin(self) -> None:
        """Fresh state for the next exchange."""
        self.expecting = True  # a response is due and has not begun
        self.interim = False  # a 1xx response is being skipped
        self.got_bytes = False
        self.status = 0  # set when the final response's head has arrived
        self.raw_headers: list[tuple[bytes, bytes]] = []
        self.headers: dict[str, str] = {}
        self.body: deque[bytes] = deque()
        self.buffered = 0
        self.paused = False
        self.complete = False
        self.keep_alive = False
        self.until_close = False  # the body ends when the connection does
        self.error: HTTPError | None = None
        self.lingering: asyncio.TimerHandle | None = None
        self.discarded = -1  # >= 0 while an abandoned body is read to its end and dropped

    # -- asyncio.Protocol -------------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]

    def data_received(self, data: bytes) -> None:
        self.last_data = self.loop.time()
        if self.state != _BUSY or self.complete:  # bytes nobody asked for: not reusable
            self.keep_alive = False
            self.close()
            return
        self.got_bytes = True
        try:
            self.parser.feed_data(data)
        except (httptools.HttpParserError, httptools.HttpParserUpgrade) as exc:
            cause = exc.__context__ if isinstance(exc.__context__, HTTPError) else None
            self.fail(cause or RemoteProtocolError(f"invalid response: {exc!r}"))

    def eof_received(self) -> bool:
        return False  # close our side too: connection_lost follows

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        if self.timer is not None:
            self.timer.cancel()
            self.timer = None
        if self.state == _IDLE:
            self.client._lost_idle(self)
            return
        if self.state == _BUSY and self.discarded >= 0:  # an abandoned body that did not end
            self.client._discard(self)
            return
        if not self.complete and self.error is None:
            if self.until_close and self.status and exc is None:
                self.complete = True  # the close ends the body: it is all there
            elif exc is not None:
                self.error = ReadError(str(exc) or type(exc).__name__)
            elif self.got_bytes:
                self.error = RemoteProtocolError("peer closed connection without sending "
                                                 "complete message body")
            else:
                self.error = RemoteProtocolError("Server disconnected without sending a "
                                                 "response.")
        self.wake()

    def pause_writing(self) -> None:  # requests are written whole; nothing to pause
        pass

    def resume_writing(self) -> None:
        pass

    # -- httptools callbacks ----------------------------------------------------------------

    def on_message_begin(self) -> None:
        if not self.expecting:
            raise RemoteProtocolError("the server sent a response nobody asked for")
        self.expecting = False

    def on_header(self, name: bytes, value: bytes) -> None:
        self.raw_headers.append((name, value))

    def on_headers_complete(self) -> None:
        status = self.parser.get_status_code()
        if 100 <= status < 200:  # an interim response (100 Continue): the real one follows
            self.interim = True
            self.raw_headers = []
            return
        headers = self.headers
        for raw_name, raw_value in self.raw_headers:
            name, value = raw_name.decode("latin-1").lower(), raw_value.decode("latin-1")
            headers[name] = f"{headers[name]}, {value}" if name in headers else value
        self.until_close = ("content-length" not in headers and status not in (204, 304)
                            and "chunked" not in headers.get("transfer-encoding", "").lower())
        self.status = status
        self.wake()

    def on_body(self, body: bytes) -> None:
        if self.discarded >= 0:
            self.discarded += len(body)
            if self.discarded > _LINGER_BYTES:
                self.client._discard(self)
            return
        self.body.append(body)
        self.buffered += len(body)
        if self.buffered > _HIGH_WATER and not self.paused and not self.closed:
            self.paused = True
            self.transport.pause_reading()  # type: ignore[union-attr]
        self.wake()

    def on_message_complete(self) -> None:
        if self.interim:
            self.interim, self.expecting = False, True
            return
        self.complete = True
        self.keep_alive = self.parser.should_keep_alive() and not self.until_close
        if self.discarded >= 0:
            self.client._release(self)
            return
        self.wake()

    # -- the reading side -------------------------------------------------------------------

    def wake(self) -> None:
        waiter = self.waiter
        if waiter is not None:
            self.waiter = None
            if not waiter.done():
                waiter.set_result(None)

    def wait(self) -> asyncio.Future[None]:
        """A future set when something arrives (or fails): await it, then look again."""
        waiter = self.waiter = self.loop.create_future()
        self.wait_since = now = self.loop.time()
        if self.timer is None:  # one lazy timer per connection, moved on only when it fires
            self.timer = self.loop.call_at(now + self.client.read_timeout, self._timed)
        return waiter

    def _timed(self) -> None:
        self.timer = None
        waiter = self.waiter
        if waiter is None or waiter.done():
            return
        due = max(self.last_data, self.wait_since) + self.client.read_timeout
        if self.loop.time() < due:
            self.timer = self.loop.call_at(due, self._timed)
            return
        self.fail(ReadTimeout(f"nothing arrived for {self.client.read_timeout:g} s"))

    def take(self) -> bytes:
        part = self.body.popleft()
        self.buffered -= len(part)
        if self.paused and self.buffered <= _LOW_WATER and not self.closed:
            self.paused = False
            self.transport.resume_reading()  # type: ignore[union-attr]
        return part

    def fail(self, error: HTTPError) -> None:
        if self.error is None and not self.complete:
            self.error = error
        self.keep_alive = False
        self.close()
        self.wake()

    def close(self) -> None:
        if not self.closed:
            self.closed = True
            if self.transport is not None and not self.loop.is_closed():
                self.transport.abort()

    def linger(self, seconds: float) -> None:
        """Read the rest of an abandoned body, dropping it: the connection goes back to the
        pool if it ends within *seconds*, else it is closed."""
        self.body.clear()
        self.buffered = 0
        self.discarded = 0
        if self.paused:
            self.paused = False
            self.transport.resume_reading()  # type: ignore[union-attr]
        self.lingering = self.loop.call_later(seconds, self.client._discard, self)

    def stop_lingering(self) -> None:
        """The wait for an abandoned body's end is over (it ended, or the connection goes)."""
        if self.lingering is not None:
            self.lingering.cancel()
            self.lingering = None


class Response:
    """The status and headers of an answer; its body comes from ``read``, ``next_part`` or
    ``aiter_bytes``. Close it with ``aclose`` (no-op once the body was read to its end)."""

    __slots__ = ("status_code", "headers", "_client", "_conn", "_inflate", "_tail", "_fallback",
                 "_poked")

    def __init__(self, client: HTTPClient, conn: _Connection) -> None:
        self.status_code: int = conn.status
        self.headers: dict[str, str] = conn.headers  # lower-case names; repeats joined by ", "
        self._client: HTTPClient | None = client
        self._conn: _Connection | None = conn
        self._tail = b""  # compressed bytes not yet inflated
        encoding = self.headers.get("content-encoding", "").strip().lower()
        self._inflate = (zlib.decompressobj(zlib.MAX_WBITS | 16) if encoding in ("gzip", "x-gzip")
                         else zlib.decompressobj() if encoding == "deflate" else None)
        # "deflate" is meant to be zlib-wrapped, but some servers send it raw: tried once
        self._fallback = encoding == "deflate"
        self._poked = False

    async def next_part(self) -> bytes | None:
        """The next part of the body as it arrived (decoded), ``b""`` at its end; ``None``
        only after :meth:`poke`, when nothing had arrived."""
        conn = self._conn
        if conn is None:
            return b""
        try:
            while True:
                if self._inflate is not None:
                    part = self._inflated(conn)
                    if part:
                        return part
                elif conn.body:
                    return conn.take()
                if conn.body:
                    continue
                if conn.error is not None:
                    raise conn.error
                if conn.complete:
                    if self._inflate is not None and not self._tail:
                        part = self._inflate.flush()
                        self._inflate = None
                        if part:
                            return part
                    self._done()
                    return b""
                if self._poked:
                    self._poked = False
                    return None
                await conn.wait()
        except BaseException:
            self._abort()
            raise

    def poke(self) -> None:
        """Have :meth:`next_part` return ``None`` if nothing has arrived: now, if it is
        waiting, else the next time it would wait. For a reader with something else to do
        while the body is slow (a heartbeat to send), without a timeout around each wait."""
        self._poked = True
        conn = self._conn
        if conn is not None:
            conn.wake()

    def arrived(self) -> bool:
        """Whether :meth:`next_part` would answer without waiting (a part, the end or an
        error is there)."""
        conn = self._conn
        return conn is None or bool(conn.body or self._tail) or conn.complete \
            or conn.error is not None

    async def aiter_bytes(self) -> AsyncIterator[bytes]:
        """The body's parts as they arrive (decoded)."""
        while part := await self.next_part():
            yield part

    async def read(self, limit: int | None = None) -> bytes:
        """The whole body (decoded); over *limit* bytes, ``BodyTooLarge``."""
        parts, size = [], 0
        while part := await self.next_part():
            size += len(part)
            if limit is not None and size > limit:
                self._abort()
                raise BodyTooLarge(limit)
            parts.append(part)
        return b"".join(parts)

    async def aclose(self, linger: float = 0.0) -> None:
        """Let go of the connection: back to the pool if the whole response has arrived,
        else closed; with *linger* seconds, an unfinished body is first read (and dropped)
        that long in the background, for its connection to be reused."""
        conn, self._conn = self._conn, None
        if conn is None:
            return
        client = self._client
        assert client is not None
        if conn.complete and conn.error is None:
            client._release(conn)
        elif linger > 0 and conn.error is None and not conn.closed and not conn.until_close:
            conn.linger(linger)
        else:
            client._discard(conn)

    def _inflated(self, conn: _Connection) -> bytes:
        """Inflate what arrived, at most ``_INFLATE_PIECE`` bytes at a time (a small
        compressed body may stand for a huge one)."""
        assert self._inflate is not None
        if not self._tail:
            if not conn.body:
                return b""
            self._tail = conn.take()
        try:
            part = self._inflate.decompress(self._tail, _INFLATE_PIECE)
        except zlib.error as exc:
            if not self._fallback:
                raise DecodingError(str(exc)) from None
            self._fallback = False
            self._inflate = zlib.decompressobj(-zlib.MAX_WBITS)
            return self._inflated(conn)
        self._fallback = False
        self._tail = self._inflate.unconsumed_tail
        return part

    def _done(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None and self._client is not None:
            self._client._release(conn)

    def _abort(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None and self._client is not None:
            self._client._discard(conn)

    def __del__(self) -> None:  # dropped without aclose (a relay that never started): free it
        conn = self._conn
        if conn is not None and self._client is not None and not conn.loop.is_closed():
            conn.loop.call_soon_threadsafe(self._client._discard, conn)


class HTTPClient:
    """Requests to one origin (*base_url*, whose path prefixes every request's path) over a
    pool of at most *connections* keep-alive connections. An https origin is checked with
    *ssl_context*, by default the system's trusted certificates."""

    def __init__(self, base_url: str, *, connections: int = 512, connect_timeout: float = 5.0,
                 read_timeout: float = 300.0, pool_timeout: float = 5.0,
                 keepalive_expiry: float = 5.0, user_agent: str = "toolcodec",
                 ssl_context: ssl.SSLContext | None = None) -> None:
        url = urlsplit(base_url)
        if url.scheme not in ("http", "https") or not url.hostname:
            raise ValueError(f"not an http(s) URL: {base_url!r}")
        self.host = url.hostname
        self.port = url.port or (443 if url.scheme == "https" else 80)
        self.prefix = url.path.rstrip("/")
        self.ssl = (ssl_context or ssl.create_default_context()) if url.scheme == "https" \
            else None
        host = f"[{self.host}]" if ":" in self.host else self.host
        if url.port is not None:
            host = f"{host}:{url.port}"
        self._host_line = f"host: {host}\r\n"
        self._user_agent = user_agent
        self.max_connections = max(1, connections)
        self.connect_timeout, self.read_timeout = connect_timeout, read_timeout
        self.pool_timeout, self.keepalive_expiry = pool_timeout, keepalive_expiry
        self._idle: list[_Connection] = []  # most recently used last
        self._count = 0  # connections open or being opened (each holds one of the slots)
        self._waiters: deque[asyncio.Future[_Connection | None]] = deque()
        self._conns: set[_Connection] = set()
        self._closed = False

    # -- requests ---------------------------------------------------------------------------

    async def request(self, method: str, path: str, headers: dict[str, str] | None = None,
                      body: bytes = b"") -> Response:
        """Send a request; the response once its head has arrived. *headers* have lower-case
        names; ``host`` and ``content-length`` are set here."""
        data = self._head(method, path, headers or {}, body) + body
        loop = asyncio.get_running_loop()
        conn = await self._acquire(loop)
        if conn.reused:
            try:
                return await self._exchange(conn, data)
            except (RemoteProtocolError, ReadError):
                if conn.got_bytes:
                    raise
                # The server closed the idle connection as the request went out: nothing was
                # answered, so the request goes once more, on a new connection (same slot).
            conn = await self._open(loop)
        return await self._exchange(conn, data)

    def _head(self, method: str, path: str, headers: dict[str, str], body: bytes) -> bytes:
        if method == "HEAD" or " " in path or "\n" in path or "\r" in path:
            raise ValueError(f"not a request this client sends: {method} {path!r}")
        lines = [method, " ", self.prefix, path, " HTTP/1.1\r\n", self._host_line]
        for name, value in headers.items():
            if name in _OWN_HEADERS:
                continue
            if "\n" in value or "\r" in value or "\n" in name or "\r" in name:
                raise ValueError(f"header {name!r} holds a line break")
            lines += (name, ": ", value, "\r\n")
        if "user-agent" not in headers:
            lines += ("user-agent: ", self._user_agent, "\r\n")
        if body or method != "GET":
            lines += ("content-length: ", str(len(body)), "\r\n")
        lines.append("\r\n")
        return "".join(lines).encode("latin-1")

    async def _exchange(self, conn: _Connection, data: bytes) -> Response:
        conn.begin()
        try:
            if conn.closed or conn.transport.is_closing():  # type: ignore[union-attr]
                raise RemoteProtocolError("Server disconnected without sending a response.")
            conn.transport.write(data)  # type: ignore[union-attr]
            while not conn.status:
                if conn.error is not None:
                    raise conn.error
                await conn.wait()
        except (RemoteProtocolError, ReadError):
            if conn.reused and not conn.got_bytes:  # the caller opens another in this slot
                conn.state = _GONE
                conn.close()
                self._conns.discard(conn)
            else:
                self._discard(conn)
            raise
        except BaseException:
            self._discard(conn)
            raise
        return Response(self, conn)

    # -- the pool ---------------------------------------------------------------------------

    async def _acquire(self, loop: asyncio.AbstractEventLoop) -> _Connection:
        if self._closed:
            raise ConnectError("the client is closed")
        idle = self._idle
        while idle:
            conn = idle.pop()
            if conn.closed:  # freed by its connection_lost
                continue
            conn.state = _BUSY
            if loop.time() - conn.idle_since <= self.keepalive_expiry:
                return conn
            self._discard(conn)
        if self._count < self.max_connections:
            self._count += 1
            return await self._open(loop)
        waiter: asyncio.Future[_Connection | None] = loop.create_future()
        self._waiters.append(waiter)
        timer = loop.call_later(self.pool_timeout, _expire, waiter, self.pool_timeout)
        try:
            got = await waiter
        except BaseException:
            timer.cancel()
            if waiter.done() and not waiter.cancelled() and waiter.exception() is None:
                self._give_back(waiter.result())  # handed over, then this task was cancelled
            raise
        timer.cancel()
        return got if got is not None else await self._open(loop)

    async def _open(self, loop: asyncio.AbstractEventLoop) -> _Connection:
        """A new connection in a slot this task holds (freed if the connection fails)."""
        conn = _Connection(self, loop)
        try:
            async with asyncio.timeout(self.connect_timeout):
                await loop.create_connection(lambda: conn, self.host, self.port, ssl=self.ssl,
                                             server_hostname=self.host if self.ssl else None)
        except BaseException as exc:
            conn.state = _GONE
            conn.close()
            self._free_slot()
            if isinstance(exc, TimeoutError):
                raise ConnectTimeout(f"no connection within {self.connect_timeout:g} s"
                                     ) from None
            if isinstance(exc, OSError):
                raise ConnectError(str(exc) or type(exc).__name__) from None
            raise
        if self._closed:
            conn.state = _GONE
            conn.close()
            self._free_slot()
            raise ConnectError("the client is closed")
        self._conns.add(conn)
        return conn

    def _release(self, conn: _Connection) -> None:
        """An exchange ended with the whole response in: reuse the connection if it can be."""
        if conn.state != _BUSY:
            return
        conn.stop_lingering()
        if conn.closed or not conn.keep_alive or self._closed:
            self._discard(conn)
            return
        conn.reused = True
        conn.discarded = -1
        conn.body = deque()
        while self._waiters:
            waiter = self._waiters.popleft()
            if not waiter.done():
                waiter.set_result(conn)  # stays busy: handed to the next request
                return
        conn.state = _IDLE
        conn.idle_since = now = conn.loop.time()
        idle = self._idle
        idle.append(conn)
        while idle[0].idle_since < now - self.keepalive_expiry:  # the oldest first
            oldest = idle.pop(0)
            oldest.state = _BUSY
            self._discard(oldest)

    def _discard(self, conn: _Connection) -> None:
        """Close a busy connection and free its slot."""
        if conn.state != _BUSY:
            return
        conn.stop_lingering()
        conn.state = _GONE
        conn.close()
        self._conns.discard(conn)
        self._free_slot()

    def _lost_idle(self, conn: _Connection) -> None:
        """An idle connection closed (the server's keep-alive timeout, most often)."""
        conn.state = _GONE
        try:
            self._idle.remove(conn)
        except ValueError:
            pass
        self._conns.discard(conn)
        self._free_slot()

    def _give_back(self, got: _Connection | None) -> None:
        if got is None:
            self._free_slot()
        else:
            self._release(got)

    def _free_slot(self) -> None:
        while self._waiters:
            waiter = self._waiters.popleft()
            if not waiter.done():
                waiter.set_result(None)  # the slot passes to a waiting request
                return
        self._count -= 1

    @property
    def open_connections(self) -> int:
        """Connections open or being opened."""
        return self._count

    @property
    def idle_connections(self) -> int:
        return len(self._idle)

    async def aclose(self) -> None:
        """Close every connection; requests after this fail with ``ConnectError``."""
        self._closed = True
        while self._waiters:
            waiter = self._waiters.popleft()
            if not waiter.done():
                waiter.set_exception(ConnectError("the client is closed"))
        for conn in list(self._conns):
            conn.state = _GONE
            conn.close()
        self._conns.clear()
        self._idle.clear()
        self._count = 0


def _expire(waiter: asyncio.Future[_Connection | None], seconds: float) -> None:
    if not waiter.done():
        waiter.set_exception(PoolTimeout(f"no free connection within {seconds:g} s"))
