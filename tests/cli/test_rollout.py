"""`python -m infra rollout` from the stack file alone and on analyze's verdict objects: starting, the
weights of each step, pausing on a hand edit and resuming, the decisions a verdict leads to, and every
bad input refused at its line. The decisions on a real Prometheus' figures, hour by hour in a git
repository, are tests/cli/test_rollout_scenario.py's."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
import yaml

from inference_platform.analysis import rollout_decisions
from inference_platform.analysis.verdicts import Candidate, Stats, Verdict
from inference_platform.cli import rollout
from inference_platform.cli.exit_codes import ExitCode
from inference_platform.cli.main import main
from inference_platform.cli.stack_file import read_stack_config
from inference_platform.serving.rollout_spec import format_timestamp
from inference_platform.serving.runtimes import ModelSpec
from tests.conftest import base_config, write_sharded_repository, write_stack_file

START = datetime(2026, 12, 6, 10, 0, tzinfo=UTC)
CLOSED = "http://127.0.0.1:9"  # nothing listens: a run that asks Prometheus exits 4
COMMENT = "# the fraud team owns this model"
NEXT = "# churn: the next model's comment, which a status added above it must not take"


def stack(tmp_path: Path, live: int = 0, **rollout: Any) -> Path:
    """iris (v1 100 - `live`, v2 `live`, v3 a shadow) rolling out v2, with a comment to keep."""
    config = base_config()
    iris = config["inference-platform:models"][0]
    iris["versions"][0]["weight"], iris["versions"][1]["weight"] = 100 - live, live
    iris["rollout"] = {"candidate": "v2", "steps": [5, 25, 50], "interval": "15m", **rollout}
    path = write_stack_file(tmp_path / "Pulumi.test.yaml", config)
    text = path.read_text().replace("  - name: iris\n", f"  {COMMENT}\n  - name: iris\n")
    path.write_text(text.replace("  - name: churn\n", f"  {NEXT}\n  - name: churn\n"))
    return path


def run(path: Path, at: datetime, *extra: str, prometheus: str = CLOSED) -> int:
    given = ["--config", str(path), "--prometheus", prometheus, "--at", at.isoformat()]
    return main(["rollout", "--stack", "test", *given, *extra])


def model(path: Path, name: str = "iris") -> dict[str, Any]:
    config = yaml.safe_load(path.read_text())["config"]
    found: dict[str, Any] = next(m for m in config["inference-platform:models"] if m["name"] == name)
    return found


def weights(path: Path) -> dict[str, Any]:
    return {v["name"]: v.get("weight", f"mirror {v.get('mirrorPercent')}") for v in model(path)["versions"]}


def spec(path: Path) -> ModelSpec:
    _, config = read_stack_config(path)
    return next(m for m in config.models if m.name == "iris")


def test_shares_scale_in_proportion_in_whole_percent() -> None:
    assert rollout_decisions.shares({"v1": 90}, 95) == {"v1": 95}
    assert rollout_decisions.shares({"v1": 60, "v0": 40}, 75) == {"v1": 45, "v0": 30}
    assert rollout_decisions.shares({"a": 1, "b": 1, "c": 1}, 100) == {"a": 34, "b": 33, "c": 33}
    assert rollout_decisions.shares({"a": 70, "b": 20, "c": 10}, 50) == {"a": 35, "b": 10, "c": 5}
    for total in range(101):
        assert sum(rollout_decisions.shares({"a": 33, "b": 33, "c": 24}, total).values()) == total


def test_the_first_run_starts_at_step_one_and_a_second_at_the_same_time_changes_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = stack(tmp_path)
    assert run(path, START, "--format", "json") == ExitCode.OK
    report = json.loads(capsys.readouterr().out)
    (decided,) = report["models"]
    assert decided["decision"] == "advance"
    assert decided["from"]["weights"] == {"v1": 100, "v2": 0}
    assert decided["to"]["weights"] == {"v1": 95, "v2": 5}
    assert decided["to"]["mirrors"] == {"v3": 50}  # the other shadow keeps its mirror
    assert weights(path) == {"v1": 95, "v2": 5, "v3": "mirror 50"}
    status = model(path)["rollout"]["status"]
    assert status == {
        "phase": "canary",
        "step": 1,
        "primary": "v1",
        "baseline": {"v1": 100},
        "since": format_timestamp(START),
        "failures": 0,
        "decision": "advance",
        "reason": "started: step 1 of 3, v2 at 5 %",
    }
    assert COMMENT in path.read_text()
    assert f"  {NEXT}\n  - name: churn\n" in path.read_text()
    written = path.read_text()
    # The step's first window is not over: held from the file alone (Prometheus is not asked).
    assert run(path, START + timedelta(minutes=5), "--format", "json") == ExitCode.OK
    (held,) = json.loads(capsys.readouterr().out)["models"]
    assert held["decision"] == "hold"
    assert "first window (10m) ends at 2026-12-06T10:10:00Z" in held["reason"]
    assert path.read_text() == written


@pytest.mark.parametrize(
    ("live", "shadow", "expected"),
    [(10, False, (2, 25)), (25, False, (2, 25)), (10, True, (2, 25)), (50, False, (3, 50))],
    ids=["between steps", "at a step", "shadowFirst skipped", "at the last step"],
)
def test_a_candidate_with_traffic_starts_at_the_first_step_at_or_above_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], live: int, shadow: bool, expected: tuple[int, int]
) -> None:
    """A rollout never cuts its candidate's traffic: v2 at 10 % starts at step 2 (25 %), not at 5 %;
    at 25 % it stays there; serving live already, it skips its shadow phase. `expected`: the step
    and v2's weight there."""
    step, after = expected
    settings: dict[str, Any] = {"shadowFirst": {"mirrorPercent": 50}} if shadow else {}
    path = stack(tmp_path, live, **settings)
    assert run(path, START, "--format", "json") == ExitCode.OK
    (decided,) = json.loads(capsys.readouterr().out)["models"]
    assert (decided["decision"], decided["to"]["phase"], decided["to"]["step"]) == ("advance", "canary", step)
    assert weights(path) == {"v1": 100 - after, "v2": after, "v3": "mirror 50"}
    skipped = "; its shadow phase is skipped" if shadow else ""
    assert decided["reason"] == (
        f"started: step {step} of 3, v2 at {after} % (it served {live} % already: a rollout never cuts its "
        f"candidate's traffic{skipped})"
    )
    assert model(path)["rollout"]["status"]["baseline"] == {"v1": 100 - live}


