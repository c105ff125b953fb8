"""The compact form of a finished parse, and the segment sweep over it.

A 1 MB document holds tens of thousands of tags. Kept as one record object per tag (named
tuples, dicts, lists), each survives into the oldest generation of the garbage collector and
makes CPython run full collections while the parse is still going: linear work, but a
large step between small and large inputs. So a parse keeps parallel lists of strings and
ints (int arrays, mostly), plus plain tuples of strings, which the collector stops tracking;
``ParseResult`` builds the record objects from them when they are first read.
"""

from __future__ import annotations

from array import array
from collections.abc import Iterator
from typing import Any


class Columns:
    """Spans and recoveries of one parse. Per-tag lists and arrays are indexed by tag id.

    ``src_starts``/``src_ends`` locate each tag in the input; ``starts``/``stops`` hold its
    span in ``text`` (both equal to the tag's position for a marker). ``spanned`` and
    ``markers`` list the ids of non-empty spans and of markers, in id order. ``log`` holds
    ``(reason, position, message, tag)`` per recovery.
    """

    __slots__ = (
        "text",
        "names",
        "attrs",
        "src_starts",
        "src_ends",
        "recoveries",
        "starts",
        "stops",
        "spanned",
        "markers",
        "log",
    )

    def __init__(
        self,
        text: str,
        names: list[str],
        attrs: list[dict[str, Any]],
        src_starts: array[int],
        src_ends: array[int],
        recoveries: list[tuple[str, ...]],
        starts: array[int],
        stops: array[int],
        spanned: array[int],
        markers: array[int],
        log: list[tuple[str, int, str, str | None]],
    ) -> None:
        self.text = text
        self.names = names
        self.attrs = attrs
        self.src_starts = src_starts
        self.src_ends = src_ends
        self.recoveries = recoveries
        self.starts = starts
        self.stops = stops
        self.spanned = spanned
        self.markers = markers
        self.log = log

    def segment_runs(self) -> Iterator[tuple[int, int, tuple[int, ...]]]:
        """Yield ``(start, end, ids)`` for each segment: ``text`` is cut at every span
        boundary and ``ids`` lists, in id order, the spans covering that piece.

        Two index lists sorted by start and by end are walked together (ints, untracked by
        the collector). A piece covered by k spans costs O(k), so overlapping spans give
        output, and work, that grows with the overlap.
        """
        starts, stops, ids = self.starts, self.stops, self.spanned
        by_start = sorted(ids, key=starts.__getitem__)  # stable: ties stay in id order
        by_end = sorted(ids, key=stops.__getitem__)
        count, length = len(ids), len(self.text)
        active: set[int] = set()
        cursor = s = e = 0
        while e < count:
            start = starts[by_start[s]] if s < count else length
            end = stops[by_end[e]]
            offset = start if start < end else end
            if offset > cursor:
                yield cursor, offset, _in_order(active)
                cursor = offset
            if end <= start:  # close before opening at the same offset
                active.discard(by_end[e])
                e += 1
            else:
                active.add(by_start[s])
                s += 1
        if cursor < length:
            yield cursor, length, ()


def _in_order(active: set[int]) -> tuple[int, ...]:
    if len(active) < 2:
        return tuple(active)
    return tuple(sorted(active))
