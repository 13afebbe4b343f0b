"""A fleet's figures in a handful of queries: each statistic is one query for every model
sharing a window, filtered to those models and split by namespace, model and version (five:
requests, error ratio, three latency quantiles; two more, pairs and agreement, where some of them
compare payloads; three more per token-latency signal, requests observed, p50 and p95, where some
of them run an LLM engine that reports it), whatever the size of the fleet."""

from __future__ import annotations

from collections.abc import Callable

from inference_platform.analysis import agreement, comparison
from inference_platform.analysis.comparison import Comparison
from inference_platform.analysis.prometheus_client import Prometheus, Series
from inference_platform.analysis.verdicts import Agreement, Stats, TokenStats


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
    tokens = fleet_tokens(prometheus, fleet, window)
    return {
        series: Stats(
            requests=round(counts.get(series, 0.0)),
            error_ratio=round(errors.get(series, 0.0), 6),
            p50_ms=_rounded(quantiles["p50"].get(series)),
            p95_ms=_rounded(quantiles["p95"].get(series)),
            p99_ms=_rounded(quantiles["p99"].get(series)),
            tokens={signal: tokens[signal](series) for signal, _ in compared.token_histograms if signal in tokens},
        )
        for compared in fleet
        for series in _series_of(compared)
    }


def fleet_tokens(
    prometheus: Prometheus, fleet: list[Comparison], window: str
) -> dict[comparison.TokenSignal, Callable[[Series], TokenStats]]:
    """Each token-latency signal some model of the fleet reports: requests observed, p50 and p95 (in
    ms) of every version of those models, one query each over all their engines' histograms; no
    query for a signal no model reports."""
    found = {}
    for signal in (comparison.TTFT, comparison.TPOT):
        reporting = [(c, name) for c in fleet for s, name in c.token_histograms if s == signal]
        if not reporting:
            continue
        names = [name for _, name in reporting]
        regex = comparison.engine_fleet((c.namespace, c.model) for c, _ in reporting)
        count = comparison.engine_series(names, "_count", regex=regex)
        observed = prometheus.by_series(comparison.observations_in(window, count), comparison.ENGINE_BY)
        buckets = comparison.engine_series(names, "_bucket", regex=regex)
        p50, p95 = (
            prometheus.by_series(comparison.token_quantile(q, window, buckets), comparison.ENGINE_BY)
            for q in comparison.TOKEN_QUANTILES.values()
        )
        found[signal] = _token_stats(observed, p50, p95)
    return found


def _token_stats(
    observed: dict[Series, float], p50: dict[Series, float], p95: dict[Series, float]
) -> Callable[[Series], TokenStats]:
    def of(series: Series) -> TokenStats:
        return TokenStats(round(observed.get(series, 0.0)), _ms(p50.get(series)), _ms(p95.get(series)))

    return of


def _ms(seconds: float | None) -> float | None:
    return None if seconds is None else round(seconds * 1000, 3)


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
        series: Agreement(round(pairs.get(series, 0.0)), _rounded(ratios.get(series)))
        for compared in fleet
        for version, role in compared.candidates
        if role == "shadow"
        for series in [(compared.namespace, compared.model, version)]
    }
