"""Every compared model's candidates judged against its primary: the figures asked of Prometheus a
window at a time (analysis/fleet.py), each candidate judged on them (analysis/verdicts.py). What
`infra analyze` reports and what `infra rollout` decides on."""

from __future__ import annotations

from collections.abc import Sequence

from inference_platform.analysis.comparison import Comparison
from inference_platform.analysis.fleet import fleet_agreements, fleet_stats
from inference_platform.analysis.prometheus_client import Prometheus, Series
from inference_platform.analysis.verdicts import Agreement, ModelReport, Stats, judge_candidate
from inference_platform.serving.model_spec import ModelSpecBase


def judge_models(
    prometheus: Prometheus, judged: Sequence[tuple[ModelSpecBase, Comparison]], window: str | None = None
) -> tuple[list[ModelReport], list[str]]:
    """Each compared model's candidates judged against its primary over its window (or `window`),
    the figures asked of Prometheus a window at a time; the reports, and the windows used."""
    by_window: dict[str, list[Comparison]] = {}
    for spec_model, compared in judged:
        by_window.setdefault(window or spec_model.analysis.window, []).append(compared)
    stats: dict[Series, Stats] = {}
    agreements: dict[Series, Agreement] = {}
    for used, fleet in sorted(by_window.items()):
        stats |= fleet_stats(prometheus, fleet, used)
        agreements |= fleet_agreements(prometheus, fleet, used)
    reports = []
    for spec_model, compared in judged:
        spec = spec_model.analysis
        primary = stats[compared.namespace, compared.model, compared.primary]
        candidates = []
        for version, role in compared.candidates:
            series = (compared.namespace, compared.model, version)
            found = agreements.get(series)
            judged_one = judge_candidate(
                compared, version, role, stats=stats[series], primary=primary, spec=spec, found=found
            )
            candidates.append(judged_one)
        reports.append(ModelReport(spec_model.name, compared.primary, primary, candidates))
    return reports, sorted(by_window)
