"""What a rehearsal decides without a cluster: its fake nodes from a stack's declarations, the
scheduler's placement against the capacity plan, the stored objects against the render, the report."""

from __future__ import annotations

import json
from typing import Any

import pytest

from inference_platform.analysis.capacity import DevicePlan, ModelPlan, Plan
from inference_platform.analysis.rehearsal import (
    CANNOT_SHOW,
    FAKE_NODE_ANNOTATION,
    NodeGroup,
    NodeRequest,
    Outcome,
    Report,
    Step,
    compare_placement,
    markdown,
    node_groups,
    node_manifests,
    pod_placement,
    stored_differences,
    taints,
)
from inference_platform.platform.gpu_nodes import GPU_RESOURCE, GpuNodes, Toleration
from inference_platform.platform.hami import GPU_MEMORY_RESOURCE, HAMI_NODE_LABEL
from inference_platform.platform.npu_nodes import NpuNodes


def plan(gpus: int, declared: int | None, **npus: int) -> Plan:
    models = {"llm": ModelPlan("exclusive", gpus, gpus, gpus * 2)} if gpus else {}
    models |= {f"npu-{device}": ModelPlan("exclusive", n, n, n, device=device) for device, n in npus.items()}
    devices = {device: DevicePlan(n, n, n, None) for device, n in npus.items()}
    return Plan(gpus, gpus, gpus * 2, declared, models, npus=devices)


def pod(
    name: str, node: str | None = None, gpus: int = 0, reason: str | None = None, limits: dict[str, str] | None = None
) -> dict[str, Any]:
    resources = {"limits": ({GPU_RESOURCE: str(gpus)} if gpus else {}) | (limits or {})}
    conditions = [] if reason is None else [{"type": "PodScheduled", "status": "False", "message": reason}]
    return {
        "metadata": {
            "namespace": "models",
            "name": name,
            "ownerReferences": [{"kind": "ReplicaSet", "name": f"{name}-rs", "controller": True}],
            "labels": {
                "app.kubernetes.io/name": name.split("-", 1)[0],
                "app.kubernetes.io/component": "predictor",
                "app.kubernetes.io/part-of": "inference-platform",
            },
        },
        "spec": {"containers": [{"name": "c", "resources": resources}], **({"nodeName": node} if node else {})},
        "status": {"conditions": conditions},
    }


def gpu_group(count: int, per_node: int = 4) -> NodeGroup:
    return NodeGroup("gpu", count, {}, (), {GPU_RESOURCE: str(per_node)}, declared=count)


def test_declared_gpu_nodes_are_rehearsed_with_their_labels_taints_and_gpus() -> None:
    nodes = GpuNodes(
        node_selector={"pool": "a100"},
        tolerations=[Toleration(key="nvidia.com/gpu", operator="Exists", effect="NoSchedule")],
        count=3,
        gpus_per_node=4,
    )
    groups, notes = node_groups(plan(4, 12), nodes, None, False, NodeRequest())
    gpu = next(g for g in groups if g.role == "gpu")
    assert (gpu.count, gpu.labels, gpu.resources) == (3, {"pool": "a100"}, {GPU_RESOURCE: "4"})
    assert gpu.taints == ({"key": "nvidia.com/gpu", "effect": "NoSchedule"},)
    assert notes == []
    manifests = [n for n in node_manifests(groups) if n["metadata"]["name"].startswith("gpu-")]
    assert [n["metadata"]["name"] for n in manifests] == ["gpu-0", "gpu-1", "gpu-2"]
    node = manifests[0]
    assert node["metadata"]["annotations"] == {FAKE_NODE_ANNOTATION: "fake"}
    assert node["metadata"]["labels"]["pool"] == "a100"
    assert node["status"]["allocatable"][GPU_RESOURCE] == "4"
    assert node["spec"]["taints"] == [{"key": "nvidia.com/gpu", "effect": "NoSchedule"}]


def test_hami_nodes_carry_hamis_label_and_fewer_nodes_are_a_note() -> None:
    nodes = GpuNodes(count=2, gpus_per_node=8)
    groups, notes = node_groups(plan(8, 16), nodes, None, True, NodeRequest(gpu_nodes=1))
    gpu = next(g for g in groups if g.role == "gpu")
    assert gpu.count == 1
    assert gpu.declared == 2
    assert HAMI_NODE_LABEL.items() <= gpu.labels.items()
    assert notes == ["--gpu-nodes 1: 1 GPU node(s) where the stack has 2"]


def test_undeclared_gpu_nodes_are_assumed_enough_for_the_plan_and_said_so() -> None:
    groups, notes = node_groups(plan(12, None), GpuNodes(), None, False, NodeRequest())
    gpu = next(g for g in groups if g.role == "gpu")
    assert (gpu.count, gpu.declared) == (2, None)
    assert "declares no count" in notes[0]
    assert "2 GPU node(s) of 8 GPUs" in notes[0]


def test_no_gpu_models_and_no_declaration_make_no_gpu_nodes() -> None:
    groups, _ = node_groups(plan(0, None), GpuNodes(), None, False, NodeRequest())
    assert [g.role for g in groups] == ["cpu"]


