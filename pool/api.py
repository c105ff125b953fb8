"""``Pool``: the one object callers use, whichever backend runs the jobs."""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Protocol

import orjson
from prometheus_client import CollectorRegistry
from toolcodec.decoding.codec import ToolCallCodec
from toolcodec.pool import door
from toolcodec.pool.inline import Inline
from toolcodec.results.errors import BAD_REQUEST
from toolcodec.results.limits import Limits
from toolcodec.worker.envelope import complete, error_envelope
from toolcodec.worker.limits import ENV as LIMIT_ENV
from toolcodec.worker.limits import operator_limits
from toolcodec.worker.metrics import Metrics

BACKENDS = ("process", "rq")


class Backend(Protocol):
    """What ``Pool`` needs from a backend (``ProcessBackend``, ``RQBackend``).

    ``Pool`` has already checked the op (a string), the payload's size and the budget
    (``timeout_ms``: None for the backend's default, else a positive finite number of
    milliseconds, at most one hour) before calling. A backend answers every call with a
    complete envelope (``toolcodec.worker.envelope.complete``), counts it on its ``Metrics``
    (label ``backend``) and never raises. ``arrived`` (a ``time.monotonic()``, passed only
    when given) moves the start of the budget back to when the caller's request arrived.
    Its constructor raises ``TypeError`` on an option it does not know. ``asubmit`` and
    ``map`` are optional: without them ``Pool`` runs ``submit`` in threads.
    """

    backend: str  # the value of the metrics' ``backend`` label, and of envelopes' "backend"

    def submit(self, op: str, payload: Any, *, timeout_ms: float | None = None,
               arrived: float | None = None) -> dict: ...

    def close(self, timeout: float = 5.0) -> None: ...


