"""The generated `sglang.launch_server` arguments, parsed by SGLang's own parser.

SGLang pins its own torch, so its parser runs in .venv-sglang (built by `make test`).
"""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import pytest

from inference_platform import pins
from inference_platform.platform.gpu_nodes import GpuNodes
from inference_platform.serving.runtimes.sglang import SGLangModel
from tests.conftest import ROOT
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
