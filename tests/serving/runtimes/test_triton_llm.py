"""Triton's TensorRT-LLM backend reads what we generate: every config.pbtxt parsed with Triton's own
ModelConfig message is the backend's v0.19.0 template for that model, filled with our values by
upstream's own fill_template.py (../shared/tensorrtllm_backend, read here, never at run time); every
mandatory parameter of the backend's model_config.md is filled. No engine runs here.
"""

from __future__ import annotations

import contextlib
import functools
import importlib.util
import io
import re
from pathlib import Path
from typing import Any

import pytest
from google.protobuf import text_format

from inference_platform.cli.main import main
from inference_platform.platform.gpu_nodes import GpuNodes
from inference_platform.serving.runtimes.triton import model_config_message
from inference_platform.serving.runtimes.triton_llm import CONFIG_DIR, REPOSITORY, TritonLLMModel
from inference_platform.serving.server_plan import ServerPlan
from tests.conftest import ROOT

BACKEND = ROOT.parent / "shared" / "tensorrtllm_backend" / "v0.19.0"
TEMPLATES = BACKEND / "inflight_batcher_llm"
VERSIONS = [{"name": "v1", "modelUri": "pvc://models/mistral-7b-trtllm", "weight": 100}]
SETTINGS: dict[str, dict[str, Any]] = {
    "defaults": {},
    "bls, no streaming, every setting": {
        "pipeline": "bls",
        "decoupled": False,
        "tokenizer": "hf/tokenizer",
        "maxBatchSize": 256,
        "maxQueueDelayMicroseconds": 100,
        "maxQueueSize": 512,
        "kvCacheFreeGpuMemFraction": 0.5,
        "batchingStrategy": "V1",
        "excludeInputInOutput": False,
        "logitsDatatype": "BF16",
        "preprocessingInstances": 2,
        "postprocessingInstances": 3,
        "blsInstances": 4,
    },
}


def model(**settings: Any) -> TritonLLMModel:
    base = {"name": "mistral", "runtime": "triton-llm", "engine": "engine/1-gpu", "gpu": "exclusive"}
    return TritonLLMModel.model_validate(base | {"versions": VERSIONS} | settings)


@functools.cache
def plan_of(case: str) -> tuple[TritonLLMModel, ServerPlan]:
    spec = model(**SETTINGS[case])
    return spec, spec.plan(spec.versions[0], GpuNodes())


def parse(text: str) -> Any:
    return text_format.Parse(text, model_config_message())


@pytest.fixture(scope="module")
def upstream() -> Path:
    if not TEMPLATES.is_dir():
        pytest.skip(f"the TensorRT-LLM backend's templates are not in {TEMPLATES} (../shared beside the checkout)")
    return BACKEND


def filled(backend: Path, model_name: str, values: dict[str, str]) -> str:
    """The template filled by upstream's tools/fill_template.py, as its users run it."""
    spec = importlib.util.spec_from_file_location("fill_template", backend / "fill_template.py")
    assert spec is not None
    assert spec.loader is not None
    tool = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(tool)
    substitutions = ",".join(f"{key}:{value.replace(',', chr(92) + ',')}" for key, value in values.items())
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        tool.main(str(TEMPLATES / model_name / "config.pbtxt"), substitutions, False)
    return out.getvalue()


def mandatory(backend: Path) -> dict[str, list[str]]:
    """Each model's mandatory parameters, from the tables of docs/model_config.md."""
    found: dict[str, list[str]] = {}
    for section in re.split(r"^### ", (backend / "model_config.md").read_text(), flags=re.M)[1:]:
        heading, _, body = section.partition("\n")
        if "*Mandatory parameters*" not in body:
            continue
        table = body.split("*Mandatory parameters*", 1)[1].split("*Optional parameters*", 1)[0]
        found[heading.removesuffix(" model")] = re.findall(r"^\| `(\w+)` \|", table, flags=re.M)
    return found


@pytest.mark.parametrize("case", SETTINGS)
def test_every_config_is_the_backends_template_filled_with_our_values(upstream: Path, case: str) -> None:
    spec, plan = plan_of(case)
    assert set(plan.config_files) == {f"{name}.pbtxt" for name in spec.repository_models}
    for name, values in spec.fill_values().items():
        ours = parse(plan.config_files[f"{name}.pbtxt"])
        theirs = parse(filled(upstream, name, values))  # fill_template asserts each key is the template's
        assert ours == theirs, (
            f"{name}:\n{text_format.MessageToString(ours)}\n!=\n{text_format.MessageToString(theirs)}"
        )
        assert set(ours.parameters) == set(theirs.parameters)


@pytest.mark.parametrize("case", SETTINGS)
def test_every_mandatory_parameter_is_filled(upstream: Path, case: str) -> None:
    spec, _ = plan_of(case)
    required = mandatory(upstream)
    for name, values in spec.fill_values().items():
        assert required[name], name
        assert [key for key in required[name] if key not in values] == [], name
        text = filled(upstream, name, values)
        assert [key for key in required[name] if f"${{{key}}}" in text] == [], name


