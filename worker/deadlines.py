"""What a job's budget means, for both backends: a time to start by and a time to end by.

A job's budget covers its wait and its run. It may start only while enough of the budget is
left for it to run (``start_by``, set by the caller from a running estimate of how long jobs
of that op take); one that cannot start by then is **shed**: it is answered at once with status
``rejected``, error code ``rejected`` and ``reason: "shed"``, and it never runs. A started job
that is still running at ``deadline`` is stopped (``timeout``). Shedding is overload, said
as such, where a timeout after queueing would look like a slow or broken job.
"""

from __future__ import annotations

from typing import Any

from toolcodec.results.errors import REJECTED
from toolcodec.worker.envelope import error_envelope

SHED = "shed"  # error.reason of a job that could not start within its budget
QUEUE_FULL = "queue_full"  # error.reason of a job refused because the line was full
CLOSED = "closed"  # error.reason of a job refused because the pool is closing


def shed_envelope(op: str, budget_s: float, waited_s: float, reserve_s: float,
                  **details: Any) -> dict[str, Any]:
    """The envelope of a job that could not start within its budget (see the module)."""
    budget_ms, waited_ms, reserve_ms = budget_s * 1000, waited_s * 1000, reserve_s * 1000
    return error_envelope(
        op, "rejected", REJECTED,
        f"job shed: it could not start within its budget (waited {waited_ms:.1f} ms of "
        f"{budget_ms:g} ms; a {op or 'job'} needs about {reserve_ms:.1f} ms to run); not run, "
        "try again later or with more workers",
        reason=SHED, budget_ms=round(budget_ms, 3), waited_ms=round(waited_ms, 3),
        reserve_ms=round(reserve_ms, 3), **details)
