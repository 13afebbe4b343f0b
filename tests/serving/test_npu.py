"""Ascend NPUs: what each mode does to a pod (HAMi's resource names, the runtime class, the NPU
nodes, soft slicing's annotation), the config errors at their stack-file positions, and the
capacity plan counting what HAMi's templates give per chip type, apart from GPUs."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from inference_platform.cli.main import main
from inference_platform.cli.render_files import read_render
from inference_platform.config.errors import ConfigError
from inference_platform.platform.ascend import CHIPS
from inference_platform.platform.gpu_nodes import Toleration
from inference_platform.platform.npu_nodes import NpuNodes
from inference_platform.serving.npu import NpuSpec
from inference_platform.stack.config import parse_stack_config, project_values
from tests.conftest import RUNTIME_MINIMUMS, write_stack_file

NODES = NpuNodes(node_selector={"npu": "910b"}, tolerations=[Toleration(key="npu", effect="NoSchedule")])


def placed(spec: dict[str, Any]) -> tuple[dict[str, str], dict[str, Any], dict[str, str]]:
    placement = NpuSpec.model_validate(spec).placement(NODES)
    assert placement.env == {}  # the device plugin sets ASCEND_RT_VISIBLE_DEVICES, nobody else
    return placement.limits, placement.pod_fields(), placement.annotations


NPU_POD = {
    "runtimeClassName": "ascend",
    "nodeSelector": {"npu": "910b"},
    "tolerations": [{"key": "npu", "operator": "Exists", "effect": "NoSchedule"}],
}


def test_whole_npus_ask_for_the_chips_resource_with_the_runtime_class_on_npu_nodes() -> None:
    assert placed({"type": "Ascend910B3", "count": 2}) == ({"huawei.com/Ascend910B3": "2"}, NPU_POD, {})


def test_template_vnpus_ask_for_memory_and_no_annotation() -> None:
    assert placed({"type": "Ascend310P", "mode": "vnpu", "memoryMib": 6000}) == (
        {"huawei.com/Ascend310P": "1", "huawei.com/Ascend310P-memory": "6000"},
        NPU_POD,
        {},
    )


def test_soft_vnpus_carry_cores_and_hamis_soft_slicing_annotation() -> None:
    spec = {"type": "Ascend910B3", "mode": "vnpu", "slicing": "soft", "memoryMib": 8192, "cores": 25}
    assert placed(spec) == (
        {"huawei.com/Ascend910B3": "1", "huawei.com/Ascend910B3-memory": "8192", "huawei.com/Ascend910B3-core": "25"},
        NPU_POD,
        {"huawei.com/vnpu-mode": "hami-core"},
    )


def test_the_default_npu_nodes_are_hamis() -> None:
    nodes = NpuNodes()
    assert (nodes.node_selector, nodes.tolerations, nodes.runtime_class_name) == ({"ascend": "on"}, [], "ascend")


# --- config errors, at the stack file's line and column, every one at once -------------------


def custom(name: str, npu: Any, **extra: Any) -> dict[str, Any]:
    return (
        RUNTIME_MINIMUMS["custom"]
        | {"name": name, "versions": [{"name": "v1", "modelUri": "pvc://m/x", "weight": 100}], "npu": npu}
        | extra
    )


def stack(models: list[dict[str, Any]], **platform: Any) -> dict[str, Any]:
    return {
        "inference-platform:domain": "models.example.com",
        "inference-platform:platform": {"kubernetesVersion": "1.30.4", "hami": {"enabled": True}} | platform,
        "inference-platform:models": models,
    }


def problems(config: dict[str, Any], tmp_path: Path, capsys: Any) -> list[str]:
    stack_file = write_stack_file(tmp_path / "Pulumi.t.yaml", config)
    assert main(["render", "--stack", "t", "--config", str(stack_file), "--out", str(tmp_path / "out")]) == 2
    assert not (tmp_path / "out").exists()  # nothing written
    return [line for line in capsys.readouterr().err.splitlines() if "Pulumi.t.yaml:" in line]


def test_bad_npu_settings_are_reported_at_their_lines_all_at_once(tmp_path: Path, capsys: Any) -> None:
    models = [
        custom("unknown-chip", {"type": "Ascend920"}),
        RUNTIME_MINIMUMS["mlserver"]
        | {"name": "cpu-runtime", "versions": [{"name": "v1", "modelUri": "pvc://m/x", "weight": 100}]}
        | {"npu": "Ascend910B3"},
        custom("nvidia-too", {"type": "Ascend910B3", "mode": "vnpu"}, gpu={"mode": "vgpu", "cores": 30}),
        custom("shared-too", "Ascend910B3", gpu="shared"),
        custom("cores-hard", {"type": "Ascend910B3", "mode": "vnpu", "cores": 20}),
        custom("memory-whole", {"type": "Ascend910B3", "memoryMib": 1024}),
        custom("too-much", {"type": "Ascend910B4", "mode": "vnpu", "memoryMib": 40000}),
        custom("odd-910c", {"type": "Ascend910C", "count": 3}),
        custom("own-devices", "Ascend310P", env=[{"name": "ASCEND_RT_VISIBLE_DEVICES", "value": "0"}]),
        custom("npu-use", "Ascend910B3", autoscaling={"minReplicas": 1, "maxReplicas": 3, "gpuUtilization": 60}),
        # Soft slicing too: the plugin's per-container series carries the whole card's use.
        custom(
            "soft-npu-use",
            {"type": "Ascend910B3", "mode": "vnpu", "slicing": "soft", "memoryMib": 8192},
            autoscaling={"minReplicas": 1, "maxReplicas": 3, "gpuUtilization": 60},
        ),
    ]
    found = problems(stack(models), tmp_path, capsys)
    expected = [
        ("npu.type", "Ascend910A"),
        ("npu", "mlserver cannot use Ascend NPUs"),
        ("gpu", "an Ascend model takes no NVIDIA GPU settings"),
        ("gpu", "an Ascend model takes no NVIDIA GPU settings"),
        ("npu.cores", "hard slicing gives each vNPU its template's AI cores"),
        ("npu.memoryMib", "only with mode vnpu"),
        ("npu.memoryMib", "40000 MiB is more than an Ascend910B4 holds (32768 MiB)"),
        ("npu.count", "1 or even"),
        ("env[0] (ASCEND_RT_VISIBLE_DEVICES).name", "set by HAMi's Ascend device plugin"),
        ("autoscaling.gpuUtilization", "the whole card's AI Core utilisation"),
        ("autoscaling.gpuUtilization", "the whole card's AI Core utilisation"),
    ]
    assert len(found) == len(expected), found
    for index, (path, text) in enumerate(expected):
        where = f"models[{index}] ({models[index]['name']}).{path}: "
        assert any(where in line and text in line for line in found), (where, found)
    # Each names the stack file's line and column.
    assert all(line.split("Pulumi.t.yaml:")[1].split(":")[0].isdigit() for line in found)


def test_npus_need_hami(tmp_path: Path, capsys: Any) -> None:
    config = stack([custom("a", "Ascend910B3")]) | {"inference-platform:platform": {}}
    (line,) = problems(config, tmp_path, capsys)
    assert "models[0] (a).npu: " in line
    assert "set platform.hami.enabled to true" in line


# --- the capacity plan ------------------------------------------------------------------------


def plan(config: dict[str, Any]) -> dict[str, Any]:
    result: dict[str, Any] = parse_stack_config(project_values(config)).capacity().as_json()
    return result


def test_whole_npus_count_per_type_apart_from_gpus() -> None:
    models = [
        custom("a", {"type": "Ascend910B3", "count": 2}, replicas=3),
        custom("b", "Ascend310P"),
        RUNTIME_MINIMUMS["vllm"]
        | {"name": "g", "versions": [{"name": "v1", "modelUri": "pvc://m/g", "weight": 100}], "replicas": 2},
    ]
    pools = [
        {"type": "Ascend910B3", "count": 1, "npusPerNode": 8},
        {"type": "Ascend310P", "count": 1, "npusPerNode": 4},
    ]
    found = plan(stack(models, npuNodes={"pools": pools}))
    assert found["gpus"] == {"min": 2, "awake": 2, "peak": 2}
    assert found["npus"] == {
        "Ascend310P": {
            "min": 1,
            "awake": 1,
            "peak": 1,
            "declared": 4,
            "fits": dict.fromkeys(("min", "awake", "peak"), True),
        },
        "Ascend910B3": {
            "min": 6,
            "awake": 6,
            "peak": 6,
            "declared": 8,
            "fits": dict.fromkeys(("min", "awake", "peak"), True),
        },
    }
    assert found["models"]["a"] == {"mode": "exclusive", "min": 6.0, "awake": 6.0, "peak": 6.0, "device": "Ascend910B3"}


def test_template_vnpus_count_what_the_template_gives_not_what_was_asked() -> None:
    """910B3: 20 AI cores. 1 MiB asked is a vir05_1c_16g (5 cores): four fill a card. 16385 MiB is a
    vir10_3c_32g (10 cores): two fill a card. So 4 + 2 such pods are 2 cards, where the memory
    asked (4 MiB + 32770 MiB of 65536) would have fit in one."""
    vnpu = {"type": "Ascend910B3", "mode": "vnpu"}
    small = custom("small", vnpu | {"memoryMib": 1}, replicas=4)
    large = custom("large", vnpu | {"memoryMib": 16385}, replicas=2)
    found = plan(stack([small, large]))
    assert found["npus"]["Ascend910B3"]["min"] == 2
    assert found["models"]["small"]["min"] == 1.0  # 4 x 5 of 20 cores
    # One more small slice needs a third card.
    assert plan(stack([custom("small", vnpu | {"memoryMib": 1}, replicas=5), large]))["npus"]["Ascend910B3"]["min"] == 3


def test_a_vnpu_bigger_than_every_template_is_a_whole_card() -> None:
    chip = CHIPS["Ascend910B3"]
    asked = chip.templates[-1].memory_mib + 1
    found = plan(stack([custom("a", {"type": "Ascend910B3", "mode": "vnpu", "memoryMib": asked}, replicas=3)]))
    assert found["npus"]["Ascend910B3"]["min"] == 3


def test_soft_vnpus_pack_by_exact_memory_and_cores() -> None:
    soft = {"type": "Ascend910B3", "mode": "vnpu", "slicing": "soft"}
    found = plan(stack([custom("a", soft | {"memoryMib": 16384, "cores": 25}, replicas=4)]))
    assert found["npus"]["Ascend910B3"]["min"] == 1
    found = plan(stack([custom("a", soft | {"memoryMib": 16384, "cores": 30}, replicas=4)]))
    assert found["npus"]["Ascend910B3"]["min"] == 2  # 4 x 30 % of the cores is more than one card


def test_npus_that_do_not_fit_the_declared_nodes_are_a_config_error_with_the_numbers() -> None:
    pools = {"pools": [{"type": "Ascend910B3", "count": 2, "npusPerNode": 4}]}
    config = stack([custom("a", {"type": "Ascend910B3", "count": 4}, replicas=3)], npuNodes=pools)
    with pytest.raises(ConfigError) as error:
        parse_stack_config(project_values(config))
    assert [str(p) for p in error.value.problems] == [
        "platform.npuNodes.pools: the models need 12 Ascend910B3 NPUs at their minimum replicas, more than the 8 "
        "declared (2 nodes x 4): pods could never all schedule; add Ascend910B3 nodes, or lower replicas or NPU "
        "requests"
    ]
    config = stack([custom("a", {"type": "Ascend910B3", "count": 8})], npuNodes=pools)
    with pytest.raises(ConfigError) as error:
        parse_stack_config(project_values(config))
    assert "models[0].npu.count: each pod needs 8 Ascend910B3 NPUs on one node; the Ascend910B3 nodes have 4" in str(
        error.value
    )


def test_the_capacity_command_prints_npus_beside_gpus(tmp_path: Path, capsys: Any) -> None:
    config = stack([custom("a", {"type": "Ascend910B3", "count": 2})])
    stack_file = write_stack_file(tmp_path / "Pulumi.t.yaml", config)
    assert main(["capacity", "--stack", "t", "--config", str(stack_file)]) == 0
    out = capsys.readouterr().out
    cells = [[cell.strip() for cell in line.split("│")[1:-1]] for line in out.splitlines() if line.startswith("│")]
    # The model's row counts NPUs of its type, and the type's total is its headline's.
    assert ["a", "v1", "exclusive", "Ascend910B3", "2", "2", "2"] in [c[:7] for c in cells]
    assert ["total", "", "", "Ascend910B3", "2", "2", "2"] in [c[:7] for c in cells]
    assert "NPUs Ascend910B3: 2 at minimum replicas, 2 awake, 2 at peak (none declared)" in out


def test_the_render_summary_outputs_and_diff_show_npus(render_dir: Any, tmp_path: Path, capsys: Any) -> None:
    """The plan the render prints is read back from the registered InferenceServices (their npuNodes
    output), and the diff says how each type's NPUs changed."""
    pools = {"pools": [{"type": "Ascend910B3", "count": 1, "npusPerNode": 8}]}
    old = render_dir(stack([custom("a", {"type": "Ascend910B3", "count": 2})], npuNodes=pools))
    out = capsys.readouterr().out
    assert "NPUs Ascend910B3: 2 at minimum replicas, 2 awake, 2 at peak of 8 declared" in out
    new = render_dir(stack([custom("a", {"type": "Ascend910B3", "count": 2}, replicas=2)], npuNodes=pools))
    _, _, outputs = read_render(new)
    assert outputs["capacity"]["npus"]["Ascend910B3"]["min"] == 4
    capsys.readouterr()
    assert main(["diff", str(old), str(new)]) == 0
    assert (
        "NPU capacity, Ascend910B3: min 2 -> 4, awake 2 -> 4, peak 2 -> 4 of 8 declared.\n" in capsys.readouterr().out
    )


