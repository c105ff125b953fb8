"""Reading an upstream content delta by its frame (``toolcodec.pool.proxy.chunk_frame``): a
line read that way is exactly the chunk the full parse reads, and any other line is left to
the full parse."""

from __future__ import annotations

import json
import re

import orjson
from hypothesis import given, settings
from hypothesis import strategies as st
from toolcodec.pool.proxy.chunk_frame import ContentFrame
from toolcodec.pool.proxy.stream import _SSEBody
from toolcodec.pool.proxy.upstream import UpstreamError

HEAD = {"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 7, "model": "m",
        "system_fingerprint": "fp_1"}


def _chunk(text: str, **choice_extra) -> dict:
    choice = {"index": 0, "delta": {"content": text}, "finish_reason": None, **choice_extra}
    return {**HEAD, "choices": [choice]}


# The ways a server may write the same chunk: compact, spaced, ASCII-escaped, keys reordered.
WRITERS = [
    orjson.dumps,
    lambda c: json.dumps(c).encode(),
    lambda c: json.dumps(c, ensure_ascii=False, separators=(",", ":")).encode(),
    lambda c: json.dumps(dict(reversed(list(c.items())))).encode(),
    lambda c: json.dumps(c, indent=None, separators=(" , ", " : ")).encode(),
]
TEXTS = st.text(max_size=12) | st.sampled_from(
    ['"', "\\", '","finish_reason":"stop"', "\u2028", "é", "😀", '"content":"x"', ""])


@given(st.sampled_from(WRITERS), TEXTS, TEXTS)
def test_a_line_read_by_its_frame_is_the_chunk_the_parse_reads(write, first, other) -> None:
    frame = ContentFrame.learn(write(_chunk(first)), _chunk(first))
    assert frame is not None
    line = write(_chunk(other))
    assert frame.text(line) == other
    assert orjson.loads(line) == _chunk(other)


HEAD_CHANGES = [
    lambda c: c.update(id="chatcmpl-2"),
    lambda c: c.update(model="m2"),
    lambda c: c.update(created=8),
    lambda c: c.update(system_fingerprint="fp_2"),
]
SHAPE_CHANGES = [
    lambda c: c.update(usage={"prompt_tokens": 1, "completion_tokens": 2, "total_tokens": 3}),
    lambda c: c["choices"][0].update(finish_reason="stop"),
    lambda c: c["choices"][0].update(index=1),
    lambda c: c["choices"][0].update(logprobs={"content": [], "refusal": None}),
    lambda c: c["choices"][0]["delta"].update(role="assistant"),
    lambda c: c["choices"][0]["delta"].update(content=None),
    lambda c: c["choices"][0]["delta"].update(content=7),
    lambda c: c["choices"].append({"index": 1, "delta": {"content": "b"}, "finish_reason": None}),
]
CHANGES = HEAD_CHANGES + SHAPE_CHANGES


@given(st.sampled_from(WRITERS), TEXTS, TEXTS, st.sampled_from(CHANGES))
def test_a_chunk_that_differs_in_more_than_its_text_is_not_read_by_the_frame(
        write, first, other, change) -> None:
    frame = ContentFrame.learn(write(_chunk(first)), _chunk(first))
    assert frame is not None
    changed = _chunk(other)
    change(changed)
    line = write(changed)
    text = frame.text(line)
    # Either left to the parse, or (a change that writes the same bytes) exactly the parse.
    assert text is None or orjson.loads(line) == _chunk(text)
    assert text is None  # every change above shows in the bytes


def test_no_frame_for_a_chunk_that_is_not_choice_zeros_text_alone() -> None:
    for change in SHAPE_CHANGES:
        chunk = _chunk("a")
        change(chunk)
        assert ContentFrame.learn(orjson.dumps(chunk), chunk) is None


def test_a_frame_is_checked_when_learned() -> None:
    # The text's key inside another string: the first '"content":' is not the delta's.
    chunk = {**_chunk("a"), "id": 'x\\"content":"y'}
    line = orjson.dumps(chunk)
    frame = ContentFrame.learn(line, chunk)
    assert frame is None or frame.text(line) == "a"
    # Bytes the frame's parse does not read as this chunk: no frame.
    assert ContentFrame.learn(orjson.dumps(_chunk("a")), _chunk("b")) is None
    # Another "content" of the same (empty) value before the delta's: the frame, if any,
    # reads the delta's text, never the other one.
    for text in ("", "a"):
        chunk = {**_chunk(text), "extra": {"content": text}}
        chunk = {"extra": chunk.pop("extra"), **chunk}
        frame = ContentFrame.learn(orjson.dumps(chunk), chunk)
        other = {**chunk, "extra": {"content": "zz"}}
        assert frame is None or frame.text(orjson.dumps(other)) is None
        moved = {**chunk, "choices": [{**chunk["choices"][0], "delta": {"content": "b"}}]}
        assert frame is None or frame.text(orjson.dumps(moved)) == "b"


def test_bytes_that_are_not_utf8_are_left_to_the_parse() -> None:
    frame = ContentFrame.learn(orjson.dumps(_chunk("a")), _chunk("a"))
    assert frame is not None
    line = orjson.dumps(_chunk("b")).replace(b'"b"', b'"\xff"')
    assert frame.text(line) is None


