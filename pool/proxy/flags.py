"""What the proxy says about a decoded answer besides the answer itself.

- A forced ``tool_choice`` (``"required"`` or a named function) answered without that call
  gets a ``tool_choice_unmet`` error in its decode result (:func:`check_forced`).
- Markup the decoder did not read, a call to an undeclared tool, or an unmet forced choice are
  named in ``x-toolcodec-unrecognised`` (whole answers) or in the final chunk's
  ``toolcodec.unrecognised`` (streams), by :func:`unrecognised`: a fixed set of names
  (:data:`WHAT`), so that the metric counting them stays bounded.
- ``usage.completion_tokens`` reaching the request's ``max_completion_tokens`` (or
  ``max_tokens``) means the output was cut, whatever ``finish_reason`` says
  (:func:`cut_by_usage`): some servers report ``tool_calls`` or ``stop`` for a cut call.
- The markup of a call the output was cut in is not shown as content (:func:`without_cut`):
  the decode result keeps it (the ``truncated`` error's ``raw``, and ``content``), the
  client's ``content`` does not.

Pure: no I/O.
"""

from __future__ import annotations

from typing import Any

from toolcodec.decoding.unread_markup import KINDS
from toolcodec.results.errors import TOOL_CHOICE_UNMET, TRUNCATED, UNKNOWN_TOOL, UNRECOGNISED_MARKUP

UNRECOGNISED_HEADER = "x-toolcodec-unrecognised"
# Every name x-toolcodec-unrecognised and toolcodec_proxy_unrecognised_total{what} take.
WHAT = (*KINDS, UNKNOWN_TOOL, TOOL_CHOICE_UNMET)


def check_forced(result: dict[str, Any], forced: str | None) -> None:
    """Add a ``tool_choice_unmet`` error to *result* (a decode result dict, changed in place)
    when the request forced a call (*forced*: ``"required"`` or the function's name) and the
    result has none to it."""
    if forced is None or result.get("errors") is None:
        return
    calls = result.get("calls") or []
    if forced == "required" and calls:
        return
    if forced != "required" and any(c.get("name") == forced for c in calls):
        return
    wanted = "a tool call" if forced == "required" else f"a call to {forced!r}"
    result["errors"] = [*result["errors"], {
        "code": TOOL_CHOICE_UNMET, "tool_choice": forced,
        "message": f"the request's tool_choice asked for {wanted} and the answer holds none"}]
    result["ok"] = False


def unrecognised(result: dict[str, Any]) -> list[str]:
    """What *result* holds that was not made a call, named from :data:`WHAT`, in order."""
    out: list[str] = []
    for error in result.get("errors") or ():
        code = error.get("code")
        what = error.get("markup") if code == UNRECOGNISED_MARKUP else (
            code if code in (UNKNOWN_TOOL, TOOL_CHOICE_UNMET) else None)
        if what is not None:
            what = what if what in WHAT else "special_token"
            if what not in out:
                out.append(what)
    return out


def cut_by_usage(usage: Any, max_tokens: int | None, choices: int) -> bool:
    """Whether *usage* shows the output cut by *max_tokens*: its ``completion_tokens`` (the
    sum over *choices*) reach the limit for each of them."""
    if max_tokens is None or not isinstance(usage, dict):
        return False
    used = usage.get("completion_tokens")
    if not isinstance(used, int) or isinstance(used, bool):
        return False
    return used >= max_tokens * max(choices, 1)


def without_cut(content: str | None, result: dict[str, Any]) -> str | None:
    """*content* without the markup of the call the output was cut in (at its end)."""
    if not content:
        return content
    for raw in cut_markup(result):
        raw = raw.strip()
        if raw and content.endswith(raw):
            content = content[:-len(raw)].rstrip()
        elif raw.endswith("…") and (at := content.rfind(raw[:-1])) >= 0:
            content = content[:at].rstrip()
    return content or None


def cut_markup(result: dict[str, Any]) -> list[str]:
    """The ``raw`` of each ``truncated`` error of *result*."""
    return [e["raw"] for e in result.get("errors") or ()
            if e.get("code") == TRUNCATED and isinstance(e.get("raw"), str)]