def test_template_vnpus_are_packed_by_the_ai_cpus_they_take_too() -> None:
    """310P: 8 AI cores, 7 AI CPUs. vir04 takes 4 cores and 4 CPUs: by cores two share a card, by
    CPUs only one fits. 910B2: 6 CPUs, so 8 vir03_1c_8g (3 of 24 cores, 1 CPU each) need 2 cards."""
    chip = CHIPS["Ascend310P"]
    vir04 = next(t for t in chip.templates if t.name == "vir04")
    assert 2 * vir04.ai_core <= chip.ai_core  # by cores alone two would share a card
    assert chip.ai_cpu is not None
    assert 2 * (vir04.ai_cpu or 0) > chip.ai_cpu  # by AI CPUs they cannot
    found = plan(
        stack([custom("a", {"type": "Ascend310P", "mode": "vnpu", "memoryMib": vir04.memory_mib}, replicas=2)])
    )
    assert found["npus"]["Ascend310P"]["min"] == 2
    small = {"type": "Ascend910B2", "mode": "vnpu", "memoryMib": 8192}
    assert plan(stack([custom("a", small, replicas=8)]))["npus"]["Ascend910B2"]["min"] == 2
    assert plan(stack([custom("a", small, replicas=6)]))["npus"]["Ascend910B2"]["min"] == 1


def test_a_type_the_declared_pools_lack_is_a_config_error() -> None:
    pools = {"pools": [{"type": "Ascend910B3", "count": 2, "npusPerNode": 8}]}
    with pytest.raises(ConfigError) as error:
        parse_stack_config(project_values(stack([custom("a", "Ascend310P")], npuNodes=pools)))
    assert [str(p) for p in error.value.problems] == [
        "models[0].npu.type: platform.npuNodes.pools declares no Ascend310P nodes (only Ascend910B3): its pods "
        "could never schedule; add a pool of them, or pick a declared type"
    ]
