"""Engine mechanics of the heuristic pipeline, with small heuristics made for the tests."""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest
from hypothesis import given
from hypothesis import strategies as st
from toolcodec.repair.heuristics import (
    HeuristicContext,
    HeuristicResult,
    Pipeline,
    check_heuristic,
    same_value,
)
from toolcodec.repair.xml_heuristics import default_pipeline
from toolcodec.results.errors import INVALID_XML, CodecError


@dataclass
class Rewrite:
    """Replaces ``old`` by ``new`` in the raw text; counts its runs."""

    id: str
    phase: str
    old: str
    new: str
    when: bool = True
    reparse: bool = False
    stop: bool = False
    runs: int = 0

    def applies(self, ctx):
        return self.when

    def run(self, ctx):
        self.runs += 1
        return HeuristicResult(
            raw=ctx.raw.replace(self.old, self.new), reparse=self.reparse, stop=self.stop
        )


@dataclass
class SetParsed:
    id: str
    value: object
    repairs: tuple[str, ...] | None = None
    phase: str = "post-parse"

    def applies(self, ctx):
        return True

    def run(self, ctx):
        return HeuristicResult(parsed=self.value, repairs=self.repairs)


@dataclass
class Boom:
    id: str = "test.boom"
    phase: str = "pre-parse"
    in_applies: bool = False

    def applies(self, ctx):
        if self.in_applies:
            raise RuntimeError("applies broke")
        return True

    def run(self, ctx):
        raise ValueError("run broke")


@dataclass
class CountingParser:
    """Parses ``ok:<payload>`` into the payload; anything else fails."""

    calls: list[str] = field(default_factory=list)

    def __call__(self, raw, ctx):
        self.calls.append(raw)
        if raw.startswith("ok:"):
            return raw[3:], []
        return None, [CodecError(INVALID_XML, f"not ok: {raw!r}", {"position": 0})]


def ctx_for(raw: str) -> HeuristicContext:
    return HeuristicContext(tool_name="t", schema=None, raw=raw, parsed=None)


def test_pre_parse_rewrites_raw_and_records_only_changes():
    fix = Rewrite("test.fix", "pre-parse", "bad:", "ok:")
    idle = Rewrite("test.idle", "pre-parse", "zzz", "yyy")
    parse = CountingParser()
    ctx = Pipeline(pre_parse=(fix, idle)).run(ctx_for("bad:v"), parse)
    assert ctx.parsed == "v" and ctx.errors == []
    assert ctx.repairs == ["test.fix"]  # test.idle ran but changed nothing
    assert idle.runs == 1
    assert ctx.meta["original"] == "bad:v"
    assert parse.calls == ["ok:v"]


def test_gating_skips_heuristics_that_do_not_apply():
    gated = Rewrite("test.gated", "pre-parse", "bad:", "ok:", when=False)
    ctx = Pipeline(pre_parse=(gated,)).run(ctx_for("bad:v"), CountingParser())
    assert gated.runs == 0 and ctx.repairs == [] and ctx.parsed is None
    assert ctx.errors[0].code == INVALID_XML


def test_fallback_runs_only_after_a_failed_parse():
    fallback = Rewrite("test.fallback", "fallback-reparse", "x", "y")
    ctx = Pipeline(fallback_reparse=(fallback,)).run(ctx_for("ok:x"), CountingParser())
    assert fallback.runs == 0 and ctx.parsed == "x" and ctx.repairs == []


def test_fallback_reparses_once_after_all_ran_when_raw_changed():
    first = Rewrite("test.first", "fallback-reparse", "b", "o")
    second = Rewrite("test.second", "fallback-reparse", "ad", "k")
    parse = CountingParser()
    ctx = Pipeline(fallback_reparse=(first, second)).run(ctx_for("bad:v"), parse)
    assert parse.calls == ["bad:v", "ok:v"]
    assert ctx.parsed == "v" and ctx.errors == []
    assert ctx.repairs == ["test.first", "test.second"]


def test_fallback_without_change_does_not_reparse():
    idle = Rewrite("test.idle", "fallback-reparse", "zzz", "yyy")
    parse = CountingParser()
    ctx = Pipeline(fallback_reparse=(idle,)).run(ctx_for("bad:v"), parse)
    assert parse.calls == ["bad:v"] and ctx.parsed is None and ctx.repairs == []


