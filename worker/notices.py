"""What a job tells its pool while it runs, before its answer.

A job whose tool set the worker has not built yet builds its codec first. That build is not
parsing, and its time must not count against the job's parse budget: the pool would kill the
worker mid-build, and the next job of that tool set would build (and overrun) again. So the
worker says when a build starts and ends (:data:`NOTICE`, set by the worker process for the
process backend's workers), and the pool moves the job's deadline by what the build took.
"""

from __future__ import annotations

from collections.abc import Callable
from contextvars import ContextVar

BUILDING = "building"  # the job's codec is being built; the parse has not started
BUILT = "built"  # the build is over; the parse starts now

# Called with BUILDING / BUILT around a codec build, where a pool listens (None: nobody does).
NOTICE: ContextVar[Callable[[str], None] | None] = ContextVar("toolcodec_notice", default=None)

# The key of an interim frame: a dict holding it is a notice, never a job's answer.
FRAME_KEY = "_notice"
