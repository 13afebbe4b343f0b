"""The rollout's decisions as pure functions (analysis/rollout_decisions.py): the model's settings,
its status, a verdict and a time in, a decision out; and the run's report, whose `autoMerge` the
rollout workflow merges on. No file, no Prometheus: the models are parsed from config values in
memory, the verdicts are analyze's objects made here."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from inference_platform.analysis.rollout_decisions import (
    Decision,
    RolloutReport,
    decide,
    moved_by_hand,
    promotion_warning,
    start,
    without_verdict,
)
from inference_platform.analysis.verdicts import Candidate, Stats, Verdict
from inference_platform.serving.rollout_spec import format_timestamp
from inference_platform.serving.runtimes import ModelSpec
from inference_platform.stack.config import parse_stack_config

START = datetime(2026, 12, 6, 10, 0, tzinfo=UTC)
STEPS = [5, 25, 50]


def spec(name: str, weights: dict[str, int], status: dict[str, Any] | None = None, **rollout: Any) -> ModelSpec:
    """A model of the given live weights rolling out v2 (steps 5, 25, 50 every 15 minutes)."""
    versions = [{"name": v, "modelUri": f"pvc://models/{name}/{v}", "weight": w} for v, w in weights.items()]
    settings = {"candidate": "v2", "steps": STEPS, "interval": "15m", **rollout}
    if status is not None:
        settings["status"] = status
    model = {"name": name, "runtime": "mlserver", "versions": versions, "rollout": settings}
    (parsed,) = parse_stack_config({"domain": "models.example.com", "models": [model]}).models
    return parsed


def status_at(step: int, **changes: Any) -> dict[str, Any]:
    """The status the rollout writes when it reaches `step` at START (rolling out from v1 at 100)."""
    return {
        "phase": "canary",
        "step": step,
        "primary": "v1",
        "baseline": {"v1": 100},
        "since": format_timestamp(START),
        "decision": "advance",
        **changes,
    }


def at_step(name: str, step: int, **changes: Any) -> ModelSpec:
    """A model whose rollout has been at `step` since START, its weights as the rollout wrote them."""
    weight = STEPS[step - 1]
    return spec(name, {"v1": 100 - weight, "v2": weight}, status_at(step, **changes))


def stats(requests: int, errors: float = 0.001) -> Stats:
    return Stats(requests, errors, 50.0, 90.0, 120.0)


def verdict(outcome: Verdict) -> Candidate:
    return Candidate("v2", "canary", stats(500, 0.2 if outcome == "fail" else 0.001), outcome, [outcome])


def judged(model: ModelSpec, at: datetime, outcome: Verdict) -> Decision:
    assert without_verdict(model, at) is None  # a verdict is needed
    return decide(model, at, verdict(outcome), stats(5000))


@pytest.mark.parametrize(
    ("weights", "step", "after"),
    [
        ({"v1": 100, "v2": 0}, 1, {"v1": 95, "v2": 5}),
        ({"v1": 90, "v2": 10}, 2, {"v1": 75, "v2": 25}),
        ({"v1": 75, "v2": 25}, 2, {"v1": 75, "v2": 25}),
        ({"v1": 50, "v2": 50}, 3, {"v1": 50, "v2": 50}),
        ({"v1": 40, "v0": 40, "v2": 20}, 2, {"v1": 38, "v0": 37, "v2": 25}),
    ],
)
def test_a_rollout_starts_at_the_first_step_at_or_above_its_candidates_weight(
    weights: dict[str, int], step: int, after: dict[str, int]
) -> None:
    started = start(spec("iris", weights), START)
    assert (started.decision, started.after.phase, started.after.step) == ("advance", "canary", step)
    assert started.after.weights == {name: after[name] for name in weights}
    assert started.after.weights[started.candidate] >= weights["v2"]  # never cut
    assert started.status is not None
    assert started.status["baseline"] == {name: w for name, w in weights.items() if name != "v2"}


def test_the_issues_example_v5_at_50_on_steps_20_50_80_stays_at_50() -> None:
    model = spec("iris", {"v3": 50, "v5": 50}, candidate="v5", steps=[20, 50, 80])
    started = start(model, START)
    assert (started.after.step, started.after.weights) == (2, {"v3": 50, "v5": 50})


def test_a_shadow_first_rollout_of_an_idle_candidate_starts_as_a_shadow_and_a_live_one_skips_it() -> None:
    idle = start(spec("iris", {"v1": 100, "v2": 0}, shadowFirst={"mirrorPercent": 20}), START)
    assert (idle.after.phase, idle.after.weights, idle.after.mirrors) == ("shadow", {"v1": 100}, {"v2": 20})
    live = start(spec("iris", {"v1": 90, "v2": 10}, shadowFirst={"mirrorPercent": 20}), START)
    assert (live.after.phase, live.after.step, live.after.mirrors) == ("canary", 2, {})
    assert live.reason.endswith("its shadow phase is skipped)")


def test_a_step_holds_without_a_verdict_through_its_first_window_then_advances_after_its_interval() -> None:
    model = at_step("iris", 1)
    early = without_verdict(model, START + timedelta(minutes=9))
    assert early is not None
    assert (early.decision, early.writes, early.moves_traffic) == ("hold", False, False)
    held = judged(model, START + timedelta(minutes=12), "pass")
    assert (held.decision, held.writes) == ("hold", False)
    advanced = judged(model, START + timedelta(minutes=15), "pass")
    assert (advanced.decision, advanced.after.weights, advanced.moves_traffic) == (
        "advance",
        {"v1": 75, "v2": 25},
        True,
    )
    rolled = judged(model, START + timedelta(minutes=15), "fail")
    assert (rolled.decision, rolled.after.weights, rolled.moves_traffic) == ("rollback", {"v1": 100, "v2": 0}, True)


def test_a_hand_moved_candidate_pauses_and_a_pause_moves_no_traffic() -> None:
    model = spec("iris", {"v1": 70, "v2": 30}, status_at(1))
    assert moved_by_hand(model) == "v2 has weight 30 in the file, and the rollout wrote weight 5"
    paused = without_verdict(model, START + timedelta(minutes=20))
    assert paused is not None
    assert (paused.decision, paused.writes, paused.moves_traffic) == ("paused", True, False)
    assert moved_by_hand(at_step("iris", 1)) is None


def report(auto_merge_rollbacks: bool, *decisions: Decision) -> RolloutReport:
    return RolloutReport("dev", START + timedelta(minutes=15), auto_merge_rollbacks, list(decisions))


LATER = START + timedelta(minutes=15)


def rollback() -> Decision:
    return judged(at_step("iris", 2), LATER, "fail")


def test_only_rollbacks_merge_without_a_review_where_the_stack_allows_it() -> None:
    assert report(True, rollback()).auto_merge is True
    assert report(True, rollback()).as_json()["autoMerge"] is True
    assert report(False, rollback()).auto_merge is False  # without autoMergeRollbacks: reviewed
    assert report(True, judged(at_step("wine", 1), LATER, "pass")).auto_merge is False  # no rollback
    assert report(True).auto_merge is False


@pytest.mark.parametrize(
    "other",
    [
        lambda: judged(at_step("wine", 1), LATER, "pass"),  # advances
        lambda: start(spec("wine", {"v1": 100, "v2": 0}), LATER),  # starts
        lambda: without_verdict(  # resumes: a person removed paused, the step's weights written back
            spec("wine", {"v1": 70, "v2": 30}, status_at(1, decision="paused")), LATER
        ),
    ],
    ids=["advance", "start", "resume"],
)
def test_a_rollback_beside_another_models_traffic_move_is_reviewed(other: Any) -> None:
    moved: Decision = other()
    assert moved.moves_traffic
    mixed = report(True, rollback(), moved)
    assert (mixed.rolled_back, mixed.auto_merge, mixed.as_json()["autoMerge"]) == (True, False, False)
    assert mixed.reviewed_moves == [moved]


def test_a_rollback_beside_status_only_writes_still_merges_without_a_review() -> None:
    """wine's failing verdict counted (failureLimit 2) and chat's pause write the status alone: no
    weight moves but the rollback's."""
    counted = decide(
        spec("wine", {"v1": 95, "v2": 5}, status_at(1), failureLimit=2),
        LATER,
        verdict("fail"),
        stats(5000),
    )
    assert (counted.decision, counted.writes, counted.moves_traffic) == ("hold", True, False)
    moved = spec("chat", {"v1": 70, "v2": 30}, status_at(1))
    paused = without_verdict(moved, LATER)
    assert paused is not None
    assert report(True, rollback(), counted, paused).auto_merge is True


def test_what_a_hand_move_of_a_running_rollout_leads_to() -> None:
    """promote's warning, the model as the move leaves it (tests/cli/test_promote.py runs the command)."""
    stop = "remove `rollout:` from the model to stop it first (the weights stay as they are)"
    where = "model 'iris' has a rollout of v2 in progress (canary, step 1)"
    assert promotion_warning(at_step("iris", 1)) is None  # as the rollout wrote it
    assert promotion_warning(spec("iris", {"v1": 70, "v2": 30})) is None  # not started
    paused = spec("iris", {"v1": 70, "v2": 30}, status_at(1, decision="paused", paused="a person moved it"))
    assert promotion_warning(paused) == (
        f"{where}, paused: resuming it writes its step's weights back over this move; {stop}"
    )
    assert promotion_warning(spec("iris", {"v1": 70, "v2": 30}, status_at(1))) == (
        f"{where}: v2 has weight 30 in the file, and the rollout wrote weight 5, so the next "
        f"`python -m infra rollout` pauses it; {stop}"
    )
    finished = spec("iris", {"v1": 0, "v2": 100}, status_at(3, phase="promoted"))
    assert promotion_warning(finished) is None
