"""The OpenAI-compatible repairing proxy: ``toolcodec serve --upstream URL``.

Put toolcodec between a chat client and its model server (llama.cpp, vLLM, Ollama, LM Studio,
or any OpenAI-compatible API). ``POST /v1/chat/completions`` goes upstream unchanged (or, with
``tools_as_prompt``, with the tools described in a system message for servers that cannot take
them); the assistant message that comes back is decoded with the request's own ``tools``:
calls found in the text or in broken native ``tool_calls`` become proper ``tool_calls`` (ids,
JSON-string arguments, ``finish_reason: "tool_calls"``), the content is what remains, and
``<think>`` goes to ``reasoning_content``. ``GET /v1/models`` is passed through, and so are
``/v1/completions``, ``/v1/embeddings`` and ``/v1/moderations`` (unchanged); ``/v1/messages``
and ``/v1/responses`` are translated to this route (``translated``).

Decoder options come per model (``settings``: presets, a config file, flags) and from the
request's ``"toolcodec"`` field, which never goes upstream (``request``).

With ``stream: true`` the upstream SSE stream goes through the streaming decoder: prose is
forwarded as it comes, a call once it is decoded and validated, and the stream always ends
with ``data: [DONE]`` — after an error chunk when upstream failed mid-way.

What the proxy changed is in the ``x-toolcodec-repairs`` response header (non-streaming) and,
when the client sends ``x-toolcodec-report: 1``, in a ``toolcodec`` field of the response (or
of the last chunk). Errors the model made that could not be repaired stay in the content, as
``decode`` leaves them, and are counted; broken native calls that could not be repaired are
passed on as the model wrote them. The upstream API key is sent upstream only, never logged.

An answer the proxy could not decode (the decode job timed out, was shed for overload, lost
its worker) is never passed on as if decoded: a whole answer is a 503 with ``Retry-After`` and
the envelope's error; a stream says it in its final chunk (``toolcodec.undecoded``) and, when
known before the first byte, in the ``x-toolcodec-undecoded`` header. Both are counted in
``toolcodec_proxy_undecoded_total{stream, reason}``, not as model errors.

What was not made a call (markup the decoder does not read, an undeclared tool, a forced
``tool_choice`` not met) is said in ``x-toolcodec-unrecognised`` (streams: the final chunk's
``toolcodec.unrecognised``) and ``toolcodec_proxy_unrecognised_total{stream, what}``
(``flags``); every answer not decoded, broken off, cut or flagged gets a log line
(``answer_log``). A cut answer — ``finish_reason`` ``length``, ``usage`` reaching
``max_tokens``, a broken stream — makes no call of the block it was cut in.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

import orjson
from prometheus_client import REGISTRY, CollectorRegistry
from toolcodec import __version__
from toolcodec.decoding.codec import codec_for
from toolcodec.pool.model_labels import MODEL_LABEL, format_label
from toolcodec.pool.proxy.answer_log import AnswerLog, request_id
from toolcodec.pool.proxy.deadlines import Deadlines
from toolcodec.pool.proxy.flags import (
    UNRECOGNISED_HEADER,
    WHAT,
    check_forced,
    cut_by_usage,
    unrecognised,
    without_cut,
)
from toolcodec.pool.proxy.http_client import HTTPClient, HTTPError, Response
from toolcodec.pool.proxy.message import openai_message, unrepaired_natives
from toolcodec.pool.proxy.request import Prepared, prepare
from toolcodec.pool.proxy.settings import ModelSettings, SettingsError
from toolcodec.pool.proxy.upstream import (
    UpstreamError,
    Upstreams,
    deadline_passed,
    failure,
    forwarded,
    read_body,
    shape_problem,
)
from toolcodec.pool.service.tally import CounterTally
from toolcodec.pool.service.tracing import decode_span
from toolcodec.results.errors import ALL_CODES, BAD_REQUEST
from toolcodec.results.ids import random_hex
from toolcodec.schema.tools import InvalidToolsError

REPORT_HEADER = "x-toolcodec-report"
REPAIRS_HEADER = "x-toolcodec-repairs"
UNDECODED_HEADER = "x-toolcodec-undecoded"
# Job outcomes that say nothing about the model: the decoder had no capacity for the answer.
UNDECODED_REASON = {"rejected": "overload", "timeout": "timeout", "worker_lost": "worker_lost"}
CAPACITY_CODES = frozenset({"timeout", "rejected", "worker_lost", "internal_error",
                            "backend_unavailable"})
PASSED_THROUGH = ("/completions", "/responses", "/embeddings", "/moderations")

__all__ = ["ChatProxy", "ProxyConfig", "ProxyMetrics", "UpstreamError"]


@dataclass(slots=True)
class ProxyConfig:
    """Where upstream is and how to talk to it."""

    upstream: str  # base URL, with or without the trailing /v1
    api_key: str | None = None  # sent as "Authorization: Bearer …" (else the client's is)
    tools_as_prompt: bool = False
    connect_timeout: float = 5.0
    read_timeout: float = 300.0  # between two bytes of the answer: generations are slow
    connections: int = 512  # upstream connection pool size
    pool_timeout: float = 5.0  # longest wait for a free connection (then 503 upstream_busy)
    deadline: float = 600.0  # overall, per request: a trickling upstream is cut here
    heartbeat: float = 10.0  # SSE comment after this long without a byte to the client
    max_upstream_body: int = 32 * 1024 * 1024  # an answer, or one SSE line, at most

    @property
    def base(self) -> str:
        url = self.upstream.rstrip("/")
        return url if url.endswith("/v1") else url + "/v1"


class ProxyMetrics:
    """``toolcodec_proxy_requests_total{stream, outcome}``,
    ``toolcodec_proxy_model_errors_total{code}`` (what the model got wrong and the proxy
    could not repair), ``toolcodec_proxy_undecoded_total{stream, reason}`` (answers, or
    streamed blocks, the proxy had no capacity to decode: overload, timeout, worker_lost,
    error) and ``toolcodec_proxy_unrecognised_total{stream, what}`` (answers holding what was
    not made a call, by ``flags.WHAT``). Counted on the serving loop, in tallies
    (``toolcodec.pool.service.tally``)."""

    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        registry = REGISTRY if registry is None else registry
        self.requests = CounterTally("toolcodec_proxy_requests_total",
                                     "Proxied chat completions by stream mode and outcome "
                                     "(repaired, unchanged, model_error, undecoded, "
                                     "upstream_error, bad_request), model (the config entry "
                                     "matched, the default preset, or other) and format (of "
                                     "the first call; none).",
                                     ["stream", "outcome", "model", "format"], registry)
        self.model_errors = CounterTally("toolcodec_proxy_model_errors_total",
                                         "Errors in model output the proxy could not repair, "
                                         "by code, model and format.",
                                         ["code", "model", "format"], registry)
        self.undecoded = CounterTally("toolcodec_proxy_undecoded_total",
                                      "Answers (streams: blocks) the proxy could not decode for "
                                      "lack of capacity, by reason (overload, timeout, "
                                      "worker_lost, error).", ["stream", "reason"], registry)
        self.unrecognised = CounterTally("toolcodec_proxy_unrecognised_total",
                                         "Answers holding what was not made a call, by what was "
                                         "seen: call markup the decoder does not read (its "
                                         "family), a call to an undeclared tool, a forced "
                                         "tool_choice not met.", ["stream", "what"], registry)
        for stream in ("true", "false"):  # at 0 from the start, for rules and panels
            for what in WHAT:
                self.unrecognised.prime((stream, what))

    def count(self, stream: bool, outcome: str, result: dict[str, Any] | None = None) -> None:
        # model: the request's, noted where its options were resolved (bounded labels)
        model, fmt = MODEL_LABEL.get(), format_label(result)
        self.requests.inc((_STREAM[stream], outcome, model, fmt))
        errors = result.get("errors") if result else None
        for error in errors or ():
            code = error.get("code")
            if code not in CAPACITY_CODES:  # counted as undecoded, not blamed on the model
                self.model_errors.inc((code if code in ALL_CODES else "other", model, fmt))

    def count_unrecognised(self, stream: bool, whats: list[str]) -> None:
        for what in whats:
            self.unrecognised.inc((_STREAM[stream], what))

    def count_undecoded(self, stream: bool, status: str | None) -> None:
        self.undecoded.inc((_STREAM[stream], UNDECODED_REASON.get(status or "", "error")))


_STREAM = {True: "true", False: "false"}  # the stream label's values


class ChatProxy:
    """Talks to upstream; decodes answers with a ``Pool`` (``decode`` jobs) and the stream
    decoder. Framework-free: ``toolcodec.pool.proxy.routes`` wires it to routes."""

    def __init__(self, config: ProxyConfig, pool: Any, registry: CollectorRegistry | None = None,
                 models: ModelSettings | None = None) -> None:
        self.config, self.pool = config, pool
        self.models = models or ModelSettings()
        self.metrics = ProxyMetrics(registry)
        self.log = AnswerLog()
        self.deadlines = Deadlines()  # whole answers' deadlines, on one timer
        self.http = self._connect(config.base)
        # A model's config entry may name its own model server (several upstreams).
        self.upstreams = Upstreams(self.http, config.api_key, self.models, self._connect)

    def _connect(self, base: str) -> HTTPClient:
        config = self.config
        return HTTPClient(base, connections=config.connections,
                          connect_timeout=config.connect_timeout,
                          read_timeout=config.read_timeout, pool_timeout=config.pool_timeout,
                          user_agent=f"toolcodec/{__version__}")

    async def aclose(self) -> None:
        await self.http.aclose()
        await self.upstreams.aclose()

    # -- upstream ---------------------------------------------------------------------------

    def upstream_headers(self, incoming: dict[str, str], json: bool = False) -> dict[str, str]:
        headers = forwarded(incoming, self.config.api_key)
        if json:
            headers["content-type"] = "application/json"
        return headers

    def upstream_body(self, body: dict[str, Any]) -> dict[str, Any]:
        if not self.config.tools_as_prompt or not body.get("tools"):
            return body
        from toolcodec.pool.proxy.prompt import tools_as_system_prompt

        return tools_as_system_prompt(body)

    def _chat_request(self, prepared: Prepared, incoming: dict[str, str]
                      ) -> tuple[HTTPClient, dict[str, str], bytes]:
        """The model's upstream, and the chat completion's headers and body."""
        if prepared.decode:  # built while the model generates: the decode then only parses
            self.pool.prepare(prepared.tools, prepared.options or None,
                              built_here=prepared.codec is not None, codec=prepared.codec)
        http, key = self.upstreams.pick(prepared.upstream.get("model"))
        headers = forwarded(incoming, key)
        headers["content-type"] = "application/json"
        if prepared.raw is not None and not self.config.tools_as_prompt:
            return http, headers, prepared.raw  # the client's own bytes: nothing changed
        return http, headers, orjson.dumps(self.upstream_body(prepared.upstream))

    async def models_list(self, headers: dict[str, str]) -> tuple[int, bytes, str]:
        """``GET /v1/models`` passed through: (status, body, content type)."""
        try:
            async with asyncio.timeout(self.config.deadline):
                response, content = await self._whole("GET", "/models",
                                                       self.upstream_headers(headers))
        except TimeoutError:
            error = deadline_passed(self.config.deadline)
            return error.status, orjson.dumps(error.body()), "application/json"
        except (HTTPError, UpstreamError) as exc:
            error = exc if isinstance(exc, UpstreamError) else failure(exc)
            return error.status, orjson.dumps(error.body()), "application/json"
        return (response.status_code, content,
                response.headers.get("content-type", "application/json"))

    async def passthrough(self, method: str, path: str, content: bytes,
                          headers: dict[str, str]) -> tuple[int, dict[str, str], Any]:
        """Another OpenAI route, relayed unchanged: (status, headers, bytes iterator or an
        error body)."""
        until = asyncio.get_running_loop().time() + self.config.deadline
        try:
            async with asyncio.timeout_at(until):
                response = await self.http.request(method, path,
                                                   self.upstream_headers(headers, json=True),
                                                   content)
        except TimeoutError:
            return 504, {}, deadline_passed(self.config.deadline).body()
        except HTTPError as exc:
            error = failure(exc)
            return error.status, error.headers, error.body()
        kind = response.headers.get("content-type", "application/json")

        async def relay() -> AsyncIterator[bytes]:
            try:
                while True:
                    try:  # decoded parts: no content-encoding goes back
                        async with asyncio.timeout_at(until):
                            part = await response.next_part()
                    except (TimeoutError, HTTPError):
                        return  # the client sees the body end where upstream's stopped
                    if not part:
                        return
                    yield part
            finally:
                await response.aclose()
        return response.status_code, {"content-type": kind}, relay()

    async def _whole(self, method: str, path: str, headers: dict[str, str],
                     content: bytes = b"", http: HTTPClient | None = None
                     ) -> tuple[Response, bytes]:
        """An upstream answer and its whole body, read up to the size cap."""
        response = await (http or self.http).request(method, path, headers, content)
        try:
            return response, await read_body(response, self.config.max_upstream_body)
        finally:
            await response.aclose()

    async def _post(self, prepared: Prepared, headers: dict[str, str]) -> dict[str, Any]:
        """The upstream's whole answer, checked (``UpstreamError`` otherwise)."""
        try:
            http, sent, body = self._chat_request(prepared, headers)
            response, content = await self._whole("POST", "/chat/completions", sent, body, http)
        except HTTPError as exc:
            raise failure(exc) from None
        answer = _json_or_none(content)
        if response.status_code >= 400:
            raise _upstream_status(response.status_code, answer)
        problem = shape_problem(answer)
        if problem is not None:
            raise UpstreamError(502, "bad_upstream", f"the model server's answer is not a chat "
                                f"completion: {problem}")
        return answer

    # -- whole answers ----------------------------------------------------------------------

    def _prepared(self, body: dict[str, Any], *, stream: bool, raw: bytes | None = None
                  ) -> tuple[Prepared, None] | tuple[None, tuple[int, dict[str, Any], dict]]:
        """The request made ready for upstream, or the 400 that answers it (counted)."""
        try:
            prepared = prepare(body, self.models, raw)
        except SettingsError as exc:
            problem: str | None = str(exc)
        else:
            if prepared.decode:  # built here: the tools were checked when it was built
                prepared.codec = self.pool.ready(prepared.tools, prepared.options or None)
            problem = None if prepared.codec is not None else _tools_problem(prepared)
            if problem is None:
                return prepared, None
        self.metrics.count(stream, "bad_request")
        return None, (400, invalid_request(problem), {})

    async def complete(self, body: dict[str, Any], headers: dict[str, str],
                       raw: bytes | None = None) -> tuple[int, dict[str, Any], dict[str, str]]:
        """A non-streaming completion: (status, JSON body, extra response headers). *raw*:
        the bytes *body* was read from (sent upstream as they are when nothing changes)."""
        prepared, refused = self._prepared(body, stream=False, raw=raw)
        if refused is not None:
            return refused
        try:
            async with self.deadlines.scope(self.config.deadline):
                answer = await self._post(prepared, headers)
                if not prepared.decode:
                    self.metrics.count(False, "unchanged")
                    return 200, answer, {}
                return await self._repair_answer(answer, prepared, headers,
                                                 _Seen(request_id(headers), body.get("model")))
        except TimeoutError:
            error = deadline_passed(self.config.deadline)
        except UpstreamError as exc:
            error = exc
        self.metrics.count(False, "upstream_error")
        return error.status, error.body(), error.headers

    async def _repair_answer(self, answer: dict[str, Any], prepared: Prepared,
                             headers: dict[str, str], seen: _Seen
                             ) -> tuple[int, dict[str, Any], dict[str, str]]:
        choices = answer["choices"]
        # usage reaching max_tokens means cut, whatever finish_reason says (some servers
        # report "tool_calls" for a call the limit cut).
        cut = cut_by_usage(answer.get("usage"), prepared.max_tokens, len(choices))
        pool, codec, tools, options = self.pool, prepared.codec, prepared.tools, prepared.options
        jobs = []
        for c in choices:
            if cut and c.get("finish_reason") != "length":
                seen.truncated = True
                c["finish_reason"] = "length"
            # Each choice's finish_reason reaches the decoder: "length" means a cut call is
            # no call. The message is upstream's answer as orjson read it (json_data: not
            # encoded again).
            jobs.append(pool.asubmit("decode", {
                "message": c["message"], "tools": tools, "options": options,
                "finish_reason": _reason(c.get("finish_reason"))}, codec=codec,
                json_data=True, read_only=True))
        # One choice (nearly always): awaited as it is, without gather's task.
        with decode_span(prepared.upstream.get("model")) as span:  # toolcodec[otel]
            envelopes = [await jobs[0]] if len(jobs) == 1 else await asyncio.gather(*jobs)
            if span.span is not None:
                span.results([e.get("result") for e in envelopes],
                             [c.get("finish_reason") for c in choices])
        failed = None
        for envelope in envelopes:
            if envelope.get("status") != "ok":
                failed = failed or envelope
            elif prepared.forced is not None:
                check_forced(envelope["result"], prepared.forced)
        # The report is built only for an answer that carries it (taken here, as decoded).
        asked = headers.get(REPORT_HEADER) == "1"
        reports = [_report(e) for e in envelopes] if asked or failed else []
        if failed:
            return self._undecoded(failed, reports, seen)
        repairs: list[str] = []
        whats: list[str] = []
        nonce = random_hex(8)  # call ids unique per request, whatever upstream's id
        for choice, envelope in zip(choices, envelopes, strict=True):
            result = envelope["result"]
            outcome, new = _rebuilt(choice["message"], result, nonce, choice.get("index", 0))
            self.metrics.count(False, outcome, result)
            choice["message"] = new
            choice["finish_reason"] = _finish_reason(choice.get("finish_reason"),
                                                     "tool_calls" in new)
            repairs += result.get("repairs") or ()
            errors = result.get("errors")
            if errors:  # what was not made a call is told by an error
                whats += [w for w in unrecognised(result) if w not in whats]
                seen.codes += [e.get("code") for e in errors]
        if asked:
            answer["toolcodec"] = reports
        # each choice's repairs are told once (the header names each once)
        extra = {REPAIRS_HEADER: ",".join(dict.fromkeys(repairs))} if repairs else {}
        if whats:
            extra[UNRECOGNISED_HEADER] = ",".join(whats)
            self.metrics.count_unrecognised(False, whats)
        if whats or seen.truncated:  # else there is no line to write
            self.said(seen, False, whats)
        return 200, answer, extra

    def said(self, seen: _Seen, stream: bool, whats: list[str],
             reason: str | None = None) -> None:
        """The log line of an answer that was flagged, cut, or not decoded (none otherwise)."""
        reason = reason or ("unrecognised" if whats else "truncated" if seen.truncated
                            else None)
        if reason is not None:
            self.log.answer(request_id=seen.request_id, model=seen.model, stream=stream,
                            reason=reason, codes=[c for c in seen.codes if isinstance(c, str)],
                            unrecognised=whats)

    def _undecoded(self, envelope: dict[str, Any], reports: list[dict[str, Any]], seen: _Seen
                   ) -> tuple[int, dict[str, Any], dict[str, str]]:
        """A whole answer that could not be decoded: never relayed as if it had been."""
        error = envelope.get("error") or {}
        status = envelope.get("status")
        code = error.get("code") or status or "error"
        if status == "error" and code == BAD_REQUEST:  # the request's tools or options
            self.metrics.count(False, "bad_request")
            return 400, invalid_request(error.get("message") or "bad request", code), {}
        self.metrics.count(False, "undecoded")
        self.metrics.count_undecoded(False, status)
        self.said(seen, False, [], reason=str(code))
        body = {"error": {"message": "the model's answer could not be decoded: "
                          f"{error.get('message') or status}", "type": "toolcodec_unavailable",
                          "code": code}, "toolcodec": reports}
        return 503, body, {"retry-after": "1", UNDECODED_HEADER: code}

    # -- streams ----------------------------------------------------------------------------

    async def stream(self, body: dict[str, Any], headers: dict[str, str],
                     raw: bytes | None = None) -> tuple[int, Any, dict[str, str]]:
        """Open the upstream stream: (200, the ``Relay``, {}) or (status, error body, headers);
        *raw* as :meth:`complete` takes it."""
        prepared, refused = self._prepared(body, stream=True, raw=raw)
        if refused is not None:
            return refused
        until = asyncio.get_running_loop().time() + self.config.deadline
        try:
            async with asyncio.timeout_at(until):
                http, sent, content = self._chat_request(prepared, headers)
                response = await http.request("POST", "/chat/completions", sent, content)
        except (TimeoutError, HTTPError) as exc:
            self.metrics.count(True, "upstream_error")
            error = failure(exc) if isinstance(exc, HTTPError) else \
                deadline_passed(self.config.deadline)
            return error.status, error.body(), error.headers
        if response.status_code >= 400:
            try:
                async with asyncio.timeout_at(until):  # an error body is under the deadline too
                    content = await read_body(response, self.config.max_upstream_body)
            except (TimeoutError, HTTPError, UpstreamError):
                content = b""
            finally:
                await response.aclose()
            self.metrics.count(True, "upstream_error")
            error = _upstream_status(response.status_code, _json_or_none(content))
            return error.status, error.body(), {}
        from toolcodec.pool.proxy.stream import Relay

        return 200, Relay(self, response, prepared, headers.get(REPORT_HEADER) == "1",
                          until, _Seen(request_id(headers), body.get("model"))), {}

    def decoder_for(self, prepared: Prepared) -> Any:
        """A stream decoder for the request's tools and options (``None`` when unusable)."""
        try:  # blocks are decoded in the pool's workers, off the event loop
            return self.pool.stream(prepared.tools, **prepared.options)
        except (InvalidToolsError, TypeError, ValueError):
            return None


