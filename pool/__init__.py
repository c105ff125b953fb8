"""Dispatch codec jobs to worker processes or to Redis/RQ: ``from pool import Pool``."""

from toolcodec.pool.api import Pool

__all__ = ["Pool"]
