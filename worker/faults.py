"""Fault-injection ops for testing deadlines and crash handling.

:mod:`toolcodec.worker.jobs` exposes them only when the worker's environment has
``TOOLCODEC_FAULT_INJECTION=1``; they are never reachable in a normal deployment.
"""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Callable

from toolcodec.worker.envelope import BadRequest

MAX_SECONDS = 600.0


def _seconds(payload: dict) -> float:
    value = payload.get("seconds")
    number = isinstance(value, int | float) and not isinstance(value, bool)
    if not number or not 0 <= value <= MAX_SECONDS:
        raise BadRequest(
            f"payload field 'seconds' must be a number from 0 to {MAX_SECONDS:g}, got {value!r}",
            "payload.seconds",
        )
    return float(value)


def sleep(payload: dict) -> dict:
    """Block in a system call for ``seconds`` (a stuck I/O wait)."""
    seconds = _seconds(payload)
    time.sleep(seconds)
    return {"slept": seconds}


def spin(payload: dict) -> dict:
    """Burn CPU in a Python loop for ``seconds`` (a runaway parse)."""
    seconds = _seconds(payload)
    end = time.perf_counter() + seconds
    loops = 0
    while time.perf_counter() < end:
        loops += 1
    return {"spun": seconds, "loops": loops}


def crash(payload: dict) -> dict:
    """Kill the worker process abruptly, as a segfault or the OOM killer would."""
    os.kill(os.getpid(), signal.SIGKILL)
    return {}  # not reached


FAULT_OPS: dict[str, Callable[[dict], dict]] = {"_sleep": sleep, "_spin": spin, "_crash": crash}
