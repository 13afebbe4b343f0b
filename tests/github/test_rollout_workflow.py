"""The rollout workflow (rollout.yml, each stack's job in rollout-stack.yml): its shape, and its own
step scripts run by bash in a real git checkout whose remote is a bare repository, with the real
`python -m infra rollout` (a real Prometheus, backfilled, for a rollback). Only GitHub's API is not
run: `gh` is a script on PATH that records its calls and answers `gh pr list` with the open pull
requests a test gives it."""

from __future__ import annotations

import contextlib
import io
import json
import os
import re
import shlex
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
import yaml

from inference_platform.cli.exit_codes import ExitCode
from inference_platform.cli.main import main
from tests.cli.test_analyze import STEP
from tests.conftest import ROOT, base_config, shard_stack_config, write_sharded_repository, write_stack_file
from tests.github.test_workflows import environments, git, run_step, select_step, steps, triggers, workflow
from tests.platform.istio_series import DURATIONS_TYPE, REQUESTS_TYPE, request_samples
from tests.platform.prometheus_harness import RunningPrometheus, backfilled, prometheus
from tests.ports import free_port

REPO = "acme/inference-platform"
STACK = "dev"
STACK_FILE = f"Pulumi.{STACK}.yaml"
TOKEN = "ghs_rolloutTokenNeverPrinted0123456789"
ROLLOUT = {"candidate": "v2", "steps": [5, 25, 50], "interval": "15m"}


def stack_step(name: str) -> dict[str, Any]:
    (step,) = [s for s in steps(workflow("rollout-stack.yml")["jobs"]["rollout"]) if s.get("name") == name]
    return step


DECIDE = "Decide each rollout"
PUSH = "Push the rollout branch and open or update its pull request"


def script(name: str) -> str:
    text: str = stack_step(name)["run"]
    return text


# The workflows' shape.


def test_every_15_minutes_and_by_hand_for_the_stacks_with_a_rollout_in_progress() -> None:
    document = workflow("rollout.yml")
    assert triggers(document) == {"schedule": [{"cron": "*/15 * * * *"}], "workflow_dispatch": None}
    words = shlex.split(select_step("rollout.yml").replace("\\\n", " "), comments=True)
    command = words[: words.index("--github-output") + 1]
    assert command == [
        *[".venv/bin/python", "-m", "infra", "stacks", "--all", "--rollouts"],
        *["--environments", "dev,prod", "--github-output"],
    ]
    jobs = document["jobs"]
    # As deploy.yml: the environments it deploys, each stack's job in that environment.
    assert environments(select_step("rollout.yml")) == environments(select_step("deploy.yml"))
    for name, github_environment in (("dev", "dev"), ("prod", "production")):
        job = jobs[name]
        assert job["uses"] == "./.github/workflows/rollout-stack.yml"
        assert job["with"] == {"stack": "${{ matrix.stack }}", "environment": github_environment}
        assert job["strategy"]["matrix"] == {"stack": f"${{{{ fromJSON(needs.select.outputs.{name}) }}}}"}
        assert job["if"] == f"needs.select.outputs.{name} != '[]'"  # nothing in rollout: no matrix to expand
        assert job["secrets"] == {name: f"${{{{ secrets.{name} }}}}" for name in ("ROLLOUT_TOKEN", "PROMETHEUS_TOKEN")}
        assert jobs["select"]["outputs"][name] == f"${{{{ steps.select.outputs.{name} }}}}"


def test_each_stacks_job_runs_in_its_environment_one_at_a_time_on_main() -> None:
    (job,) = workflow("rollout-stack.yml")["jobs"].values()
    assert job["environment"] == "${{ inputs.environment }}"
    assert job["concurrency"] == {"group": "rollout-${{ inputs.stack }}", "cancel-in-progress": False}
    (checkout,) = [s for s in steps(job) if s.get("uses", "").startswith("actions/checkout@")]
    assert checkout["with"] == {"ref": "main", "persist-credentials": False}
    assert stack_step(DECIDE)["env"]["PROMETHEUS_URL"] == "${{ vars.PROMETHEUS_URL }}"
    assert stack_step(DECIDE)["env"]["PROMETHEUS_TOKEN"] == "${{ secrets.PROMETHEUS_TOKEN }}"
    assert stack_step(PUSH)["env"]["GH_TOKEN"] == "${{ secrets.ROLLOUT_TOKEN }}"
    assert job["permissions"] == {"contents": "read"}  # the push and gh use ROLLOUT_TOKEN


