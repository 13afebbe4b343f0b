"""Triton reads what we generate: config.pbtxt parsed with its own ModelConfig message."""

from __future__ import annotations

from typing import Any

import pytest
from google.protobuf import text_format
from pydantic import ValidationError

from inference_platform.platform.gpu_nodes import GpuNodes
from inference_platform.serving.runtimes.triton import TritonModel, model_config_message

TENSORS = {
    "inputs": [{"name": "input", "dataType": "FP32", "dims": [3, 224, 224]}],
    "outputs": [{"name": "logits", "dataType": "FP32", "dims": [1000]}],
}
_GROUP = model_config_message().DESCRIPTOR.fields_by_name["instance_group"].message_type
KIND = {value.name: value.number for value in _GROUP.fields_by_name["kind"].enum_type.values}
VERSIONS = [{"name": "v3", "modelUri": "gs://models/resnet/3", "weight": 100}]


def model(**settings: Any) -> TritonModel:
    base = {"name": "resnet", "runtime": "triton", "format": "onnx", "versions": VERSIONS}
    return TritonModel.model_validate(base | settings)


def parse(spec: TritonModel) -> Any:
    text = spec.plan(spec.versions[0], GpuNodes()).config_files["config.pbtxt"]
    return text_format.Parse(text, model_config_message())


def test_generated_config_parses_as_model_config() -> None:
    spec = model(
        maxBatchSize=8,
        dynamicBatching={"preferredBatchSize": [4, 8], "maxQueueDelayMicroseconds": 100},
        instanceGroups=[{"count": 2}],
        **TENSORS,
    )

    config = parse(spec)

    assert config.name == "resnet"
    assert config.platform == "onnxruntime_onnx"
    assert config.max_batch_size == 8
    assert list(config.version_policy.specific.versions) == [3]
    assert [(t.name, t.data_type, list(t.dims)) for t in config.input] == [
        (
            "input",
            model_config_message()
            .input.add()
            .DESCRIPTOR.fields_by_name["data_type"]
            .enum_type.values_by_name["TYPE_FP32"]
            .number,
            [3, 224, 224],
        )
    ]
    assert [(t.name, list(t.dims)) for t in config.output] == [("logits", [1000])]
    assert list(config.dynamic_batching.preferred_batch_size) == [4, 8]
    assert config.dynamic_batching.max_queue_delay_microseconds == 100
    assert [(g.count, g.kind) for g in config.instance_group] == [(2, KIND["KIND_CPU"])]


@pytest.mark.parametrize(
    ("model_format", "platform"),
    [("onnx", "onnxruntime_onnx"), ("tensorrt", "tensorrt_plan"), ("pytorch", "pytorch_libtorch")],
)
def test_platform_follows_the_model_format(model_format: str, platform: str) -> None:
    assert parse(model(format=model_format, **TENSORS)).platform == platform


def test_instances_run_on_the_gpu_when_the_model_has_one() -> None:
    config = parse(model(gpu="exclusive", **TENSORS))
    assert [g.kind for g in config.instance_group] == [KIND["KIND_GPU"]]


def test_repository_layout_and_strict_arguments() -> None:
    spec = model(**TENSORS)
    container = spec.plan(spec.versions[0], GpuNodes()).container
    mounts = {(m["name"], m["mountPath"]): m.get("subPath") for m in container["volumeMounts"]}

    assert mounts[("server-config", "/models/resnet/config.pbtxt")] == "config.pbtxt"
    assert ("model-files", "/models/resnet/3") in mounts
    assert container["args"] == [
        "--model-repository=/models",
        "--model-control-mode=none",
        "--disable-auto-complete-config",
        "--http-port=8000",
        "--grpc-port=8001",
        "--metrics-port=8002",
        "--allow-gpu-metrics=false",
    ]
    assert container["readinessProbe"]["httpGet"]["path"] == "/v2/health/ready"


