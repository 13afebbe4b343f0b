"""The dress rehearsal (docs/rehearsal.md): the real Pulumi engine and Kubernetes provider bring
each stack up against a throwaway control plane with KWOK nodes, bring it up again with no
changes, and destroy it to nothing; the objects the API server stores hold the render's; the
scheduler's placement agrees with `infra capacity`; fewer nodes leave pods Pending with the
scheduler's words; Pod Security refuses a pod that breaks its namespace's level; --diff-from shows
the engine's diff of a weight change as `infra diff` does; a fleet's shard comes up on its
platform stack; an interrupted rehearsal leaves no process and no port behind."""

from __future__ import annotations

import base64
import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pulumi
import pulumi_kubernetes as k8s
import pytest
import yaml

from inference_platform.analysis.rehearsal import Outcome, stored_differences
from inference_platform.cli.diff import diff_renders
from inference_platform.cli.exit_codes import ExitCode
from inference_platform.cli.main import main as infra_main
from inference_platform.cli.rehearsal.command import Options, default_program, settings
from inference_platform.cli.rehearsal.command import rehearse as rehearse_in_process
from inference_platform.cli.rehearsal.control_plane import port_open
from inference_platform.cli.render import SECRET_MASK
from inference_platform.cli.render_files import read_chart_objects, read_render
from inference_platform.platform.pod_security import PodSecurity
from tests.conftest import ROOT, SHARED_MANIFESTS_DIR, write_sharded_repository
from tests.rehearsal.conftest import rehearse
from tests.render_stacks import render, stack_path

STACKS = ["dev", "prod", "all-features", "keda", "model-cache"]


