"""`python -m infra rollout`: each model's rollout taken one step further when analyze's verdict allows it.

The stack file is the rollout's whole state. A model's `rollout` says what to roll out and how
(serving/rollout_spec.py); `rollout.status`, written here only, says where it stands. A run reads
the file, decides for every model whose rollout is not finished (docs/rollouts.md, "Decisions"),
and writes the file once, through promote's editor (comments kept, the result validated first), so
that each step is one reviewed commit and a revert of it undoes it. A run at the same time as the
one before changes nothing: a verdict counts only once its whole window lies after the step began,
and a failing one only once per time.

Decisions:
- advance: the rollout starts (its first step, or its shadow phase, at once), or its candidate passed
  and has been at its step for `interval` (the shadow phase: its duration): the next step's weights,
  or after the last the candidate's 100 and the previous primary retired or idle;
- hold: too little data, a step not yet `interval` old, or a failing verdict below failureLimit (counted
  in the status: a write); nothing else is written;
- rollback: failureLimit failing verdicts in a row: the candidate's weight and mirror to 0, the other
  versions back to their weights before the rollout;
- paused: the candidate's traffic in the file is not what the rollout wrote (a person moved it): the
  status says so, and nothing moves until a person removes `rollout.status.paused`;
- resume: `paused` was removed: the step's weights are written back and its clock restarts.
"""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from rich.markup import escape
from rich.table import Table
from ruamel.yaml.comments import CommentedMap, CommentedSeq
from ruamel.yaml.scalarstring import DoubleQuotedScalarString

from inference_platform.analysis import comparison
from inference_platform.analysis.prometheus_client import Prometheus
from inference_platform.analysis.verdicts import Candidate, Stats
from inference_platform.cli.analyze import judge_models
from inference_platform.cli.environment import Environment
from inference_platform.cli.promote import (
    MODELS_KEY,
    check_edit,
    dump,
    find_model,
    find_version,
    round_trip,
    set_mirror,
    set_weight,
)
from inference_platform.cli.stack_file import StackFile, read_stack_text, refuse_repeated_keys
from inference_platform.cli.yaml_edit import delete_key, remove_item, set_key
from inference_platform.config.base import duration_seconds
from inference_platform.serving.rollout_spec import RolloutDecision, RolloutSpec, RolloutStatus, format_timestamp
from inference_platform.serving.runtimes import ModelSpec
from inference_platform.stack.config import StackConfig


@dataclass(frozen=True)
class Traffic:
    """A model's traffic as the rollout sees it: where the rollout stands, and every version's share."""

    phase: str
    """shadow, canary, promoted, rolled-back; `none` before the rollout starts."""
    step: int
    weights: dict[str, int]
    mirrors: dict[str, float]

    def as_json(self) -> dict[str, Any]:
        return {"phase": self.phase, "step": self.step, "weights": self.weights, "mirrors": self.mirrors}

    def describe(self, candidate: str) -> str:
        """'step 2: v2 25 %, v1 75 %'; 'shadow: v2 mirrors 50 %'."""
        where = {"none": "before", "canary": f"step {self.step}"}.get(self.phase, self.phase)
        shares = [f"{name} {weight} %" for name, weight in self.weights.items() if weight or name == candidate]
        shares += [f"{name} mirrors {_number(percent)} %" for name, percent in self.mirrors.items()]
        return f"{where}: {', '.join(shares)}"


@dataclass
class Decision:
    model: str
    candidate: str
    decision: RolloutDecision
    before: Traffic
    after: Traffic
    reason: str
    verdict: Candidate | None = None
    status: dict[str, Any] | None = None
    """The status to write (its keys as the file writes them; None values removed); None: nothing written."""
    retire: str | None = None
    """A version to remove from the model (the previous primary, at promotion)."""

    def as_json(self) -> dict[str, Any]:
        return {
            "model": self.model,
            "candidate": self.candidate,
            "decision": self.decision,
            "from": self.before.as_json(),
            "to": self.after.as_json(),
            "reason": self.reason,
            "verdict": None if self.verdict is None else self.verdict.as_json(),
        }

    @property
    def writes(self) -> bool:
        return self.status is not None


@dataclass
class RolloutReport:
    stack: str
    at: datetime
    auto_merge_rollbacks: bool
    decisions: list[Decision] = field(default_factory=list)

    @property
    def rolled_back(self) -> bool:
        return any(d.decision == "rollback" and d.writes for d in self.decisions)

    def as_json(self) -> dict[str, Any]:
        return {
            "stack": self.stack,
            "at": format_timestamp(self.at),
            "autoMergeRollbacks": self.auto_merge_rollbacks,
            "models": [d.as_json() for d in self.decisions],
        }


