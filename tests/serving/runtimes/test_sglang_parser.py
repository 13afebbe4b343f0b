"""The generated `sglang.launch_server` arguments, parsed by SGLang's own parser.

SGLang pins its own torch, so its parser runs in .venv-sglang (built by `make test`).
"""

from __future__ import annotations

import ast
import subprocess
from collections.abc import Callable
from pathlib import Path
from types import SimpleNamespace
from typing import Any, Optional

import pytest

from inference_platform import pins
from inference_platform.platform.gpu_nodes import GpuNodes
from inference_platform.serving.model_spec import ModelVersion
from inference_platform.serving.runtimes.sglang import SGLangModel
from tests.conftest import ROOT
from tests.serving.runtimes.lora_stacks import EngineLine, engine_lines
from tests.serving.runtimes.parser_process import ParserProcess

pytestmark = pytest.mark.slow

SGLANG_PYTHON = ROOT / ".venv-sglang" / "bin" / "python"
PARSE = Path(__file__).with_name("sglang_parse.py")
VERSIONS = [{"name": "v1", "modelUri": "hf://Qwen/Qwen3-8B", "weight": 100}]


PARSER = ParserProcess(SGLANG_PYTHON, PARSE, "SGLang's parser lives in .venv-sglang: run `make test`, which builds it")


def parse(argv: list[str]) -> dict[str, Any]:
    result: dict[str, Any] = PARSER.ask(argv)
    return result


def server_argv(spec: SGLangModel, nodes: GpuNodes | None = None) -> list[str]:
    container = spec.plan(spec.versions[0], nodes or GpuNodes()).container
    assert container["command"] == ["python3", "-m", "sglang.launch_server"]
    argv: list[str] = container["args"]
    return argv


def test_the_installed_parser_is_the_version_the_image_runs() -> None:
    done = subprocess.run(
        [str(SGLANG_PYTHON), "-c", "import importlib.metadata as m; print(m.version('sglang'))"],
        capture_output=True,
        text=True,
        check=True,
    )
    assert pins.SGLANG_IMAGE.endswith(f":v{done.stdout.strip()}")


@pytest.mark.parametrize(
    ("settings", "expected"),
    [
        (
            {"gpu": {"mode": "vgpu", "count": 2, "memoryMib": 40960}, "tensorParallelSize": 2, "maxModelLen": 8192},
            {"tp_size": 2, "context_length": 8192, "dtype": "auto", "mem_fraction_static": 0.95},
        ),
        (
            {"gpu": "exclusive", "dtype": "bfloat16", "args": ["--enable-torch-compile"]},
            {"tp_size": 1, "context_length": None, "dtype": "bfloat16", "mem_fraction_static": None},
        ),
        (
            {"gpu": {"mode": "shared"}, "gpuMemoryUtilization": 0.4},
            {"tp_size": 1, "context_length": None, "dtype": "auto", "mem_fraction_static": 0.4},
        ),
    ],
)
def test_generated_arguments_parse_to_the_intended_settings(settings: dict[str, Any], expected: dict[str, Any]) -> None:
    spec = SGLangModel.model_validate({"name": "qwen", "runtime": "sglang", "versions": VERSIONS} | settings)

    parsed = parse(server_argv(spec))

    assert parsed == {
        "model_path": "/mnt/models",
        "served_model_name": "qwen",
        "host": "0.0.0.0",
        "port": 30000,
        "enable_metrics": True,
        **expected,
    }


def test_the_parser_rejects_what_sglang_would_reject() -> None:
    assert (
        "unrecognized arguments: --context-lenght=8192" in parse(["--model-path=/m", "--context-lenght=8192"])["error"]
    )
    assert "invalid choice" in parse(["--model-path=/m", "--dtype=float64x"])["error"]
    assert "invalid int value" in parse(["--model-path=/m", "--tp-size=two"])["error"]


SGLANG_SOURCE = ROOT / ".venv-sglang" / "lib" / "python3.11" / "site-packages" / "sglang" / "srt"


