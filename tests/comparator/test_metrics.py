"""The comparator's Prometheus exposition: exactly its four metrics, with the right labels and values."""

from __future__ import annotations

import math

import pytest
from inference_comparator.join import Joiner
from inference_comparator.metrics import BUCKETS, PrometheusSink
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families
from prometheus_client.samples import Sample

from tests.comparator.test_join import DISAGREEING, MODEL, NS, Clock, config, exchange

FAMILIES = {
    "inference_payload_pairs": "counter",
    "inference_payload_unpaired": "counter",
    "inference_payload_max_abs_difference": "histogram",
    "inference_payload_dropped": "counter",
}


def scrape(registry: CollectorRegistry) -> dict[str, list[Sample]]:
    """The registry's exposition, parsed: samples by family, each family of the type it must be."""
    scraped: dict[str, list[Sample]] = {}
    for family in text_string_to_metric_families(generate_latest(registry).decode()):
        assert FAMILIES.get(family.name) == family.type, (family.name, family.type)
        scraped[family.name] = list(family.samples)
    return scraped


def value(samples: list[Sample], name: str, **labels: str) -> float:
    matching = [s.value for s in samples if s.name == name and s.labels == labels]
    assert len(matching) == 1, (name, labels, samples)
    return matching[0]


def test_joiner_events_show_as_exactly_the_four_metrics() -> None:
    registry, clock = CollectorRegistry(), Clock()
    cfg = config(shadows=("v2", "v3"), window=10)
    joiner = Joiner(cfg, PrometheusSink(registry, cfg), clock)
    joiner.add(exchange("v1", request_id="a"))
    joiner.add(exchange("v2", request_id="a"))  # agrees, difference 0
    joiner.add(exchange("v3", request_id="a", response=DISAGREEING))  # disagrees, difference 0.8
    joiner.add(exchange("v1", request_id="b"))
    joiner.add(exchange("v2", request_id="b", status=500))  # disagrees, no numbers
    joiner.add(exchange("v3", request_id="c"))  # never gets its primary
    joiner.add(exchange("v9", request_id="d"))
    joiner.add(exchange("v1", request_id="e", status=503, response=b""))
    joiner.expire(11)  # b's primary still misses v3; c's v3 misses its primary

    families = scrape(registry)
    assert sorted(families) == sorted(FAMILIES)

    pairs = families["inference_payload_pairs"]
    assert {s.name for s in pairs} == {"inference_payload_pairs_total"}
    labels = {"namespace": NS, "model": MODEL}
    assert value(pairs, "inference_payload_pairs_total", **labels, version="v2", result="agree") == 1
    assert value(pairs, "inference_payload_pairs_total", **labels, version="v2", result="disagree") == 1
    assert value(pairs, "inference_payload_pairs_total", **labels, version="v3", result="disagree") == 1
    assert value(pairs, "inference_payload_pairs_total", **labels, version="v3", result="agree") == 0
    assert len(pairs) == 4  # every shadow version by result, from the config

    unpaired = families["inference_payload_unpaired"]
    assert {s.name for s in unpaired} == {"inference_payload_unpaired_total"}
    assert value(unpaired, "inference_payload_unpaired_total", **labels, version="v3", side="primary") == 1
    assert value(unpaired, "inference_payload_unpaired_total", **labels, version="v3", side="shadow") == 1
    assert value(unpaired, "inference_payload_unpaired_total", **labels, version="v2", side="primary") == 0
    assert value(unpaired, "inference_payload_unpaired_total", **labels, version="v2", side="shadow") == 0
    assert len(unpaired) == 4

    dropped = families["inference_payload_dropped"]
    assert {s.name for s in dropped} == {"inference_payload_dropped_total"}
    assert value(dropped, "inference_payload_dropped_total", reason="unknown_version") == 1
    assert value(dropped, "inference_payload_dropped_total", reason="primary_error") == 1
    assert value(dropped, "inference_payload_dropped_total", reason="memory") == 0
    assert sum(s.value for s in dropped) == 2

    histogram = families["inference_payload_max_abs_difference"]
    buckets = [s for s in histogram if s.name == "inference_payload_max_abs_difference_bucket"]
    assert [s.labels["le"] for s in buckets] == [
        "1e-09", "1e-08", "1e-07", "1e-06", "1e-05", "0.0001", "0.001", "0.01", "0.1", "1.0", "10.0", "100.0",
        "1000.0", "+Inf",
    ]  # fmt: skip
    assert [float(s.labels["le"]) for s in buckets[:-1]] == list(BUCKETS)
    # Observed: 0.0 (a's v2) and 0.8 (a's v3); b's v2 answered 500, so had no numbers.
    assert [s.value for s in buckets] == [1, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 2, 2, 2]
    assert value(histogram, "inference_payload_max_abs_difference_count") == 2
    assert value(histogram, "inference_payload_max_abs_difference_sum") == pytest.approx(0.8)
    assert {s.name for s in histogram} == {
        "inference_payload_max_abs_difference_bucket",
        "inference_payload_max_abs_difference_count",
        "inference_payload_max_abs_difference_sum",
    }
    assert all(s.labels == {} for s in histogram if not s.name.endswith("_bucket"))


def test_bucket_edges_and_non_finite_differences() -> None:
    registry = CollectorRegistry()
    sink = PrometheusSink(registry)
    sink.paired(NS, MODEL, "v2", True, 1e-9)  # on an edge: that bucket (le)
    sink.paired(NS, MODEL, "v2", False, 1000.5)  # past the last edge
    sink.paired(NS, MODEL, "v2", False, math.inf)  # NaN against a number
    histogram = scrape(registry)["inference_payload_max_abs_difference"]
    buckets = [s.value for s in histogram if s.name.endswith("_bucket")]
    assert buckets == [1] * 13 + [3]
    assert value(histogram, "inference_payload_max_abs_difference_count") == 3
    assert value(histogram, "inference_payload_max_abs_difference_sum") == 1e-9 + 1000.5  # the infinity left out


def test_registries_are_independent_and_nothing_else_is_exposed() -> None:
    first, second = CollectorRegistry(), CollectorRegistry()
    one, _ = PrometheusSink(first), PrometheusSink(second)
    one.dropped("memory")
    one.unpaired(NS, MODEL, "v2", "shadow")
    assert value(scrape(first)["inference_payload_dropped"], "inference_payload_dropped_total", reason="memory") == 1
    assert value(scrape(second)["inference_payload_dropped"], "inference_payload_dropped_total", reason="memory") == 0
    assert scrape(second)["inference_payload_unpaired"] == []  # no config: no series until an event
    text = generate_latest(first).decode()
    assert "_created" not in text
    assert {line.split()[2] for line in text.splitlines() if line.startswith("# TYPE")} == {
        "inference_payload_pairs_total",
        "inference_payload_unpaired_total",
        "inference_payload_max_abs_difference",
        "inference_payload_dropped_total",
    }
