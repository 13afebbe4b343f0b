"""The GPU capacity plan, against hand-computed expectations for every mode and packing edge."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from inference_platform.cli.main import main
from inference_platform.cli.render_files import read_render
from inference_platform.cli.stack_file import read_stack_config
from inference_platform.config.errors import ConfigError
from inference_platform.stack.config import parse_stack_config, project_values
from tests.conftest import ROOT, full_config, write_stack_file

RenderDir = Any


def stack(models: list[dict[str, Any]], **platform: Any) -> dict[str, Any]:
    return {
        "inference-platform:domain": "models.example.com",
        "inference-platform:platform": {"kubernetesVersion": "1.30.4", "hami": {"enabled": True}} | platform,
        "inference-platform:models": models,
    }


def model(
    name: str, gpu: dict[str, Any] | None, pods: int = 1, peak: int | None = None, versions: int = 1
) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "name": name,
        "runtime": "mlserver",
        "versions": [
            {"name": f"v{i + 1}", "modelUri": f"pvc://m/{name}/{i}", "weight": 100 if i == 0 else 0}
            for i in range(versions)
        ],
    }
    if gpu is not None:
        spec["gpu"] = gpu
    if peak is not None:
        spec["autoscaling"] = {"minReplicas": pods, "maxReplicas": peak, "cpuUtilization": 80}
    else:
        spec["replicas"] = pods
    return spec


def plan(config: dict[str, Any]) -> dict[str, Any]:
    result: dict[str, Any] = parse_stack_config(project_values(config)).capacity().as_json()
    return result


def gpus(config: dict[str, Any]) -> tuple[int, int]:
    found = plan(config)["gpus"]
    return found["min"], found["peak"]


TIGHT_NOTE = (
    "vGPU slices packed as tightly as they fit, a lower bound: HAMi's default policy spreads a node's slices over "
    "its GPUs, which takes more of them; set platform.gpuNodes.gpusPerNode to count that"
)


def vgpu(**fields: Any) -> dict[str, Any]:
    return {"mode": "vgpu"} | fields


def test_exclusive_gpus_are_counted_whole_per_pod_and_version() -> None:
    config = stack([model("a", {"mode": "exclusive", "count": 2}, pods=1, peak=3, versions=2)])
    assert plan(config) == {
        "gpus": {"min": 4, "awake": 4, "peak": 12},
        "declared": None,
        "fits": {"min": None, "awake": None, "peak": None},
        "models": {"a": {"mode": "exclusive", "min": 4.0, "awake": 4.0, "peak": 12.0}},
    }


def test_slices_that_exactly_fill_a_gpu_share_it() -> None:
    assert gpus(stack([model("a", vgpu(memoryPercent=50), pods=2, peak=3)])) == (1, 2)
    assert plan(stack([model("a", vgpu(memoryPercent=50), pods=2)]))["models"]["a"] == {
        "mode": "vgpu",
        "min": 1.0,
        "awake": 1.0,
        "peak": 1.0,
    }


def test_cores_can_be_the_binding_limit() -> None:
    # 10 % of the memory each, but 60 % of the cores: two cannot share a GPU.
    assert gpus(stack([model("a", vgpu(memoryPercent=10, cores=60), pods=2)])) == (2, 2)
    assert gpus(stack([model("a", vgpu(memoryPercent=10, cores=50), pods=2)])) == (1, 1)


def test_the_split_count_can_be_the_binding_limit() -> None:
    # 5 % each: memory would fit 20, HAMi splits a GPU into 10 at most.
    assert gpus(stack([model("a", vgpu(memoryPercent=5), pods=12)])) == (2, 2)
    hami = {"enabled": True, "splitCount": 4}
    assert gpus(stack([model("a", vgpu(memoryPercent=5), pods=12)], hami=hami)) == (3, 3)


def test_a_pods_vgpus_sit_on_distinct_gpus() -> None:
    assert gpus(stack([model("a", vgpu(count=2, memoryPercent=30), pods=1)])) == (2, 2)
    # Two such pods fit on the same two GPUs (60 % each).
    assert gpus(stack([model("a", vgpu(count=2, memoryPercent=30), pods=2)])) == (2, 2)
    assert plan(stack([model("a", vgpu(count=2, memoryPercent=30), pods=2)]))["models"]["a"]["min"] == 1.2


def test_first_fit_decreasing_packs_big_slices_first() -> None:
    # 30 %, 30 %, 70 %, 70 %: in that order first fit needs 3 GPUs ([30+30], [70], [70]);
    # sorted 70, 70, 30, 30 it needs 2 ([70+30], [70+30]).
    models = [
        model("a", vgpu(memoryPercent=30)),
        model("b", vgpu(memoryPercent=30)),
        model("c", vgpu(memoryPercent=70)),
        model("d", vgpu(memoryPercent=70)),
    ]
    assert gpus(stack(models)) == (2, 2)


def test_memory_in_mib_is_a_share_of_the_declared_gpu_memory() -> None:
    nodes = {"memoryMib": 81920}
    config = stack([model("a", vgpu(memoryMib=40960), pods=3)], gpuNodes=nodes)
    assert plan(config)["models"]["a"]["min"] == 1.5
    assert gpus(config) == (2, 2)


def test_memory_in_mib_without_the_gpus_size_counts_a_whole_gpu(capsys: Any, tmp_path: Path) -> None:
    """A documented assumption, an upper bound, said in the plan's notes."""
    config = stack([model("a", vgpu(memoryMib=4096), pods=2)])
    assert gpus(config) == (2, 2)
    assert parse_stack_config(project_values(config)).capacity().notes == (
        "a: GPU memory unknown (platform.gpuNodes.memoryMib), each vGPU counted whole",
        TIGHT_NOTE,
    )


