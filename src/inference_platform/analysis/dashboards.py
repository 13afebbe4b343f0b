"""Grafana dashboards, one per model, built with Grafana's own typed builders (grafana-foundation-sdk).

Side by side for every version, live and shadow: requests per second, error ratio, p50/p95/p99
latency, for an LLM engine p50/p95 time to first token and time per output token, each
candidate's difference from the primary, GPU use of the version's pods and its replica count; for
a model in rollout, the candidate's declared weight and step against its and the primary's traffic.
The queries are comparison.py's, over a fixed 5-minute window, so each panel runs as written in
Prometheus too.
"""

from __future__ import annotations

import json
from typing import Any

from grafana_foundation_sdk.builders.common import VizLegendOptions
from grafana_foundation_sdk.builders.dashboard import Dashboard, Row
from grafana_foundation_sdk.builders.prometheus import Dataquery
from grafana_foundation_sdk.builders.timeseries import Panel
from grafana_foundation_sdk.cog.encoder import JSONEncoder
from grafana_foundation_sdk.models.common import LegendDisplayMode, LegendPlacement
from grafana_foundation_sdk.models.dashboard import DataSourceRef, DynamicConfigValue

from inference_platform.analysis import agreement, comparison
from inference_platform.platform import custom_metrics
from inference_platform.platform.grafana import DATASOURCE_UID

WINDOW = comparison.RECORDING_WINDOW
BY_VERSION = "{{destination_version}}"
# The engines' own series carry the pod's version label as it is (comparison.ENGINE_BY).
ENGINE_VERSION = "{{version}}"
TOKEN_PANELS = {comparison.TTFT: "Time to first token", comparison.TPOT: "Time per output token"}
ROLLOUT_PANEL = "Rollout of {candidate}: declared weight and step against traffic"
# The rollout panel's declared series (its first two queries) on a right axis of their own, drawn as steps.
DECLARED_REFS = ("A", "B")
DECLARED_STYLE = (
    DynamicConfigValue(id_val="custom.axisPlacement", value="right"),
    DynamicConfigValue(id_val="unit", value="none"),
    DynamicConfigValue(id_val="custom.lineInterpolation", value="stepAfter"),
)


def _query(expression: str, legend: str, ref: str = "A") -> Dataquery:
    return Dataquery().expr(expression).legend_format(legend).ref_id(ref)


def _panel(title: str, unit: str, *queries: Dataquery) -> Panel:
    panel = (
        Panel()
        .title(title)
        .unit(unit)
        .datasource(DataSourceRef(type_val="prometheus", uid=DATASOURCE_UID))
        .legend(
            VizLegendOptions().show_legend(True).display_mode(LegendDisplayMode.TABLE).placement(LegendPlacement.BOTTOM)
        )
        .height(8)
        .span(12)
    )
    for query in queries:
        panel = panel.with_target(query)
    return panel


def pod_pattern(model: str, version: str) -> str:
    """A version's pods: its Deployment `<model>-<version>` names them `<model>-<version>-<hash>-<id>`."""
    return f"{model}-{version}-[a-z0-9]+-[a-z0-9]+"


