"""`python -m infra stacks`: which stacks a change touches, over a repository holding a sharded
environment (a platform stack and two shards) and a one-stack environment."""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import pytest

from inference_platform.cli.exit_codes import ExitCode
from inference_platform.cli.main import main
from inference_platform.cli.project import PROJECT_FILE
from inference_platform.cli.stack_selection import as_matrix, every_stack, read_stacks, select, with_rollouts
from inference_platform.config.errors import ConfigError
from inference_platform.stack.config import PROJECT
from inference_platform.stack.fleet import PLATFORM_STACK_KEY, SHARDS_KEY
from tests.conftest import (
    ROOT,
    base_config,
    platform_stack_config,
    shard_stack_config,
    write_sharded_repository,
    write_stack_file,
)

SHARDS = f"{PROJECT}:{SHARDS_KEY}"
PLATFORM_STACK = f"{PROJECT}:{PLATFORM_STACK_KEY}"


@pytest.fixture
def repository(tmp_path: Path) -> Path:
    """prod: a platform stack with the shards prod-a and prod-b; dev: one stack, as today."""
    return write_sharded_repository(tmp_path)


def matrix(root: Path, *changed: str) -> dict[str, Any]:
    stacks = read_stacks(root)
    return as_matrix(stacks, select(stacks, changed))


NOTHING: dict[str, list[str]] = {"first": [], "shards": []}
EVERY_STACK = {
    "stacks": ["dev", "prod", "prod-a", "prod-b"],
    "diff": ["dev", "prod", "prod-a", "prod-b"],
    "removed": [],
    "platforms": ["prod"],
    "shards": ["prod-a", "prod-b"],
    "single": ["dev"],
    "environments": {
        "dev": {"first": ["dev"], "shards": []},
        "prod": {"first": ["prod"], "shards": ["prod-a", "prod-b"]},
    },
}


@pytest.mark.parametrize(
    ("changed", "expected"),
    [
        pytest.param(
            ["Pulumi.prod-a.yaml"],
            {
                "stacks": ["prod", "prod-a"],
                "diff": ["prod", "prod-a"],
                "removed": [],
                "platforms": ["prod"],
                "shards": ["prod-a"],
                "single": [],
                "environments": {"dev": NOTHING, "prod": {"first": ["prod"], "shards": ["prod-a"]}},
            },
            id="a shard's file: that shard and its platform, which reads it",
        ),
        pytest.param(
            ["Pulumi.prod.yaml"],
            {
                "stacks": ["prod", "prod-a", "prod-b"],
                "diff": ["prod", "prod-a", "prod-b"],
                "removed": [],
                "platforms": ["prod"],
                "shards": ["prod-a", "prod-b"],
                "single": [],
                "environments": {"dev": NOTHING, "prod": {"first": ["prod"], "shards": ["prod-a", "prod-b"]}},
            },
            id="the platform's file: the platform and its shards",
        ),
        pytest.param(
            ["docs/workflow.md"],
            {
                "stacks": [],
                "diff": [],
                "removed": [],
                "platforms": [],
                "shards": [],
                "single": [],
                "environments": {"dev": NOTHING, "prod": NOTHING},
            },
            id="a docs file: nothing",
        ),
        pytest.param(["src/inference_platform/stack/deploy.py"], EVERY_STACK, id="a source file: every stack"),
        pytest.param(
            ["Pulumi.dev.yaml"],
            {
                "stacks": ["dev"],
                "diff": ["dev"],
                "removed": [],
                "platforms": [],
                "shards": [],
                "single": ["dev"],
                "environments": {"dev": {"first": ["dev"], "shards": []}, "prod": NOTHING},
            },
            id="a one-stack environment's file: that stack",
        ),
    ],
)
def test_the_selection_of_a_change(repository: Path, changed: list[str], expected: dict[str, Any]) -> None:
    assert matrix(repository, *changed) == expected


@pytest.mark.parametrize(
    "path",
    [
        "infra/__main__.py",
        "policies/rules.py",
        "Pulumi.yaml",
        "pyproject.toml",
        "requirements.txt",
        "requirements-vllm-nodeps.txt",
        "./src/inference_platform/pins.py",
    ],
)
def test_what_the_program_runs_with_selects_every_stack(repository: Path, path: str) -> None:
    assert matrix(repository, "README.md", path) == EVERY_STACK