def test_memory_oversubscription_fits_more_on_a_gpu() -> None:
    models = [model("a", vgpu(memoryPercent=100, cores=10), pods=2)]
    assert gpus(stack(models)) == (2, 2)
    assert gpus(stack(models, hami={"enabled": True, "memoryScaling": 2})) == (1, 1)


def test_shared_and_cpu_models_hold_nothing_accountable() -> None:
    config = stack([model("a", {"mode": "shared", "visibleDevices": "0"}), model("b", None)])
    found = plan(config)
    assert found["gpus"] == {"min": 0, "awake": 0, "peak": 0}
    assert found["models"] == {
        "a": {"mode": "shared", "min": 0.0, "awake": 0.0, "peak": 0.0},
        "b": {"mode": "none", "min": 0.0, "awake": 0.0, "peak": 0.0},
    }
    assert parse_stack_config(project_values(config)).capacity().notes == (
        "a shares GPUs outside the scheduler (gpu: shared): not counted",
    )


def test_capacity_shows_a_cpu_model_on_the_cpu_not_a_gpu(tmp_path: Path, capsys: Any) -> None:
    """A model that asks for no accelerator (gpu: none) is a row of the CPU, with no total: it holds
    no device the plan counts; a shared GPU's row stays a GPU's."""
    config = stack([model("a", {"mode": "exclusive"}), model("b", None), model("c", {"mode": "shared"})])
    path = write_stack_file(tmp_path / "Pulumi.s.yaml", config)
    assert main(["capacity", "--stack", "s", "--config", str(path), "--format", "json"]) == 0
    found = json.loads(capsys.readouterr().out)
    assert {row["model"]: row["unit"] for row in found["rows"]} == {"a": "GPU", "b": "CPU", "c": "GPU"}
    assert_rows_add_up(found)
    assert main(["capacity", "--stack", "s", "--config", str(path)]) == 0
    # Rich's box characters: the header's column separator (heavy) and the rows' (light).
    lines = capsys.readouterr().out.splitlines()
    rows = [[cell.strip() for cell in re.split("[\u2502\u2503]", line)[1:-1]] for line in lines]
    rows = [row for row in rows if row]
    assert rows[0][:4] == ["model", "version", "mode", "device"]
    assert [row[:4] for row in rows[1:]] == [
        ["a", "v1", "exclusive", "GPU"],
        ["c", "v1", "shared", "GPU"],
        ["total", "", "", "GPU"],
        ["b", "v1", "none", "CPU"],
    ]


def test_declared_gpus_decide_whether_it_fits() -> None:
    nodes = {"count": 2, "gpusPerNode": 4}
    config = stack([model("a", {"mode": "exclusive"}, pods=4, peak=10)], gpuNodes=nodes)
    assert plan(config)["declared"] == 8
    assert plan(config)["fits"] == {"min": True, "awake": True, "peak": False}


def test_a_minimum_that_does_not_fit_is_a_config_error() -> None:
    config = stack([model("a", {"mode": "exclusive", "count": 2}, pods=5)], gpuNodes={"count": 2, "gpusPerNode": 4})
    with pytest.raises(ConfigError) as error:
        parse_stack_config(project_values(config))
    assert [str(p) for p in error.value.problems] == [
        "platform.gpuNodes: the models need 10 GPUs at their minimum replicas, more than the 8 declared "
        "(2 nodes x 4): pods could never all schedule; add GPU nodes, or lower replicas or GPU requests"
    ]


