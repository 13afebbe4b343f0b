"""The model cache's plan (platform.modelCache): each kind of cache node's bytes (its kind's cached
versions and their downloaded adapters, at their downloadSize) against `size`, in `infra capacity`
(table and JSON), the render's summary and the stack output `capacity`; nothing at all when the cache
is off."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from inference_platform.cli.main import main
from inference_platform.cli.render_files import read_render
from inference_platform.stack.config import parse_stack_config, project_values
from tests.conftest import write_stack_file

GiB = 1024**3


def llm(name: str, size: str, *, cache: bool = True, adapters: int = 0, versions: int = 1) -> dict[str, Any]:
    """A vLLM model on exclusive GPUs, downloaded from Hugging Face."""
    return {
        "name": name,
        "runtime": "vllm",
        "gpu": "exclusive",
        "cache": cache,
        "downloadSize": size,
        "versions": [
            {
                "name": f"v{i + 1}",
                "modelUri": f"hf://org/{name}-{i + 1}",
                "weight": 100 if i == 0 else 0,
                **(
                    {"adapters": [{"name": f"a{j}", "uri": f"hf://org/a{j}"} for j in range(adapters)]}
                    if adapters
                    else {}
                ),
            }
            for i in range(versions)
        ],
    }


def mindie(name: str, size: str) -> dict[str, Any]:
    """A MindIE model on Ascend NPUs, cached."""
    return {
        "name": name,
        "runtime": "mindie",
        "npu": "Ascend910B3",
        "cache": True,
        "downloadSize": size,
        "versions": [{"name": "v1", "modelUri": f"hf://org/{name}", "weight": 100}],
    }


def stack(models: list[dict[str, Any]], **cache: Any) -> dict[str, Any]:
    platform: dict[str, Any] = {"kubernetesVersion": "1.30.4"}
    if cache:
        platform["modelCache"] = cache
    if any("npu" in m for m in models):
        platform["hami"] = {"enabled": True}
        platform["npuNodes"] = {"pools": [{"type": "Ascend910B3", "count": 4, "npusPerNode": 8}]}
    return {
        "inference-platform:domain": "models.example.com",
        "inference-platform:platform": platform,
        "inference-platform:models": models,
    }


def plan_json(config: dict[str, Any]) -> dict[str, Any]:
    result: dict[str, Any] = parse_stack_config(project_values(config)).capacity().as_json()
    return result


def test_each_cache_node_holds_its_cached_versions_and_their_adapters_against_the_size() -> None:
    config = stack(
        [llm("llama", "140Gi", versions=2), llm("qwen", "16Gi", adapters=2), llm("small", "1Gi", cache=False)],
        enabled=True,
        size="800Gi",
    )
    assert plan_json(config)["modelCache"] == {
        "gpu": {
            "bytes": (140 + 140 + 16 + 2 + 2) * GiB,
            "sizeBytes": 800 * GiB,
            "held": "300Gi",
            "size": "800Gi",
            "fits": True,
            "versions": [
                {"name": "llama/v1", "downloadSize": "140Gi"},
                {"name": "llama/v2", "downloadSize": "140Gi"},
                {"name": "qwen/v1", "downloadSize": "16Gi"},
                {"name": "qwen/v1 adapter a0", "downloadSize": "2Gi"},
                {"name": "qwen/v1 adapter a1", "downloadSize": "2Gi"},
            ],
        }
    }


def test_a_version_may_leave_its_models_cache() -> None:
    model = llm("llama", "140Gi", versions=2)
    model["versions"][1]["cache"] = False
    nodes = plan_json(stack([model], enabled=True, size="800Gi"))["modelCache"]["gpu"]
    assert [v["name"] for v in nodes["versions"]] == ["llama/v1"]
    assert nodes["held"] == "140Gi"


def test_both_kinds_of_cache_node_hold_their_own_models_only() -> None:
    config = stack([llm("llama", "140Gi"), mindie("pangu", "60Gi")], enabled=True, size="200Gi", nodes="both")
    found = plan_json(config)["modelCache"]
    assert {kind: (nodes["held"], [v["name"] for v in nodes["versions"]]) for kind, nodes in found.items()} == {
        "gpu": ("140Gi", ["llama/v1"]),
        "npu": ("60Gi", ["pangu/v1"]),
    }


def test_a_kind_that_caches_nothing_holds_zero() -> None:
    nodes = plan_json(stack([llm("llama", "140Gi", cache=False)], enabled=True, size="800Gi"))["modelCache"]["gpu"]
    assert (nodes["bytes"], nodes["held"], nodes["versions"], nodes["fits"]) == (0, "0", [], True)


def test_nothing_is_planned_when_the_cache_is_off() -> None:
    assert "modelCache" not in plan_json(stack([llm("llama", "140Gi", cache=False)]))
    # Off with its settings written out: still nothing.
    off = stack([llm("llama", "140Gi", cache=False)], enabled=False, size="800Gi")
    assert "modelCache" not in plan_json(off)
    assert parse_stack_config(project_values(off)).capacity().headline() == (
        "GPUs: 1 at minimum replicas, 1 awake, 1 at peak (no GPUs declared)"
    )


def test_the_capacity_command_lists_the_cache_in_json_and_in_its_table(tmp_path: Path, capsys: Any) -> None:
    config = stack([llm("llama", "140Gi"), llm("qwen", "16Gi", adapters=1)], enabled=True, size="800Gi")
    path = write_stack_file(tmp_path / "Pulumi.s.yaml", config)
    assert main(["capacity", "--stack", "s", "--config", str(path), "--format", "json"]) == 0
    cache = json.loads(capsys.readouterr().out)["modelCache"]
    assert [v["name"] for v in cache["gpu"]["versions"]] == ["llama/v1", "qwen/v1", "qwen/v1 adapter a0"]
    assert main(["capacity", "--stack", "s", "--config", str(path)]) == 0
    out = capsys.readouterr().out
    assert "Model cache: each GPU cache node holds 158Gi of 800Gi (20%)\n" in out
    rows = [line.split("│")[1:4] for line in out.splitlines() if line.startswith("│ GPU ")]
    assert [[cell.strip() for cell in row] for row in rows] == [
        ["GPU", "llama/v1", "140Gi"],
        ["GPU", "qwen/v1", "16Gi"],
        ["GPU", "qwen/v1 adapter a0", "2Gi"],
        ["GPU", "total", "158Gi of 800Gi"],
    ]


def test_the_render_summary_and_the_stack_output_show_the_cache(tmp_path: Path, capsys: Any) -> None:
    config = stack([llm("llama", "140Gi")], enabled=True, size="800Gi")
    path = write_stack_file(tmp_path / "Pulumi.s.yaml", config)
    out_dir = tmp_path / "out"
    assert main(["render", "--stack", "s", "--config", str(path), "--out", str(out_dir), "--no-charts"]) == 0
    assert "Model cache: each GPU cache node holds 140Gi of 800Gi (18%)\n" in capsys.readouterr().out
    _, _, outputs = read_render(out_dir)
    assert outputs["capacity"]["modelCache"]["gpu"]["held"] == "140Gi"


def test_the_render_summary_says_nothing_of_a_cache_that_is_off(tmp_path: Path, capsys: Any) -> None:
    path = write_stack_file(tmp_path / "Pulumi.s.yaml", stack([llm("llama", "140Gi", cache=False)]))
    out_dir = tmp_path / "out"
    assert main(["render", "--stack", "s", "--config", str(path), "--out", str(out_dir), "--no-charts"]) == 0
    assert "Model cache" not in capsys.readouterr().out
    _, _, outputs = read_render(out_dir)
    assert "modelCache" not in outputs["capacity"]
