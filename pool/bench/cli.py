"""``toolcodec bench capacity`` and ``toolcodec bench compare``: argument parsing and the run."""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import math
import os
import platform
import sys
import time
from pathlib import Path
from typing import Any

import orjson
from toolcodec.pool.bench import capacity, corpus, report
from toolcodec.pool.bench.targets import TARGETS, TargetConfig, make_target


class BenchUsageError(Exception):
    """A bad bench argument; the CLI prints it on one line and exits 2."""


def add_parser(subparsers: Any) -> None:
    bench = subparsers.add_parser("bench", help="capacity benchmark and report comparison")
    sub = bench.add_subparsers(dest="bench_command", required=True)
    cap = sub.add_parser("capacity", help="highest load whose p99 stays under the SLO")
    cap.add_argument("--target", action="append", choices=TARGETS,
                     help="inprocess, process (default), rq, http, or executor (baseline); "
                          "repeat to measure several in one run")
    cap.add_argument("--url", default="http://127.0.0.1:8080", help="http target's base URL")
    cap.add_argument("--redis-url", default="redis://127.0.0.1:6379/0",
                     help="rq target: the Redis its workers read (default: %(default)s)")
    cap.add_argument("--queue", default="toolcodec", help="rq target: queue name")
    cap.add_argument("--workers", type=int, default=None, help="process/executor workers")
    cap.add_argument("--slo-ms", type=float, default=50.0,
                     help="a step passes while p99 stays under this (default: 50)")
    cap.add_argument("--timeout-ms", type=float, default=None,
                     help="job budget (default: the SLO)")
    cap.add_argument("--max-timeout-ratio", type=float, default=0.001,
                     help="a step fails past this share of timed-out jobs (default: 0.001)")
    cap.add_argument("--corpus", default="builtin", help="'builtin' or a JSONL file")
    cap.add_argument("--corpus-size", type=int, default=2000,
                     help="payloads generated for the builtin corpus (default: 2000)")
    cap.add_argument("--seed", type=int, default=1,
                     help="seed of the builtin corpus and the load (default: 1)")
    cap.add_argument("--duration", type=float, default=20.0,
                     help="seconds per load step (default: 20; short steps let one stall "
                          "decide a step)")
    cap.add_argument("--cores", type=int, default=None,
                     help="cores the target uses, for the per-core figure (default: --workers "
                          "for process/executor, 1 for inprocess, this machine's CPUs else)")
    cap.add_argument("--concurrency", type=int, default=32, help="closed-loop callers")
    cap.add_argument("--out", default="bench-out", help="directory for the report files")
    cap.add_argument("--no-plots", action="store_true", help="write no PNG plots")
    cmp_ = sub.add_parser("compare", help="differences between two capacity reports")
    cmp_.add_argument("a", metavar="A", help="a capacity report (JSON) to compare from")
    cmp_.add_argument("b", metavar="B", help="the report to compare with it")


def run(args: argparse.Namespace) -> int:
    if args.bench_command == "compare":
        a, b = (_load_report(p) for p in (args.a, args.b))
        print("\n".join(report.compare(a, b)))
        return 0
    settings, configs, items = _prepare(args)
    result = asyncio.run(_run_all(configs, items, settings))
    result["settings"] = {**vars(args), "slo_ms": settings.slo_ms,
                          "max_timeout_ratio": settings.max_timeout_ratio}
    result["settings"].pop("func", None)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    written = [report.write_json(result, out), report.write_csv(result, out),
               report.write_markdown(result, out)]
    if not args.no_plots:
        try:
            written += report.write_plots(result, out)
        except ImportError as exc:
            print(f"note: {exc}", file=sys.stderr)
    _print_summary(result)
    print("wrote " + ", ".join(str(p) for p in written))
    return 0


def _prepare(args: argparse.Namespace) -> tuple[capacity.Settings, list[TargetConfig], list]:
    for name in ("slo_ms", "duration"):
        if not (math.isfinite(getattr(args, name)) and getattr(args, name) > 0):
            raise BenchUsageError(f"--{name.replace('_', '-')} must be a positive number")
    if not 0 <= args.max_timeout_ratio <= 1:
        raise BenchUsageError("--max-timeout-ratio must be between 0 and 1")
    if args.timeout_ms is not None and not (math.isfinite(args.timeout_ms)
                                            and 0 < args.timeout_ms <= 600_000):
        raise BenchUsageError("--timeout-ms must be a positive number of at most 600000")
    if args.workers is not None and args.workers < 1:
        raise BenchUsageError("--workers must be at least 1")
    if args.corpus_size < 1 or args.concurrency < 1:
        raise BenchUsageError("--corpus-size and --concurrency must be at least 1")
    if args.cores is not None and args.cores < 1:
        raise BenchUsageError("--cores must be at least 1")
    timeout = args.timeout_ms if args.timeout_ms is not None else args.slo_ms
    settings = capacity.Settings(slo_ms=args.slo_ms, max_timeout_ratio=args.max_timeout_ratio,
                                 duration=args.duration, warmup=min(1.0, args.duration),
                                 concurrency=args.concurrency, seed=args.seed,
                                 cores=args.cores or 0)
    configs = [TargetConfig(name, workers=args.workers, timeout_ms=timeout, url=args.url,
                            redis_url=args.redis_url, queue=args.queue)
               for name in (args.target or ["process"])]
    try:
        items = (corpus.builtin_corpus(args.corpus_size, seed=args.seed)
                 if args.corpus == "builtin" else corpus.load_corpus(args.corpus))
    except (OSError, corpus.CorpusError) as exc:
        raise BenchUsageError(f"--corpus: {exc}") from exc
    return settings, configs, items


