"""Bounded ``model`` and ``format`` label values for the proxy's per-model series.

A request names any model it likes, so its ``model`` field is never a label value itself:
the label is the model config entry it matched (the name or pattern the operator wrote), else
the defaults' preset (``preset:qwen3``), else ``other``. The values are as many as the
operator's config has entries. ``format`` is the format id of a result's first call (a
registered format, at most :data:`MAX_FORMATS` distinct values, then ``other``), or ``none``
when the answer has no call.

:func:`note_request` is called where a proxied request's options are resolved; it also puts
the model and its preset in the log context (``toolcodec.worker.logs``). The labels live in a
context variable for the rest of the request, so the code that counts need not carry them.
"""

from __future__ import annotations

import fnmatch
import threading
from contextvars import ContextVar
from typing import Any

from toolcodec.worker.logs import MODEL, PRESET

OTHER = "other"
MAX_FORMATS = 64
MODEL_LABEL: ContextVar[str] = ContextVar("toolcodec_model_label", default=OTHER)
_formats_seen: set[str] = set()
_lock = threading.Lock()


def model_label(settings: Any, model: Any) -> str:
    """The label of *model* under *settings* (a ``ModelSettings``)."""
    if isinstance(model, str):
        for pattern, _ in settings.models:
            if pattern == model:
                return pattern
        for pattern, _ in settings.models:
            if any(c in pattern for c in "*?[") and fnmatch.fnmatchcase(model, pattern):
                return pattern
    preset = settings.defaults.get("preset")
    return f"preset:{preset}" if isinstance(preset, str) else OTHER


def preset_of(settings: Any, model: Any, override: Any) -> str | None:
    """The preset a request decodes with, if one is named (its override's, else its entry's,
    else the defaults')."""
    if isinstance(override, dict) and isinstance(override.get("preset"), str):
        return override["preset"]
    entry = settings.entry(model) if isinstance(model, str) else None
    for options in (entry or {}, settings.defaults):
        if isinstance(options.get("preset"), str):
            return options["preset"]
    return None


def note_request(settings: Any, model: Any, override: Any = None, seen: Any = None) -> None:
    """Remember the request's model label, and its model and preset for the logs
    (*settings*' ``seen`` answers them per model name; *seen*: its answer, when the caller
    has it)."""
    _, label, preset = seen or settings.seen(model)
    MODEL_LABEL.set(label)
    MODEL.set(model if isinstance(model, str) else None)
    if isinstance(override, dict) and isinstance(override.get("preset"), str):
        preset = override["preset"]  # preset_of's first answer
    PRESET.set(preset)


def format_label(result: dict[str, Any] | None) -> str:
    """The format of *result*'s first call, ``none`` without calls, bounded."""
    calls = (result or {}).get("calls") or []
    name = calls[0].get("format") if calls and isinstance(calls[0], dict) else None
    if not isinstance(name, str):
        return "none" if not calls else OTHER
    if name in _formats_seen:
        return name
    with _lock:
        if len(_formats_seen) >= MAX_FORMATS:
            return OTHER
        _formats_seen.add(name)
    return name
