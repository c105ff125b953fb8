"""Decode one XML tool call (the envelope text the gate found) into a name and arguments.

Formats (``fmt``):

- ``"function"``: ``<tool_call><function=NAME><parameter=P>v</parameter>…</function></tool_call>``;
  the ``<tool_call>`` wrapper is optional, ``<function name="NAME">`` and
  ``<parameter name="P">`` are accepted too. Parameter bodies are raw text (a ``<`` that opens
  no ``parameter``/``function``/``tool_call`` tag is literal). A child element other than
  ``<parameter>`` is a parameter named by its tag.
- ``"tool_tag"``: ``<get_weather><city>Paris</city></get_weather>``: child elements are
  parameters; nested elements make objects (or arrays, when the schema wants an array and all
  children share one tag); repeated elements make lists. Parameters whose schema type is
  scalar are raw text.
- ``"tool_element"``: ``<tool><tool_name>N</tool_name><arguments>…</arguments></tool>`` with an
  optional ``<server_name>``; arguments read as in ``tool_tag``. Unknown children of ``<tool>``
  are ignored and reported in ``warnings``.

Whitespace: in a text value, the whitespace-only rest of the opening tag's line (up to and
including its newline) and the newline that starts the closing tag's line (with any spaces or
tabs after it) are dropped; everything else is kept. CDATA and character references are never
trimmed, so ``&#10;`` keeps an edge newline. Whitespace-only text between elements is layout.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Literal

from toolcodec.repair.heuristics import HeuristicContext, Pipeline
from toolcodec.results import errors as E
from toolcodec.results.errors import CodecError
from toolcodec.results.limits import DEFAULT_LIMITS, Limits
from toolcodec.scanning.xmlscan import (
    TOO_DEEP,
    Element,
    ScanError,
    ScanOptions,
    ScanResult,
    Text,
    scan,
)

XmlFormat = Literal["function", "tool_tag", "tool_element"]
FORMATS: tuple[str, ...] = ("function", "tool_tag", "tool_element")

# `<function=NAME>` and the other spellings models use for it (`xml.function_alias`).
_CALL_TAGS = ("function", "call", "invoke", "tool")
_CALL_TAG = "(" + "|".join(_CALL_TAGS) + ")"
_FUNCTION_NAME_RE = re.compile(
    "<" + _CALL_TAG
    + r"(?:[ \t]*=[ \t]*[\"']?([^\"'<>\s/]+)|\s+name\s*=\s*[\"']([^\"'<>]*)[\"'])"
)
_PARAM_CLOSE = re.compile(r"</parameter[ \t\r\n]*>")
_PARAM_OR_CALL_END = re.compile(r"<parameter[ \t\r\n=>]|</(?:function|call|invoke|tool)>")
# A call's opener wherever it is (CDATA included): fewer than two, nothing to split.
_CALL_OPEN = re.compile("<" + _CALL_TAG + "=")
# What split_functions reads, in one pass: CDATA (skipped whole), a call's opener and its
# close tag, and parameter tags.
_SPLIT_TOKENS = re.compile(r"(?P<cdata><!\[CDATA\[.*?(?:\]\]>|\Z))"
                           r"|(?P<call><" + _CALL_TAG + r"=)"
                           r"|(?P<call_end></(?:function|call|invoke|tool)>)"
                           r"|(?P<open><parameter[ \t\r\n=>])|(?P<close></parameter[ \t\r\n]*>)",
                           re.S)
_TOOL_NAME_RE = re.compile(r"<tool_name>\s*([^<]*?)\s*</tool_name>")
_FIRST_TAG_RE = re.compile(r"<([^\W\d][\w.:-]*)")
_SCALAR_TYPES = frozenset({"string", "number", "integer", "boolean", "null"})
_FUNCTION_TAGS = frozenset({"parameter", "function", "tool_call"})
_ELEMENT_TAGS = frozenset({"tool", "tool_name", "server_name", "arguments"})


@dataclass(slots=True)
class XmlCallResult:
    """One decoded XML call. ``arguments`` is None when the markup could not be parsed.

    ``name`` is set whenever it could be read, also for an unknown tool (so the caller can
    report it). ``warnings`` say what was dropped or ignored without being an error.
    """

    name: str | None
    arguments: dict | None
    repairs: list[str] = field(default_factory=list)
    errors: list[CodecError] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    server_name: str | None = None


class _Invalid(Exception):
    """Internal: the markup scanned but is not a call of the format (caught in ``_parse``)."""

    def __init__(self, message: str, position: int) -> None:
        super().__init__(message)
        self.position = position


def decode_xml_call(
    raw: str,
    fmt: XmlFormat,
    *,
    registry: Any,
    pipeline: Pipeline,
    tag_name: str | None = None,
    limits: Limits = DEFAULT_LIMITS,
) -> XmlCallResult:
    """Decode the XML call ``raw`` (one envelope, perhaps missing its final close tag).

    ``registry`` answers ``get(name) -> ToolSpec | None``; with ``registry=None`` names are
    not checked and no schema applies. Never raises on any ``raw``; ``fmt`` must be one of
    ``FORMATS`` (``ValueError`` otherwise).
    """
    if fmt not in FORMATS:
        raise ValueError(f"unknown XML call format {fmt!r}; expected one of {FORMATS}")
    if len(raw) > limits.max_chars:
        err = CodecError(
            E.PAYLOAD_TOO_LARGE,
            f"the XML call is {len(raw)} characters; the limit is {limits.max_chars}",
        )
        return XmlCallResult(name=None, arguments=None, errors=[err])
    name, call_tag = _peek_name(raw, fmt, tag_name)
    spec = _lookup(registry, name)
    schema = getattr(spec, "schema", None)
    ctx = HeuristicContext(tool_name=name, schema=schema, raw=raw, parsed=None)
    ctx.meta.update(
        original=raw,
        xml_format=fmt,
        tool_spec=spec,
        scan_options=_scan_options(fmt, call_tag, name, schema, limits),
        limits=limits,
    )
    pipeline.run(ctx, lambda text, c: _parse(text, c, fmt, tag_name, registry))
    return _finish(ctx, registry)


def _finish(ctx: HeuristicContext, registry: Any) -> XmlCallResult:
    meta = ctx.meta
    warnings = list(meta.get("parse_warnings", ())) + list(meta.get("warnings", ()))
    warnings += [
        f"heuristic {f['id']} ({f['phase']}) failed and was skipped: {f['error']}"
        for f in meta.get("heuristic_failures", ())
    ]
    result = XmlCallResult(
        name=ctx.tool_name,
        arguments=None,
        repairs=list(ctx.repairs),
        warnings=warnings,
        server_name=meta.get("server_name"),
    )
    if ctx.parsed is None:
        result.errors = list(ctx.errors) or [
            CodecError(E.INVALID_XML, "the XML call could not be parsed", {"tool": ctx.tool_name})
        ]
        return result
    result.arguments = ctx.parsed  # type: ignore[assignment]
    spec = meta.get("tool_spec")
    if registry is not None and spec is None:
        result.errors.append(
            CodecError(
                E.UNKNOWN_TOOL,
                f"no tool named {ctx.tool_name!r} is registered",
                {"tool": ctx.tool_name},
            )
        )
    elif spec is not None:
        result.errors.extend(_check(spec, result.arguments, result.warnings))
    return result


def _check(spec: Any, args: dict, warnings: list[str]) -> list[CodecError]:
    try:
        from toolcodec.schema.validation import check_arguments  # late: a sibling module
    except ImportError:
        warnings.append("schema validation unavailable: toolcodec.schema.validation is missing")
        return []
    return list(check_arguments(spec, args))


def _lookup(registry: Any, name: str | None) -> Any:
    return registry.get(name) if registry is not None and name else None


def _peek_name(raw: str, fmt: str, tag_name: str | None) -> tuple[str | None, str | None]:
    """The tool name, read before parsing so that the schema can guide the parse, and in the
    ``function`` format the tag that opens the call (``function``, ``call``, …)."""
    if fmt == "tool_tag":
        m = _FIRST_TAG_RE.search(raw)
        return tag_name or (m.group(1) if m else None), None
    if fmt == "function":
        m = _FUNCTION_NAME_RE.search(raw)
        return ((m.group(2) or m.group(3)), m.group(1)) if m else (None, None)
    m = _TOOL_NAME_RE.search(raw)
    return (m.group(1) if m else None), None


def _scan_options(fmt: str, call_tag: str | None, name: str | None, schema: dict | None,
                  limits: Limits) -> ScanOptions:
    # merge_text: each value comes back as one Text, its references decoded in bulk.
    if fmt == "function":
        # `<call=…>`, `<invoke=…>`, `<tool=…>` are markup only in a call that uses that
        # spelling, so `</tool>` inside a `<function=…>` value stays text
        tags = _FUNCTION_TAGS | {call_tag} if call_tag else _FUNCTION_TAGS
        # a </parameter> followed by text is the value's text (a value about the format)
        followers = ("<parameter", "</function>", "</tool_call>", "<function") + (
            (f"</{call_tag}>",) if call_tag else ())
        return ScanOptions(frozenset({"parameter"}), tags, limits.max_depth, True,
                           value_followers=followers)
    props = schema.get("properties") if isinstance(schema, dict) else None
    names = frozenset(props) if isinstance(props, dict) else frozenset()
    frame = _ELEMENT_TAGS if fmt == "tool_element" else frozenset({name} if name else ())
    return ScanOptions(_scalar_parameters(props), names | frame, limits.max_depth, True)


def _scalar_parameters(props: dict | None) -> frozenset[str]:
    """Properties whose type is scalar only: their bodies are raw text, not markup."""
    if not isinstance(props, dict):
        return frozenset()
    names = set()
    for pname, prop in props.items():
        kind = prop.get("type") if isinstance(prop, dict) else None
        kinds = kind if isinstance(kind, list) else [kind]
        if kinds and all(k in _SCALAR_TYPES for k in kinds):
            names.add(pname)
    return frozenset(names)


# -- parsing ---------------------------------------------------------------------------------


def _parse(
    text: str, ctx: HeuristicContext, fmt: str, tag_name: str | None, registry: Any
) -> tuple[dict | None, list[CodecError]]:
    ctx.meta["parse_warnings"] = []
    ctx.meta.pop("xml_repeated", None)
    ctx.meta.pop("server_name", None)
    result = _scan(text, ctx)
    if result.error is not None:
        return None, [_scan_error(result.error, text, ctx)]
    reader = _ArgumentBuilder(ctx.schema, ctx.meta["parse_warnings"])
    try:
        if fmt == "function":
            name, args = reader.function_call(result.nodes)
        elif fmt == "tool_tag":
            name, args = reader.tool_tag(result.nodes, tag_name)
        else:
            name, args = reader.tool_element(result.nodes, ctx.meta)
    except _Invalid as exc:
        return None, [_error(E.INVALID_XML, str(exc), exc.position, text, ctx)]
    if name != ctx.tool_name:  # the peek missed; let the real name pick the schema
        ctx.tool_name = name
        ctx.meta["tool_spec"] = _lookup(registry, name)
        ctx.schema = getattr(ctx.meta["tool_spec"], "schema", None)
    if reader.repeated:
        ctx.meta["xml_repeated"] = sorted(reader.repeated)
    ctx.repairs.extend(r for r in reader.repairs if r not in ctx.repairs)  # a re-parse
    return args, []


def _scan(text: str, ctx: HeuristicContext) -> ScanResult:
    """Scan ``text``, or take the scan a heuristic already made of this very text with these
    options (``xml.balance_tags`` leaves one in ``meta["scanned"]``)."""
    options = ctx.meta["scan_options"]
    scanned = ctx.meta.pop("scanned", None)
    if scanned is not None and scanned[0] is text and scanned[1] is options:
        return scanned[2]
    return scan(text, options)


def _scan_error(err: ScanError, text: str, ctx: HeuristicContext) -> CodecError:
    code = E.NESTING_TOO_DEEP if err.kind == TOO_DEEP else E.INVALID_XML
    error = _error(code, err.message, err.position, text, ctx)
    error.details["kind"] = err.kind
    if err.expected:
        error.details["expected"] = err.expected
    return error


def _error(code: str, what: str, position: int, text: str, ctx: HeuristicContext) -> CodecError:
    near = text[max(0, position - 20) : position + 20]
    where = f"{ctx.tool_name!r} call" if ctx.tool_name else "XML call"
    message = f"{where}: {what}; near {near!r}"
    if text != ctx.meta.get("original"):
        message += " (offset into the text as repaired)"
    return CodecError(code, message, {"position": position, "tool": ctx.tool_name})


def _join_text(children: list[Element | Text]) -> str:
    """The value of a text-only element, trimmed as the module docstring describes.

    Only the plain ends of the first and last pieces (``Text.head``/``Text.tail``) are
    trimmed, so references and CDATA stay whole."""
    parts = [c.value for c in children if isinstance(c, Text)]
    if not parts:
        return ""
    first, last = children[0], children[-1]
    if isinstance(first, Text) and first.head:
        parts[0] = parts[0][lead_end(parts[0], first.head) :]
    if isinstance(last, Text) and last.tail:
        value = parts[-1]
        # The head trim may have shortened a piece that is plain throughout.
        parts[-1] = value[: trail_start(value, len(value) - min(last.tail, len(value)))]
    return parts[0] if len(parts) == 1 else "".join(parts)


def lead_end(value: str, limit: int) -> int:
    """Where the layout at the start of ``value[:limit]`` ends: past the whitespace-only rest
    of the opening tag's line and its newline (``[ \t]*\r?\n``), else 0."""
    i = 0
    while i < limit and value[i] in " \t":
        i += 1
    if value.startswith("\r\n", i) and i + 2 <= limit:
        return i + 2
    return i + 1 if i < limit and value[i] == "\n" else 0