@given(st.sampled_from(WRITERS), TEXTS, st.data())
def test_whatever_bytes_come_a_text_read_by_the_frame_is_what_the_parse_reads(
        write, first, data) -> None:
    frame = ContentFrame.learn(write(_chunk(first)), _chunk(first))
    assert frame is not None
    line = _damaged(data.draw, write(_chunk(data.draw(TEXTS))), data.draw(st.integers(1, 3)),
                    st.sampled_from(b'"\\:,{}[] 0an\xff'))
    text = frame.text(line)
    if text is not None:
        assert orjson.loads(line) == _chunk(text)


def _damaged(draw, value: bytes, times: int, byte: st.SearchStrategy[int]) -> bytes:
    """*value* with a byte changed, dropped or added anywhere, *times* times."""
    out = bytearray(value)
    for _ in range(times):
        at = draw(st.integers(0, len(out)))
        how = draw(st.sampled_from(["put", "drop", "add"]))
        if how == "add" or at == len(out):
            out.insert(at, draw(byte))
        elif how == "put":
            out[at] = draw(byte)
        else:
            del out[at]
    return bytes(out)


# -- one whole SSE event read by the frame (``_SSEBody``'s short way) ------------------------


@given(st.sampled_from(WRITERS), TEXTS, TEXTS)
def test_an_event_read_by_its_frame_is_its_lines_text(write, first, other) -> None:
    frame = ContentFrame.learn(write(_chunk(first)), _chunk(first))
    assert frame is not None
    line = write(_chunk(other))
    assert frame.event_text(b"data: " + line + b"\n\n", 1 << 20) == other
    assert frame.event_text(b"data: " + line + b"\n\n", len(line) + 6) == other
    assert frame.event_text(b"data: " + line + b"\n\n", len(line) + 5) is None  # too long
    for other_event in (b"data:" + line + b"\n\n", b"data: " + line + b" \n\n",
                        b"data: " + line + b"\r\n\r\n", b"data: " + line + b"\n",
                        b"data: " + _broken_line(line, b"\n") + b"\n\n",
                        b"data: " + _broken_line(line, b" \r\n") + b"\n\n"):
        assert frame.event_text(other_event, 1 << 20) is None  # left to the lines' reading


def _broken_line(line: bytes, blank: bytes) -> bytes:
    """*line* with *blank* after its text's string token: JSON would read the same text,
    but an SSE reader reads two lines."""
    token = re.search(rb'"content"\s*:\s*("(?:[^"\\]|\\.)*")', line, re.DOTALL)
    assert token is not None
    return line[:token.end()] + blank + line[token.end():]


EVENT_BYTES = st.sampled_from(b'"\\:,{}[] 0an\xff\n\r')


@st.composite
def sse_bodies(draw) -> list[bytes]:
    """A stream's events as a server may send them: content deltas of one frame, other
    chunks, comments and [DONE], some with bytes changed, dropped or added."""
    write = draw(st.sampled_from(WRITERS))
    events = [b"data: " + write(_chunk(draw(TEXTS))) + b"\n\n"]
    for _ in range(draw(st.integers(1, 6))):
        kind = draw(st.sampled_from(["text", "text", "text", "broken", "other", "comment",
                                     "done"]))
        if kind == "text":
            line = write(_chunk(draw(TEXTS)))
        elif kind == "broken":  # a line break beside the text's string
            line = _broken_line(write(_chunk(draw(TEXTS))), draw(st.sampled_from(
                [b"\n", b" \n", b"\r\n"])))
        elif kind == "other":
            changed = _chunk(draw(TEXTS))
            draw(st.sampled_from(CHANGES))(changed)
            line = write(changed)
        else:
            line = b": ping" if kind == "comment" else b"[DONE]"
        event = _damaged(draw, (line if kind == "comment" else b"data: " + line) + b"\n\n",
                         draw(st.integers(0, 2)), EVENT_BYTES)
        if draw(st.integers(0, 5)) == 0:  # its line runs on into the next event's
            event = event.rstrip(b"\n")
        events.append(event)
    return events


def _read(parts: list[bytes], limit: int) -> tuple[list, object]:
    """The chunks a relay takes from *parts*, and how the reading stopped (as the relay
    stops: at the first failure or end)."""
    body = _SSEBody(limit)
    body.frames = True
    chunks: list = []
    for part in [*parts, b""]:
        try:
            got, failure, ended = body.chunks(part)
        except UpstreamError as exc:
            return chunks, exc.code
        chunks += got
        if failure is not None or ended:
            return chunks, (failure, ended)
    return chunks, None


@settings(max_examples=300)
@given(sse_bodies(), st.data(), st.sampled_from([1 << 20, 160]))
def test_events_read_whole_are_read_as_their_lines_are(events, data, limit) -> None:
    # one part per event (the frame's short way where it applies) against each event cut in
    # two (every line through SSELines): the same chunks and texts, and the same stop
    split = []
    for event in events:
        at = data.draw(st.integers(1, max(1, len(event) - 1)))
        split += [event[:at], event[at:]]
    assert _read(events, limit) == _read([p for p in split if p], limit)
