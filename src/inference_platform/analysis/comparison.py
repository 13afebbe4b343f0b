"""Comparing a model's versions: the primary against each canary and shadow, from Istio's metrics.

Every model pod's sidecar reports the requests it receives (`reporter="destination"`), labelled
with the pod's `app` and `version` labels as `destination_app` and `destination_version`, and its
namespace as `destination_workload_namespace`. Mirrored requests are reported by the shadow's own
sidecar, so a shadow has the same series as a live version.

LLM engines (vLLM, SGLang; a custom server that names its histograms) also report what a user of a
chat or completion endpoint feels: time to first token and each request's time per output token,
as histograms in seconds. Prometheus' pods job scrapes them from every model pod with the pod's
namespace and its `app` and `version` labels (platform/prometheus.py), beside the engine's own
(vLLM's `model_name` and `engine`, SGLang's `model_name`, `engine_type` and `is_streaming`), so
they are split by (namespace, app, version) and summed over the rest: over a version's pods and
each pod's engines.

The PromQL here is written once and used three ways: the recording rules (a fixed 5-minute
window, every model), the per-model alerting rules and `infra analyze` (the model's own window).

A model whose rollout is in progress (`models[].rollout`, its status written by `infra rollout`)
also has the rollout as series, recorded in its own rule group from what the stack declares: the
candidate's live weight (its mirror percent in the shadow phase) and its step, labelled to join the
series above; and an alert when the rollout has held for too little data for three intervals.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from inference_platform.analysis import agreement
from inference_platform.analysis.promql import duration, one_of
from inference_platform.config.base import duration_nanoseconds
from inference_platform.serving.analysis_spec import AnalysisSpec
from inference_platform.serving.model_spec import ModelSpecBase

REQUESTS = "istio_requests_total"
DURATION_BUCKETS = "istio_request_duration_milliseconds_bucket"
BY = ("destination_workload_namespace", "destination_app", "destination_version")
MODEL = BY[:2]
RECORDING_WINDOW = "5m"
QUANTILES = {"p50": 0.5, "p95": 0.95, "p99": 0.99}
Role = Literal["canary", "shadow"]
ENGINE_BY = ("namespace", "app", "version")
"""How an engine's own series are split: the labels Prometheus' pods job puts on what it scrapes."""
ENGINE_MODEL = ENGINE_BY[:2]
TOKEN_QUANTILES = {"p50": 0.5, "p95": 0.95}
ROLLOUT_WEIGHT = "inference:rollout_candidate_weight:declared"
"""A rollout's candidate: its live weight as the stack declares it (in the shadow phase, its mirror percent)."""
ROLLOUT_STEP = "inference:rollout_step:declared"
"""A rollout's step as the stack declares it: 1 for steps[0], 0 in the shadow phase."""
ROLLOUT_STARVED = "InferenceRolloutStarvedOfData"
STARVED_INTERVALS = 3
"""How many of its intervals a rollout holds for too little data before ROLLOUT_STARVED fires."""


@dataclass(frozen=True)
class TokenSignal:
    """An LLM engine's latency histogram, judged as request latency is: its p95 against the primary's."""

    key: str
    """Its name in the recording rules (`inference:<key>_seconds:p95_5m`)."""
    title: str
    alert: str
    report_key: str
    """Its figures' key in `infra analyze`'s JSON."""

    def allowed_increase(self, spec: AnalysisSpec) -> float:
        """The model's bound on its rise over the primary's p95, in percent of it."""
        if self == TTFT:
            return spec.max_time_to_first_token_increase_percent
        return spec.max_time_per_output_token_increase_percent


TTFT = TokenSignal(
    "time_to_first_token",
    "time to first token",
    "InferenceVersionTimeToFirstTokenAbovePrimary",
    "timeToFirstToken",
)
TPOT = TokenSignal(
    "time_per_output_token",
    "time per output token",
    "InferenceVersionTimePerOutputTokenAbovePrimary",
    "timePerOutputToken",
)


