"""One system call per whole answer of ``toolcodec serve``.

uvicorn's httptools protocol writes a response's status line and headers when the app sends
``http.response.start`` and the body at the next message: two system calls, and two wake-ups
of the client reading it, for every answer. The serving protocol
(``toolcodec.pool.service.header_guard``) gives each request's cycle a :class:`HeadWithBody`
transport instead, which holds the head until the first body bytes, or the end of the loop's
turn (an answer without a body, a stream whose first bytes come later).
"""

from __future__ import annotations

import asyncio
from typing import Any


class HeadWithBody:
    """A response's transport whose first write (the status line and headers) waits for the
    next one (the body) or the end of the loop's turn, so that a whole answer leaves in one
    system call instead of two."""

    __slots__ = ("_transport", "_loop", "_head")

    def __init__(self, transport: asyncio.Transport, loop: asyncio.AbstractEventLoop) -> None:
        self._transport, self._loop = transport, loop
        self._head: bytes | None = b""  # b"": nothing written yet; None: head gone

    def write(self, data: bytes) -> None:
        head = self._head
        if head == b"":
            self._head = data
            self._loop.call_soon(self._flush)
            return
        if head is not None:
            self._head = None
            data = head + data
        self._transport.write(data)

    def _flush(self) -> None:
        head, self._head = self._head, None
        if head and not self._transport.is_closing():
            self._transport.write(head)

    def close(self) -> None:
        self._flush()
        self._transport.close()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._transport, name)