def test_reparse_at_most_once_per_call():
    # Both ask for a re-parse; the first one uses it up and ends the phase.
    a = Rewrite("test.a", "fallback-reparse", "bad", "worse", reparse=True)
    b = Rewrite("test.b", "fallback-reparse", "worse:", "ok:", reparse=True)
    parse = CountingParser()
    ctx = Pipeline(fallback_reparse=(a, b)).run(ctx_for("bad:v"), parse)
    assert parse.calls == ["bad:v", "worse:v"]
    assert b.runs == 0 and ctx.parsed is None
    assert ctx.errors and ctx.repairs == ["test.a"]


def test_stop_ends_the_current_phase_only():
    stopper = Rewrite("test.stop", "pre-parse", "bad", "mid", stop=True)
    skipped = Rewrite("test.skipped", "pre-parse", "mid", "ok")
    fallback = Rewrite("test.fb", "fallback-reparse", "mid:", "ok:")
    parse = CountingParser()
    ctx = Pipeline(pre_parse=(stopper, skipped), fallback_reparse=(fallback,)).run(
        ctx_for("bad:v"), parse
    )
    assert skipped.runs == 0 and fallback.runs == 1
    assert ctx.parsed == "v" and ctx.repairs == ["test.stop", "test.fb"]


def test_post_parse_replaces_parsed_and_reports_its_own_ids():
    a = SetParsed("test.a", {"n": 1})
    same = SetParsed("test.same", {"n": 1})
    finer = SetParsed("test.finer", {"n": 2}, repairs=("schema.x", "schema.y"))
    silent = SetParsed("test.silent", {"n": 3}, repairs=())
    ctx = Pipeline(post_parse=(a, same, finer, silent)).run(ctx_for("ok:v"), CountingParser())
    assert ctx.parsed == {"n": 3}
    assert ctx.repairs == ["test.a", "schema.x", "schema.y"]


def test_post_parse_change_detection_compares_types():
    steps = (SetParsed("test.a", {"n": 1}), SetParsed("test.b", {"n": True}))
    pipeline = Pipeline(post_parse=steps)
    ctx = pipeline.run(ctx_for("ok:v"), CountingParser())
    assert ctx.repairs == ["test.a", "test.b"] and ctx.parsed == {"n": True}


def test_post_parse_skipped_when_parse_fails():
    post = SetParsed("test.post", {"x": 1})
    ctx = Pipeline(post_parse=(post,)).run(ctx_for("bad"), CountingParser())
    assert ctx.parsed is None and ctx.repairs == []


@pytest.mark.parametrize("in_applies", [False, True])
def test_raising_heuristic_is_noted_and_skipped(in_applies):
    fix = Rewrite("test.fix", "pre-parse", "bad:", "ok:")
    ctx = Pipeline(pre_parse=(Boom(in_applies=in_applies), fix)).run(
        ctx_for("bad:v"), CountingParser()
    )
    assert ctx.parsed == "v" and ctx.repairs == ["test.fix"]
    (failure,) = ctx.meta["heuristic_failures"]
    assert failure["id"] == "test.boom" and failure["phase"] == "pre-parse"
    assert "broke" in failure["error"]


def test_wrong_return_type_counts_as_a_failure():
    class Bad:
        id, phase = "test.bad", "post-parse"

        def applies(self, ctx):
            return True

        def run(self, ctx):
            return {"parsed": 1}

    ctx = Pipeline(post_parse=(Bad(),)).run(ctx_for("ok:v"), CountingParser())
    assert ctx.parsed == "v"
    assert "HeuristicResult" in ctx.meta["heuristic_failures"][0]["error"]


def test_with_added_appends_to_the_right_phase():
    base = Pipeline(pre_parse=(Rewrite("test.p1", "pre-parse", "a", "b"),))
    p2 = Rewrite("test.p2", "pre-parse", "a", "b")
    fb = Rewrite("test.fb", "fallback-reparse", "a", "b")
    post = SetParsed("test.post", 1)
    added = base.with_added([fb, p2, post])
    assert [h.id for h in added.pre_parse] == ["test.p1", "test.p2"]
    assert [h.id for h in added.fallback_reparse] == ["test.fb"]
    assert [h.id for h in added.post_parse] == ["test.post"]
    assert [h.id for h in base.pre_parse] == ["test.p1"]  # the original is unchanged


