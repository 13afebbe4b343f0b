"""Comparing a model's versions: the primary against each canary and shadow, from Istio's metrics.

Every model pod's sidecar reports the requests it receives (`reporter="destination"`), labelled
with the pod's `app` and `version` labels as `destination_app` and `destination_version`, and its
namespace as `destination_workload_namespace`. Mirrored requests are reported by the shadow's own
sidecar, so a shadow has the same series as a live version.

The PromQL here is written once and used three ways: the recording rules (a fixed 5-minute
window, every model), the per-model alerting rules and `infra analyze` (the model's own window).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from inference_platform.analysis import agreement
from inference_platform.analysis.promql import one_of
from inference_platform.serving.analysis_spec import AnalysisSpec
from inference_platform.serving.model_spec import ModelSpecBase

REQUESTS = "istio_requests_total"
DURATION_BUCKETS = "istio_request_duration_milliseconds_bucket"
BY = ("destination_workload_namespace", "destination_app", "destination_version")
MODEL = BY[:2]
RECORDING_WINDOW = "5m"
QUANTILES = {"p50": 0.5, "p95": 0.95, "p99": 0.99}
Role = Literal["canary", "shadow"]


@dataclass(frozen=True)
class Comparison:
    """A model's primary and the versions judged against it."""

    model: str
    namespace: str
    primary: str
    candidates: tuple[tuple[str, Role], ...]
    live: tuple[str, ...]
    """Versions with a weight above 0: each should see traffic while the model does."""
    sleeps: bool = False
    """The model's versions sleep at zero replicas while idle: one with no pods is asleep, not broken."""
    payloads: bool = False
    """The payload comparator pairs the shadows' answers with the primary's."""


def comparison(model: ModelSpecBase, namespace: str) -> Comparison | None:
    """The primary is the live version with the highest weight (the first listed on a tie); other
    live versions with weight are canaries, mirrored ones shadows. None for a single version."""
    live = [v for v in model.versions if v.is_live]
    if len(model.versions) < 2 or not live:
        return None
    primary = model.primary
    candidates: list[tuple[str, Role]] = []
    for version in model.versions:
        if version is primary:
            continue
        if version.weight:
            candidates.append((version.name, "canary"))
        elif version.mirror_percent:
            candidates.append((version.name, "shadow"))
    weighted = tuple(v.name for v in live if v.weight)
    return Comparison(
        model.name,
        namespace,
        primary.name,
        tuple(candidates),
        weighted,
        sleeps=model.autoscaling.scales_to_zero,
        payloads=model.analysis.payloads.enabled,
    )


# --- Queries ----------------------------------------------------------------------------------


def selector(namespace: str | None = None, model: str | None = None, version: str | None = None, **extra: str) -> str:
    matchers = {"reporter": "destination"}
    for label, value in (("destination_workload_namespace", namespace), ("destination_app", model)):
        if value is not None:
            matchers[label] = value
    if version is not None:
        matchers["destination_version"] = version
    parts = [f'{k}="{v}"' for k, v in matchers.items()] + [f'{k}=~"{v}"' for k, v in extra.items()]
    return "{" + ",".join(parts) + "}"


def fleet_selector(models: Iterable[tuple[str, str]]) -> str:
    """Every version of these (namespace, model) pairs, for one query over a whole fleet whose
    result is split by BY. With models in several namespaces it also matches a model's namesake
    in another of them: series nobody reads."""
    namespaces, names = zip(*models, strict=True)
    return selector(destination_workload_namespace=one_of(namespaces), destination_app=one_of(names))


def _by(labels: Sequence[str]) -> str:
    return ", ".join(labels)


def request_rate(window: str, match: str = selector()) -> str:
    return f"sum by ({_by(BY)}) (rate({REQUESTS}{match}[{window}]))"


def requests_in(window: str, match: str = selector()) -> str:
    return f"sum by ({_by(BY)}) (increase({REQUESTS}{match}[{window}]))"


def error_ratio(window: str, match: str = selector()) -> str:
    """5xx responses over all; 0, not nothing, for a version without a single 5xx series."""
    errors = match[:-1] + ',response_code=~"5.."}'
    everything = request_rate(window, match)
    return f"({request_rate(window, errors)} or {everything} * 0) / {everything}"


def latency_quantile(quantile: float, window: str, match: str = selector()) -> str:
    return f"histogram_quantile({quantile}, sum by (le, {_by(BY)}) (rate({DURATION_BUCKETS}{match}[{window}])))"


def recording_rules(payloads: bool = False) -> dict[str, Any]:
    """Per version over 5 minutes; with `payloads` (some model compares answers), per shadow too."""
    window = RECORDING_WINDOW
    rules = [
        {"record": f"inference:requests:rate{window}", "expr": request_rate(window)},
        {"record": f"inference:errors:ratio{window}", "expr": error_ratio(window)},
    ]
    rules += [
        {"record": f"inference:latency_ms:{name}_{window}", "expr": latency_quantile(q, window)}
        for name, q in QUANTILES.items()
    ]
    groups = [{"name": "inference-versions", "rules": rules}]
    return {"groups": [*groups, agreement.recording_rules()] if payloads else groups}


# --- Alerts -----------------------------------------------------------------------------------


def _on_model(left: str, operator: str, right: str) -> str:
    return f"({left}) {operator} on({_by(MODEL)}) ({right})"


