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
from inference_platform.serving.model_spec import ModelVersion
from inference_platform.serving.runtimes.vllm import VLLMModel
from tests.conftest import ROOT, shared_path
from tests.serving.runtimes.lora_stacks import EngineLine, engine_lines
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


# --- LoRA adapters ------------------------------------------------------------------------------

LORA_FIELDS = ("enable_lora", "lora_modules", "max_loras", "max_lora_rank", "max_cpu_loras", "lora_config")
VLLM_SOURCE = ROOT / ".venv-vllm" / "lib" / "python3.11" / "site-packages" / "vllm"


def version_argv(spec: VLLMModel, version: ModelVersion) -> list[str]:
    container = spec.plan(version, GpuNodes()).container
    line = [*container.get("command", []), *container["args"]]
    assert line[:2] == ["vllm", "serve"]
    return line[2:]


def assert_loads_the_adapters(parsed: dict[str, Any], spec: VLLMModel, version: ModelVersion) -> None:
    """vLLM's parsed settings load exactly the version's adapters, by name from their directories,
    within the model's limits; its engine's LoRAConfig accepts them and keeps every adapter in its
    CPU cache (max_cpu_loras, which defaults to max_loras)."""
    assert "error" not in parsed, parsed
    assert parsed["enable_lora"] is True
    assert [(m["name"], m["path"]) for m in parsed["lora_modules"]] == [(a.name, a.path) for a in version.adapters]
    assert parsed["max_loras"] == (spec.max_loras or spec.most_adapters) >= len(version.adapters)
    config = parsed["lora_config"]
    assert config["max_loras"] == parsed["max_loras"]
    assert config["max_lora_rank"] == parsed["max_lora_rank"]
    assert config["max_cpu_loras"] >= len(version.adapters)


def lora_llama(**settings: Any) -> VLLMModel:
    """A model whose first version serves three adapters (one a download with credentials, one on a
    claim, one from Hugging Face) and whose second serves none; `settings` replace the model's,
    and a `None` drops one."""
    adapters = [
        {"name": "sql", "uri": "s3://adapters/llama/sql"},
        {"name": "support", "uri": "pvc://adapters/llama/support"},
        {"name": "french", "uri": "hf://acme/llama-french-lora"},
    ]
    model: dict[str, Any] = {
        "name": "llama",
        "runtime": "vllm",
        "gpu": "exclusive",
        "args": ["--enable-prefix-caching"],
        "versions": [
            {"name": "v1", "modelUri": "hf://meta-llama/Llama-3.1-8B-Instruct", "weight": 100, "adapters": adapters},
            # Idle (weight 0): it takes no requests, so it may run without the adapters.
            {"name": "v2", "modelUri": "hf://meta-llama/Llama-3.1-8B-Instruct", "weight": 0},
        ],
    } | settings
    return VLLMModel.model_validate({key: value for key, value in model.items() if value is not None})


@pytest.mark.parametrize("settings", [{}, {"maxLoras": 4, "maxLoraRank": 64}])
def test_a_versions_adapters_parse_to_the_lora_modules_and_limits_vllm_loads(settings: dict[str, Any]) -> None:
    spec = lora_llama(**settings)
    with_adapters, without, bare = parse_all(
        [*(version_argv(spec, v) for v in spec.versions), ["/mnt/models"]], *LORA_FIELDS
    )
    assert_loads_the_adapters(with_adapters, spec, spec.versions[0])
    # As set, else vLLM's own default.
    assert with_adapters["max_lora_rank"] == settings.get("maxLoraRank", bare["max_lora_rank"])
    # A version without adapters runs without LoRA: no slots, no LoRA layers.
    assert not without["enable_lora"]
    assert (without["lora_modules"], without["lora_config"]) == (None, None)


def test_the_ranks_the_config_takes_are_vllms_and_its_default_is_the_documented_one() -> None:
    refused, bare = parse_all([["/mnt/models", "--max-lora-rank=2"], ["/mnt/models"]], "max_lora_rank")
    choices = refused["error"].split("(choose from ")[1].rstrip(")")
    assert tuple(int(rank) for rank in choices.split(", ")) == VLLMModel.LORA_RANKS
    description = VLLMModel.model_fields["max_lora_rank"].description
    assert description is not None
    assert f"defaults to {bare['max_lora_rank']}" in description
    with pytest.raises(ValidationError, match=f"vLLM takes one of {', '.join(map(str, VLLMModel.LORA_RANKS))}:"):
        lora_llama(maxLoraRank=24)


