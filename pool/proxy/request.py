"""What one chat request asks of the decoder: its options, its tools, whether to decode at all.

The request's ``"toolcodec": {...}`` field (decoder options, see ``settings``) is taken out here
and never goes upstream. ``tool_choice`` narrows what may be decoded: ``"none"`` makes no call
out of text (the answer is relayed as upstream wrote it), a forced function
(``{"type": "function", "function": {"name": N}}``) accepts only calls to ``N`` — a call to any
other tool is an ``unknown_tool`` error and its text stays content, as ``decode`` keeps it.
A forced choice (``"required"`` or a function) answered without that call is flagged
(``flags.tool_choice_unmet``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from toolcodec.pool.model_labels import note_request
from toolcodec.pool.proxy.settings import OVERRIDE_FIELD, ModelSettings, SettingsError


@dataclass(slots=True)
class Prepared:
    """One request, ready: ``upstream`` is the body to send, the rest is for decoding."""

    upstream: dict[str, Any]
    tools: list[dict[str, Any]]  # the tools calls may name (narrowed by tool_choice)
    options: dict[str, Any]  # codec options, JSON (a decode job's ``options``)
    decode: bool  # False with tool_choice "none": relay the answer as upstream wrote it
    # tool_choice "required" or the forced function's name: an answer without a call to it
    # is flagged (tool_choice_unmet)
    forced: str | None = None
    # max_completion_tokens (else max_tokens): usage.completion_tokens reaching it means cut
    max_tokens: int | None = None
    # the codec this process built for tools and options (``Pool.ready``), found once per
    # request for the tools check, the preparation and the decode job
    codec: Any = None
    # the client's body as it came, when ``upstream`` is that body unchanged (sent as it is)
    raw: bytes | None = None


def prepare(body: dict[str, Any], models: ModelSettings, raw: bytes | None = None) -> Prepared:
    """Split *body* into what goes upstream and what the decoder needs; *raw*: the bytes
    *body* was read from, sent upstream as they are when nothing is taken out of it.
    Raises ``SettingsError`` (the client's 400) for a bad override or ``tool_choice``."""
    override, model = body.get(OVERRIDE_FIELD), body.get("model")
    if OVERRIDE_FIELD in body:
        upstream, raw = {k: v for k, v in body.items() if k != OVERRIDE_FIELD}, None
    else:
        upstream = body
    seen = models.seen(model)
    options = models.resolve(model, override, seen=seen)
    note_request(models, model, override, seen)  # labels, log context
    tools = body.get("tools") or []
    choice = body.get("tool_choice")
    limit = body.get("max_completion_tokens", body.get("max_tokens"))
    max_tokens = limit if isinstance(limit, int) and not isinstance(limit, bool) and limit > 0 \
        else None
    if choice == "none":
        return Prepared(upstream, [], options, False, max_tokens=max_tokens, raw=raw)
    if isinstance(choice, dict):
        name = (choice.get("function") or {}).get("name") if isinstance(
            choice.get("function"), dict) else None
        if not isinstance(name, str):
            raise SettingsError("tool_choice: a forced choice is {\"type\": \"function\", "
                                "\"function\": {\"name\": NAME}}")
        tools = [t for t in tools if _tool_name(t) == name]
        if not tools:
            raise SettingsError(f"tool_choice names {name!r}, which is not among the tools")
    elif choice not in (None, "auto", "required"):
        raise SettingsError("tool_choice must be \"none\", \"auto\", \"required\" or a forced "
                            "function")
    forced = name if isinstance(choice, dict) else ("required" if choice == "required" and tools
                                                     else None)
    return Prepared(upstream, tools, options, True, forced, max_tokens, raw=raw)


def _tool_name(tool: Any) -> Any:
    if not isinstance(tool, dict):
        return None
    fn = tool.get("function", tool)
    return fn.get("name") if isinstance(fn, dict) else None
