"""HTTP metrics of ``toolcodec serve``, next to the job metrics on the same registry.

``toolcodec_http_requests_total{route, code}`` and ``toolcodec_http_request_duration_seconds
{route}``. ``route`` is a route template from a fixed set (``/v1/{op}``, ``/v1/batch``, …,
``other`` for anything unmatched), never the raw path, so label values stay bounded whatever
clients send.
"""

from __future__ import annotations

import time
from typing import Any

from prometheus_client import CollectorRegistry
from toolcodec.pool.service.tally import CounterTally, HistogramTally
from toolcodec.worker.metrics import BUCKETS

HTTP_REQUESTS_TOTAL = "toolcodec_http_requests_total"
HTTP_REQUEST_DURATION_SECONDS = "toolcodec_http_request_duration_seconds"
ROUTES = ("/v1/{op}", "/v1/batch", "/v1/prepare", "/v1/chat/completions", "/v1/messages",
          "/v1/responses", "/v1/models", "/metrics", "/healthz", "/readyz", "other")
_FIXED = {r for r in ROUTES if "{" not in r and r != "other"}


def route_of(path: str) -> str:
    """The route template a path is counted under."""
    if path in _FIXED:
        return path
    if path.startswith("/v1/") and "/" not in path[4:] and path[4:]:
        return "/v1/{op}"
    return "other"


class HttpMetrics:
    """The HTTP counters and an ASGI wrapper that fills them (on the serving loop: tallies,
    ``toolcodec.pool.service.tally``)."""

    def __init__(self, registry: CollectorRegistry) -> None:
        self.requests = CounterTally(HTTP_REQUESTS_TOTAL,
                                     "HTTP requests by route template and status code.",
                                     ["route", "code"], registry)
        self.duration = HistogramTally(HTTP_REQUEST_DURATION_SECONDS,
                                       "HTTP request duration, until the response is sent, by "
                                       "route.", ["route"], BUCKETS + (2.5, 10.0), registry)
        self._labels: dict[tuple[str, int], tuple[tuple[str, str], tuple[str]]] = {}

    def count(self, route: str, status: int, seconds: float) -> None:
        """One request of *route* answered *status* after *seconds*."""
        labels = self._labels.get((route, status))
        if labels is None:  # label values made once per route and status
            labels = self._labels[route, status] = ((route, str(status)), (route,))
        self.requests.inc(labels[0])
        self.duration.observe(labels[1], seconds)

    def wrap(self, app: Any) -> Any:
        async def counted(scope: dict, receive: Any, send: Any) -> None:
            if scope["type"] != "http":
                await app(scope, receive, send)
                return
            route, start, status = route_of(scope["path"]), time.perf_counter(), [500]

            async def sending(message: dict) -> None:
                if message["type"] == "http.response.start":
                    status[0] = message["status"]
                await send(message)

            try:
                await app(scope, receive, sending)
            finally:
                self.count(route, status[0], time.perf_counter() - start)

        return counted