def test_the_settings_reach_the_configs() -> None:
    spec, plan = plan_of("bls, no streaming, every setting")
    configs = {name: parse(plan.config_files[f"{name}.pbtxt"]) for name in spec.repository_models}
    engine = configs["tensorrt_llm"]
    assert engine.backend == "tensorrtllm"
    assert engine.parameters["gpt_model_path"].string_value == "/mnt/models/engine/1-gpu"
    assert engine.parameters["gpt_model_type"].string_value == "V1"
    assert engine.parameters["kv_cache_free_gpu_mem_fraction"].string_value == "0.5"
    assert not engine.model_transaction_policy.decoupled
    assert not configs["tensorrt_llm_bls"].model_transaction_policy.decoupled
    assert configs["preprocessing"].parameters["tokenizer_dir"].string_value == "/mnt/models/hf/tokenizer"
    assert {name: config.max_batch_size for name, config in configs.items()} == dict.fromkeys(configs, 256)
    assert [c.instance_group[0].count for c in (configs["preprocessing"], configs["postprocessing"])] == [2, 3]
    assert "ensemble" not in configs
    # An optional parameter left unset keeps the template's placeholder, which the backend reads as unset.
    default_engine = parse(plan_of("defaults")[1].config_files["tensorrt_llm.pbtxt"])
    assert (
        default_engine.parameters["kv_cache_free_gpu_mem_fraction"].string_value == "${kv_cache_free_gpu_mem_fraction}"
    )
    assert default_engine.model_transaction_policy.decoupled


def test_the_container_assembles_the_repository_and_serves_it() -> None:
    spec, plan = plan_of("defaults")
    container = plan.container
    command = container["command"]
    assert command[:2] == ["/bin/sh", "-c"]
    assert command[2].endswith('exec tritonserver "$@"\n')
    assert f"--model-repository={REPOSITORY}" in container["args"]
    assert {"name": "server-config", "mountPath": CONFIG_DIR, "readOnly": True} in container["volumeMounts"]
    script = command[2]
    for name in spec.repository_models:
        assert f"cp {CONFIG_DIR}/{name}.pbtxt {REPOSITORY}/{name}/config.pbtxt" in script
    # The Python models' code is the image's own; the engine's and the ensemble's version directories are empty.
    assert "cp -R /app/all_models/inflight_batcher_llm/preprocessing/1 " in script
    assert f"mkdir -p {REPOSITORY}/ensemble/1" in script
    assert spec.inference_path == "/v2/models/ensemble/generate"
    assert plan_of("bls, no streaming, every setting")[0].inference_path == "/v2/models/tensorrt_llm_bls/generate"
    assert plan.http_port == 8000
    assert plan.metrics is not None
    assert (plan.metrics.port, plan.metrics.path) == (8002, "/metrics")
    assert container["startupProbe"]["httpGet"] == {"path": "/v2/health/ready", "port": 8000}


BAD_STACK = """\
config:
  inference-platform:domain: models.example.com
  inference-platform:models:
    - name: mistral
      runtime: triton-llm
      maxBatchSize: 0
      tokenizer: ../tokenizer
      blsInstances: 2
      versions:
        - name: v1
          modelUri: pvc://models/mistral-7b-trtllm
          weight: 100
"""


def test_a_wrong_model_is_reported_whole_at_its_lines(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """No engine, a batch size out of range, a tokenizer outside the files, BLS instances without BLS
    and no GPU: every problem at once, each at its line with the model's name, and nothing rendered."""
    path = tmp_path / "Pulumi.bad.yaml"
    path.write_text(BAD_STACK, encoding="utf-8")
    out = tmp_path / "out"

    assert main(["render", "--stack", "bad", "--config", str(path), "--out", str(out), "--no-charts"]) == 2

    lines = capsys.readouterr().err.splitlines()
    assert lines == [
        "invalid stack config (5 problems):",
        f"  {path}:8:7: models[0] (mistral).blsInstances: only with pipeline bls",
        f"  {path}:4:7: models[0] (mistral).engine: required, but not set",
        # gpu is not set: the model's own line.
        f"  {path}:4:7: models[0] (mistral).gpu: TensorRT-LLM engines run on NVIDIA GPUs: set gpu to exclusive or vgpu",
        f"  {path}:6:7: models[0] (mistral).maxBatchSize: must be at least 1 (got 0)",
        f"  {path}:7:7: models[0] (mistral).tokenizer: must stay inside the model's files: no '..'",
    ]
    assert not out.exists()


def test_generate_stream_is_served_decoupled_and_routed_like_generate(render_config: Any) -> None:
    """Streaming needs the engine's model decoupled (the ensemble over it streams with it); the
    gateway's routes (by host and by path) forward every path of the model, so generate_stream
    reaches Triton as generate does."""
    spec, plan = plan_of("defaults")
    assert parse(plan.config_files["tensorrt_llm.pbtxt"]).model_transaction_policy.decoupled
    _, unstreamed = plan_of("bls, no streaming, every setting")
    assert not parse(unstreamed.config_files["tensorrt_llm.pbtxt"]).model_transaction_policy.decoupled
    config = {
        "inference-platform:domain": "models.example.com",
        "inference-platform:models": [spec.model_dump(mode="json", by_alias=True, exclude_unset=True)],
    }
    (service,) = [
        r.inputs
        for r in render_config(config).manifests
        if r.inputs["kind"] == "VirtualService" and r.inputs["metadata"]["name"] == "mistral"
    ]
    routes = {route["name"]: route for route in service["spec"]["http"]}
    by_host, by_path = routes["by-host"], routes["by-path"]
    assert by_host["match"] == [{"authority": {"prefix": "mistral.models.example.com"}}]
    assert "uri" not in by_host["match"][0]  # every path of the host
    # /models/mistral/v2/models/ensemble/generate_stream reaches Triton as /v2/models/ensemble/generate_stream.
    assert by_path["match"] == [{"uri": {"prefix": "/models/mistral/"}}]
    assert by_path["rewrite"] == {"uri": "/"}
    for route in (by_host, by_path):
        assert [d["destination"]["host"] for d in route["route"]] == ["mistral.service.svc.cluster.local"]