def capacity(stack: str, config: Path) -> dict[str, Any]:
    done = subprocess.run(
        [sys.executable, "-m", "infra", "capacity", "--stack", stack, "--config", str(config), "--format", "json"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    )
    plan: dict[str, Any] = json.loads(done.stdout)
    return plan


def rendered_objects(directory: Path) -> list[dict[str, Any]]:
    """The render's objects the provider applies one by one: the program's and its helm.v4 charts'
    and manifest files' (a helm.v3.Release is Helm's own install, its objects not the provider's)."""
    manifests, charts, _ = read_render(directory)
    releases = {chart["name"] for chart in charts if chart["kind"] == "helm.v3.Release"}
    expanded = read_chart_objects(directory)
    return manifests + [obj for release, objects in expanded.items() if release not in releases for obj in objects]


@pytest.mark.parametrize("stack", STACKS)
def test_a_stack_comes_up_stays_put_and_goes_as_rendered(
    stack: str, tmp_path: Path, tools_dir: Path, charts_dir: Path
) -> None:
    config = stack_path(stack, tmp_path)
    result = rehearse(tmp_path, tools_dir, charts_dir, stack, config, stored=True)
    assert result.code == ExitCode.OK, result.markdown
    up = result.step("up")
    assert up["ok"]
    assert up["summary"]["create"] > 50
    again = result.step("up again")
    assert again["ok"]
    assert set(again["summary"]) == {"same"}, again
    assert result.step("destroy")["summary"]["delete"] > 50
    assert result.report["leftBehind"] == []
    # The scheduler placed every pod the controllers made, holding the GPUs the plan gives the
    # exclusive models (those whose pods a controller here makes).
    plan = capacity(stack, config)
    placement = result.report["placement"]
    assert placement["pending"] == [], result.markdown
    exclusive = {
        name: model["min"]
        for name, model in plan["models"].items()
        if model["mode"] == "exclusive" and "device" not in model and name not in placement["unmade"]
    }
    assert placement["gpusPlaced"] == sum(exclusive.values())
    assert placement["gpusPlanned"] == placement["gpusPlaced"]
    # What the API server stores holds every object of the render, as rendered.
    render(stack, tmp_path, charts=True)  # into tmp_path/<stack>, the generated stack file written again
    assert result.stored is not None
    rendered = rendered_objects(tmp_path / stack)
    assert stored_differences(rendered, result.stored, masked=SECRET_MASK) == []


def test_with_its_passphrase_a_stack_files_secrets_are_decrypted_and_applied(
    tmp_path: Path, tools_dir: Path, charts_dir: Path
) -> None:
    """prod's secure values, encrypted by the real CLI under a passphrase (a copy of prod's file:
    nobody here has prod's), rehearsed with that passphrase: the Secret holds the real values."""
    project = tmp_path / "project"
    project.mkdir()
    (project / "Pulumi.yaml").write_bytes((ROOT / "Pulumi.yaml").read_bytes())
    copy = settings((ROOT / "Pulumi.prod.yaml").read_text(), passphrase_given=False)
    (project / "Pulumi.prod.yaml").write_text(copy.text)
    state = tmp_path / "state"
    state.mkdir()
    env = os.environ | {
        "PULUMI_BACKEND_URL": f"file://{state}",
        "PULUMI_CONFIG_PASSPHRASE": "a rehearsal's passphrase",
        "PULUMI_HOME": str(tmp_path / "home"),
        "PULUMI_SKIP_UPDATE_CHECK": "1",
    }
    pulumi_cli = str(tools_dir / "pulumi")
    init = [pulumi_cli, "stack", "init", "prod", "--secrets-provider", "passphrase", "--non-interactive"]
    subprocess.run(init, cwd=project, env=env, check=True, capture_output=True)
    for index, key in enumerate(copy.placeholders):
        command = [pulumi_cli, "config", "set", "--path", "--secret", key, f"secret-{index}", "--stack", "prod"]
        subprocess.run(command, cwd=project, env=env, check=True, capture_output=True)
    assert (project / "Pulumi.prod.yaml").read_text().count("secure: v1:") == len(copy.placeholders)
    result = rehearse(
        tmp_path, tools_dir, charts_dir, "prod", project / "Pulumi.prod.yaml", stored=True,
        passphrase="a rehearsal's passphrase",
    )  # fmt: skip
    assert result.code == ExitCode.OK, result.markdown
    assert not any("placeholder" in note for note in result.report["notes"])
    assert result.stored is not None
    (secret,) = [
        o for o in result.stored if o["kind"] == "Secret" and o["metadata"]["name"] == "model-storage-credentials"
    ]
    credentials = base64.b64decode(secret["data"]["aws-credentials"]).decode()
    assert "secret-0" in credentials
    assert "secret-1" in credentials


def test_a_lost_gpu_node_leaves_pods_pending_with_the_schedulers_words(
    tmp_path: Path, tools_dir: Path, charts_dir: Path
) -> None:
    # prod on four GPU nodes of one GPU each (the four GPUs its models hold at minimum replicas):
    # with one node left, one of mnist's two exclusive GPU pods finds no GPU.
    document = yaml.safe_load((ROOT / "Pulumi.prod.yaml").read_text())
    document["config"]["inference-platform:platform"]["gpuNodes"] |= {"count": 4, "gpusPerNode": 1}
    config = tmp_path / "Pulumi.prod.yaml"
    config.write_text(yaml.safe_dump(document, sort_keys=False))
    assert capacity("prod", config)["models"]["mnist"]["min"] == 2
    result = rehearse(tmp_path, tools_dir, charts_dir, "prod", config, "--gpu-nodes", "1")
    assert result.code == ExitCode.PODS_PENDING, result.markdown
    assert result.report["outcome"] == Outcome.PODS_PENDING.value
    pending = result.report["placement"]["pending"]
    assert pending
    assert all("Insufficient nvidia.com/gpu" in pod["reason"] for pod in pending), pending
    assert "Insufficient nvidia.com/gpu" in result.markdown
    assert result.step("destroy")["ok"]
    assert result.report["leftBehind"] == []


BAD_NAMESPACE = "rehearsal-restricted"


def breaking_program(read_stack: Any) -> Any:
    """The program, and beside it a privileged pod in a namespace that enforces `restricted`."""
    program = default_program(read_stack)

    def run() -> None:
        program()
        labels = PodSecurity("restricted").labels()
        namespace = k8s.core.v1.Namespace(BAD_NAMESPACE, metadata={"name": BAD_NAMESPACE, "labels": labels})
        k8s.core.v1.Pod(
            "privileged",
            metadata={"name": "privileged", "namespace": BAD_NAMESPACE},
            spec={"containers": [{"name": "c", "image": "busybox:1.37", "securityContext": {"privileged": True}}]},
            opts=pulumi.ResourceOptions(depends_on=[namespace]),
        )

    return run


def test_pod_security_refuses_a_pod_that_breaks_its_namespaces_level(
    tmp_path: Path, tools_dir: Path, charts_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("PULUMI_CONFIG_PASSPHRASE", raising=False)
    options = Options(
        stack="dev",
        config=ROOT / "Pulumi.dev.yaml",
        charts_dir=charts_dir,
        manifests_dir=SHARED_MANIFESTS_DIR,
        tools_dir=tools_dir,
        json=tmp_path / "report.json",
    )
    report, code = rehearse_in_process(options, breaking_program)
    assert code == ExitCode.REHEARSAL_FAILED
    up = next(step for step in report.steps if step.name == "up")
    assert not up.ok
    refused = [(resource, message) for resource, message in up.failures if "privileged" in resource]
    assert refused, up.failures
    assert 'violates PodSecurity "restricted' in refused[0][1]
    assert "privileged" in refused[0][1]
    # The rest was destroyed all the same.
    assert next(step for step in report.steps if step.name == "destroy").ok
    assert report.left_behind == []


ENGINE_OPS = {"create": "added", "delete": "removed", "update": "changed", "replace": "changed"}
"""The engine's operation on an object, and what `infra diff` calls that object (the provider
replaces a ConfigMap whose data changes: `infra diff` calls it changed)."""


def infra_diff_labels(old: Path, new: Path, charts: Path, tmp_path: Path) -> dict[str, set[str]]:
    """`infra diff` of the two files' renders (charts expanded): each object's label, by what
    happened to it (added, removed, changed), the program's objects and the charts' alike."""
    for name, path in (("old", old), ("new", new)):
        out = tmp_path / f"{name}-render"
        command = ["render", "--stack", "dev", "--config", str(path), "--out", str(out), "--charts-dir", str(charts)]
        assert infra_main([*command, "--manifests-dir", str(SHARED_MANIFESTS_DIR)]) == 0
    diff = diff_renders(tmp_path / "old-render", tmp_path / "new-render")
    labels: dict[str, set[str]] = {"added": set(), "removed": set(), "changed": set()}
    for objects in (diff.objects, *diff.chart_objects.values()):
        labels["added"] |= set(objects.added)
        labels["removed"] |= set(objects.removed)
        labels["changed"] |= set(objects.changed)
    return labels


@pytest.mark.parametrize(
    ("change", "promotion"),
    [
        ("a weight change", ["--weights", "v1=50,v2=50"]),
        (
            "a new version and a retired one",
            ["--add-version", "v4", "--model-uri", "pvc://models/iris/v4", "--retire", "v3"],
        ),
    ],
)
def test_diff_from_shows_the_engines_diff_of_a_change_as_infra_diff_does(
    change: str, promotion: list[str], tmp_path: Path, tools_dir: Path, charts_dir: Path
) -> None:
    old = tmp_path / "old" / "Pulumi.dev.yaml"
    new = tmp_path / "new" / "Pulumi.dev.yaml"
    for path in (old, new):
        path.parent.mkdir()
        path.write_bytes((ROOT / "Pulumi.dev.yaml").read_bytes())
    command = ["promote", "--stack", "dev", "--config", str(new), "--model", "iris", *promotion, "--no-charts"]
    assert infra_main(command) == 0
    expected = infra_diff_labels(old, new, charts_dir, tmp_path)
    assert expected["changed"], f"{change} changes no object"
    result = rehearse(tmp_path, tools_dir, charts_dir, "dev", new, "--diff-from", str(old))
    assert result.code == ExitCode.OK, result.markdown
    shown: dict[str, set[str]] = {"added": set(), "removed": set(), "changed": set()}
    for item in result.report["changes"]:
        shown[ENGINE_OPS[item["op"]]].add(item["resource"])
    assert shown == expected
    if change == "a weight change":  # the routes it moves, updated, and nothing else
        assert not expected["added"]
        assert not expected["removed"]
        assert all(label.startswith("VirtualService ") for label in expected["changed"])
    else:
        assert any(label.startswith("Deployment service/iris-v4 ") for label in shown["added"])
        assert any(label.startswith("Deployment service/iris-v3 ") for label in shown["removed"])
    assert [step["name"] for step in result.report["steps"]][:3] == ["up (old)", "preview", "up"]
    assert "The engine's diff" in result.markdown


def test_a_fleets_shard_comes_up_on_its_platform_stack(tmp_path: Path, tools_dir: Path, charts_dir: Path) -> None:
    write_sharded_repository(tmp_path)
    result = rehearse(tmp_path, tools_dir, charts_dir, "prod-a", tmp_path / "Pulumi.prod-a.yaml")
    assert result.code == ExitCode.OK, result.markdown
    names = [step["name"] for step in result.report["steps"]]
    assert names.index("up (prod, the platform stack)") < names.index("up")
    assert result.step("up again")["summary"] == {"same": result.step("up again")["summary"]["same"]}
    assert names.index("destroy") < names.index("destroy (prod, the platform stack)")
    assert result.report["leftBehind"] == []


def _processes_mentioning(text: str) -> list[str]:
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            except OSError:
                continue
            if text in cmdline:
                found.append(f"{entry.name}: {cmdline[:200]}")
    return found


def test_an_interrupted_rehearsal_leaves_no_process_and_no_port(
    tmp_path: Path, tools_dir: Path, charts_dir: Path
) -> None:
    command = [
        sys.executable, "-m", "infra", "rehearse", "--stack", "dev", "--tools-dir", str(tools_dir),
        "--charts-dir", str(charts_dir), "--manifests-dir", str(SHARED_MANIFESTS_DIR),
        "--json", str(tmp_path / "report.json"), "--keep",
    ]  # fmt: skip
    env = {key: value for key, value in os.environ.items() if key != "PULUMI_CONFIG_PASSPHRASE"}
    process = subprocess.Popen(
        command, cwd=ROOT, stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True, env=env, start_new_session=True
    )
    lines: list[str] = []
    up_started = threading.Event()

    def read() -> None:
        assert process.stderr is not None
        for line in process.stderr:
            lines.append(line)
            if line.startswith("rehearse: up ..."):
                up_started.set()

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    assert up_started.wait(300), "".join(lines)
    time.sleep(8)  # half way: the engine and the provider are applying objects
    os.killpg(process.pid, signal.SIGINT)
    assert process.wait(120) == ExitCode.INTERRUPTED, "".join(lines)
    reader.join(10)
    found = next(m for line in lines if (m := re.search(r"control plane at https://127\.0\.0\.1:(\d+) in (\S+)", line)))
    port, directory = int(found.group(1)), found.group(2)
    assert not port_open(port)
    assert _processes_mentioning(directory) == []
    assert json.loads((tmp_path / "report.json").read_text())["outcome"] == Outcome.INTERRUPTED.value
