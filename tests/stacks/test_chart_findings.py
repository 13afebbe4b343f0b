"""checkov and the policy pack over the charts' own objects: what they find is accepted only where
tests/stacks/chart_findings.yaml gives a reason, per chart and check."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import yaml

from inference_platform import pins
from inference_platform.cli.render_files import read_render
from tests.policies.test_stacks_meet_policies import rules
from tests.stacks.conftest import CLUSTER_STACKS, Rendered, shared_render
from tests.stacks.test_checkov import scan

pytestmark = pytest.mark.slow

ACCEPTED = yaml.safe_load((Path(__file__).parent / "chart_findings.yaml").read_text(encoding="utf-8"))
POLICIES = {
    "pinned-images": rules.unpinned_images,
    "requests-and-limits": rules.missing_requests_and_limits,
    "gpus-on-gpu-nodes": rules.gpu_without_gpu_nodes,
    "traffic-weights-add-up": rules.traffic_weights,
}
Finding = tuple[str, str]  # (chart, check)
# Charts installed once a model version (each inference pool's picker) are listed under the chart's
# name, not each release's.
PER_VERSION_CHARTS = {pins.INFERENCE_POOL.reference: pins.INFERENCE_POOL.chart}


def listed_as(charts: list[dict[str, object]]) -> dict[str, str]:
    """Each release of a render (charts.yaml) by the name its findings are listed under."""
    return {str(c["name"]): PER_VERSION_CHARTS.get(str(c.get("chart")), str(c["name"])) for c in charts}


def resource_type(obj: dict[str, object]) -> str:
    """The Pulumi type token the Kubernetes provider gives a chart's child (what policies see)."""
    group, _, version = str(obj["apiVersion"]).rpartition("/")
    return f"kubernetes:{group or 'core'}/{version}:{obj['kind']}"


def checkov_findings(directory: Path, scratch: Path) -> set[Finding]:
    """checkov over the charts' objects, beside the program's NetworkPolicies (CKV2_K8S_6 looks
    for a policy selecting each pod)."""
    shutil.copytree(directory / "charts", scratch)
    program, _, _ = read_render(directory)
    policies = [o for o in program if o["kind"] == "NetworkPolicy"]
    (scratch / "program-network-policies.yaml").write_text(yaml.safe_dump_all(policies), encoding="utf-8")
    report = scan(scratch)
    assert report["summary"]["parsing_errors"] == 0
    assert report["summary"]["passed"] > 100
    names = listed_as(read_render(directory)[1])
    stems = [Path(f["file_path"]).stem for f in report["results"]["failed_checks"]]
    return {
        (names.get(stem, stem), f["check_id"])
        for stem, f in zip(stems, report["results"]["failed_checks"], strict=True)
    }


def policy_findings(rendered: Rendered) -> set[Finding]:
    names = listed_as(rendered.cluster.chart_values)
    return {
        (names.get(release, release), policy)
        for release, objects in rendered.cluster.charts.items()
        for obj in objects
        for policy, check in POLICIES.items()
        if check(resource_type(obj), obj)
    }


@pytest.fixture(scope="module")
def findings(tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict[str, set[Finding]]]:
    """By tool, by stack: what checkov and the policy checks find in the charts' objects."""
    found: dict[str, dict[str, set[Finding]]] = {"checkov": {}, "policy": {}}
    for stack in CLUSTER_STACKS:
        root = tmp_path_factory.mktemp(f"findings-{stack}")
        rendered = shared_render(stack, tmp_path_factory)
        found["checkov"][stack] = checkov_findings(rendered.directory, root / "scan")
        found["policy"][stack] = policy_findings(rendered)
    return found


@pytest.mark.parametrize("tool", ["checkov", "policy"])
def test_chart_findings_are_exactly_the_accepted_ones(tool: str, findings: dict[str, dict[str, set[Finding]]]) -> None:
    """Every finding is accepted with a reason, and every accepted one is still found somewhere
    (a stale entry would hide the next real finding of that check)."""
    accepted = {(chart, check) for chart, checks in ACCEPTED[tool].items() for check in checks}
    unaccepted = sorted((stack, *f) for stack, found in findings[tool].items() for f in found - accepted)
    assert unaccepted == []
    everywhere = set().union(*findings[tool].values())
    assert sorted(accepted - everywhere) == []


def test_every_accepted_finding_has_a_reason() -> None:
    for tool in ("checkov", "policy"):
        for chart, checks in ACCEPTED[tool].items():
            for check, reason in checks.items():
                assert isinstance(reason, str), f"{tool} {chart} {check}"
                assert len(reason) >= 10, f"{tool} {chart} {check}"


def test_checkov_finds_a_weakened_chart_object(tmp_path: Path, tmp_path_factory: pytest.TempPathFactory) -> None:
    rendered = shared_render("dev", tmp_path_factory)
    prometheus = rendered.directory / "charts" / "prometheus.yaml"
    copy = tmp_path / "weakened"
    shutil.copytree(rendered.directory, copy)
    (copy / "charts" / "prometheus.yaml").write_text(
        prometheus.read_text().replace("allowPrivilegeEscalation: false", "allowPrivilegeEscalation: true")
    )
    assert ("prometheus", "CKV_K8S_20") in checkov_findings(copy, tmp_path / "scan")


def test_the_policy_checks_find_a_chart_container_without_limits(tmp_path_factory: pytest.TempPathFactory) -> None:
    rendered = shared_render("dev", tmp_path_factory)  # its own objects: changing them changes no one else's
    (deployment,) = [o for o in rendered.cluster.charts["prometheus"] if o["kind"] == "Deployment"]
    deployment["spec"]["template"]["spec"]["containers"][0]["resources"] = {}
    assert ("prometheus", "requests-and-limits") in policy_findings(rendered)
