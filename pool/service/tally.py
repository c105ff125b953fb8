"""Counters and histograms kept as plain numbers, for the series every request adds to.

A prometheus_client ``Counter.inc`` on a kept label child checks the metric and takes a lock
(about 4 600 instructions); a ``Histogram.observe``, twice that. The serving process counted
three of those per proxied answer. A tally adds to a dict entry instead (a few hundred), and
turns its numbers into a metric family when the registry is scraped, as
``toolcodec.worker.metrics`` does for the jobs.

A tally is written by one thread, the serving loop; a scrape on another thread reads a copy
(``dict`` copies in one step under the interpreter lock), so a count is never lost and never
torn. Series are exported as prometheus_client exports them, without the ``_created``
samples, which no rule or panel reads.
"""

from __future__ import annotations

from collections.abc import Iterable

from prometheus_client import CollectorRegistry
from prometheus_client.core import CounterMetricFamily, HistogramMetricFamily, Metric
from prometheus_client.utils import floatToGoString
from toolcodec.worker.metrics import histogram_family, observe_cells


class CounterTally:
    """A counter's series: ``counts[label values] += 1`` on the hot path (label values a
    tuple of strings, in ``labelnames`` order), a ``counter`` family on collect."""

    def __init__(self, name: str, documentation: str, labelnames: Iterable[str],
                 registry: CollectorRegistry) -> None:
        self.name = name.removesuffix("_total")
        self.documentation = documentation
        self._labelnames = tuple(labelnames)  # read by toolcodec.pool.metric_catalog
        self.counts: dict[tuple[str, ...], float] = {}
        registry.register(self)

    def inc(self, labels: tuple[str, ...], amount: float = 1.0) -> None:
        self.counts[labels] = self.counts.get(labels, 0) + amount

    def prime(self, labels: tuple[str, ...]) -> None:
        """Have the series exist at 0 (a counter that first appears at its first event
        hides that event from ``increase()``)."""
        self.counts.setdefault(labels, 0)

    def value(self, labels: tuple[str, ...]) -> float:
        return self.counts.get(labels, 0)

    def describe(self) -> list[Metric]:
        return [CounterMetricFamily(self.name, self.documentation, labels=self._labelnames)]

    def collect(self) -> list[Metric]:
        family = CounterMetricFamily(self.name, self.documentation, labels=self._labelnames)
        for labels, n in dict(self.counts).items():
            family.add_metric(labels, n)
        return [family]


class HistogramTally:
    """A histogram's series: per label values, one cell per bucket (``le``) and a sum,
    added to by :meth:`observe`; a ``histogram`` family on collect."""

    def __init__(self, name: str, documentation: str, labelnames: Iterable[str],
                 buckets: tuple[float, ...], registry: CollectorRegistry) -> None:
        self.name, self.documentation = name, documentation
        self._labelnames = tuple(labelnames)
        self.buckets = tuple(sorted(buckets))
        self._le = [floatToGoString(b) for b in self.buckets] + ["+Inf"]
        self.cells: dict[tuple[str, ...], list[float]] = {}  # bucket counts, then the sum
        registry.register(self)

    def observe(self, labels: tuple[str, ...], value: float) -> None:
        observe_cells(self.cells, labels, self.buckets, value)

    def describe(self) -> list[Metric]:
        return [HistogramMetricFamily(self.name, self.documentation, labels=self._labelnames)]

    def collect(self) -> list[Metric]:
        return [histogram_family(self.name, self.documentation, self._labelnames, self._le,
                                 self.cells)]
