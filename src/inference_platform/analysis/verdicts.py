"""The verdict on a canary or a shadow, and the report that holds them: the thresholds the
alerting rules apply (analysis/comparison.py, analysis/agreement.py), on the figures
Prometheus gives for the same window."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Literal

from inference_platform.analysis import comparison
from inference_platform.serving.analysis_spec import AnalysisSpec, PayloadComparison

Verdict = Literal["pass", "fail", "insufficient-data", "idle"]


@dataclass(frozen=True)
class TokenStats:
    """One of an LLM engine's token-latency histograms over the window, for one version."""

    requests: int
    """The requests it observed (its `_count`; Prometheus' increase, rounded to a whole request)."""
    p50_ms: float | None
    p95_ms: float | None

    def as_json(self) -> dict[str, Any]:
        return {"requests": self.requests, "p50Ms": self.p50_ms, "p95Ms": self.p95_ms}


@dataclass(frozen=True)
class Stats:
    requests: int
    """Requests served in the window (Prometheus' increase, rounded to a whole request)."""
    error_ratio: float
    p50_ms: float | None
    p95_ms: float | None
    p99_ms: float | None
    tokens: dict[comparison.TokenSignal, TokenStats] = field(default_factory=dict)
    """An LLM engine's time to first token and time per output token, where it reports them."""

    def as_json(self) -> dict[str, Any]:
        return {
            "requests": self.requests,
            "errorRatio": self.error_ratio,
            "p50Ms": self.p50_ms,
            "p95Ms": self.p95_ms,
            "p99Ms": self.p99_ms,
            **{signal.report_key: found.as_json() for signal, found in self.tokens.items()},
        }


@dataclass(frozen=True)
class Agreement:
    """A shadow's answers against the primary's, from the payload comparator."""

    pairs: int
    """Answers paired with the primary's (rounded to a whole pair)."""
    ratio: float | None
    """None without a single pair."""


@dataclass(frozen=True)
class Candidate:
    version: str
    role: comparison.Role
    stats: Stats
    verdict: Verdict
    reasons: list[str]
    agreement: Agreement | None = None
    """For a shadow: its pairs and agreement (0 and None where payloads are not compared)."""

    def as_json(self) -> dict[str, Any]:
        payloads = {}
        if self.agreement is not None:
            payloads = {"pairs": self.agreement.pairs, "agreement": self.agreement.ratio}
        return {
            "version": self.version,
            "role": self.role,
            **self.stats.as_json(),
            **payloads,
            "verdict": self.verdict,
            "reasons": self.reasons,
        }


@dataclass(frozen=True)
class ModelReport:
    model: str
    primary: str
    primary_stats: Stats
    candidates: list[Candidate]

    def as_json(self) -> dict[str, Any]:
        return {
            "model": self.model,
            "primary": self.primary,
            "primaryStats": self.primary_stats.as_json(),
            "candidates": [c.as_json() for c in self.candidates],
        }


@dataclass
class Report:
    stack: str
    window: str
    at: datetime
    models: list[ModelReport] = field(default_factory=list)

    @property
    def verdicts(self) -> list[Verdict]:
        return [c.verdict for m in self.models for c in m.candidates]

    def as_json(self) -> dict[str, Any]:
        return {
            "stack": self.stack,
            "window": self.window,
            "at": self.at.isoformat().replace("+00:00", "Z"),
            "models": [m.as_json() for m in self.models],
        }


def judge_agreement(found: Agreement, spec: PayloadComparison, primary_name: str) -> tuple[Verdict, list[str]]:
    """A shadow's answers against minPairs and minAgreement, as InferencePayloadDisagreement judges them."""
    if found.pairs < spec.min_pairs or found.ratio is None:
        return "insufficient-data", [
            f"{found.pairs} of its answers were paired with {primary_name}'s, fewer than payloads.minPairs "
            f"({spec.min_pairs} pairs)"
        ]
    if found.ratio < spec.min_agreement:
        return "fail", [
            f"agrees with {primary_name} on {found.ratio:.1%} of {found.pairs:,.0f} paired requests, "
            f"below {spec.min_agreement:.0%}"
        ]
    return "pass", []


