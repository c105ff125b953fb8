"""Stable error codes (see README "Error codes"). Add new ones; never rename."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

INVALID_JSON = "invalid_json"
INVALID_XML = "invalid_xml"
ARITHMETIC_EXPRESSION = "arithmetic_expression"
UNKNOWN_TOOL = "unknown_tool"
SCHEMA_VIOLATION = "schema_violation"
PAYLOAD_TOO_LARGE = "payload_too_large"
NESTING_TOO_DEEP = "nesting_too_deep"
TIMEOUT = "timeout"
WORKER_LOST = "worker_lost"
REJECTED = "rejected"
BAD_REQUEST = "bad_request"
INTERNAL_ERROR = "internal_error"
# Added beyond the original list: the queue backend (Redis) could not be reached.
BACKEND_UNAVAILABLE = "backend_unavailable"
# A call the output was cut off in (finish_reason "length") before it closed: no call.
TRUNCATED = "truncated"
# Call markup the decoder did not read, left in the content (``toolcodec.decoding.unread_markup``).
UNRECOGNISED_MARKUP = "unrecognised_markup"
# The request forced a tool (``tool_choice`` "required" or a named function) and the answer
# holds no call to it: set by the proxy, which knows the request.
TOOL_CHOICE_UNMET = "tool_choice_unmet"

ALL_CODES = frozenset(
    {
        INVALID_JSON,
        INVALID_XML,
        ARITHMETIC_EXPRESSION,
        UNKNOWN_TOOL,
        SCHEMA_VIOLATION,
        PAYLOAD_TOO_LARGE,
        NESTING_TOO_DEEP,
        TIMEOUT,
        WORKER_LOST,
        REJECTED,
        BAD_REQUEST,
        INTERNAL_ERROR,
        BACKEND_UNAVAILABLE,
        TRUNCATED,
        UNRECOGNISED_MARKUP,
        TOOL_CHOICE_UNMET,
    }
)


@dataclass(frozen=True, slots=True)
class CodecError:
    """One reported problem: a stable ``code``, a message a person can act on, and details.

    ``details`` holds optional JSON-serialisable context such as ``position`` (0-based
    character offset in the text that was parsed), ``path`` (JSON Pointer into the
    arguments), ``tool`` or ``raw`` (the markup that could not be decoded).
    """

    code: str
    message: str
    details: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"code": self.code, "message": self.message}
        out.update(self.details)
        return out


def truncated(what: str) -> CodecError:
    """The ``truncated`` error: the output was cut off (finish_reason "length") in ``what``."""
    return CodecError(TRUNCATED, f'the output was cut off (finish_reason "length") {what}; a '
                      "call the model never finished is not completed",
                      {"finish_reason": "length"})


def json_kind(value: object) -> str:
    """How an error message names what it got: the JSON kind, with an article
    (``"an object"``, ``"an array"``, ``"a string"``, ``"a number"``, ``"a boolean"``,
    ``"null"``); a value JSON has no kind for is named by its Python type."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, dict):
        return "an object"
    if isinstance(value, list | tuple):
        return "an array"
    return f"a Python {type(value).__name__}"