def test_a_pod_bigger_than_a_node_is_a_config_error() -> None:
    config = stack([model("a", {"mode": "exclusive", "count": 8})], gpuNodes={"count": 4, "gpusPerNode": 4})
    with pytest.raises(ConfigError) as error:
        parse_stack_config(project_values(config))
    assert "models[0].gpu.count: each pod needs 8 GPUs on one node; platform.gpuNodes.gpusPerNode is 4" in str(
        error.value
    )


def test_count_and_gpus_per_node_come_together() -> None:
    with pytest.raises(ConfigError) as error:
        parse_stack_config(project_values(stack([], gpuNodes={"count": 2})))
    assert "platform.gpuNodes.gpusPerNode: set count and gpusPerNode together" in str(error.value)


def test_the_capacity_command_prints_exactly_the_json_shape(tmp_path: Path, capsys: Any) -> None:
    path = write_stack_file(tmp_path / "Pulumi.s.yaml", stack([model("a", vgpu(memoryPercent=25), pods=2, peak=6)]))
    assert main(["capacity", "--stack", "s", "--config", str(path), "--format", "json"]) == 0
    four = ["a/v1"] * 4
    assert json.loads(capsys.readouterr().out) == {
        "gpus": {"min": 1, "awake": 1, "peak": 2},
        "declared": None,
        "fits": {"min": None, "awake": None, "peak": None},
        "models": {"a": {"mode": "vgpu", "min": 0.5, "awake": 0.5, "peak": 1.5}},
        "rows": [
            {
                "model": "a",
                "version": "v1",
                "mode": "vgpu",
                "unit": "GPU",
                "devices": {"min": 0, "awake": 0, "peak": 0},
                "slices": {"min": 2, "awake": 2, "peak": 6},
                "slice": {"memoryPercent": 25.0, "coresPercent": 0.0},
            }
        ],
        "packings": [
            {
                "unit": "GPU",
                "policy": "binpack",
                "devices": {"min": 1, "awake": 1, "peak": 2},
                "layout": {"min": [["a/v1", "a/v1"]], "awake": [["a/v1", "a/v1"]], "peak": [four, ["a/v1", "a/v1"]]},
            }
        ],
    }
    assert main(["capacity", "--stack", "s", "--config", str(path)]) == 0
    assert "GPUs: 1 at minimum replicas, 1 awake, 2 at peak (no GPUs declared)" in capsys.readouterr().out


def test_render_shows_the_plan_warns_on_peak_and_outputs_it(tmp_path: Path, capsys: Any) -> None:
    config = stack([model("a", {"mode": "exclusive"}, pods=2, peak=10)], gpuNodes={"count": 1, "gpusPerNode": 8})
    path = write_stack_file(tmp_path / "Pulumi.s.yaml", config)
    assert main(["render", "--stack", "s", "--config", str(path), "--out", str(tmp_path / "out")]) == 0
    out = capsys.readouterr().out
    assert "GPUs: 2 at minimum replicas, 2 awake, 10 at peak of 8 declared\n" in out
    assert "warning: at peak the models need 10 GPUs, more than the 8 declared\n" in out
    _, _, outputs = read_render(tmp_path / "out")
    assert outputs["capacity"]["gpus"] == {"min": 2, "awake": 2, "peak": 10}
    assert outputs["capacity"]["fits"] == {"min": True, "awake": True, "peak": False}


def test_the_diff_says_how_the_plan_changed(render_dir: RenderDir, capsys: Any) -> None:
    nodes = {"count": 1, "gpusPerNode": 8}
    old = render_dir(stack([model("a", {"mode": "exclusive"}, pods=2, peak=6)], gpuNodes=nodes))
    new = render_dir(stack([model("a", {"mode": "exclusive"}, pods=2, peak=8)], gpuNodes=nodes))
    capsys.readouterr()
    assert main(["diff", str(old), str(new)]) == 0
    assert "GPU capacity: min GPUs 2, awake GPUs 2, peak GPUs 6 -> 8 of 8 declared.\n" in capsys.readouterr().out


# --- Versions that sleep at zero replicas: idle, awake, peak --------------------------------------


def sleeper(name: str, gpu: dict[str, Any], peak: int, versions: int = 1) -> dict[str, Any]:
    spec = model(name, gpu, pods=0, peak=peak, versions=versions)
    spec["autoscaling"] = {"minReplicas": 0, "maxReplicas": peak, "requestsPerSecond": 2}
    return spec