@dataclass(frozen=True)
class DeclaredRollout:
    """A model's rollout in progress (its status written, not finished), as the stack file declares it."""

    candidate: str
    primary: str
    """The version the rollout started from (rollout.status.primary): the candidate is judged against it."""
    phase: str
    """shadow or canary."""
    step: int
    percent: float
    """The candidate's live weight; in the shadow phase, its mirror percent."""
    interval: str
    """The least time at this step: the rollout's interval, or shadowFirst's duration in the shadow phase."""

    @property
    def series_labels(self) -> dict[str, str]:
        """What the rollout's series carry beside the model's labels: they join the comparison's series."""
        return {BY[2]: self.candidate, "phase": self.phase}

    @property
    def held_for(self) -> str:
        """How long the rollout holds for too little data before ROLLOUT_STARVED fires (Prometheus' `for:`)."""
        return duration(duration_nanoseconds(self.interval) * STARVED_INTERVALS)


def declared_rollout(model: ModelSpecBase) -> DeclaredRollout | None:
    """None where the model has no rollout, or one not started yet (no status) or finished."""
    rollout = model.rollout
    status = None if rollout is None else rollout.status
    if rollout is None or status is None or status.finished:
        return None
    candidate = next(v for v in model.versions if v.name == rollout.candidate)  # the config checked it is one
    shadow = status.phase == "shadow"
    return DeclaredRollout(
        rollout.candidate,
        status.primary,
        status.phase,
        status.step,
        (candidate.mirror_percent if shadow else candidate.weight) or 0,
        rollout.shadow_duration if shadow else rollout.interval,
    )


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
    ttft: str | None = None
    """The engine's histogram of time to first token (None for a server without one)."""
    tpot: str | None = None
    """The engine's histogram of time per output token (None for a server without one)."""
    rollout: DeclaredRollout | None = None
    """The model's rollout in progress, where it has one (its series, alert and dashboard panel)."""

    @property
    def token_histograms(self) -> list[tuple[TokenSignal, str]]:
        """The token-latency signals the model's engine reports, each with its histogram."""
        return [(signal, name) for signal, name in ((TTFT, self.ttft), (TPOT, self.tpot)) if name is not None]


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
        ttft=model.ttft_histogram,
        tpot=model.tpot_histogram,
        rollout=declared_rollout(model),
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


def engine_series(
    histograms: Iterable[str],
    suffix: str,
    *,
    namespace: str | None = None,
    model: str | None = None,
    version: str | None = None,
    regex: Mapping[str, str] | None = None,
) -> str:
    """The `_bucket` (or `_count`) series of these histograms, for a model's version as the pods job
    labels it; several histograms (engines) are matched by name."""
    names = sorted({f"{name}{suffix}" for name in histograms})
    matchers = [f'__name__=~"{one_of(names)}"'] if len(names) > 1 else []
    exact = (("namespace", namespace), ("app", model), ("version", version))
    matchers += [f'{label}="{value}"' for label, value in exact if value is not None]
    matchers += [f'{label}=~"{value}"' for label, value in (regex or {}).items()]
    head = names[0] if len(names) == 1 else ""
    return f"{head}{{{','.join(matchers)}}}" if matchers else head


def engine_fleet(models: Iterable[tuple[str, str]]) -> dict[str, str]:
    """Regex matchers for every version of these (namespace, model) pairs in the engines' series, for
    one query over a whole fleet split by ENGINE_BY (see fleet_selector)."""
    namespaces, names = zip(*models, strict=True)
    return {"namespace": one_of(namespaces), "app": one_of(names)}


def token_quantile(quantile: float, window: str, series: str) -> str:
    """A quantile, in seconds, of an engine histogram's buckets (`engine_series(..., "_bucket", ...)`)
    per version, over its pods and their engines."""
    return f"histogram_quantile({quantile}, sum by (le, {_by(ENGINE_BY)}) (rate({series}[{window}])))"