def test_a_supplied_config_is_used_as_written() -> None:
    supplied = (
        'name: "resnet"\nplatform: "onnxruntime_onnx"\nmax_batch_size: 4\n'
        'input [{ name: "x" data_type: TYPE_INT64 dims: [2] }]\n'
        'output [{ name: "y" data_type: TYPE_FP32 dims: [1] }]\n'
    )
    spec = model(configPbtxt=supplied)

    assert spec.plan(spec.versions[0], GpuNodes()).config_files["config.pbtxt"] == supplied
    assert spec.example_request().body == {
        "inputs": [{"name": "x", "shape": [1, 2], "datatype": "INT64", "data": [0, 0]}]
    }


@pytest.mark.parametrize(
    ("supplied", "words"),
    [
        ("name: resnet\nbogus_field: 1\n", "not a valid Triton ModelConfig"),
        ('name: "other"\n', "its name is 'other'"),
        ('platform: "tensorrt_plan"\n', "its platform is 'tensorrt_plan'"),
        ('name: "resnet"\n', "names no platform or backend"),
        ('backend: "onnxruntime"\ninput [{ name: "x" data_type: TYPE_FP32 dims: [1] }]\n', "no output tensors"),
    ],
)
def test_a_supplied_config_is_checked_against_model_config(supplied: str, words: str) -> None:
    with pytest.raises(ValidationError, match=words):
        model(configPbtxt=supplied)


def test_settings_and_a_supplied_config_exclude_each_other() -> None:
    with pytest.raises(ValidationError, match="set either configPbtxt or this"):
        model(configPbtxt='name: "resnet"\n', maxBatchSize=4)


@pytest.mark.parametrize(
    ("settings", "path", "words"),
    [
        ({"dynamicBatching": {}}, "dynamicBatching", "needs maxBatchSize above 0"),
        (
            {"maxBatchSize": 8, "dynamicBatching": {"preferredBatchSize": [4, 16]}},
            "dynamicBatching.preferredBatchSize[1]",
            "16 is more than maxBatchSize (8)",
        ),
        ({"instanceGroups": [{"kind": "cpu"}, {"kind": "gpu"}]}, "instanceGroups[1].kind", "gpu instances need a GPU"),
    ],
)
def test_batching_and_instances_triton_would_refuse_are_config_errors(
    settings: dict[str, Any], path: str, words: str
) -> None:
    with pytest.raises(ValidationError) as raised:
        model(**TENSORS, **settings)
    (error,) = raised.value.errors()
    assert [p for p, message in error["ctx"]["problems"] if words in message] == [path]


def test_a_generated_config_needs_inputs_and_outputs() -> None:
    with pytest.raises(ValidationError, match="a strict model config needs at least one"):
        model()


def test_example_request_is_shaped_after_the_first_input() -> None:
    spec = model(
        maxBatchSize=8, inputs=[{"name": "x", "dataType": "FP32", "dims": [-1, 4]}], outputs=TENSORS["outputs"]
    )
    assert spec.example_request().body == {
        "inputs": [{"name": "x", "shape": [1, 1, 4], "datatype": "FP32", "data": [0, 0, 0, 0]}]
    }


@pytest.mark.parametrize("tensors", ["inputs", "outputs"])
def test_the_reference_says_tensors_are_required_without_a_config_pbtxt(tensors: str) -> None:
    """Listed with the default [] in docs/config-reference.md, the tensors are refused empty unless
    configPbtxt is given: the description (the reference's text) says so."""
    from inference_platform.cli.config_reference import reference_markdown
    from inference_platform.serving.runtimes.triton import REQUIRED_WITHOUT_CONFIG_PBTXT

    row = next(line for line in reference_markdown().splitlines() if f"| `models[].{tensors}` |" in line)
    assert REQUIRED_WITHOUT_CONFIG_PBTXT in row
    settings = {k: v for k, v in TENSORS.items() if k != tensors}
    with pytest.raises(ValidationError, match=tensors):
        model(**settings)
