"""The openers of a tool set and a set of formats: one pattern (and its prefilter) that finds
where a block, a reasoning block, a framing token or a prose candidate starts.

Everything is read from the declarations: the fixed tags of the ``<tool_call>`` family, the
reasoning rows and framing tokens (``toolcodec.formats.reasoning``), the marker formats
(``toolcodec.formats.table``, registered families included), the JSON and fence candidates, and the
tool-name openers (``toolcodec.scanning.opener_scan``: one pattern per set of formats, the tool
names looked up in sets). Compiled once per set of formats, and again after a family is registered.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

import regex  # partial matching: an opener cut at the end of a chunk
from toolcodec.formats import registry
from toolcodec.formats.marker_end import end_pattern
from toolcodec.formats.reasoning import BY_OPENER, EXPLICIT_FRAMING, FRAMING, tag_rows
from toolcodec.formats.table import MarkerFormat, marker_formats
from toolcodec.scanning.opener_scan import (
    NAME_MAX,
    PLAIN_NAME,
    PLAIN_PARAM,
    Patterns,
    ToolNames,
    any_name_openers,
    find,
    prefilter_source,
    unnamed,
)
from toolcodec.scanning.regex_trie import trie_branches, trie_pattern

BODY_WS = 64  # blanks allowed between an envelope opener and its body
_JSON_REST = (r"[ \t\r\n]{0,16}(?:\{[ \t\r\n]{0,16})?"
              r"\"(?:name|function|tool_calls?|type|arguments|parameters)\"[ \t\r\n]{0,16}:")
_FENCE = r"```[ \t]{0,8}(?:json|JSON|json5)?[ \t]{0,8}\r?\n"
_JSON_OPENER = rf"(?P<json>[\[{{]{_JSON_REST})|(?P<fence>{_FENCE})"
_PARAM_NAME = re.compile(r"[A-Za-z_][\w.\-]{0,63}")


@dataclass(frozen=True)
class Openers:
    """What starts a block, for one tool set and set of formats.

    ``patterns`` read any tool name where a tool-name opener has one
    (``toolcodec.scanning.opener_scan``): compiled once per set of formats and shared by every tool
    set whose names are plain (``[A-Za-z0-9_.-]``, at most ``NAME_MAX`` characters), whose ``names``
    say which are openers. A tool set with other names has its names compiled into its own
    ``patterns`` (``names`` None)."""

    patterns: Patterns  # the openers' pattern and prefilter, with and without candidates
    markers: dict[str, MarkerFormat]  # opener token -> its format
    ends: dict[str, Any]  # opener token -> the pattern of what ends its block
    # tool -> its declared parameters, which a bare call's elements may name
    parameters: dict[str, frozenset[str]] = field(default_factory=dict)
    names: ToolNames | None = None  # the set's names, where ``patterns`` read any name
    shared: Patterns | None = None  # ``patterns`` without the tool-name openers

    def find(self, text: str, pos: int, partial: bool, blocks_only: bool = False) -> Any:
        """The first opener at or past *pos*, whole or, with *partial* (more text to come),
        cut by the end of the text (``toolcodec.scanning.opener_scan.find``). With *blocks_only*,
        without the JSON, fence and Python-call candidates: once a stretch of prose has used
        up its MAX_CANDIDATES, those are text, and trying each one cost more than a
        microsecond (a run of code fences)."""
        return find(self.patterns, self.names, self.shared, text, pos, partial, blocks_only)


def compile_openers(tool_names: list[str], formats: frozenset[str] | None = None,
                    parameters: dict[str, list[str]] | None = None, *,
                    shared: bool = True) -> Openers:
    """The openers for a tool set (tool names become ``<NAME …>`` tags and, in ``[NAME(``,
    pythonic calls; with ``parameters``, a tool's name alone on its line followed by one of
    its parameters' tags opens a bare call) and for the enabled formats (all for None).

    Plain names (``[A-Za-z0-9_.-]``, at most ``NAME_MAX`` characters) are looked up in sets
    by the patterns shared by every tool set with these formats (with *shared*, the
    default): nothing is compiled for the set. Other names, or ``shared=False``, compile the
    set's own patterns with the names in them (a few milliseconds)."""
    names = sorted({n for n in tool_names if n}, key=len, reverse=True)
    on = _enabled(formats)
    params = parameters or {}
    # A bare call opens with one of its tool's parameters whose name _PARAM_NAME reads.
    bare = {n: frozenset(p for p in params.get(n, ()) if _PARAM_NAME.fullmatch(p))
            for n in names} if on("tool_tag") else {}
    bare = {n: ps for n, ps in bare.items() if ps}
    kept = {name: frozenset(ps) for name, ps in params.items()}
    plain = shared and all(PLAIN_NAME.fullmatch(n) for n in names) and all(
        PLAIN_PARAM.fullmatch(p) for ps in bare.values() for p in ps)
    base = _shared_openers(formats, False)
    if not names:
        return Openers(base.patterns, base.markers, base.ends, kept)
    if not plain:
        return Openers(_opener_patterns(formats, names, params), base.markers, base.ends, kept)
    every = frozenset(names)
    named = _shared_openers(formats, True)
    return Openers(named.patterns, base.markers, base.ends, kept, ToolNames(
        every if on("tool_tag", "yaml_tag") else frozenset(),
        every if on("pythonic") else frozenset(), bare, BODY_WS, base.longest), base.patterns)


def _enabled(formats: frozenset[str] | None) -> Any:
    return (lambda *ids: True) if formats is None else (lambda *ids: bool(formats & set(ids)))


@dataclass(frozen=True)
class _Shared:
    """The openers for a set of formats, shared by the tool sets that use them."""

    patterns: Patterns
    markers: dict[str, MarkerFormat]
    ends: dict[str, Any]
    longest: int  # an opener cut by the end of the text is shorter than this


@lru_cache(maxsize=64)
def _shared_openers(formats: frozenset[str] | None, named: bool) -> _Shared:
    """The openers for *formats*: with *named*, the tool-name openers with any name in the
    name's place; else none. Compiled when first searched (a few milliseconds), once."""
    markers = {t: f for f in marker_formats(formats) for t in f.openers}
    tokens = list(markers) + list(BY_OPENER) + list(FRAMING) + list(EXPLICIT_FRAMING)
    # A cut opener is shorter than a whole one: at most the longest token past the blanks
    # the start marker allows, or a bare call's head (name, blanks, parameter tag).
    longest = max(map(len, tokens)) + 2 * BODY_WS + 2 * NAME_MAX + 64
    return _Shared(_opener_patterns(formats, None if named else [], {}), markers,
                   {t: end_pattern(f) for t, f in markers.items()}, longest)


registry.on_change(_shared_openers.cache_clear)  # a registered family: compile anew


def _opener_patterns(formats: frozenset[str] | None, names: list[str] | None,
                    parameters: dict[str, list[str]]) -> Patterns:
    """The openers' patterns, with and without the prose candidates: for *names* (longest
    first), or, with None, for any name (``any_name_openers``: then the prefilter is an
    ``re`` pattern for whole openers, ``opener_scan.Patterns``)."""
    on = _enabled(formats)
    parts = []
    fixed = [t for t, ids in (("tool_call", ("hermes", "qwen_xml", "glm")),
                              ("tool", ("tool_element",))) if on(*ids)]
    tag_names = tag_rows()
    tags = "|".join(regex.escape(t) for t in tag_names)
    parts.append(rf"<(?P<reason_tag>{tags})[ \t\r\n]{{0,8}}>")
    if fixed:
        parts.append(rf"<(?P<fixed>{'|'.join(fixed)})[ \t\r\n]{{0,8}}>")
    markers = {t: f for f in marker_formats(formats) for t in f.openers}
    # A token that extends an enabled marker's opener (Muse Glimmer's `<|start|>assistant
    # to=user<|message|>`, harmony's `<|start|>assistant to=`) is not read: cut after the
    # opener, the stream could not tell which it is, and must decide as decode does. (An
    # opener that needs a body waits for it, and so for the longer token: Functionary's >>>.)
    extends = [t for t, f in markers.items() if not f.at_start and not f.needs_body]

    def free(token: str) -> bool:
        return not any(token.startswith(o) and token != o for o in extends)

    tokens = sorted((t for t, f in BY_OPENER.items() if not f.tag and not f.prefill_only
                     and (not f.format or on(f.format))
                     and (not f.explicit or formats is not None and f.format in formats)
                     and free(t)),
                    key=len, reverse=True)
    parts.append("(?P<reason_token>" + "|".join(regex.escape(t) for t in tokens) + ")")
    framing = [t for t, fmt in FRAMING.items() if on(fmt) and free(t)]
    framing += [t for t, fmt in EXPLICIT_FRAMING.items() if formats is not None and fmt in formats]
    framing.sort(key=len, reverse=True)
    if framing:
        parts.append("(?P<framing>" + "|".join(regex.escape(t) for t in framing) + ")")
    if on("qwen_xml", "functionary"):
        parts.append(r"<(?P<function>function=)")
    candidates = len(parts)
    if on("json"):
        parts.append(_JSON_OPENER)
    start_tokens = [t for t, f in markers.items() if f.at_start]
    anywhere = [t for t, f in markers.items() if not f.at_start]
    if anywhere:
        parts.append(rf"(?P<marker>{trie_pattern(anywhere)})")
    # A marker read only where the output starts (gpt-oss's recipient in the role header).
    start = (rf"(?<![\s\S])[ \t\r\n]{{0,{BODY_WS}}}(?P<start_marker>{trie_pattern(start_tokens)})"
             if start_tokens else "")
    if start:
        parts.append(start)
    # Every alternative's literal head, for the prefilter (``toolcodec.scanning.opener_scan``).
    literals = ([f"<{t}" for t in tag_names] + [f"<{t}" for t in fixed] + tokens + framing
                + anywhere + (["<function="] if on("qwen_xml", "functionary") else []))
    # How far from the end of the text a cut opener may start (the longest token, the JSON
    # opener: 63 characters; the start marker is looked for where the text starts), and
    # the characters an opener may start with.
    window = max(64, *map(len, literals))
    firsts = "".join(t[0] for t in literals) + "[{`" * on("json")
    starts = {t[:2] for t in literals} | set("[{`" * on("json"))  # Patterns.heads
    if names is None:
        head = (rf"[ \t\r\n]{{0,{BODY_WS}}}{trie_pattern(start_tokens)}" if start_tokens
                else "")
        return _any_name_patterns(parts, candidates, literals, head, on, window, firsts,
                                  frozenset(starts | {"<", "[", "\n"}))
    if names:  # or a tool-name opener: its name, blanks and parameters' tags
        window += 2 * max(map(len, names)) + 2 * BODY_WS + 64
        firsts += "<[" + "".join(n[0] for n in names)
        starts |= {"<", "["} | {n[:2] for n in names}
        alt = trie_pattern(names)
        if on("tool_tag", "yaml_tag"):
            parts.append(rf"<(?P<tag>{alt})(?=[\s>/])[^<>]{{0,64}}>")
            literals += [f"<{n}" for n in names]
        if on("pythonic"):
            parts.append(rf"(?P<pycall>\[[ \t\r\n]{{0,16}}(?:{alt})[ \t]{{0,4}}\()")
    bare = _bare_openers(names, parameters) if names else ""
    if bare and on("tool_tag"):
        parts.append(rf"(?<=(?:^|\n)[ \t]{{0,16}})(?P<bare>{bare})")
    bare_names = names if bare and on("tool_tag") else []
    blocks = [p for i, p in enumerate(parts) if not (
        i == candidates and on("json") or p.startswith("(?P<pycall>"))]
    heads = [unnamed(start)] if start else []
    # The JSON and fence openers as they are (named groups unnamed): cheap on their own.
    json_opener = unnamed(_JSON_OPENER) if on("json") else "(?!)"
    every = prefilter_source(literals, json_opener, names if on("pythonic") else [],
                             bare_names, heads)
    blocks_first = prefilter_source(literals, "(?!)", [], bare_names, heads)
    return Patterns(("|".join(parts), every), ("|".join(blocks), blocks_first), window=window,
                    firsts=firsts, start=unnamed(start), heads=frozenset(starts))


def _any_name_patterns(parts: list[str], candidates: int, literals: list[str], start: str,
                       on: Any, window: int, firsts: str, heads: frozenset[str]) -> Patterns:
    """``_opener_patterns`` for any name: the tool-name openers after the others, and an
    ``re`` prefilter whose branches each start with a literal character (so that ``re``
    skips to where one may match), the tool-name openers last (``ToolNames.find_whole``)."""
    any_name = any_name_openers(BODY_WS)
    first = trie_branches(literals)
    json_heads = [r"\[" + _JSON_REST, r"\{" + _JSON_REST, _FENCE] if on("json") else []
    named, named_heads = [], []
    for kind, head, wanted in (("tag", "tag", on("tool_tag", "yaml_tag")),
                               ("pycall", "pycall_head", on("pythonic")),
                               ("bare", "bare_head", on("tool_tag"))):
        if wanted:
            named.append(any_name[kind])
            named_heads.append(any_name[head])
    parts = parts + named
    blocks = [p for i, p in enumerate(parts) if not (
        i == candidates and on("json") or p.startswith("(?P<pycall>"))]
    block_heads = [h for h in named_heads if not h.startswith(r"\[")]
    return Patterns(("|".join(parts), "|".join(first + json_heads + named_heads)),
                    ("|".join(blocks), "|".join(first + block_heads)), window=window,
                    firsts=firsts, any_name=True, start=start, heads=heads)


def _bare_openers(names: list[str], parameters: dict[str, list[str]]) -> str:
    """``NAME`` (or ``NAME:``, or an opening tag never closed, ``<NAME``) alone on its line,
    then, on the next, the tag of one of that tool's own parameters: how some models write a
    call with no opening tag."""
    alts = []
    for name in names:
        params = sorted({p for p in parameters.get(name, ()) if _PARAM_NAME.fullmatch(p)},
                        key=len, reverse=True)
        if params:
            tags = "|".join(regex.escape(p) for p in params)
            alts.append(rf"<?{regex.escape(name)}[ \t]{{0,8}}:?[ \t]{{0,8}}\r?\n"
                        rf"[ \t\r\n]{{0,{BODY_WS}}}<(?:{tags})[ \t]{{0,8}}/?>")
    return "|".join(alts)
