"""Fuzz campaign: generated inputs through every entry point; nothing may crash, stall or
make a result unencodable.

    python tests/benchmarks/fuzz_campaign.py 1000000 [--seed 1] [--targets decode_text,...]
        [--findings FILE]

``count`` inputs are shared among the targets by weight (a validate input is one argument
set against a generated schema; a stream input is one text under one random chunking, so a
few chunkings of one text count as a few inputs). For every input it checks:

- no exception leaves the entry point (schema construction may only refuse with
  ``InvalidToolsError``);
- no result carries ``internal_error``;
- ``orjson.dumps(result.to_dict())`` works;
- stream: ``result().to_dict()`` after feeding the chunks equals ``decode`` of the whole text.

It prints counts per target (inputs, findings, and for validate how many generated schemas
were refused at construction) and writes each finding (target, kind, input repr) to
``--findings`` as JSON lines, to be turned into example tests. Inputs come from a seeded
``random.Random``: a seed and a count name the same inputs on any machine. Exit status 1 when
anything was found.
"""

from __future__ import annotations

import argparse
import random
import sys
import time
from collections.abc import Callable
from typing import Any

import orjson
import toolcodec as codec
from toolcodec import kindaxml
from toolcodec.formats.table import END_OF_GENERATION, MARKER_FORMATS
from toolcodec.schema.tools import InvalidToolsError

TOOLS = [
    {"type": "function", "function": {"name": "get_weather", "parameters": {
        "type": "object", "properties": {"city": {"type": "string"},
                                         "days": {"type": "integer"},
                                         "unit": {"enum": ["c", "f"]}},
        "required": ["city"]}}},
    {"name": "search", "parameters": {"type": "object", "properties": {
        "q": {"type": "string"}, "tags": {"type": "array", "items": {"type": "string"}},
        "opts": {"type": "object", "additionalProperties": {"type": "number"}}}}},
    {"name": "note", "parameters": {"type": "object", "properties": {"text": {}}}},
]
NAMES = ["get_weather", "search", "note", "nope", "", "ge t"]

_MARKERS = sorted({m for f in MARKER_FORMATS for m in f.openers + f.closers} |
                  set(END_OF_GENERATION))
PIECES = _MARKERS + [
    "Sure. ", "ok", " ", "\n", "\t", "a < b", "x & y", "{", "}", "[", "]", "(", ")", '"', "\\",
    "'", ":", ",", "=", "<", ">", "/", "<b>", "</i>", "<tool_call>", "</tool_call>", "<think>",
    "</think>", "<tool>", "</tool>", "<get_weather>", "</get_weather>", "<city>Oslo</city>",
    "<days>3</days>", "<function=search>", "<parameter=q>cats</parameter>", "<parameter=q>",
    "</parameter>", "</function>", "<search/>", "<![CDATA[<x>]]>", "<![CDATA[", "]]>",
    '{"name": "get_weather", "arguments": {"city": "Paris"}}', '{"name": "search", ',
    '"arguments": {"q": "x"}}', '"arguments": ', '{"name": "nope", "arguments": {}}',
    "```json\n", "```", '{"city": "Rome", "days": 2,}', "\u200f", "\ud800", "\udc00",
    "functions.search:0", "search<\uff5ctool\u2581sep\uff5c>",
    "get_weather\n<arg_key>city</arg_key>",
    "<arg_value>Oslo</arg_value>", "[get_weather(city='Oslo', days=2)]", "[search(q=\"(\")",
    "search(q='a')", '<invoke name="search">', '<parameter name="q">x</parameter>', "</invoke>",
    "\ncity: Oslo\n", "get_weather\n", "search:\n", "\n<q>x</q>", "</search>", "<seed:think>",
    "function=search>", "call:search{q:<escape>x<escape>}", "<|\"|>", "&amp;", "&#xD800;",
    "&lt;", "99999999999999999999", "-0x8000000000000001", "1e400", "NaN", "True", "None",
    "…", "...", "// c\n", "/* c */", "#", "é", "\u2028", "\x00", "\ufeff", "ｃｉｔｙ",
    '\\"', "\\u00e9", "\\ud83d", "<tool_call>\n{", "}\n</tool_call>",
]
NUMBER_TEXTS = ["0", "-1", "2.5", "1e5", "18446744073709551616", "-9223372036854775809",
                "0x1F", "1_000", "+3", ".5", "00", "1e-400"]