def test_the_probes_ask_the_endpoints_sglangs_server_defines() -> None:
    """/ready answers 200 only once the server is up (its tokenizer manager's status), /health runs
    one token and waits up to 20 s for it: read from the pinned wheel's HTTP server."""
    source = (SGLANG_SOURCE / "entrypoints" / "http_server.py").read_text()
    assert '@app.get("/ready")\nasync def ready()' in source
    assert "status_code = 200 if _global_state.tokenizer_manager.is_ready() else 503" in source
    assert '@app.get("/health")\n@app.get("/health_generate")' in source
    assert 'HEALTH_CHECK_TIMEOUT = int(os.getenv("SGLANG_HEALTH_CHECK_TIMEOUT", 20))' in source
    spec = SGLangModel.model_validate({"name": "qwen", "runtime": "sglang", "gpu": "exclusive", "versions": VERSIONS})
    container = spec.plan(spec.versions[0], GpuNodes()).container
    assert container["readinessProbe"]["httpGet"] == {"path": "/ready", "port": 30000}
    assert container["startupProbe"]["httpGet"] == {"path": "/ready", "port": 30000}
    assert container["livenessProbe"]["httpGet"] == {"path": "/health", "port": 30000}
    assert container["livenessProbe"]["timeoutSeconds"] > 20


# --- LoRA adapters ------------------------------------------------------------------------------


def version_argv(spec: SGLangModel, version: ModelVersion) -> list[str]:
    container = spec.plan(version, GpuNodes()).container
    assert container["command"] == ["python3", "-m", "sglang.launch_server"]
    argv: list[str] = container["args"]
    return argv


def assert_loads_the_adapters(parsed: dict[str, Any], spec: SGLangModel, version: ModelVersion) -> None:
    """SGLang's parser and its LoRA resolution load exactly the version's adapters, by name from their
    directories, with a slot in a batch for each and one for the base model."""
    assert "error" not in parsed, parsed
    assert parsed["enable_lora"] is True
    assert parsed["lora_paths"] == [{"name": a.name, "path": a.path} for a in version.adapters]
    assert parsed["max_loras_per_batch"] == (spec.max_loras or spec.most_adapters) + 1 > len(version.adapters)
    assert parsed["max_lora_rank"] == spec.max_lora_rank  # unset: SGLang reads it from the adapters
    assert parsed["max_loaded_loras"] is None  # no cap on the adapters held in CPU memory


def lora_qwen(**settings: Any) -> SGLangModel:
    adapters = [
        {"name": "summarize", "uri": "pvc://adapters/qwen/summarize"},
        {"name": "classify", "uri": "s3://adapters/qwen/classify"},
    ]
    return SGLangModel.model_validate(
        {
            "name": "qwen",
            "runtime": "sglang",
            "gpu": "exclusive",
            "versions": [
                {"name": "v1", "modelUri": "hf://Qwen/Qwen3-8B", "weight": 100, "adapters": adapters},
                # Idle (weight 0): it takes no requests, so it may run without the adapters.
                {"name": "v2", "modelUri": "hf://Qwen/Qwen3-8B", "weight": 0},
            ],
        }
        | settings
    )


@pytest.mark.parametrize("settings", [{}, {"maxLoras": 3, "maxLoraRank": 64}])
def test_a_versions_adapters_parse_to_the_lora_paths_and_limits_sglang_loads(settings: dict[str, Any]) -> None:
    spec = lora_qwen(**settings)
    with_adapters, without = (parse(version_argv(spec, version)) for version in spec.versions)
    assert_loads_the_adapters(with_adapters, spec, spec.versions[0])
    # A version without adapters runs without LoRA (its answer has no LoRA settings: LoRA is off).
    assert "error" not in without
    assert "enable_lora" not in without


def test_what_sglangs_lora_checks_refuse() -> None:
    """SGLang's own LoRA resolution, which the parser answers with: more adapters than it may hold
    in CPU memory, or a batch of none. The platform renders neither (no --max-loaded-loras, a batch
    of maxLoras + 1)."""
    too_many = ["--model-path=/m", "--lora-paths", "a=/a", "b=/b", "--max-loaded-loras=1", "--max-loras-per-batch=1"]
    assert "The number of LoRA paths should not exceed max_loaded_loras" in parse(too_many)["error"]
    assert (
        "max_loras_per_batch must be positive"
        in parse(["--model-path=/m", "--lora-paths", "a=/a", "--max-loras-per-batch=0"])["error"]
    )
    assert not {"--max-loaded-loras", "--max-loras-per-batch=0"} & set(
        version_argv(lora_qwen(), lora_qwen().versions[0])
    )


