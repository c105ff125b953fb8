"""KindaXML: a tolerant, XML-like annotation language with deterministic recovery.

>>> from toolcodec.kindaxml import parse
>>> r = parse('We shipped <cite id="1">last week</cite>.', recognized_tags={"cite"})
>>> [(s.text, [a.tag for a in s.annotations]) for s in r.segments]
[('We shipped ', []), ('last week', ['cite']), ('.', [])]

:func:`parse` never raises on any ``str``; malformed markup is recovered and every guess is
named (see ``docs/kindaxml.md``). Only a bad configuration raises.
"""

from __future__ import annotations

from typing import Any

from toolcodec.kindaxml.config import KindaXMLConfig, build_config
from toolcodec.kindaxml.output import Annotation, Marker, ParseResult, Recovery, Segment
from toolcodec.kindaxml.parser import Parser
from toolcodec.repair.normalize import first_surrogate, replace_surrogates

_SURROGATES_MESSAGE = "lone surrogates were replaced by U+FFFD"

__all__ = [
    "Annotation",
    "KindaXMLConfig",
    "Marker",
    "ParseResult",
    "Recovery",
    "Segment",
    "parse",
]


def parse(text: str, config: KindaXMLConfig | None = None, **options: Any) -> ParseResult:
    """Parse ``text`` into segments, annotations and markers.

    Options are the fields of :class:`KindaXMLConfig` (spec §12 names), given either as a
    ``config`` object, as keywords, or both (keywords override the object). Unknown option
    names raise ``TypeError``; bad values raise ``ValueError`` or ``TypeError``.
    """
    cfg = build_config(config, options)
    if not isinstance(text, str):
        raise TypeError(f"text must be a str, not {type(text).__name__}")
    # JSON output cannot carry lone surrogates; one character replaces one, so offsets hold.
    at = first_surrogate(text)
    if at is not None:
        text, _ = replace_surrogates(text)
    columns = Parser(text, cfg).run()
    if at is not None:
        columns.log.insert(0, ("surrogate_replaced", at, _SURROGATES_MESSAGE, None))
    return ParseResult.from_columns(columns)
