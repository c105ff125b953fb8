"""Bounds on how long and how large a request's headers may be, for ``toolcodec serve``.

uvicorn bounds neither for its httptools protocol: ``timeout_keep_alive`` only runs between
requests, so a client that opens a connection and sends its headers a byte at a time (or
never) holds it forever, and a header of any size is buffered whole. :func:`guarded_protocol`
returns uvicorn's httptools protocol with both bounds:

* **time**: the headers of a request must be complete ``header_timeout_s`` after its first
  byte (for the first request of a connection: after the connection opened). Otherwise the
  server answers 408 (when anything was received) and closes. Bytes trickling in do not
  extend the deadline. The body and the job are not under this bound.
* **size**: at most ``max_header_bytes`` bytes from a request's first byte to the end of its
  headers (request line and header lines). Beyond it the server answers 431 without feeding
  more to the parser, stops reading and closes.

Both answers carry the service's error envelope (code ``bad_request``), like its 404 and 405.
"""

from __future__ import annotations

import asyncio
from typing import Any

import orjson
from toolcodec.pool.service.one_write import HeadWithBody
from toolcodec.results.errors import BAD_REQUEST
from toolcodec.worker.envelope import error_envelope
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

DEFAULT_HEADER_TIMEOUT_S = 10.0
DEFAULT_MAX_HEADER_BYTES = 64 * 1024
# After a 431 the rest of what the client sends is read and dropped for this long before the
# connection closes: closing with unread data makes the kernel send a reset, which can
# destroy the 431 before the client reads it.
LINGER_S = 2.0


def refusal(status: int, reason: str, message: str, backend: str = "") -> bytes:
    """A whole HTTP response whose body is the service's error envelope (``bad_request``,
    as for 404/405): every answer of ``toolcodec serve`` is an envelope."""
    body = orjson.dumps({**error_envelope("", "error", BAD_REQUEST, f"{status}: {message}"),
                         "backend": backend, "elapsed_ms": 0.0})
    return (f"HTTP/1.1 {status} {reason}\r\ncontent-type: application/json\r\n"
            f"connection: close\r\ncontent-length: {len(body)}\r\n\r\n").encode() + body


class HeaderGuardProtocol(HttpToolsProtocol):
    """uvicorn's httptools protocol with a deadline and a size limit on request headers.

    ``_in_headers`` is true from the end of one request (or the connection's start) to the
    end of the next request's headers; while it is, the parser is fed no more than the
    headers may still take, so the limit holds whatever the client sends.
    """

    header_timeout_s: float = DEFAULT_HEADER_TIMEOUT_S
    max_header_bytes: int = DEFAULT_MAX_HEADER_BYTES
    too_slow = refusal(408, "Request Timeout", "request headers not complete in time")
    too_large = refusal(431, "Request Header Fields Too Large", "request headers too large")

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._in_headers = True
        self._header_bytes = 0
        self._completed_in_feed = False  # a request ended inside the piece being fed
        self._pipelined_in_feed = False  # ... and another began after it
        self._refused = False
        # The first request's headers are due from the connection's start: a connection
        # that never sends a byte is closed too.
        self._header_deadline: float | None = self.loop.time() + self.header_timeout_s
        self._header_timer: asyncio.TimerHandle | None = self.loop.call_at(
            self._header_deadline, self._headers_too_slow)

    def connection_lost(self, exc: Exception | None) -> None:
        self._cancel_header_timer()
        super().connection_lost(exc)

    def data_received(self, data: bytes) -> None:
        if self._refused:
            return  # lingering after a 431: read and drop
        while data:
            if self._in_headers:
                room = self.max_header_bytes - self._header_bytes
                if room <= 0:
                    self._refuse_too_large()
                    return
                piece, data = data[:room], data[room:]
            else:
                piece, data = data, b""
            self._completed_in_feed = self._pipelined_in_feed = False
            super().data_received(piece)
            if self._refused or self.transport.is_closing():
                return
            if self._in_headers:
                if self._pipelined_in_feed:
                    # A request that began after another one inside this piece is charged
                    # the whole piece: where it began is not known.
                    self._header_bytes = len(piece)
                elif not self._completed_in_feed:  # else: the next request has not begun
                    self._header_bytes += len(piece)
                if self._header_bytes > self.max_header_bytes:
                    self._refuse_too_large()
                    return
        if self._in_headers and self._header_deadline is not None and self._header_timer is None:
            # Headers left incomplete by this read: now the deadline needs a timer. (Most
            # requests arrive whole in one read and never pay for one.)
            self._header_timer = self.loop.call_at(self._header_deadline, self._headers_too_slow)

    def eof_received(self) -> bool | None:
        if self._refused:
            self.transport.close()
        return super().eof_received()

    # -- parser callbacks ----------------------------------------------------------------

    def on_message_begin(self) -> None:
        super().on_message_begin()
        self._pipelined_in_feed = self._completed_in_feed
        if self._header_deadline is None:  # a later request on a kept-alive connection
            self._header_deadline = self.loop.time() + self.header_timeout_s

    def on_headers_complete(self) -> None:
        self._in_headers = False
        self._header_deadline = None
        self._cancel_header_timer()
        super().on_headers_complete()
        cycle = self.cycle  # its answer leaves in one write (toolcodec.pool.service.one_write)
        if cycle is not None and cycle.transport is self.transport:
            cycle.transport = HeadWithBody(self.transport, self.loop)

    def on_message_complete(self) -> None:
        super().on_message_complete()
        self._in_headers, self._header_bytes, self._completed_in_feed = True, 0, True

    # -- refusals ------------------------------------------------------------------------

    def _headers_too_slow(self) -> None:
        self._header_timer = None
        if self.transport.is_closing() or not self._in_headers:
            return
        if self._header_bytes:
            self.transport.write(self.too_slow)
        self.transport.close()

    def _refuse_too_large(self) -> None:
        self._refused = True
        self._cancel_header_timer()
        self.transport.write(self.too_large)
        if self.transport.can_write_eof():
            self.transport.write_eof()
        self.loop.call_later(LINGER_S, self.transport.close)

    def _cancel_header_timer(self) -> None:
        if self._header_timer is not None:
            self._header_timer.cancel()
            self._header_timer = None


def guarded_protocol(header_timeout_s: float = DEFAULT_HEADER_TIMEOUT_S,
                     max_header_bytes: int = DEFAULT_MAX_HEADER_BYTES,
                     backend: str = "") -> type[Any]:
    """The protocol class to pass as ``uvicorn.Config(http=...)`` with these bounds;
    ``backend`` is named in the refusals' envelopes like in every other answer."""
    if header_timeout_s <= 0 or max_header_bytes < 1024:
        raise ValueError("header_timeout_s must be > 0 and max_header_bytes >= 1024")
    return type("HeaderGuardProtocol", (HeaderGuardProtocol,), {
        "header_timeout_s": float(header_timeout_s),
        "max_header_bytes": int(max_header_bytes),
        "too_slow": refusal(408, "Request Timeout", f"request headers not complete within "
                            f"{header_timeout_s:g} s (--header-timeout-s)", backend),
        "too_large": refusal(431, "Request Header Fields Too Large", f"request line and "
                             f"headers over {max_header_bytes} bytes (--max-header-bytes)",
                             backend),
    })