async def _run_all(configs: list[TargetConfig], items: list, settings: capacity.Settings
                   ) -> dict[str, Any]:
    started = time.time()
    targets = []
    with _Progress() as progress:
        for config in configs:
            own = dataclasses.replace(settings, cores=settings.cores or _cores(config))
            target = make_target(config)
            try:
                measured = await capacity.measure(target, items, own, progress.update)
            finally:
                await target.close()
            targets.append(measured.to_dict(own))
    return {"started": started, "machine": _machine(), "corpus": _corpus_info(items),
            "targets": targets}


def _cores(config: TargetConfig) -> int:
    if config.name == "inprocess":
        return 1
    if config.name in ("process", "executor") and config.workers:
        return config.workers
    return os.cpu_count() or 1


class _Progress:
    """A rich progress bar on stderr; plain timestamped lines when stderr is not a terminal
    (CI logs, ``nohup``), so a long run shows it is alive."""

    def __init__(self, stream: Any = None) -> None:
        self.stream = stream or sys.stderr
        self._bar: Any = None

    def __enter__(self) -> _Progress:
        if not self.stream.isatty():
            return self
        from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

        self._bar = Progress(TextColumn("{task.description}"), BarColumn(), TimeElapsedColumn(),
                             transient=False)
        self._bar.start()
        self._task = self._bar.add_task("starting", total=1.0)
        return self

    def update(self, what: str, fraction: float) -> None:
        if self._bar is None:
            stamp = time.strftime("%H:%M:%S")
            print(f"[{stamp}] {fraction * 100:3.0f}% {what}", file=self.stream, flush=True)
            return
        self._bar.update(self._task, description=what, completed=fraction)

    def __exit__(self, *exc: object) -> None:
        if self._bar is not None:
            self._bar.stop()


def _machine() -> dict[str, Any]:
    return {"cpus": os.cpu_count(), "python": platform.python_version(),
            "platform": platform.platform()}


def _corpus_info(items: list) -> dict[str, Any]:
    kinds: dict[str, int] = {}
    for item in items:
        kinds[item.kind] = kinds.get(item.kind, 0) + 1
    sizes = sorted(item.size for item in items)
    return {"items": len(items), "kinds": kinds, "median_size": sizes[len(sizes) // 2],
            "max_size": sizes[-1], "malformed": sum(1 for i in items if i.malformation)}


def _print_summary(result: dict[str, Any]) -> None:
    slo = result["settings"]["slo_ms"]
    print(f"{'target':10} {'ceiling/s':>10} {'goodput/s':>10} {'rate@SLO/s':>11} "
          f"{'per core/s':>11} {'goodput@SLO/s':>14} {'p99@SLO ms':>11}  bracketed")
    for t in result["targets"]:
        p99 = t["p99_at_slo_ms"]
        print(f"{t['target']:10} {t['ceiling']['achieved_rate']:>10.0f} "
              f"{t['ceiling']['goodput_rate']:>10.0f} {t['rate_at_slo']:>11.0f} "
              f"{t['rate_at_slo_per_core']:>11.0f} {t['goodput_at_slo']:>14.0f}"
              f" {('-' if p99 is None else f'{p99:.2f}'):>11}  {t['bracketed']}")
    print("(ceiling: answered per second in the closed loop, timeouts included; goodput: "
          "answered ok within the SLO)")
    print(f"(SLO: p99 ≤ {slo:g} ms, timeouts ≤ {result['settings']['max_timeout_ratio']:g})")


def _load_report(path: str) -> dict[str, Any]:
    try:
        data = orjson.loads(Path(path).read_bytes())
    except (OSError, orjson.JSONDecodeError) as exc:
        raise BenchUsageError(f"cannot read report {path}: {exc}") from exc
    if not isinstance(data, dict) or not isinstance(data.get("targets"), list):
        raise BenchUsageError(f"{path} is not a bench capacity report")
    return data
