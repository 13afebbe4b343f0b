"""`python -m infra analyze`: a verdict on every canary and shadow, from the platform's Prometheus.

Each candidate is compared with its model's primary over the model's window (or `--window`),
ending at `--at`, with the very queries the alerting rules use (analysis/comparison.py), and the
model's own thresholds (`analysis` in the stack config).

Each statistic is one query for every model sharing a window, filtered to those models and split
by namespace, model and version: five (requests, error ratio, three latency quantiles), and two
more (pairs, agreement) where some of them compare payloads, whatever the size of the fleet.
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Literal

import requests
from rich.markup import escape
from rich.table import Table

from inference_platform.analysis import agreement, comparison
from inference_platform.analysis.comparison import Comparison
from inference_platform.cli.exit_codes import ExitCode
from inference_platform.serving.analysis_spec import AnalysisSpec, PayloadComparison
from inference_platform.stack.config import StackConfig

TOKEN_ENV = "PROMETHEUS_TOKEN"
QUERY_TIMEOUT_SECONDS = 30
Verdict = Literal["pass", "fail", "insufficient-data", "idle"]
Series = tuple[str, str, str]
"""A version's series, as a fleet's query splits them: its namespace, model and version."""


class PrometheusError(Exception):
    """Prometheus cannot be reached, or answered something that is not a query result."""


@dataclass(frozen=True)
class Stats:
    requests: float
    error_ratio: float
    p50_ms: float | None
    p95_ms: float | None
    p99_ms: float | None

    def as_json(self) -> dict[str, Any]:
        return {
            "requests": self.requests,
            "errorRatio": self.error_ratio,
            "p50Ms": self.p50_ms,
            "p95Ms": self.p95_ms,
            "p99Ms": self.p99_ms,
        }


@dataclass(frozen=True)
class Agreement:
    """A shadow's answers against the primary's, from the payload comparator."""

    pairs: float
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


def parse_time(text: str | None) -> datetime:
    """RFC 3339 or Unix seconds; now when not given."""
    if text is None:
        return datetime.now(UTC).replace(microsecond=0)
    try:
        return datetime.fromtimestamp(float(text), UTC)
    except ValueError:
        pass
    parsed = datetime.fromisoformat(text.replace("Z", "+00:00"))
    if parsed.tzinfo is None:
        raise ValueError(f"{text} has no time zone (add Z or an offset)")
    return parsed.astimezone(UTC)


class Prometheus:
    """Instant queries through Prometheus' HTTP API, at one time, over one kept-alive connection.

    Queries are POSTed, form-encoded: a fleet's query names every model, too long for some
    proxies' limits on a URL."""

    def __init__(self, url: str, at: datetime) -> None:
        self.url = url.rstrip("/")
        self.at = at
        self.session = requests.Session()
        token = os.environ.get(TOKEN_ENV)
        if token:
            self.session.headers["Authorization"] = f"Bearer {token}"

    def __enter__(self) -> Prometheus:
        return self

    def __exit__(self, *_: object) -> None:
        self.session.close()

    def by_series(self, expression: str, labels: tuple[str, str, str]) -> dict[Series, float]:
        """The query's value per series, keyed by the values of `labels` (NaN and infinities left out)."""
        try:
            response = self.session.post(
                f"{self.url}/api/v1/query",
                data={"query": expression, "time": f"{self.at.timestamp():.3f}"},
                timeout=QUERY_TIMEOUT_SECONDS,
            )
        except requests.RequestException as error:
            raise PrometheusError(f"cannot reach Prometheus at {self.url}: {type(error).__name__}") from None
        try:
            body = response.json()
            if response.status_code != 200 or body.get("status") != "success":
                message = body.get("error") or f"HTTP {response.status_code}"
                raise PrometheusError(f"Prometheus at {self.url} refused a query: {message}")
            values = {}
            for item in body["data"]["result"]:
                value = float(item["value"][1])
                if math.isfinite(value):
                    metric = item["metric"]
                    values[metric.get(labels[0], ""), metric.get(labels[1], ""), metric.get(labels[2], "")] = value
        except (ValueError, KeyError, TypeError, AttributeError, IndexError):
            raise PrometheusError(f"Prometheus at {self.url} answered something that is not a query result") from None
        return values


