"""What each GPU mode does to a pod: the device plugin's and HAMi's resource names, the node
selection and taints, and the environment that hides or shows devices."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import TypeAdapter

from inference_platform.platform.gpu_nodes import GpuNodes, Toleration
from inference_platform.serving.gpu import GpuSpec, VirtualGpu

GPU: TypeAdapter[Any] = TypeAdapter(GpuSpec)
NODES = GpuNodes(node_selector={"gpu": "a100"}, tolerations=[Toleration(key="gpu", effect="NoExecute")])


def placed(spec: Any) -> tuple[dict[str, str], dict[str, str], dict[str, Any]]:
    placement = GPU.validate_python(spec).placement(NODES)
    return placement.limits, placement.env, placement.pod_fields()


GPU_NODE_FIELDS = {
    "nodeSelector": {"gpu": "a100"},
    "tolerations": [{"key": "gpu", "operator": "Exists", "effect": "NoExecute"}],
}


def test_no_gpu_hides_every_device_and_selects_no_node() -> None:
    assert placed("none") == ({}, {"NVIDIA_VISIBLE_DEVICES": "none"}, {})


def test_whole_gpus_are_counted_by_the_device_plugin_on_gpu_nodes() -> None:
    assert placed({"mode": "exclusive", "count": 2}) == ({"nvidia.com/gpu": "2"}, {}, GPU_NODE_FIELDS)


@pytest.mark.parametrize(
    ("spec", "limits"),
    [
        ({"mode": "vgpu"}, {"nvidia.com/gpu": "1"}),
        (
            {"mode": "vgpu", "count": 2, "memoryMib": 20480, "cores": 30},
            {"nvidia.com/gpu": "2", "nvidia.com/gpumem": "20480", "nvidia.com/gpucores": "30"},
        ),
        ({"mode": "vgpu", "memoryPercent": 25}, {"nvidia.com/gpu": "1", "nvidia.com/gpumem-percentage": "25"}),
    ],
    ids=["count-only", "mib-and-cores", "percent"],
)
def test_vgpus_carry_hamis_caps_on_gpu_nodes(spec: dict[str, Any], limits: dict[str, str]) -> None:
    assert placed(spec) == (limits, {}, GPU_NODE_FIELDS)


def test_a_shared_gpu_is_seen_through_the_runtime_and_requests_nothing() -> None:
    assert placed({"mode": "shared", "visibleDevices": "0,1"}) == (
        {},
        {"NVIDIA_VISIBLE_DEVICES": "0,1"},
        GPU_NODE_FIELDS,
    )


@pytest.mark.parametrize(
    ("spec", "memory", "cap"),
    [
        ({"memoryMib": 12000}, 81920, 12000),
        ({"memoryPercent": 33}, 81920, 27033),  # 27033.6 MiB: whole MiB, rounded down
        ({"memoryPercent": 33}, None, None),
        ({}, 81920, None),
    ],
)
def test_a_vgpus_memory_cap_in_whole_mib(spec: dict[str, Any], memory: int | None, cap: int | None) -> None:
    gpu = VirtualGpu.model_validate(spec)

    assert gpu.memory_cap_mib(GpuNodes(memory_mib=memory)) == cap


def test_tolerations_leave_out_what_is_unset() -> None:
    assert Toleration().to_kubernetes() == {"operator": "Exists"}
    assert Toleration(key="k", operator="Equal", value="v").to_kubernetes() == {
        "key": "k",
        "operator": "Equal",
        "value": "v",
    }
