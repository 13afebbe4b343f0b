"""The generated `vllm serve` arguments, parsed by vLLM's own argument parser.

vLLM's pins clash with MLServer's, so its parser runs in .venv-vllm (built by `make test`).
"""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

from inference_platform import pins
from inference_platform.platform.gpu_nodes import GpuNodes
from inference_platform.serving.runtimes.vllm import VLLMModel
from tests.conftest import ROOT
from tests.serving.runtimes.parser_process import ParserProcess

pytestmark = pytest.mark.slow

VLLM_PYTHON = ROOT / ".venv-vllm" / "bin" / "python"
PARSE = Path(__file__).with_name("vllm_parse.py")


PARSER = ParserProcess(VLLM_PYTHON, PARSE, "vLLM's parser lives in .venv-vllm: run `make test`, which builds it")


def run_parser(given: Any, fields: tuple[str, ...]) -> Any:
    return PARSER.ask({"given": given, "fields": list(fields)})


def parse(argv: list[str], *fields: str) -> dict[str, Any]:
    result: dict[str, Any] = run_parser(argv, fields)
    return result


def parse_all(argvs: list[list[str]], *fields: str) -> list[dict[str, Any]]:
    """Several command lines in one request."""
    result: list[dict[str, Any]] = run_parser(argvs, fields)
    return result


def server_argv(spec: VLLMModel, nodes: GpuNodes | None = None) -> list[str]:
    """What follows `vllm serve`: the command's rest and the args, or on Ascend NPUs (where the
    image's entrypoint stays and `vllm serve` leads the args) the args' rest."""
    container = spec.plan(spec.versions[0], nodes or GpuNodes()).container
    line = [*container.get("command", []), *container["args"]]
    assert line[:2] == ["vllm", "serve"]
    return line[2:]


def test_the_installed_parser_is_the_version_the_image_runs() -> None:
    done = subprocess.run(
        [str(VLLM_PYTHON), "-c", "import importlib.metadata as m; print(m.version('vllm'))"],
        capture_output=True,
        text=True,
        check=True,
    )
    assert pins.VLLM_IMAGE.endswith(f":v{done.stdout.strip()}")


def test_generated_arguments_parse_to_the_intended_settings() -> None:
    spec = VLLMModel.model_validate(
        {
            "name": "llama",
            "runtime": "vllm",
            "gpu": {"mode": "vgpu", "count": 2, "memoryMib": 40960},
            "tensorParallelSize": 2,
            "maxModelLen": 8192,
            "dtype": "bfloat16",
            "args": ["--enable-prefix-caching"],
            "versions": [{"name": "v1", "modelUri": "hf://meta-llama/Llama-3.1-8B-Instruct", "weight": 100}],
        }
    )

    parsed = parse(server_argv(spec))

    assert parsed == {
        "model_tag": "/mnt/models",
        "served_model_name": ["llama"],
        "host": "0.0.0.0",
        "port": 8000,
        "tensor_parallel_size": 2,
        "max_model_len": 8192,
        "dtype": "bfloat16",
        "gpu_memory_utilization": 0.95,
    }


def test_the_parser_rejects_what_vllm_would_reject() -> None:
    assert "unrecognized arguments: --max-model-lenn" in parse(["/mnt/models", "--max-model-lenn=8192"])["error"]
    assert "invalid choice" in parse(["/mnt/models", "--dtype=float64x"])["error"]


GROUP_FIELDS = (
    "pipeline_parallel_size",
    "nnodes",
    "node_rank",
    "master_addr",
    "master_port",
    "distributed_executor_backend",
    "headless",
)
LEADER_ADDRESS = "deepseek-v1-group-0.deepseek-v1-group.service"


def as_started(argv: list[str], worker_index: int) -> list[str]:
    """The arguments as the kubelet starts them: $(VAR) expanded from the environment the LWS
    controller gives each pod (LWS_LEADER_ADDRESS, LWS_WORKER_INDEX)."""
    env = {"LWS_LEADER_ADDRESS": LEADER_ADDRESS, "LWS_WORKER_INDEX": str(worker_index)}
    expanded = []
    for arg in argv:
        started = arg
        for name, value in env.items():
            started = started.replace(f"$({name})", value)
        expanded.append(started)
    return expanded


def test_every_pod_of_a_group_parses_to_one_engine_across_the_nodes() -> None:
    """vLLM's parser on the leader's and each worker's command line (4 nodes x 8 GPUs, two pipeline
    stages of tensor parallelism over 16 GPUs), and our own checks on what it lets through: each
    node rank below the node count and distinct, the mp executor (no Ray), headless workers."""
    spec = VLLMModel.model_validate(
        {
            "name": "deepseek",
            "runtime": "vllm",
            "gpu": {"mode": "exclusive", "count": 8},
            "nodes": 4,
            "tensorParallelSize": 16,
            "pipelineParallelSize": 2,
            "maxModelLen": 32768,
            "versions": [{"name": "v1", "modelUri": "pvc://models/deepseek-v3", "weight": 100}],
        }
    )
    plan = spec.plan(spec.versions[0], GpuNodes())
    assert plan.workers is not None
    assert plan.workers.size == 4
    command_lines = [as_started(server_argv(spec), 0)]
    command_lines += [as_started(["/mnt/models", *plan.workers.args], index) for index in range(1, 4)]
    leader, *workers = parse_all(command_lines, *GROUP_FIELDS)
    for parsed in (leader, *workers):
        assert "error" not in parsed, parsed
        assert (parsed["tensor_parallel_size"], parsed["pipeline_parallel_size"], parsed["nnodes"]) == (16, 2, 4)
        assert (parsed["master_addr"], parsed["master_port"]) == (LEADER_ADDRESS, 29501)
        assert parsed["distributed_executor_backend"] == "mp"
        assert 0 <= parsed["node_rank"] < parsed["nnodes"]
    assert [p["node_rank"] for p in (leader, *workers)] == [0, 1, 2, 3]
    assert [p["headless"] for p in (leader, *workers)] == [False, True, True, True]
    assert leader["served_model_name"] == ["deepseek"]