def trail_start(value: str, floor: int) -> int:
    """Where the layout at the end of ``value[floor:]`` starts: at the newline (and a ``\r``
    before it) that begins the closing tag's line (``\r?\n[ \t]*``), else ``len(value)``."""
    j = len(value)
    while j > floor and value[j - 1] in " \t":
        j -= 1
    if j <= floor or value[j - 1] != "\n":
        return len(value)
    j -= 1
    return j - 1 if j > floor and value[j - 1] == "\r" else j


def _is_layout(node: Element | Text) -> bool:
    return isinstance(node, Text) and bool(node.layout)


def _types(schema: dict | None) -> set[str]:
    kind = schema.get("type") if isinstance(schema, dict) else None
    return set(kind) if isinstance(kind, list) else {kind} if isinstance(kind, str) else set()


def _child_schema(schema: dict | None, name: str) -> dict | None:
    props = schema.get("properties") if isinstance(schema, dict) else None
    prop = props.get(name) if isinstance(props, dict) else None
    return prop if isinstance(prop, dict) else None


class _ArgumentBuilder:
    """Turns scanned elements into a tool name and an arguments dict, per format."""

    def __init__(self, schema: dict | None, warnings: list[str]) -> None:
        self.schema = schema
        self.warnings = warnings
        self.repeated: set[str] = set()
        self.repairs: dict[str, None] = {}  # ids made while reading, once each, in order

    # formats
    def function_call(self, nodes: list[Element | Text]) -> tuple[str, dict]:
        root = _single_element(nodes, "<tool_call> or <function=NAME>")
        fn = root
        if root.name == "tool_call":
            fn = _single_element(root.children, "<function=NAME> inside <tool_call>")
        name = _name_of(fn)
        if fn.name not in _CALL_TAGS or (fn.name != "function" and fn.value is None):
            raise _Invalid(f"expected <function=NAME>, found <{fn.name}>", fn.start)
        if not name:
            raise _Invalid(f"<{fn.name}> has no name; expected <{fn.name}=NAME>", fn.start)
        if fn.name != "function":
            self.repairs[FUNCTION_ALIAS] = None
        args: dict[str, list[Any]] = {}
        kids, i = fn.children, 0
        while i < len(kids):
            child, i = kids[i], i + 1
            if _is_layout(child):
                continue
            if isinstance(child, Text):
                raise _Invalid(f"text outside any <parameter> in <function={name}>", child.start)
            if child.name == "parameter":
                pname = _name_of(child)
                if pname:
                    value: Any = _join_text(child.children)
                else:
                    pname, value, i = self._name_then_value(child, kids, i)
            else:
                pname = child.name
                value = self.value(child, _child_schema(self.schema, pname))
            args.setdefault(pname, []).append(value)
        return name, self._collapse(args)

    def _name_then_value(self, el: Element, kids: list[Element | Text],
                         i: int) -> tuple[str, str, int]:
        """`<parameter>city</parameter>Seoul`: a nameless parameter holding only a name, and
        its value in the text after it (up to the next element). Returns the name, the value
        and the index of the first child after the value."""
        pname = "" if el.elements() else _join_text(el.children).strip()
        parts = []
        while i < len(kids) and isinstance(kids[i], Text):
            parts.append(kids[i].value)
            i += 1
        value = "".join(parts).strip()
        if not value or not _PARAMETER_NAME.fullmatch(pname):
            raise _Invalid("<parameter> has no name; expected <parameter=NAME>", el.start)
        self.repairs[NAME_THEN_VALUE] = None
        return pname, value, i

    def tool_tag(self, nodes: list[Element | Text], tag_name: str | None) -> tuple[str, dict]:
        root = _single_element(nodes, f"<{tag_name or 'TOOL'}>")
        if tag_name and root.name != tag_name:
            raise _Invalid(f"expected <{tag_name}>, found <{root.name}>", root.start)
        args = self.parameters(root)
        for key, value in root.attrs.items():  # <get_weather city="Paris"/>
            if key in args:
                raise _Invalid(f"the parameter {key!r} is given both as an attribute and as "
                               "an element", root.start)
            args[key] = value
            self.repairs[ATTRIBUTES_AS_PARAMETERS] = None
        return root.name, args

    def tool_element(self, nodes: list[Element | Text], meta: dict) -> tuple[str, dict]:
        root = _single_element(nodes, "<tool>")
        if root.name != "tool":
            raise _Invalid(f"expected <tool>, found <{root.name}>", root.start)
        parts: dict[str, Element] = {}
        for child in root.children:
            if _is_layout(child):
                continue
            if isinstance(child, Text):
                raise _Invalid("text directly inside <tool>", child.start)
            if child.name not in _ELEMENT_TAGS - {"tool"}:
                self.warnings.append(f"ignored unknown element <{child.name}> inside <tool>")
                continue
            if child.name in parts:
                raise _Invalid(f"<{child.name}> appears twice inside <tool>", child.start)
            parts[child.name] = child
        if "tool_name" not in parts:
            raise _Invalid("<tool> has no <tool_name>", root.start)
        name = self._plain(parts["tool_name"]).strip()
        if not name:
            raise _Invalid("<tool_name> is empty", parts["tool_name"].start)
        if "server_name" in parts:
            meta["server_name"] = self._plain(parts["server_name"]).strip()
        args = parts.get("arguments")
        return name, self.parameters(args) if args is not None else {}

    # pieces
    def parameters(self, parent: Element) -> dict:
        """The children of ``parent`` as top-level parameters (repeats become lists)."""
        args: dict[str, list[Any]] = {}
        for child in parent.children:
            if _is_layout(child):
                continue
            if isinstance(child, Text):
                raise _Invalid(f"text inside <{parent.name}> outside any parameter", child.start)
            name = self._parameter_name(child)
            args.setdefault(name, []).append(self.value(child, _child_schema(self.schema, name)))
        return self._collapse(args)

    def _parameter_name(self, el: Element) -> str:
        """``<city>`` names the parameter ``city``; so does ``<param name="city">`` (also
        ``parameter``, ``arg``, ``argument``) unless the schema has a property of that tag's
        own name."""
        named = el.name in _NAMING_TAGS and _name_of(el)
        if named and _child_schema(self.schema, el.name) is None:
            rest = {k: v for k, v in el.attrs.items() if k != "name"}
            if rest:
                shown = ", ".join(f"{k}={v!r}" for k, v in rest.items())
                self.warnings.append(f"ignored attributes of <{el.name}>: {shown}")
            return named
        self._note_attrs(el)
        return el.name

    def value(self, el: Element, schema: dict | None) -> Any:
        """A parameter's value: text, or a dict/list built from nested elements.

        Iterative (an explicit stack of open elements), so that a raised
        ``Limits.max_depth`` costs memory, not Python's recursion limit."""
        root = _Node.open(el, schema)
        if root is None:
            return _text_value(el, schema)
        stack = [root]
        while True:
            node = stack[-1]
            if node.next < len(node.elements):
                child = node.elements[node.next]
                node.next += 1
                child_schema = node.child_schema(child.name)
                sub = _Node.open(child, child_schema)
                if sub is None:
                    node.values.append(_text_value(child, child_schema))
                else:
                    stack.append(sub)
                continue
            stack.pop()
            value = node.build()
            if not stack:
                return value
            stack[-1].values.append(value)

    def _collapse(self, args: dict[str, list[Any]]) -> dict:
        out = {}
        for name, values in args.items():
            if len(values) > 1:
                self.repeated.add(name)
            out[name] = values[0] if len(values) == 1 else values
        return out

    def _plain(self, el: Element) -> str:
        if el.elements():
            raise _Invalid(f"<{el.name}> must hold text only", el.start)
        return _join_text(el.children)

    def _note_attrs(self, el: Element) -> None:
        if el.attrs:
            shown = ", ".join(f"{k}={v!r}" for k, v in el.attrs.items())
            self.warnings.append(f"ignored attributes of <{el.name}>: {shown}")


