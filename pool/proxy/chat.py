"""The OpenAI-compatible repairing proxy: ``toolcodec serve --upstream URL``.

Put toolcodec between a chat client and its model server (llama.cpp, vLLM, Ollama, LM Studio,
or any OpenAI-compatible API). ``POST /v1/chat/completions`` goes upstream unchanged (or, with
``tools_as_prompt``, with the tools described in a system message for servers that cannot take
them); the assistant message that comes back is decoded with the request's own ``tools``:
calls found in the text or in broken native ``tool_calls`` become proper ``tool_calls`` (ids,
JSON-string arguments, ``finish_reason: "tool_calls"``), the content is what remains, and
``<think>`` goes to ``reasoning_content``. ``GET /v1/models`` is passed through.

With ``stream: true`` the upstream SSE stream goes through the streaming decoder: prose is
forwarded as it comes, a call once it is decoded and validated, and the stream always ends
with ``data: [DONE]`` — after an error chunk when upstream failed mid-way.

What the proxy changed is in the ``x-toolcodec-repairs`` response header (non-streaming) and,
when the client sends ``x-toolcodec-report: 1``, in a ``toolcodec`` field of the response (or
of the last chunk). Errors the model made that could not be repaired stay in the content, as
``decode`` leaves them, and are counted; broken native calls that could not be repaired are
passed on as the model wrote them. The upstream API key is sent upstream only, never logged.
"""

from __future__ import annotations

import itertools
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import httpx
import orjson
from prometheus_client import REGISTRY, CollectorRegistry, Counter
from toolcodec.errors import ALL_CODES
from toolcodec.pool.proxy.message import openai_message, unrepaired_natives
from toolcodec.tools import InvalidToolsError

REPORT_HEADER = "x-toolcodec-report"
REPAIRS_HEADER = "x-toolcodec-repairs"
_POOLS, _POOL_CONNECTIONS = 16, 32  # upstream connections: at most 512 in all
_HOP_HEADERS = {"host", "content-length", "connection", "keep-alive", "transfer-encoding",
                "accept-encoding", "te", "upgrade", "proxy-authorization"}


@dataclass(slots=True)
class ProxyConfig:
    """Where upstream is and how to talk to it."""

    upstream: str  # base URL, with or without the trailing /v1
    api_key: str | None = None  # sent as "Authorization: Bearer …" (else the client's is)
    tools_as_prompt: bool = False
    connect_timeout: float = 5.0
    read_timeout: float = 300.0  # between two bytes of the answer: generations are slow

    @property
    def base(self) -> str:
        url = self.upstream.rstrip("/")
        return url if url.endswith("/v1") else url + "/v1"


class ProxyMetrics:
    """``toolcodec_proxy_requests_total{stream, outcome}`` and
    ``toolcodec_proxy_model_errors_total{code}`` (what the model got wrong and the proxy
    could not repair)."""

    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        registry = REGISTRY if registry is None else registry
        self.requests = Counter("toolcodec_proxy_requests_total",
                                "Proxied chat completions by stream mode and outcome "
                                "(repaired, unchanged, model_error, upstream_error).",
                                ["stream", "outcome"], registry=registry)
        self.model_errors = Counter("toolcodec_proxy_model_errors_total",
                                    "Errors in model output the proxy could not repair, by code.",
                                    ["code"], registry=registry)

    def count(self, stream: bool, outcome: str, result: dict[str, Any] | None = None) -> None:
        self.requests.labels(str(stream).lower(), outcome).inc()
        for error in (result or {}).get("errors") or []:
            code = error.get("code")
            self.model_errors.labels(code if code in ALL_CODES else "other").inc()


class UpstreamError(Exception):
    """Upstream could not be reached or did not answer: ``status`` is what the client gets."""

    def __init__(self, status: int, code: str, message: str) -> None:
        super().__init__(message)
        self.status, self.code = status, code

    def body(self) -> dict[str, Any]:
        return {"error": {"message": str(self), "type": "upstream_error", "code": self.code}}


