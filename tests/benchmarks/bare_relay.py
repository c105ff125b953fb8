"""A bare relay, the floor any Python proxy pays: bytes in, bytes to the upstream, bytes back.

    python tests/benchmarks/bare_relay.py UPSTREAM_URL

A raw ASGI app on uvicorn (the server ``toolcodec serve`` runs on, with the same defaults) and
an ``aiohttp`` client with keep-alive connections to the upstream. It forwards each request's
body to the same path upstream and the answer back, a stream chunk by chunk, with no parsing,
no decoding and no metrics. It prints its base URL (a port the system chose) on the first line
of its output, then serves until it is stopped.
"""

from __future__ import annotations

import socket
import sys
from typing import Any

import aiohttp
import uvicorn


class Relay:
    """The ASGI app: one client session, opened at startup."""

    def __init__(self, upstream: str) -> None:
        self.upstream = upstream.rstrip("/")
        self.session: aiohttp.ClientSession | None = None

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        if scope["type"] == "lifespan":
            await self._lifespan(receive, send)
            return
        body = b""
        while True:
            message = await receive()
            body += message.get("body", b"")
            if not message.get("more_body"):
                break
        assert self.session is not None
        async with self.session.post(self.upstream + scope["path"], data=body,
                                     headers={"content-type": "application/json"}) as answer:
            kind = answer.headers.get("content-type", "application/json")
            if kind.startswith("text/event-stream"):
                await send({"type": "http.response.start", "status": answer.status,
                            "headers": [(b"content-type", kind.encode())]})
                async for chunk in answer.content.iter_any():
                    await send({"type": "http.response.body", "body": chunk,
                                "more_body": True})
                await send({"type": "http.response.body", "body": b""})
                return
            data = await answer.read()
            await send({"type": "http.response.start", "status": answer.status,
                        "headers": [(b"content-type", kind.encode()),
                                    (b"content-length", str(len(data)).encode())]})
            await send({"type": "http.response.body", "body": data})

    async def _lifespan(self, receive: Any, send: Any) -> None:
        while True:
            message = await receive()
            if message["type"] == "lifespan.startup":
                connector = aiohttp.TCPConnector(limit=0)  # as many connections as requests
                self.session = aiohttp.ClientSession(connector=connector)
                await send({"type": "lifespan.startup.complete"})
            elif message["type"] == "lifespan.shutdown":
                if self.session is not None:
                    await self.session.close()
                await send({"type": "lifespan.shutdown.complete"})
                return


def main() -> None:
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    print(f"http://127.0.0.1:{sock.getsockname()[1]}", flush=True)
    config = uvicorn.Config(Relay(sys.argv[1]), log_level="warning", access_log=False,
                            lifespan="on")
    uvicorn.Server(config).run(sockets=[sock])  # sets up the loop as `toolcodec serve` does


if __name__ == "__main__":
    main()