# --- Traffic at each point of a rollout --------------------------------------------------------------


def _spec(model: ModelSpec) -> RolloutSpec:
    if model.rollout is None:
        raise ValueError(f"model {model.name!r} has no rollout")
    return model.rollout


def _started(model: ModelSpec) -> tuple[RolloutSpec, RolloutStatus]:
    rollout = _spec(model)
    if rollout.status is None:
        raise ValueError(f"model {model.name!r}'s rollout has not started")
    return rollout, rollout.status


def _number(value: float) -> int | float:
    return int(value) if float(value).is_integer() else value


def shares(baseline: Mapping[str, int], total: int) -> dict[str, int]:
    """The baseline's weights scaled to add up to `total`, in whole percent (largest remainder; ties
    to the version listed first)."""
    whole = sum(baseline.values())
    if not baseline or whole == 0:
        return dict.fromkeys(baseline, 0)
    exact = {name: weight * total / whole for name, weight in baseline.items()}
    result = {name: int(value) for name, value in exact.items()}
    left = total - sum(result.values())
    order = sorted(exact, key=lambda name: (-(exact[name] - result[name]), list(baseline).index(name)))
    for name in order[:left]:
        result[name] += 1
    return result


def current(model: ModelSpec) -> Traffic:
    """The model's traffic as the file has it."""
    rollout = _spec(model)
    status = rollout.status
    return Traffic(
        "none" if status is None else status.phase,
        0 if status is None else status.step,
        dict(model.live_weights),
        dict(model.mirrors),
    )


def planned(model: ModelSpec, phase: str, step: int, baseline: Mapping[str, int], primary: str) -> Traffic:
    """The traffic the rollout writes at a phase and step: the candidate's share, the baseline's
    versions sharing the rest in proportion; versions outside the baseline keep theirs."""
    rollout = _spec(model)
    weights = dict(model.live_weights)
    mirrors = dict(model.mirrors)
    candidate = rollout.candidate
    weights.pop(candidate, None)
    mirrors.pop(candidate, None)
    if phase == "shadow":
        assert rollout.shadow_first is not None
        weights |= shares(baseline, 100)
        mirrors[candidate] = rollout.shadow_first.mirror_percent
    elif phase == "canary":
        weight = rollout.steps[step - 1]
        weights |= shares(baseline, 100 - weight)
        weights[candidate] = weight
    elif phase == "promoted":
        weights |= dict.fromkeys(baseline, 0)
        weights[candidate] = 100
        if rollout.retire_previous:
            weights.pop(primary, None)
    else:  # rolled back
        weights |= shares(baseline, 100)
        weights[candidate] = 0
    order = [v.name for v in model.versions]
    return Traffic(
        phase,
        step,
        {name: weights[name] for name in order if name in weights},
        {name: mirrors[name] for name in order if name in mirrors},
    )


def _candidate_share(traffic: Traffic, candidate: str) -> tuple[int | None, float | None]:
    return traffic.weights.get(candidate), traffic.mirrors.get(candidate)


def _share_text(weight: int | None, mirror: float | None) -> str:
    if mirror is not None:
        return f"mirrorPercent {_number(mirror)}"
    return f"weight {weight}"


# --- Decisions ---------------------------------------------------------------------------------------


def _status(
    status: RolloutStatus | None,
    at: datetime,
    decision: RolloutDecision,
    reason: str,
    **changes: Any,
) -> dict[str, Any]:
    """The status to write: the current one with `changes` (camelCase keys), the decision and why."""
    written: dict[str, Any] = {} if status is None else status.model_dump(by_alias=True, exclude_none=True)
    written.pop("decision", None)
    written.pop("reason", None)
    written |= changes
    written["decision"] = decision
    written["reason"] = reason
    written.setdefault("since", format_timestamp(at))
    return {key: value for key, value in written.items() if value is not None}


def start(model: ModelSpec, at: datetime) -> Decision:
    """A rollout with no status yet: its shadow phase, or its first step, written at once."""
    rollout = _spec(model)
    before = current(model)
    primary = model.primary.name
    baseline = {name: weight for name, weight in model.live_weights.items() if name != rollout.candidate}
    if rollout.shadow_first is not None:
        after = planned(model, "shadow", 0, baseline, primary)
        reason = f"started: {rollout.candidate} mirrors {_number(rollout.shadow_first.mirror_percent)} % as a shadow"
    else:
        after = planned(model, "canary", 1, baseline, primary)
        reason = f"started: step 1 of {len(rollout.steps)}, {rollout.candidate} at {rollout.steps[0]} %"
    status = {
        "phase": after.phase,
        "step": after.step,
        "primary": primary,
        "baseline": baseline,
        "since": format_timestamp(at),
        "failures": 0,
        "decision": "advance",
        "reason": reason,
    }
    return Decision(model.name, rollout.candidate, "advance", before, after, reason, status=status)


