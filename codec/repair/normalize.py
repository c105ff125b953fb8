"""Unicode clean-up of decoded payloads: bidi controls out, compatibility forms folded.

Models (and the text they copy from) leave invisible direction marks in keys and values, and
sometimes write keys in full-width or other compatibility forms. A tool would see a key it
does not know, or a file name with a hidden character in it. Only the payload is touched,
never the surrounding content.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Callable
from itertools import islice
from typing import Any

import orjson
from toolcodec.results.errors import CodecError
from toolcodec.schema.fast import all_scalars, all_strings

BIDI_CONTROLS: frozenset[str] = frozenset(
    "\u200e\u200f"  # LEFT-TO-RIGHT MARK, RIGHT-TO-LEFT MARK
    "\u202a\u202b\u202c\u202d\u202e"  # embeddings and overrides, POP DIRECTIONAL FORMATTING
    "\u2066\u2067\u2068\u2069"  # isolates, POP DIRECTIONAL ISOLATE
)

_BIDI_RE = re.compile("[\u200e\u200f\u202a-\u202e\u2066-\u2069]")

# Lone surrogates cannot be encoded as UTF-8, so no JSON result could carry them.
_SURROGATE_RE = re.compile("[\ud800-\udfff]")

BIDI_REMOVED = "text.bidi_removed"
NFKC = "text.nfkc"
SURROGATE_REPLACED = "text.surrogate_replaced"


def strip_bidi(text: str) -> tuple[str, bool]:
    """Return *text* without the characters in `BIDI_CONTROLS`, and whether any were removed.

    The very same string object is returned when there was nothing to remove.
    """
    if text.isascii() or _BIDI_RE.search(text) is None:  # isascii: O(1), a flag of the str
        return text, False
    return _BIDI_RE.sub("", text), True


def replace_surrogates(text: str) -> tuple[str, bool]:
    """Return *text* with each surrogate code point replaced by U+FFFD, and whether any was.

    One character stands for one, so offsets into the text stay valid. The same string object
    is returned when there was nothing to replace.
    """
    if text.isascii() or _SURROGATE_RE.search(text) is None:
        return text, False
    return _SURROGATE_RE.sub("\ufffd", text), True


def first_surrogate(text: str) -> int | None:
    """The offset of the first surrogate code point in *text*, or None."""
    m = None if text.isascii() else _SURROGATE_RE.search(text)
    return None if m is None else m.start()


def replace_surrogates_in(value: Any) -> tuple[Any, bool]:
    """`replace_surrogates` over every key and string of a parsed JSON value.

    Returns the input object itself when nothing changed; never mutates it.
    """
    try:  # orjson refuses a surrogate in any key or string: if it encodes, there is none
        orjson.dumps(value)
    except TypeError:  # a surrogate, or not plain JSON data (the walk decides)
        return _replace_surrogates_walk(value)
    return value, False


def _replace_surrogates_walk(value: Any) -> tuple[Any, bool]:
    found: list[str] = []

    def clean(text: str) -> str:
        out, changed = replace_surrogates(text)
        if changed:
            _note(found, SURROGATE_REPLACED)
        return out

    return _walk(value, clean, lambda key, _obj, _out: clean(key)), bool(found)


class NestingTooDeep(ValueError):
    """A payload nests deeper than the limit given to `normalize_payload`."""


def replace_surrogates_in_errors(errors: list[CodecError]) -> bool:
    """`replace_surrogates` over each error's message and details, in place; any replaced?"""
    changed = False
    for i, error in enumerate(errors):
        message, hit = replace_surrogates(error.message)
        details, hit_details = replace_surrogates_in(error.details)
        if hit or hit_details:
            errors[i] = CodecError(error.code, message, details)
            changed = True
    return changed


def normalize_payload(
    value: Any, *, nfkc_strings: bool = False, max_depth: int | None = None
) -> tuple[Any, list[str]]:
    """Remove bidi controls from the keys and strings of a parsed payload; NFKC its keys.

    String values are NFKC-folded too when *nfkc_strings* is true; otherwise they keep their
    characters (a full-width name in a message is the user's business). Only ``dict``,
    ``list`` and ``str`` are looked at; every other value is passed through untouched.

    Returns ``(value, repairs)`` where *repairs* lists ``text.bidi_removed`` and/or
    ``text.nfkc`` in order of first use. When nothing changed, the input object itself is
    returned, so callers can test ``result is value``. The input is never mutated.

    If normalising a key would make it collide with another key of the same object, that key
    is left as it was: merging the two would silently drop a value.

    Raises `NestingTooDeep` when containers nest deeper than *max_depth* (if given).
    """
    if isinstance(value, dict) and _flat_ascii(value):  # most calls' arguments: no walk
        return value, []
    repairs: list[str] = []

    def clean_value(text: str) -> str:
        return _clean(text, nfkc_strings, repairs)

    def clean_key(key: str, obj: dict, out: dict | None) -> str:
        return _clean_key(key, obj, out, repairs)

    return _walk(value, clean_value, clean_key, max_depth), repairs


