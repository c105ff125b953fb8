"""Run a job in the calling process, exactly as a worker process runs it.

The job goes through the same bytes a worker receives and sends back (``orjson`` both ways,
``toolcodec.worker.child.answer``), so its envelope is the one a worker would have sent:
a payload that is not JSON data, a result that cannot be encoded and an exception in the
codec are answered the same way. The operator's ceilings are the pool's (``ceiling``), not
this process's environment's, when the pool was given its own.

Given the codec the caller found for the payload (``ready_here``), the tools stay out of those
bytes and the codec is not looked up again: the tools are JSON data (their canonical encoding
is the codec cache's key), and a worker uses them only to find that codec.

A caller whose payload is JSON data as ``orjson.loads`` gives it (``json_data``: dicts with
string keys, lists, strings, integers, floats, booleans and None, as a proxy's parsed answer
is) spares the job's encoding: such a payload is its own encoding decoded, and the codec does
not change its input. The envelope still goes through its bytes, as a worker's does (a result
that cannot be encoded is an ``internal_error``, tuples become lists, NaN null).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import orjson
from toolcodec.decoding.codec import ToolCallCodec
from toolcodec.results.limits import Limits
from toolcodec.worker.child import answer
from toolcodec.worker.envelope import internal_error
from toolcodec.worker.jobs import (
    CEILING,
    GIVEN_CODEC,
    build_codec,
    codec_ready,
    run_given,
    run_job,
)


def run_here(job: dict, ceiling: Limits | None = None,
             codec: ToolCallCodec | None = None, json_data: bool = False) -> dict:
    """The envelope a worker would send for ``job``; ``TypeError`` if it is not JSON data
    (a pool answers ``bad_request`` for it before any worker sees it, as here). ``codec``:
    what ``ready_here`` found for the job's payload, under the same ceiling; ``json_data``
    (with ``codec``): the job is JSON data as ``orjson.loads`` gives it, run as it is."""
    if codec is not None and json_data:
        return _run_decoded(job, ceiling, codec)
    if codec is None:
        data, handler = orjson.dumps(job), run_job
    else:
        payload = job["payload"]
        data = orjson.dumps({**job, "payload": {k: v for k, v in payload.items()
                                                if k != "tools"}})
        handler = _given(codec, payload)
    token = CEILING.set(ceiling)  # not a context manager: a generator's steps per job
    try:
        return orjson.loads(answer(handler, data))
    finally:
        CEILING.reset(token)


def _run_decoded(job: dict, ceiling: Limits | None, codec: ToolCallCodec) -> dict:
    """``run_here`` for a job that is its own encoding decoded: what ``answer`` does after
    decoding it, and its envelope through bytes."""
    token, given = CEILING.set(ceiling), GIVEN_CODEC.set(codec)
    try:
        out = run_job(job)
    finally:
        GIVEN_CODEC.reset(given)
        CEILING.reset(token)
    return _through_bytes(out, job.get("op"), job.get("id"))


def run_built(op: str, job_id: str, payload: dict, deadline: float | None,
              codec: ToolCallCodec, read_only: bool = False) -> dict:
    """``run_here`` with ``json_data`` for a job the caller made itself, well formed, of an
    op of ``GIVEN_OPS`` (``toolcodec.worker.jobs.run_given``), with the codec ``ready_here``
    found for its payload: the same envelope, without the job's dict, its shape checked again
    or the context a looked-up codec needs. ``read_only``: the caller only reads the envelope
    and encodes it again, so it is checked for its encoding but not decoded from it (it may
    then share values with the payload and the codec; encoded, it is a worker's)."""
    return _through_bytes(run_given(op, job_id, payload, deadline, codec), op, job_id,
                          decoded=not read_only)


def _through_bytes(out: dict, op: Any, job_id: Any, decoded: bool = True) -> dict:
    """The envelope *out* of a job run here as a worker's bytes carry it (``op`` and
    ``job_id``: the job's, for an ``internal_error``); without *decoded*, *out* itself once
    it is known to encode (to the same bytes)."""
    try:
        data = orjson.dumps(out)
        return orjson.loads(data) if decoded else out
    except Exception as exc:  # a result that cannot be encoded, as a worker answers it
        return orjson.loads(orjson.dumps(internal_error({"id": job_id, "op": op}, exc)))


def ready_here(payload: dict, ceiling: Limits | None = None) -> ToolCallCodec | None:
    """The codec a decode job with ``payload`` uses, if this process has built it."""
    token = CEILING.set(ceiling)
    try:
        return codec_ready(payload)
    finally:
        CEILING.reset(token)


def _given(codec: ToolCallCodec, payload: dict) -> Any:
    """``run_job`` with the caller's tools put back in the decoded job and ``codec`` as its
    codec."""
    def handler(job: dict) -> dict:
        if "tools" in payload:
            job["payload"]["tools"] = payload["tools"]
        token = GIVEN_CODEC.set(codec)
        try:
            return run_job(job)
        finally:
            GIVEN_CODEC.reset(token)
    return handler


def build_here(payload: dict, ceiling: Limits | None = None) -> None:
    """Build the codec a decode job with ``payload`` uses (quiet if it is refused)."""
    with _under(ceiling):
        build_codec(payload)


@contextmanager
def _under(ceiling: Limits | None) -> Iterator[None]:
    """The jobs' ceilings are ``ceiling`` (None: the environment's) inside the block."""
    token = CEILING.set(ceiling)
    try:
        yield
    finally:
        CEILING.reset(token)
