"""Tallies export what prometheus_client's Counter and Histogram export for the same events
(toolcodec.pool.service.tally), and a scrape on another thread never breaks or tears them."""

from __future__ import annotations

import sys
import threading

from hypothesis import given
from hypothesis import strategies as st
from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest
from toolcodec.pool.service.tally import CounterTally, HistogramTally

BUCKETS = (0.0001, 0.001, 0.01, 0.05, 1.0, 2.5)
LABELS = st.sampled_from([("a", "x"), ("a", "y"), ("b", "x")])


def _exposition(registry: CollectorRegistry) -> list[str]:
    """The exposition's lines, without the ``_created`` samples (a tally has none)."""
    return [line for line in generate_latest(registry).decode().splitlines()
            if "_created" not in line]


@given(st.lists(st.tuples(LABELS, st.integers(1, 5)), max_size=30), st.lists(LABELS, max_size=3))
def test_counter_tally_exports_what_a_counter_exports(events, primed):
    ours, theirs = CollectorRegistry(), CollectorRegistry()
    tally = CounterTally("t_requests_total", "Requests.", ["k", "v"], ours)
    counter = Counter("t_requests_total", "Requests.", ["k", "v"], registry=theirs)
    for labels in primed:
        tally.prime(labels)
        counter.labels(*labels)
    for labels, amount in events:
        tally.inc(labels, amount)
        counter.labels(*labels).inc(amount)
    assert sorted(_exposition(ours)) == sorted(_exposition(theirs))
    for labels, _ in events:
        named = dict(zip(("k", "v"), labels, strict=True))
        assert tally.value(labels) == ours.get_sample_value("t_requests_total", named)


# Values on the bounds too: a value equal to a bound counts in that bound's bucket.
VALUES = st.one_of(st.sampled_from(BUCKETS), st.floats(0, 20, allow_nan=False))


@given(st.lists(st.tuples(LABELS, VALUES), max_size=40))
def test_histogram_tally_exports_what_a_histogram_exports(events):
    ours, theirs = CollectorRegistry(), CollectorRegistry()
    tally = HistogramTally("t_seconds", "Durations.", ["k", "v"], BUCKETS, ours)
    histogram = Histogram("t_seconds", "Durations.", ["k", "v"], buckets=BUCKETS,
                          registry=theirs)
    for labels, value in events:
        tally.observe(labels, value)
        histogram.labels(*labels).observe(value)
    mine, reference = _exposition(ours), _exposition(theirs)
    assert [line.rsplit(" ", 1)[0] for line in mine] == \
        [line.rsplit(" ", 1)[0] for line in reference]
    for a, b in zip(mine, reference, strict=True):  # the sums may differ in the last bit
        if not a.startswith("#"):
            x, y = float(a.rsplit(" ", 1)[1]), float(b.rsplit(" ", 1)[1])
            assert abs(x - y) <= 1e-9 * max(1.0, abs(y))


def test_a_scrape_on_another_thread_sees_whole_counts():
    """The serving loop adds while a scraper reads: no scrape fails (a dict changing size
    under an iteration would), every scrape sees a count no greater than the final one, and
    the final scrape sees every event."""
    registry = CollectorRegistry()
    tally = CounterTally("t_total", "T.", ["n"], registry)
    histogram = HistogramTally("t_seconds", "T.", ["n"], BUCKETS, registry)
    events = 20000
    done = threading.Event()
    seen: list[float] = []
    failures: list[BaseException] = []

    def scrape() -> None:
        while not done.is_set():
            try:
                generate_latest(registry)
                seen.append(sum(tally.counts.values()))
            except BaseException as exc:  # noqa: BLE001 - reported below
                failures.append(exc)
                return

    scraper = threading.Thread(target=scrape)
    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)  # the threads take turns as often as they can
    scraper.start()
    try:
        for i in range(events):
            labels = (str(i % 10000),)  # new series keep arriving while it scrapes
            tally.inc(labels)
            histogram.observe(labels, i / events)
    finally:
        done.set()
        scraper.join()
        sys.setswitchinterval(interval)
    assert not failures
    assert seen and all(n <= events for n in seen)
    assert sum(tally.counts.values()) == events
    assert registry.get_sample_value("t_seconds_count", {"n": "7"}) == events / 10000
