"""Run a job in the calling process, exactly as a worker process runs it.

The job goes through the same bytes a worker receives and sends back (``orjson`` both ways,
``toolcodec.worker.child.answer``), so its envelope is the one a worker would have sent:
a payload that is not JSON data, a result that cannot be encoded and an exception in the
codec are answered the same way. The operator's ceilings are the pool's (``ceiling``), not
this process's environment's, when the pool was given its own.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import orjson
from toolcodec.limits import Limits
from toolcodec.worker.child import answer
from toolcodec.worker.jobs import CEILING, build_codec, codec_ready, run_job


def run_here(job: dict, ceiling: Limits | None = None) -> dict:
    """The envelope a worker would send for ``job``; ``TypeError`` if it is not JSON data
    (a pool answers ``bad_request`` for it before any worker sees it, as here)."""
    data = orjson.dumps(job)
    with _under(ceiling):
        return orjson.loads(answer(run_job, data))


def ready_here(payload: dict, ceiling: Limits | None = None) -> bool:
    """Whether this process has built the codec a decode job with ``payload`` uses."""
    with _under(ceiling):
        return codec_ready(payload)


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
