"""`python -m infra analyze`: a verdict on every canary and shadow, from the platform's Prometheus.

Each candidate is compared with its model's primary over the model's window (or `--window`),
ending at `--at`, with the very queries the alerting rules use (analysis/comparison.py), and the
model's own thresholds (`analysis` in the stack config). The queries are analysis/fleet.py's, sent
by analysis/prometheus_client.py; the verdicts and the report are analysis/verdicts.py's, each model
judged by analysis/judging.py. Here: the models to judge and their windows, the exit code of a
report, and its three output formats.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from datetime import UTC, datetime

from rich.markup import escape
from rich.table import Table

from inference_platform.analysis import comparison
from inference_platform.analysis.judging import judge_models
from inference_platform.analysis.prometheus_client import Prometheus
from inference_platform.analysis.verdicts import Agreement, ModelReport, Report, Stats
from inference_platform.cli.exit_codes import ExitCode
from inference_platform.serving.analysis_spec import AnalysisSpec
from inference_platform.stack.config import StackConfig


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


def analyze(
    config: StackConfig, stack: str, prometheus: Prometheus, window: str | None = None, model: str | None = None
) -> Report:
    judged = [
        (spec_model, compared)
        for spec_model in config.models
        if model is None or spec_model.name == model
        if (compared := comparison.comparison(spec_model, config.namespace)) is not None
    ]
    report = Report(stack=stack, window=window or "", at=prometheus.at)
    report.models, windows = judge_models(prometheus, judged, window)
    if window is None:
        report.window = ",".join(windows) or AnalysisSpec().window
    return report


def nothing_to_compare(config: StackConfig, name: str) -> str | None:
    """Why the model `name` has no canary or shadow to judge (a single version, or none but its
    primary taking traffic or a mirror); None where it has one."""
    model = next(m for m in config.models if m.name == name)
    compared = comparison.comparison(model, config.namespace)
    if compared is not None and compared.candidates:
        return None
    if len(model.versions) < 2:
        return f"--model {name} has nothing to compare: it has one version ({model.versions[0].name})"
    return f"--model {name} has nothing to compare: no version but its primary has a weight or a mirror"


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
    return f"{found.ratio:.1%} of {found.pairs}"


def _token_signals(report: Report) -> list[comparison.TokenSignal]:
    """The token-latency signals some version in the report has: a column each (p95, in ms)."""
    found = {signal for m in report.models for stats in _all_stats(m) for signal in stats.tokens}
    return [signal for signal in (comparison.TTFT, comparison.TPOT) if signal in found]


def _all_stats(model: ModelReport) -> list[Stats]:
    return [model.primary_stats, *(c.stats for c in model.candidates)]


def _token_p95(stats: Stats, signal: comparison.TokenSignal) -> str:
    found = stats.tokens.get(signal)
    return _ms(None if found is None else found.p95_ms)


def _rows(report: Report) -> list[tuple[str, ...]]:
    rows: list[tuple[str, ...]] = []
    signals = _token_signals(report)
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
                    str(stats.requests),
                    f"{stats.error_ratio:.2%}",
                    _ms(stats.p50_ms),
                    _ms(stats.p95_ms),
                    _ms(stats.p99_ms),
                    *(_token_p95(stats, signal) for signal in signals),
                    _agreement(found),
                    f"{verdict}{': ' + '; '.join(reasons) if reasons else ''}",
                )
            )
    return rows


HEADERS = ("model", "version", "role", "requests", "errors", "p50 ms", "p95 ms", "p99 ms", "agreement", "verdict")
TOKEN_HEADERS = {comparison.TTFT: "TTFT p95 ms", comparison.TPOT: "TPOT p95 ms"}


def headers(report: Report) -> tuple[str, ...]:
    """HEADERS, with a column per token-latency signal after p99 where some version reports it."""
    signals = tuple(TOKEN_HEADERS[signal] for signal in _token_signals(report))
    return (*HEADERS[:8], *signals, *HEADERS[8:])


def markdown(report: Report) -> str:
    lines = [
        f"## Canary and shadow analysis: stack `{report.stack}`",
        "",
        f"Window {report.window}, ending {report.as_json()['at']}.",
        "",
    ]
    if not report.models:
        return "\n".join([*lines, "No model has a canary or a shadow."]) + "\n"
    columns = headers(report)
    lines += ["| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
    for row in _rows(report):
        lines.append("| " + " | ".join(cell.replace("|", "\\|") for cell in row) + " |")
    return "\n".join(lines) + "\n"


def table(report: Report) -> Table:
    """A rich Table, the verdict coloured (rich leaves colour out when not on a terminal)."""
    colours: Mapping[str, str] = {"pass": "green", "fail": "bold red", "insufficient-data": "yellow", "idle": "dim"}
    out = Table(*headers(report), title=f"stack {report.stack}: window {report.window} ending {report.as_json()['at']}")
    for row in _rows(report):
        verdict = row[-1].split(":", 1)[0]
        style = colours.get(verdict)
        out.add_row(*row[:-1], f"[{style}]{escape(row[-1])}[/{style}]" if style else escape(row[-1]))
    return out


def as_json(report: Report) -> str:
    return json.dumps(report.as_json(), indent=2)