@dataclass(slots=True)
class _Node:
    """An element whose value is built from its child elements (``_ArgumentBuilder.value``)."""

    el: Element
    schema: dict | None
    elements: list[Element]
    array: bool  # the children are the items of an array
    values: list[Any] = field(default_factory=list)
    next: int = 0  # index of the next child element to read

    @classmethod
    def open(cls, el: Element, schema: dict | None) -> _Node | None:
        """A node for ``el``, or None when ``el`` holds text only."""
        elements = el.elements()
        if not elements:
            return None
        for child in el.children:
            if isinstance(child, Text) and not _is_layout(child):
                raise _Invalid(f"<{el.name}> mixes text and elements", child.start)
        names = [c.name for c in elements]
        indexed = names == [str(i) for i in range(len(names))]  # <0>…</0><1>…</1>
        array = "array" in _types(schema) and (len(set(names)) == 1 or indexed)
        return cls(el, schema, elements, array)

    def child_schema(self, name: str) -> dict | None:
        if self.array:
            items = self.schema.get("items") if isinstance(self.schema, dict) else None
            return items if isinstance(items, dict) else None
        return _child_schema(self.schema, name)

    def build(self) -> Any:
        if self.array:
            return self.values
        grouped: dict[str, list[Any]] = {}
        for child, value in zip(self.elements, self.values, strict=True):
            grouped.setdefault(child.name, []).append(value)
        return {k: v[0] if len(v) == 1 else v for k, v in grouped.items()}


