"""Model families by name: the built-in ones, and the ones a user registers.

A family (``Family``) declares everything the decoder needs to read it, and nothing else:

- ``markers``: its ``MarkerFormat`` rows (``toolcodec.formats.table``): the tokens that open
  and close a block of its calls, how a block ends (closers, options or an ``end`` rule) and
  the body reader, a function ``read(body, *, closed) -> FormatRead`` (or a built-in
  reader's name);
- ``reasoning``: its ``ReasoningFormat`` rows (``toolcodec.formats.reasoning``): what opens and
  closes its reasoning or answer channels;
- ``framing``: tokens that are structure only, neither content nor a call.

``register(family)`` adds one for every codec built afterwards: ``decode``, the stream decoder
and so the pool and the proxy read it, and ``formats=`` accepts its id. Installed packages
can declare families in the entry point group ``toolcodec.formats`` (an entry point names a
``Family`` or an iterable of them); they are loaded when the first codec is built.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from importlib.metadata import entry_points
from threading import Lock

from toolcodec.formats import FormatRead, reasoning, table
from toolcodec.formats.reasoning import ReasoningFormat
from toolcodec.formats.table import MarkerFormat

# What a family module needs, from one place.
__all__ = ["ENTRY_POINT_GROUP", "Family", "FormatRead", "MarkerFormat", "ReasoningFormat",
           "format_ids", "load_entry_points", "on_change", "register", "registered", "unregister"]

ENTRY_POINT_GROUP = "toolcodec.formats"


@dataclass(frozen=True)
class Family:
    """One model family's tool-call format.

    :param id: the format id (``formats=``, ``Call.format``); every marker row has this id.
    :param markers: the blocks of calls (``MarkerFormat``).
    :param reasoning: reasoning and answer-channel rows (``ReasoningFormat``).
    :param framing: tokens that are structure only (neither content nor a call).
    """

    id: str
    markers: tuple[MarkerFormat, ...] = ()
    reasoning: tuple[ReasoningFormat, ...] = ()
    framing: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        object.__setattr__(self, "markers", tuple(self.markers))
        object.__setattr__(self, "reasoning", tuple(self.reasoning))
        object.__setattr__(self, "framing", tuple(self.framing))
        if not self.id or any(m.id != self.id for m in self.markers):
            raise ValueError(f"family {self.id!r}: every marker row needs the family's id")
        if not self.markers and not self.reasoning:
            raise ValueError(f"family {self.id!r} declares neither markers nor reasoning")


_registered: dict[str, Family] = {}
_listeners: list[Callable[[], None]] = []
_lock = Lock()
_entry_points_loaded = False


def register(family: Family) -> None:
    """Read ``family`` in every codec built from now on.

    Raises ``ValueError`` if its id is already a format (built-in or registered) or one of its
    openers is already another format's: two families may not claim the same token."""
    with _lock:
        if family.id in table.format_ids() or family.id in _registered:
            raise ValueError(f"a format with id {family.id!r} already exists")
        taken = {t for f in table.marker_formats(None) for t in f.openers}
        taken |= set(reasoning.BY_OPENER) | set(reasoning.FRAMING) | set(reasoning.EXPLICIT_FRAMING)
        mine = [t for m in family.markers for t in m.openers]
        mine += [t for r in family.reasoning for t in r.openers] + list(family.framing)
        clash = sorted(taken & set(mine))
        if clash:
            raise ValueError(f"family {family.id!r}: {clash} already open another format")
        _registered[family.id] = family
        table.add_markers(family.markers)
        reasoning.add_rows(family.reasoning, dict.fromkeys(family.framing, family.id))
        for listener in _listeners:
            listener()


def unregister(family_id: str) -> None:
    """Stop reading a registered family (codecs built afterwards); unknown ids are ignored."""
    with _lock:
        family = _registered.pop(family_id, None)
        if family is None:
            return
        table.remove_markers(family.markers)
        reasoning.remove_rows(family.reasoning, family.framing)
        for listener in _listeners:
            listener()


def registered() -> tuple[Family, ...]:
    """The families registered so far, in order."""
    return tuple(_registered.values())


def on_change(listener: Callable[[], None]) -> None:
    """Call ``listener`` after each registration (caches of compiled openers clear)."""
    _listeners.append(listener)


def load_entry_points() -> None:
    """Register the families of the ``toolcodec.formats`` entry point group, once."""
    global _entry_points_loaded
    if _entry_points_loaded:
        return
    _entry_points_loaded = True
    for point in entry_points(group=ENTRY_POINT_GROUP):
        found = point.load()
        for family in ([found] if isinstance(found, Family) else _families(found, point.name)):
            if family.id not in _registered:
                register(family)


def format_ids() -> tuple[str, ...]:
    """Every format id ``formats=`` accepts, installed families' included."""
    load_entry_points()
    return table.format_ids()


def _families(found: object, name: str) -> list[Family]:
    items = list(found) if isinstance(found, Iterable) else None
    if items is None or not all(isinstance(f, Family) for f in items):
        raise TypeError(f"entry point {name!r} of {ENTRY_POINT_GROUP!r} names neither a "
                        "Family nor an iterable of them")
    return items