@pytest.mark.parametrize(
    "path",
    [
        "README.md",
        "tests/cli/test_stack_selection.py",
        "bench/render_scale.py",
        "examples/Pulumi.example.yaml",
        "docs/Pulumi.prod.yaml",
        ".github/workflows/deploy.yml",
        "plugin/schema.json",
        "src",  # a file named like the directory is not in it
    ],
)
def test_anything_else_selects_nothing(repository: Path, path: str) -> None:
    assert matrix(repository, path)["diff"] == []


def test_shards_of_one_platform_and_a_one_stack_environment_together(repository: Path) -> None:
    selected = matrix(repository, "Pulumi.prod-b.yaml", "Pulumi.dev.yaml", "docs/index.md")
    assert (selected["stacks"], selected["platforms"], selected["single"]) == (
        ["dev", "prod", "prod-b"],
        ["prod"],
        ["dev"],
    )
    assert selected["environments"] == {
        "dev": {"first": ["dev"], "shards": []},
        "prod": {"first": ["prod"], "shards": ["prod-b"]},
    }


def test_a_deleted_stack_file_is_diffed_not_previewed(repository: Path) -> None:
    """A shard retired: its file is gone and the platform no longer lists it; the render diff shows
    its objects going away, the previews run on what is left."""
    (repository / "Pulumi.prod-b.yaml").unlink()
    write_stack_file(repository / "Pulumi.prod.yaml", platform_stack_config(["prod-a"]))
    selected = matrix(repository, "Pulumi.prod.yaml", "Pulumi.prod-b.yaml")
    assert selected["stacks"] == ["prod", "prod-a"]
    assert selected["removed"] == ["prod-b"]
    assert selected["diff"] == ["prod", "prod-a", "prod-b"]
    # The program changing too: every stack there is, and the deleted one still diffed.
    assert matrix(repository, "Pulumi.prod-b.yaml", "src/x.py")["diff"] == ["dev", "prod", "prod-a", "prod-b"]


def problems(root: Path, environments: list[str] | None = None) -> list[str]:
    with pytest.raises(ConfigError) as raised:
        read_stacks(root, environments)
    assert raised.value.subject == "stack files"
    return [str(problem) for problem in raised.value.problems]


def test_a_shard_whose_platform_stack_file_is_missing(repository: Path) -> None:
    (repository / "Pulumi.prod.yaml").unlink()
    assert problems(repository) == [
        f"{repository}/Pulumi.prod-a.yaml:2:3: platformStack: names the platform stack 'prod', "
        "which has no stack file Pulumi.prod.yaml",
        f"{repository}/Pulumi.prod-b.yaml:2:3: platformStack: names the platform stack 'prod', "
        "which has no stack file Pulumi.prod.yaml",
    ]


def test_a_platform_listing_a_stack_whose_file_is_missing(repository: Path) -> None:
    (repository / "Pulumi.prod-b.yaml").unlink()
    assert problems(repository) == [
        f"{repository}/Pulumi.prod.yaml:6:5: shards[1]: 'prod-b' has no stack file Pulumi.prod-b.yaml"
    ]


def test_stack_files_that_disagree_are_each_reported_at_their_line(repository: Path) -> None:
    write_stack_file(repository / "Pulumi.prod.yaml", platform_stack_config(["prod-a", "dev", "prod-a"]))
    write_stack_file(repository / "Pulumi.qa-a.yaml", shard_stack_config("dev", ["iris"]))
    assert problems(repository) == [
        f"{repository}/Pulumi.prod.yaml:6:5: shards[1]: 'dev' is not a shard: "
        f"Pulumi.dev.yaml has no {PROJECT}:{PLATFORM_STACK_KEY}",
        f"{repository}/Pulumi.prod.yaml:7:5: shards[2]: lists 'prod-a' twice",
        f"{repository}/Pulumi.prod-b.yaml:2:3: platformStack: names the platform stack 'prod', "
        f"whose {PROJECT}:{SHARDS_KEY} does not list 'prod-b'",
        f"{repository}/Pulumi.qa-a.yaml:2:3: platformStack: names the platform stack 'dev', "
        f"which is not a platform stack: Pulumi.dev.yaml has no {PROJECT}:{SHARDS_KEY}",
    ]