class Findings:
    """What the campaign found, per target, with the inputs that showed it."""

    def __init__(self, path: str | None) -> None:
        self.counts: dict[str, dict[str, int]] = {}
        self.out = open(path, "ab") if path else None  # noqa: SIM115 - kept for the run

    def count(self, target: str, key: str, n: int = 1) -> None:
        row = self.counts.setdefault(target, {"inputs": 0, "findings": 0})
        row[key] = row.get(key, 0) + n

    def found(self, target: str, kind: str, data: Any) -> None:
        self.count(target, "findings")
        self.count(target, kind)
        if self.out is not None:
            line = {"target": target, "kind": kind, "input": repr(data)[:20_000]}
            self.out.write(orjson.dumps(line) + b"\n")
            self.out.flush()


# -- generators ---------------------------------------------------------------------------


def gen_text(rng: random.Random) -> str:
    parts = []
    for _ in range(rng.randint(0, 30)):
        roll = rng.random()
        if roll < 0.7:
            parts.append(rng.choice(PIECES))
        elif roll < 0.8:
            parts.append("".join(chr(rng.randint(0x20, 0x7E)) for _ in range(rng.randint(1, 8))))
        elif roll < 0.85:
            parts.append(chr(rng.randint(0, 0x10FFFF)))
        elif roll < 0.9:
            n = rng.randint(1, 200)
            parts.append(rng.choice(["[", "{", "<a>", "(", '{"a":', "[1,"]) * n)
        elif roll < 0.95:
            parts.append(rng.choice(NUMBER_TEXTS))
        else:
            parts.append(orjson.dumps(gen_json_value(rng, 3)).decode())
    return "".join(parts)


def gen_json_value(rng: random.Random, depth: int) -> Any:
    roll = rng.random()
    if depth <= 0 or roll < 0.4:
        return rng.choice([None, True, False, 0, -7, 2**63 - 1, 1.5, "", "x", "Oslo",
                           "a\"b", "<tag>", "日本"])
    if roll < 0.7:
        return [gen_json_value(rng, depth - 1) for _ in range(rng.randint(0, 4))]
    keys = ["city", "days", "q", "text", "tags", "opts", "unit", "a", ""]
    return {rng.choice(keys): gen_json_value(rng, depth - 1) for _ in range(rng.randint(0, 4))}


def gen_python_value(rng: random.Random, depth: int) -> Any:
    """JSON values plus what only Python callers send: wide integers, surrogates, floats that
    JSON cannot spell, tuples."""
    roll = rng.random()
    if depth <= 0 or roll < 0.45:
        return rng.choice([2**64, -(2**64) - 1, 10**400, 2**64 - 1, -(2**63), float("nan"),
                           float("inf"), "\ud800", "a\udfffb", "\u202e", "ｃｉｔｙ", 5, 5.0,
                           "5", "true", "[1, 2]", '{"a": 1}', None, True, ""])
    if roll < 0.6:
        return tuple(gen_python_value(rng, depth - 1) for _ in range(rng.randint(0, 3)))
    if roll < 0.8:
        return [gen_python_value(rng, depth - 1) for _ in range(rng.randint(0, 4))]
    keys = ["city", "days", "q", "text", "tags", "opts", "unit", "\ud800k", "a"]
    return {rng.choice(keys): gen_python_value(rng, depth - 1) for _ in range(rng.randint(0, 4))}


