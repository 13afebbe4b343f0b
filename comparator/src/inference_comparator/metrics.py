"""The comparator's Prometheus metrics, and nothing else, in a registry of the caller's.

    inference_payload_pairs_total{namespace, model, version, result}    result: agree | disagree
    inference_payload_unpaired_total{namespace, model, version, side}   side: primary | shadow
    inference_payload_max_abs_difference                                 histogram, 1e-9 .. 1e3 by decades
    inference_payload_dropped_total{reason}

`version` is always the shadow's. The histogram observes each compared pair that had numbers
once; a non-finite difference (NaN or an infinity against a different number) lands in the +Inf
bucket and the count but is left out of the sum, which would otherwise stay infinite for good.

A collector of its own rather than prometheus_client's Counter and Histogram: those also expose
`*_created` series (unless turned off process-wide), and the names above are the whole contract.
Counters start at 0 for every series the config implies, so that rates exist before the first event.
"""

from __future__ import annotations

import bisect
import math
import threading
from collections.abc import Iterable, Iterator
from typing import Final

from prometheus_client import CollectorRegistry
from prometheus_client.core import CounterMetricFamily, HistogramMetricFamily, Metric

from inference_comparator.config import Config
from inference_comparator.join import DROP_REASONS, DropReason, Side

PAIRS: Final = "inference_payload_pairs"
UNPAIRED: Final = "inference_payload_unpaired"
MAX_ABS_DIFFERENCE: Final = "inference_payload_max_abs_difference"
DROPPED: Final = "inference_payload_dropped"
BUCKETS: Final[tuple[float, ...]] = tuple(float(f"1e{exponent}") for exponent in range(-9, 4))


class PrometheusSink:
    """A join.MetricsSink that counts into Prometheus metrics registered with `registry`."""

    def __init__(self, registry: CollectorRegistry, config: Config | None = None) -> None:
        self._lock = threading.Lock()  # events come from the event loop, scrapes from the HTTP thread
        self._pairs: dict[tuple[str, str, str, str], int] = {}
        self._unpaired: dict[tuple[str, str, str, str], int] = {}
        self._dropped: dict[str, int] = dict.fromkeys(DROP_REASONS, 0)
        self._buckets = [0] * (len(BUCKETS) + 1)  # per bucket, not cumulative; the last is +Inf
        self._sum = 0.0
        for model in config.models if config else ():
            for version in model.shadows:
                for result in ("agree", "disagree"):
                    self._pairs[(model.namespace, model.model, version, result)] = 0
                for side in ("primary", "shadow"):
                    self._unpaired[(model.namespace, model.model, version, side)] = 0
        registry.register(self)

    def paired(self, namespace: str, model: str, version: str, agree: bool, max_abs_difference: float | None) -> None:
        key = (namespace, model, version, "agree" if agree else "disagree")
        with self._lock:
            self._pairs[key] = self._pairs.get(key, 0) + 1
            if max_abs_difference is not None and not math.isnan(max_abs_difference):
                self._buckets[bisect.bisect_left(BUCKETS, max_abs_difference)] += 1
                if math.isfinite(max_abs_difference):
                    self._sum += max_abs_difference

    def unpaired(self, namespace: str, model: str, version: str, side: Side) -> None:
        key = (namespace, model, version, side)
        with self._lock:
            self._unpaired[key] = self._unpaired.get(key, 0) + 1

    def dropped(self, reason: DropReason) -> None:
        with self._lock:
            self._dropped[reason] = self._dropped.get(reason, 0) + 1

    def collect(self) -> Iterator[Metric]:
        with self._lock:
            pairs, unpaired, dropped = dict(self._pairs), dict(self._unpaired), dict(self._dropped)
            buckets, total = list(self._buckets), self._sum
        yield _counters(
            PAIRS,
            "Shadow exchanges compared with their primary's, by shadow version and result.",
            ["namespace", "model", "version", "result"],
            pairs.items(),
        )
        yield _counters(
            UNPAIRED,
            "Exchanges whose twin did not arrive within the window: side arrived, shadow version's half did not.",
            ["namespace", "model", "version", "side"],
            unpaired.items(),
        )
        cumulative: list[tuple[str, float]] = []
        running = 0
        for bound, count in zip((*BUCKETS, math.inf), buckets, strict=True):
            running += count
            cumulative.append(("+Inf" if math.isinf(bound) else repr(bound), running))  # as Go writes them
        histogram = HistogramMetricFamily(
            MAX_ABS_DIFFERENCE, "Per compared pair with numbers, the largest absolute difference of any two numbers."
        )
        histogram.add_metric([], cumulative, sum_value=total)
        yield histogram
        yield _counters(
            DROPPED, "Exchanges not compared, by reason.", ["reason"], (((r,), v) for r, v in dropped.items())
        )


def _counters(
    name: str, documentation: str, labels: list[str], values: Iterable[tuple[tuple[str, ...], int]]
) -> Metric:
    """One counter family, a sample per label values, in a stable order."""
    family = CounterMetricFamily(name, documentation, labels=labels)
    for label_values, value in sorted(values):
        family.add_metric(list(label_values), value)
    return family