class Pool:
    """Run codec jobs under hard deadlines and return job envelopes (see README).

    :param backend: ``"process"`` (embedded worker processes, the default) or ``"rq"``
        (Redis/RQ workers started with ``toolcodec worker``).
    :param workers: process backend: how many worker processes (default: CPU count).
    :param timeout_ms: default budget of one call, counted from the call (or from the
        request's ``arrived`` time), queueing included. A job starts only while the budget
        still holds its expected run time; one that cannot is shed: status ``rejected``,
        ``error.reason`` ``"shed"`` (docs/pool.md, "Capacity: shedding").
    :param queue_size: how many calls may wait for a worker before ``submit`` answers
        ``rejected`` (the RQ backend's ``max_queue``).
    :param metrics: where outcomes are counted; by default a :class:`Metrics` on
        ``registry`` (the prometheus_client default registry if that is None too).
    :param max_payload_chars: a payload with more characters than this (strings and
        container items, counted without encoding) is answered ``payload_too_large`` at
        once, before it is encoded or enqueued; by default the operator's ``max_chars``
        ceiling plus room for tools and options.
    :param limits: process backend: the operator's ceilings for the workers, a
        ``codec.Limits`` or a dict with ``max_chars`` and/or ``max_depth`` (fields not given
        come from ``TOOLCODEC_MAX_CHARS`` / ``TOOLCODEC_MAX_DEPTH``, else the codec's
        defaults). A payload's ``options.limits`` may only lower them.
    :param inline_max_chars: ``decode`` and ``decode_block`` jobs whose payload, tools aside,
        has at most this many characters run in the calling thread, without a round trip
        to a worker, once this process has built their tools' codec; their envelopes say
        ``"backend": "inline"`` (docs/pool.md, "Small jobs run inline"). 0, the default,
        sends every job to the backend.
    :param backend_options: passed to the backend, e.g. ``redis_url=`` and ``queue=`` for
        RQ, ``handler=`` or ``start_method=`` for processes.

    Envelopes are ``{"status", "op", "backend", "result", "error", "elapsed_ms"}``; no call
    raises on a bad payload or a failed job. Use as a context manager, or call
    :meth:`close`.
    """

    def __init__(
        self,
        backend: str = "process",
        *,
        workers: int | None = None,
        timeout_ms: float = 50,
        queue_size: int | None = None,
        metrics: Metrics | None = None,
        registry: CollectorRegistry | None = None,
        max_payload_chars: int | None = None,
        limits: Limits | dict[str, int] | None = None,
        inline_max_chars: int = 0,
        **backend_options: Any,
    ) -> None:
        if backend not in BACKENDS:
            raise ValueError(f"backend must be one of {BACKENDS}, got {backend!r}")
        budget, why = door.check_budget(timeout_ms, timeout_ms)
        if budget is None:
            raise ValueError(why)
        self.backend = backend
        self.timeout_ms = budget * 1000.0
        ceiling = _ceiling(backend, limits)
        if ceiling is not None:
            backend_options["limits"] = ceiling
        self.max_payload_chars = (door.default_max_payload_chars(ceiling)
                                  if max_payload_chars is None else int(max_payload_chars))
        self.metrics = metrics if metrics is not None else Metrics(registry)
        self._impl = _make_backend(
            backend, workers, self.timeout_ms, queue_size, self.metrics, backend_options
        )
        self._threads: ThreadPoolExecutor | None = None
        self._tool_sizes: dict[int, tuple[Any, int]] = {}  # id(codec): (codec, tools' size)
        # id(codec): (codec, the workers' key for its tool set, when they may be asked again,
        # their last answer), see ``prepare``
        self._prepare_keys: dict[int, tuple[Any, bytes | None, float, bool]] = {}
        # Jobs run inline apply the same ceilings as the workers: the pool's, else the
        # environment the process backend's workers inherit from this process.
        self._inline = Inline(inline_max_chars, ceiling or operator_limits(), self.metrics) \
            if inline_max_chars > 0 else None

    def submit(self, op: str, payload: dict, *, timeout_ms: float | None = None,
               arrived: float | None = None, codec: ToolCallCodec | None = None,
               json_data: bool = False, read_only: bool = False) -> dict:
        """Run one job and return its envelope within ``timeout_ms`` (plus a small grace).

        ``arrived`` (a ``time.monotonic()``): when the request that asks for the job arrived,
        if it waited before this call (in an HTTP server's queue); the budget counts from
        then, and a job that can no longer start in what is left is shed (``rejected``).
        ``codec``: what :meth:`ready` answered for the payload's tools and options (a job run
        in this process then does not look it up again). ``json_data``: the payload is JSON
        data as ``orjson.loads`` gives it (dicts with string keys, lists, strings, numbers,
        booleans, None); a job given its codec and run in this process then takes it as it
        is, without encoding it (the envelope is the same). ``read_only`` (with ``json_data``):
        the caller only reads the envelope, never changes what it holds, and encodes it
        again; a job run in this process then answers its envelope as made, checked for its
        encoding but not decoded from it, so that values in it may be the payload's or the
        codec's own (encoded, it is byte for byte what it would be otherwise).
        Never raises: a bad op, budget or oversized payload is answered at once.
        """
        if codec is not None and json_data:
            here = self._given_here(op, payload, timeout_ms, arrived, codec, read_only)
            if here is not None:
                return here
        start = time.monotonic()
        ms, refused, rest = self._door(op, payload, timeout_ms, codec)
        if refused is not None:
            return self._answer_now(op, start, refused)
        here = self._run_inline(op, payload, ms, arrived, codec, json_data, rest, read_only)
        if here is not None:
            return here
        return self._impl.submit(op, payload, timeout_ms=ms, **_arrival(arrived))

    def map(
        self, op: str, payloads: Iterable[dict], *, timeout_ms: float | None = None
    ) -> list[dict]:
        """Run one job per payload concurrently; the envelopes keep the payloads' order.

        Never raises: ``payloads`` that cannot be iterated give one ``bad_request``.
        """
        start = time.monotonic()
        try:
            items = list(payloads)
        except Exception as exc:  # noqa: BLE001 - not an iterable, or one that fails
            name = op if isinstance(op, str) else ""
            why = f"payloads must be an iterable of objects: {type(exc).__name__}: {exc}"
            return [self._answer_now(op, start, error_envelope(
                name, "error", BAD_REQUEST, why, field="payloads"))]
        out: list[dict | None] = [None] * len(items)
        ms, accepted = 0.0, []
        for i, payload in enumerate(items):
            ms, refused, _ = self._door(op, payload, timeout_ms)
            if refused is not None:
                out[i] = self._answer_now(op, start, refused)
            else:
                accepted.append(i)
        if accepted:
            for i, envelope in zip(accepted, self._map([items[i] for i in accepted], op, ms),
                                   strict=True):
                out[i] = envelope
        return out  # type: ignore[return-value]

    def _map(self, items: list[dict], op: str, ms: float) -> list[dict]:
        native = getattr(self._impl, "map", None)
        if native is not None:
            return native(op, items, timeout_ms=ms)
        if self._threads is None:
            self._threads = ThreadPoolExecutor(16, thread_name_prefix="toolcodec-pool-map")
        futures = [self._threads.submit(self._impl.submit, op, p, timeout_ms=ms) for p in items]
        return [f.result() for f in futures]

    async def asubmit(self, op: str, payload: dict, *, timeout_ms: float | None = None,
                      arrived: float | None = None, codec: ToolCallCodec | None = None,
                      json_data: bool = False, read_only: bool = False) -> dict:
        """Like :meth:`submit`, awaitable; the event loop stays free while the job runs."""
        if codec is not None and json_data:
            here = self._given_here(op, payload, timeout_ms, arrived, codec, read_only)
            if here is not None:
                return here
        start = time.monotonic()
        ms, refused, rest = self._door(op, payload, timeout_ms, codec)
        if refused is not None:
            return self._answer_now(op, start, refused)
        here = self._run_inline(op, payload, ms, arrived, codec, json_data, rest, read_only)
        if here is not None:
            return here
        native = getattr(self._impl, "asubmit", None)
        if native is not None:
            return await native(op, payload, timeout_ms=ms, **_arrival(arrived))
        return await asyncio.to_thread(self._impl.submit, op, payload, timeout_ms=ms,
                                       **_arrival(arrived))

    def _given_here(self, op: str, payload: Any, timeout_ms: Any, arrived: float | None,
                    codec: ToolCallCodec, read_only: bool) -> dict | None:
        """The envelope of a job given its codec and JSON data when it runs in this process,
        for the usual such job (a proxy's decode, on every request: a plain budget, tools, a
        small rest): the door's checks and the inline ones in one step, each as
        :meth:`_door` and :meth:`_run_inline` decide it. None sends the job the general way,
        which answers every other one (refusals included)."""
        inline = self._inline
        if inline is None or type(payload) is not dict:
            return None
        ms = self.timeout_ms if timeout_ms is None else door.plain_budget_ms(timeout_ms)
        tools = payload.get("tools")
        if ms is None or type(tools) is not list or not tools:
            return None
        rest = door.rest_size(payload, self.max_payload_chars, self._tools_size(codec, tools),
                              inline.max_chars)
        if rest is None or not inline.fits(op, payload, rest):
            return None
        return inline.run(op, payload, ms / 1000.0, arrived, codec, True, read_only)

    def _run_inline(self, op: str, payload: dict, ms: float, arrived: float | None,
                    known: ToolCallCodec | None = None, json_data: bool = False,
                    rest: int | None = None, read_only: bool = False) -> dict | None:
        """The envelope of the job run in this process, or None if it does not run here."""
        inline = self._inline
        if inline is None:
            return None
        codec = inline.takes(op, payload, known, rest)
        # json_data holds for the payload the caller gave with the codec it found for it
        return None if codec is None else inline.run(op, payload, ms / 1000.0, arrived, codec,
                                                     json_data and known is not None,
                                                     read_only)

    def _door(self, op: Any, payload: Any, timeout_ms: Any,
              codec: ToolCallCodec | None = None) -> tuple[float, dict | None, int | None]:
        """(budget in ms, the refusal or None, what the payload counts without its tools when
        that was counted: the inline size check's measure, not counted twice)."""
        budget, why = door.check_budget(timeout_ms, self.timeout_ms)
        if budget is None:
            name = op if isinstance(op, str) else ""
            return 0.0, error_envelope(name, "error", BAD_REQUEST, why,
                                       field="timeout_ms"), None
        tools = payload.get("tools") if codec is not None and isinstance(payload, dict) else None
        known = self._tools_size(codec, tools) if isinstance(tools, list) and tools else None
        if known is not None and isinstance(op, str):
            settles = self._inline.max_chars if self._inline is not None else 0
            rest = door.rest_size(payload, self.max_payload_chars, known, settles)
            if rest is not None:
                return budget * 1000.0, None, rest
        return budget * 1000.0, door.refusal(op, payload, self.max_payload_chars, known), None

    def _tools_size(self, codec: Any, tools: list) -> int:
        """``door.payload_size`` of a job's tools, counted once per codec: the codec a caller
        found for them (``ready``) was built from tools of the same canonical JSON, which
        have the same size. Spares each job the tools' encoding the size check made."""
        sizes = self._tool_sizes
        held = sizes.get(id(codec))
        if held is not None and held[0] is codec:
            return held[1]
        if len(sizes) >= _TOOL_SIZES:
            sizes.clear()
        size = door.payload_size(tools, self.max_payload_chars)
        sizes[id(codec)] = (codec, size)
        return size

    def _answer_now(self, op: Any, start: float, out: dict) -> dict:
        envelope = complete(out, out["op"], self.backend, start)
        self.metrics.observe(envelope["op"], self.backend, envelope)
        return envelope

    def ready(self, tools: list[dict] | None, options: dict | None = None
              ) -> ToolCallCodec | None:
        """The codec a ``decode`` job with ``tools`` and ``options`` runs with in this process,
        if it has built it (small jobs run inline); None otherwise, or without inline jobs.
        Nothing is built: see :meth:`prepare`. Given to :meth:`submit` or :meth:`asubmit` as
        ``codec`` for a payload with the same tools and options, it spares those a second look
        up (the canonical encoding of the tools, the codec cache's key)."""
        if self._inline is None:
            return None
        return self._inline.ready(_codec_payload(tools, options))

    def prepare(self, tools: list[dict] | None, options: dict | None = None, *,
                built_here: bool = False, codec: ToolCallCodec | None = None) -> bool:
        """Build the codec for ``tools`` (and the job ``options``) ahead of the jobs that use
        them, off any job's budget; returns at once.

        A job whose tool set its worker has not built pays the build first: that time is not
        charged to its parse budget, but its caller waits for it (up to one second). Call this
        as soon as the tools are known (a chat backend: when the request arrives, while the
        model generates) so that the decode finds them built: each idle worker of the process
        backend builds them (the most recent eight tool sets; a worker started later builds
        them too), and jobs run inline find them built here. True if it was taken; False
        where the backend has nothing to prepare (RQ workers build on their first job) or
        the tools are not JSON data. ``built_here``: :meth:`ready` has just found them built in
        this process; only the workers are asked. ``codec``: what :meth:`ready` answered for
        them (implies ``built_here``): the workers' key for the tool set (its canonical JSON)
        is then kept per codec, not encoded for every call (a proxy asks on every request),
        and the workers are asked at most every :data:`PREPARE_AGAIN_S` for it (the answer
        in between is the last one).
        """
        if codec is not None:
            held = self._prepare_keys.get(id(codec))
            if held is not None and held[0] is codec and time.monotonic() < held[2]:
                return held[3]  # asked a moment ago: the workers have it in hand
        elif self._inline is not None and not built_here:
            self._inline.prepare(_codec_payload(tools, options))
        native = getattr(self._impl, "prepare", None)
        if native is None:
            return False
        if codec is None:
            return bool(native(tools, options))
        if held is None or held[0] is not codec:
            if len(self._prepare_keys) >= _TOOL_SIZES:
                self._prepare_keys.clear()
            # tools of the same canonical JSON build the same codec: one key serves them all
            key = _prepare_key(_codec_payload(tools, options))
        else:
            key = held[1]
        taken = bool(native(tools, options, key=key)) if key is not None else False
        self._prepare_keys[id(codec)] = (codec, key, time.monotonic() + PREPARE_AGAIN_S, taken)
        return taken

    def stream(self, tools: list[dict] | None = None, *, timeout_ms: float | None = None,
               id_prefix: str | None = None, **options: Any) -> Any:
        """An async stream decoder (``toolcodec.pool.stream.PoolStream``): ``await s.feed(chunk)``,
        ``await s.close()``, ``s.result()``; each completed tool-call block is decoded in a
        worker under ``timeout_ms`` (the pool's budget by default)."""
        from toolcodec.pool.stream import PoolStream

        return PoolStream(self, tools, timeout_ms=timeout_ms, id_prefix=id_prefix, **options)

    def close(self, timeout: float = 5.0) -> None:
        """Stop taking jobs, let in-flight ones finish for up to ``timeout`` s, stop workers."""
        inline, self._inline = self._inline, None  # a closed pool runs nothing, here either
        if inline is not None:
            inline.close()
        self._impl.close(timeout=timeout)
        if self._threads is not None:
            self._threads.shutdown(wait=False, cancel_futures=True)

    @property
    def impl(self) -> Any:
        """The backend object (``ProcessBackend`` or ``RQBackend``), for diagnostics."""
        return self._impl

    def __enter__(self) -> Pool:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _arrival(arrived: float | None) -> dict[str, float]:
    """``arrived=`` for a backend, only when given (a backend without it keeps working)."""
    return {} if arrived is None else {"arrived": arrived}