def gen_message(rng: random.Random) -> dict:
    message: dict[str, Any] = {"role": "assistant"}
    roll = rng.random()
    message["content"] = (gen_text(rng) if roll < 0.5 else None if roll < 0.7 else
                          [{"type": "text", "text": gen_text(rng)}, {"type": "image"}, "x"]
                          if roll < 0.85 else rng.choice([3, {"a": 1}, ["\ud800"]]))
    if rng.random() < 0.3:
        message["reasoning_content"] = rng.choice([gen_text(rng), 5, None])
    calls = []
    for i in range(rng.randint(0, 3)):
        args: Any
        roll = rng.random()
        if roll < 0.4:
            args = gen_python_value(rng, 4)
            args = args if isinstance(args, dict) else {"text": args}
        elif roll < 0.8:
            args = rng.choice([gen_text(rng), orjson.dumps(gen_json_value(rng, 4)).decode()])
        else:
            args = rng.choice([None, "", 7, [1], "{'city': 'Oslo',}"])
        fn = {"name": rng.choice(NAMES + [None, 5]), "arguments": args}
        calls.append(rng.choice([{"id": f"c{i}", "type": "function", "function": fn},
                                 {"function": fn}, fn, None]))
    if calls or rng.random() < 0.2:
        message["tool_calls"] = calls if rng.random() < 0.95 else {"bad": calls}
    return message


SCHEMA_TYPES = ["string", "integer", "number", "boolean", "null", "array", "object"]


def gen_schema(rng: random.Random, depth: int, defs: list[str]) -> Any:
    """A subschema from a grammar of JSON Schema keywords, with references among ``defs``."""
    roll = rng.random()
    if depth <= 0 or roll < 0.15:
        return rng.choice([{"type": rng.choice(SCHEMA_TYPES)}, {}, True, False,
                           {"enum": ["a", 1, None, [1]]}, {"const": "x"},
                           {"type": "string", "pattern": rng.choice(["^a", "[0-9]+", "(a|b)*c"]),
                            "maxLength": 5}, {"type": "integer", "minimum": 0, "maximum": 9}])
    if roll < 0.35 and defs:
        ref = rng.choice([f"#/$defs/{rng.choice(defs)}", "#", "#anchor"] * 6 +
                         ["#/$defs/missing", "#/properties", "#/required/0"])
        return {rng.choice(["$ref"] * 9 + ["$dynamicRef"]): ref}
    if roll < 0.5:
        key = rng.choice(["anyOf", "allOf", "oneOf"])
        return {key: [gen_schema(rng, depth - 1, defs) for _ in range(rng.randint(1, 3))]}
    if roll < 0.6:
        return {"type": "array", "items": gen_schema(rng, depth - 1, defs),
                **({"minItems": 1} if rng.random() < 0.3 else {})}
    if roll < 0.65:
        return {"not": gen_schema(rng, depth - 1, defs)}
    if roll < 0.7:
        return {"if": gen_schema(rng, depth - 1, defs), "then": gen_schema(rng, depth - 1, defs),
                "else": gen_schema(rng, depth - 1, defs)}
    return gen_object_schema(rng, depth - 1, defs)


def gen_object_schema(rng: random.Random, depth: int, defs: list[str]) -> dict:
    names = rng.sample(["city", "days", "q", "text", "tags", "opts", "unit", "a"],
                       rng.randint(0, 4))
    schema: dict[str, Any] = {"type": "object",
                              "properties": {n: gen_schema(rng, depth, defs) for n in names}}
    if names and rng.random() < 0.4:
        schema["required"] = rng.sample(names, rng.randint(1, len(names)))
    if rng.random() < 0.3:
        schema["additionalProperties"] = rng.choice([False, True, {"type": "string"}])
    if rng.random() < 0.1:
        schema["patternProperties"] = {"^x": gen_schema(rng, depth, defs)}
    return schema


