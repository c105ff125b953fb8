"""Call markup the decoder did not read, found in what it left as content.

A model may write a call in a family the decoder does not read, or in one a preset left out
(Cohere's ``<|START_ACTION|>`` under a Qwen preset, Hunyuan's ``<tool_sep>``), or in a tag the
decoder could not take as a call. Left alone, that call would reach the client as prose, as
if the model had answered in words. :func:`unread_markup` finds such markup in a result's
``content`` so that the result can say so (an ``unrecognised_markup`` error naming *what*
was seen); :func:`unread_errors` turns the findings into those errors.

It is precise rather than eager: markup inside Markdown code (fenced blocks, inline code
spans) is code, and a tag counts only when a call body follows it (``{``, ``[``, a nested
tag, or a name that opens arguments), so prose that names ``<tool_call>`` is not flagged.
Special tokens (``<|…|>``, ``<｜…｜>``) are never prose; one whose name speaks of tools,
actions, functions or calls is flagged wherever it stands outside code.

*what* is one of a fixed set (:data:`KINDS`), so that counting by it stays bounded. Pure:
no I/O; linear in the content.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from toolcodec.results.errors import PAYLOAD_TOO_LARGE, UNRECOGNISED_MARKUP, CodecError

# Every value ``what`` takes.
KINDS = ("cohere", "hunyuan", "special_token", "bracket_token", "tool_call_tag")
RAW_CHARS = 200  # of the markup, in the error's ``raw``

_CODE = re.compile(r"```.*?(?:```|\Z)|`[^`\n]+`", re.S)
_SPECIAL = re.compile(r"<\|([A-Za-z][\w.:-]{0,40})\|>|<｜([^｜<>\n]{1,40})｜>")
_CALL_WORD = re.compile(r"tool|action|function|call|plugin|invoke|python|api", re.I)
_BRACKET = re.compile(r"\[(TOOL_CALLS|TOOL_REQUEST|TOOL_CALL|FUNCTION_CALLS?|ARGS)\]"
                      r"(?=\s*[\[{]|[A-Za-z_][\w.-]*\s*(?:\[ARGS\]|[{(]))")
_TAG = re.compile(
    r"<(?:tool_calls?|function_calls?|tool_use|tool_code|tool_sep|function=[\w.-]+"
    r"|invoke\s+name=\"[\w.-]+\")[^<>\n]{0,80}>"
    r"(?=\s*(?:[{\[]|<(?!/)|[A-Za-z_][\w.-]*(?:[ \t]*\n|[({<])))")
_HUNYUAN = re.compile(r"<tool_sep>")
# What every pattern above starts with: most content with a "<" or a "[" holds none of it,
# and is then passed over in one scan instead of four.
_ANY = re.compile(r"<(?:[|｜]|tool_|function|invoke)|\[(?:TOOL_|FUNCTION_CALL|ARGS\])")


@dataclass(frozen=True, slots=True)
class Finding:
    """Markup seen at ``position`` of the content: its kind and its text."""

    what: str
    position: int
    text: str


def unread_markup(content: str) -> list[Finding]:
    """The call markup in *content* outside Markdown code, in order, at most one finding
    per kind (the first): enough to say what was seen and where it starts."""
    if not content or ("<" not in content and "[" not in content) \
            or _ANY.search(content) is None:
        return []
    code = [(m.start(), m.end()) for m in _CODE.finditer(content)] if "`" in content else []
    found: dict[str, Finding] = {}

    def add(what: str, m: re.Match[str]) -> None:
        if what not in found and not _inside(code, m.start()):
            found[what] = Finding(what, m.start(), content[m.start():m.start() + RAW_CHARS])

    for m in _SPECIAL.finditer(content):
        name = (m.group(1) or m.group(2)).replace("▁", "_")
        if name.upper() in ("START_ACTION", "END_ACTION"):
            add("cohere", m)
        elif _CALL_WORD.search(name) and content[m.end():].strip():
            add("special_token", m)  # a lone token at the end opens or ends nothing here
    for m in _HUNYUAN.finditer(content):
        add("hunyuan", m)
    for m in _BRACKET.finditer(content):
        add("bracket_token", m)
    for m in _TAG.finditer(content):
        if m.group().startswith("<tool_sep>"):
            continue  # counted as hunyuan
        add("tool_call_tag", m)
    if "hunyuan" in found:  # its <tool_calls>/<tool_call> wrappers are the same markup
        found.pop("tool_call_tag", None)
    return sorted(found.values(), key=lambda f: f.position)


def unread_errors(content: str, errors: list[Any]) -> list[CodecError]:
    """``unrecognised_markup`` errors for the markup in *content* that the result's *errors*
    (``CodecError`` or dicts) do not already account for: a block the decoder read and
    reported (``raw``) is not reported twice."""
    findings = unread_markup(content)
    if not findings:
        return []
    raws = [r for r in (_raw(e) for e in errors) if r]
    if any(_code(e) == PAYLOAD_TOO_LARGE for e in errors):  # blocks past the limit, said
        return []
    out = []
    for finding in findings:
        if any(_covers(raw, content, finding) for raw in raws):
            continue
        out.append(CodecError(UNRECOGNISED_MARKUP, f"the output holds call markup the decoder "
                              f"did not read ({finding.what}) at offset {finding.position} of "
                              "the content; it was left as content, not made a call",
                              {"markup": finding.what, "position": finding.position,
                               "raw": finding.text}))
    return out


def _inside(spans: list[tuple[int, int]], at: int) -> bool:
    return any(start <= at < end for start, end in spans)


def _code(error: Any) -> Any:
    return error.code if isinstance(error, CodecError) else (
        error.get("code") if isinstance(error, dict) else None)


def _raw(error: Any) -> str | None:
    details = error.to_dict() if isinstance(error, CodecError) else error
    raw = details.get("raw") if isinstance(details, dict) else None
    return raw if isinstance(raw, str) else None


def _covers(raw: str, content: str, finding: Finding) -> bool:
    """Whether the failed block *raw* holds the finding's markup (the block stayed in the
    content as it was, so the finding lies within one of its occurrences). A long block's
    ``raw`` is cut and ends with an ellipsis: its start is what is looked for."""
    raw = (raw[:-1] if raw.endswith("…") else raw).strip()  # content is stripped at its ends
    if not raw:
        return False
    start = content.find(raw)
    while start != -1:
        if start <= finding.position < start + len(raw):
            return True
        start = content.find(raw, start + 1)
    return False


def said(result: Any, finish_reason: str | None = None) -> Any:
    """*result* (a ``DecodeResult``) with an ``unrecognised_markup`` error for each kind of
    unread call markup its content holds; ``ok`` turns false when one is added. An output
    cut by ``max_tokens`` (*finish_reason* ``"length"``) may end in a piece of any opener, and
    its cut block is said as ``truncated``: nothing more is said of it."""
    if finish_reason == "length":
        return result
    added = unread_errors(result.content, result.errors)
    if added:
        result.errors = [*result.errors, *added]
        result.ok = False
    return result