def test_replacing_swaps_whole_phases():
    default = default_pipeline()
    mine = Rewrite("test.mine", "fallback-reparse", "a", "b")
    replaced = default.replacing({"fallback-reparse": [mine], "post-parse": []})
    assert replaced.pre_parse == default.pre_parse
    assert [h.id for h in replaced.fallback_reparse] == ["test.mine"]
    assert replaced.post_parse == ()
    with pytest.raises(ValueError, match="unknown phase"):
        default.replacing({"during-parse": []})
    with pytest.raises(ValueError, match="placed in 'pre-parse'"):
        default.replacing({"pre-parse": [mine]})


def test_default_pipeline_ids_in_order():
    p = default_pipeline()
    assert [h.id for h in p.pre_parse] == ["xml.normalize_close_tag", "xml.escape_lt"]
    assert [h.id for h in p.fallback_reparse] == ["xml.escape_ampersand", "xml.cut_tag_dropped",
                                                  "xml.balance_tags"]
    assert [h.id for h in p.post_parse] == ["xml.dedupe_tags", "xml.unwrap_scalar", "schema.coerce"]


def test_run_phase_runs_one_phase():
    fix = Rewrite("test.fix", "pre-parse", "a", "b")
    ctx = Pipeline(pre_parse=(fix,)).run_phase("pre-parse", ctx_for("aaa"))
    assert ctx.raw == "bbb" and ctx.repairs == ["test.fix"]


class NoId:
    phase = "pre-parse"

    def applies(self, ctx):
        return True

    def run(self, ctx):
        return None


@pytest.mark.parametrize(
    ("heuristic", "error", "match"),
    [
        (NoId(), TypeError, "non-empty str attribute 'id'"),
        (Rewrite("", "pre-parse", "a", "b"), TypeError, "'id'"),
        (Rewrite("test.x", "mid-parse", "a", "b"), ValueError, "phase 'mid-parse'"),
        (SetParsed("test.y", 1, phase="post-parse"), None, None),
    ],
)
def test_heuristics_are_validated_when_added(heuristic, error, match):
    if error is None:
        check_heuristic(heuristic)
        Pipeline().with_added([heuristic])
        return
    with pytest.raises(error, match=match):
        Pipeline().with_added([heuristic])


def test_non_callable_run_is_rejected():
    class NotCallable:
        id, phase, applies, run = "test.nc", "pre-parse", (lambda self, ctx: True), "nope"

    with pytest.raises(TypeError, match="callable run"):
        Pipeline(pre_parse=(NotCallable(),))


def test_same_value():
    assert same_value({"a": [1, "x"]}, {"a": [1, "x"]})
    assert not same_value({"a": 1}, {"a": True})
    assert not same_value([1], [1.0])
    assert not same_value({"a": 1}, {"b": 1})


def _same_by_walk(a: object, b: object) -> bool:
    """same_value's meaning, spelt out: the same classes and equal scalars, part by part."""
    if type(a) is not type(b):
        return False
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(_same_by_walk(a[k], b[k]) for k in a)
    if isinstance(a, list | tuple):
        return len(a) == len(b) and all(_same_by_walk(x, y) for x, y in zip(a, b, strict=True))
    return not a != b


_NAN = float("nan")
_SCALAR = st.one_of(st.sampled_from([0, 1, 1.0, True, False, None, "", "1", "x", _NAN, -0.0, 0.0]),
                    st.text(max_size=3), st.integers(-3, 3))
_FLAT = st.dictionaries(st.sampled_from(["a", "b", "c"]), _SCALAR, max_size=3)


@given(_FLAT, _FLAT)
def test_same_value_on_objects_of_scalars_is_the_walks_answer(a, b) -> None:
    # the flat objects' way (compared in C) against the walk, NaN and 1 == 1.0 == True included
    assert same_value(a, b) == _same_by_walk(a, b)
    assert same_value(a, dict(a)) == _same_by_walk(a, dict(a))
    nested = {"a": [a], "b": a}
    assert same_value(nested, {"a": [b], "b": b}) == _same_by_walk(nested, {"a": [b], "b": b})