def gen_tool_schema(rng: random.Random) -> dict:
    defs = [f"d{i}" for i in range(rng.randint(0, 3))]
    schema = gen_object_schema(rng, rng.randint(1, 4), defs)
    if defs:
        schema["$defs"] = {d: gen_schema(rng, 3, defs) for d in defs}
        if rng.random() < 0.3:
            schema["$defs"][defs[0]] = {**schema["$defs"][defs[0]], "$anchor": "anchor"} \
                if isinstance(schema["$defs"][defs[0]], dict) else schema["$defs"][defs[0]]
    if rng.random() < 0.05:
        schema["$ref"] = "#"
    if rng.random() < 0.1:
        schema["$schema"] = rng.choice(["http://json-schema.org/draft-07/schema#",
                                        "https://json-schema.org/draft/2019-09/schema"])
    return schema


def chunked(text: str, rng: random.Random) -> list[str]:
    mode = rng.random()
    if mode < 0.2:
        return list(text)
    parts, i = [], 0
    top = 3 if mode < 0.6 else 40
    while i < len(text):
        n = rng.randint(1, top)
        parts.append(text[i:i + n])
        i += n
    return parts


# -- targets ------------------------------------------------------------------------------

def _check(target: str, result: dict, data: Any, findings: Findings) -> None:
    try:
        orjson.dumps(result)
    except TypeError:
        findings.found(target, "unencodable", data)
    errors = result.get("errors") or []
    if any(isinstance(e, dict) and e.get("code") == "internal_error" for e in errors):
        findings.found(target, "internal_error", data)


def _guard(target: str, data: Any, findings: Findings, run: Callable[[], Any]) -> None:
    findings.count(target, "inputs")
    try:
        run()
    except BaseException as exc:  # noqa: BLE001 - every exception is a finding
        if isinstance(exc, KeyboardInterrupt):
            raise
        findings.found(target, f"exception:{type(exc).__name__}", data)


def target_decode_text(rng: random.Random, findings: Findings, c: Any) -> None:
    text = gen_text(rng)
    _guard("decode_text", text, findings,
           lambda: _check("decode_text", c.decode(text).to_dict(), text, findings))


def target_decode_message(rng: random.Random, findings: Findings, c: Any) -> None:
    message = gen_message(rng)
    _guard("decode_message", message, findings,
           lambda: _check("decode_message", c.decode(message).to_dict(), message, findings))


def target_repair_json(rng: random.Random, findings: Findings, _c: Any) -> None:
    text = gen_text(rng) if rng.random() < 0.5 else _damaged_json(rng)
    _guard("repair_json", text, findings,
           lambda: _check("repair_json", codec.repair_json(text).to_dict(), text, findings))


def _damaged_json(rng: random.Random) -> str:
    text = orjson.dumps(gen_json_value(rng, 5)).decode()
    for _ in range(rng.randint(0, 4)):
        at = rng.randint(0, len(text))
        text = text[:at] + rng.choice(PIECES[-60:] + ["", ",", "'", "}", "]"]) + \
            text[at + rng.randint(0, 3):]
    return text if rng.random() < 0.8 else text[: rng.randint(0, len(text))]


def target_validate(rng: random.Random, findings: Findings, _c: Any, per_schema: int = 8) -> int:
    schema = gen_tool_schema(rng)
    tools = [{"name": "t", "parameters": schema}]
    findings.count("validate", "schemas")
    try:
        c = codec.ToolCallCodec(tools)
    except InvalidToolsError:
        findings.count("validate", "schemas_refused")
        findings.count("validate", "inputs")
        return 1
    except BaseException as exc:  # noqa: BLE001
        if isinstance(exc, KeyboardInterrupt):
            raise
        findings.count("validate", "inputs")
        findings.found("validate", f"construction:{type(exc).__name__}", schema)
        return 1
    for _ in range(per_schema):
        roll = rng.random()
        args = (gen_python_value(rng, 4) if roll < 0.4 else gen_json_value(rng, 4)
                if roll < 0.8 else orjson.dumps(gen_json_value(rng, 4)).decode())
        if rng.random() < 0.7 and not isinstance(args, dict | str):
            args = {rng.choice(["city", "q", "tags", "a"]): args}
        data = {"schema": schema, "arguments": args}
        _guard("validate", data, findings,
               lambda a=args, d=data: _check("validate", c.validate("t", a).to_dict(), d,
                                             findings))
    return per_schema