def expected(model: ModelSpec) -> Traffic:
    """What the rollout last wrote for the model, from its status."""
    _, status = _started(model)
    return planned(model, status.phase, status.step, status.baseline, status.primary)


def without_verdict(model: ModelSpec, at: datetime) -> Decision | None:
    """The decisions made from the file alone (start, paused, resume, and hold while the step's first
    window is not complete); None for a model to judge."""
    rollout = _spec(model)
    status = rollout.status
    if status is None:
        return start(model, at)
    before = current(model)
    if status.paused is not None:
        reason = f"paused: {status.paused}"
        return Decision(model.name, rollout.candidate, "paused", before, before, reason)
    wanted = expected(model)
    if status.decision == "paused":
        reason = f"resumed: {wanted.describe(rollout.candidate)} written back; the step's time starts again"
        written = _status(status, at, "resume", reason, since=format_timestamp(at), failures=0, failedAt=None)
        return Decision(model.name, rollout.candidate, "resume", before, wanted, reason, status=written)
    found = _candidate_share(before, rollout.candidate)
    wrote = _candidate_share(wanted, rollout.candidate)
    if found != wrote:
        why = (
            f"{rollout.candidate} has {_share_text(*found)} in the file, and the rollout wrote {_share_text(*wrote)}: "
            "a person moved it. Remove rollout.status.paused to resume (the rollout writes its step's weights "
            "back), or remove the rollout"
        )
        written = _status(status, at, "paused", f"paused: {why}", paused=why)
        return Decision(model.name, rollout.candidate, "paused", before, before, f"paused: {why}", status=written)
    window = timedelta(seconds=duration_seconds(model.analysis.window))
    if at - status.since_time < window:
        reason = (
            f"the step's first window ({model.analysis.window}) ends at {format_timestamp(status.since_time + window)}"
            ": traffic from before the step is not judged"
        )
        return Decision(model.name, rollout.candidate, "hold", before, before, reason)
    return None


def judged(model: ModelSpec, namespace: str) -> comparison.Comparison:
    """The candidate against the primary the rollout started from (whatever the weights say now:
    past 50 % the candidate has the most), as a shadow in the shadow phase."""
    rollout, _ = _started(model)
    compared = comparison.comparison(model, namespace)
    assert compared is not None, "a rollout in progress has two versions and a live one"
    status = _started(model)[1]
    role: comparison.Role = "shadow" if status.phase == "shadow" else "canary"
    return replace(compared, primary=status.primary, candidates=((rollout.candidate, role),))


def _figures(candidate: Candidate, primary: Stats) -> str:
    stats = candidate.stats
    parts = [
        f"{stats.requests} requests (primary {primary.requests})",
        f"errors {stats.error_ratio:.2%} (primary {primary.error_ratio:.2%})",
    ]
    if stats.p95_ms is not None and primary.p95_ms is not None:
        parts.append(f"p95 {stats.p95_ms:g} ms (primary {primary.p95_ms:g} ms)")
    for signal, found in stats.tokens.items():
        theirs = primary.tokens.get(signal)
        if found.p95_ms is not None and theirs is not None and theirs.p95_ms is not None:
            parts.append(f"p95 {signal.title} {found.p95_ms:g} ms (primary {theirs.p95_ms:g} ms)")
    if candidate.agreement is not None and candidate.agreement.ratio is not None:
        parts.append(f"agreement {candidate.agreement.ratio:.1%} of {candidate.agreement.pairs} pairs")
    return ", ".join(parts)


def _next(model: ModelSpec, status: RolloutStatus) -> tuple[str, int]:
    rollout = _spec(model)
    if status.phase == "shadow":
        return "canary", 1
    if status.step < len(rollout.steps):
        return "canary", status.step + 1
    return "promoted", status.step


def _duration(seconds: float) -> str:
    whole = int(seconds)
    hours, rest = divmod(whole, 3600)
    minutes, secs = divmod(rest, 60)
    text = "".join(f"{value}{unit}" for value, unit in ((hours, "h"), (minutes, "m"), (secs, "s")) if value)
    return text or "0s"


