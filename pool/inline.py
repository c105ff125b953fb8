"""Small decode jobs run in the calling process, without a round trip to a worker.

Under a chat backend's load the round trip costs more than the job: for a decode of a few
hundred characters (about 0.1 ms of codec time) the serving process spent about 0.18 ms
handing the job over and collecting its answer, and the worker about 0.1 ms more receiving
and answering it, most of it in wake-ups on a busy machine (``docs/capacity.md``). So a job
the pool knows to be cheap runs where it was asked for:

- its op is ``decode`` or ``decode_block``, without a fault-injection field (``_sleep_s``:
  a slow worker is what such a job stands for);
- its payload, tools aside, holds at most ``max_chars`` characters (strings and container
  items, as ``toolcodec.pool.door`` counts them). The codec's cost is linear in the text; the
  worst we know at 1024 characters takes 3.5 ms (``tests/benchmarks/bench_inline.py``). This
  bound, not a kill, is what keeps the caller's deadline: a job that runs here cannot be
  stopped, which is why the size is small;
- this process has already built the codec for its tools and options. On a first sight the
  job goes to a worker, and the codec is built here on a background thread, at most
  :data:`BUILDS_PER_S` a second, so that a caller cycling through more tool sets than the
  codec's cache holds cannot keep this process busy building them.

Its envelope is the worker's (``toolcodec.worker.inline``) with ``backend`` ``"inline"``, and
it is counted under that label. A job starts only while its budget still holds its expected
run time (the op's recent inline runs, :class:`toolcodec.pool.admission.RunTimes`); one that
cannot, because its budget was spent before it got here (``arrived``) or is smaller than
that, is shed as a worker's would be: since it could not be stopped once started, it is not
started.
"""

from __future__ import annotations

import itertools
import math
import os
import queue
import threading
import time
from typing import Any

import orjson
from toolcodec.decoding.codec import ToolCallCodec
from toolcodec.pool.admission import RunTimes
from toolcodec.pool.door import payload_size
from toolcodec.results.errors import BAD_REQUEST
from toolcodec.results.limits import Limits
from toolcodec.worker.deadlines import shed_envelope
from toolcodec.worker.envelope import complete, error_envelope
from toolcodec.worker.inline import build_here, ready_here, run_built, run_here
from toolcodec.worker.jobs import GIVEN_OPS, PAYLOAD_FIELDS
from toolcodec.worker.metrics import Metrics

BACKEND = "inline"
OPS = frozenset({"decode", "decode_block"})
BUILDS_PER_S = 20.0
RUN_FLOOR_S = 0.0001  # the least an inline job is expected to take
_PENDING_BUILDS = 8  # tool sets waiting to be built; more are left for a later sight
_CODEC_FIELDS = ("tools", "options")  # what a job's codec is built from
_READY_KEEP = 64  # codecs kept by their payload's JSON (``Inline.ready``)
# Fields of the ops' payloads that name no fault injection (those begin with "_").
_PLAIN_FIELDS = frozenset(k for op in OPS for k in PAYLOAD_FIELDS[op] if k[:1] != "_")