class ChatProxy:
    """Talks to upstream; decodes answers with a ``Pool`` (``decode`` jobs) and the stream
    decoder. Framework-free: ``toolcodec.pool.service.server`` wires it to routes."""

    def __init__(self, config: ProxyConfig, pool: Any,
                 registry: CollectorRegistry | None = None) -> None:
        self.config, self.pool = config, pool
        self.metrics = ProxyMetrics(registry)
        timeout = httpx.Timeout(config.read_timeout, connect=config.connect_timeout)
        # Several small connection pools instead of one large: httpcore polls every socket of
        # a pool on each request and each response (encode/httpcore#928), so one pool of n
        # connections costs O(n) per request; at 64 requests in flight that was 80 % of the
        # proxy's CPU. Requests take the pools in turn.
        per_pool = httpx.Limits(max_connections=_POOL_CONNECTIONS,
                                max_keepalive_connections=_POOL_CONNECTIONS // 4)
        self._clients = [httpx.AsyncClient(timeout=timeout, limits=per_pool)
                         for _ in range(_POOLS)]
        self._turn = itertools.cycle(self._clients)

    @property
    def client(self) -> httpx.AsyncClient:
        """The upstream client for the next request (the pools in turn)."""
        return next(self._turn)

    async def aclose(self) -> None:
        for client in self._clients:
            await client.aclose()

    # -- upstream ---------------------------------------------------------------------------

    def upstream_headers(self, incoming: dict[str, str]) -> dict[str, str]:
        headers = {k: v for k, v in incoming.items() if k.lower() not in _HOP_HEADERS
                   and not k.lower().startswith("x-toolcodec")}
        if self.config.api_key:
            headers = {k: v for k, v in headers.items() if k.lower() != "authorization"}
            headers["authorization"] = f"Bearer {self.config.api_key}"
        return headers

    async def models(self, headers: dict[str, str]) -> tuple[int, bytes, str]:
        """``GET /v1/models`` passed through: (status, body, content type)."""
        try:
            response = await self.client.get(f"{self.config.base}/models",
                                              headers=self.upstream_headers(headers))
        except httpx.HTTPError as exc:
            error = _upstream_error(exc)
            return error.status, orjson.dumps(error.body()), "application/json"
        return (response.status_code, response.content,
                response.headers.get("content-type", "application/json"))

    def upstream_body(self, body: dict[str, Any]) -> dict[str, Any]:
        if not self.config.tools_as_prompt or not body.get("tools"):
            return body
        from toolcodec.pool.proxy.prompt import tools_as_system_prompt

        return tools_as_system_prompt(body)

    # -- whole answers ----------------------------------------------------------------------

    async def complete(self, body: dict[str, Any], headers: dict[str, str]
                       ) -> tuple[int, dict[str, Any], dict[str, str]]:
        """A non-streaming completion: (status, JSON body, extra response headers)."""
        try:
            response = await self.client.post(f"{self.config.base}/chat/completions",
                                               json=self.upstream_body(body),
                                               headers=self.upstream_headers(headers))
        except httpx.HTTPError as exc:
            self.metrics.count(False, "upstream_error")
            error = _upstream_error(exc)
            return error.status, error.body(), {}
        answer = _json_or_none(response.content)
        if response.status_code >= 400 or not isinstance(answer, dict):
            self.metrics.count(False, "upstream_error")
            body_out = answer if isinstance(answer, dict) else {"error": {
                "message": f"upstream answered {response.status_code} with a body that is not "
                           "a JSON object", "type": "upstream_error", "code": "bad_upstream"}}
            status = response.status_code if response.status_code >= 400 else 502
            return status, body_out, {}
        return 200, *(await self._repair_answer(answer, body, headers))

    async def _repair_answer(self, answer: dict[str, Any], request: dict[str, Any],
                             headers: dict[str, str]) -> tuple[dict[str, Any], dict[str, str]]:
        tools = request.get("tools") or []
        repairs: list[str] = []
        reports = []
        for choice in answer.get("choices") or []:
            message = choice.get("message") if isinstance(choice, dict) else None
            if not isinstance(message, dict):
                continue
            envelope = await self.pool.asubmit("decode", {"message": message, "tools": tools})
            result = envelope.get("result") if envelope.get("status") == "ok" else None
            outcome, new = _rebuilt(message, result, str(answer.get("id", "")),
                                    choice.get("index", 0))
            self.metrics.count(False, outcome, result or {"errors": [envelope.get("error")]})
            if new is not None:
                choice["message"] = new
                choice["finish_reason"] = ("tool_calls" if new.get("tool_calls")
                                           else _not_tool_calls(choice.get("finish_reason")))
            repairs += (result or {}).get("repairs") or []
            reports.append(_report(result, envelope))
        repairs = list(dict.fromkeys(repairs))
        if headers.get(REPORT_HEADER) == "1":
            answer["toolcodec"] = reports
        return answer, ({REPAIRS_HEADER: ",".join(repairs)} if repairs else {})

    # -- streams ----------------------------------------------------------------------------

    async def stream(self, body: dict[str, Any], headers: dict[str, str]
                     ) -> tuple[int, AsyncIterator[bytes] | dict[str, Any]]:
        """Open the upstream stream; (200, SSE bytes iterator) or (status, error body)."""
        request = self.client.build_request("POST", f"{self.config.base}/chat/completions",
                                            json=self.upstream_body(body),
                                            headers=self.upstream_headers(headers))
        try:
            response = await self.client.send(request, stream=True)
        except httpx.HTTPError as exc:
            self.metrics.count(True, "upstream_error")
            error = _upstream_error(exc)
            return error.status, error.body()
        if response.status_code >= 400:
            content = await response.aread()
            await response.aclose()
            self.metrics.count(True, "upstream_error")
            answer = _json_or_none(content)
            return response.status_code, answer if isinstance(answer, dict) else {"error": {
                "message": f"upstream answered {response.status_code}",
                "type": "upstream_error", "code": "bad_upstream"}}
        from toolcodec.pool.proxy.stream import relay

        return 200, relay(response, self, body, headers.get(REPORT_HEADER) == "1")

    def decoder_for(self, tools: list[dict[str, Any]]) -> Any:
        """A stream decoder for the request's tools (``None`` when they are unusable)."""
        try:  # blocks are decoded in the pool's workers, off the event loop
            return self.pool.stream(tools)
        except (InvalidToolsError, TypeError, ValueError):
            return None


# -- helpers ---------------------------------------------------------------------------------


def _rebuilt(message: dict[str, Any], result: dict[str, Any] | None, response_id: str,
             choice_index: int) -> tuple[str, dict[str, Any] | None]:
    """(outcome, the new message or None to keep the original)."""
    if result is None:
        return "unchanged", None  # the decode job did not run: pass the model's answer on
    new = openai_message(result, f"{response_id}:{choice_index}")
    kept = unrepaired_natives(result, message.get("tool_calls"))
    if kept:  # broken native calls go on as the model wrote them, after the repaired ones
        new["tool_calls"] = new.get("tool_calls", []) + kept
    outcome = "model_error" if result["errors"] else (
        "repaired" if result["repairs"] or new != _plain(message) else "unchanged")
    return outcome, new


def _plain(message: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in message.items() if k in ("role", "content")}


def _not_tool_calls(reason: Any) -> Any:
    return "stop" if reason == "tool_calls" else reason


def _report(result: dict[str, Any] | None, envelope: dict[str, Any]) -> dict[str, Any]:
    if result is None:
        return {"status": envelope.get("status"), "error": envelope.get("error")}
    return {"status": "ok", "path": result["path"], "repairs": result["repairs"],
            "errors": result["errors"]}


def _json_or_none(content: bytes) -> Any:
    try:
        return orjson.loads(content)
    except orjson.JSONDecodeError:
        return None


def _upstream_error(exc: httpx.HTTPError) -> UpstreamError:
    if isinstance(exc, httpx.TimeoutException):
        return UpstreamError(504, "upstream_timeout",
                             f"the model server did not answer in time ({type(exc).__name__})")
    if isinstance(exc, httpx.ConnectError):
        return UpstreamError(502, "upstream_unavailable",
                             f"cannot connect to the model server: {exc}")
    return UpstreamError(502, "upstream_error", f"the model server failed: {type(exc).__name__}")
