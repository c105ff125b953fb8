"""The repair fast path: the common damage rewritten into JSON in one regex pass, then parsed.

Python literals (``True``, ``False``, ``None``), single-quoted strings, trailing commas and
unquoted keys are what models get wrong most. Where a text holds only those, each damaged token
is rewritten in place (one ``re.sub`` whose pattern skips well-formed runs, strings included, at
C speed) and the result is parsed by ``orjson``. Anything else (a comment, prose, a fence, a cut
text, a quote inside a single-quoted string, structure ``orjson`` refuses) answers ``None`` and
the caller's reader (``toolcodec.repair.jsonrepair``) takes the whole text, so this path only ever
answers what that reader would: the same value and the same repair ids in the same order
(property-tested in ``tests/test_json_rewrite.py``).
"""

from __future__ import annotations

import re
from typing import Any

import orjson
from toolcodec.scanning import jsonscan as scan

# A run of what needs no rewriting: JSON strings, blanks, structure, number characters, JSON
# words, and commas that are not trailing. Each alternative starts with its own characters, so
# the run is matched in linear time, and possessively: it is never given back.
_SAFE = (r'(?:"[^"\\\x00-\x1f]*+(?:\\["\\/bfnrtu][^"\\\x00-\x1f]*+)*+"'
         r"|[ \t\r\n{}\[\]:0-9.+\-eE]++|,(?![ \t\r\n]*[}\]])|true|false|null)*+")
_DAMAGE = re.compile(
    "(" + _SAFE + ")(?:"
    r"'([^'\"\\\x00-\x1f]*)'"  # 2: a single-quoted string with no quote or escape inside
    r"|(?<![\w.+\-])(True|False|None)(?!\w)"  # 3: a Python literal
    r"|(?<=[\w\"'\]}])(,)(?=[ \t\r\n]*[}\]])"  # 4: a comma right after a value, before a closer
    r"|(?<![\w.+\-])([A-Za-z_][A-Za-z0-9_]*)(?=[ \t\r\n]*:)"  # 5: an unquoted key
    r"|(\Z)"  # 6: the end
    r"|([\s\S]))"  # 7: anything else: not for this path
)
_LITERALS = {"True": "true", "False": "false", "None": "null"}
_SINGLE_QUOTES, _PYTHON_LITERAL = scan.SINGLE_QUOTES, scan.PYTHON_LITERAL  # module globals:
_TRAILING_COMMA, _UNQUOTED_KEY = scan.TRAILING_COMMA, scan.UNQUOTED_KEY  # read per token
_START = re.compile(r"[ \t\r\n]*[{\[]")


class _Declined(Exception):
    """The text holds something this path does not rewrite."""


def rewrite_repair(text: str) -> tuple[Any, list[str]] | None:
    """``(value, repair ids)`` when ``text`` is an object or array damaged only in the common
    ways above; ``None`` when the full reader must decide. The caller checks the depth."""
    if _START.match(text) is None or text[-32:].rstrip(" \t\r\n")[-1:] not in ("}", "]"):
        return None  # prose, a fence or a cut text: the reader's
    if "\\u003" in text:  # `\u003a`: see the key count below
        return None
    first: dict[str, int] = {}  # repair id -> where it was first needed
    if '"' not in text and "\\" not in text and "'" in text:
        # Python's repr of a dict: every quote delimits a string; one C-speed replace
        first[_SINGLE_QUOTES] = text.index("'")
        text = text.replace("'", '"')

    def fix(m: re.Match[str]) -> str:
        kind = m.lastindex
        if kind == 5:
            if _UNQUOTED_KEY not in first:
                first[_UNQUOTED_KEY] = m.start(5)
            safe, key = m.group(1, 5)
            return f'{safe}"{key}"'
        if kind == 2:
            if _SINGLE_QUOTES not in first:
                first[_SINGLE_QUOTES] = m.start(2)
            safe, inner = m.group(1, 2)
            return f'{safe}"{inner}"'
        if kind == 3:
            if _PYTHON_LITERAL not in first:
                first[_PYTHON_LITERAL] = m.start(3)
            safe, word = m.group(1, 3)
            return safe + _LITERALS[word]
        if kind == 4:
            if _TRAILING_COMMA not in first:
                first[_TRAILING_COMMA] = m.start(4)
            return m.group(1)
        if kind == 6:
            return m.group(1)
        raise _Declined

    try:
        rewritten = _DAMAGE.sub(fix, text)
        if not first:
            return None  # not damaged in these ways: strict parsing already said no
        value = orjson.loads(rewritten)
    except (_Declined, orjson.JSONDecodeError):
        return None
    # The reader refuses a key given twice; orjson keeps the last. Each member has one `:`
    # outside strings, so a lost member shows as one `:` fewer once the value is written back
    # (strings keep their colons both ways; a `\u003a` escape would not, hence the check above).
    if rewritten.count(":") != orjson.dumps(value).count(b":"):
        return None
    return value, sorted(first, key=first.__getitem__)  # in reading order, as the reader