def _flat_ascii(value: dict) -> bool:
    """Whether *value* holds no container and its keys and strings are ASCII, which has
    nothing to clean (see `_clean`) and nests one level only."""
    # keys that are strings and values that are scalars (most arguments): told in C (the
    # text of a number, a boolean or null is ASCII)
    if all_strings(value) and all_scalars(value.values()):
        return "".join(value).isascii() and "".join(map(str, value.values())).isascii()
    for key, item in value.items():
        if not (isinstance(key, str) and key.isascii()):
            return False
        if isinstance(item, str):
            if not item.isascii():
                return False
        elif isinstance(item, dict | list):
            return False
    return True


def _note(repairs: list[str], repair: str) -> None:
    if repair not in repairs:
        repairs.append(repair)


def _clean(text: str, nfkc: bool, repairs: list[str]) -> str:
    """Clean one string; returns *text* itself when nothing changed."""
    if text.isascii():  # ASCII has no bidi controls and is NFKC-stable: the common case
        return text
    out, changed = strip_bidi(text)
    if changed:
        _note(repairs, BIDI_REMOVED)
    out, changed = replace_surrogates(out)
    if changed:
        _note(repairs, SURROGATE_REPLACED)
    if nfkc and not unicodedata.is_normalized("NFKC", out):
        out = unicodedata.normalize("NFKC", out)
        _note(repairs, NFKC)
    return out


StrFn = Callable[[str], str]
KeyFn = Callable[[str, dict, "dict | None"], str]  # (key, original object, copy so far)


class _Frame:
    """One open container of the walk. Its copy is made lazily, on the first change."""

    __slots__ = ("node", "items", "i", "out", "key", "new_key")

    def __init__(self, node: dict | list, key: Any = None, new_key: Any = None) -> None:
        self.node = node
        self.items = list(node.items()) if isinstance(node, dict) else node
        self.i = 0
        self.out: dict | list | None = None
        self.key, self.new_key = key, new_key  # where this container sits in its parent

    def put(self, key: Any, new_key: Any, old: Any, new: Any) -> None:
        """Record the (possibly changed) entry just visited, at index ``self.i - 1``."""
        if self.out is None and (new_key is not key or new is not old):
            idx = self.i - 1
            self.out = dict(islice(self.node.items(), idx)) if isinstance(
                self.node, dict) else self.node[:idx]
        if self.out is None:
            return
        if isinstance(self.out, dict):
            self.out[new_key] = new
        else:
            self.out.append(new)

    def result(self) -> dict | list:
        return self.node if self.out is None else self.out


def _walk(value: Any, clean: StrFn, clean_key: KeyFn, max_depth: int | None = None) -> Any:
    """Apply ``clean`` to every string and ``clean_key`` to every key, iteratively.

    An explicit stack, so that nesting as deep as the parsers allow cannot exhaust Python's.
    """
    limit = max_depth if max_depth is not None else -1
    if isinstance(value, str):
        return clean(value)
    if not isinstance(value, dict | list):
        return value
    stack = [_Frame(value)]
    while True:
        frame = stack[-1]
        if frame.i < len(frame.items):
            entry = frame.items[frame.i]
            frame.i += 1
            is_dict = isinstance(frame.node, dict)
            key, child = entry if is_dict else (None, entry)
            new_key = key
            if is_dict and isinstance(key, str):
                new_key = clean_key(key, frame.node, frame.out)  # type: ignore[arg-type]
            if isinstance(child, dict | list):
                if len(stack) == limit:
                    raise NestingTooDeep(f"the payload nests deeper than {limit} levels")
                stack.append(_Frame(child, key, new_key))
                continue
            frame.put(key, new_key, child, clean(child) if isinstance(child, str) else child)
            continue
        stack.pop()
        done = frame.result()
        if not stack:
            return done
        stack[-1].put(frame.key, frame.new_key, frame.node, done)


def _clean_key(key: str, obj: dict, out: dict | None, repairs: list[str]) -> str:
    if key.isascii():
        return key
    local: list[str] = []
    new_key = _clean(key, True, local)
    if new_key != key and (new_key in obj or (out is not None and new_key in out)):
        return key  # would collide with another key: keep both values, unchanged
    for repair in local:
        _note(repairs, repair)
    return new_key