def target_kindaxml(rng: random.Random, findings: Findings, _c: Any) -> None:
    text = gen_text(rng) if rng.random() < 0.6 else _kindaxml_text(rng)
    _guard("kindaxml", text, findings,
           lambda: _check("kindaxml", kindaxml.parse(text).to_dict(), text, findings))


KX_PIECES = ["<cite>", "</cite>", "<cite id=1>", '<cite id="a" n=2>', "<note>", "</note>",
             "<a>", "</a>", "<b/>", "<", ">", "</", "&amp;", "&", "text ", "\n", "<!--", "-->",
             "<![CDATA[", "]]>", "<?x?>", "<cite", '"', "'", "=", "\ud800", "<unknown x=1>"]


def _kindaxml_text(rng: random.Random) -> str:
    return "".join(rng.choice(KX_PIECES) for _ in range(rng.randint(0, 40)))


def target_stream(rng: random.Random, findings: Findings, c: Any, chunkings: int = 3) -> int:
    text = gen_text(rng)
    whole: dict | None = None
    try:
        whole = c.decode(text).to_dict()
    except BaseException:  # noqa: BLE001 - decode_text reports it
        whole = None
    for _ in range(chunkings):
        parts = chunked(text, rng)
        data = {"text": text, "chunks": parts}

        def run(p: list[str] = parts, d: dict = data) -> None:
            s = c.stream(id_prefix="f")
            events = []
            for part in p:
                events += s.feed(part)
            events += s.close()
            got = s.result().to_dict()
            _check("stream", got, d, findings)
            orjson.dumps(events)
            if whole is not None and got != whole:
                findings.found("stream", "stream_differs_from_batch", d)

        _guard("stream", data, findings, run)
    return chunkings


# name: (function returning how many inputs it ran, or None for one; weight)
TARGETS: dict[str, tuple[Callable[..., int | None], int]] = {
    "decode_text": (target_decode_text, 30),
    "decode_message": (target_decode_message, 12),
    "repair_json": (target_repair_json, 20),
    "validate": (target_validate, 3),
    "kindaxml": (target_kindaxml, 10),
    "stream": (target_stream, 5),
}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("count", type=int, help="inputs in all, shared among the targets")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--targets", default=",".join(TARGETS))
    parser.add_argument("--findings", default=None, help="append findings here (JSON lines)")
    args = parser.parse_args(argv)
    names = [n for n in args.targets.split(",") if n]
    unknown = sorted(set(names) - set(TARGETS))
    if unknown:
        parser.error(f"unknown targets {unknown}; expected some of {sorted(TARGETS)}")
    rng = random.Random(args.seed)
    findings = Findings(args.findings)
    c = codec.ToolCallCodec(TOOLS)
    weights = [TARGETS[n][1] for n in names]
    start = time.process_time()
    done = 0
    while done < args.count:
        name = rng.choices(names, weights)[0]
        done += TARGETS[name][0](random.Random(rng.getrandbits(64)), findings, c) or 1
    took = time.process_time() - start
    total = sum(row["inputs"] for row in findings.counts.values())
    print(f"fuzz campaign: seed {args.seed}, {total} inputs in {took:.0f} s of CPU "
          f"({total / max(took, 1e-9):.0f}/s)")
    for name in names:
        row = findings.counts.get(name, {"inputs": 0, "findings": 0})
        extra = ", ".join(f"{k} {v}" for k, v in sorted(row.items())
                          if k not in ("inputs", "findings"))
        print(f"  {name:15} inputs {row['inputs']:>8}  findings {row['findings']:>5}"
              + (f"  ({extra})" if extra else ""))
    found = sum(row["findings"] for row in findings.counts.values())
    print(f"  {'total':15} inputs {total:>8}  findings {found:>5}")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
