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
    if _BIDI_RE.search(text) is None:
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
    found: list[str] = []

    def clean(text: str) -> str:
        out, changed = replace_surrogates(text)
        if changed:
            _note(found, SURROGATE_REPLACED)
        return out

    return _walk(value, clean, lambda key, _obj, _out: clean(key)), bool(found)


def normalize_payload(value: Any, *, nfkc_strings: bool = False) -> tuple[Any, list[str]]:
    """Remove bidi controls from the keys and strings of a parsed payload; NFKC its keys.

    String values are NFKC-folded too when *nfkc_strings* is true; otherwise they keep their
    characters (a full-width name in a message is the user's business). Only ``dict``,
    ``list`` and ``str`` are looked at; every other value is passed through untouched.

    Returns ``(value, repairs)`` where *repairs* lists ``text.bidi_removed`` and/or
    ``text.nfkc`` in order of first use. When nothing changed, the input object itself is
    returned, so callers can test ``result is value``. The input is never mutated.

    If normalising a key would make it collide with another key of the same object, that key
    is left as it was: merging the two would silently drop a value.
    """
    repairs: list[str] = []

    def clean_value(text: str) -> str:
        return _clean(text, nfkc_strings, repairs)

    def clean_key(key: str, obj: dict, out: dict | None) -> str:
        return _clean_key(key, obj, out, repairs)

    return _walk(value, clean_value, clean_key), repairs


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


def _walk(value: Any, clean: StrFn, clean_key: KeyFn) -> Any:
    if isinstance(value, str):
        return clean(value)
    if isinstance(value, dict):
        return _walk_dict(value, clean, clean_key)
    if isinstance(value, list):
        return _walk_list(value, clean, clean_key)
    return value


def _walk_dict(obj: dict, clean: StrFn, clean_key: KeyFn) -> dict:
    out: dict | None = None  # copy made lazily, on the first change
    for i, (key, item) in enumerate(obj.items()):
        new_key = key
        if isinstance(key, str):
            new_key = clean_key(key, obj, out)
        new_item = _walk(item, clean, clean_key)
        if out is None and (new_key is not key or new_item is not item):
            out = dict(islice(obj.items(), i))
        if out is not None:
            out[new_key] = new_item
    return obj if out is None else out


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


def _walk_list(items: list, clean: StrFn, clean_key: KeyFn) -> list:
    out: list | None = None
    for i, item in enumerate(items):
        new_item = _walk(item, clean, clean_key)
        if out is None and new_item is not item:
            out = items[:i]
        if out is not None:
            out.append(new_item)
    return items if out is None else out