# -- helpers ---------------------------------------------------------------------------------


@dataclass(slots=True)
class _Seen:
    """What the log line of one request needs."""

    request_id: str
    model: Any
    truncated: bool = False  # cut by the length limit, known from usage alone
    codes: list[Any] = field(default_factory=list)  # the decode results' error codes


def _tools_problem(prepared: Prepared) -> str | None:
    """Why the request's tools cannot be decoded with (None: they can): the client's error,
    told before any generation. The codec is cached; workers build their own."""
    if not prepared.decode:
        return None
    try:
        codec_for(prepared.tools)
    except InvalidToolsError as exc:
        return f"tools rejected: {exc}"
    return None


def _rebuilt(message: dict[str, Any], result: dict[str, Any], nonce: str,
             choice_index: int) -> tuple[str, dict[str, Any]]:
    """(outcome, the new message)."""
    new = openai_message(result, f"{nonce}:{choice_index}")
    if result["errors"]:  # a cut call, a refused native call: each told by an error
        new["content"] = without_cut(new["content"], result)  # a cut call's markup is not shown
        kept = unrepaired_natives(result, message.get("tool_calls"))
        if kept:  # broken native calls go on as the model wrote them, after the repaired ones
            new["tool_calls"] = new.get("tool_calls", []) + kept
    outcome = "model_error" if result["errors"] else (
        "repaired" if result["repairs"] or new != _plain(message) else "unchanged")
    return outcome, new


