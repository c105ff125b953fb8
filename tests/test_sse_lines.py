"""``SSELines``: the ``data:`` payloads of an SSE body, whatever parts it arrives in.

Its answer is the one the whole body split at its line breaks gives: every complete line that
starts with ``data:``, stripped; the last line, if the body ends without its break, from
``end``; a line over the limit refused. A part that is one whole event takes a short way;
the parts here are cut anywhere, and often at events' ends, so both ways are compared.
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from toolcodec.pool.proxy.upstream import SSELines, UpstreamError

LINES = st.sampled_from([
    b'data: {"choices":[{"delta":{"content":"a"}}]}', b"data:{}", b"data: [DONE]", b"data:",
    b"data:  spaced  ", b": keep-alive", b"event: message", b"id: 7", b"retry: 10", b"",
    b"dat", b"data: \xc3\xa9", b"data: " + b"x" * 40])
BREAKS = st.sampled_from([b"\n", b"\n", b"\r\n"])


@st.composite
def bodies(draw) -> bytes:
    events = draw(st.lists(st.lists(st.tuples(LINES, BREAKS), min_size=1, max_size=3),
                           max_size=6))
    body = b"".join(b"".join(line + br for line, br in event) + draw(BREAKS)
                    for event in events)
    return body + draw(st.sampled_from([b"", b"", b"data: cut", b"data: cut\r"]))


def expected(body: bytes, limit: int) -> list[bytes] | None:
    """The payloads of *body* read whole (None: a line is over *limit*)."""
    *lines, last = body.split(b"\n")
    if any(len(line) > limit for line in lines) or len(last) > limit:
        return None
    out = [line[5:].strip() for line in lines if line.startswith(b"data:")]
    return out + ([last[5:].strip()] if last.startswith(b"data:") else [])


def read(parts: list[bytes], limit: int) -> list[bytes] | None:
    lines = SSELines(limit)
    out: list[bytes] = []
    try:
        for part in parts:
            out += lines.feed(part)
    except UpstreamError as exc:
        assert exc.code == "upstream_too_large"
        return None
    return out + lines.end()


@settings(max_examples=400)
@given(bodies(), st.data(), st.sampled_from([1 << 20, 20]))
def test_the_payloads_are_the_whole_bodys_however_it_is_cut(body, data, limit):
    # cuts anywhere, and at the ends of events (where a part is one whole event)
    ends = [i + 2 for i in range(len(body) - 1) if body[i:i + 2] == b"\n\n"]
    cuts = data.draw(st.lists(st.integers(0, len(body)), max_size=8))
    if ends:
        cuts += data.draw(st.lists(st.sampled_from(ends), max_size=len(ends)))
    cuts = sorted(set(cuts))
    parts = [body[a:b] for a, b in zip([0, *cuts], [*cuts, len(body)], strict=True)]
    got = read([p for p in parts if p], limit)
    want = expected(body, limit)
    if want is None:
        assert got is None
    else:
        assert got == want


@pytest.mark.parametrize("parts", [
    [b"data: abc\n\n"],
    [b"data: abc\n\n", b"data: def\n\n"],
    [b"data: ab", b"c\n\n", b"data: def\n\n"],  # the second part ends the first event
    [b": ping\n\n", b"data: x\n\n"],
])
def test_events_one_part_each(parts):
    assert read(parts, 1 << 20) == expected(b"".join(parts), 1 << 20)
    assert read(parts, 1 << 20) != []


def test_one_whole_event_over_the_limit_is_refused():
    with pytest.raises(UpstreamError) as caught:
        SSELines(8).feed(b"data: 0123456789\n\n")
    assert caught.value.code == "upstream_too_large"
    assert SSELines(16).feed(b"data: 0123456789\n\n") == [b"0123456789"]