def test_keys_of_the_wrong_shape(repository: Path) -> None:
    """Each is reported; what the others say of a stack whose key cannot be read waits until it can
    (prod-b is not listed by a platform whose list is unreadable: not said)."""
    write_stack_file(repository / "Pulumi.prod.yaml", platform_stack_config([]) | {SHARDS: "prod-a"})
    write_stack_file(repository / "Pulumi.prod-a.yaml", shard_stack_config("prod", []) | {PLATFORM_STACK: ["prod"]})
    with pytest.raises(ConfigError) as raised:
        read_stacks(repository)
    assert [str(problem) for problem in raised.value.problems] == [
        f"{repository}/Pulumi.prod.yaml:4:3: shards: must be a list of the shards' stack names",
        f"{repository}/Pulumi.prod-a.yaml:2:3: platformStack: must name the platform stack as a StackReference "
        "does: <organization>/<project>/<stack>",
    ]
    assert raised.value.incomplete


def test_an_unreadable_platform_stack_file_is_not_a_missing_one(repository: Path) -> None:
    (repository / "Pulumi.prod.yaml").write_text("config: [\n")
    with pytest.raises(ConfigError) as raised:
        read_stacks(repository, ["dev", "prod"])
    (problem,) = raised.value.problems
    assert str(problem).startswith(f"{repository}/Pulumi.prod.yaml:2:1: not valid YAML")
    assert raised.value.incomplete


def test_environments_the_deploy_workflow_leaves_out(repository: Path) -> None:
    write_stack_file(repository / "Pulumi.staging.yaml", base_config())
    assert problems(repository, ["dev", "prod", "qa"]) == [
        f"{repository}/Pulumi.staging.yaml: the environment 'staging' is not one the deploy workflow deploys "
        "(dev, prod, qa)",
        f"{repository}/Pulumi.qa.yaml: the deploy workflow deploys the environment 'qa', which has no stack file",
    ]
    assert problems(repository, ["dev", "prod-a", "staging", "prod"]) == [
        f"{repository}/Pulumi.prod-a.yaml: the deploy workflow deploys 'prod-a' as an environment, but it is a shard"
    ]


def test_the_environments_come_in_the_deploy_workflows_order(repository: Path) -> None:
    stacks = read_stacks(repository, ["prod", "dev"])
    assert list(as_matrix(stacks, select(stacks, []), ["prod", "dev"])["environments"]) == ["prod", "dev"]


def test_the_repositorys_own_stacks_are_its_two_deployed_environments() -> None:
    stacks = read_stacks(ROOT, ["dev", "prod"])
    assert {name: stack.kind for name, stack in stacks.by_name.items()} == {"dev": "single", "prod": "single"}


# Which stacks have a rollout in progress (`--rollouts`: what the rollout workflow runs).

ROLLOUT: dict[str, Any] = {"candidate": "v2", "steps": [25, 50], "interval": "15m"}


def rollout_status(phase: str) -> dict[str, Any]:
    """A status as `infra rollout` writes it, in `phase`."""
    return {
        "phase": phase,
        "step": 0 if phase == "shadow" else 1,
        "primary": "v1",
        "baseline": {"v1": 90},
        "since": "2026-12-06T02:00:00Z",
        "decision": "rollback" if phase == "rolled-back" else "advance",
    }


def with_rollout(config: dict[str, Any], model: str, status: dict[str, Any] | None = None) -> dict[str, Any]:
    """The config with a rollout of v2 on `model` (not started yet without a status)."""
    rollout = ROLLOUT | {"shadowFirst": {"mirrorPercent": 10}} | ({"status": status} if status else {})
    for item in config[f"{PROJECT}:models"]:
        if item["name"] == model:
            item["rollout"] = rollout
    return config


def rollouts(root: Path, *changed: str) -> dict[str, Any]:
    stacks = read_stacks(root)
    return as_matrix(stacks, with_rollouts(stacks, select(stacks, changed) if changed else every_stack(stacks)))


def test_a_shards_rollout_selects_the_shard_not_its_platform(repository: Path) -> None:
    """prod-a's iris starts its rollout on the next run; prod-b has none; dev's finished: only
    prod-a, in prod's shards (its platform stack has no models of its own)."""
    write_stack_file(repository / "Pulumi.prod-a.yaml", with_rollout(shard_stack_config("prod", ["iris"]), "iris"))
    write_stack_file(repository / "Pulumi.dev.yaml", with_rollout(base_config(), "iris", rollout_status("promoted")))
    selected = rollouts(repository)
    assert (selected["stacks"], selected["diff"], selected["removed"]) == (["prod-a"], ["prod-a"], [])
    assert selected["environments"] == {"dev": NOTHING, "prod": {"first": [], "shards": ["prod-a"]}}
    # Among the stacks a change selects, as well: prod's file selects prod and both its shards.
    assert rollouts(repository, "Pulumi.prod.yaml")["stacks"] == ["prod-a"]
    assert rollouts(repository, "Pulumi.dev.yaml")["stacks"] == []