def observations_in(window: str, series: str) -> str:
    """How many requests an engine histogram (its `_count` series) observed in the window, per version."""
    return f"sum by ({_by(ENGINE_BY)}) (increase({series}[{window}]))"


def token_recording_rules(histograms: Mapping[TokenSignal, Sequence[str]]) -> dict[str, Any]:
    """p50 and p95 of each signal per version over 5 minutes, from every engine's histogram of it."""
    window = RECORDING_WINDOW
    return {
        "name": "inference-token-latency",
        "rules": [
            {
                "record": f"inference:{signal.key}_seconds:{name}_{window}",
                "expr": token_quantile(q, window, engine_series(names, "_bucket")),
            }
            for signal, names in histograms.items()
            for name, q in TOKEN_QUANTILES.items()
        ],
    }


def recording_rules(
    payloads: bool = False, token_histograms: Mapping[TokenSignal, Sequence[str]] | None = None
) -> dict[str, Any]:
    """Per version over 5 minutes; with `payloads` (some model compares answers), per shadow too;
    with `token_histograms` (the stack's LLM engines' histograms), their time to first token and
    time per output token."""
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
    if token_histograms:
        groups.append(token_recording_rules(token_histograms))
    return {"groups": [*groups, agreement.recording_rules()] if payloads else groups}


