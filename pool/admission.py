"""How long jobs of each op run once started: the reserve a job's budget keeps for its run
when the pool decides whether it may still start (``toolcodec.pool.dispatcher``, and jobs run
inline, ``toolcodec.pool.inline``)."""

from __future__ import annotations


class RunTimes:
    """Per op, a running estimate of how long a job runs once started: what a caller keeps
    of its budget for the run when it decides how long it may wait for a worker.

    The estimate is a high quantile, not the mean: an exponentially weighted mean plus four
    times the weighted mean deviation (for a normal spread that is past the 99th percentile),
    never under ``floor`` (the wake-ups and system calls of a round trip) nor over ``share``
    of the budget, so a job may always wait at least the rest. An op's figures are one
    tuple, replaced whole: updates race only with other updates of the same op and at worst
    lose one observation, so they take no lock.
    """

    ALPHA = 0.05  # weight of a new observation: about the last 20-40 jobs count
    # ... and of one above the mean: the estimate rises fast and eases slowly, since a job
    # started with less than it needs overruns (its answer lost, its worker killed), where
    # one shed by an estimate a little high only waits for a retry.
    ALPHA_UP = 0.25

    def __init__(self, floor: float = 0.001, share: float = 0.5) -> None:
        self.floor, self.share = floor, share
        self._runs: dict[str, tuple[float, float]] = {}  # op: (mean, mean deviation)

    def observe(self, op: str, seconds: float) -> None:
        """Count one job of ``op`` that ran for ``seconds`` (from start to its answer)."""
        known = self._runs.get(op)
        if known is None:
            self._runs[op] = (seconds, seconds / 2)
            return
        mean, dev = known
        alpha = self.ALPHA_UP if seconds > mean else self.ALPHA
        self._runs[op] = (mean + alpha * (seconds - mean),
                          dev + alpha * (abs(seconds - mean) - dev))

    def shed(self, op: str) -> None:
        """A job of ``op`` was shed: ease the estimate towards the floor. Shed jobs do not
        run, so without this one slow outlier (a tool set compiled on first use) could keep
        the estimate high, and every job shed, with nothing left to observe."""
        known = self._runs.get(op)
        if known is not None:
            mean, dev = known
            self._runs[op] = (mean - self.ALPHA * (mean - self.floor), dev - self.ALPHA * dev)

    def reserve(self, op: str, budget: float) -> float:
        """Seconds of ``budget`` kept for the run of a job of ``op``."""
        known = self._runs.get(op)
        estimate = self.floor if known is None else known[0] + 4 * known[1]
        return min(max(estimate, self.floor), self.share * budget)