@pytest.mark.parametrize("name", ["rollout.yml", "rollout-stack.yml"])
def test_no_expression_inside_a_script(name: str) -> None:
    """Every value reaches the scripts through env (zizmor's template-injection): what the tests
    run is what GitHub runs."""
    for job in workflow(name)["jobs"].values():
        for step in job.get("steps", []):
            assert "${{" not in step.get("run", ""), step.get("name")


# The select step, on a real checkout.


def test_the_select_step_lists_each_environments_stacks_in_rollout(tmp_path: Path) -> None:
    """dev's one stack and prod's shard prod-b each have a rollout in progress; prod's platform stack
    and prod-a none: each environment's matrix is its stacks with one."""
    repository = tmp_path / "checkout"
    repository.mkdir()
    write_sharded_repository(repository)
    for name, config in ((STACK, base_config()), ("prod-b", shard_stack_config("prod", ["iris"]))):
        config["inference-platform:models"][0]["rollout"] = ROLLOUT
        write_stack_file(repository / f"Pulumi.{name}.yaml", config)
    (repository / ".venv").symlink_to(ROOT / ".venv")
    (repository / "infra").symlink_to(ROOT / "infra")
    (runner := tmp_path / "runner").mkdir()
    outputs = run_step(select_step("rollout.yml"), repository, runner)
    assert (outputs["dev"], outputs["prod"]) == (["dev"], ["prod-b"])
    assert (outputs["stacks"], outputs["prod-first"], outputs["prod-shards"]) == (["dev", "prod-b"], [], ["prod-b"])


# The stack's job: its decide and push steps, on a real checkout of a real remote.

# `gh` as the workflow calls it: each call recorded, and the text of a --body-file after it;
# `gh pr list` answers $GH_OPEN through the call's own --jq filter (real jq, as gh applies it);
# `gh pr create` prints the new pull request's address, as gh does.
RECORDER = """#!/usr/bin/env bash
printf '%s\\n' "$*" >> "$GH_LOG"
filter="" previous=""
for argument; do
  if [ "$previous" = --jq ]; then filter=$argument; fi
  if [ "$previous" = --body-file ]; then cat "$argument" >> "$GH_LOG"; fi
  previous=$argument
done
case "$1 $2" in
  "pr list") jq -r "$filter" <<< "$GH_OPEN" ;;
  "pr create") echo "https://github.com/$4/pull/17" ;;
esac
"""


@dataclass
class Origin:
    """GitHub's side: the bare repository the workflow pushes to, and a clone of it where main moves."""

    remote: Path
    upstream: Path

    def commit(self, message: str) -> str:
        git(self.upstream, "add", "--all")
        git(self.upstream, "commit", "--quiet", f"--message={message}")
        git(self.upstream, "push", "--quiet", str(self.remote), "main")
        return git(self.upstream, "rev-parse", "HEAD")

    def log(self, *args: str) -> str:
        return git(self.remote, *args)


def origin(tmp_path: Path, config: dict[str, Any]) -> Origin:
    remote = tmp_path / "remote.git"
    git(tmp_path, "init", "--quiet", "--bare", "--initial-branch=main", str(remote))
    upstream = tmp_path / "upstream"
    upstream.mkdir()
    (upstream / "Pulumi.yaml").write_bytes((ROOT / "Pulumi.yaml").read_bytes())
    write_stack_file(upstream / STACK_FILE, config)
    (upstream / ".gitignore").write_text(".venv\ninfra\n")
    git(upstream, "init", "--quiet", "--initial-branch=main")
    made = Origin(remote, upstream)
    made.commit("base")
    return made


def in_rollout(status: dict[str, Any] | None = None) -> dict[str, Any]:
    """base_config with iris rolling out v2 (iris: v1 90, v2 10, v3 a shadow)."""
    config = base_config()
    config["inference-platform:models"][0]["rollout"] = ROLLOUT | ({"status": status} if status else {})
    return config


