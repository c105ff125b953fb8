"""The result of a KindaXML parse (spec §8): its records, built from the parse's columns.

Offsets named ``start``, ``end`` and ``pos`` index the output ``text`` (the input with tag
syntax removed); ``source`` pairs index the input.

Result records are immutable named tuples, safe to share between segments and callers.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, NamedTuple

from toolcodec.kindaxml.columns import Columns


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


class ParseResult:
    """What :func:`toolcodec.kindaxml.parse` returns; ``to_dict`` gives plain JSON data.

    ``segments`` tile ``text`` in order. ``annotations`` lists every non-empty span once,
    ``markers`` every zero-width annotation, ``recoveries`` every guess the parser made.

    A parse stores its spans compactly (see ``columns.py``); each of the four lists is built
    the first time it is read, and is the same list object on every later read. ``to_dict``
    reads the compact form directly for lists not built yet. Constructed by hand, it simply
    holds the lists given.
    """

    __slots__ = (
        "text",
        "_columns",
        "_objects",
        "_segments",
        "_annotations",
        "_markers",
        "_recoveries",
    )

    def __init__(
        self,
        text: str,
        segments: list[Segment],
        annotations: list[Annotation],
        markers: list[Marker],
        recoveries: list[Recovery],
    ) -> None:
        self.text = text
        self._columns: Columns | None = None
        self._objects: tuple[Annotation, ...] | None = None
        self._segments: list[Segment] | None = segments
        self._annotations: list[Annotation] | None = annotations
        self._markers: list[Marker] | None = markers
        self._recoveries: list[Recovery] | None = recoveries

    @classmethod
    def from_columns(cls, columns: Columns) -> ParseResult:
        """A result over a parse's compact columns; its lists are built when first read."""
        result = cls.__new__(cls)
        result.text = columns.text
        result._columns = columns
        result._objects = None
        result._segments = result._annotations = result._markers = result._recoveries = None
        return result

    @property
    def segments(self) -> list[Segment]:
        """Maximal runs of ``text`` covered by the same annotations, in order."""
        if self._segments is None:
            self._segments = self._build_segments()
        return self._segments

    @segments.setter
    def segments(self, value: list[Segment]) -> None:
        self._segments = value

    @property
    def annotations(self) -> list[Annotation]:
        """Every non-empty span, in id order."""
        if self._annotations is None:
            self._annotations = list(self._annotation_objects())
        return self._annotations

    @annotations.setter
    def annotations(self, value: list[Annotation]) -> None:
        self._annotations = value

    @property
    def markers(self) -> list[Marker]:
        """Every zero-width annotation, in id order."""
        if self._markers is None:
            c = self._columns
            assert c is not None
            self._markers = [
                Marker(
                    i,
                    c.names[i],
                    c.attrs[i],
                    c.starts[i],
                    (c.src_starts[i], c.src_ends[i]),
                    c.recoveries[i],
                )
                for i in c.markers
            ]
        return self._markers

    @markers.setter
    def markers(self, value: list[Marker]) -> None:
        self._markers = value

    @property
    def recoveries(self) -> list[Recovery]:
        """Every guess the parser made, in the order made."""
        if self._recoveries is None:
            assert self._columns is not None
            self._recoveries = list(map(Recovery._make, self._columns.log))
        return self._recoveries

    @recoveries.setter
    def recoveries(self, value: list[Recovery]) -> None:
        self._recoveries = value

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON data: ``text`` and the four lists, each record as its ``to_dict``.

        The cyclic collector is paused while the output is built: it holds several dicts and
        lists per tag, all alive to the end, and each full collection the growing heap set
        off walked every one of them again (1 MB of unclosed tags: 2.5x the time per doubling
        of the input). Nothing built here can form a cycle, so there is nothing to collect.
        """
        with _collector_paused():
            return self._to_dict()

    def _to_dict(self) -> dict[str, Any]:
        c = self._columns
        return {
            "text": self.text,
            "segments": (
                [s.to_dict() for s in self._segments]
                if c is None or self._segments is not None
                else _segment_dicts(c)
            ),
            "annotations": (
                [a.to_dict() for a in self._annotations]
                if c is None or self._annotations is not None
                else [_annotation_dict(c, i) for i in c.spanned]
            ),
            "markers": (
                [m.to_dict() for m in self._markers]
                if c is None or self._markers is not None
                else [_marker_dict(c, i) for i in c.markers]
            ),
            "recoveries": (
                [r.to_dict() for r in self._recoveries]
                if c is None or self._recoveries is not None
                else [_recovery_dict(*fields) for fields in c.log]
            ),
        }

    def _fields(self) -> tuple[Any, ...]:
        return self.text, self.segments, self.annotations, self.markers, self.recoveries

    def __eq__(self, other: object) -> bool:
        if other.__class__ is not self.__class__:
            return NotImplemented
        assert isinstance(other, ParseResult)
        return self._fields() == other._fields()

    __hash__ = None  # type: ignore[assignment]  # mutable, like the lists it holds

    def __repr__(self) -> str:
        return (
            f"ParseResult(text={self.text!r}, segments={self.segments!r}, "
            f"annotations={self.annotations!r}, markers={self.markers!r}, "
            f"recoveries={self.recoveries!r})"
        )

    def _annotation_objects(self) -> tuple[Annotation, ...]:
        """The parse's annotations, built once and shared by ``annotations`` and segments."""
        c = self._columns
        assert c is not None
        if self._objects is None:
            self._objects = tuple(
                Annotation(
                    i,
                    c.names[i],
                    c.attrs[i],
                    c.starts[i],
                    c.stops[i],
                    (c.src_starts[i], c.src_ends[i]),
                    c.recoveries[i],
                )
                for i in c.spanned
            )
        return self._objects

    def _build_segments(self) -> list[Segment]:
        c = self._columns
        assert c is not None
        by_id = dict(zip(c.spanned, self._annotation_objects(), strict=True))
        text = c.text
        return [
            Segment(text[start:end], tuple([by_id[i] for i in ids]))
            for start, end, ids in c.segment_runs()
        ]