class Inline:
    """Runs the jobs it :meth:`takes`; see the module docstring."""

    def __init__(self, max_chars: int, ceiling: Limits | None,
                 metrics: Metrics | None = None) -> None:
        if max_chars < 1:
            raise ValueError(f"inline max_chars must be at least 1, got {max_chars}")
        self.max_chars = max_chars
        self.ceiling = ceiling
        self.metrics = metrics
        # The whole expected run must fit: unlike a worker's, it cannot be cut short.
        self.run_times = RunTimes(floor=RUN_FLOOR_S)
        self._ids = itertools.count(1)
        self._id_prefix = f"{os.getpid()}-inline-"
        self._builds: queue.Queue[bytes | None] = queue.Queue(_PENDING_BUILDS)
        self._builder: threading.Thread | None = None
        self._lock = threading.Lock()
        self._ready: dict[bytes, ToolCallCodec] = {}  # a payload's JSON: its codec (``ready``)

    def takes(self, op: str, payload: Any, codec: ToolCallCodec | None = None,
              size: int | None = None) -> ToolCallCodec | None:
        """The codec the job runs with here, or None if it does not run here; a first sight of
        its codec has it built for next time. ``codec``: the one :meth:`ready` found for the
        payload's tools and options, not looked up again; ``size``: what the payload counts
        without its tools, when the caller counted it (``toolcodec.pool.door.rest_size``)."""
        if op not in OPS or not isinstance(payload, dict) \
                or not (self._small(payload) if size is None else size <= self.max_chars):
            return None
        if not _PLAIN_FIELDS.issuperset(payload):  # else no key can be a fault's
            for key in payload:
                if isinstance(key, str) and key[:1] == "_":  # fault injection: a worker's
                    return None
        if codec is not None:
            return codec
        codec = ready_here(payload, self.ceiling)
        if codec is None:
            self._build_later(payload)
        return codec

    def fits(self, op: Any, payload: dict, size: int) -> bool:
        """Whether a job whose codec its caller found (``ready``) runs here, its payload
        counting *size* without its tools (as ``takes`` decides, for a payload of the ops'
        plain fields; one with any other field is for ``takes``)."""
        return type(op) is str and op in OPS and size <= self.max_chars \
            and _PLAIN_FIELDS.issuperset(payload)

    def run(self, op: str, payload: dict, budget_s: float, arrived: float | None = None,
            codec: ToolCallCodec | None = None, json_data: bool = False,
            read_only: bool = False) -> dict:
        """Run the job now and return its complete envelope, counted on the metrics;
        ``codec``: what :meth:`takes` answered for it; ``json_data``: the payload is JSON
        data as ``orjson.loads`` gives it (``toolcodec.worker.inline.run_here``);
        ``read_only``: the caller only reads the envelope (``run_built``)."""
        now = time.monotonic()
        start = now if arrived is None or arrived > now else arrived
        left = start + budget_s - now
        reserve = self.run_times.reserve(op, math.inf)  # all of it, whatever the budget
        if left < reserve:
            self.run_times.shed(op)
            out = shed_envelope(op, budget_s, now - start, reserve)
            end = time.monotonic()
        else:
            job_id, deadline = f"{self._id_prefix}{next(self._ids)}", time.time() + left
            if json_data and codec is not None and op in GIVEN_OPS:  # made here: no dict
                out = run_built(op, job_id, payload, deadline, codec, read_only)
            else:
                try:
                    out = run_here({"id": job_id, "op": op, "payload": payload,
                                    "deadline": deadline}, self.ceiling, codec, json_data)
                except TypeError as exc:
                    out = error_envelope(op, "error", BAD_REQUEST,
                                         f"payload is not JSON data: {exc}")
            end = time.monotonic()
            if out["status"] == "ok":
                self.run_times.observe(op, end - now)
        envelope = complete(out, op, BACKEND, start, end)  # one end: run and elapsed time
        if self.metrics is not None:
            self.metrics.observe(op, BACKEND, envelope)
        return envelope

    def _small(self, payload: dict) -> bool:
        size = 0
        for key, value in payload.items():
            if key != "tools":
                size += len(key) + 1 + payload_size(value, self.max_chars - size)
                if size > self.max_chars:
                    return False
        return True

    def ready(self, payload: dict) -> ToolCallCodec | None:
        """The codec jobs with the payload's tools and options run with here, if this process
        has built it (nothing is built).

        Kept by the payload's JSON as it comes (its keys in their order: one encoding, about
        1 µs for a few tools), not looked up each time through the job's checks and the codec
        cache's canonical key (about 6 µs): a proxy asks for every request. The same JSON is
        the same job for a worker, so it gets the same codec; one the codec cache dropped since
        is still that codec."""
        try:
            key = orjson.dumps(payload)
        except TypeError:  # not JSON data: a worker refuses the job
            return ready_here(payload, self.ceiling)
        codec = self._ready.get(key)
        if codec is None:
            codec = ready_here(payload, self.ceiling)
            if codec is not None:
                if len(self._ready) >= _READY_KEEP:
                    self._ready.clear()
                self._ready[key] = codec
        return codec

    def prepare(self, payload: dict) -> None:
        """Have the codec for the payload's tools and options built here, unless it is."""
        if ready_here(payload, self.ceiling) is None:
            self._build_later(payload)

    def _build_later(self, payload: dict) -> None:
        if self._builder is None:
            with self._lock:
                if self._builder is None:
                    self._builder = threading.Thread(target=self._build, daemon=True,
                                                     name="toolcodec-pool-inline-builder")
                    self._builder.start()
        try:  # a copy: the caller's payload is not read from another thread later
            self._builds.put_nowait(orjson.dumps({key: payload[key] for key in _CODEC_FIELDS
                                                  if key in payload}))
        except (queue.Full, TypeError):
            pass  # built on a later sight; not JSON data: a worker refuses the job

    def _build(self) -> None:
        while (data := self._builds.get()) is not None:
            payload = orjson.loads(data)
            if ready_here(payload, self.ceiling) is None:
                build_here(payload, self.ceiling)
                time.sleep(1.0 / BUILDS_PER_S)

    def close(self) -> None:
        """Stop the builder thread (a build under way finishes first)."""
        if self._builder is not None:
            try:
                self._builds.put(None, timeout=1.0)
            except queue.Full:
                pass  # a daemon thread: it ends with the process
