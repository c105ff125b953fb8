"""The heuristic pipeline: repairs that run around one parse, in three phases.

``pre-parse`` heuristics normalise the raw text; the text is parsed; only if that fails do the
``fallback-reparse`` heuristics mend the text, followed by at most one re-parse; ``post-parse``
heuristics then fix the parsed value (for example, coerce it to the tool's schema).

Every change is named: a heuristic's ``id`` is appended to ``ctx.repairs`` when it changed the
raw text or the parsed value. A heuristic that reports finer ids (``HeuristicResult.repairs``)
has those recorded instead of its own. A heuristic that raises is skipped and noted in
``ctx.meta["heuristic_failures"]``; a buggy heuristic must not break decoding.

Heuristics must not mutate ``ctx.raw`` or ``ctx.parsed`` in place: they return new values, which
is how the pipeline sees that something changed.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol, get_args, runtime_checkable

from toolcodec.results.errors import CodecError
from toolcodec.schema.fast import all_scalars

Phase = Literal["pre-parse", "fallback-reparse", "post-parse"]
PHASES: tuple[Phase, ...] = get_args(Phase)

ParseFn = Callable[[str, "HeuristicContext"], tuple[object | None, list[CodecError]]]


@dataclass(slots=True)
class HeuristicContext:
    """What every heuristic sees: the call being decoded, its raw text, and the parse so far.

    ``meta["original"]`` holds the text before any heuristic ran. ``meta`` is also where
    heuristics leave notes for later ones and for the caller (for example ``"warnings"``).
    """

    tool_name: str | None
    schema: dict | None
    raw: str
    parsed: object | None = None
    errors: list[CodecError] = field(default_factory=list)
    repairs: list[str] = field(default_factory=list)
    meta: dict[str, Any] = field(default_factory=dict)


@dataclass(slots=True)
class HeuristicResult:
    """What a heuristic returns. ``None`` fields mean "no change".

    ``raw`` is honoured in the pre-parse and fallback-reparse phases, ``parsed`` in post-parse.
    ``reparse`` (fallback phase) asks for the re-parse now; ``stop`` ends the current phase.
    ``repairs``, when given, are the ids recorded for this change instead of the heuristic's id.
    """

    raw: str | None = None
    parsed: object | None = None
    reparse: bool = False
    stop: bool = False
    repairs: tuple[str, ...] | None = None


@runtime_checkable
class Heuristic(Protocol):
    """One named repair that runs in one phase, when ``applies`` says so."""

    id: str
    phase: Phase

    def applies(self, ctx: HeuristicContext) -> bool: ...

    def run(self, ctx: HeuristicContext) -> HeuristicResult | None: ...


def check_heuristic(h: object, phase: Phase | None = None) -> None:
    """Raise ``TypeError``/``ValueError`` if ``h`` cannot serve as a heuristic (in ``phase``)."""
    hid = getattr(h, "id", None)
    if not isinstance(hid, str) or not hid:
        raise TypeError(f"heuristic {h!r} needs a non-empty str attribute 'id'")
    hphase = getattr(h, "phase", None)
    if hphase not in PHASES:
        raise ValueError(f"heuristic {hid!r} has phase {hphase!r}; expected one of {PHASES}")
    if phase is not None and hphase != phase:
        raise ValueError(f"heuristic {hid!r} has phase {hphase!r} but was placed in {phase!r}")
    for method in ("applies", "run"):
        if not callable(getattr(h, method, None)):
            raise TypeError(f"heuristic {hid!r} needs a callable {method}(ctx)")


_TEXTS = frozenset({str, type(None)})


def same_value(a: object, b: object) -> bool:
    """Equality that also compares types, so that ``1``, ``1.0`` and ``True`` differ.

    Iterative, so deeply nested values cannot exhaust the stack.
    """
    if type(a) is dict and type(b) is dict and all_scalars(a.values()) \
            and all_scalars(b.values()):  # most arguments: compared in C
        if a != b:  # values == tells apart are not the same
            return False
        if _TEXTS.issuperset(map(type, a.values())) and _TEXTS.issuperset(map(type, b.values())):
            return True  # equal strings and nulls are the same (numbers: 1 == 1.0 == True)
    pending = [(a, b)]
    while pending:
        x, y = pending.pop()
        if type(x) is not type(y):
            return False
        if isinstance(x, dict):
            if x.keys() != y.keys():  # type: ignore[attr-defined]
                return False
            pending.extend((x[k], y[k]) for k in x)  # type: ignore[index]
        elif isinstance(x, list | tuple):
            if len(x) != len(y):  # type: ignore[arg-type]
                return False
            pending.extend(zip(x, y, strict=True))  # type: ignore[call-overload]
        elif x != y:
            return False
    return True


@dataclass(frozen=True)
class Pipeline:
    """The ordered heuristics of each phase. Immutable: ``with_added`` and ``replacing``
    return new pipelines."""

    pre_parse: tuple[Heuristic, ...] = ()
    fallback_reparse: tuple[Heuristic, ...] = ()
    post_parse: tuple[Heuristic, ...] = ()

    def __post_init__(self) -> None:
        for phase in PHASES:
            items = tuple(self._phase(phase))
            for h in items:
                check_heuristic(h, phase)
            object.__setattr__(self, _ATTR[phase], items)

    def with_added(self, heuristics: Iterable[Heuristic]) -> Pipeline:
        """A copy with ``heuristics`` appended to the end of their own phase."""
        added: dict[Phase, list[Heuristic]] = {p: list(self._phase(p)) for p in PHASES}
        for h in heuristics:
            check_heuristic(h)
            added[h.phase].append(h)
        return Pipeline(*(tuple(added[p]) for p in PHASES))

    def replacing(self, phases: Mapping[Phase, Iterable[Heuristic]]) -> Pipeline:
        """A copy whose named phases hold exactly the given heuristics."""
        unknown = [p for p in phases if p not in PHASES]
        if unknown:
            raise ValueError(f"unknown phase(s) {unknown}; expected some of {PHASES}")
        new = {p: tuple(phases[p]) if p in phases else self._phase(p) for p in PHASES}
        return Pipeline(*(new[p] for p in PHASES))

    def run(self, ctx: HeuristicContext, parse: ParseFn) -> HeuristicContext:
        """Pre-parse, parse, fallback-reparse (only on failure), post-parse (only on success).

        ``parse(raw, ctx)`` returns ``(parsed, errors)``; ``parsed is None`` means failure.
        The text is re-parsed at most once.
        """
        ctx.meta.setdefault("original", ctx.raw)
        self.run_phase("pre-parse", ctx)
        _parse(ctx, parse)
        if ctx.parsed is None:
            self._fallback(ctx, parse)
        if ctx.parsed is not None:
            self.run_phase("post-parse", ctx)
        return ctx

    def run_phase(self, phase: Phase, ctx: HeuristicContext) -> HeuristicContext:
        """Run one phase's heuristics over ``ctx`` (no parsing; ``reparse`` is ignored)."""
        for h in self._phase(phase):
            result = _apply(h, phase, ctx)
            if result is not None and result.stop:
                break
        return ctx

    def _fallback(self, ctx: HeuristicContext, parse: ParseFn) -> None:
        failed_raw = ctx.raw
        for h in self.fallback_reparse:
            result = _apply(h, "fallback-reparse", ctx)
            if result is None:
                continue
            if result.reparse:
                _parse(ctx, parse)  # the one re-parse: nothing after it could be re-parsed
                return
            if result.stop:
                break
        if ctx.raw != failed_raw:
            _parse(ctx, parse)

    def _phase(self, phase: Phase) -> tuple[Heuristic, ...]:
        return getattr(self, _ATTR[phase])