def _brief(c: Columns, i: int) -> dict[str, Any]:
    """``Annotation.brief`` read from the columns."""
    out: dict[str, Any] = {"id": i, "tag": c.names[i], "attrs": _copy(c.attrs[i])}
    if c.recoveries[i]:
        out["recovery"] = list(c.recoveries[i])
    return out


def _annotation_dict(c: Columns, i: int) -> dict[str, Any]:
    """``Annotation.to_dict`` read from the columns (``_brief`` and the offsets, inlined)."""
    out: dict[str, Any] = {"id": i, "tag": c.names[i], "attrs": _copy(c.attrs[i])}
    if c.recoveries[i]:
        out["recovery"] = list(c.recoveries[i])
    out["start"] = c.starts[i]
    out["end"] = c.stops[i]
    out["source"] = [c.src_starts[i], c.src_ends[i]]
    return out


def _marker_dict(c: Columns, i: int) -> dict[str, Any]:
    out: dict[str, Any] = {
        "id": i,
        "pos": c.starts[i],
        "tag": c.names[i],
        "attrs": _copy(c.attrs[i]),
        "source": [c.src_starts[i], c.src_ends[i]],
    }
    if c.recoveries[i]:
        out["recovery"] = list(c.recoveries[i])
    return out


def _recovery_dict(reason: str, position: int, message: str, tag: str | None) -> dict[str, Any]:
    out: dict[str, Any] = {"reason": reason, "position": position}
    if tag is not None:
        out["tag"] = tag
    out["message"] = message
    return out


def _segment_dicts(c: Columns) -> list[dict[str, Any]]:
    text = c.text
    return [
        {"text": text[start:end], "annotations": [_brief(c, i) for i in ids]}
        for start, end, ids in c.segment_runs()
    ]


def _copy(attrs: dict[str, Any]) -> dict[str, Any]:
    if not attrs:  # most tags: skip building the comprehension
        return {}
    return {k: list(v) if isinstance(v, list) else v for k, v in attrs.items()}


@contextmanager
def _collector_paused() -> Iterator[None]:
    """Disable the cyclic garbage collector inside the block; re-enable it after, if it was."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()