_NAMING_TAGS = frozenset({"param", "parameter", "arg", "argument"})
FUNCTION_ALIAS = "xml.function_alias"  # `<call=NAME>`, `<invoke=NAME>`, `<tool=NAME>`
ATTRIBUTES_AS_PARAMETERS = "xml.attributes_as_parameters"  # `<get_weather city="Paris"/>`
NAME_THEN_VALUE = "xml.parameter_name_then_value"  # `<parameter>city</parameter>Seoul`
_PARAMETER_NAME = re.compile(r"[A-Za-z_][\w.-]{0,127}")


def split_functions(payload: str) -> list[str]:
    """One ``<tool_call>`` may hold several ``<function=…>`` calls (or ``<call=…>``,
    ``<invoke=…>``, ``<tool=…>``): one part per call. One inside a CDATA section is text, and
    so is one inside a parameter value that is open there (opened since the call started or
    last closed) when that value's own ``</parameter>`` comes before the next parameter or
    call close tag (else the value was never closed and the opener starts the next call).
    One pass; the look-ahead's answers are kept while they hold, so that many openers inside
    one value cost one scan."""
    first = _CALL_OPEN.search(payload)
    if first is None or _CALL_OPEN.search(payload, first.end()) is None:
        return [payload]  # at most one opener (the one call most bodies hold): nothing to split
    return _split_scan(payload)