def combined(first: tuple[Verdict, list[str]], second: tuple[Verdict, list[str]]) -> tuple[Verdict, list[str]]:
    """The worse of two verdicts (fail, then insufficient data), with the reasons of both."""
    worst_first: tuple[Verdict, ...] = ("fail", "insufficient-data", "idle")
    for verdict in worst_first:
        if verdict in (first[0], second[0]):
            return verdict, [*first[1], *second[1]]
    return "pass", []


def judge(
    candidate: Stats, primary: Stats, spec: AnalysisSpec, primary_name: str, sleeps: bool = False
) -> tuple[Verdict, list[str]]:
    """The same thresholds the alerting rules apply, on the same figures: errors, latency and, for an
    LLM engine, its token latency (too few requests observed there is insufficient data, unless
    something else fails it). Where the model sleeps at zero replicas and neither version served a
    request in the window, the model was asleep: idle, not judged (a version that stays asleep
    while its primary serves is judged as any other)."""
    if sleeps and candidate.requests == 0 and primary.requests == 0:
        return "idle", ["the model slept at zero replicas: no request in the window"]
    short = [
        f"{who} served {stats.requests} requests, fewer than minRequests ({spec.min_requests} requests)"
        for who, stats in (("it", candidate), (f"the primary {primary_name}", primary))
        if stats.requests < spec.min_requests
    ]
    if short:
        return "insufficient-data", short
    reasons = []
    increase = candidate.error_ratio - primary.error_ratio
    if increase > spec.max_error_ratio_increase:
        reasons.append(
            f"error ratio {candidate.error_ratio:.2%} is {increase * 100:.2f} percentage points above the "
            f"primary's {primary.error_ratio:.2%} (allowed {_points(spec.max_error_ratio_increase * 100)})"
        )
    slower = _slower("latency", candidate.p95_ms, primary.p95_ms, spec.max_latency_increase_percent)
    reasons += [slower] if slower else []
    token_reasons, token_short = _judge_tokens(candidate, primary, spec, primary_name)
    reasons += token_reasons
    if reasons:
        return "fail", reasons
    return ("insufficient-data", token_short) if token_short else ("pass", [])


def _points(points: float) -> str:
    """A difference of two percentages, in its unit: percentage points, not percent of either."""
    return f"{points:g} percentage {'point' if points == 1 else 'points'}"


def _slower(what: str, candidate: float | None, primary: float | None, allowed: float) -> str | None:
    """Why a candidate's p95 fails against the primary's, in percent of it; None where it does not."""
    if candidate is None or primary is None or candidate <= primary * (1 + allowed / 100):
        return None
    above = (candidate / primary - 1) * 100 if primary else math.inf
    return f"p95 {what} {candidate:g} ms is {above:.1f} % above the primary's {primary:g} ms (allowed {allowed:g} %)"


def _judge_tokens(
    candidate: Stats, primary: Stats, spec: AnalysisSpec, primary_name: str
) -> tuple[list[str], list[str]]:
    """An LLM engine's token latency, as InferenceVersionTimeToFirstTokenAbovePrimary and its
    time-per-output-token twin judge it: the p95s where both sides observed minRequests requests;
    where one did not, why it is too little to judge."""
    reasons, short = [], []
    for signal, found in candidate.tokens.items():
        theirs = primary.tokens.get(signal)
        if theirs is None:
            continue
        few = [
            f"{who} reported the {signal.title} of {stats.requests} requests, fewer than minRequests "
            f"({spec.min_requests} requests)"
            for who, stats in (("it", found), (f"the primary {primary_name}", theirs))
            if stats.requests < spec.min_requests
        ]
        if few:
            short += few
            continue
        slower = _slower(signal.title, found.p95_ms, theirs.p95_ms, signal.allowed_increase(spec))
        reasons += [slower] if slower else []
    return reasons, short


def judge_candidate(
    compared: comparison.Comparison,
    version: str,
    role: comparison.Role,
    *,
    stats: Stats,
    primary: Stats,
    spec: AnalysisSpec,
    found: Agreement | None,
) -> Candidate:
    """One candidate of a compared model: its figures against the primary's and, for a shadow whose
    answers are compared (and that was not asleep), its agreement, the worse verdict winning."""
    verdict, reasons = judge(stats, primary, spec, compared.primary, compared.sleeps)
    if found is not None and spec.payloads.enabled and verdict != "idle":
        verdict, reasons = combined((verdict, reasons), judge_agreement(found, spec.payloads, compared.primary))
    return Candidate(version, role, stats, verdict, reasons, found)