_ATTR: dict[Phase, str] = {
    "pre-parse": "pre_parse",
    "fallback-reparse": "fallback_reparse",
    "post-parse": "post_parse",
}


def _parse(ctx: HeuristicContext, parse: ParseFn) -> None:
    parsed, errors = parse(ctx.raw, ctx)
    ctx.parsed, ctx.errors = parsed, list(errors)


def _apply(h: Heuristic, phase: Phase, ctx: HeuristicContext) -> HeuristicResult | None:
    """Run one heuristic if it applies; record its change; contain its failures."""
    try:
        if not h.applies(ctx):
            return None
        result = h.run(ctx)
        if result is not None and not isinstance(result, HeuristicResult):
            raise TypeError(f"run() returned {type(result).__name__}, not HeuristicResult")
    except Exception as exc:  # noqa: BLE001 - a user's heuristic must not break decoding
        failures = ctx.meta.setdefault("heuristic_failures", [])
        failures.append({"id": h.id, "phase": phase, "error": f"{type(exc).__name__}: {exc}"})
        return None
    if result is None:
        return None
    changed = False
    if phase == "post-parse":
        if result.parsed is not None and not same_value(result.parsed, ctx.parsed):
            ctx.parsed, changed = result.parsed, True
    elif result.raw is not None and result.raw != ctx.raw:
        ctx.raw, changed = result.raw, True
    if changed:
        ctx.repairs.extend(result.repairs if result.repairs is not None else (h.id,))
    return result