def panel_queries(compared: comparison.Comparison, gpu_source: str | None) -> dict[str, list[tuple[str, str]]]:
    """Each panel's (PromQL, legend) pairs: what the dashboard shows and the tests run."""
    namespace, model = compared.namespace, compared.model
    match = comparison.selector(namespace, model)
    primary = comparison.selector(namespace, model, compared.primary)
    panels: dict[str, list[tuple[str, str]]] = {
        "Requests per second": [(comparison.request_rate(WINDOW, match), BY_VERSION)],
        "Error ratio (5xx)": [(comparison.error_ratio(WINDOW, match), BY_VERSION)],
        "Latency": [
            (comparison.latency_quantile(q, WINDOW, match), f"{BY_VERSION} {name}")
            for name, q in comparison.QUANTILES.items()
        ],
    }
    for signal, histogram in compared.token_histograms:
        series = comparison.engine_series([histogram], "_bucket", namespace=namespace, model=model)
        panels[TOKEN_PANELS[signal]] = [
            (comparison.token_quantile(q, WINDOW, series), f"{ENGINE_VERSION} {name}")
            for name, q in comparison.TOKEN_QUANTILES.items()
        ]
    deltas: list[tuple[str, str]] = []
    for version, role in compared.candidates:
        candidate = comparison.selector(namespace, model, version)
        deltas += [
            (
                f"({comparison.error_ratio(WINDOW, candidate)}) - on(destination_workload_namespace, destination_app) "
                f"({comparison.error_ratio(WINDOW, primary)})",
                f"{version} ({role}) error ratio - {compared.primary}",
            ),
            (
                f"({comparison.latency_quantile(0.95, WINDOW, candidate)}) - on(destination_workload_namespace, "
                f"destination_app) ({comparison.latency_quantile(0.95, WINDOW, primary)})",
                f"{version} ({role}) p95 ms - {compared.primary}",
            ),
        ]
    if deltas:
        panels[f"Candidates minus the primary ({compared.primary})"] = deltas
    versions = [compared.primary, *(v for v, _ in compared.candidates)]
    if gpu_source is not None:
        metric = custom_metrics.HAMI_GPU_UTIL if gpu_source == "hami" else custom_metrics.DCGM_GPU_UTIL
        panels["GPU utilisation per pod"] = [
            (f'avg by (pod) ({metric}{{namespace="{namespace}",pod=~"{pod_pattern(model, v)}"}})', f"{v} {{{{pod}}}}")
            for v in versions
        ]
    if compared.sleeps:
        # One query a version, 0 rather than nothing: a version asleep at zero replicas has no pod.
        panels["Replicas (pods scraped)"] = [
            (f"count({custom_metrics.pods(namespace, {'app': model, 'version': v})} == 1) or vector(0)", v)
            for v in versions
        ]
    else:
        panels["Replicas (pods scraped)"] = [
            (
                f'count by (version) (up{{job="kubernetes-pods",namespace="{namespace}",app="{model}"}} == 1)',
                "{{version}}",
            )
        ]
    shadows = [v for v, role in compared.candidates if role == "shadow"]
    if compared.payloads and shadows:
        panels["Answers agreeing with the primary"] = [
            (agreement.agreement(WINDOW, namespace, model, v), f"{v} agrees with {compared.primary}") for v in shadows
        ]
        panels["Unpaired answers"] = [
            (agreement.unpaired(WINDOW, side, namespace, model, v), f"{v}: {side} without a twin")
            for v in shadows
            for side in ("primary", "shadow")
        ]
    if compared.rollout is not None:
        panels[ROLLOUT_PANEL.format(candidate=compared.rollout.candidate)] = rollout_queries(compared, compared.rollout)
    return panels


def rollout_queries(compared: comparison.Comparison, rollout: comparison.DeclaredRollout) -> list[tuple[str, str]]:
    """The candidate's declared weight (mirror percent in the shadow phase) and step, then its and
    the rollout's primary's requests per second: each step against the traffic it was judged on."""
    namespace, model = compared.namespace, compared.model
    weight = "mirror percent" if rollout.phase == "shadow" else "weight"
    return [
        (
            comparison.declared(comparison.ROLLOUT_WEIGHT, namespace, model),
            f"{BY_VERSION} declared {weight} ({{{{phase}}}})",
        ),
        (comparison.declared(comparison.ROLLOUT_STEP, namespace, model), "step"),
        *(
            (comparison.request_rate(WINDOW, comparison.selector(namespace, model, version)), f"{label} requests/s")
            for version, label in (
                (rollout.candidate, f"{rollout.candidate} (candidate)"),
                (rollout.primary, f"{rollout.primary} (primary)"),
            )
        ),
    ]


def model_dashboard(compared: comparison.Comparison, gpu_source: str | None) -> dict[str, Any]:
    """The model's dashboard as Grafana's JSON model (a dict)."""
    builder = (
        Dashboard(f"Inference: {compared.model}")
        .uid(f"inference-{compared.namespace}-{compared.model}"[:40])
        .tags(["inference-platform", compared.namespace])
        .refresh("30s")
        .time("now-1h", "now")
        .editable()
        .with_row(Row(f"{compared.model}: primary {compared.primary}"))
    )
    rollout = None if compared.rollout is None else ROLLOUT_PANEL.format(candidate=compared.rollout.candidate)
    units = {"Requests per second": "reqps", "Error ratio (5xx)": "percentunit", "Latency": "ms"}
    units |= dict.fromkeys(TOKEN_PANELS.values(), "s") | ({rollout: "reqps"} if rollout else {})
    for title, queries in panel_queries(compared, gpu_source).items():
        unit = units.get(title, "percentunit" if title.startswith("GPU") else "short")
        refs = iter("ABCDEFGHIJKLMNOPQRSTUVWXYZ")
        panel = _panel(title, unit, *(_query(e, legend, next(refs)) for e, legend in queries))
        if title == rollout:
            for ref in DECLARED_REFS:
                panel = panel.override_by_query(ref, list(DECLARED_STYLE))
        builder = builder.with_panel(panel)
    document: dict[str, Any] = json.loads(JSONEncoder(sort_keys=True).encode(builder.build()))
    return document