def _split_scan(payload: str) -> list[str]:
    """``split_functions``' pass over the payload's tokens."""
    starts: list[int] = []
    balance = 0  # value tags opened minus closed since the current call started or closed
    own = other = None  # the look-ahead's last answers (the next </parameter>, the next other)
    for m in _SPLIT_TOKENS.finditer(payload):
        kind = m.lastgroup
        if kind == "open":
            balance += 1
        elif kind == "close":
            balance -= 1
        elif kind == "call_end":
            balance = 0
        elif kind == "call":
            at = m.start()
            if starts and balance > 0:
                if own is None or own.start() < at:
                    own = _PARAM_CLOSE.search(payload, at)
                if other is None or other.start() <= at:
                    other = _PARAM_OR_CALL_END.search(payload, at + 1)
                if own is not None and (other is None or own.start() <= other.start()):
                    continue  # text inside the value
            starts.append(at)
            balance = 0
    if len(starts) < 2:
        return [payload]
    starts[0] = 0
    return [payload[a:b] for a, b in zip(starts, starts[1:] + [len(payload)], strict=True)]


def _text_value(el: Element, schema: dict | None) -> Any:
    """A text-only element's value; blank text where an array is wanted is the empty array
    (not ``[""]``)."""
    text = _join_text(el.children)
    if not text.strip() and "array" in _types(schema):
        return []
    return text


def _name_of(el: Element) -> str:
    """The name in ``<x=NAME>`` or ``<x name="NAME">``, without surrounding spaces."""
    return (el.value if el.value is not None else el.attrs.get("name", "")).strip()


def _single_element(nodes: list[Element | Text], expected: str) -> Element:
    """The one element among ``nodes``; only layout whitespace may stand around it."""
    found: Element | None = None
    for node in nodes:
        if _is_layout(node):
            continue
        if isinstance(node, Text):
            raise _Invalid(f"text outside the call; expected {expected}", node.start)
        if found is not None:
            raise _Invalid(f"a second element <{node.name}>; expected one {expected}", node.start)
        found = node
    if found is None:
        raise _Invalid(f"no element; expected {expected}", 0)
    return found
