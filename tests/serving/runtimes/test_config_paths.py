"""Each runtime's config errors, as `python -m infra render` reports them: the exact path of the
field to fix in the stack file (models[2] here: two valid models come first), and what is wrong."""

from __future__ import annotations

from typing import Any

import pytest

from inference_platform.config.errors import ConfigError
from inference_platform.serving.runtimes import RUNTIMES
from inference_platform.stack.config import parse_stack_config, project_values
from tests.conftest import RUNTIME_MINIMUMS, base_config

MODEL = "models[2]"
# A valid model of each runtime; each case below changes it.
VALID = RUNTIME_MINIMUMS
SUPPLIED_PBTXT = 'name: "m" platform: "onnxruntime_onnx" input [{name: "x" data_type: TYPE_FP32 dims: [4]}] ' + (
    'output [{name: "y" data_type: TYPE_FP32 dims: [2]}]'
)


def problems(runtime: str, **settings: Any) -> list[tuple[str, str]]:
    """(path, message) of every problem in a stack whose third model is this runtime's, changed."""
    config = base_config()
    model = {"name": "m", "versions": [{"name": "v1", "modelUri": "pvc://models/m/1", "weight": 100}]}
    model |= VALID[runtime] | settings
    config["inference-platform:models"].append({key: value for key, value in model.items() if value is not None})
    config["inference-platform:platform"] = {"kubernetesVersion": "1.30.4", "hami": {"enabled": True}}
    try:
        parse_stack_config(project_values(config))
    except ConfigError as error:
        return [(problem.path, problem.message) for problem in error.problems]
    return []


def test_there_is_a_valid_model_of_every_runtime() -> None:
    assert list(VALID) == list(RUNTIMES)


@pytest.mark.parametrize("runtime", RUNTIMES)
def test_each_runtimes_valid_model_has_no_problems(runtime: str) -> None:
    assert problems(runtime) == []


