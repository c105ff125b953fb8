"""Length-prefixed frames on a non-blocking socket, read and written a piece at a time.

The pool's dispatcher talks to every worker from one thread. A blocking read would let one
worker that has sent half an answer (or one that is stuck mid-write) stop every other
caller, and a blocking write of a large job would do the same while the worker is not
reading. So each worker's socket is non-blocking: :class:`FrameReader` takes whatever bytes
are there and hands back the frames that are whole, :class:`FrameWriter` sends what the
socket takes and keeps the rest for when it is writable again. The frames are the worker
process's (``toolcodec.worker.child``): a 4-byte big-endian length, then that many bytes.
"""

from __future__ import annotations

import socket
import struct

_HEADER = struct.Struct("!I")
_CHUNK = 1 << 16


class FrameReader:
    """Whole frames out of what a non-blocking socket has received so far."""

    __slots__ = ("_buf",)

    def __init__(self) -> None:
        self._buf = bytearray()

    def read(self, sock: socket.socket) -> list[bytes] | None:
        """The frames completed by the bytes the socket holds now; None once the peer has
        closed (or reset) its end. Never blocks."""
        buf = self._buf
        while True:
            try:
                chunk = sock.recv(_CHUNK)
            except (BlockingIOError, InterruptedError):
                break
            except OSError:
                return None
            if not chunk:
                return None
            buf += chunk
            if len(chunk) < _CHUNK:
                break
        frames = []
        while len(buf) >= _HEADER.size:
            (size,) = _HEADER.unpack_from(buf)
            end = _HEADER.size + size
            if len(buf) < end:
                break
            frames.append(bytes(buf[_HEADER.size:end]))
            del buf[:end]
        return frames


class FrameWriter:
    """One frame sent as far as a non-blocking socket takes it."""

    __slots__ = ("_left",)

    def __init__(self, data: bytes) -> None:
        self._left = memoryview(_HEADER.pack(len(data)) + data)

    def write(self, sock: socket.socket) -> bool:
        """Send what the socket takes now; True once the whole frame is sent. Raises
        ``OSError`` if the peer has gone."""
        while self._left:
            try:
                sent = sock.send(self._left)
            except (BlockingIOError, InterruptedError):
                return False
            self._left = self._left[sent:]
        return True
