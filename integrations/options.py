"""What both integrations need from a request: its tools as plain dicts, a preset's options.

The servers hand over tools as their own objects (pydantic models, OpenAI types, dicts);
the codec takes plain OpenAI-style dicts. Presets are the proxy's family presets
(``toolcodec serve --preset``), so one name means the same formats everywhere.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from toolcodec.pool.proxy.settings import PRESETS  # the one table of family presets
from toolcodec.results.errors import CodecError
from toolcodec.results.result import DecodeResult


def tool_dicts(tools: Iterable[Any] | None) -> list[dict[str, Any]]:
    """*tools* as OpenAI-style dicts: pydantic models are dumped without their unset
    fields, dicts are taken as they are."""
    out = []
    for tool in tools or ():
        if hasattr(tool, "model_dump"):
            tool = tool.model_dump(exclude_none=True)
        if isinstance(tool, dict):
            out.append(tool)
    return out


def preset_options(preset: str | None) -> dict[str, Any]:
    """The decoder options of *preset* (None: every format); a ``ValueError`` names the
    presets when it is unknown.

    Only ``formats`` is taken: in a model server the reasoning is its reasoning parser's job,
    so the text handed to a tool parser starts after it."""
    if preset is None:
        return {}
    if preset not in PRESETS:
        raise ValueError(f"unknown toolcodec preset {preset!r}; expected one of "
                         f"{sorted(PRESETS)}")
    formats = PRESETS[preset].get("formats")
    return {"formats": tuple(formats)} if formats else {}


def preset_names() -> list[str]:
    """Every preset's name, in the table's order."""
    return list(PRESETS)


def error_codes(errors: Iterable[CodecError | dict[str, Any]]) -> list[str]:
    """The codes of *errors* (``CodecError`` objects or their dicts), in order."""
    return [e["code"] if isinstance(e, dict) else e.code for e in errors]


def kept_text(text: str, result: DecodeResult) -> str:
    """The text a server must still show: ``result.content``, plus reasoning the decoder
    found in it written as it came (the server's own reasoning parser had left it there).
    """
    if result.reasoning is None:
        return result.content
    kept = "".join(text[s.start:s.end] for s in result.spans
                   if s.kind in ("text", "markup", "reasoning"))
    return kept.strip()
