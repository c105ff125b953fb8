"""toolcodec's pure codec: decode, repair and validate the tool calls a model emits.

>>> import codec
>>> r = codec.decode('<tool_call>{"name": "ping", "arguments": {}}</tool_call>',
...                  tools=[{"name": "ping", "parameters": {"type": "object"}}])
>>> r.to_dict()["calls"]
[{'name': 'ping', 'arguments': {}, 'repairs': []}]

Public names are imported on first use, so ``import codec`` does not load the JSON Schema
machinery until a codec is built.
"""

from __future__ import annotations

from importlib import import_module
from typing import Any

from codec import errors
from codec.errors import CodecError
from codec.limits import DEFAULT_LIMITS, Limits
from codec.result import Call, DecodeResult, RepairResult, ValidationResult

_LAZY = {
    "ToolCallCodec": "codec.toolcodec",
    "decode": "codec.toolcodec",
    "validate": "codec.toolcodec",
    "repair_json": "codec.jsonrepair",
    "InvalidToolsError": "codec.tools",
    "Heuristic": "codec.heuristics",
    "HeuristicContext": "codec.heuristics",
    "HeuristicResult": "codec.heuristics",
    "Pipeline": "codec.heuristics",
    "default_pipeline": "codec.xml_heuristics",
    "StreamDecoder": "codec.stream",
}

__all__ = [
    "DEFAULT_LIMITS",
    "Call",
    "CodecError",
    "DecodeResult",
    "Limits",
    "RepairResult",
    "ValidationResult",
    "errors",
    *_LAZY,
]


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'codec' has no attribute {name!r}")
    value = getattr(import_module(module), name)
    globals()[name] = value  # later lookups skip this hook
    return value


def __dir__() -> list[str]:
    return sorted(__all__)
