"""The generated `vllm serve` arguments, parsed by vLLM's own argument parser.

vLLM's pins clash with MLServer's, so its parser runs in .venv-vllm (built by `make test`).
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest

from inference_platform import pins
from inference_platform.platform.gpu_nodes import GpuNodes
from inference_platform.serving.runtimes.vllm import VLLMModel
from tests.conftest import ROOT

pytestmark = pytest.mark.slow

VLLM_PYTHON = ROOT / ".venv-vllm" / "bin" / "python"
PARSE = Path(__file__).with_name("vllm_parse.py")


def parse(argv: list[str]) -> dict[str, Any]:
    assert VLLM_PYTHON.exists(), "vLLM's parser lives in .venv-vllm: run `make test`, which builds it"
    done = subprocess.run(
        [str(VLLM_PYTHON), str(PARSE)], input=json.dumps(argv), capture_output=True, text=True, check=True, timeout=300
    )
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def server_argv(spec: VLLMModel, nodes: GpuNodes | None = None) -> list[str]:
    container = spec.plan(spec.versions[0], nodes or GpuNodes()).container
    command, args = container["command"], container["args"]
    assert command[:2] == ["vllm", "serve"]
    return [*command[2:], *args]


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