def keda(models: list[dict[str, Any]], **platform: Any) -> dict[str, Any]:
    return stack(models, autoscaler="keda", **platform)


def test_a_sleeping_version_holds_nothing_idle_one_pod_awake() -> None:
    # a: 2 GPUs a pod, two versions, asleep: 0 idle, 2 x 1 x 2 = 4 awake, 2 x 3 x 2 = 12 at peak.
    # b: 1 GPU a pod, always 1 to 2 pods: 1, 1, 2.
    config = keda(
        [sleeper("a", {"mode": "exclusive", "count": 2}, peak=3, versions=2), model("b", {"mode": "exclusive"}, 1, 2)]
    )
    assert plan(config) == {
        "gpus": {"min": 1, "awake": 5, "peak": 14},
        "declared": None,
        "fits": {"min": None, "awake": None, "peak": None},
        "models": {
            "a": {"mode": "exclusive", "min": 0.0, "awake": 4.0, "peak": 12.0},
            "b": {"mode": "exclusive", "min": 1.0, "awake": 1.0, "peak": 2.0},
        },
    }


def test_awake_slices_of_sleeping_models_pack_as_any_others() -> None:
    # Three sleepers of a 40 % slice each: none idle, 2 GPUs awake (40+40, 40), at peak 2 pods
    # each: six slices, two to a GPU, 3 GPUs.
    config = keda([sleeper(name, vgpu(memoryPercent=40), peak=2) for name in ("a", "b", "c")])
    found = plan(config)
    assert found["gpus"] == {"min": 0, "awake": 2, "peak": 3}
    assert found["models"]["a"] == {"mode": "vgpu", "min": 0.0, "awake": 0.4, "peak": 0.8}


def test_a_model_that_could_not_wake_is_a_config_error() -> None:
    """1 GPU held idle fits the 4 declared; the 5 of every version awake do not: a version could
    never wake, so the stack is refused, naming what does not fit."""
    nodes = {"count": 1, "gpusPerNode": 4}
    models = [
        sleeper("a", {"mode": "exclusive", "count": 2}, peak=3, versions=2),
        model("b", {"mode": "exclusive"}, 1, 2),
    ]
    with pytest.raises(ConfigError) as error:
        parse_stack_config(project_values(keda(models, gpuNodes=nodes)))
    assert [str(p) for p in error.value.problems] == [
        "platform.gpuNodes: the models need 5 GPUs with every version awake, more than the 4 declared "
        "(1 nodes x 4): pods could never all schedule; add GPU nodes, or lower replicas or GPU requests"
    ]
    found = plan(keda(models, gpuNodes={"count": 1, "gpusPerNode": 5}))
    assert found["fits"] == {"min": True, "awake": True, "peak": False}


def test_the_summary_and_the_diff_show_all_three(render_dir: RenderDir, tmp_path: Path, capsys: Any) -> None:
    nodes = {"count": 1, "gpusPerNode": 8}
    awake = [model("a", {"mode": "exclusive"}, pods=2, peak=6)]
    asleep = [sleeper("a", {"mode": "exclusive"}, peak=6)]
    path = write_stack_file(tmp_path / "Pulumi.s.yaml", keda(asleep, gpuNodes=nodes))
    assert main(["capacity", "--stack", "s", "--config", str(path)]) == 0
    assert "GPUs: 0 at minimum replicas, 1 awake, 6 at peak of 8 declared" in capsys.readouterr().out
    old, new = render_dir(keda(awake, gpuNodes=nodes)), render_dir(keda(asleep, gpuNodes=nodes))
    capsys.readouterr()
    assert main(["diff", str(old), str(new)]) == 0
    assert "GPU capacity: min GPUs 2 -> 0, awake GPUs 2 -> 1, peak GPUs 6 of 8 declared.\n" in capsys.readouterr().out


# --- Rows per model and version that add up to the headline; HAMi's placement on declared nodes ----


def assert_rows_add_up(found: dict[str, Any]) -> None:
    """Per kind of device and stage: the versions' whole devices and the packed slices' devices are
    the headline's figure."""
    headlines = {"GPU": found["gpus"]} | found.get("npus", {})
    for unit, headline in headlines.items():
        for stage in ("min", "awake", "peak"):
            whole = sum(row["devices"][stage] for row in found["rows"] if row["unit"] == unit)
            packed = sum(p["devices"][stage] for p in found["packings"] if p["unit"] == unit)
            assert whole + packed == headline[stage], (unit, stage, found)
            layouts = [p["layout"][stage] for p in found["packings"] if p["unit"] == unit]
            slices = sum(row.get("slices", {}).get(stage, 0) for row in found["rows"] if row["unit"] == unit)
            assert sum(len(device) for layout in layouts for device in layout) == slices