@pytest.mark.parametrize(
    ("phase", "selected"),
    [
        pytest.param(None, ["dev"], id="not started: the next run starts it"),
        pytest.param("shadow", ["dev"], id="shadow"),
        pytest.param("canary", ["dev"], id="canary"),
        pytest.param("promoted", [], id="promoted: finished"),
        pytest.param("rolled-back", [], id="rolled back: finished"),
    ],
)
def test_a_rollout_is_in_progress_until_it_finishes(repository: Path, phase: str | None, selected: list[str]) -> None:
    status = rollout_status(phase) if phase else None
    write_stack_file(repository / "Pulumi.dev.yaml", with_rollout(base_config(), "iris", status))
    assert rollouts(repository)["stacks"] == selected


def test_a_platform_stack_with_models_of_its_own_in_rollout(repository: Path) -> None:
    platform = platform_stack_config(["prod-a", "prod-b"])
    platform[f"{PROJECT}:models"] = [base_config()[f"{PROJECT}:models"][0] | {"rollout": ROLLOUT}]
    write_stack_file(repository / "Pulumi.prod.yaml", platform)
    write_stack_file(repository / "Pulumi.prod-b.yaml", with_rollout(shard_stack_config("prod", ["iris"]), "iris"))
    assert rollouts(repository)["environments"]["prod"] == {"first": ["prod"], "shards": ["prod-b"]}


def test_rollouts_that_do_not_parse_are_each_reported_at_their_line(repository: Path) -> None:
    broken = rollout_status("canary") | {"phase": "paused"}
    write_stack_file(repository / "Pulumi.dev.yaml", with_rollout(base_config(), "iris", broken))
    write_stack_file(
        repository / "Pulumi.prod-a.yaml",
        with_rollout(shard_stack_config("prod", ["iris"]), "iris") | {f"{PROJECT}:models": [{"rollout": "v2"}]},
    )
    stacks = read_stacks(repository)
    with pytest.raises(ConfigError) as raised:
        with_rollouts(stacks, every_stack(stacks))
    assert raised.value.subject == "stack files"
    lines = [str(problem) for problem in raised.value.problems]
    assert lines == [
        f"{repository}/Pulumi.dev.yaml:26:9: models[0] (iris).rollout.status.phase: unknown value 'paused': use "
        "one of shadow, canary, promoted, rolled-back (remove rollout.status to restart the rollout from its first "
        "step)",
        f"{repository}/Pulumi.prod-a.yaml:4:5: models[0].rollout: must be a mapping of settings, not 'v2'",
    ]


# The command.