def stack_token_histograms(models: Iterable[ModelSpecBase]) -> dict[TokenSignal, list[str]]:
    """Every histogram of each signal the stack's models' engines report: what the recording rules read."""
    found: dict[TokenSignal, set[str]] = {TTFT: set(), TPOT: set()}
    for model in models:
        for signal, name in ((TTFT, model.ttft_histogram), (TPOT, model.tpot_histogram)):
            if name is not None:
                found[signal].add(name)
    return {signal: sorted(names) for signal, names in found.items() if names}


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
        rules += [
            _token_alert(compared, spec, stack, candidate, token)
            for candidate in compared.candidates
            for token in compared.token_histograms
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
        rules += rollout_rules(compared, spec, stack)
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
    stop, action = _stop_action(stack, model, primary_version, version, role)
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


def _stop_action(stack: str, model: str, primary: str, version: str, role: Role) -> tuple[str, str]:
    """The command that stops a candidate, and the alert's action naming it."""
    promote = _promote(stack, model)
    stop = f"{promote} --mirror {version}=0" if role == "shadow" else f"{promote} --weights {primary}=100,{version}=0"
    return stop, f"Stop it: {stop}; then `python -m infra analyze --stack {stack} --model {model}`."


def _token_alert(
    compared: Comparison,
    spec: AnalysisSpec,
    stack: str,
    candidate_role: tuple[str, Role],
    token: tuple[TokenSignal, str],
) -> dict[str, Any]:
    """The candidate's p95 of an engine's token latency (`token`: the signal and its histogram)
    against the primary's, both with at least minRequests observations of it in the window."""
    (version, role), (signal, histogram) = candidate_role, token
    window, namespace, model, primary_version = spec.window, compared.namespace, compared.model, compared.primary

    def series(suffix: str, side: str) -> str:
        return engine_series([histogram], suffix, namespace=namespace, model=model, version=side)

    p95 = TOKEN_QUANTILES["p95"]
    candidate, primary = (token_quantile(p95, window, series("_bucket", side)) for side in (version, primary_version))
    allowed = signal.allowed_increase(spec)
    enough = " ".join(
        f"and on({_by(ENGINE_MODEL)}) ({observations_in(window, series('_count', side))} >= {spec.min_requests})"
        for side in (version, primary_version)
    )
    _, action = _stop_action(stack, model, primary_version, version, role)
    return {
        "alert": signal.alert,
        "expr": f"(({candidate}) > on({_by(ENGINE_MODEL)}) ({primary} * {1 + allowed / 100:g})) {enough}",
        "for": "5m",
        "labels": {"model": model, "version": version, "role": role, "namespace": namespace, "severity": "warning"},
        "annotations": {
            "summary": f"{model} {version} ({role}) has a longer {signal.title} than {primary_version}",
            "description": f"Its p95 {signal.title} over {window} is more than {allowed:g} % above the primary's "
            f"({histogram}).",
            "action": action,
        },
    }


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


# --- Rollouts ---------------------------------------------------------------------------------


def declared(record: str, namespace: str, model: str) -> str:
    """A model's rollout series (ROLLOUT_WEIGHT or ROLLOUT_STEP), as its rule group records it."""
    return f'{record}{{{BY[0]}="{namespace}",{BY[1]}="{model}"}}'


def rollout_rules(compared: Comparison, spec: AnalysisSpec, stack: str) -> list[dict[str, Any]]:
    """For a model in rollout: its candidate's declared weight and its step as series (constants,
    rewritten with each step the rollout commits), then ROLLOUT_STARVED, which reads them. Evaluated
    in the model's group, in this order: the alert sees the series of the same evaluation."""
    rollout = compared.rollout
    if rollout is None:
        return []
    labels = {BY[0]: compared.namespace, BY[1]: compared.model} | rollout.series_labels
    return [
        {"record": ROLLOUT_WEIGHT, "expr": f"vector({rollout.percent:g})", "labels": labels},
        {"record": ROLLOUT_STEP, "expr": f"vector({rollout.step})", "labels": labels},
        _starved_alert(compared, rollout, spec, stack),
    ]


def _starved_alert(compared: Comparison, rollout: DeclaredRollout, spec: AnalysisSpec, stack: str) -> dict[str, Any]:
    """The rollout's step series, unless its candidate and its primary both served minRequests in the
    window (`infra rollout` holds on insufficient data otherwise: analysis/verdicts.py `judge`). Where
    the model sleeps at zero replicas, only while one of them served: with neither, the model was
    idle, which `judge` does not count as too little data."""
    window, namespace, model = spec.window, compared.namespace, compared.model
    candidate, primary = (selector(namespace, model, version) for version in (rollout.candidate, rollout.primary))
    enough = _on_model(
        _enough(window, candidate, spec.min_requests), "and", _enough(window, primary, spec.min_requests)
    )
    expr = _on_model(declared(ROLLOUT_STEP, namespace, model), "unless", enough)
    if compared.sleeps:
        both = selector(namespace, model, destination_version=one_of([rollout.candidate, rollout.primary]))
        expr = _on_model(expr, "and", f"sum by ({_by(MODEL)}) (increase({REQUESTS}{both}[{window}])) > 0")
    role = "shadow" if rollout.phase == "shadow" else "canary"
    where = (
        f"in the shadow phase ({rollout.percent:g} % mirrored)"
        if rollout.phase == "shadow"
        else f"at step {rollout.step} ({rollout.percent:g} %)"
    )
    return {
        "alert": ROLLOUT_STARVED,
        "expr": expr,
        "for": rollout.held_for,
        "labels": {"model": model, "version": rollout.candidate, "role": role, "namespace": namespace}
        | {"severity": "warning"},
        "annotations": {
            "summary": f"{model}'s rollout of {rollout.candidate} has held for too little data for "
            f"{STARVED_INTERVALS} of its intervals ({rollout.held_for})",
            "description": f"{rollout.candidate} or the primary {rollout.primary} served fewer than "
            f"analysis.minRequests ({spec.min_requests} requests) over analysis.window ({window}): "
            f"`python -m infra rollout` holds {model} {where} until both do.",
            "action": f"Send {model} traffic, or lower its analysis.minRequests (or lengthen analysis.window); "
            f"see the figures with `python -m infra analyze --stack {stack} --model {model}`. To stop the rollout, "
            "see docs/rollouts.md.",
        },
    }
