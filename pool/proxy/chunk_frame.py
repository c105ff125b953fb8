"""Read an upstream content delta from its bytes, without parsing the whole chunk.

Most chunks of a stream differ from the one before only in their delta's text: the same
``id``, ``model``, ``created``, fingerprint, choice index and ``finish_reason: null``, in the
same bytes. A ``ContentFrame`` is learned from one such chunk (parsed as usual): the bytes
before its text and after it. A later line that starts and ends with those bytes, and has one
JSON string between them, is that chunk with another text; its text is all that is read. Any
other line is parsed as usual (and replaces or drops the frame, see ``_SSEBody``).

Sound because a frame is checked when it is learned: the span taken for the text must read
as the chunk's text, and the line with another text there (``""``, or ``" "`` when the text is
empty) must parse to the chunk with that text. Another string of the same value elsewhere in
the chunk cannot pass both, so the span is the delta's text, one string token, and any other
string token there stands at the same place in the same structure.
"""

from __future__ import annotations

import re
from typing import Any

import orjson
from toolcodec.pool.proxy.upstream import one_event

# A JSON string token (linear: a character that is neither quote nor backslash, or an escape).
_STRING = re.compile(rb'"(?:[^"\\]|\\.)*"', re.DOTALL)
# The text's key and its colon, with JSON's whitespace (a line holds no line break).
_KEY = re.compile(rb'"content"[ \t\r]*:[ \t\r]*')


class ContentFrame:
    """The bytes of a one-choice content chunk around its text (``None`` from
    :meth:`learn` when the chunk is not one)."""

    __slots__ = ("before", "after", "start", "end", "event_before", "event_after")

    def __init__(self, before: bytes, after: bytes) -> None:
        self.before, self.after = before, after
        self.start, self.end = len(before), len(after)
        # the same, as an SSE event carries it: "data: " first, the blank line after
        self.event_before, self.event_after = b"data: " + before, after + b"\n\n"

    @classmethod
    def learn(cls, data: bytes, chunk: dict[str, Any]) -> ContentFrame | None:
        """The frame of *data*, whose parsed JSON is *chunk*, if it is a content delta of
        choice 0 alone: no role, no finish_reason, no logprobs, no usage."""
        choices = chunk.get("choices")
        if type(choices) is not list or len(choices) != 1 or chunk.get("usage") is not None:
            return None
        choice = choices[0]
        if type(choice) is not dict or choice.get("index") != 0 \
                or choice.get("finish_reason") is not None or choice.get("logprobs") is not None:
            return None
        delta = choice.get("delta")
        if type(delta) is not dict or len(delta) != 1 or type(delta.get("content")) is not str:
            return None
        key = _KEY.search(data)
        if key is None:
            return None
        start = key.end()
        token = _STRING.match(data, start)
        if token is None:
            return None
        frame = cls(data[:start], data[token.end():])
        text = delta["content"]
        if frame.text(data) != text or not frame._same_shape(chunk, "" if text else " "):
            return None
        return frame

    def text(self, data: bytes) -> str | None:
        """The text of *data* if it is this frame's chunk with a text of its own, else None."""
        if not data.startswith(self.before) or not data.endswith(self.after):
            return None
        try:  # one JSON value between them (else an error): a string is a text
            text = orjson.loads(data[self.start:len(data) - self.end])
        except orjson.JSONDecodeError:
            return None  # e.g. bytes that are not UTF-8, or overlapping ends: the usual parse
        return text if type(text) is str else None

    def event_text(self, part: bytes, limit: int) -> str | None:
        """The text of *part* if it is one whole SSE event (``one_event``, read from the start
        of a line), ``data: `` and this frame's chunk with a text of its own: what ``text``
        reads of the payload that ``SSELines`` takes from that part. Else None (the part is
        left to them)."""
        start = len(self.event_before)
        end = len(part) - len(self.event_after)
        if end < start or not part.startswith(self.event_before) \
                or not part.endswith(self.event_after) or not one_event(part, limit):
            return None
        try:
            text = orjson.loads(part[start:end])
        except orjson.JSONDecodeError:
            return None
        return text if type(text) is str else None

    def _same_shape(self, chunk: dict[str, Any], probe: str) -> bool:
        """Whether the frame around *probe* (not the chunk's own text) parses to *chunk* with
        *probe* as its text."""
        try:
            read = orjson.loads(self.before + orjson.dumps(probe) + self.after)
        except orjson.JSONDecodeError:
            return False
        expected = {**chunk, "choices": [{**chunk["choices"][0], "delta": {"content": probe}}]}
        return read == expected
