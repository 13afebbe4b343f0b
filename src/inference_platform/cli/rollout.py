"""`python -m infra rollout`: each model's rollout taken one step further when analyze's verdict allows it.

The stack file is the rollout's whole state. A model's `rollout` says what to roll out and how
(serving/rollout_spec.py); `rollout.status`, written here only, says where it stands. A run reads
the file, asks Prometheus for the verdicts the decisions need (analysis/judging.py), takes each
model's decision from analysis/rollout_decisions.py (docs/rollouts.md, "Decisions"), and writes the
file once, through promote's editor (comments kept, the result validated first), so that each
step is one commit and a revert of it undoes it. A run at the same time as the one before changes
nothing: a verdict counts only once its whole window lies after the step began, and a failing one
only once per time.
"""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Mapping, Sequence
from datetime import datetime
from pathlib import Path
from typing import Any

from rich.markup import escape
from rich.table import Table
from ruamel.yaml.comments import CommentedMap, CommentedSeq
from ruamel.yaml.scalarstring import DoubleQuotedScalarString

from inference_platform.analysis.judging import judge_models
from inference_platform.analysis.prometheus_client import Prometheus
from inference_platform.analysis.rollout_decisions import Decision, RolloutReport, decide, judged, without_verdict
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
from inference_platform.serving.rollout_spec import format_timestamp
from inference_platform.serving.runtimes import ModelSpec
from inference_platform.stack.config import StackConfig

# --- Reading and asking ------------------------------------------------------------------------------


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
    lines += ["", *_merging(report), f"Written by `python -m infra rollout` (docs/rollouts.md): {_undo(report)}"]
    return "\n".join(lines) + "\n"


def _undo(report: RolloutReport) -> str:
    """What reverting the run's commit undoes: its moves of traffic, or nothing but status lines."""
    if report.moves_traffic:
        return "revert this commit to undo the step."
    if report.writes:
        return "this commit moves no traffic; it records the rollout's status (a failing verdict counted, a pause)."
    return "nothing was written; the stack file is unchanged."


def _merging(report: RolloutReport) -> list[str]:
    """Why a rollback under autoMergeRollbacks is merged without a review, or is not."""
    if not (report.auto_merge_rollbacks and report.rolled_back):
        return []
    if report.auto_merge:
        only = "Only rollbacks move traffic here, and the stack sets `autoMergeRollbacks`: merged without a review."
        return [only, ""]
    others = ", ".join(f"{d.model} ({d.decision})" for d in report.reviewed_moves)
    return [f"`autoMergeRollbacks` is set, but this run also moves {others}: a person reviews it.", ""]


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