def test_what_vllms_lora_config_refuses_the_platform_never_renders() -> None:
    """vLLM refuses a CPU cache smaller than a batch; the platform renders no --max-cpu-loras, so
    the cache is a batch (every adapter, since maxLoras holds them all)."""
    (refused,) = parse_all([["/mnt/models", "--enable-lora", "--max-loras=3", "--max-cpu-loras=2"]], *LORA_FIELDS)
    assert "max_cpu_loras (2) must be >= max_loras (3)" in refused["lora_config"]["error"]
    assert "--max-cpu-loras" not in " ".join(version_argv(lora_llama(), lora_llama().versions[0]))


def test_every_pod_of_a_group_loads_the_adapters() -> None:
    spec = lora_llama(gpu={"mode": "exclusive", "count": 8}, nodes=2, tensorParallelSize=8, maxLoraRank=16)
    version = spec.versions[0]
    plan = spec.plan(version, GpuNodes())
    assert plan.workers is not None
    leader, worker = parse_all(
        [as_started(version_argv(spec, version), 0), as_started(["/mnt/models", *plan.workers.args], 1)],
        *LORA_FIELDS,
        *GROUP_FIELDS,
    )
    for parsed in (leader, worker):
        assert_loads_the_adapters(parsed, spec, version)
    assert (leader["headless"], worker["headless"]) == (False, True)


def test_vllm_ascend_takes_the_same_lora_flags() -> None:
    spec = lora_llama(gpu=None, npu={"type": "Ascend910B3", "count": 2}, tensorParallelSize=2)
    (parsed,) = parse_all([version_argv(spec, spec.versions[0])], *LORA_FIELDS)
    assert_loads_the_adapters(parsed, spec, spec.versions[0])


@pytest.fixture(scope="module")
def stack_lines(tmp_path_factory: pytest.TempPathFactory) -> list[EngineLine]:
    return engine_lines(tmp_path_factory.mktemp("stacks"), "vllm")


def test_every_vllm_command_line_the_stacks_render_loads_its_versions_adapters(stack_lines: list[EngineLine]) -> None:
    # As the kubelet starts them: a group's worker (here the first) has its index and its leader's address.
    parsed = parse_all([as_started(line.line[2:], int(line.role == "worker")) for line in stack_lines], *LORA_FIELDS)
    with_adapters = 0
    for line, found in zip(stack_lines, parsed, strict=True):
        assert line.line[:2] == ["vllm", "serve"]
        if line.version.adapters:
            with_adapters += 1
            assert isinstance(line.model, VLLMModel)
            assert_loads_the_adapters(found, line.model, line.version)
        else:
            assert "error" not in found, found
            assert not found["enable_lora"], (line.stack, line.model.name)
            assert found["lora_config"] is None
    assert with_adapters >= 2, "the all-features stack and its KEDA twin serve a vLLM model with adapters"


def test_lora_enabled_vllm_exports_the_metric_the_pickers_lora_affinity_reads() -> None:
    """vLLM creates its vllm:lora_requests_info gauge whenever its engine has a LoRAConfig, which
    it builds exactly when --enable-lora is on (every version with adapters: above); the endpoint
    picker reads that metric by default (its --lora-info-metric)."""
    loggers = (VLLM_SOURCE / "v1" / "metrics" / "loggers.py").read_text()
    gauge = loggers.index('name="vllm:lora_requests_info"')
    guard = loggers.rindex("if vllm_config.lora_config is not None:", 0, gauge)
    assert "\n        #\n" not in loggers[guard:gauge]  # no other section between the guard and the gauge
    engine_args = (VLLM_SOURCE / "engine" / "arg_utils.py").read_text()
    built = engine_args.index("lora_config = (\n            LoRAConfig(")
    assert engine_args.index("if self.enable_lora\n            else None", built) - built < 1500
    options = shared_path("inference-extension/v1.4.0/options.go").read_text()
    assert 'LoRAInfoMetric:                   "vllm:lora_requests_info",' in options


def test_vllm_counts_its_lora_slots_inside_its_memory_share() -> None:
    """The premise of leaving the cap's share alone (llm_engine.py): vLLM allocates its LoRA slots
    while it loads the model, inside the memory profiler whose reading it counts as weights and
    takes from --gpu-memory-utilization's budget before the KV cache."""
    runner = (VLLM_SOURCE / "v1" / "worker" / "gpu_model_runner.py").read_text()
    profiled = runner.index("with DeviceMemoryProfiler() as m:")
    lora = runner.index("self.model = self.load_lora_model(", profiled)
    counted = runner.index("self.model_memory_usage = m.consumed_memory", profiled)
    assert profiled < lora < counted
    worker = (VLLM_SOURCE / "v1" / "worker" / "gpu_worker.py").read_text()
    assert "weights_memory=int(self.model_runner.model_memory_usage)" in worker
    assert "self.requested_memory\n            - profile_result.non_kv_cache_memory" in worker
