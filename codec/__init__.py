"""toolcodec's pure codec: decode, repair and validate the tool calls a model emits.

>>> import toolcodec
>>> r = toolcodec.decode('<tool_call>{"name": "ping", "arguments": {}}</tool_call>',
...                  tools=[{"name": "ping", "parameters": {"type": "object"}}])
>>> r.to_dict()["calls"]
[{'name': 'ping', 'arguments': {}, 'repairs': []}]

Public names are imported on first use, so ``import toolcodec`` does not load the JSON Schema
machinery until a codec is built.
"""

from __future__ import annotations

from importlib import import_module
from typing import Any

from toolcodec.results import errors
from toolcodec.results.errors import CodecError
from toolcodec.results.limits import DEFAULT_LIMITS, Limits
from toolcodec.results.result import Call, DecodeResult, RepairResult, ValidationResult

__version__ = "0.2.0"

_LAZY = {
    "ToolCallCodec": "toolcodec.decoding.codec",
    "decode": "toolcodec.decoding.codec",
    "validate": "toolcodec.decoding.codec",
    "repair_json": "toolcodec.repair.jsonrepair",
    "InvalidToolsError": "toolcodec.schema.tools",
    "Heuristic": "toolcodec.repair.heuristics",
    "HeuristicContext": "toolcodec.repair.heuristics",
    "HeuristicResult": "toolcodec.repair.heuristics",
    "Pipeline": "toolcodec.repair.heuristics",
    "default_pipeline": "toolcodec.repair.xml_heuristics",
    "StreamDecoder": "toolcodec.decoding.stream",
}

__all__ = [
    "__version__",
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