def _series_of(compared: Comparison) -> list[Series]:
    """The primary's and every candidate's."""
    versions = [compared.primary, *(version for version, _ in compared.candidates)]
    return [(compared.namespace, compared.model, version) for version in versions]


def _fleet_stats(prometheus: Prometheus, fleet: list[Comparison], window: str) -> dict[Series, Stats]:
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


def _fleet_agreements(prometheus: Prometheus, fleet: list[Comparison], window: str) -> dict[Series, Agreement]:
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


def judge_agreement(found: Agreement, spec: PayloadComparison, primary_name: str) -> tuple[Verdict, list[str]]:
    """A shadow's answers against minPairs and minAgreement, as InferencePayloadDisagreement judges them."""
    if found.pairs < spec.min_pairs or found.ratio is None:
        return "insufficient-data", [
            f"{found.pairs:g} of its answers were paired with {primary_name}'s, fewer than payloads.minPairs "
            f"({spec.min_pairs})"
        ]
    if found.ratio < spec.min_agreement:
        return "fail", [
            f"agrees with {primary_name} on {found.ratio:.1%} of {found.pairs:,.0f} paired requests, "
            f"below {spec.min_agreement:.0%}"
        ]
    return "pass", []


def _combined(first: tuple[Verdict, list[str]], second: tuple[Verdict, list[str]]) -> tuple[Verdict, list[str]]:
    """The worse of two verdicts (fail, then insufficient data), with the reasons of both."""
    worst_first: tuple[Verdict, ...] = ("fail", "insufficient-data", "idle")
    for verdict in worst_first:
        if verdict in (first[0], second[0]):
            return verdict, [*first[1], *second[1]]
    return "pass", []


def judge(
    candidate: Stats, primary: Stats, spec: AnalysisSpec, primary_name: str, sleeps: bool = False
) -> tuple[Verdict, list[str]]:
    """The same thresholds the alerting rules apply, on the same figures. Where the model sleeps at
    zero replicas and neither version served a request in the window, the model was asleep: idle,
    not judged (a version that stays asleep while its primary serves is judged as any other)."""
    if sleeps and candidate.requests == 0 and primary.requests == 0:
        return "idle", ["the model slept at zero replicas: no request in the window"]
    short = [
        f"{who} served {stats.requests:g} requests, fewer than minRequests ({spec.min_requests})"
        for who, stats in (("it", candidate), (f"the primary {primary_name}", primary))
        if stats.requests < spec.min_requests
    ]
    if short:
        return "insufficient-data", short
    reasons = []
    increase = candidate.error_ratio - primary.error_ratio
    if increase > spec.max_error_ratio_increase:
        reasons.append(
            f"error ratio {candidate.error_ratio:.2%} is {increase * 100:.2f} points above the primary's "
            f"{primary.error_ratio:.2%} (allowed {spec.max_error_ratio_increase * 100:g})"
        )
    if candidate.p95_ms is not None and primary.p95_ms is not None:
        limit = primary.p95_ms * (1 + spec.max_latency_increase_percent / 100)
        if candidate.p95_ms > limit:
            slower = (candidate.p95_ms / primary.p95_ms - 1) * 100 if primary.p95_ms else math.inf
            reasons.append(
                f"p95 latency {candidate.p95_ms:g} ms is {slower:.1f} % above the primary's {primary.p95_ms:g} ms "
                f"(allowed {spec.max_latency_increase_percent:g} %)"
            )
    return ("fail", reasons) if reasons else ("pass", [])