def test_npu_pools_become_nodes_of_their_chip_and_undeclared_chips_are_assumed() -> None:
    npu = NpuNodes.model_validate({"pools": [{"type": "Ascend910B3", "count": 2, "npusPerNode": 8}]})
    groups, notes = node_groups(
        plan(0, None, Ascend910B3=4, Ascend310P=3), GpuNodes(), npu, False, NodeRequest(npu_nodes={"Ascend910B3": 1})
    )
    by_role = {g.role: g for g in groups}
    assert by_role["npu-ascend910b3"].count == 1
    assert by_role["npu-ascend910b3"].resources == {"huawei.com/Ascend910B3": "8"}
    assert by_role["npu-ascend310p"].count == 1
    assert any("declares no Ascend310P nodes" in note for note in notes)
    assert any(note.startswith("--npu-nodes Ascend910B3=1") for note in notes)


def test_taints_follow_the_tolerations() -> None:
    found = taints(
        [
            Toleration(key="dedicated", operator="Equal", value="gpu", effect="NoExecute"),
            Toleration(operator="Exists"),
            Toleration(key="a", operator="Exists"),
        ]
    )
    assert found == (
        {"key": "dedicated", "effect": "NoExecute", "value": "gpu"},
        {"key": "a", "effect": "NoSchedule"},
    )


def test_a_pods_placement_its_devices_and_the_schedulers_words() -> None:
    placed = pod_placement(pod("llm-0", node="gpu-0", gpus=2))
    assert (placed.node, placed.gpus, placed.owner, placed.model, placed.slices) == (
        "gpu-0",
        2,
        "ReplicaSet/llm-0-rs",
        "llm",
        False,
    )
    pending = pod_placement(pod("llm-1", gpus=2, reason="0/4 nodes are available: 3 Insufficient nvidia.com/gpu."))
    assert pending.node is None
    assert pending.reason == "0/4 nodes are available: 3 Insufficient nvidia.com/gpu."
    assert pod_placement(pod("vgpu-0", gpus=1, limits={GPU_MEMORY_RESOURCE: "4000"})).slices
    assert pod_placement(
        pod("npu-0", limits={"huawei.com/Ascend310P": "1", "huawei.com/Ascend310P-memory": "4096"})
    ).slices
    npu = pod_placement(pod("npu-1", node="npu-0", limits={"huawei.com/Ascend910B3": "2"}))
    assert npu.npus == {"huawei.com/Ascend910B3": 2}


def test_placement_agrees_when_every_pod_holds_the_plans_gpus() -> None:
    pods = [pod_placement(pod("llm-0", node="gpu-0", gpus=2)), pod_placement(pod("llm-1", node="gpu-1", gpus=2))]
    result = compare_placement(pods, plan(4, 8), [gpu_group(2)], {})
    assert result.outcome is Outcome.PASSED
    assert (result.gpus_planned, result.gpus_placed, result.gpus_rehearsed) == (4, 4, 8)
    assert result.findings == ()


def test_pending_pods_on_too_few_nodes_agree_with_the_plan() -> None:
    pods = [
        pod_placement(pod("llm-0", node="gpu-0", gpus=4)),
        pod_placement(pod("llm-1", gpus=4, reason="Insufficient nvidia.com/gpu")),
    ]
    result = compare_placement(pods, plan(8, 8), [gpu_group(1)], {})
    assert result.outcome is Outcome.PODS_PENDING
    assert [p.name for p in result.pending] == ["llm-1"]


def test_a_pending_pod_the_plan_fits_is_a_disagreement() -> None:
    pods = [pod_placement(pod("llm-0", gpus=2, reason="node(s) didn't match Pod's node affinity/selector"))]
    result = compare_placement(pods, plan(2, 8), [gpu_group(2)], {})
    assert result.outcome is Outcome.PLACEMENT_DISAGREES
    assert "Pending though the plan fits" in result.findings[0]
    assert "node affinity/selector" in result.findings[0]


def test_every_pod_placed_where_the_plan_does_not_fit_is_a_disagreement() -> None:
    pods = [pod_placement(pod("llm-0", node="gpu-0", gpus=1))]
    result = compare_placement(pods, plan(6, 4), [gpu_group(1)], {})
    assert result.outcome is Outcome.PLACEMENT_DISAGREES
    assert any("do not fit" in f for f in result.findings)
    assert any("placed pods holding 1 GPUs" in f for f in result.findings)


def test_pods_no_controller_makes_here_and_slices_are_left_out() -> None:
    pods = [
        pod_placement(pod("vgpu-0", gpus=1, reason="Insufficient nvidia.com/gpumem", limits={GPU_MEMORY_RESOURCE: "1"}))
    ]
    result = compare_placement(pods, plan(4, 8), [gpu_group(2)], {"llm": "LeaderWorkerSet llm"})
    assert result.outcome is Outcome.PASSED
    assert result.gpus_planned == 0
    assert [p.name for p in result.left_to_hami] == ["vgpu-0"]