def decide(model: ModelSpec, at: datetime, candidate: Candidate, primary: Stats) -> Decision:
    """A judged model's decision (its step's first window complete): advance, hold (a failure counted
    or not) or rollback."""
    rollout, status = _started(model)
    before = current(model)
    name = rollout.candidate
    figures = _figures(candidate, primary)
    reasons = "; ".join(candidate.reasons)
    since = status.since_time
    if candidate.verdict == "fail":
        failed = status.failed_time
        if failed is not None and failed >= at:
            reason = f"fails ({reasons}); counted already at {status.failed_at}"
            return Decision(model.name, name, "hold", before, before, reason, candidate)
        failures = status.failures + 1
        if failures >= rollout.failure_limit:
            after = planned(model, "rolled-back", status.step, status.baseline, status.primary)
            reason = (
                f"rolled back after {failures} failing {'verdict' if failures == 1 else 'verdicts'} in a row: "
                f"{reasons} ({figures})"
            )
            written = _status(
                status, at, "rollback", reason, phase="rolled-back", since=format_timestamp(at),
                failures=failures, failedAt=format_timestamp(at),
            )  # fmt: skip
            return Decision(model.name, name, "rollback", before, after, reason, candidate, written)
        reason = f"failing verdict {failures} of {rollout.failure_limit} in a row: {reasons} ({figures})"
        written = _status(status, at, "hold", reason, failures=failures, failedAt=format_timestamp(at))
        return Decision(model.name, name, "hold", before, before, reason, candidate, written)
    if candidate.verdict != "pass":
        reason = f"{candidate.verdict}: {reasons}"
        return Decision(model.name, name, "hold", before, before, reason, candidate)
    needed = duration_seconds(rollout.shadow_duration if status.phase == "shadow" else rollout.interval)
    held = (at - since).total_seconds()
    if held < needed:
        reason = f"passes ({figures}); at this step for {_duration(held)} of {_duration(needed)}"
        if status.failures:
            reason += "; a passing verdict ends the run of failures"
            written = _status(status, at, "hold", reason, failures=0, failedAt=None)
            return Decision(model.name, name, "hold", before, before, reason, candidate, written)
        return Decision(model.name, name, "hold", before, before, reason, candidate)
    phase, step = _next(model, status)
    after = planned(model, phase, step, status.baseline, status.primary)
    if phase == "promoted":
        fate = "retired" if rollout.retire_previous else "kept at weight 0"
        reason = f"promoted: {name} takes 100 %, {status.primary} {fate} ({figures})"
    else:
        reason = f"passed for {_duration(held)} ({figures}): step {step}, {name} at {rollout.steps[step - 1]} %"
    written = _status(
        status, at, "advance", reason, phase=phase, step=step, since=format_timestamp(at), failures=0, failedAt=None
    )
    retire = status.primary if phase == "promoted" and rollout.retire_previous else None
    return Decision(model.name, name, "advance", before, after, reason, candidate, written, retire)


def in_rollout(config: StackConfig, names: set[str]) -> list[ModelSpec]:
    """The models (of those in `names`: the stack file's own) whose rollout is not finished."""
    return [m for m in config.models if m.name in names and m.rollout is not None and not m.rollout.finished]


def decisions(config: StackConfig, models: Sequence[ModelSpec], at: datetime, prometheus_url: str) -> list[Decision]:
    """Every model's decision, in the file's order. Prometheus (at `prometheus_url`) is asked only
    where a verdict is needed: PrometheusError when it cannot answer."""
    found: dict[str, Decision] = {}
    to_judge = []
    for model in models:
        decided = without_verdict(model, at)
        if decided is None:
            to_judge.append(model)
        else:
            found[model.name] = decided
    if to_judge:
        compared = [(model, judged(model, config.namespace)) for model in to_judge]
        with Prometheus(prometheus_url, at) as prometheus:
            reports, _ = judge_models(prometheus, compared)
        for model, report in zip(to_judge, reports, strict=True):
            (candidate,) = report.candidates
            found[model.name] = decide(model, at, candidate, report.primary_stats)
    return [found[model.name] for model in models]


# --- Writing -----------------------------------------------------------------------------------------


def _set_status(rollout: CommentedMap, status: Mapping[str, Any]) -> None:
    """Write the status key by key (a comment in it stays), times quoted, keys it no longer has removed."""
    existing = rollout.get("status")
    if not isinstance(existing, CommentedMap):
        # Whole, then set: the lines that followed the rollout (the next model's comment) follow the new block.
        created = CommentedMap()
        created.update({key: _node(key, value) for key, value in status.items()})
        set_key(rollout, "status", created)
        return
    for key in [k for k in existing if k not in status]:
        delete_key(existing, key)
    for key, given in status.items():
        value = _node(key, given)
        if existing.get(key) != value or type(existing.get(key)) is not type(value):
            set_key(existing, key, value)