@dataclass
class Runner:
    """One run of the stack's job: a fresh checkout of main (as actions/checkout makes it, with the
    program and its environment beside it), its temporary directory and its `gh`."""

    checkout: Path
    temp: Path
    gh_log: Path

    def run(self, name: str, **env: str) -> subprocess.CompletedProcess[str]:
        environment = os.environ | {
            "PATH": f"{self.temp / 'bin'}:{os.environ['PATH']}",
            "RUNNER_TEMP": str(self.temp),
            "GITHUB_OUTPUT": str(self.temp / "outputs"),
            "GITHUB_STEP_SUMMARY": str(self.temp / "summary"),
            "GH_LOG": str(self.gh_log),
            "STACK": STACK,
            "REPO": REPO,
        }
        return subprocess.run(
            ["bash", "-e", "-c", script(name)],
            cwd=self.checkout,
            env=environment | env,
            capture_output=True,
            text=True,
            check=False,
        )

    def decide(self, prometheus_url: str) -> subprocess.CompletedProcess[str]:
        return self.run(DECIDE, PROMETHEUS_URL=prometheus_url)

    def outputs(self) -> dict[str, str]:
        path = self.temp / "outputs"
        lines = path.read_text().splitlines() if path.exists() else []
        return dict(line.split("=", 1) for line in lines)

    def push(self, remote: Path, code: str, open_requests: list[dict[str, Any]]) -> subprocess.CompletedProcess[str]:
        done = self.run(PUSH, CODE=code, GH_TOKEN=TOKEN, REMOTE=str(remote), GH_OPEN=json.dumps(open_requests))
        assert done.returncode == 0, done.stdout + done.stderr
        assert TOKEN not in done.stdout + done.stderr
        return done

    def gh_calls(self) -> list[str]:
        return self.gh_log.read_text().splitlines() if self.gh_log.exists() else []


def runner(tmp_path: Path, made: Origin, name: str) -> Runner:
    checkout = tmp_path / name / "checkout"
    temp = tmp_path / name / "temp"
    (temp / "bin").mkdir(parents=True)
    (temp / "bin" / "gh").write_text(RECORDER)
    (temp / "bin" / "gh").chmod(0o755)
    git(tmp_path, "clone", "--quiet", "--branch=main", str(made.remote), str(checkout))
    (checkout / ".venv").symlink_to(ROOT / ".venv")
    (checkout / "infra").symlink_to(ROOT / "infra")
    return Runner(checkout, temp, tmp_path / name / "gh.log")


def closed_port() -> str:
    """A Prometheus address where nothing listens: a run that asks it exits 4."""
    return f"http://127.0.0.1:{free_port()}"


def rollout_branch(made: Origin) -> tuple[str, str, list[str]]:
    """The branch's one commit on top of main: (its parent, its message, the files it changes)."""
    commits = made.log("rev-list", f"main..rollout/{STACK}").splitlines()
    assert len(commits) == 1, commits
    parent = made.log("rev-parse", f"rollout/{STACK}^")
    message = made.log("log", "-1", "--format=%B", f"rollout/{STACK}")
    changed = made.log("diff", "--name-only", "main", f"rollout/{STACK}").splitlines()
    return parent, message, changed


