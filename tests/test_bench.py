"""``toolcodec bench``: the corpus, the open-loop accounting, the SLO search, the outputs.

The load generator is checked against small in-test targets whose behaviour is known (a
stall of a known length, a server of a known service time); the real targets (in-process,
process pool, Redis/RQ) are then run for a short time and their reports checked for shape
and internal consistency, not for speed.
"""

from __future__ import annotations

import asyncio
import subprocess
import sys
from pathlib import Path

import orjson
import pytest
import toolcodec as codec
from toolcodec.pool.bench import capacity, corpus, report
from toolcodec.pool.bench.load import open_loop
from toolcodec.pool.bench.targets import TargetConfig, make_target

REPO = Path(__file__).resolve().parent.parent
QUICK = capacity.Settings(slo_ms=50, duration=0.3, warmup=0.1, concurrency=4, bisect_steps=1)


# -- corpus ------------------------------------------------------------------------------------


def test_builtin_corpus_is_reproducible_and_seed_dependent() -> None:
    a = corpus.builtin_corpus(300, seed=7)
    assert a == corpus.builtin_corpus(300, seed=7)
    assert a != corpus.builtin_corpus(300, seed=8)


def test_builtin_corpus_covers_formats_malformations_and_sizes() -> None:
    items = corpus.builtin_corpus(3000, seed=1)
    assert {i.kind for i in items} == set(corpus.FORMATS)
    assert {i.malformation for i in items} - {None} == set(corpus.MALFORMATIONS)
    sizes = sorted(i.size for i in items)
    assert sizes[len(sizes) // 2] < 1000 < sizes[-1]  # heavy-tailed: small median, big tail
    assert sizes[-1] <= 2 * corpus.MAX_SIZE


def test_every_corpus_item_decodes_and_encodes() -> None:
    outcomes = set()
    for item in corpus.builtin_corpus(400, seed=2):
        payload = item.payload
        source = payload.get("text", payload.get("message"))
        result = codec.decode(source, tools=payload["tools"]).to_dict()
        orjson.dumps(result)
        outcomes.add(result["ok"])
    assert outcomes == {True, False}  # both well-formed and refused outputs are in the mix


def test_user_corpus_jsonl(tmp_path: Path) -> None:
    path = tmp_path / "outputs.jsonl"
    path.write_text('{"text": "hi"}\n\n{"op": "repair", "payload": {"text": "[1,"}}\n'
                    '{"message": {"role": "assistant", "content": "x"}, "tools": []}\n')
    items = corpus.load_corpus(str(path))
    assert [(i.op, sorted(i.payload)) for i in items] == [
        ("decode", ["text"]), ("repair", ["text"]), ("decode", ["message", "tools"])]
    path.write_text('{"text": "a"}\n[1]\n')
    with pytest.raises(corpus.CorpusError, match="line 2"):
        corpus.load_corpus(str(path))


# -- the load generator against targets of known behaviour --------------------------------------


class StalledTarget:
    """Answers nothing until ``stall`` seconds after the first call, then everything at once."""

    name = "stalled"

    def __init__(self, stall: float) -> None:
        self.stall, self.release = stall, None

    async def call(self, op, payload):
        loop = asyncio.get_running_loop()
        if self.release is None:
            self.release = loop.time() + self.stall
        await asyncio.sleep(max(0.0, self.release - loop.time()))
        return "ok"

    async def close(self):
        pass


class OneServer:
    """A single server with a fixed service time: capacity is 1 / service jobs/s."""

    name = "one-server"

    def __init__(self, service: float) -> None:
        self.service, self.lock = service, None

    async def call(self, op, payload):
        self.lock = self.lock or asyncio.Lock()
        async with self.lock:
            await asyncio.sleep(self.service)
        return "ok"

    async def close(self):
        pass


ITEMS = corpus.builtin_corpus(10, seed=1)


def test_a_stall_shows_in_every_queued_jobs_latency() -> None:
    # 100 jobs/s for 1 s; nothing is answered for the first 0.6 s. Measured from the intended
    # send time, the jobs due in that window waited out the rest of it: latencies spread
    # from ~0 to ~600 ms and the median is near 100 ms. A generator that measured from its
    # own (late) send would show none of it.
    step = asyncio.run(open_loop(StalledTarget(0.6), ITEMS, rate=100, duration=1.0, seed=3))
    assert step.statuses == {"ok": step.sent} and step.sent > 50
    assert step.latency_ms["max"] >= 500
    assert step.latency_ms["p50"] >= 40
    assert step.histogram.get_total_count() == step.sent


def test_slo_search_brackets_the_answer() -> None:
    # 50 jobs/s at most; steps of 1 s, so that at 1.2x the ceiling the backlog (and so p99)
    # grows far past the SLO however busy the machine is.
    target = OneServer(0.02)
    settings = capacity.Settings(slo_ms=50, duration=1.0, warmup=0.1, concurrency=4,
                                 bisect_steps=1)
    measured = asyncio.run(capacity.measure(target, ITEMS, settings))
    out = measured.to_dict(settings)
    assert out["bracketed"] and out["first_failing_rate"] > out["rate_at_slo"] > 0
    rates = [s["offered_rate"] for s in out["steps"]]
    assert rates == sorted(rates)
    for step in out["steps"]:
        assert step["passed"] == (step["latency_ms"]["p99"] <= settings.slo_ms
                                  and step["timeout_ratio"] <= settings.max_timeout_ratio)
        if step["offered_rate"] <= out["rate_at_slo"]:
            continue
        assert not step["passed"] or step["offered_rate"] < out["first_failing_rate"]
    # The ceiling is the single server's capacity, whatever the machine's speed: never above.
    assert out["ceiling"]["achieved_rate"] <= 50


class Servers:
    """``n`` servers with a fixed service time: capacity n / service jobs/s, which a closed
    loop with fewer callers than servers cannot reach (an HTTP server far from its limit)."""

    name = "servers"

    def __init__(self, n: int, service: float) -> None:
        self.n, self.service, self.slots = n, service, None

    async def call(self, op, payload):
        self.slots = self.slots or asyncio.Semaphore(self.n)
        async with self.slots:
            await asyncio.sleep(self.service)
        return "ok"

    async def close(self):
        pass


class Answers:
    """Answers every job after ``delay`` s with the next status of ``statuses`` in turn."""

    name = "answers"

    def __init__(self, statuses: list[str], delay: float = 0.0) -> None:
        self.statuses, self.delay, self.i = statuses, delay, 0

    async def call(self, op, payload):
        self.i += 1
        status = self.statuses[self.i % len(self.statuses)]
        await asyncio.sleep(self.delay)
        return status

    async def close(self):
        pass


def test_goodput_leaves_out_timeouts_and_late_answers() -> None:
    half = asyncio.run(open_loop(Answers(["ok", "timeout"]), ITEMS, rate=200, duration=0.5,
                                 seed=2, slo_ms=50))
    ok, sent = half.statuses["ok"], half.sent
    assert half.timeout_ratio == half.statuses["timeout"] / sent
    assert abs(half.statuses["timeout"] - ok) <= 1  # every other job
    assert 0 < half.goodput_rate <= half.achieved_rate * ok / sent + 1e-9
    late = asyncio.run(open_loop(Answers(["ok"], delay=0.08), ITEMS, rate=100, duration=0.3,
                                 seed=2, slo_ms=50))
    assert late.statuses == {"ok": late.sent} and late.achieved_rate > 0
    assert late.goodput_rate == 0  # every answer came after the SLO


def test_the_search_goes_past_an_underrated_ceiling_until_it_brackets_the_limit() -> None:
    # 8 servers of 50 ms: 160 jobs/s; two closed-loop callers see at most 40 jobs/s. The old
    # sweep stopped at 1.2 x 40 with every step passing and no capacity found.
    settings = capacity.Settings(slo_ms=200, duration=1.0, warmup=0.1, concurrency=2,
                                 bisect_steps=0)
    out = asyncio.run(capacity.measure(Servers(8, 0.05), ITEMS, settings)).to_dict(settings)
    ceiling = out["ceiling"]["achieved_rate"]
    assert ceiling <= 40
    assert out["bracketed"] and out["rate_at_slo"] >= 1.2 * 1.5 * ceiling - 0.01
    assert out["first_failing_rate"] <= 2 * 160 * 1.5  # stopped near the real limit
    assert out["rate_at_slo_per_core"] == out["rate_at_slo"]  # cores: 1 by default


# -- real targets -------------------------------------------------------------------------------


def check_report(out: dict) -> None:
    orjson.dumps(out)
    assert out["ceiling"]["statuses"].get("ok", 0) > 0
    assert len(out["steps"]) >= len(capacity.SWEEP)
    for step in out["steps"]:
        assert step["sent"] == sum(step["statuses"].values()) > 0
        lat = step["latency_ms"]
        assert 0 < lat["p50"] <= lat["p90"] <= lat["p99"] <= lat["p99.9"] <= lat["max"]
        assert 0 <= step["cpu"]["machine_busy_pct"] <= 100


def run_target(config: TargetConfig) -> dict:
    async def main():
        target = make_target(config)
        try:
            return (await capacity.measure(target, corpus.builtin_corpus(60, seed=1),
                                           QUICK)).to_dict(QUICK)
        finally:
            await target.close()

    return asyncio.run(main())


@pytest.mark.parametrize("name", ["inprocess", "process", "executor"])
def test_local_targets(name: str) -> None:
    out = run_target(TargetConfig(name, workers=2, timeout_ms=1000))
    check_report(out)
    assert out["target"] == name


@pytest.mark.redis
def test_rq_target(redis_server, queue_name, start_rq_worker) -> None:
    start_rq_worker(concurrency=2)
    out = run_target(TargetConfig("rq", timeout_ms=1000, redis_url=redis_server.url,
                                  queue=queue_name))
    check_report(out)


# -- outputs ----------------------------------------------------------------------------------


def fake_report(rate_scale: float) -> dict:
    measured = asyncio.run(capacity.measure(OneServer(0.01 / rate_scale), ITEMS, QUICK))
    return {"settings": {"slo_ms": QUICK.slo_ms, "max_timeout_ratio": 0.001},
            "targets": [measured.to_dict(QUICK)]}


def test_outputs_and_compare(tmp_path: Path) -> None:
    a, b = fake_report(1.0), fake_report(2.0)
    json_path, csv_path = report.write_json(a, tmp_path), report.write_csv(a, tmp_path)
    assert orjson.loads(json_path.read_bytes()) == orjson.loads(orjson.dumps(a))
    rows = csv_path.read_text().splitlines()
    assert rows[0].split(",")[:3] == ["target", "offered_rate", "achieved_rate"]
    assert len(rows) == 1 + len(a["targets"][0]["steps"])
    for png in report.write_plots(a, tmp_path):
        assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    a["machine"], a["corpus"] = {"cpus": 2}, {"items": 10, "median_size": 1, "max_size": 2,
                                             "malformed": 0}
    table = report.write_markdown(a, tmp_path).read_text()
    assert "| one-server |" in table
    lines = report.compare(a, b)
    assert lines[0] == "one-server:" and "rate at SLO" in lines[1]
    assert b["targets"][0]["rate_at_slo"] > a["targets"][0]["rate_at_slo"]
    assert "+" in lines[1]  # B's faster server shows as an increase


def test_cli_runs_and_reports_usage_errors(tmp_path: Path) -> None:
    cmd = [sys.executable, "-m", "toolcodec.pool.cli", "bench", "capacity", "--target", "inprocess",
           "--duration", "0.2", "--corpus-size", "40", "--out", str(tmp_path), "--no-plots"]
    done = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert "rate@SLO" in done.stdout and "goodput" in done.stdout
    assert "% inprocess: open loop at" in done.stderr  # progress lines when not on a terminal
    written = orjson.loads((tmp_path / "report.json").read_bytes())["targets"][0]
    assert written["cores"] == 1 and written["rate_at_slo_per_core"] == written["rate_at_slo"]
    assert {"goodput_at_slo", "timeout_ratio_at_slo"} <= set(written)
    assert all("goodput_rate" in step for step in written["steps"])
    again = subprocess.run([sys.executable, "-m", "toolcodec.pool.cli", "bench", "compare",
                            str(tmp_path / "report.json"), str(tmp_path / "report.json")],
                           cwd=REPO, capture_output=True, text=True, timeout=60)
    assert again.returncode == 0 and "inprocess:" in again.stdout
    bad = subprocess.run(cmd[:5] + ["--slo-ms", "0"], cwd=REPO, capture_output=True,
                         text=True, timeout=60)
    assert bad.returncode == 2 and bad.stderr.count("\n") == 1 and "--slo-ms" in bad.stderr
