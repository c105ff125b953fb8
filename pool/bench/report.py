"""The bench's outputs: a JSON report, a CSV of every step, PNG plots, and ``compare``."""

from __future__ import annotations

import csv
from pathlib import Path
from typing import Any

import orjson

CSV_FIELDS = ("target", "offered_rate", "achieved_rate", "goodput_rate", "sent", "passed",
              "p50", "p90", "p99", "p99.9", "max", "timeout_ratio", "machine_busy_pct",
              "statuses")


def write_json(report: dict[str, Any], out: Path) -> Path:
    path = out / "report.json"
    path.write_bytes(orjson.dumps(report, option=orjson.OPT_INDENT_2) + b"\n")
    return path


def write_csv(report: dict[str, Any], out: Path) -> Path:
    path = out / "steps.csv"
    with path.open("w", newline="", encoding="utf-8") as fh:
        writer = csv.writer(fh)
        writer.writerow(CSV_FIELDS)
        for target in report["targets"]:
            for step in target["steps"]:
                lat = step["latency_ms"]
                writer.writerow([
                    target["target"], step["offered_rate"], step["achieved_rate"],
                    step.get("goodput_rate"), step["sent"], step["passed"], lat["p50"],
                    lat["p90"], lat["p99"],
                    lat["p99.9"], lat["max"], step["timeout_ratio"],
                    step["cpu"].get("machine_busy_pct"),
                    " ".join(f"{k}={v}" for k, v in step["statuses"].items()),
                ])
    return path


def write_markdown(report: dict[str, Any], out: Path) -> Path:
    """A summary table (one row per target) for docs and pull requests."""
    settings = report["settings"]
    lines = [f"SLO: p99 ≤ {settings['slo_ms']:g} ms and timeouts ≤ "
             f"{settings['max_timeout_ratio']:g}; {report['machine']['cpus']} CPUs; corpus "
             f"{report['corpus']['items']} outputs (median {report['corpus']['median_size']} B, "
             f"max {report['corpus']['max_size']} B, {report['corpus']['malformed']} malformed).",
             "",
             "| target | closed-loop ceiling (jobs/s) | rate at SLO (jobs/s) | per core "
             "(jobs/s) | goodput at SLO (jobs/s) | timeouts at SLO | p50 / p99 / p99.9 "
             "at that rate (ms) | bracketed |",
             "|---|---|---|---|---|---|---|---|"]
    for t in report["targets"]:
        lat = [_at_slo(t, k) for k in ("p50", "p99", "p99.9")]
        shown = " / ".join(_fmt(v) for v in lat)
        ratio = t.get("timeout_ratio_at_slo")
        lines.append(f"| {t['target']} | {t['ceiling']['achieved_rate']:.0f} | "
                     f"{t['rate_at_slo']:.0f} | {t.get('rate_at_slo_per_core', 0):.0f} "
                     f"({t.get('cores', '?')} cores) | {t.get('goodput_at_slo', 0):.0f} | "
                     f"{'-' if ratio is None else f'{ratio:.2%}'} | {shown} | "
                     f"{'yes' if t['bracketed'] else 'no'} |")
    path = out / "summary.md"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def write_plots(report: dict[str, Any], out: Path) -> list[Path]:
    """Latency percentiles and throughput against offered load; needs the ``bench`` extra.

    Raises ``ImportError`` (with the install hint) when matplotlib is missing.
    """
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError as exc:
        raise ImportError("plots need matplotlib: pip install 'toolcodec[bench]'") from exc
    slo = report["settings"]["slo_ms"]
    paths = [out / "latency.png", out / "throughput.png"]
    fig, ax = plt.subplots(figsize=(8, 5))
    for target in report["targets"]:
        xs = [s["offered_rate"] for s in target["steps"]]
        for key, style in (("p50", ":"), ("p99", "-"), ("p99.9", "--")):
            ax.plot(xs, [s["latency_ms"][key] for s in target["steps"]], style, marker=".",
                    label=f"{target['target']} {key}")
    ax.axhline(slo, color="red", linewidth=1, label=f"SLO {slo:g} ms")
    _mark_capacity(ax, report)
    ax.set(xlabel="offered load (jobs/s)", ylabel="latency (ms, from intended send time)",
           yscale="log", title="Latency vs offered load")
    ax.legend(fontsize="small")
    fig.savefig(paths[0], dpi=100, bbox_inches="tight")
    plt.close(fig)
    fig, ax = plt.subplots(figsize=(8, 5))
    for target in report["targets"]:
        xs = [s["offered_rate"] for s in target["steps"]]
        line, = ax.plot(xs, [s["achieved_rate"] for s in target["steps"]], marker=".",
                        label=f"{target['target']} answered")
        ax.plot(xs, [s.get("goodput_rate", 0) for s in target["steps"]], "--", marker=".",
                color=line.get_color(), label=f"{target['target']} goodput (ok within SLO)")
    top = max((s["offered_rate"] for t in report["targets"] for s in t["steps"]), default=1)
    ax.plot([0, top], [0, top], color="grey", linewidth=0.8, label="offered = achieved")
    _mark_capacity(ax, report)
    ax.set(xlabel="offered load (jobs/s)", ylabel="jobs/s",
           title="Throughput and goodput vs offered load")
    ax.legend(fontsize="small")
    fig.savefig(paths[1], dpi=100, bbox_inches="tight")
    plt.close(fig)
    return paths


def _mark_capacity(ax: Any, report: dict[str, Any]) -> None:
    """A vertical line at each target's rate at SLO (its capacity)."""
    for target in report["targets"]:
        if target["rate_at_slo"]:
            ax.axvline(target["rate_at_slo"], linestyle="-.", linewidth=1, color="green",
                       label=f"{target['target']} capacity {target['rate_at_slo']:.0f}/s")


def compare(a: dict[str, Any], b: dict[str, Any]) -> list[str]:
    """Lines describing how report *b* differs from report *a*, target by target."""
    lines = []
    targets_b = {t["target"]: t for t in b["targets"]}
    for ta in a["targets"]:
        tb = targets_b.get(ta["target"])
        if tb is None:
            lines.append(f"{ta['target']}: only in A")
            continue
        lines.append(f"{ta['target']}:")
        lines.append(_row("rate at SLO (jobs/s)", ta["rate_at_slo"], tb["rate_at_slo"]))
        lines.append(_row("closed-loop ceiling (jobs/s)", ta["ceiling"]["achieved_rate"],
                          tb["ceiling"]["achieved_rate"]))
        for key in ("p50", "p99", "p99.9"):
            lines.append(_row(f"{key} at SLO rate (ms)", _at_slo(ta, key), _at_slo(tb, key)))
    lines += [f"{name}: only in B" for name in targets_b
              if name not in {t["target"] for t in a["targets"]}]
    return lines


def _at_slo(target: dict[str, Any], key: str) -> float | None:
    rate = target["rate_at_slo"]
    for step in target["steps"]:
        if step["passed"] and round(step["offered_rate"], 2) == rate:
            return step["latency_ms"][key]
    return None


def _row(label: str, a: float | None, b: float | None) -> str:
    if a is None or b is None:
        return f"  {label:32} {_fmt(a):>10} → {_fmt(b):>10}"
    change = f"{(b - a) / a * 100:+.1f}%" if a else "n/a"
    return f"  {label:32} {_fmt(a):>10} → {_fmt(b):>10}  ({change})"


def _fmt(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}"
