"""Body readers for the tool-call formats of model families that mark calls with special tokens
or write them as Python calls.

The engine (``toolcodec.decoding.engine``) finds where a block of one of these formats starts and
ends (its markers); a reader turns the block's *body* into raw ``(name, arguments)`` pairs
(``builtin`` picks the reader of a built-in format's block). The block reader
(``toolcodec.decoding.blocks``) then checks the names against the tool set and validates and
coerces the arguments, as for every other format. Readers are pure and linear in the body's
length, and never raise.

``arguments`` in a pair is either a ``dict`` (already read: values may be strings that the
schema coerces, as for XML parameters), a ``str`` of JSON text that the codec parses with
``repair_json``, or an ``XmlBody``: the call written as a tool-name element
(``<NAME><p>v</p></NAME>``) that the codec's XML decoder reads against the tool's schema
(nested objects and arrays included).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from toolcodec.results.errors import CodecError


@dataclass(frozen=True, slots=True)
class XmlBody:
    """A call's arguments as ``<NAME>…</NAME>`` XML, for the codec's XML decoder."""

    text: str


@dataclass(slots=True)
class FormatRead:
    """What a reader found in one body: calls in order, repairs by id, or errors.

    ``text_values``: the values are text as the format writes every value (XML-like key/value
    formats); converting them to the schema's types is then the format's meaning, not a repair.
    """

    calls: list[tuple[str, Any]] = field(default_factory=list)
    repairs: list[str] = field(default_factory=list)
    errors: list[CodecError] = field(default_factory=list)
    text_values: bool = False