def _plain(message: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in message.items() if k in ("role", "content")}


def _reason(reason: Any) -> str | None:
    """The upstream's finish_reason as a decode job takes it (a string, or nothing)."""
    return reason if isinstance(reason, str) else None


def _finish_reason(reason: Any, calls: bool) -> Any:
    """``tool_calls`` when calls go out, but a cut output stays ``length`` (the client must
    know; the cut call itself was not completed); no calls left: ``stop``, not ``tool_calls``."""
    if reason == "length":
        return reason
    if calls:
        return "tool_calls"
    return "stop" if reason == "tool_calls" else reason


def _report(envelope: dict[str, Any]) -> dict[str, Any]:
    """What the proxy did to one choice: the decode result, or why there is none."""
    if envelope.get("status") != "ok":
        return {"status": envelope.get("status"), "error": envelope.get("error")}
    return {"status": "ok", **envelope["result"]}


def invalid_request(message: str, code: str = BAD_REQUEST) -> dict[str, Any]:
    """The OpenAI-shaped body of an answer that refuses the client's request."""
    return {"error": {"message": message, "type": "invalid_request_error", "code": code}}


def _upstream_status(status: int, answer: Any) -> UpstreamError:
    """An upstream error answer, relayed with its status and its own JSON error body."""
    if isinstance(answer, dict) and isinstance(answer.get("error"), dict):
        return UpstreamError(status, "upstream_error", f"the model server answered {status}",
                             own=answer)
    return UpstreamError(status, "bad_upstream", f"the model server answered {status} with a "
                         "body that is not a JSON error object")


def _json_or_none(content: bytes) -> Any:
    try:
        return orjson.loads(content)
    except orjson.JSONDecodeError:
        return None
