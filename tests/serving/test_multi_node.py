"""vLLM across several nodes: each replica a LeaderWorkerSet group. The objects a group gets, the
capacity it holds (hand-computed), and every bad input refused with its path."""

from __future__ import annotations

from typing import Any

import pytest

from inference_platform.config.errors import ConfigError
from inference_platform.stack.config import parse_stack_config, project_values
from tests.conftest import base_config
from tests.serving.test_scale_to_zero import keda, render

GROUP = {
    "name": "deepseek",
    "runtime": "vllm",
    "gpu": {"mode": "exclusive", "count": 8},
    "nodes": 2,
    "tensorParallelSize": 8,
    "versions": [{"name": "v1", "modelUri": "pvc://models/deepseek-v3", "weight": 100}],
    "autoscaling": {"minReplicas": 1, "maxReplicas": 3, "queueDepth": 16},
}


def group(**settings: Any) -> dict[str, Any]:
    return {key: value for key, value in (GROUP | settings).items() if value is not None}


def test_a_replica_is_a_group_of_a_leader_and_workers_scaled_as_one() -> None:
    objects = render(group())
    lws = objects["LeaderWorkerSet", "deepseek-v1-group"]
    template = lws["spec"]["leaderWorkerTemplate"]
    assert (template["size"], template["restartPolicy"]) == (2, "RecreateGroupOnPodRestart")
    assert "replicas" not in lws["spec"]  # the autoscaler owns the count of groups
    assert lws["metadata"]["annotations"]["leaderworkerset.sigs.k8s.io/exclusive-topology"] == (
        "topology.kubernetes.io/zone"
    )
    leader, worker = (template[key]["spec"]["containers"][0] for key in ("leaderTemplate", "workerTemplate"))
    assert leader["resources"]["limits"]["nvidia.com/gpu"] == worker["resources"]["limits"]["nvidia.com/gpu"] == "8"
    assert "readinessProbe" in leader
    assert not {"ports", "readinessProbe", "livenessProbe", "startupProbe"} & set(worker)
    assert worker["args"][-2:] == ["--node-rank=$(LWS_WORKER_INDEX)", "--headless"]
    # Every pod of the set on a node of its own.
    for key in ("leaderTemplate", "workerTemplate"):
        (term,) = template[key]["spec"]["affinity"]["podAntiAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
        assert term == {
            "labelSelector": {"matchLabels": {"leaderworkerset.sigs.k8s.io/name": "deepseek-v1-group"}},
            "topologyKey": "kubernetes.io/hostname",
        }
    # The sidecar takes the leader's serving port alone; workers have none.
    assert (
        template["leaderTemplate"]["metadata"]["annotations"]["traffic.sidecar.istio.io/includeInboundPorts"] == "8000"
    )
    assert template["workerTemplate"]["metadata"]["annotations"]["sidecar.istio.io/inject"] == "false"
    hpa = objects["HorizontalPodAutoscaler", "deepseek-v1"]
    assert hpa["spec"]["scaleTargetRef"] == {
        "apiVersion": "leaderworkerset.x-k8s.io/v1",
        "kind": "LeaderWorkerSet",
        "name": "deepseek-v1-group",
    }
    assert objects["Service", "deepseek-v1"]["spec"]["selector"] == {
        "app": "deepseek",
        "version": "v1",
        "leaderworkerset.sigs.k8s.io/worker-index": "0",
    }
    # One policy per group the autoscaler may make, each admitting only its own group.
    assert sorted(name for kind, name in objects if kind == "NetworkPolicy" and "-group-" in name) == [
        "deepseek-v1-group-0",
        "deepseek-v1-group-1",
        "deepseek-v1-group-2",
    ]
    assert objects["PodDisruptionBudget", "deepseek-v1"]["spec"]["maxUnavailable"] == 1


def test_keda_scales_the_sets_groups() -> None:
    scaled = render(group(), keda=keda(add_on=False))["ScaledObject", "deepseek-v1"]
    assert scaled["spec"]["scaleTargetRef"]["kind"] == "LeaderWorkerSet"
    assert scaled["spec"]["scaleTargetRef"]["name"] == "deepseek-v1-group"


def test_fixed_replicas_are_the_sets_replicas_and_no_topology_key_leaves_groups_anywhere() -> None:
    lws = render(group(autoscaling=None, replicas=2), gpuNodes={"groupTopologyKey": None})[
        "LeaderWorkerSet", "deepseek-v1-group"
    ]
    assert lws["spec"]["replicas"] == 2
    assert "leaderworkerset.sigs.k8s.io/exclusive-topology" not in lws["metadata"]["annotations"]


def stack_problems(*models: dict[str, Any], **platform: Any) -> list[tuple[str, str]]:
    config = base_config()
    config["inference-platform:models"] += list(models)
    config["inference-platform:platform"] = {"kubernetesVersion": "1.30.4"} | platform
    try:
        parse_stack_config(project_values(config))
    except ConfigError as error:
        return [(p.path, p.message) for p in error.problems]
    return []


M = "models[2]"


@pytest.mark.parametrize(
    ("settings", "platform", "expected"),
    [
        (
            {"runtime": "sglang"},
            {},
            [(f"{M}.nodes", "'nodes' is not a setting of the sglang runtime")],
        ),
        (
            {"tensorParallelSize": 4},
            {},
            [
                (
                    f"{M}.tensorParallelSize",
                    "tensorParallelSize x pipelineParallelSize is 4 x 2 = 8, but a replica has 2 node(s) x 8 GPU(s) "
                    "= 16: make them equal",
                )
            ],
        ),
        ({"tensorParallelSize": 16, "pipelineParallelSize": 1}, {}, []),
        (
            {"gpu": {"mode": "vgpu", "count": 8}},
            {"hami": {"enabled": True}},
            [(f"{M}.nodes", "a group spans whole nodes' GPUs: use gpu mode exclusive, not vgpu")],
        ),
        (
            {"gpu": {"mode": "shared"}, "gpuMemoryUtilization": 0.9},
            {},
            [(f"{M}.nodes", "a group spans whole nodes' GPUs: use gpu mode exclusive, not shared")],
        ),
        (
            {"autoscaling": {"minReplicas": 0, "maxReplicas": 2, "queueDepth": 4}},
            {"autoscaler": "keda"},
            [(f"{M}.autoscaling.minReplicas", "a multi-node group does not sleep at zero: set 1 or more")],
        ),
        (
            {"args": ["--distributed-executor-backend=ray"]},
            {},
            [(f"{M}.args[0]", "--distributed-executor-backend is set by the platform for a multi-node group")],
        ),
        (
            {"name": "d" * 51},
            {},
            [
                (
                    f"{M}.versions[0].name",
                    f"'{'d' * 51}-v1-group-2-1', the name of this version's last group's last pod (its hostname), "
                    "is 64 characters; Kubernetes allows 63: shorten the model or version name",
                )
            ],
        ),
        (
            {},
            {"gpuNodes": {"count": 1, "gpusPerNode": 8}},
            [
                (
                    f"{M}.nodes",
                    "a replica is a group of 2 pods, each on a node of its own with 8 GPUs: 2 x 8 = 16 GPUs on 2 "
                    "nodes, but platform.gpuNodes declares 1 nodes",
                ),
                (
                    "platform.gpuNodes",
                    "the models need 16 GPUs at their minimum replicas, more than the 8 declared (1 nodes x 8): pods "
                    "could never all schedule; add GPU nodes, or lower replicas or GPU requests",
                ),
            ],
        ),
    ],
)
def test_bad_input_is_refused_with_its_path(
    settings: dict[str, Any], platform: dict[str, Any], expected: list[tuple[str, str]]
) -> None:
    assert stack_problems(group(**settings), **platform) == expected


def test_the_capacity_plan_counts_a_group_as_its_nodes_gpus() -> None:
    """2 nodes x 8 GPUs a group; 1 to 3 groups; plus a canary of one group: min (1 + 1) x 16 = 32,
    peak (3 + 3) x 16 = 96, against 8 nodes x 8 GPUs declared: the minimum fits, the peak does not."""
    canary = group(
        versions=[
            {"name": "v1", "modelUri": "pvc://models/deepseek-v3", "weight": 90},
            {"name": "v2", "modelUri": "pvc://models/deepseek-v3.1", "weight": 10},
        ]
    )
    config = base_config()
    config["inference-platform:models"] = [canary]
    config["inference-platform:platform"] = {"gpuNodes": {"count": 8, "gpusPerNode": 8}}
    plan = parse_stack_config(project_values(config)).capacity()
    assert (plan.gpus_min, plan.gpus_awake, plan.gpus_peak, plan.declared) == (32, 32, 96, 64)
    assert (plan.fits_min, plan.fits_peak) == (True, False)
    assert plan.models["deepseek"].peak == 96