def test_npu_models_no_controller_makes_pods_for_are_left_out() -> None:
    group = NodeGroup("npu-ascend910b3", 2, {}, (), {"huawei.com/Ascend910B3": "8"}, declared=2)
    pods = [pod_placement(pod("npu-0", node="npu-ascend910b3-0", limits={"huawei.com/Ascend910B3": "2"}))]
    result = compare_placement(pods, plan(0, None, Ascend910B3=2, Ascend910B4=8), [group], {"npu-Ascend910B4": "LWS"})
    assert result.npus_planned == {"huawei.com/Ascend910B3": 2}
    assert result.outcome is Outcome.PASSED


def test_npu_placement_is_compared_per_chip() -> None:
    group = NodeGroup("npu-ascend910b3", 1, {}, (), {"huawei.com/Ascend910B3": "8"}, declared=1)
    pods = [pod_placement(pod("npu-0", node="npu-ascend910b3-0", limits={"huawei.com/Ascend910B3": "2"}))]
    assert compare_placement(pods, plan(0, None, Ascend910B3=2), [group], {}).outcome is Outcome.PASSED
    disagrees = compare_placement(pods, plan(0, None, Ascend910B3=3), [group], {})
    assert disagrees.outcome is Outcome.PLACEMENT_DISAGREES
    assert "2 huawei.com/Ascend910B3; the plan gives 3" in disagrees.findings[0]


def test_stored_objects_hold_the_render_with_server_defaults_aside() -> None:
    rendered = [
        {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s", "namespace": "a"}, "stringData": {"k": "v"}},
        {
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": {"name": "d", "namespace": "a", "labels": {}},
            "spec": {
                "replicas": 2,
                "template": {
                    "spec": {
                        "hostPID": False,
                        "containers": [
                            {"name": "c", "env": [], "resources": {"limits": {"cpu": "2000m", "memory": 0.5}}}
                        ],
                    }
                },
            },
        },
        {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "m", "namespace": "a"}, "stringData": {"k": "[x]"}},
    ]
    stored = [
        {
            "apiVersion": "v1",
            "kind": "Secret",
            "metadata": {"name": "s", "namespace": "a", "uid": "1"},
            "data": {"k": "dg=="},
        },
        {
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": {"name": "d", "namespace": "a", "generation": 1},
            "spec": {
                "replicas": 2,
                "strategy": {"type": "RollingUpdate"},
                "template": {
                    "spec": {
                        "containers": [
                            {
                                "name": "c",
                                "imagePullPolicy": "IfNotPresent",
                                "resources": {"limits": {"cpu": "2", "memory": "500m"}},
                            }
                        ]
                    }
                },
            },
            "status": {},
        },
        {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "m", "namespace": "a"}, "data": {"k": "c2VjcmV0"}},
    ]
    assert stored_differences(rendered, stored, masked="[x]") == []
    assert stored_differences(rendered, stored) == ["Secret a/m: data.k: rendered 'W3hd', stored 'c2VjcmV0'"]


def test_a_field_the_server_changed_and_a_missing_object_are_named() -> None:
    rendered = [
        {
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": {"name": "d", "namespace": "a"},
            "spec": {"replicas": 2},
        },
        {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "gone", "namespace": "a"}},
    ]
    stored = [
        {
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": {"name": "d", "namespace": "a"},
            "spec": {"replicas": 1},
        }
    ]
    assert stored_differences(rendered, stored) == [
        "Deployment a/d: spec.replicas: rendered 2, stored 1",
        "ConfigMap a/gone: not stored",
    ]


def test_the_report_names_the_outcome_each_failure_and_what_it_cannot_show() -> None:
    report = Report("prod", "Pulumi.prod.yaml")
    report.steps = [
        Step("preview", True, 3.0, {"create": 10}),
        Step("up", False, 9.0, {}, [("kubernetes:core/v1:Pod bad", 'pods "bad" is forbidden: violates PodSecurity')]),
    ]
    report.placement = compare_placement(
        [pod_placement(pod("llm-1", gpus=4, reason="Insufficient nvidia.com/gpu"))], plan(4, 8), [gpu_group(0)], {}
    )
    text = markdown(report)
    assert report.outcome is Outcome.FAILED
    assert "### Rehearsal of `prod`: failed" in text
    assert "violates PodSecurity" in text
    assert "Insufficient nvidia.com/gpu" in text
    assert all(item in text for item in CANNOT_SHOW)
    data = json.loads(json.dumps(report.as_json()))
    assert data["outcome"] == "failed"
    assert data["steps"][1]["failures"][0]["resource"] == "kubernetes:core/v1:Pod bad"
    assert data["placement"]["pending"][0]["reason"] == "Insufficient nvidia.com/gpu"


@pytest.mark.parametrize(
    ("interrupted", "left", "expected"),
    [(True, [], Outcome.INTERRUPTED), (False, ["ConfigMap a/x"], Outcome.FAILED), (False, [], Outcome.PASSED)],
)
def test_the_outcome(interrupted: bool, left: list[str], expected: Outcome) -> None:
    report = Report("dev", "Pulumi.dev.yaml", steps=[Step("up", True, 1.0)], left_behind=left, interrupted=interrupted)
    assert report.outcome is expected
