"""Every curl line the stack outputs print runs as printed: the shell splits it into a curl command
(after, for a large body, the command that generates the body and pipes it in), and the body it
sends, produced for real, is the model's example request, shaped after the model's inputs."""

from __future__ import annotations

import copy
import json
import math
import shlex
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from inference_platform.cli.main import main
from inference_platform.cli.render_files import read_render
from inference_platform.cli.stack_file import read_stack_config
from inference_platform.serving.runtimes.triton import TritonModel
from inference_platform.stack.config import StackConfig
from tests.conftest import ROOT, base_config, full_config, write_stack_file

# A detector's image input: 3 x 640 x 640 FP32, batched (1,228,800 values, 2.4 MB of JSON).
DETECTOR = {
    "name": "detector",
    "runtime": "triton",
    "format": "onnx",
    "maxBatchSize": 4,
    "inputs": [{"name": "images", "dataType": "FP32", "dims": [3, 640, 640]}],
    "outputs": [{"name": "boxes", "dataType": "FP32", "dims": [-1, 6]}],
    "versions": [{"name": "v1", "modelUri": "pvc://models/detector/1", "weight": 100}],
}
# A custom server whose example request holds a single quote, which must not end the shell's word.
QUOTED = {
    "name": "echo",
    "runtime": "custom",
    "image": "registry.example.com/echo:1.0.0",
    "port": 8080,
    "runAsUser": 1000,
    "readiness": {"path": "/healthz"},
    "example": {"path": "/echo", "body": {"text": 'it\'s a test; $(rm -rf /) `x` "q"', "n": [1, 1, 1]}},
    "versions": [{"name": "v1", "modelUri": "pvc://models/echo/1", "weight": 100}],
}


def large_inputs() -> dict[str, Any]:
    config = base_config()
    config["inference-platform:models"] += [copy.deepcopy(DETECTOR), copy.deepcopy(QUOTED)]
    config["inference-platform:pipelines"] = [
        {"name": "detect", "nodes": {"root": {"routerType": "Sequence", "steps": [{"model": "detector"}]}}}
    ]
    return config


STACKS = ("all-features", "large-inputs", "prod")
Rendered = tuple[StackConfig, dict[str, Any]]


def stack_path(stack: str, directory: Path) -> Path:
    if stack == "prod":
        return ROOT / "Pulumi.prod.yaml"
    return write_stack_file(
        directory / f"Pulumi.{stack}.yaml", full_config() if stack == "all-features" else large_inputs()
    )


@pytest.fixture(scope="module")
def renders(tmp_path_factory: pytest.TempPathFactory) -> Callable[[str], Rendered]:
    """A stack's validated config and the outputs its render wrote, each stack rendered once."""
    done: dict[str, Rendered] = {}

    def render(stack: str) -> Rendered:
        if stack not in done:
            tmp = tmp_path_factory.mktemp(stack)
            path = stack_path(stack, tmp)
            out = tmp / "out"
            assert main(["render", "--stack", stack, "--config", str(path), "--out", str(out), "--no-charts"]) == 0
            done[stack] = (read_stack_config(path)[1], read_render(out)[2])
        return done[stack]

    return render


@pytest.fixture(params=STACKS)
def rendered(request: pytest.FixtureRequest, renders: Callable[[str], Rendered]) -> Rendered:
    return renders(request.param)


def sent(line: str) -> tuple[list[str], Any]:
    """The curl command of a printed line, and the JSON body it sends, produced as the shell would."""
    words = shlex.split(line)
    if words[0] == "python3":
        bar = words.index("|")
        assert words[1:2] == ["-c"]
        assert bar == 3, words[:4]
        generated = subprocess.run(
            [sys.executable, "-c", words[2]], capture_output=True, text=True, check=True, timeout=60
        ).stdout
        curl = words[bar + 1 :]
        assert curl[-2:] == ["--data-binary", "@-"], curl
        return curl[:-2], json.loads(generated)
    assert words[-2] == "-d", words
    return words[:-2], json.loads(words[-1])


def check(line: str, url: str, body: dict[str, Any]) -> None:
    curl, sent_body = sent(line)
    assert curl == ["curl", "-sS", url, "-H", "Content-Type: application/json"]
    assert sent_body == body
    for tensor in sent_body.get("inputs", []):
        assert len(tensor["data"]) == math.prod(tensor["shape"]), tensor["name"]


def test_every_models_curl_line_sends_its_example_request(rendered: Rendered) -> None:
    config, outputs = rendered
    models = {model.name: model for model in config.models}
    assert outputs["models"].keys() == models.keys()
    for name, entry in outputs["models"].items():
        example = models[name].example_request()
        check(entry["curl"], entry["urls"][0] + example.path.lstrip("/"), example.body)


def test_every_adapters_curl_line_asks_the_model_for_it(rendered: Rendered) -> None:
    """A model whose live versions serve LoRA adapters outputs a curl line per adapter, sending the
    model's completion request with the adapter's name where the engine reads it (vLLM: the name;
    SGLang: <model>:<name>), to the model's own URL; a model without adapters outputs none."""
    config, outputs = rendered
    for model in config.models:
        entry = outputs["models"][model.name]
        if not model.served_adapters:
            assert "adapters" not in entry
            continue
        assert list(entry["adapters"]) == model.served_adapters
        for adapter, line in entry["adapters"].items():
            request = model.adapter_request(adapter)
            assert request.body == model.example_request().body | {"model": request.body["model"]}
            assert request.body["model"].split(":")[-1] == adapter
            check(line, entry["urls"][0] + request.path.lstrip("/"), request.body)


def test_the_all_features_stack_outputs_adapters_of_both_engines(renders: Callable[[str], Rendered]) -> None:
    _, outputs = renders("all-features")
    assert sent(outputs["models"]["llama"]["adapters"]["sql"])[1]["model"] == "sql"
    assert sent(outputs["models"]["qwen"]["adapters"]["summarize"])[1]["model"] == "qwen:summarize"


def test_every_pipelines_curl_line_sends_its_first_models_request(
    rendered: Rendered,
) -> None:
    config, outputs = rendered
    models = {model.name: model for model in config.models}
    for spec in config.pipelines:
        entry = outputs["pipelines"][spec.name]
        first = spec.first_model()
        check(entry["curl"], entry["urls"][0], models[first].example_request().body if first else {})


def test_a_large_tensor_is_sent_whole_in_the_inputs_shape(rendered: Rendered) -> None:
    config, outputs = rendered
    tritons = [model for model in config.models if isinstance(model, TritonModel) and model.inputs]
    assert tritons, "every stack here serves a Triton model with its inputs written out"
    for model in tritons:
        _, body = sent(outputs["models"][model.name]["curl"])
        (tensor,) = body["inputs"]
        first = model.inputs[0]
        batch = [1] if model.max_batch_size > 0 else []
        assert tensor["shape"] == batch + [d if d > 0 else 1 for d in first.dims]
        assert tensor["datatype"] == first.data_type
        assert len(tensor["data"]) == math.prod(tensor["shape"])


def test_a_small_body_goes_inline_and_a_large_one_is_generated(renders: Callable[[str], Rendered]) -> None:
    _, outputs = renders("large-inputs")
    assert shlex.split(outputs["models"]["echo"]["curl"])[-2] == "-d"
    for line in (outputs["models"]["detector"]["curl"], outputs["pipelines"]["detect"]["curl"]):
        assert shlex.split(line)[0] == "python3"
        assert len(line) < 1000, "the generated body is written as a run, not value by value"