# A codec's tool set is asked of the workers again after this long at the earliest: each ask
# keeps it among the tool sets they hold ready, and a proxy asks on every request.
PREPARE_AGAIN_S = 1.0
_TOOL_SIZES = 64  # codecs whose tools' size (and prepare key) is kept (the cache holds fewer)


def _codec_payload(tools: list[dict] | None, options: dict | None) -> dict:
    """The fields of a job's payload its codec is built from."""
    return {"tools": tools} if options is None else {"tools": tools, "options": options}


def _prepare_key(payload: dict) -> bytes | None:
    """A tool set's key in the workers' preparations: its canonical JSON (None: not JSON)."""
    try:
        return orjson.dumps(payload, option=orjson.OPT_SORT_KEYS)
    except TypeError:
        return None


def _ceiling(backend: str, limits: Limits | dict[str, int] | None) -> Limits | None:
    """The operator's ceilings given to ``Pool``: each field given replaces the workers'
    environment's (``TOOLCODEC_MAX_CHARS``, ``TOOLCODEC_MAX_DEPTH``)."""
    if limits is None:
        return None
    if backend != "process":
        raise ValueError("limits of Redis workers are set where they run: "
                         "toolcodec worker --max-chars/--max-depth")
    fields = ({name: getattr(limits, name) for name in LIMIT_ENV}
              if isinstance(limits, Limits) else limits)
    if not isinstance(fields, dict) or set(fields) - set(LIMIT_ENV) or any(
            isinstance(v, bool) or not isinstance(v, int) for v in fields.values()):
        raise ValueError(f"limits must be a codec.Limits or a dict of positive integers "
                         f"with keys from {sorted(LIMIT_ENV)}, got {limits!r:.80}")
    env = {name: os.environ[name] for name in LIMIT_ENV.values() if name in os.environ}
    env.update({LIMIT_ENV[field]: str(value) for field, value in fields.items()})
    return operator_limits(env)  # LimitsError (a ValueError) names a bad value


def _make_backend(
    backend: str,
    workers: int | None,
    timeout_ms: float,
    queue_size: int | None,
    metrics: Metrics,
    options: dict[str, Any],
) -> Backend:
    if backend == "process":
        from toolcodec.pool.process import DEFAULT_QUEUE_SIZE, ProcessBackend

        size = DEFAULT_QUEUE_SIZE if queue_size is None else queue_size
        return ProcessBackend(
            workers=workers, timeout_ms=timeout_ms, queue_size=size, metrics=metrics, **options
        )
    from toolcodec.pool.rq_backend import RQBackend  # needs redis; loaded only when asked for

    if queue_size is not None:
        options.setdefault("max_queue", queue_size)
    return RQBackend(timeout_ms=timeout_ms, metrics=metrics, **options)