# (runtime, settings, [(path, words in its message)]): every problem of the stack, in report order.
CASES: list[tuple[str, dict[str, Any], list[tuple[str, str]]]] = [
    # Only the missing GPU: not also a tensorParallelSize that should equal zero GPUs.
    ("vllm", {"gpu": None}, [(f"{MODEL}.gpu", "vLLM serves on GPUs: set gpu to exclusive, vgpu or shared")]),
    (
        "vllm",
        {"gpu": "shared"},
        [(f"{MODEL}.gpuMemoryUtilization", "with a shared GPU vLLM would take most of the device")],
    ),
    ("vllm", {"gpu": "shared", "gpuMemoryUtilization": 0.4}, []),
    # SGLang shares the LLM engines' rules, named for it.
    ("sglang", {"gpu": None}, [(f"{MODEL}.gpu", "SGLang serves on GPUs: set gpu to exclusive, vgpu or shared")]),
    ("sglang", {"gpu": "shared"}, [(f"{MODEL}.gpuMemoryUtilization", "with a shared GPU SGLang would take most")]),
    (
        "sglang",
        {"gpu": {"mode": "exclusive", "count": 4}, "tensorParallelSize": 2},
        [(f"{MODEL}.tensorParallelSize", "is 2 but each pod gets 4 GPU(s): make them equal")],
    ),
    (
        "vllm",
        {"tensorParallelSize": 2},
        [(f"{MODEL}.tensorParallelSize", "is 2 but each pod gets 1 GPU(s): make them equal")],
    ),
    (
        "vllm",
        {"gpu": {"mode": "vgpu", "count": 2, "memoryMib": 20480}},
        [(f"{MODEL}.tensorParallelSize", "is 1 but each pod gets 2 GPU(s)")],
    ),
    ("vllm", {"gpuMemoryUtilization": 1.5}, [(f"{MODEL}.gpuMemoryUtilization", "at most 1")]),
    ("vllm", {"gpuMemoryUtilization": 0}, [(f"{MODEL}.gpuMemoryUtilization", "more than 0")]),
    ("vllm", {"maxModelLen": 0}, [(f"{MODEL}.maxModelLen", "at least 1")]),
    ("vllm", {"shmSize": "2G"}, [(f"{MODEL}.shmSize", "must be a whole number of Mi or Gi, such as 2Gi (got '2G')")]),
    ("vllm", {"dtype": "int8"}, [(f"{MODEL}.dtype", "unknown value 'int8': use one of auto, half")]),
    ("vllm", {"format": "onnx"}, [(f"{MODEL}.format", "'format' is not a setting of the vllm runtime")]),
    (
        "tfserving",
        {"versions": [{"name": "latest", "modelUri": "pvc://models/m/1", "weight": 100}]},
        [(f"{MODEL}.versions[0].name", "TF Serving numbers versions: end the name in a number")],
    ),
    (
        "tfserving",
        {"batching": {}, "platformConfig": "model_config_list {}"},
        [(f"{MODEL}.batching", "TF Serving ignores batching settings when a platformConfig is given")],
    ),
    (
        "tfserving",
        {"batching": {"maxBatchSize": 0}},
        [(f"{MODEL}.batching.maxBatchSize", "at least 1")],
    ),
    ("tfserving", {"batching": {"maxBatch": 8}}, [(f"{MODEL}.batching.maxBatch", "unknown setting 'maxBatch'")]),
    (
        "tfserving",
        {"maxWorkers": 2},
        [(f"{MODEL}.maxWorkers", "'maxWorkers' is not a setting of the tfserving runtime")],
    ),
    (
        "torchserve",
        {"minWorkers": 4, "maxWorkers": 2},
        [(f"{MODEL}.minWorkers", "4 is more than maxWorkers (2)")],
    ),
    ("torchserve", {"marFile": "model.zip"}, [(f"{MODEL}.marFile", "must be a file name ending in .mar")]),
    ("torchserve", {"responseTimeoutSeconds": 0}, [(f"{MODEL}.responseTimeoutSeconds", "at least 1")]),
    (
        "triton-llm",
        {"gpu": "shared"},
        [(f"{MODEL}.kvCacheFreeGpuMemFraction", "with a shared GPU the KV cache would take 90 %")],
    ),
    ("triton-llm", {"gpu": "shared", "kvCacheFreeGpuMemFraction": 0.3}, []),
    ("triton-llm", {"gpu": {"mode": "exclusive", "count": 2}}, [(f"{MODEL}.gpu", "one GPU per pod")]),
    (
        "triton-llm",
        {"engine": "/engines/mistral"},
        [(f"{MODEL}.engine", "must be a path inside the model's directory, not starting with /")],
    ),
    ("triton-llm", {"maxBatchSize": 5000}, [(f"{MODEL}.maxBatchSize", "at most 4096")]),
    (
        "triton-llm",
        {"batchingStrategy": "static"},
        [(f"{MODEL}.batchingStrategy", "unknown value 'static': use one of")],
    ),
    ("triton-llm", {"kvCacheFreeGpuMemFraction": 0}, [(f"{MODEL}.kvCacheFreeGpuMemFraction", "more than 0")]),
    ("torchserve", {"batching": {}}, [(f"{MODEL}.batching", "'batching' is not a setting of the torchserve runtime")]),
    (
        "triton",
        {"inputs": [], "outputs": []},
        [
            (f"{MODEL}.inputs", "a strict model config needs at least one"),
            (f"{MODEL}.outputs", "a strict model config needs at least one"),
        ],
    ),
    ("triton", {"dynamicBatching": {}}, [(f"{MODEL}.dynamicBatching", "needs maxBatchSize above 0")]),
    (
        "triton",
        {"maxBatchSize": 8, "dynamicBatching": {"preferredBatchSize": [4, 16]}},
        [(f"{MODEL}.dynamicBatching.preferredBatchSize[1]", "16 is more than maxBatchSize (8)")],
    ),
    (
        "triton",
        {"instanceGroups": [{"count": 1}, {"kind": "gpu"}]},
        [(f"{MODEL}.instanceGroups[1].kind", "gpu instances need a GPU")],
    ),
    (
        "triton",
        {"inputs": [{"name": "x", "dataType": "FLOAT", "dims": [4]}]},
        [(f"{MODEL}.inputs[0].dataType", "unknown value 'FLOAT': use one of BOOL")],
    ),
    (
        "triton",
        {"outputs": [{"name": "y", "dataType": "FP32", "dims": []}]},
        [(f"{MODEL}.outputs[0].dims", "must not be empty")],
    ),
    (
        "triton",
        {"configPbtxt": SUPPLIED_PBTXT},
        [
            (f"{MODEL}.inputs", "set either configPbtxt or this, not both"),
            (f"{MODEL}.outputs", "set either configPbtxt or this, not both"),
        ],
    ),
    ("triton", {"configPbtxt": SUPPLIED_PBTXT, "inputs": None, "outputs": None}, []),
    (
        "triton",
        {"configPbtxt": SUPPLIED_PBTXT.replace('"m"', '"other"'), "inputs": None, "outputs": None},
        [(f"{MODEL}.configPbtxt", "its name is 'other'; Triton requires the model's name, 'm'")],
    ),
    (
        "triton",
        {
            "versions": [
                {"name": "v1", "modelUri": "pvc://m/1", "weight": 50},
                {"name": "b", "modelUri": "pvc://m/b", "weight": 50},
            ]
        },
        [(f"{MODEL}.versions[1].name", "Triton numbers versions")],
    ),
    (
        "mlserver",
        {"format": "onnx"},
        [(f"{MODEL}.format", "unknown value 'onnx': use one of sklearn, xgboost, lightgbm")],
    ),
    ("mlserver", {"parallelWorkers": -1}, [(f"{MODEL}.parallelWorkers", "at least 0")]),
    ("mlserver", {"maxBatchTime": 61}, [(f"{MODEL}.maxBatchTime", "at most 60")]),
    (
        "mlserver",
        {"maxModelLen": 8192},
        [(f"{MODEL}.maxModelLen", "'maxModelLen' is not a setting of the mlserver runtime")],
    ),
]


@pytest.mark.parametrize(
    ("runtime", "settings", "expected"),
    CASES,
    ids=[f"{runtime}-{'-'.join(settings)}-{index}" for index, (runtime, settings, _) in enumerate(CASES)],
)
def test_config_errors_name_the_exact_field(
    runtime: str, settings: dict[str, Any], expected: list[tuple[str, str]]
) -> None:
    found = problems(runtime, **settings)

    assert [path for path, _ in found] == [path for path, _ in expected]
    for (_, message), (_, words) in zip(found, expected, strict=True):
        assert words in message
