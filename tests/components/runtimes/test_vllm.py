"""vLLM's arguments, probes and GPU memory sizing (tested as data: see README on vLLM's parser)."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import ValidationError

from components.gpu import GpuNodes
from components.runtimes.vllm import VLLMModel

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
