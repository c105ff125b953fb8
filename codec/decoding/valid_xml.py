"""The short way for a well-formed XML call: Qwen3-Coder's ``<function=…>`` and a tool tag.

``decode_xml_call`` reads any XML call through the heuristic pipeline: text heuristics, a
scan into a tree, the fallback heuristics and a second scan when the first one fails (a bare
``&`` in a value, which models write all the time), the post-parse heuristics. For the two
shapes models write most (``<function=NAME><parameter=P>text</parameter>…</function>`` and
``<NAME><P>text</P>…</NAME>``) with plain text values, that costs ten times reading them.
``read_valid_call`` reads exactly those shapes with ``str.find`` and gives up (None) at the
first thing it is not sure of: a ``<`` in a value, a reference other than a bare ``&``, a
repeated or unknown parameter, a name outside plain ASCII, a call that does not validate.
The pipeline then reads the call, so its answer is the reference: for every call this one
answers, the name, the arguments and the repair ids are the pipeline's (property-tested
against it in tests/test_valid_xml.py).
"""

from __future__ import annotations

import re
from typing import Any

from toolcodec.repair.heuristics import same_value
from toolcodec.repair.xml_heuristics import EscapeAmpersand
from toolcodec.repair.xmlcall import lead_end, trail_start
from toolcodec.results.limits import Limits
from toolcodec.schema.coerce import coerce_checked
from toolcodec.schema.validation import check_arguments

_NAME = r"[A-Za-z_][A-Za-z0-9_.-]*"
_WS = r"[ \t\r\n]*"  # what the scanner takes for layout, narrowed to ASCII
_FUNCTION_HEAD = re.compile(_WS + r"<function=(" + _NAME + r")>")
_PARAMETER_HEAD = re.compile(_WS + r"<parameter=(" + _NAME + r")>")
_FUNCTION_TAIL = re.compile(_WS + r"</function>" + _WS + r"\Z")
_TAG_HEAD = re.compile(_WS + r"<(" + _NAME + r")>")
_PARAMETER_CLOSE = "</parameter>"
# A reference the scanner decodes: a value holding one is read the long way. Any other "&"
# (``&&``, ``R&D``, ``&nbsp;``) fails the first scan and is escaped by
# ``xml.escape_ampersand`` before the second: the value keeps it as written.
_REFERENCE = re.compile(r"&(?:amp|lt|gt|quot|apos|#[0-9]{1,7}|#x[0-9a-fA-F]{1,6});")
_LAYOUT = re.compile(_WS)
# Tags that name a parameter by an attribute (``<param name="city">``): the long way.
_NAMING_TAGS = frozenset({"param", "parameter", "arg", "argument"})
_ESCAPE_AMPERSAND = EscapeAmpersand.id
# Elements nest two deep in both shapes (the call, its parameters).
_DEPTH = 2


def read_valid_call(part: str, fmt: str, tag: str | None, registry: Any,
                    limits: Limits) -> tuple[str, dict[str, Any], list[str]] | None:
    """``(name, arguments, repairs)`` of the call ``part`` as ``decode_xml_call`` reads it with
    the default pipeline, when ``part`` is one of the two plain shapes and validates; else
    None (the pipeline decides)."""
    if len(part) > limits.max_chars or limits.max_depth < _DEPTH:
        return None
    if fmt == "function":
        read = _function_call(part)
        spec = registry.get(read[0]) if read is not None else None
    elif fmt == "tool_tag" and tag is not None:
        spec = registry.get(tag)
        read = _tool_tag_call(part, tag, spec.schema) if spec is not None else None
    else:
        return None
    if read is None or spec is None:
        return None
    name, raw_args, ampersand = read
    repairs = [_ESCAPE_AMPERSAND] if ampersand else []
    args, coerced, valid = coerce_checked(spec, raw_args, text_values=True, limits=limits)
    # the pipeline records a change only (none when the same object came back)
    if args is not raw_args and not same_value(args, raw_args):
        repairs += coerced
    else:
        args = raw_args
    if not valid and check_arguments(spec, args):
        return None
    return name, args, repairs


def _function_call(part: str) -> tuple[str, dict[str, str], bool] | None:
    """``<function=NAME>`` then ``<parameter=P>text</parameter>`` elements, layout between."""
    head = _FUNCTION_HEAD.match(part)
    if head is None:
        return None
    args: dict[str, str] = {}
    ampersand = False
    pos = head.end()
    while (param := _PARAMETER_HEAD.match(part, pos)) is not None:
        read = _value(part, param.end(), _PARAMETER_CLOSE)
        pname = param.group(1)
        if read is None or pname in args:
            return None
        args[pname], amp, pos = read
        ampersand = ampersand or amp
    if _FUNCTION_TAIL.match(part, pos) is None:
        return None
    return head.group(1), args, ampersand


def _tool_tag_call(part: str, tag: str, schema: Any) -> tuple[str, dict[str, str],
                                                                 bool] | None:
    """``<NAME>`` then ``<P>text</P>`` elements of the properties the tool's ``schema``
    declares, layout between."""
    opener = f"<{tag}>"
    if not part.startswith(opener):
        return None
    # `"parameters": true` is a schema too
    props = schema.get("properties") if isinstance(schema, dict) else None
    if not isinstance(props, dict):
        props = {}  # no parameter can be read: `<now></now>` only
    args: dict[str, str] = {}
    ampersand = False
    pos = len(opener)
    while (param := _TAG_HEAD.match(part, pos)) is not None:
        pname = param.group(1)
        if pname in args or pname in _NAMING_TAGS or pname == tag or pname not in props:
            return None
        read = _value(part, param.end(), f"</{pname}>")
        if read is None or not read[0].strip():  # blank: [] for an array; the long way's
            return None
        args[pname], amp, pos = read
        ampersand = ampersand or amp
    if part[_LAYOUT.match(part, pos).end():] != f"</{tag}>":
        return None
    return tag, args, ampersand


def _value(part: str, start: int, closer: str) -> tuple[str, bool, int] | None:
    """The plain text value at ``start`` up to ``closer`` (trimmed), whether it holds a bare
    ``&``, and where its closer ends; None when a ``<`` other than the closer or a reference
    the scanner decodes stands in it."""
    end = part.find("<", start)
    if end < 0 or not part.startswith(closer, end):
        return None
    value = part[start:end]
    ampersand = "&" in value
    if ampersand and _REFERENCE.search(value):
        return None
    return _trimmed(value), ampersand, end + len(closer)


def _trimmed(value: str) -> str:
    """A text value without the layout at its ends (``xmlcall``'s rule for plain text)."""
    value = value[lead_end(value, len(value)):]
    return value[:trail_start(value, 0)]