@pytest.fixture(scope="module")
def stack_lines(tmp_path_factory: pytest.TempPathFactory) -> list[EngineLine]:
    return engine_lines(tmp_path_factory.mktemp("stacks"), "sglang")


def test_every_sglang_command_line_the_stacks_render_loads_its_versions_adapters(
    stack_lines: list[EngineLine],
) -> None:
    with_adapters = 0
    for line in stack_lines:
        assert line.line[:3] == ["python3", "-m", "sglang.launch_server"]
        found = parse(line.line[3:])
        if line.version.adapters:
            with_adapters += 1
            assert isinstance(line.model, SGLangModel)
            assert_loads_the_adapters(found, line.model, line.version)
        else:
            assert "error" not in found, found
            assert "enable_lora" not in found, (line.stack, line.model.name)
    assert with_adapters >= 2, "the all-features stack and its KEDA twin serve an SGLang model with adapters"


def parse_model_parameter() -> Callable[[Any, str], tuple[str, str | None]]:
    """SGLang's own `_parse_model_parameter` (entrypoints/openai/serving_base.py), taken from the
    pinned wheel's source: its module imports FastAPI, which the parser's venv does not hold."""
    source = (SGLANG_SOURCE / "entrypoints" / "openai" / "serving_base.py").read_text()
    (function,) = (
        node
        for node in ast.walk(ast.parse(source))
        if isinstance(node, ast.FunctionDef) and node.name == "_parse_model_parameter"
    )
    namespace: dict[str, Any] = {"Tuple": tuple, "Optional": Optional}
    exec(compile(ast.Module(body=[function], type_ignores=[]), "serving_base.py", "exec"), namespace)
    found: Callable[[Any, str], tuple[str, str | None]] = namespace["_parse_model_parameter"]
    return found


def test_the_model_field_of_an_adapters_request_picks_the_adapter_in_sglang() -> None:
    """SGLang's completions route takes the adapter from `<served model>:<adapter>` (and a bare
    adapter name for the base model): the platform's requests and curl lines name it that way."""
    spec = lora_qwen()
    picked = parse_model_parameter()
    server = SimpleNamespace(tokenizer_manager=SimpleNamespace(served_model_name=spec.name))
    for adapter in spec.versions[0].adapters:
        body = spec.adapter_request(adapter.name).body
        assert picked(server, body["model"]) == (spec.name, adapter.name)
        assert picked(server, adapter.name) == (adapter.name, None)  # what a bare name would do
    assert picked(server, spec.example_request().body["model"]) == (spec.name, None)


def test_sglang_builds_its_lora_memory_pool_inside_its_static_share() -> None:
    """The premise of leaving the cap's share alone (llm_engine.py): SGLang sets up its LoRA manager
    (whose memory pool allocates every slot at once) while initializing the model runner, before
    it budgets the KV cache as the free memory less the non-static remainder."""
    runner = (SGLANG_SOURCE / "model_executor" / "model_runner.py").read_text()
    initialize = runner.index("    def initialize(self):")
    assert (
        initialize
        < runner.index("self.maybe_init_lora_manager()", initialize)
        < runner.index("\n    def ", initialize + 10)
    )
    pool = (SGLANG_SOURCE / "lora" / "mem_pool.py").read_text()
    assert "self.init_buffers(base_model)" in pool
    budget = (SGLANG_SOURCE / "mem_cache" / "kv_cache_configurator.py").read_text()
    assert "slack_gb = pre_model_load_memory * (1 - get_schedule().mem_fraction_static)" in budget
    assert "rest_memory = available_gpu_memory - slack_gb - mm_reservation_gb" in budget


def test_sglang_keeps_a_slot_for_the_base_model() -> None:
    """Why --max-loras-per-batch is maxLoras + 1: the base model's requests (uid None) take a slot
    of the pool like an adapter's (lora/mem_pool.py, prepare_lora_batch)."""
    pool = (SGLANG_SOURCE / "lora" / "mem_pool.py").read_text()
    prepare = pool.index("    def prepare_lora_batch(")
    assert "Only evict None when the batch consists entirely of LoRA requests" in pool[prepare:]
    assert SGLangModel.BASE_MODEL_LORA_SLOTS == 1