def test_a_started_rollout_is_pushed_as_one_commit_on_main_with_its_pull_request(tmp_path: Path) -> None:
    """The first run starts iris's rollout (no Prometheus asked): the branch rollout/dev holds one
    commit of Pulumi.dev.yaml on top of main, and a pull request is opened with the report. main
    then moves; the next run's commit replaces the first (force-pushed) and the same pull request
    is edited, not a second one opened."""
    made = origin(tmp_path, in_rollout())
    base = made.log("rev-parse", "main")
    first = runner(tmp_path, made, "first")

    decided = first.decide(closed_port())

    assert decided.returncode == 0, decided.stderr
    assert first.outputs() == {"code": "0"}
    report = json.loads((first.temp / "report.json").read_text())
    (iris,) = report["models"]
    assert (iris["model"], iris["decision"]) == ("iris", "advance")
    body = (first.temp / "body.md").read_text()
    assert body.startswith(f"## Rollouts: stack `{STACK}`")
    assert body in (first.temp / "summary").read_text()

    first.push(made.remote, "0", [])

    parent, message, changed = rollout_branch(made)
    assert (parent, changed) == (base, [STACK_FILE])
    assert message.splitlines() == [f"rollout({STACK}): iris advance", "", f"iris: advance: {iris['reason']}"]
    pushed = yaml.safe_load(made.log("show", f"rollout/{STACK}:{STACK_FILE}"))
    assert pushed == yaml.safe_load((first.checkout / STACK_FILE).read_text())
    weights = {v["name"]: v.get("weight") for v in pushed["config"]["inference-platform:models"][0]["versions"]}
    assert weights == {"v1": 75, "v2": 25, "v3": None}  # v2 had 10 %: the first step at or above it
    assert first.gh_calls() == [
        f"pr list --repo {REPO} --head rollout/{STACK} --base main --state open "
        "--json number,labels,autoMergeRequest --jq "
        '.[0] // empty | "\\(.number) \\(any(.labels[]; .name == "rollback")) \\(.autoMergeRequest != null)"',
        f"pr create --repo {REPO} --base main --head rollout/{STACK} --title Rollout: {STACK} "
        f"--body-file {first.temp}/body.md",
        *body.splitlines(),
    ]

    # main moves (someone merges a change to the stack file); the pull request is still open.
    with (made.upstream / STACK_FILE).open("a") as file:
        file.write("# reviewed by the platform team\n")
    moved = made.commit("a comment")
    replaced = made.log("rev-parse", f"rollout/{STACK}")
    second = runner(tmp_path, made, "second")
    assert second.decide(closed_port()).returncode == 0
    second.push(made.remote, "0", [{"number": 17, "labels": [], "autoMergeRequest": None}])

    parent, _, changed = rollout_branch(made)
    assert (parent, changed) == (moved, [STACK_FILE])
    ancestor = ["git", "merge-base", "--is-ancestor", replaced, f"rollout/{STACK}"]
    assert subprocess.run(ancestor, cwd=made.remote, check=False).returncode == 1  # replaced, not built upon
    assert "# reviewed by the platform team" in made.log("show", f"rollout/{STACK}:{STACK_FILE}")
    calls = second.gh_calls()
    assert calls[1] == f"pr edit 17 --repo {REPO} --title Rollout: {STACK} --body-file {second.temp}/body.md"
    assert not any(call.startswith("pr create") for call in calls)
    assert not any(call.startswith(("label", "pr merge")) or "--add-label" in call for call in calls)


def test_the_push_gives_git_the_token_only_through_its_credential_helper(tmp_path: Path) -> None:
    """The helper the push step configures answers git's request for github.com's credentials with
    the token from the environment (the bare remote of the other tests asks for none)."""
    (helper,) = re.findall(r"-c credential\.helper='([^']+)'", script(PUSH))
    done = subprocess.run(
        ["git", "-c", "credential.helper=", "-c", f"credential.helper={helper}", "credential", "fill"],
        input=f"protocol=https\nhost=github.com\npath={REPO}.git\n\n",
        env=os.environ | {"GH_TOKEN": TOKEN, "GIT_TERMINAL_PROMPT": "0"},
        capture_output=True,
        text=True,
        check=True,
        cwd=tmp_path,
    )
    assert done.stdout.splitlines()[-2:] == ["username=x-access-token", f"password={TOKEN}"]
    assert TOKEN not in script(PUSH)


def test_a_run_that_changes_nothing_pushes_nothing(tmp_path: Path) -> None:
    """iris's rollout is finished (promoted): nothing to decide, the file unchanged, no branch, no `gh`."""
    status = {
        "phase": "promoted",
        "step": 3,
        "primary": "v1",
        "baseline": {"v1": 90},
        "since": "2026-12-06T02:00:00Z",
        "decision": "advance",
    }
    made = origin(tmp_path, in_rollout(status))
    run = runner(tmp_path, made, "run")
    assert run.decide(closed_port()).returncode == 0
    assert json.loads((run.temp / "report.json").read_text())["models"] == []
    done = run.push(made.remote, "0", [])
    assert "nothing to push" in done.stdout
    assert made.log("for-each-ref", "--format=%(refname)", "refs/heads") == "refs/heads/main"
    assert run.gh_calls() == []


def test_prometheus_unreachable_fails_the_job_and_writes_nothing(tmp_path: Path) -> None:
    """iris at step 1 since long ago: the run must ask Prometheus, which does not answer (exit 4):
    the step fails with that code, the file is as it was, and no code is handed to the push."""
    made = origin(tmp_path, in_rollout())
    first = runner(tmp_path, made, "first")
    assert first.decide(closed_port()).returncode == 0
    started = (first.checkout / STACK_FILE).read_text()
    merged, count = re.subn(r"since: .*", "since: '2026-12-01T00:00:00Z'", started)
    assert count == 1
    (made.upstream / STACK_FILE).write_text(merged)
    made.commit("the start, merged")
    later = runner(tmp_path, made, "later")

    done = later.decide(closed_port())

    assert done.returncode == ExitCode.PROMETHEUS_UNAVAILABLE
    assert "::error::infra rollout exited 4: nothing is pushed" in done.stdout
    assert later.outputs() == {}
    assert git(later.checkout, "status", "--porcelain") == ""


