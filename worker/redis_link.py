"""Whether a worker process reaches Redis: logged once per change, retried with a backoff.

Every lane of ``toolcodec worker`` talks to Redis on its own connection, and each of them
fails on its own when Redis goes away. Logging each failure filled the log with ~10 lines
a second per lane; the process logs one line when Redis becomes unreachable and one when it
answers again, and each lane waits a growing delay between its attempts.
"""

from __future__ import annotations

import logging
import random
import threading
import time

# A lane's first retry comes quickly (a Redis restart or a failover takes a moment); the
# delay doubles up to the cap, so work resumes within about a second of Redis returning.
FIRST_DELAY_S = 0.02
MAX_DELAY_S = 1.0


class RedisLink:
    """The process's view of Redis, shared by its lanes; logs only when the state changes."""

    def __init__(self, logger: logging.Logger) -> None:
        self.log = logger
        self._lock = threading.Lock()
        self._down_since: float | None = None
        self._failures = 0

    @property
    def down(self) -> bool:
        return self._down_since is not None

    def failed(self, exc: BaseException) -> None:
        """A Redis command failed: no connection, no answer, or refused."""
        with self._lock:
            self._failures += 1
            if self._down_since is not None:
                return
            self._down_since = time.monotonic()
        self.log.error("Redis unavailable (%s: %s); retrying with a backoff of up to %.0f s, "
                       "logged again when it answers", type(exc).__name__, exc, MAX_DELAY_S)

    def answered(self) -> None:
        """A Redis command succeeded."""
        if self._down_since is None:  # the common case: no lock on the job path
            return
        with self._lock:
            if self._down_since is None:
                return
            down_for, failures = time.monotonic() - self._down_since, self._failures
            self._down_since, self._failures = None, 0
        self.log.warning("Redis answers again after %.1f s unavailable (%d failed attempts)",
                         down_for, failures)


class Backoff:
    """One lane's delays between attempts: doubling from :data:`FIRST_DELAY_S` up to
    :data:`MAX_DELAY_S`, each drawn between half and all of it so lanes do not retry in step.
    """

    def __init__(self, first: float = FIRST_DELAY_S, cap: float = MAX_DELAY_S) -> None:
        self.first = first
        self.cap = cap
        self._next = first

    def next(self) -> float:
        """The delay before the next attempt."""
        delay = self._next
        self._next = min(self._next * 2, self.cap)
        return random.uniform(delay / 2, delay)

    def reset(self) -> None:
        self._next = self.first
