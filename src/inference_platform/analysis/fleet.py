"""A fleet's figures in a handful of queries: each statistic is one query for every model
sharing a window, filtered to those models and split by namespace, model and version (five:
requests, error ratio, three latency quantiles; two more, pairs and agreement, where some of them
compare payloads), whatever the size of the fleet."""

from __future__ import annotations

from inference_platform.analysis import agreement, comparison
from inference_platform.analysis.comparison import Comparison
from inference_platform.analysis.prometheus_client import Prometheus, Series
from inference_platform.analysis.verdicts import Agreement, Stats


def _series_of(compared: Comparison) -> list[Series]:
    """The primary's and every candidate's."""
    versions = [compared.primary, *(version for version, _ in compared.candidates)]
    return [(compared.namespace, compared.model, version) for version in versions]


def fleet_stats(prometheus: Prometheus, fleet: list[Comparison], window: str) -> dict[Series, Stats]:
    """Every version's figures over one window: one query per statistic for all of them."""
    match = comparison.fleet_selector((c.namespace, c.model) for c in fleet)
    counts = prometheus.by_series(comparison.requests_in(window, match), comparison.BY)
    errors = prometheus.by_series(comparison.error_ratio(window, match), comparison.BY)
    quantiles = {
        name: prometheus.by_series(comparison.latency_quantile(q, window, match), comparison.BY)
        for name, q in comparison.QUANTILES.items()
    }
    return {
        series: Stats(
            requests=round(counts.get(series, 0.0), 3),
            error_ratio=round(errors.get(series, 0.0), 6),
            p50_ms=_rounded(quantiles["p50"].get(series)),
            p95_ms=_rounded(quantiles["p95"].get(series)),
            p99_ms=_rounded(quantiles["p99"].get(series)),
        )
        for compared in fleet
        for series in _series_of(compared)
    }


def _rounded(value: float | None) -> float | None:
    return None if value is None else round(value, 3)


def fleet_agreements(prometheus: Prometheus, fleet: list[Comparison], window: str) -> dict[Series, Agreement]:
    """Each shadow's pairs and agreement over one window, one query each for all of them: 0 and
    None, without asking Prometheus, where the model does not compare payloads."""
    comparing = [(c.namespace, c.model) for c in fleet if c.payloads]
    pairs: dict[Series, float] = {}
    ratios: dict[Series, float] = {}
    if comparing:
        shadows = agreement.fleet(comparing)
        pairs = prometheus.by_series(agreement.pairs(window, regex=shadows), agreement.BY)
        ratios = prometheus.by_series(agreement.agreement(window, regex=shadows), agreement.BY)
    return {
        series: Agreement(round(pairs.get(series, 0.0), 3), _rounded(ratios.get(series)))
        for compared in fleet
        for version, role in compared.candidates
        if role == "shadow"
        for series in [(compared.namespace, compared.model, version)]
    }