def test_without_a_prometheus_url_the_job_says_which_variable(tmp_path: Path) -> None:
    made = origin(tmp_path, in_rollout())
    run = runner(tmp_path, made, "run")
    done = run.decide("")
    assert done.returncode == ExitCode.CONFIG_ERROR
    assert "no PROMETHEUS_URL: set it as a variable of this stack's GitHub environment" in done.stdout
    assert git(run.checkout, "status", "--porcelain") == ""


def test_a_pull_request_no_longer_a_rollback_loses_its_label_and_auto_merge(tmp_path: Path) -> None:
    """An earlier run's rollback is still open, labelled and set to merge; this run's decision is
    not a rollback (the verdict passed since): the commit replaces it, and the pull request is no
    longer merged without a review."""
    made = origin(tmp_path, in_rollout())
    run = runner(tmp_path, made, "run")
    assert run.decide(closed_port()).returncode == 0
    open_rollback = {"number": 17, "labels": [{"name": "rollback"}], "autoMergeRequest": {"mergeMethod": "SQUASH"}}
    run.push(made.remote, "0", [open_rollback])
    assert run.gh_calls()[-2:] == [
        f"pr edit 17 --repo {REPO} --remove-label rollback",
        f"pr merge 17 --repo {REPO} --disable-auto",
    ]


# A rollback, decided by the real command on a real Prometheus' figures.

MINUTES = 30


