"""The result of a KindaXML parse (spec §8) and how segments are cut from annotation spans.

Offsets named ``start``, ``end`` and ``pos`` index the output ``text`` (the input with tag
syntax removed); ``source`` pairs index the input.

Result records are immutable named tuples, safe to share between segments and callers.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, NamedTuple


class Annotation(NamedTuple):
    """A tag applied to the half-open span ``[start, end)`` of the output text.

    ``id`` numbers tags in document order, so two adjacent spans of the same tag and
    attributes stay distinguishable. ``recovery`` names every guess made for this tag, in
    order (empty when the tag was well formed and explicitly closed).
    """

    id: int
    tag: str
    attrs: dict[str, Any]
    start: int
    end: int
    source: tuple[int, int]
    recovery: tuple[str, ...] = ()

    def brief(self) -> dict[str, Any]:
        """The form listed in each segment: id, tag, attrs and any recovery."""
        out: dict[str, Any] = {"id": self.id, "tag": self.tag, "attrs": _copy(self.attrs)}
        if self.recovery:
            out["recovery"] = list(self.recovery)
        return out

    def to_dict(self) -> dict[str, Any]:
        out = self.brief()
        out.update(start=self.start, end=self.end, source=list(self.source))
        return out


class Marker(NamedTuple):
    """A zero-width annotation at ``pos`` (a self-closing tag, or a tag whose span is empty)."""

    id: int
    tag: str
    attrs: dict[str, Any]
    pos: int
    source: tuple[int, int]
    recovery: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "id": self.id,
            "pos": self.pos,
            "tag": self.tag,
            "attrs": _copy(self.attrs),
            "source": list(self.source),
        }
        if self.recovery:
            out["recovery"] = list(self.recovery)
        return out


class Recovery(NamedTuple):
    """One deterministic guess, logged with where it happened (an input offset) and why."""

    reason: str
    position: int
    message: str
    tag: str | None = None

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"reason": self.reason, "position": self.position}
        if self.tag is not None:
            out["tag"] = self.tag
        out["message"] = self.message
        return out


class Segment(NamedTuple):
    """A maximal run of output text covered by the same set of annotations (in id order)."""

    text: str
    annotations: tuple[Annotation, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        return {"text": self.text, "annotations": [a.brief() for a in self.annotations]}


@dataclass(slots=True)
class ParseResult:
    """What :func:`codec.kindaxml.parse` returns; ``to_dict`` gives plain JSON data.

    ``segments`` tile ``text`` in order. ``annotations`` lists every non-empty span once,
    ``markers`` every zero-width annotation, ``recoveries`` every guess the parser made.
    """

    text: str
    segments: list[Segment]
    annotations: list[Annotation]
    markers: list[Marker]
    recoveries: list[Recovery]

    def to_dict(self) -> dict[str, Any]:
        return {
            "text": self.text,
            "segments": [s.to_dict() for s in self.segments],
            "annotations": [a.to_dict() for a in self.annotations],
            "markers": [m.to_dict() for m in self.markers],
            "recoveries": [r.to_dict() for r in self.recoveries],
        }


def build_segments(text: str, annotations: list[Annotation]) -> list[Segment]:
    """Cut ``text`` at every span boundary; each piece lists the annotations covering it.

    ``annotations`` must be in id order. Boundaries are walked with two sorted index lists
    rather than event tuples: ints are not tracked by the garbage collector, which keeps
    large documents from paying for full collections.
    """
    count = len(annotations)
    by_start = sorted(range(count), key=lambda i: annotations[i].start)
    by_end = sorted(range(count), key=lambda i: annotations[i].end)
    segments: list[Segment] = []
    active: dict[int, Annotation] = {}
    cursor = s = e = 0
    while s < count or e < count:
        start = annotations[by_start[s]].start if s < count else len(text)
        end = annotations[by_end[e]].end
        offset = min(start, end)
        if offset > cursor:
            segments.append(Segment(text[cursor:offset], tuple(active[i] for i in sorted(active))))
            cursor = offset
        if end <= start:  # close before opening at the same offset
            del active[by_end[e]]
            e += 1
        else:
            active[by_start[s]] = annotations[by_start[s]]
            s += 1
    if cursor < len(text):
        segments.append(Segment(text[cursor:]))
    return segments


def _copy(attrs: dict[str, Any]) -> dict[str, Any]:
    return {k: list(v) if isinstance(v, list) else v for k, v in attrs.items()}