def test_what_vllms_parser_lets_through_is_refused_by_the_config() -> None:
    """The parser accepts a node rank beyond the node count and Ray as the executor (vLLM checks
    the rank only when it builds the engine): a stack cannot set these flags for a group."""
    let_through, misspelt = parse_all(
        [
            ["/mnt/models", "--nnodes=2", "--node-rank=7", "--distributed-executor-backend=ray"],
            ["/mnt/models", "--nnodes=2", "--headles"],
        ],
        *GROUP_FIELDS,
    )
    assert (let_through["node_rank"], let_through["distributed_executor_backend"]) == (7, "ray")
    with pytest.raises(ValidationError) as raised:
        VLLMModel.model_validate(
            {
                "name": "deepseek",
                "runtime": "vllm",
                "gpu": {"mode": "exclusive", "count": 8},
                "nodes": 2,
                "tensorParallelSize": 8,
                "args": ["--distributed-executor-backend=ray"],
                "versions": [
                    {"name": "v1", "modelUri": "pvc://m/1", "weight": 100, "args": ["--node-rank=7"]},
                ],
            }
        )
    messages = [(".".join(str(p) for p in e["loc"]), e["msg"]) for e in raised.value.errors()]
    assert any("--distributed-executor-backend is set by the platform for a multi-node group" in m for _, m in messages)
    assert any("--node-rank is set by the platform for a multi-node group" in m for _, m in messages)
    assert "unrecognized arguments: --headles" in misspelt["error"]


def ascend(npu: Any, **settings: Any) -> VLLMModel:
    return VLLMModel.model_validate(
        {"name": "qwen", "runtime": "vllm", "npu": npu, "maxModelLen": 16384, "dtype": "bfloat16"}
        | {"versions": [{"name": "v1", "modelUri": "pvc://models/qwen3-32b", "weight": 100}]}
        | settings
    )


def test_vllm_ascends_arguments_parse_to_the_intended_settings() -> None:
    """vllm-ascend takes vLLM's own arguments: whole NPUs, a template vNPU and a soft vNPU with
    a memory cap, through vLLM's parser, each with the share the platform derived."""
    models = [
        ascend({"type": "Ascend910B3", "count": 2}, tensorParallelSize=2),
        ascend({"type": "Ascend910B3", "mode": "vnpu", "memoryMib": 30000}),
        ascend({"type": "Ascend910B3", "mode": "vnpu", "slicing": "soft", "memoryMib": 24576, "cores": 40}),
        ascend({"type": "Ascend310P", "mode": "vnpu", "memoryMib": 6144}, dtype="float16"),
    ]
    *parsed, bare = parse_all([*(server_argv(spec) for spec in models), ["/mnt/models"]])
    shares = [spec.memory_utilization(GpuNodes()) for spec in models]
    assert shares == [None, 0.93, 0.34, 0.66]
    for spec, found, share in zip(models, parsed, shares, strict=True):
        assert "error" not in found, found
        assert found["model_tag"] == "/mnt/models"
        assert found["served_model_name"] == ["qwen"]
        assert found["port"] == 8000
        assert found["tensor_parallel_size"] == spec.tensor_parallel_size
        assert found["max_model_len"] == 16384
        assert found["dtype"] == spec.dtype
        # Unset: vLLM's own default, as on whole GPUs.
        assert found["gpu_memory_utilization"] == (share if share is not None else bare["gpu_memory_utilization"])


def test_every_pod_of_an_ascend_group_parses_to_one_engine_across_the_nodes() -> None:
    spec = ascend({"type": "Ascend910C", "count": 16}, nodes=2, tensorParallelSize=16, pipelineParallelSize=2)
    plan = spec.plan(spec.versions[0], GpuNodes())
    assert plan.workers is not None
    assert plan.workers.args[:2] == ("vllm", "serve")
    leader, worker = parse_all(
        [as_started(server_argv(spec), 0), as_started(list(plan.workers.args[2:]), 1)], *GROUP_FIELDS
    )
    for parsed in (leader, worker):
        assert "error" not in parsed, parsed
        assert (parsed["tensor_parallel_size"], parsed["pipeline_parallel_size"], parsed["nnodes"]) == (16, 2, 2)
        assert (parsed["master_addr"], parsed["master_port"]) == (LEADER_ADDRESS, 29501)
        assert parsed["distributed_executor_backend"] == "mp"
    assert [p["node_rank"] for p in (leader, worker)] == [0, 1]
    assert [p["headless"] for p in (leader, worker)] == [False, True]