def failing_candidate(start: int) -> str:
    """iris's series, as Istio's sidecars report them: v1 answers 9 requests a second, all well; v2,
    the candidate, 1 a second, a fifth of them 503. And wine's, whose candidate does as well as its
    primary: both answer every request."""
    times = [start + step * STEP for step in range(MINUTES * 60 // STEP + 1)]
    requests, durations = [REQUESTS_TYPE], [DURATIONS_TYPE]
    for model, version, rate, failing in (
        ("iris", "v1", 9.0, 0.0),
        ("iris", "v2", 1.0, 0.2),
        ("wine", "v1", 9.0, 0.0),
        ("wine", "v2", 1.0, 0.0),
    ):
        added = [(rate * STEP * (1 - failing), rate * STEP * failing)] * len(times)
        answered, timed = request_samples(model, version, times, added)
        requests += answered
        durations += timed
    return "\n".join([*requests, *durations, "# EOF"]) + "\n"


def with_wine(config: dict[str, Any]) -> dict[str, Any]:
    """The config with a second model in rollout beside iris: wine (v1 100, v2 0) rolling out v2."""
    wine = {
        "name": "wine",
        "runtime": "mlserver",
        "versions": [
            {"name": "v1", "modelUri": "pvc://models/wine/v1", "weight": 100},
            {"name": "v2", "modelUri": "pvc://models/wine/v2", "weight": 0},
        ],
        "rollout": ROLLOUT,
    }
    config["inference-platform:models"].append(wine)
    return config


@pytest.fixture(scope="module")
def failing(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[RunningPrometheus, int]]:
    """A Prometheus whose series end now: the workflow's step runs `infra rollout` as of now."""
    directory = tmp_path_factory.mktemp("prometheus")
    start = int(time.time()) - MINUTES * 60
    with prometheus(directory, backfilled(directory, failing_candidate(start))) as running:
        yield running, start


def rolled_back(
    tmp_path: Path, failing: tuple[RunningPrometheus, int], auto_merge: bool, mixed: bool = False
) -> tuple[Origin, Runner]:
    """main holds iris's rollout started when the series start (as the workflow's first pull request
    left it, merged); the decide step, now, rolls v2 back (exit 5): its verdict fails. `mixed`: wine's
    rollout, started with it, advances in the same run (its verdict passes)."""
    running, start = failing
    config = in_rollout() | {"inference-platform:rollouts": {"autoMergeRollbacks": auto_merge}}
    if mixed:
        config = with_wine(config)
    made = origin(tmp_path, config)
    at = datetime.fromtimestamp(start, UTC).isoformat()
    given = ["--config", str(made.upstream / STACK_FILE), "--prometheus", closed_port(), "--at", at]
    with contextlib.redirect_stdout(io.StringIO()):
        assert main(["rollout", "--stack", STACK, *given]) == ExitCode.OK
    made.commit("rollout(dev): iris advance")
    run = runner(tmp_path, made, "run")
    done = run.decide(running.url)
    assert done.returncode == 0, done.stdout + done.stderr
    assert run.outputs() == {"code": str(ExitCode.CANDIDATE_FAILED)}
    return made, run


@pytest.mark.slow
@pytest.mark.parametrize("auto_merge", [False, True], ids=["a person merges", "autoMergeRollbacks"])
def test_a_rollback_is_labelled_and_merged_without_review_only_where_the_stack_allows(
    tmp_path: Path, failing: tuple[RunningPrometheus, int], auto_merge: bool
) -> None:
    made, run = rolled_back(tmp_path, failing, auto_merge)
    report = json.loads((run.temp / "report.json").read_text())
    (iris,) = report["models"]
    assert (iris["decision"], report["autoMergeRollbacks"], report["autoMerge"]) == ("rollback", auto_merge, auto_merge)

    run.push(made.remote, str(ExitCode.CANDIDATE_FAILED), [])

    _, message, changed = rollout_branch(made)
    assert changed == [STACK_FILE]
    assert message.splitlines()[0] == f"rollout({STACK}): iris rollback"
    pushed = yaml.safe_load(made.log("show", f"rollout/{STACK}:{STACK_FILE}"))
    versions = pushed["config"]["inference-platform:models"][0]["versions"]
    assert {v["name"]: v.get("weight") for v in versions} == {"v1": 100, "v2": 0, "v3": None}
    calls = run.gh_calls()
    assert calls[1].startswith(f"pr create --repo {REPO} ")
    labelled = [
        f"label create rollback --repo {REPO} --color B60205 --force "
        "--description infra rollout rolled a candidate back",
        f"pr edit 17 --repo {REPO} --add-label rollback",
    ]
    merged = [f"pr merge 17 --repo {REPO} --auto --squash"] if auto_merge else []
    body = (run.temp / "body.md").read_text()
    assert "rollback" in body
    assert calls[2:] == [*body.splitlines(), *labelled, *merged]


@pytest.mark.slow
@pytest.mark.parametrize("auto_merge", [False, True], ids=["a person merges", "autoMergeRollbacks"])
def test_a_run_that_rolls_one_model_back_and_advances_another_is_reviewed(
    tmp_path: Path, failing: tuple[RunningPrometheus, int], auto_merge: bool
) -> None:
    """iris rolls back and wine advances in the same run (exit 5): the report's autoMerge is false
    whatever the stack sets, so the push step labels the rollback but turns no auto-merge on; the
    open pull request an earlier rollback-only run set to merge loses its auto-merge, though the
    exit code is the rollback's."""
    made, run = rolled_back(tmp_path, failing, auto_merge, mixed=True)
    report = json.loads((run.temp / "report.json").read_text())
    decided = {m["model"]: m["decision"] for m in report["models"]}
    assert decided == {"iris": "rollback", "wine": "advance"}
    assert (report["autoMergeRollbacks"], report["autoMerge"]) == (auto_merge, False)
    body = (run.temp / "body.md").read_text()
    if auto_merge:
        assert "`autoMergeRollbacks` is set, but this run also moves wine (advance): a person reviews it." in body

    earlier = {"number": 17, "labels": [], "autoMergeRequest": {"mergeMethod": "SQUASH"}}
    run.push(made.remote, str(ExitCode.CANDIDATE_FAILED), [earlier])

    _, message, _ = rollout_branch(made)
    assert message.splitlines()[0] == f"rollout({STACK}): iris rollback, wine advance"
    calls = run.gh_calls()
    assert calls[1] == f"pr edit 17 --repo {REPO} --title Rollout: {STACK} --body-file {run.temp}/body.md"
    assert calls[2 + len(body.splitlines()) :] == [
        f"label create rollback --repo {REPO} --color B60205 --force "
        "--description infra rollout rolled a candidate back",
        f"pr edit 17 --repo {REPO} --add-label rollback",
        f"pr merge 17 --repo {REPO} --disable-auto",
    ]
    assert not any(call.endswith("--auto --squash") for call in calls)