def run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(["stacks", *args])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_the_command_prints_one_line_of_json(repository: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(capsys, "--root", str(repository), "Pulumi.prod.yaml", "docs/index.md")
    assert (code, err) == (ExitCode.OK, "")
    assert out.count("\n") == 1
    assert json.loads(out) == matrix(repository, "Pulumi.prod.yaml")


def test_the_command_reads_gits_listing(
    repository: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """From a file (NUL-separated, as `git diff -z` writes it) or from stdin (one a line), at the
    project found from the working directory."""
    monkeypatch.chdir(repository)
    listing = repository / "changed"
    listing.write_text("docs/a b.md\0Pulumi.prod-a.yaml\0")
    code, out, _ = run(capsys, "--from", str(listing), "-z")
    assert (code, json.loads(out)["stacks"]) == (ExitCode.OK, ["prod", "prod-a"])
    monkeypatch.setattr("sys.stdin", io.StringIO("Pulumi.dev.yaml\nREADME.md\n"))
    code, out, _ = run(capsys, "--from", "-")
    assert (code, json.loads(out)["stacks"]) == (ExitCode.OK, ["dev"])


def test_the_command_writes_githubs_outputs(repository: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "--root", str(repository), "--all", "--environments", "dev,prod", "--github-output")
    assert code == ExitCode.OK
    assert out.splitlines() == [
        'stacks=["dev","prod","prod-a","prod-b"]',
        'diff=["dev","prod","prod-a","prod-b"]',
        "removed=[]",
        'platforms=["prod"]',
        'shards=["prod-a","prod-b"]',
        'single=["dev"]',
        'dev-first=["dev"]',
        "dev-shards=[]",
        'prod-first=["prod"]',
        'prod-shards=["prod-a","prod-b"]',
    ]


def test_stack_files_that_disagree_exit_with_the_config_errors_code(
    repository: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Nothing on stdout (a workflow reading it gets no matrix); the report names each file as it
    is beside Pulumi.yaml."""
    (repository / "Pulumi.prod.yaml").unlink()
    monkeypatch.chdir(repository)
    code, out, err = run(capsys, "docs/index.md")
    assert (code, out) == (ExitCode.CONFIG_ERROR, "")
    assert err.splitlines() == [
        "invalid stack files (2 problems):",
        "  Pulumi.prod-a.yaml:2:3: platformStack: names the platform stack 'prod', which has no stack file "
        "Pulumi.prod.yaml",
        "  Pulumi.prod-b.yaml:2:3: platformStack: names the platform stack 'prod', which has no stack file "
        "Pulumi.prod.yaml",
    ]


def test_an_unreadable_stack_file_is_a_config_error(repository: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (repository / "Pulumi.prod-a.yaml").write_text("config: [\n")
    code, out, err = run(capsys, "--root", str(repository), "--all")
    assert (code, out) == (ExitCode.CONFIG_ERROR, "")
    assert f"{repository}/Pulumi.prod-a.yaml:2:1: not valid YAML" in err


@pytest.mark.parametrize(
    ("args", "message"),
    [
        pytest.param([], "stacks: give the changed paths, --from FILE or --all (one of them)", id="nothing"),
        pytest.param(["--all", "README.md"], "stacks: give the changed paths, --from FILE or --all", id="two"),
        pytest.param(["-z", "README.md"], "stacks: -z reads --from's listing; give --from FILE", id="-z alone"),
        pytest.param(["--from", "missing"], "stacks: --from missing: [Errno 2] No such file", id="no listing"),
    ],
)
def test_bad_usage_exits_with_the_config_errors_code(
    repository: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, args: list[str], message: str
) -> None:
    monkeypatch.chdir(repository)
    code, out, err = run(capsys, *args)
    assert (code, out) == (ExitCode.CONFIG_ERROR, "")
    assert err.startswith(message)


def test_outside_a_pulumi_project(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    code, out, err = run(capsys, "--all")
    assert (code, out) == (ExitCode.CONFIG_ERROR, "")
    assert err == f"stacks: no {PROJECT_FILE} in {tmp_path} or above it: run from the Pulumi project\n"


def test_the_command_selects_the_stacks_with_a_rollout_in_progress(
    repository: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    write_stack_file(repository / "Pulumi.prod-b.yaml", with_rollout(shard_stack_config("prod", ["iris"]), "iris"))
    args = ("--root", str(repository), "--all", "--rollouts", "--environments", "dev,prod", "--github-output")
    code, out, _ = run(capsys, *args)
    assert code == ExitCode.OK
    assert out.splitlines() == [
        'stacks=["prod-b"]',
        'diff=["prod-b"]',
        "removed=[]",
        "platforms=[]",
        'shards=["prod-b"]',
        "single=[]",
        "dev-first=[]",
        "dev-shards=[]",
        "prod-first=[]",
        'prod-shards=["prod-b"]',
    ]


def test_a_rollout_that_does_not_parse_exits_with_the_config_errors_code(
    repository: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Nothing on stdout: the workflow gets no matrix, and says why at the line."""
    broken = with_rollout(base_config(), "iris", rollout_status("canary") | {"since": "yesterday"})
    write_stack_file(repository / "Pulumi.dev.yaml", broken)
    monkeypatch.chdir(repository)
    code, out, err = run(capsys, "--all", "--rollouts")
    assert (code, out) == (ExitCode.CONFIG_ERROR, "")
    assert err.splitlines()[:2] == [
        "invalid stack files (1 problem):",
        "  Pulumi.dev.yaml:31:9: models[0] (iris).rollout.status.since: 'yesterday' is not an RFC 3339 "
        "time with its zone (e.g. 2026-12-06T10:15:00Z) (remove rollout.status to restart the rollout from its "
        "first step)",
    ]
