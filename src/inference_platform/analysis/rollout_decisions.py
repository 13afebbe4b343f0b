"""A rollout's decisions, made from the model's settings, its `rollout.status`, the candidate's
verdict and the time alone (no file, no Prometheus): what `python -m infra rollout` (cli/rollout.py)
reads, asks and writes around (docs/rollouts.md, "Decisions").

Decisions:
- advance: the rollout starts (its first step, or its shadow phase, at once; a candidate that
  already serves live traffic starts at the first step at or above its weight, never below it), or
  its candidate passed and has been at its step for `interval` (the shadow phase: its duration): the
  next step's weights, or after the last the candidate's 100 and the previous primary retired or idle;
- hold: too little data, a step not yet `interval` old, or a failing verdict below failureLimit
  (counted in the status: a write); nothing else is written;
- rollback: failureLimit failing verdicts in a row: the candidate's weight and mirror to 0, the other
  versions back to their weights before the rollout;
- paused: the candidate's traffic in the file is not what the rollout wrote (a person moved it): the
  status says so, and nothing moves until a person removes `rollout.status.paused`;
- resume: `paused` was removed: the step's weights are written back and its clock restarts.

A run's report (`RolloutReport`) says whether the workflow may merge its commit without a review
(`auto_merge`): only where the stack allows it for rollbacks, the run wrote a rollback, and no other
model's traffic moved.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from typing import Any

from inference_platform.analysis import comparison
from inference_platform.analysis.verdicts import Candidate, Stats
from inference_platform.config.base import duration_seconds
from inference_platform.serving.model_spec import ModelSpecBase
from inference_platform.serving.rollout_spec import (
    RolloutDecision,
    RolloutSpec,
    RolloutStatus,
    first_step,
    format_timestamp,
)


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
        shares += [f"{name} mirrors {number(percent)} %" for name, percent in self.mirrors.items()]
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

    @property
    def moves_traffic(self) -> bool:
        """Whether what it writes changes a weight or a mirror, or retires a version (a counted
        failure or a pause writes the status alone)."""
        if not self.writes:
            return False
        moved = (self.before.weights, self.before.mirrors) != (self.after.weights, self.after.mirrors)
        return moved or self.retire is not None


@dataclass
class RolloutReport:
    """One run's decisions, and what the workflow does with its commit."""

    stack: str
    at: datetime
    auto_merge_rollbacks: bool
    decisions: list[Decision] = field(default_factory=list)

    @property
    def rolled_back(self) -> bool:
        return any(d.decision == "rollback" and d.writes for d in self.decisions)

    @property
    def writes(self) -> bool:
        return any(d.writes for d in self.decisions)

    @property
    def moves_traffic(self) -> bool:
        return any(d.moves_traffic for d in self.decisions)

    @property
    def reviewed_moves(self) -> list[Decision]:
        """The decisions written that move traffic and are not rollbacks: each one a reason for a review."""
        return [d for d in self.decisions if d.moves_traffic and d.decision != "rollback"]

    @property
    def auto_merge(self) -> bool:
        """Whether the workflow merges the run's commit without a review: the stack allows it for
        rollbacks (autoMergeRollbacks), a rollback was written, and nothing but rollbacks moves
        traffic (another model's advance, start or resume is reviewed; a failure counted or a pause,
        the status alone, rides along)."""
        return self.auto_merge_rollbacks and self.rolled_back and not self.reviewed_moves

    def as_json(self) -> dict[str, Any]:
        return {
            "stack": self.stack,
            "at": format_timestamp(self.at),
            "autoMergeRollbacks": self.auto_merge_rollbacks,
            "autoMerge": self.auto_merge,
            "models": [d.as_json() for d in self.decisions],
        }


# --- Traffic at each point of a rollout --------------------------------------------------------------


def _spec(model: ModelSpecBase) -> RolloutSpec:
    if model.rollout is None:
        raise ValueError(f"model {model.name!r} has no rollout")
    return model.rollout


def _started(model: ModelSpecBase) -> tuple[RolloutSpec, RolloutStatus]:
    rollout = _spec(model)
    if rollout.status is None:
        raise ValueError(f"model {model.name!r}'s rollout has not started")
    return rollout, rollout.status


def number(value: float) -> int | float:
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


def current(model: ModelSpecBase) -> Traffic:
    """The model's traffic as the file has it."""
    rollout = _spec(model)
    status = rollout.status
    return Traffic(
        "none" if status is None else status.phase,
        0 if status is None else status.step,
        dict(model.live_weights),
        dict(model.mirrors),
    )


