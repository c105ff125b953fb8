"""A seeded corpus of realistic model outputs, or the user's own, as decode jobs.

``builtin_corpus(n, seed=1)`` draws ``n`` outputs: a format (every shape ``decode`` reads),
a size from a heavy-tailed distribution between 100 B and 100 KB (most outputs are small, a
few are huge, as in real traffic), and with probability ``malformed`` one malformation of the
kinds models produce. The same seed gives the same corpus, byte for byte, so two runs (two
versions, two machines) are compared on the same inputs.

``load_corpus(path)`` reads JSONL: each line ``{"text": ...}``, ``{"message": {...}}`` or a
whole job ``{"op": ..., "payload": {...}}``; ``tools`` on a line (or ``--tools``) apply.
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import orjson

TOOLS: list[dict[str, Any]] = [
    {"type": "function", "function": {"name": "get_weather", "parameters": {
        "type": "object", "required": ["city"],
        "properties": {"city": {"type": "string"}, "days": {"type": "integer"},
                       "unit": {"enum": ["celsius", "fahrenheit"]}}}}},
    {"type": "function", "function": {"name": "search_files", "parameters": {
        "type": "object", "required": ["query"],
        "properties": {"query": {"type": "string"}, "paths": {"type": "array",
                                                              "items": {"type": "string"}},
                       "max_results": {"type": "integer"}}}}},
    {"type": "function", "function": {"name": "write_note", "parameters": {
        "type": "object", "required": ["title", "body"],
        "properties": {"title": {"type": "string"}, "body": {"type": "string"},
                       "tags": {"type": "array", "items": {"type": "string"}}}}}},
]
FORMATS = ("hermes", "qwen_xml", "tool_tag", "tool_element", "native", "json_in_prose", "prose")
MALFORMATIONS = ("trailing_comma", "single_quotes", "unescaped_amp", "unescaped_lt",
                 "truncated", "bidi", "arithmetic", "unknown_tool")
MIN_SIZE, MAX_SIZE = 100, 100_000
_WORDS = ("the", "weather", "file", "search", "result", "model", "note", "tool", "call", "value",
          "Paris", "Oslo", "query", "because", "and", "with", "אבג", "données", "数据")
_BIDI = "\u200f\u202b"


@dataclass(frozen=True, slots=True)
class CorpusItem:
    """One job of the corpus and how it was made (for per-kind reporting)."""

    op: str
    payload: dict[str, Any]
    kind: str = "user"
    malformation: str | None = None
    size: int = 0


@dataclass(slots=True)
class Mix:
    """What the built-in corpus draws from."""

    formats: tuple[str, ...] = FORMATS
    malformed: float = 0.3
    malformations: tuple[str, ...] = MALFORMATIONS
    size_alpha: float = 1.2  # Pareto shape: smaller is heavier-tailed
    sizes: tuple[int, int] = (MIN_SIZE, MAX_SIZE)
    extra: dict[str, Callable[[random.Random, str, dict], str]] = field(default_factory=dict)


def builtin_corpus(n: int, *, seed: int = 1, mix: Mix | None = None) -> list[CorpusItem]:
    """``n`` decode jobs drawn with ``random.Random(seed)``: reproducible across runs."""
    mix = mix or Mix()
    rng = random.Random(seed)
    return [_draw(rng, mix) for _ in range(n)]


def _draw(rng: random.Random, mix: Mix) -> CorpusItem:
    fmt = rng.choice(mix.formats)
    size = _size(rng, mix)
    bad = rng.choice(mix.malformations) if rng.random() < mix.malformed else None
    name, args = _call(rng, size)
    if bad == "unknown_tool":
        name = name.replace("_", "") + "_v2"
    if fmt == "native":
        arguments = _malform(rng, _json(args), bad)
        message = {"role": "assistant", "content": None, "tool_calls": [
            {"id": f"call_{rng.randrange(10**8)}", "type": "function",
             "function": {"name": name, "arguments": arguments}}]}
        return CorpusItem("decode", {"message": message, "tools": TOOLS}, fmt, bad, size)
    render = mix.extra.get(fmt) or _RENDER[fmt]
    text = render(rng, name, args)
    if fmt != "prose":
        text = _malform(rng, text, bad)
    return CorpusItem("decode", {"text": text, "tools": TOOLS}, fmt, bad, len(text))


def _size(rng: random.Random, mix: Mix) -> int:
    low, high = mix.sizes
    value = low * (1 - rng.random()) ** (-1 / mix.size_alpha)  # Pareto, clipped
    return int(min(high, value))


def _call(rng: random.Random, size: int) -> tuple[str, dict[str, Any]]:
    which = rng.randrange(3)
    if which == 0:
        return "get_weather", {"city": rng.choice(["Paris", "Oslo", "תל אביב"]),
                               "days": rng.randrange(1, 8), "unit": "celsius"}
    if which == 1:
        paths = [f"/src/{_words(rng, 1)}_{i}.py" for i in range(max(1, size // 400))]
        return "search_files", {"query": _words(rng, 3), "paths": paths, "max_results": 20}
    return "write_note", {"title": _words(rng, 4), "body": _words(rng, max(4, size // 7)),
                          "tags": ["a", "b"]}


def _words(rng: random.Random, n: int) -> str:
    return " ".join(rng.choice(_WORDS) for _ in range(n))


def _json(value: Any) -> str:
    return orjson.dumps(value).decode()


def _prose(rng: random.Random) -> str:
    return _words(rng, rng.randrange(3, 25)).capitalize() + "."


def _hermes(rng: random.Random, name: str, args: dict) -> str:
    body = _json({"name": name, "arguments": args})
    return f"{_prose(rng)}\n<tool_call>\n{body}\n</tool_call>"


def _qwen_xml(rng: random.Random, name: str, args: dict) -> str:
    params = "".join(f"<parameter={k}>\n{_xml_value(v)}\n</parameter>\n" for k, v in args.items())
    return f"{_prose(rng)}\n<tool_call>\n<function={name}>\n{params}</function>\n</tool_call>"


def _tool_tag(rng: random.Random, name: str, args: dict) -> str:
    params = "".join(f"<{k}>{_xml_value(v)}</{k}>" for k, v in args.items())
    return f"{_prose(rng)} <{name}>{params}</{name}>"


def _tool_element(rng: random.Random, name: str, args: dict) -> str:
    params = "".join(f"<{k}>{_xml_value(v)}</{k}>" for k, v in args.items())
    return f"{_prose(rng)}\n<tool><name>{name}</name>{params}</tool>"


def _json_in_prose(rng: random.Random, name: str, args: dict) -> str:
    return f"{_prose(rng)} {_json({'name': name, 'arguments': args})} {_prose(rng)}"


def _prose_only(rng: random.Random, name: str, args: dict) -> str:
    text = _words(rng, max(5, len(_json(args)) // 6))
    return f"{text}. Use <b>{name}</b> later & compare a < b, {{maybe}} [not] a call."


def _xml_value(value: Any) -> str:
    return value if isinstance(value, str) else _json(value)


_RENDER: dict[str, Callable[[random.Random, str, dict], str]] = {
    "hermes": _hermes, "qwen_xml": _qwen_xml, "tool_tag": _tool_tag,
    "tool_element": _tool_element, "json_in_prose": _json_in_prose, "prose": _prose_only,
}


def _malform(rng: random.Random, text: str, bad: str | None) -> str:
    if bad is None or bad == "unknown_tool":
        return text
    if bad == "trailing_comma":
        return _replace_last(text, "}", ",}")
    if bad == "single_quotes":
        return _replace_last(text, '"city"', "'city'").replace('"query"', "'query'", 1)
    if bad == "unescaped_amp":
        return _replace_last(text, "</", " & more</")
    if bad == "unescaped_lt":
        return _replace_last(text, "</", " a < b</")
    if bad == "truncated":
        return text[: max(1, math.ceil(len(text) * rng.uniform(0.5, 0.95)))]
    if bad == "bidi":
        return text.replace('"', _BIDI[0] + '"', 2)
    if bad == "arithmetic":
        return text.replace('"max_results": 20', '"max_results": 4*5').replace(
            '"days": ', '"days": 1+', 1)
    raise ValueError(f"unknown malformation {bad!r}")


def _replace_last(text: str, old: str, new: str) -> str:
    at = text.rfind(old)
    return text if at < 0 else text[:at] + new + text[at + len(old):]


# -- the user's own corpus ---------------------------------------------------------------------


class CorpusError(ValueError):
    """A corpus file that cannot be used; the message names the line."""


def load_corpus(path: str, *, tools: list[dict] | None = None) -> list[CorpusItem]:
    """Read a JSONL corpus (see the module docstring). Blank lines are skipped."""
    items = []
    with open(path, "rb") as fh:
        for number, line in enumerate(fh, 1):
            if line.strip():
                items.append(_item(line, number, tools))
    if not items:
        raise CorpusError(f"{path}: no jobs found")
    return items


def _item(line: bytes, number: int, tools: list[dict] | None) -> CorpusItem:
    try:
        row = orjson.loads(line)
    except orjson.JSONDecodeError as exc:
        raise CorpusError(f"line {number}: not JSON ({exc})") from None
    if not isinstance(row, dict):
        raise CorpusError(f"line {number}: expected a JSON object")
    if isinstance(row.get("op"), str) and isinstance(row.get("payload"), dict):
        return CorpusItem(row["op"], row["payload"], size=len(line))
    payload = {k: row[k] for k in ("text", "message") if k in row}
    if len(payload) != 1:
        raise CorpusError(f"line {number}: needs 'text', 'message', or 'op' and 'payload'")
    if row.get("tools", tools) is not None:
        payload["tools"] = row.get("tools", tools)
    return CorpusItem("decode", payload, size=len(line))