def analyze(
    config: StackConfig, stack: str, prometheus: Prometheus, window: str | None = None, model: str | None = None
) -> Report:
    judged = [
        (spec_model, compared)
        for spec_model in config.models
        if model is None or spec_model.name == model
        if (compared := comparison.comparison(spec_model, config.namespace)) is not None
    ]
    by_window: dict[str, list[Comparison]] = {}
    for spec_model, compared in judged:
        by_window.setdefault(window or spec_model.analysis.window, []).append(compared)
    stats: dict[Series, Stats] = {}
    agreements: dict[Series, Agreement] = {}
    for used, fleet in sorted(by_window.items()):
        stats |= _fleet_stats(prometheus, fleet, used)
        agreements |= _fleet_agreements(prometheus, fleet, used)

    report = Report(stack=stack, window=window or "", at=prometheus.at)
    for spec_model, compared in judged:
        spec = spec_model.analysis
        primary = stats[compared.namespace, compared.model, compared.primary]
        candidates = []
        for version, role in compared.candidates:
            series = (compared.namespace, compared.model, version)
            verdict, reasons = judge(stats[series], primary, spec, compared.primary, compared.sleeps)
            found = agreements.get(series)
            if found is not None and spec.payloads.enabled and verdict != "idle":
                verdict, reasons = _combined(
                    (verdict, reasons), judge_agreement(found, spec.payloads, compared.primary)
                )
            candidates.append(Candidate(version, role, stats[series], verdict, reasons, found))
        report.models.append(ModelReport(spec_model.name, compared.primary, primary, candidates))
    if window is None:
        report.window = ",".join(sorted(by_window)) or AnalysisSpec().window
    return report


def exit_code(report: Report) -> ExitCode:
    """The worst verdict's: a failing candidate, then one short of data (or idle), else OK."""
    verdicts = report.verdicts
    if "fail" in verdicts:
        return ExitCode.CANDIDATE_FAILED
    if "insufficient-data" in verdicts or "idle" in verdicts:
        return ExitCode.INSUFFICIENT_DATA
    return ExitCode.OK


# --- Output ---------------------------------------------------------------------------------------


def _ms(value: float | None) -> str:
    return "—" if value is None else f"{value:g}"


def _agreement(found: Agreement | None) -> str:
    if found is None or found.ratio is None:
        return "—"
    return f"{found.ratio:.1%} of {found.pairs:g}"


def _rows(report: Report) -> list[tuple[str, ...]]:
    rows: list[tuple[str, ...]] = []
    for model in report.models:
        entries: list[tuple[str, str, Stats, Agreement | None, str, list[str]]] = [
            (model.primary, "primary", model.primary_stats, None, "", [])
        ]
        entries += [(c.version, c.role, c.stats, c.agreement, c.verdict, c.reasons) for c in model.candidates]
        for version, role, stats, found, verdict, reasons in entries:
            rows.append(
                (
                    model.model,
                    version,
                    role,
                    f"{stats.requests:g}",
                    f"{stats.error_ratio:.2%}",
                    _ms(stats.p50_ms),
                    _ms(stats.p95_ms),
                    _ms(stats.p99_ms),
                    _agreement(found),
                    f"{verdict}{': ' + '; '.join(reasons) if reasons else ''}",
                )
            )
    return rows


HEADERS = ("model", "version", "role", "requests", "errors", "p50 ms", "p95 ms", "p99 ms", "agreement", "verdict")


def markdown(report: Report) -> str:
    lines = [
        f"## Canary and shadow analysis: stack `{report.stack}`",
        "",
        f"Window {report.window}, ending {report.as_json()['at']}.",
        "",
    ]
    if not report.models:
        return "\n".join([*lines, "No model has a canary or a shadow."]) + "\n"
    lines += ["| " + " | ".join(HEADERS) + " |", "|" + "---|" * len(HEADERS)]
    for row in _rows(report):
        lines.append("| " + " | ".join(cell.replace("|", "\\|") for cell in row) + " |")
    return "\n".join(lines) + "\n"


def table(report: Report) -> Table:
    """A rich Table, the verdict coloured (rich leaves colour out when not on a terminal)."""
    colours: Mapping[str, str] = {"pass": "green", "fail": "bold red", "insufficient-data": "yellow", "idle": "dim"}
    out = Table(*HEADERS, title=f"stack {report.stack}: window {report.window} ending {report.as_json()['at']}")
    for row in _rows(report):
        verdict = row[-1].split(":", 1)[0]
        style = colours.get(verdict)
        out.add_row(*row[:-1], f"[{style}]{escape(row[-1])}[/{style}]" if style else escape(row[-1]))
    return out


def as_json(report: Report) -> str:
    return json.dumps(report.as_json(), indent=2)
