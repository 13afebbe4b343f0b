"""vLLM on Ascend NPUs: vllm-ascend's image for the chip's family, vLLM's own flags, tensor
parallelism over the pod's NPUs, the memory share under a vNPU, multi-node groups on whole NPUs.
The flags go through vLLM's parser in test_vllm_parser.py."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

from inference_platform import pins
from inference_platform.platform.ascend import CHIPS, VISIBLE_DEVICES_ENV
from inference_platform.platform.gpu_nodes import GpuNodes
from inference_platform.serving.runtimes.llm_engine import CAP_RESERVE_MIB
from inference_platform.serving.runtimes.sglang import SGLangModel
from inference_platform.serving.runtimes.vllm import VLLMModel
from tests.conftest import ROOT
from tests.serving.test_npu import problems, stack

VERSIONS = [{"name": "v1", "modelUri": "pvc://models/qwen3-8b", "weight": 100}]


def model(npu: Any, **settings: Any) -> VLLMModel:
    return VLLMModel.model_validate({"name": "qwen", "runtime": "vllm", "npu": npu, "versions": VERSIONS} | settings)


def container(spec: VLLMModel) -> dict[str, Any]:
    result: dict[str, Any] = spec.plan(spec.versions[0], GpuNodes()).container
    return result


def share(spec: VLLMModel) -> float | None:
    found = [a for a in spec.server_args(GpuNodes()) if a.startswith("--gpu-memory-utilization=")]
    return float(found[0].split("=")[1]) if found else None


@pytest.mark.parametrize(
    ("chip", "tag"),
    [
        ("Ascend910B2", "v0.30.0"),
        ("Ascend910B3", "v0.30.0"),
        ("Ascend910B4", "v0.30.0"),
        ("Ascend910B4-1", "v0.30.0"),
        ("Ascend910C", "v0.30.0-a3"),
        ("Ascend310P", "v0.30.0-310p"),
    ],
)
def test_the_image_is_vllm_ascends_for_the_chips_family(chip: str, tag: str) -> None:
    assert container(model(chip))["image"] == f"quay.io/ascend/vllm-ascend:{tag}"
    assert pins.VLLM_ASCEND_IMAGE.startswith("quay.io/ascend/vllm-ascend:v")


def test_vllm_serve_runs_under_the_images_entrypoint_with_vllms_own_flags() -> None:
    """CANN's entrypoint sources the toolkit's environment and runs its arguments, so the
    command stays the image's and `vllm serve` leads the args; the flags are vLLM's, as on GPUs."""
    on_npu = container(model({"type": "Ascend910B3", "count": 2}, tensorParallelSize=2, dtype="bfloat16"))
    on_gpu = VLLMModel.model_validate(
        {"name": "qwen", "runtime": "vllm", "gpu": {"mode": "exclusive", "count": 2}, "versions": VERSIONS}
        | {"tensorParallelSize": 2, "dtype": "bfloat16"}
    )
    gpu_container = container(on_gpu)
    assert "command" not in on_npu
    assert on_npu["args"] == [*gpu_container["command"], *gpu_container["args"]]
    assert on_npu["args"][:3] == ["vllm", "serve", "/mnt/models"]
    env = {e["name"] for e in on_npu["env"]}
    assert not env & set(VISIBLE_DEVICES_ENV)  # the device plugin's to set
    assert not any(name.startswith(("NVIDIA_", "CUDA_")) for name in env)
    assert on_npu["readinessProbe"] == gpu_container["readinessProbe"]


def test_tensor_parallelism_spans_the_pods_npus() -> None:
    with pytest.raises(ValidationError, match=r"tensorParallelSize.*is 1 but each pod gets 4 NPU\(s\)"):
        model({"type": "Ascend910B3", "count": 4})
    assert (
        "--tensor-parallel-size=4"
        in container(model({"type": "Ascend910B3", "count": 4}, tensorParallelSize=4))["args"]
    )


def test_a_chip_vllm_ascend_has_no_image_for_is_refused() -> None:
    with pytest.raises(ValidationError, match="vllm-ascend has no image for Ascend910A"):
        model("Ascend910A")


def test_sglang_stays_nvidia_only_with_one_message() -> None:
    with pytest.raises(ValidationError) as raised:
        SGLangModel.model_validate({"name": "s", "runtime": "sglang", "npu": "Ascend910B3", "versions": VERSIONS})
    messages = [e["msg"] for e in raised.value.errors()]
    assert len(messages) == 1, messages
    assert "sglang cannot use Ascend NPUs: use runtime mindie, vllm or custom" in messages[0]


# --- the engine's memory share under a vNPU ------------------------------------------------


def test_whole_npus_keep_vllms_default_share() -> None:
    assert share(model({"type": "Ascend910B3", "count": 2}, tensorParallelSize=2)) is None
    assert share(model({"type": "Ascend910B3", "mode": "vnpu"})) is None  # no memory asked: a whole card


def test_a_template_vnpu_is_sized_like_a_vgpu_cap_of_the_template_hami_gives() -> None:
    """10000 MiB on a 910B3 is rounded up to vir05_1c_16g (16384 MiB), which the engine sees as
    its device's whole memory, as it sees a vGPU's cap."""
    spec = model({"type": "Ascend910B3", "mode": "vnpu", "memoryMib": 10000})
    assert spec.npu is not None
    assert spec.npu.template is not None
    assert spec.npu.template.memory_mib == 16384
    assert share(spec) == math.floor((16384 - CAP_RESERVE_MIB) / 16384 * 100) / 100


def test_a_soft_vnpus_share_never_exceeds_its_memory_over_the_cards() -> None:
    """Under soft slicing the card reports all its memory: the share must stay at or below the
    vNPU's memory over the card's (ascend-device-plugin docs/hami.md), for every chip and size."""
    for chip in CHIPS.values():
        if chip.common_word not in ("Ascend910B3", "Ascend310P", "Ascend910B4"):
            continue
        for memory in range(1024, chip.memory_capacity_mib + 1, 97):
            spec = model({"type": chip.common_word, "mode": "vnpu", "slicing": "soft", "memoryMib": memory})
            found = share(spec)
            assert found is not None
            ceiling = memory / chip.memory_capacity_mib
            assert 0 < found <= ceiling, (chip.common_word, memory, found)
    # 32 GiB of a 64 GiB 910B3: the reserve comes off the vNPU's half.
    half = model({"type": "Ascend910B3", "mode": "vnpu", "slicing": "soft", "memoryMib": 32768})
    assert share(half) == math.floor((32768 - CAP_RESERVE_MIB) / 65536 * 100) / 100


def test_a_share_set_above_a_soft_vnpus_memory_is_a_config_error() -> None:
    npu = {"type": "Ascend910B3", "mode": "vnpu", "slicing": "soft", "memoryMib": 32768}
    with pytest.raises(ValidationError, match=r"0.9 is more than the vNPU's share of its card.*set 0.50 or less"):
        model(npu, gpuMemoryUtilization=0.9)
    assert share(model(npu, gpuMemoryUtilization=0.5)) == 0.5


# --- multi-node groups ---------------------------------------------------------------------


def test_a_group_on_whole_npus_runs_vllms_multi_node_mode_under_the_entrypoint() -> None:
    spec = model({"type": "Ascend910B3", "count": 8}, nodes=2, tensorParallelSize=8)
    plan = spec.plan(spec.versions[0], GpuNodes())
    assert plan.workers is not None
    assert plan.container["args"][:3] == list(plan.workers.args[:3]) == ["vllm", "serve", "/mnt/models"]
    assert "--headless" in plan.workers.args
    assert "--distributed-executor-backend=mp" in plan.container["args"]


def test_a_vnpu_group_is_refused() -> None:
    with pytest.raises(ValidationError, match="a group spans whole nodes' NPUs: use npu mode exclusive, not vnpu"):
        model({"type": "Ascend910B3", "mode": "vnpu", "count": 8, "memoryMib": 32768}, nodes=2, tensorParallelSize=8)


def test_a_group_of_npus_that_does_not_add_up_names_npus() -> None:
    with pytest.raises(ValidationError, match=r"2 node\(s\) x 8 NPU\(s\) = 16"):
        model({"type": "Ascend910B3", "count": 8}, nodes=2, tensorParallelSize=4)


def test_an_npu_group_is_measured_against_the_npu_nodes_not_the_gpu_nodes(tmp_path: Path, capsys: Any) -> None:
    """A stack with one GPU node and two 910B3 nodes: a two-node NPU group fits; a three-node one
    is refused against the NPU pool alone."""
    group = {"runtime": "vllm", "npu": {"type": "Ascend910B3", "count": 8}, "tensorParallelSize": 8}
    models = [
        {"name": "fits", "nodes": 2, "versions": VERSIONS} | group,
        {"name": "too-big", "nodes": 3, "versions": VERSIONS} | group,
    ]
    platform = {
        "gpuNodes": {"count": 1, "gpusPerNode": 8},
        "npuNodes": {"pools": [{"type": "Ascend910B3", "count": 2, "npusPerNode": 8}]},
    }
    found = problems(stack(models, **platform), tmp_path, capsys)
    assert not any("platform.gpuNodes" in line for line in found), found
    assert any("models[1] (too-big).nodes" in line and "declares 2 Ascend910B3 nodes" in line for line in found), found
    assert not any("models[0] (fits)" in line for line in found), found


def test_the_docs_template_table_is_hamis_chip_table() -> None:
    """docs/accelerators.md lists every chip's memory, AI cores and templates as platform/ascend.py
    has them (which tests/platform/test_ascend_chips.py holds to HAMi's chart)."""
    rows = [
        f"| `{chip.common_word}` | `{chip.resource}` | {chip.memory_capacity_mib} ({chip.memory_allocatable_mib} "
        f"allocatable) | {chip.ai_core} | "
        + ", ".join(f"`{t.name}` {t.memory_mib} MiB / {t.ai_core} cores" for t in chip.templates)
        + " |"
        for chip in CHIPS.values()
    ]
    page = (ROOT / "docs" / "accelerators.md").read_text().splitlines()
    documented = [line for line in page if line.startswith("| `Ascend") and "huawei.com/" in line]
    assert documented == rows
