"""The operator's ceilings on what one job may ask the codec to parse.

The operator sets them for the worker process (``TOOLCODEC_MAX_CHARS`` and
``TOOLCODEC_MAX_DEPTH`` in its environment, or ``toolcodec worker --max-chars/--max-depth``);
the default is the codec's ``DEFAULT_LIMITS``. A job's ``options.limits`` may only lower them:
a larger value is clamped to the ceiling, so no caller can switch the size or depth checks
off. A malformed value is a ``bad_request``.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

from toolcodec.results.limits import DEFAULT_LIMITS, ENCODABLE_DEPTH, Limits

ENV = {"max_chars": "TOOLCODEC_MAX_CHARS", "max_depth": "TOOLCODEC_MAX_DEPTH"}


class LimitsError(ValueError):
    """A limit that is not a positive integer; the message names it."""


def operator_limits(environ: Mapping[str, str] | None = None) -> Limits:
    """The ceilings from the environment (``DEFAULT_LIMITS`` where unset)."""
    env = os.environ if environ is None else environ
    values = {}
    for field, name in ENV.items():
        raw = env.get(name)
        if raw is None or raw.strip() == "":
            continue
        try:
            values[field] = int(raw)
        except ValueError:
            raise LimitsError(f"{name} must be a positive integer, got {raw!r}") from None
        if values[field] < 1:
            raise LimitsError(f"{name} must be a positive integer, got {raw!r}")
        if field == "max_depth" and values[field] > ENCODABLE_DEPTH:
            raise LimitsError(f"{name} is at most {ENCODABLE_DEPTH} (deeper values cannot be "
                              f"encoded as JSON), got {raw!r}")
    return Limits(**{**_fields(DEFAULT_LIMITS), **values})


def job_limits(requested: Any, ceiling: Limits) -> Limits:
    """The limits for one job: *requested* (a job's ``options.limits``) under *ceiling*."""
    if requested is None:
        return ceiling
    if isinstance(requested, Limits):
        requested = _fields(requested)
    if not isinstance(requested, dict):
        raise LimitsError(f"options.limits must be an object, got {type(requested).__name__}")
    unknown = sorted(set(requested) - set(ENV))
    if unknown:
        raise LimitsError(f"options.limits: unknown field(s) {unknown}; expected {sorted(ENV)}")
    values = _fields(ceiling)
    for field, value in requested.items():
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise LimitsError(f"options.limits.{field} must be a positive integer, "
                              f"got {value!r:.40}")
        values[field] = min(value, values[field])
    return Limits(**values)


def _fields(limits: Limits) -> dict[str, int]:
    return {field: getattr(limits, field) for field in ENV}