def test_a_candidate_above_every_step_is_refused_at_the_steps(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """v1 50, v2 50 and a rollout of v2 on steps [20, 40]: starting would cut v2 to 20 %."""
    path = stack(tmp_path, 50, steps=[20, 40])
    text = path.read_text()
    assert run(path, START) == ExitCode.CONFIG_ERROR
    line = next(n for n, found in enumerate(text.splitlines(), start=1) if found.strip() == "steps:")
    assert capsys.readouterr().err == (
        "invalid stack config (1 problem):\n"
        f"  {path}:{line}:7: models[0] (iris).rollout.steps: v2 has weight 50 already, above every step (20, 40): "
        "a rollout never cuts its candidate's traffic; add a step of at least 50, or move the traffic with "
        "`python -m infra promote`\n"
    )
    assert path.read_text() == text


def test_a_shadow_first_rollout_starts_as_a_shadow(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = stack(tmp_path, shadowFirst={"mirrorPercent": 50, "duration": "30m"})
    assert run(path, START, "--format", "json") == ExitCode.OK
    (decided,) = json.loads(capsys.readouterr().out)["models"]
    assert decided["to"]["phase"] == "shadow"
    # v2 mirrors half the requests; users see only v1's answers.
    assert weights(path) == {"v1": 100, "v2": "mirror 50", "v3": "mirror 50"}
    assert model(path)["rollout"]["status"]["phase"] == "shadow"


def test_a_step_whose_window_is_over_asks_prometheus_and_writes_nothing_when_it_cannot(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = stack(tmp_path)
    run(path, START)
    written = path.read_text()
    capsys.readouterr()
    assert run(path, START + timedelta(minutes=15)) == ExitCode.PROMETHEUS_UNAVAILABLE
    assert "cannot reach Prometheus" in capsys.readouterr().err
    assert path.read_text() == written


def test_a_hand_edit_pauses_and_removing_paused_resumes(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = stack(tmp_path)
    run(path, START)
    capsys.readouterr()
    text = path.read_text()
    path.write_text(text.replace("weight: 95", "weight: 70").replace("weight: 5\n", "weight: 30\n"))
    assert run(path, START + timedelta(minutes=20), "--format", "json") == ExitCode.OK
    (decided,) = json.loads(capsys.readouterr().out)["models"]
    assert decided["decision"] == "paused"
    status = model(path)["rollout"]["status"]
    assert status["paused"].startswith("v2 has weight 30 in the file, and the rollout wrote weight 5")
    assert status["since"] == format_timestamp(START)
    paused = path.read_text()
    assert weights(path) == {"v1": 70, "v2": 30, "v3": "mirror 50"}
    # Paused: nothing moves, however long.
    assert run(path, START + timedelta(hours=5)) == ExitCode.OK
    assert path.read_text() == paused
    capsys.readouterr()
    # A person removes `paused`: the rollout writes its step back, and the step's time starts again.
    lines = [line for line in paused.splitlines(keepends=True) if not line.lstrip().startswith("paused:")]
    path.write_text("".join(lines))
    later = START + timedelta(hours=6)
    assert run(path, later, "--format", "json") == ExitCode.OK
    (resumed,) = json.loads(capsys.readouterr().out)["models"]
    assert resumed["decision"] == "resume"
    assert weights(path) == {"v1": 95, "v2": 5, "v3": "mirror 50"}
    status = model(path)["rollout"]["status"]
    assert (status["decision"], status["since"], "paused" in status) == ("resume", format_timestamp(later), False)
    assert COMMENT in path.read_text()


def stats(requests: int, errors: float = 0.001, p95: float = 90.0) -> Stats:
    return Stats(requests, errors, 50.0, p95, 120.0)


def candidate(verdict: Verdict, reasons: list[str] | None = None) -> Candidate:
    return Candidate("v2", "canary", stats(500, 0.2 if verdict == "fail" else 0.001), verdict, reasons or [])


def started(tmp_path: Path, **settings: Any) -> Path:
    path = stack(tmp_path, **settings)
    run(path, START)
    return path


def decide(path: Path, at: datetime, verdict: Verdict, reasons: list[str] | None = None) -> rollout_decisions.Decision:
    return rollout_decisions.decide(spec(path), at, candidate(verdict, reasons), stats(5000))


def apply(path: Path, decided: rollout_decisions.Decision) -> None:
    report = rollout_decisions.RolloutReport("test", START, False, [decided])
    rollout.write(path, None, report)


def test_a_pass_advances_only_after_the_interval_and_the_last_step_promotes(tmp_path: Path) -> None:
    path = started(tmp_path, retirePrevious=True)
    early = decide(path, START + timedelta(minutes=12), "pass")
    assert (early.decision, early.writes) == ("hold", False)
    assert "at this step for 12m of 15m" in early.reason
    at = START
    for step, weight in ((2, 25), (3, 50)):
        at += timedelta(minutes=15)
        decided = decide(path, at, "pass")
        assert decided.decision == "advance"
        apply(path, decided)
        assert weights(path) == {"v1": 100 - weight, "v2": weight, "v3": "mirror 50"}
        assert model(path)["rollout"]["status"]["step"] == step
    at += timedelta(minutes=15)
    promoted = decide(path, at, "pass")
    assert "promoted: v2 takes 100 %, v1 retired" in promoted.reason
    apply(path, promoted)
    assert weights(path) == {"v2": 100, "v3": "mirror 50"}  # v1 retired
    status = model(path)["rollout"]["status"]
    assert (status["phase"], status["step"]) == ("promoted", 3)
    # Finished: nothing to decide, and the model may now have a single live version.
    written = path.read_text()
    assert run(path, at + timedelta(hours=1)) == ExitCode.OK
    assert path.read_text() == written


def test_failures_are_counted_once_per_time_then_roll_back(tmp_path: Path) -> None:
    path = started(tmp_path, failureLimit=2)
    at = START + timedelta(minutes=11)
    reasons = ["error ratio 20.00% is 19.90 percentage points above the primary's 0.10% (allowed 1 percentage point)"]
    first = decide(path, at, "fail", reasons)
    assert (first.decision, first.writes) == ("hold", True)
    assert first.reason.startswith("failing verdict 1 of 2 in a row: error ratio 20.00%")
    apply(path, first)
    status = model(path)["rollout"]["status"]
    assert (status["failures"], status["failedAt"]) == (1, format_timestamp(at))
    again = decide(path, at, "fail", reasons)  # the same time: counted already
    assert (again.decision, again.writes) == ("hold", False)
    # Too little data neither counts nor breaks the run; a second failure rolls back.
    assert decide(path, at + timedelta(minutes=5), "insufficient-data").writes is False
    rolled = decide(path, at + timedelta(minutes=10), "fail", reasons)
    assert rolled.decision == "rollback"
    assert "rolled back after 2 failing verdicts in a row" in rolled.reason
    assert "500 requests (primary 5000)" in rolled.reason
    apply(path, rolled)
    assert weights(path) == {"v1": 100, "v2": 0, "v3": "mirror 50"}
    assert model(path)["rollout"]["status"]["phase"] == "rolled-back"


def test_a_pass_ends_a_run_of_failures(tmp_path: Path) -> None:
    path = started(tmp_path, failureLimit=3)
    apply(path, decide(path, START + timedelta(minutes=11), "fail", ["slow"]))
    passed = decide(path, START + timedelta(minutes=12), "pass")
    assert (passed.decision, passed.writes) == ("hold", True)
    apply(path, passed)
    assert model(path)["rollout"]["status"]["failures"] == 0
    assert "failedAt" not in model(path)["rollout"]["status"]


def test_a_rollback_of_a_shadow_stops_its_mirror(tmp_path: Path) -> None:
    path = started(tmp_path, shadowFirst={"mirrorPercent": 50})
    rolled = decide(path, START + timedelta(minutes=20), "fail", ["disagrees"])
    apply(path, rolled)
    assert weights(path) == {"v1": 100, "v2": 0, "v3": "mirror 50"}


BAD_INPUT = [
    ({"candidate": "v9"}, "rollout.candidate: 'v9' is not one of the model's versions"),
    ({"candidate": "v1"}, "rollout.candidate: 'v1' is the model's primary"),
    ({"steps": [5, 5]}, "rollout.steps[1]: 5 is not above the step before it (5)"),
    ({"steps": [0, 50]}, "rollout.steps[0]: must be at least 1"),
    ({"steps": [50, 100]}, "rollout.steps[1]: must be at most 99"),
    ({"interval": "5m"}, "rollout.interval: 5m is shorter than analysis.window (10m)"),
    ({"failureLimit": 0}, "rollout.failureLimit: must be at least 1"),
    ({"shadowFirst": {"mirrorPercent": 0}}, "rollout.shadowFirst.mirrorPercent: must be at least"),
    ({"shadowFirst": {"mirrorPercent": 101}}, "rollout.shadowFirst.mirrorPercent: must be at most"),
    (
        {"status": {"phase": "canary", "step": "two"}},
        "remove rollout.status to restart the rollout from its first step",
    ),
]


@pytest.mark.parametrize(("settings", "message"), BAD_INPUT, ids=[m.split(":")[0] for _, m in BAD_INPUT])
def test_bad_input_is_refused_at_its_line_and_nothing_is_written(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], settings: dict[str, Any], message: str
) -> None:
    path = stack(tmp_path, **settings)
    text = path.read_text()
    assert run(path, START) == ExitCode.CONFIG_ERROR
    err = capsys.readouterr().err
    assert message in err
    assert f"{path}:" in err
    assert "models[0] (iris).rollout" in err
    assert path.read_text() == text


def test_a_rollout_on_a_model_with_one_version_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    config = base_config()
    churn = config["inference-platform:models"][1]
    churn["rollout"] = {"candidate": "v1", "steps": [50], "interval": "15m"}
    path = write_stack_file(tmp_path / "Pulumi.test.yaml", config)
    assert run(path, START) == ExitCode.CONFIG_ERROR
    assert "models[1] (churn).rollout: the model has one version" in capsys.readouterr().err


def test_bad_usage_is_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = stack(tmp_path)
    text = path.read_text()
    assert main(["rollout", "--stack", "test", "--config", str(path), "--prometheus", CLOSED, "--at", "soon"]) == 2
    assert "rollout: --at:" in capsys.readouterr().err
    with pytest.raises(SystemExit) as exited:
        main(["rollout", "--stack", "test", "--config", str(path), "--prometheus", "127.0.0.1:9090"])
    assert exited.value.code == 2
    assert path.read_text() == text


def test_markdown_report_and_out_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = stack(tmp_path)
    body = tmp_path / "body.md"
    assert run(path, START, "--format", "markdown", "--markdown-out", str(body)) == ExitCode.OK
    out = capsys.readouterr().out
    assert out == body.read_text()
    assert out.startswith("## Rollouts: stack `test`\n")
    before, after = "before: v1 100 %, v2 0 %, v3 mirrors 50 %", "step 1: v1 95 %, v2 5 %, v3 mirrors 50 %"
    assert f"| iris | v2 | advance | {before} | {after} |" in out


def test_a_shard_rolls_out_its_own_models_and_its_platform_stack_none(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """In an environment of several stacks each shard's file holds its rollouts; the edit is validated
    with the whole environment, and the platform stack's run touches no shard's file."""
    write_sharded_repository(tmp_path)
    shard = tmp_path / "Pulumi.prod-a.yaml"
    document = yaml.safe_load(shard.read_text())
    (iris,) = document["config"]["inference-platform:models"]
    iris["rollout"] = {"candidate": "v2", "steps": [20], "interval": "10m"}
    shard.write_text(yaml.safe_dump(document, sort_keys=False))
    platform_file = tmp_path / "Pulumi.prod.yaml"
    platform = platform_file.read_text()
    before = shard.read_text()
    given = ["--prometheus", CLOSED, "--at", START.isoformat(), "--format", "json"]
    assert main(["rollout", "--stack", "prod", "--config", str(platform_file), *given]) == ExitCode.OK
    assert json.loads(capsys.readouterr().out)["models"] == []
    assert shard.read_text() == before
    assert main(["rollout", "--stack", "prod-a", "--config", str(shard), *given]) == ExitCode.OK
    assert [m["decision"] for m in json.loads(capsys.readouterr().out)["models"]] == ["advance"]
    assert weights(shard) == {"v1": 80, "v2": 20, "v3": "mirror 50"}
    assert platform_file.read_text() == platform


def test_the_markdown_body_says_revert_only_where_the_commit_moves_traffic(tmp_path: Path) -> None:
    """A step's body says to revert the commit to undo it; a failing verdict counted (a hold that
    writes the status alone) and a run that wrote nothing say what they are instead."""
    path = started(tmp_path, failureLimit=2)
    at = START + timedelta(minutes=11)
    counted = decide(path, at, "fail", ["slow"])
    held = decide(path, at, "insufficient-data", ["too few"])
    advanced = decide(path, START + timedelta(minutes=15), "pass")
    footer = "Written by `python -m infra rollout` (docs/rollouts.md): "
    bodies = {
        name: rollout.markdown(rollout_decisions.RolloutReport("test", at, False, [decided])).splitlines()[-1]
        for name, decided in (("counted", counted), ("held", held), ("advanced", advanced))
    }
    assert bodies == {
        "counted": footer
        + "this commit moves no traffic; it records the rollout's status (a failing verdict counted, a pause).",
        "held": footer + "nothing was written; the stack file is unchanged.",
        "advanced": footer + "revert this commit to undo the step.",
    }