def _enough(window: str, match: str, minimum: int) -> str:
    return f"{requests_in(window, match)} >= {minimum}"


def alert_rules(models: Sequence[tuple[Comparison, AnalysisSpec]], stack: str) -> dict[str, Any]:
    """One group per model with more than one version."""
    groups = []
    for compared, spec in models:
        rules = [
            rule
            for version, role in compared.candidates
            for rule in _candidate_alerts(compared, spec, stack, version, role)
        ]
        rules += [_no_traffic_alert(compared, spec, stack, version) for version in compared.live]
        if spec.payloads.enabled:
            rules += [
                rule
                for version, role in compared.candidates
                if role == "shadow"
                for rule in agreement.alerts(
                    namespace=compared.namespace,
                    model=compared.model,
                    primary=compared.primary,
                    shadow=version,
                    window=spec.window,
                    spec=spec.payloads,
                    stop=f"{_promote(stack, compared.model)} --mirror {version}=0",
                )
            ]
        groups.append({"name": f"inference-{compared.namespace}-{compared.model}", "rules": rules})
    return {"groups": groups}


def _promote(stack: str, model: str) -> str:
    return f"python -m infra promote --stack {stack} --model {model}"


def _candidate_alerts(
    compared: Comparison, spec: AnalysisSpec, stack: str, version: str, role: Role
) -> list[dict[str, Any]]:
    """Errors and p95 latency against the primary's (both with enough requests), and for a
    shadow, a mirror that delivers nothing."""
    window, namespace, model, primary_version = spec.window, compared.namespace, compared.model, compared.primary
    primary, candidate = selector(namespace, model, primary_version), selector(namespace, model, version)
    promote = _promote(stack, model)
    stop = (
        f"{promote} --mirror {version}=0"
        if role == "shadow"
        else f"{promote} --weights {primary_version}=100,{version}=0"
    )
    action = f"Stop it: {stop}; then `python -m infra analyze --stack {stack} --model {model}`."
    labels = {"model": model, "version": version, "role": role, "namespace": namespace}
    enough = " ".join(
        f"and on({_by(MODEL)}) ({requests_in(window, match)} >= {spec.min_requests})" for match in (candidate, primary)
    )
    errors = _on_model(error_ratio(window, candidate), "-", error_ratio(window, primary))
    p95 = QUANTILES["p95"]
    slower = f"{latency_quantile(p95, window, primary)} * {1 + spec.max_latency_increase_percent / 100:g}"
    alerts = [
        {
            "alert": "InferenceVersionErrorRatioAbovePrimary",
            "expr": f"({errors} > {spec.max_error_ratio_increase:g}) {enough}",
            "for": "5m",
            "labels": labels | {"severity": "critical"},
            "annotations": {
                "summary": f"{model} {version} ({role}) fails more often than {primary_version}",
                "description": f"Its 5xx ratio over {window} is more than {spec.max_error_ratio_increase:g} above "
                "the primary's.",
                "action": action,
            },
        },
        {
            "alert": "InferenceVersionSlowerThanPrimary",
            "expr": f"{_on_model(latency_quantile(p95, window, candidate), '>', slower)} {enough}",
            "for": "5m",
            "labels": labels | {"severity": "warning"},
            "annotations": {
                "summary": f"{model} {version} ({role}) is slower than {primary_version}",
                "description": f"Its p95 latency over {window} is more than "
                f"{spec.max_latency_increase_percent:g} % above the primary's.",
                "action": action,
            },
        },
    ]
    if role == "shadow":
        serving = f"sum by ({_by(MODEL)}) (rate({REQUESTS}{primary}[{window}])) > 0"
        alerts.append(
            {
                "alert": "InferenceShadowGetsNoMirror",
                "expr": _on_model(serving, "unless", f"{request_rate(window, candidate)} > 0"),
                "for": "10m",
                "labels": labels | {"severity": "warning"},
                "annotations": {
                    "summary": f"{model} {version} (shadow) gets no mirrored traffic while {primary_version} serves",
                    "description": "The mirror is broken: check the VirtualService's mirrors and the shadow's pods.",
                    "action": f"Fix the mirror, or stop the shadow: {stop}",
                },
            }
        )
    return alerts


def _no_traffic_alert(compared: Comparison, spec: AnalysisSpec, stack: str, version: str) -> dict[str, Any]:
    """A version with weight that gets nothing while its model serves."""
    window, namespace, model = spec.window, compared.namespace, compared.model
    model_traffic = f"sum by ({_by(MODEL)}) (rate({REQUESTS}{selector(namespace, model)}[{window}])) > 0"
    role = "primary" if version == compared.primary else "canary"
    return {
        "alert": "InferenceVersionGetsNoTraffic",
        "expr": _on_model(model_traffic, "unless", f"{request_rate(window, selector(namespace, model, version))} > 0"),
        "for": "10m",
        "labels": {"model": model, "version": version, "role": role, "namespace": namespace, "severity": "warning"},
        "annotations": {
            "summary": f"{model} {version} has weight but gets no traffic while {model} serves",
            "description": "Its pods may not be ready, or its subset may select nothing.",
            "action": f"Check its pods, or move its weight: {_promote(stack, model)} --weights <version>=<weight>,...",
        },
    }