def report(config: dict[str, Any]) -> dict[str, Any]:
    result: dict[str, Any] = parse_stack_config(project_values(config)).capacity().report_json()
    return result


def test_the_issues_case_adds_up_exclusive_rows_and_packed_slices() -> None:
    """4 whole GPUs and a half-GPU slice were shown as 4 + 0.5 under a headline of 5: now the slice's
    GPU is a row of its own."""
    config = stack([model("big", {"mode": "exclusive", "count": 2}, pods=2), model("small", vgpu(memoryPercent=50))])
    found = report(config)
    assert found["gpus"] == {"min": 5, "awake": 5, "peak": 5}
    assert [(r["model"], r["version"], r["devices"]["min"], r.get("slices")) for r in found["rows"]] == [
        ("big", "v1", 4, None),
        ("small", "v1", 0, {"min": 1, "awake": 1, "peak": 1}),
    ]
    assert found["packings"][0]["layout"]["min"] == [["small/v1"]]
    assert_rows_add_up(found)


def test_every_stack_adds_up() -> None:
    assert_rows_add_up(report(full_config(decrypted=True)))
    for name in ("dev", "prod"):
        _, config = read_stack_config(ROOT / f"Pulumi.{name}.yaml")
        assert_rows_add_up(config.capacity().report_json())


def test_declared_nodes_get_hamis_default_spread_of_slices_over_a_nodes_gpus() -> None:
    """HAMi 2.10's chart default: nodes binpack, GPUs spread. On nodes of 4 GPUs, a pod of 1 whole
    GPU then two 25 % slices: the slices go to two free GPUs of the same node (3 GPUs), where packing
    tightly would put them on one (2 GPUs)."""
    models = [model("whole", {"mode": "exclusive"}), model("part", vgpu(memoryPercent=25), pods=2)]
    assert gpus(stack(models)) == (2, 2)
    spread = report(stack(models, gpuNodes={"count": 2, "gpusPerNode": 4}))
    assert spread["gpus"]["min"] == 3
    assert spread["packings"][0]["policy"] == "spread on nodes of 4"
    assert spread["packings"][0]["layout"]["min"] == [["part/v1"], ["part/v1"]]
    assert_rows_add_up(spread)


def test_spread_stays_on_the_fullest_node_and_shares_gpus_once_its_gpus_are_in_use() -> None:
    """Nodes of 4: three whole GPUs and three 25 % slices. The fourth GPU takes every slice (node
    binpack keeps them on the first node, where that GPU still holds them): 4 GPUs. Four 50 % slices
    on nodes of 2: two to a GPU once both are in use: 2 GPUs."""
    models = [model("whole", {"mode": "exclusive"}, pods=3), model("part", vgpu(memoryPercent=25), pods=3)]
    found = report(stack(models, gpuNodes={"count": 2, "gpusPerNode": 4}))
    assert found["gpus"]["min"] == 4
    assert found["packings"][0]["layout"]["min"] == [["part/v1"] * 3]
    halves = report(stack([model("half", vgpu(memoryPercent=50), pods=4)], gpuNodes={"count": 2, "gpusPerNode": 2}))
    assert halves["gpus"]["min"] == 2


def test_the_table_has_a_row_per_version_and_totals_that_are_the_headline(tmp_path: Path, capsys: Any) -> None:
    config = stack(
        [model("big", {"mode": "exclusive", "count": 2}, pods=2, versions=2), model("small", vgpu(memoryPercent=50))]
    )
    path = write_stack_file(tmp_path / "Pulumi.s.yaml", config)
    assert main(["capacity", "--stack", "s", "--config", str(path)]) == 0
    out = capsys.readouterr().out
    cells = [[cell.strip() for cell in line.split("│")[1:-1]] for line in out.splitlines() if line.startswith("│")]
    assert [c[:7] for c in cells] == [
        ["big", "v1", "exclusive", "GPU", "4", "4", "4"],
        ["big", "v2", "exclusive", "GPU", "4", "4", "4"],
        ["small", "v1", "vgpu", "GPU", "(1 slice)", "(1 slice)", "(1 slice)"],
        ["slices packed", "", "binpack", "GPU", "1", "1", "1"],
        ["total", "", "", "GPU", "9", "9", "9"],
    ]
    assert "GPU packing at min (binpack): 1: small/v1\n" in out
    assert "GPUs: 9 at minimum replicas, 9 awake, 9 at peak (no GPUs declared)" in out