def planned(model: ModelSpecBase, phase: str, step: int, baseline: Mapping[str, int], primary: str) -> Traffic:
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
        return f"mirrorPercent {number(mirror)}"
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


def _start_reason(rollout: RolloutSpec, step: int, live: int) -> str:
    """Why the rollout starts where it does: at step 1, or where the candidate's live weight already is."""
    weight = rollout.steps[step - 1]
    reason = f"started: step {step} of {len(rollout.steps)}, {rollout.candidate} at {weight} %"
    if not live:
        return reason
    reason += f" (it served {live} % already: a rollout never cuts its candidate's traffic"
    skipped = "; its shadow phase is skipped)" if rollout.shadow_first is not None else ")"
    return reason + skipped


def start(model: ModelSpecBase, at: datetime) -> Decision:
    """A rollout with no status yet: its shadow phase, or its first step, written at once. A
    candidate with live weight already starts at the first step at or above it (its shadow phase
    skipped): the rollout never cuts its traffic (the config refuses one above every step)."""
    rollout = _spec(model)
    before = current(model)
    primary = model.primary.name
    baseline = {name: weight for name, weight in model.live_weights.items() if name != rollout.candidate}
    live = model.live_weights.get(rollout.candidate) or 0
    if rollout.shadow_first is not None and not live:
        after = planned(model, "shadow", 0, baseline, primary)
        reason = f"started: {rollout.candidate} mirrors {number(rollout.shadow_first.mirror_percent)} % as a shadow"
    else:
        step = first_step(rollout.steps, live)
        assert step is not None, "the config refuses a candidate above every step"
        after = planned(model, "canary", step, baseline, primary)
        reason = _start_reason(rollout, step, live)
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


def expected(model: ModelSpecBase) -> Traffic:
    """What the rollout last wrote for the model, from its status."""
    _, status = _started(model)
    return planned(model, status.phase, status.step, status.baseline, status.primary)


def moved_by_hand(model: ModelSpecBase) -> str | None:
    """Where a started rollout's candidate no longer has the share the rollout wrote (a person
    moved it), what was found against what was written; None where it has it (or the rollout has
    not started, or is paused already)."""
    rollout = _spec(model)
    if rollout.status is None or rollout.status.paused is not None or rollout.finished:
        return None
    found = _candidate_share(current(model), rollout.candidate)
    wrote = _candidate_share(expected(model), rollout.candidate)
    if found == wrote:
        return None
    return f"{rollout.candidate} has {_share_text(*found)} in the file, and the rollout wrote {_share_text(*wrote)}"


def without_verdict(model: ModelSpecBase, at: datetime) -> Decision | None:
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
    moved = moved_by_hand(model)
    if moved is not None:
        why = (
            f"{moved}: a person moved it. Remove rollout.status.paused to resume (the rollout writes its step's "
            "weights back), or remove the rollout"
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


def judged(model: ModelSpecBase, namespace: str) -> comparison.Comparison:
    """The candidate against the primary the rollout started from (whatever the weights say now:
    past 50 % the candidate has the most), as a shadow in the shadow phase."""
    rollout, status = _started(model)
    compared = comparison.comparison(model, namespace)
    assert compared is not None, "a rollout in progress has two versions and a live one"
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


def _next(rollout: RolloutSpec, status: RolloutStatus) -> tuple[str, int]:
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


def decide(model: ModelSpecBase, at: datetime, candidate: Candidate, primary: Stats) -> Decision:
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
    phase, step = _next(rollout, status)
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


def promotion_warning(model: ModelSpecBase) -> str | None:
    """What a hand move (`infra promote`) of a model whose rollout is running leads to, the model as
    the move leaves it: the next run pauses the rollout (the candidate's share moved), or writes its
    own weights back over the move (the others' moved, or it is paused); None where the rollout has
    not started or is finished, or the move left its traffic as the rollout wrote it."""
    rollout = model.rollout
    if rollout is None or rollout.status is None or rollout.finished:
        return None
    status = rollout.status
    wrote = expected(model)
    where = (
        f"model {model.name!r} has a rollout of {rollout.candidate} in progress ({status.phase}, step {status.step})"
    )
    stop = "remove `rollout:` from the model to stop it first (the weights stay as they are)"
    if status.paused is not None or status.decision == "paused":
        return f"{where}, paused: resuming it writes its step's weights back over this move; {stop}"
    moved = moved_by_hand(model)
    if moved is not None:
        return f"{where}: {moved}, so the next `python -m infra rollout` pauses it; {stop}"
    now = current(model)
    if (now.weights, now.mirrors) != (wrote.weights, wrote.mirrors):
        return f"{where}: its next step writes its own weights over this move; {stop}"
    return None
