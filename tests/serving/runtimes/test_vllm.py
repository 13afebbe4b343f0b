"""vLLM's arguments, probes and GPU memory sizing (tested as data: see docs/tests.md on vLLM's parser)."""

from __future__ import annotations

import math
from typing import Any

import pytest
from pydantic import ValidationError

from inference_platform.platform.gpu_nodes import GpuNodes
from inference_platform.serving.runtimes.llm_engine import CAP_RESERVE_MIB
from inference_platform.serving.runtimes.vllm import VLLMModel

VERSIONS = [{"name": "v1", "modelUri": "hf://meta-llama/Llama-3.1-8B-Instruct", "weight": 100}]


def model(**settings: Any) -> VLLMModel:
    base = {"name": "llama", "runtime": "vllm", "gpu": "exclusive", "versions": VERSIONS}
    return VLLMModel.model_validate(base | settings)


def args(spec: VLLMModel, nodes: GpuNodes | None = None) -> list[str]:
    result: list[str] = spec.plan(spec.versions[0], nodes or GpuNodes()).container["args"]
    return result


def test_serves_the_mounted_model_under_the_models_name() -> None:
    spec = model(maxModelLen=8192, dtype="bfloat16")
    assert spec.plan(spec.versions[0], GpuNodes()).container["command"] == ["vllm", "serve", "/mnt/models"]
    assert args(spec) == [
        "--served-model-name=llama",
        "--host=0.0.0.0",
        "--port=8000",
        "--tensor-parallel-size=1",
        "--dtype=bfloat16",
        "--max-model-len=8192",
    ]


def test_readiness_waits_for_the_model_not_just_the_engine() -> None:
    container = model().plan(model().versions[0], GpuNodes()).container
    assert container["readinessProbe"]["httpGet"] == {"path": "/v1/models", "port": 8000}
    assert container["startupProbe"]["httpGet"]["path"] == "/v1/models"
    assert container["startupProbe"]["periodSeconds"] * container["startupProbe"]["failureThreshold"] >= 1800
    assert container["livenessProbe"]["httpGet"]["path"] == "/health"


def test_tensor_parallel_uses_shared_memory() -> None:
    spec = model(tensorParallelSize=2, gpu={"mode": "exclusive", "count": 2})
    plan = spec.plan(spec.versions[0], GpuNodes())
    assert {"name": "shm", "mountPath": "/dev/shm"} in plan.container["volumeMounts"]
    assert plan.volumes == ({"name": "shm", "emptyDir": {"medium": "Memory", "sizeLimit": "2Gi"}},)
    assert "--tensor-parallel-size=2" in args(spec)


@pytest.mark.parametrize(
    ("gpu", "nodes", "expected"),
    [
        ({"mode": "vgpu", "memoryMib": 20480}, GpuNodes(), "--gpu-memory-utilization=0.9"),
        ({"mode": "vgpu", "memoryMib": 10240}, GpuNodes(), "--gpu-memory-utilization=0.8"),
        ({"mode": "vgpu", "memoryPercent": 50}, GpuNodes(memory_mib=81920), "--gpu-memory-utilization=0.95"),
        ({"mode": "vgpu", "memoryPercent": 50}, GpuNodes(), "--gpu-memory-utilization=0.85"),
    ],
    ids=["20GiB-cap", "10GiB-cap", "half-of-80GiB", "percent-of-unknown-device"],
)
def test_a_vgpu_memory_cap_sizes_the_engines_share(gpu: dict[str, Any], nodes: GpuNodes, expected: str) -> None:
    """HAMi reports the cap as the device's total, so the share is of the cap, minus a reserve
    for the CUDA context and NCCL buffers that HAMi does not count."""
    assert expected in args(model(gpu=gpu), nodes)


def test_whole_gpus_keep_vllms_default_and_an_explicit_share_wins() -> None:
    assert not any(a.startswith("--gpu-memory-utilization") for a in args(model()))
    spec = model(gpu={"mode": "vgpu", "memoryMib": 20480}, gpuMemoryUtilization=0.5)
    assert "--gpu-memory-utilization=0.5" in args(spec)


@pytest.mark.parametrize(
    ("settings", "words"),
    [
        ({"gpu": "none"}, "vLLM serves on GPUs"),
        ({"tensorParallelSize": 2}, "each pod gets 1 GPU"),
        ({"gpu": "shared"}, "set this model's share"),
        ({"maxModelLen": 0}, "greater than or equal to 1"),
        ({"gpuMemoryUtilization": 1.5}, "less than or equal to 1"),
    ],
)
def test_impossible_settings_are_config_errors(settings: dict[str, Any], words: str) -> None:
    with pytest.raises(ValidationError, match=words):
        model(**settings)


def test_example_request_is_an_openai_completion_for_the_served_name() -> None:
    example = model().example_request()
    assert example.path == "/v1/completions"
    assert example.body["model"] == "llama"


MIB = 2**20
# Caps past every MiB up to 20 GiB (most do not divide evenly), then a stride up to 192 GiB.
CAPS = [*range(4096, 20481), *range(20481, 196609, 97)]
# One GPU's memory as nvidia-smi reports it (T4, A10, A100 40 and 80 GB, H100 NVL, H200), and every percentage.
DEVICES_MIB = (15360, 23028, 40960, 81920, 95830, 143771)


def derived_share(gpu: dict[str, Any], nodes: GpuNodes | None = None) -> float:
    (arg,) = [a for a in model(gpu=gpu).server_args(nodes or GpuNodes()) if a.startswith("--gpu-memory-utilization=")]
    return float(arg.removeprefix("--gpu-memory-utilization="))


def left_outside_vllm(cap_mib: int, share: float) -> int:
    """Bytes of the cap vLLM leaves alone: it takes ceil(total * share) of what CUDA reports as total."""
    total = cap_mib * MIB
    return total - math.ceil(total * share)


def assert_reserve_kept(cap_mib: int, share: float) -> None:
    assert left_outside_vllm(cap_mib, share) >= CAP_RESERVE_MIB * MIB, (cap_mib, share)
    # ... and no more than it must: one hundredth more would eat into the reserve.
    assert left_outside_vllm(cap_mib, round(share + 0.01, 2)) < CAP_RESERVE_MIB * MIB, (cap_mib, share)


def test_the_derived_share_never_leaves_less_than_the_reserve_under_any_cap() -> None:
    for cap in CAPS:
        assert_reserve_kept(cap, derived_share({"mode": "vgpu", "memoryMib": cap}))
    assert derived_share({"mode": "vgpu", "memoryMib": 12000}) == 0.82  # 9952 of 12000 MiB is 0.8293...


def test_the_derived_share_of_a_percentage_cap_keeps_the_reserve_on_every_device() -> None:
    for device in DEVICES_MIB:
        for percent in range(1, 101):
            cap = device * percent // 100  # HAMi's gpumem-percentage, in whole MiB
            if cap < 2 * CAP_RESERVE_MIB:
                continue
            share = derived_share({"mode": "vgpu", "memoryPercent": percent}, GpuNodes(memory_mib=device))
            assert_reserve_kept(cap, share)


@pytest.mark.parametrize("cap", [1024, 3000, 4095])
def test_below_twice_the_reserve_the_share_stays_at_half(cap: int) -> None:
    """Documented: at least 0.5, so a cap under 4 GiB leaves vLLM half of it and the reserve shrinks."""
    assert derived_share({"mode": "vgpu", "memoryMib": cap}) == 0.5