def _node(key: str, value: Any) -> Any:
    """A status value as the file writes it: times quoted (a YAML reader would make them dates)."""
    if key in {"since", "failedAt"}:
        return DoubleQuotedScalarString(value)
    if isinstance(value, Mapping):
        mapping = CommentedMap()
        mapping.update(value)
        return mapping
    return value


def _apply(document: Any, decision: Decision) -> None:
    model = find_model(document.get("config") or {}, decision.model)
    versions = model["versions"]
    assert isinstance(versions, CommentedSeq)
    for name, weight in decision.after.weights.items():
        if decision.before.weights.get(name) != weight:
            set_weight(find_version(versions, name, decision.model), weight)
    for name, percent in decision.after.mirrors.items():
        if decision.before.mirrors.get(name) != percent:
            set_mirror(find_version(versions, name, decision.model), name, percent)
    if decision.retire is not None:
        retired = find_version(versions, decision.retire, decision.model)
        remove_item(versions, next(i for i, v in enumerate(versions) if v is retired))
    assert decision.status is not None
    rollout = model["rollout"]
    assert isinstance(rollout, CommentedMap)
    _set_status(rollout, decision.status)


def edit(text: str, path: Path, chosen: Sequence[Decision]) -> str:
    yaml, document = round_trip(text, path)
    for decision in chosen:
        if decision.writes:
            _apply(document, decision)
    return dump(yaml, document)


def write(path: Path, environment: Environment | None, report: RolloutReport) -> bool:
    """The decisions that write, written to the stack file at once (validated first; ConfigError or
    PromotionError when the result would be refused, nothing written). Whether the file changed."""
    if not any(d.writes for d in report.decisions):
        return False
    original = read_stack_text(path)
    refuse_repeated_keys(original, path)
    edited = edit(original, path, report.decisions)
    with tempfile.TemporaryDirectory(prefix="rollout-") as scratch:
        check_edit(environment, path, original, edited, Path(scratch) / "proposed")
    if edited == original:
        return False
    staged = path.with_name(f".{path.name}.rollout")
    staged.write_text(edited, encoding="utf-8")
    os.replace(staged, path)
    return True


# --- Output ------------------------------------------------------------------------------------------

HEADERS = ("model", "candidate", "decision", "from", "to", "reason")


def _rows(report: RolloutReport) -> list[tuple[str, ...]]:
    return [
        (d.model, d.candidate, d.decision, d.before.describe(d.candidate), d.after.describe(d.candidate), d.reason)
        for d in report.decisions
    ]


def markdown(report: RolloutReport) -> str:
    lines = [f"## Rollouts: stack `{report.stack}`", "", f"Decided at {format_timestamp(report.at)}.", ""]
    if not report.decisions:
        return "\n".join([*lines, "No model has a rollout in progress."]) + "\n"
    lines += ["| " + " | ".join(HEADERS) + " |", "|" + "---|" * len(HEADERS)]
    lines += ["| " + " | ".join(cell.replace("|", "\\|") for cell in row) + " |" for row in _rows(report)]
    if report.rolled_back:
        lines += ["", "A rollback: the candidate's traffic is back on the versions it came from."]
    lines += ["", "Written by `python -m infra rollout` (docs/rollouts.md): revert this commit to undo the step."]
    return "\n".join(lines) + "\n"


def table(report: RolloutReport) -> Table:
    colours = {"advance": "green", "rollback": "bold red", "hold": "yellow", "paused": "magenta", "resume": "cyan"}
    out = Table(*HEADERS, title=f"stack {report.stack}: rollouts at {format_timestamp(report.at)}")
    for row in _rows(report):
        style = colours[row[2]]
        out.add_row(*map(escape, row[:2]), f"[{style}]{row[2]}[/{style}]", *map(escape, row[3:]))
    return out


def as_json(report: RolloutReport) -> str:
    return json.dumps(report.as_json(), indent=2)


def own_models(stack_file: StackFile) -> set[str]:
    """The names of the models the stack file itself holds (a platform stack's config holds its
    shards' models too, which their own files roll out)."""
    try:
        models = json.loads(stack_file.config.get(MODELS_KEY, "[]"))
    except ValueError:
        return set()
    return {m["name"] for m in models if isinstance(m, Mapping) and isinstance(m.get("name"), str)}
