"""Triton with the TensorRT-LLM backend: a prebuilt TensorRT-LLM engine behind Triton's generate API.

The model repository is the backend's inflight_batcher_llm layout: `preprocessing` (tokenizer,
Python), `tensorrt_llm` (the engine, the C++ backend `tensorrtllm`), `postprocessing`
(detokenizer, Python) and either the `ensemble` that chains them or the Python BLS model
`tensorrt_llm_bls` that calls them. Each config.pbtxt is a Triton ModelConfig built here as data,
with the tensors and parameters of the backend's v0.19.0 templates (`triton_llm_models.py`) and
the values from typed settings; optional parameters left unset keep the templates' unfilled
`${...}` form, which the backend reads as unset.

The Python models' code (`1/model.py` and the BLS's `1/lib/`) is not ours: the Triton TensorRT-LLM
image ships the backend's model directories at /app/all_models/inflight_batcher_llm (Triton's own
CI and TensorRT-LLM's docs copy them from there). The container's start assembles the
repository in the scratch volume from those directories and the generated configs (mounted from
the ConfigMap), then execs tritonserver. The engine and the tokenizer are read where the model's
files are mounted.
"""

from __future__ import annotations

import shlex
from pathlib import PurePosixPath
from typing import Annotated, Any, ClassVar, Literal

from pydantic import Field, model_validator

from inference_platform import pins
from inference_platform.config.base import Matches, config_problems
from inference_platform.config.partial import parsed
from inference_platform.platform.gpu_nodes import GpuNodes
from inference_platform.serving.analysis_spec import PayloadProtocol
from inference_platform.serving.model_spec import ModelSpecBase, ModelVersion
from inference_platform.serving.runtimes import pbtxt
from inference_platform.serving.runtimes import triton_llm_models as models
from inference_platform.serving.runtimes.base import SCRATCH_PATH, ServerContainer, config_mount, model_server_container
from inference_platform.serving.runtimes.llm_engine import CACHE_ENV, DEFAULT_RESOURCES, MODEL_DIR, SHM_VOLUME
from inference_platform.serving.runtimes.triton import (
    GRPC_PORT,
    HTTP_PORT,
    METRICS_PATH,
    METRICS_PORT,
    RUN_AS_USER,
    health_probes,
    server_args,
)
from inference_platform.serving.server_plan import ExampleRequest, MetricsEndpoint, ServerPlan

# Where the image keeps the backend's model directories (their 1/model.py), and where the
# repository is assembled and the configs are mounted.
IMAGE_MODELS = "/app/all_models/inflight_batcher_llm"
REPOSITORY = f"{SCRATCH_PATH}/triton-repository"
CONFIG_DIR = "/etc/triton-llm"
GENERATE_PATH = "/v2/models/{model}/generate"
PYTHON_MODELS = ("preprocessing", "postprocessing")
# The encoder's input type for text models (mllama would need BF16; encoder models are not offered).
ENCODER_FEATURES_TYPE = "TYPE_FP16"

RelativePath = Annotated[
    str, Field(min_length=1), Matches(r"^[^/]", "a path inside the model's directory, not starting with /")
]


class TritonLLMModel(ModelSpecBase):
    SERVER_PORTS: ClassVar[dict[str, int]] = {"http": HTTP_PORT, "grpc": GRPC_PORT, "http-metrics": METRICS_PORT}
    INFERENCE_PATH: ClassVar[str] = GENERATE_PATH.format(model="ensemble")  # Triton's generate extension
    PAYLOAD_PROTOCOL: ClassVar[PayloadProtocol] = "json"
    # The backend's gauge family of requests by state; `waiting` are queued, not yet scheduled
    # (inflight_batcher_llm/src/custom_metrics_reporter; what the inference extension's EPP reads).
    QUEUE_METRIC: ClassVar[str | None] = 'nv_trt_llm_request_metrics{request_type="waiting"}'

    runtime: Literal["triton-llm"] = Field(
        description="Triton with the TensorRT-LLM backend: a prebuilt engine, generate and generate_stream; "
        "HTTP 8000, gRPC 8001, metrics 8002. Needs an NVIDIA GPU."
    )
    engine: RelativePath = Field(
        description="The TensorRT-LLM engine's directory inside the model's files (built with the TensorRT-LLM "
        "of the pinned image, 0.19.0)."
    )
    tokenizer: RelativePath = Field(
        default=".", description="The Hugging Face tokenizer's directory inside the model's files."
    )
    pipeline: Literal["ensemble", "bls"] = Field(
        default="ensemble",
        description="ensemble: Triton chains preprocessing, tensorrt_llm and postprocessing; bls: the Python "
        "model tensorrt_llm_bls calls them. The generate path names it.",
    )
    max_batch_size: Annotated[int, Field(ge=1, le=4096)] = Field(
        default=64, description="Every model's max_batch_size (triton_max_batch_size); at most the engine's."
    )
    max_queue_delay_microseconds: Annotated[int, Field(ge=0, le=10_000_000)] = Field(
        default=0, description="How long a request may wait to be batched with others, in microseconds."
    )
    max_queue_size: Annotated[int, Field(ge=0)] = Field(
        default=0, description="Requests queued before Triton rejects new ones (0: no limit)."
    )
    kv_cache_free_gpu_mem_fraction: Annotated[float, Field(gt=0, le=1)] | None = Field(
        default=None,
        description="Share of the GPU memory left after loading the engine that the KV cache takes; the "
        "backend's 0.9 when unset.",
    )
    batching_strategy: Literal["inflight_fused_batching", "V1"] = Field(
        default="inflight_fused_batching", description="In-flight batching, or V1 (static batches)."
    )
    decoupled: bool = Field(
        default=True,
        description="Decoupled mode, which streaming needs: generate_stream answers token by token. Off, "
        "generate only.",
    )
    exclude_input_in_output: bool = Field(default=True, description="Answer with the completion alone, no prompt.")
    logits_datatype: Literal["FP32", "FP16", "BF16"] = Field(
        default="FP32", description="The data type of the context and generation logits outputs."
    )
    preprocessing_instances: Annotated[int, Field(ge=1, le=64)] = Field(
        default=1, description="Instances of the tokenizer model."
    )
    postprocessing_instances: Annotated[int, Field(ge=1, le=64)] = Field(
        default=1, description="Instances of the detokenizer model."
    )
    bls_instances: Annotated[int, Field(ge=1, le=64)] = Field(
        default=1, description="Instances of the BLS model (pipeline bls), each serving one request at a time."
    )
    shm_size: Annotated[str, Matches(r"^[0-9]+(Mi|Gi)$", "a whole number of Mi or Gi, such as 2Gi")] = Field(
        default="2Gi", description="Shared memory, through which Triton's Python models exchange tensors."
    )

    # Each check on its own, reading only its settings: a setting that did not parse holds back only
    # the checks that read it (config/partial.py).
    @model_validator(mode="after")
    def _paths_inside_the_files(self) -> TritonLLMModel:
        problems = [
            (key, "must stay inside the model's files: no '..'")
            for key in ("engine", "tokenizer")
            if parsed(self, key) and ".." in PurePosixPath(getattr(self, key)).parts
        ]
        if problems:
            raise config_problems(problems)
        return self

    @model_validator(mode="after")
    def _one_nvidia_gpu(self) -> TritonLLMModel:
        if self.gpu.mode == "none":
            problem = ("gpu", "TensorRT-LLM engines run on NVIDIA GPUs: set gpu to exclusive or vgpu")
        elif self.gpu.mode == "shared" and self.kv_cache_free_gpu_mem_fraction is None:
            problem = (
                "kvCacheFreeGpuMemFraction",
                "with a shared GPU the KV cache would take 90 % of the device's free memory from its "
                "neighbours: set this model's share",
            )
        elif (self.gpu.device_count or 1) > 1:
            problem = (
                "gpu",
                "one GPU per pod: an engine built for several GPUs needs an MPI rank per GPU, which this "
                "runtime does not start",
            )
        else:
            return self
        raise config_problems([problem])

    @model_validator(mode="after")
    def _bls_settings(self) -> TritonLLMModel:
        if self.bls_instances != 1 and self.pipeline != "bls":
            raise config_problems([("blsInstances", "only with pipeline bls")])
        return self

    @property
    def entry_model(self) -> str:
        """The model requests name: the ensemble or the BLS model."""
        return "ensemble" if self.pipeline == "ensemble" else "tensorrt_llm_bls"

    @property
    def repository_models(self) -> tuple[str, ...]:
        return ("preprocessing", "tensorrt_llm", "postprocessing", self.entry_model)

    @property
    def inference_path(self) -> str:
        return GENERATE_PATH.format(model=self.entry_model)

    def fill_values(self) -> dict[str, dict[str, str]]:
        """Per model, the templates' placeholders this model fills and their values (the rest stay unset)."""
        batch = str(self.max_batch_size)
        decoupled = "true" if self.decoupled else "false"
        queue = {
            "max_queue_delay_microseconds": str(self.max_queue_delay_microseconds),
            "max_queue_size": str(self.max_queue_size),
        }
        tokenizer = str(PurePosixPath(MODEL_DIR) / self.tokenizer)
        logits = f"TYPE_{self.logits_datatype}"
        engine = {
            "triton_backend": "tensorrtllm",
            "triton_max_batch_size": batch,
            "decoupled_mode": decoupled,
            **queue,
            "engine_dir": str(PurePosixPath(MODEL_DIR) / self.engine),
            "batching_strategy": self.batching_strategy,
            "encoder_input_features_data_type": ENCODER_FEATURES_TYPE,
            "logits_datatype": logits,
            "exclude_input_in_output": "true" if self.exclude_input_in_output else "false",
            "tokenizer_dir": tokenizer,
        }
        if self.kv_cache_free_gpu_mem_fraction is not None:
            engine["kv_cache_free_gpu_mem_fraction"] = str(self.kv_cache_free_gpu_mem_fraction)
        values = {
            "preprocessing": {
                "triton_max_batch_size": batch,
                "tokenizer_dir": tokenizer,
                "preprocessing_instance_count": str(self.preprocessing_instances),
                **queue,
            },
            "tensorrt_llm": engine,
            "postprocessing": {
                "triton_max_batch_size": batch,
                "tokenizer_dir": tokenizer,
                "postprocessing_instance_count": str(self.postprocessing_instances),
            },
            "ensemble": {"triton_max_batch_size": batch, "logits_datatype": logits},
            "tensorrt_llm_bls": {
                "triton_max_batch_size": batch,
                "decoupled_mode": decoupled,
                "bls_instance_count": str(self.bls_instances),
                "logits_datatype": logits,
                "tensorrt_llm_model_name": "tensorrt_llm",
            },
        }
        return {model: values[model] for model in self.repository_models}

    def model_configs(self) -> dict[str, dict[str, Any]]:
        """Each repository model's ModelConfig as data (pbtxt.dumps writes it)."""
        values = self.fill_values()
        builders = {
            "preprocessing": _preprocessing,
            "tensorrt_llm": _tensorrt_llm,
            "postprocessing": _postprocessing,
            "ensemble": _ensemble,
            "tensorrt_llm_bls": _bls,
        }
        return {model: builders[model](values[model]) for model in self.repository_models}

    def startup_script(self) -> str:
        """Assemble the repository from the image's model directories and the mounted configs, then
        exec tritonserver with the container's arguments."""
        lines = ["set -eu", f"rm -rf {REPOSITORY}"]
        for model in self.repository_models:
            target = f"{REPOSITORY}/{model}"
            lines.append(f"mkdir -p {target}")
            if model in PYTHON_MODELS or model == "tensorrt_llm_bls":
                lines.append(f"cp -R {shlex.quote(f'{IMAGE_MODELS}/{model}/1')} {target}/1")
            else:
                lines.append(f"mkdir -p {target}/1")
            lines.append(f"cp {CONFIG_DIR}/{model}.pbtxt {target}/config.pbtxt")
        lines.append('exec tritonserver "$@"')
        return "\n".join(lines) + "\n"

    def plan(self, version: ModelVersion, gpu_nodes: GpuNodes) -> ServerPlan:
        server = ServerContainer(
            image=pins.TRITON_LLM_IMAGE,
            resources=DEFAULT_RESOURCES,
            model_dir=MODEL_DIR,
            command=["/bin/sh", "-c", self.startup_script(), "triton-llm"],
            args=server_args(REPOSITORY, uses_gpu=True),
            env=CACHE_ENV,
            config_mounts=[config_mount(CONFIG_DIR)],
            mounts=[{"name": SHM_VOLUME, "mountPath": "/dev/shm"}],
            # Deserialising a large engine and allocating its KV cache take minutes: half an hour.
            probes=health_probes(startup_period=10, startup_failures=180),
        )
        return ServerPlan(
            container=model_server_container(self, version, server),
            config_files={f"{model}.pbtxt": pbtxt.dumps(config) for model, config in self.model_configs().items()},
            http_port=HTTP_PORT,
            metrics=MetricsEndpoint(METRICS_PORT, METRICS_PATH),
            run_as_user=RUN_AS_USER,
            volumes=({"name": SHM_VOLUME, "emptyDir": {"medium": "Memory", "sizeLimit": self.shm_size}},),
        )

    def example_request(self) -> ExampleRequest:
        """Triton's generate extension: the entry model's inputs by name, as JSON."""
        return ExampleRequest(
            path=self.inference_path, body={"text_input": "The capital of France is", "max_tokens": 16}
        )


def _data_type(name: str, values: dict[str, str]) -> pbtxt.Enum:
    if name == models.LOGITS:
        return pbtxt.Enum(values["logits_datatype"])
    if name == models.ENCODER_FEATURES:
        return pbtxt.Enum(values["encoder_input_features_data_type"])
    return pbtxt.Enum(f"TYPE_{name}")


def _tensors(tensors: models.Tensors, values: dict[str, str]) -> list[dict[str, Any]]:
    out = []
    for name, data_type, dims, flags in tensors:
        tensor: dict[str, Any] = {"name": name, "data_type": _data_type(data_type, values), "dims": list(dims)}
        marks = flags.split()
        if "scalar" in marks:
            tensor["reshape"] = {"shape": []}
        if "optional" in marks:
            tensor["optional"] = True
        if "ragged" in marks:
            tensor["allow_ragged_batch"] = True
        out.append(tensor)
    return out


def _parameters(
    values: dict[str, str],
    names: tuple[str, ...],
    renamed: dict[str, str] | None = None,
    fixed: dict[str, str] | None = None,
) -> list[dict[str, Any]]:
    """The parameters map: each key's value, its placeholder's `${name}` where this model leaves it unset."""
    placeholders = {name: name for name in names} | (renamed or {})
    entries = {key: values.get(name, f"${{{name}}}") for key, name in placeholders.items()} | (fixed or {})
    return [{"key": key, "value": {"string_value": value}} for key, value in entries.items()]


def _cpu_instances(count: str) -> list[dict[str, Any]]:
    return [{"count": int(count), "kind": pbtxt.Enum("KIND_CPU")}]


def _queued_batching(values: dict[str, str]) -> dict[str, Any]:
    return {
        "preferred_batch_size": [int(values["triton_max_batch_size"])],
        "max_queue_delay_microseconds": int(values["max_queue_delay_microseconds"]),
        "default_queue_policy": {"max_queue_size": int(values["max_queue_size"])},
    }


def _preprocessing(values: dict[str, str]) -> dict[str, Any]:
    return {
        "name": "preprocessing",
        "backend": "python",
        "max_batch_size": int(values["triton_max_batch_size"]),
        "dynamic_batching": _queued_batching(values),
        "input": _tensors(models.PREPROCESSING_INPUTS, values),
        "output": _tensors(models.PREPROCESSING_OUTPUTS, values),
        "parameters": _parameters(values, models.PREPROCESSING_PARAMETERS, models.PREPROCESSING_RENAMED),
        "instance_group": _cpu_instances(values["preprocessing_instance_count"]),
    }


def _postprocessing(values: dict[str, str]) -> dict[str, Any]:
    return {
        "name": "postprocessing",
        "backend": "python",
        "max_batch_size": int(values["triton_max_batch_size"]),
        "dynamic_batching": {},
        "input": _tensors(models.POSTPROCESSING_INPUTS, values),
        "output": _tensors(models.POSTPROCESSING_OUTPUTS, values),
        "parameters": _parameters(values, models.POSTPROCESSING_PARAMETERS),
        "instance_group": _cpu_instances(values["postprocessing_instance_count"]),
    }


def _tensorrt_llm(values: dict[str, str]) -> dict[str, Any]:
    return {
        "name": "tensorrt_llm",
        "backend": values["triton_backend"],
        "max_batch_size": int(values["triton_max_batch_size"]),
        "model_transaction_policy": {"decoupled": values["decoupled_mode"] == "true"},
        "dynamic_batching": _queued_batching(values),
        "input": _tensors(models.TENSORRT_LLM_INPUTS, values),
        "output": _tensors(models.TENSORRT_LLM_OUTPUTS, values),
        # The backend places the engine on the GPUs itself: one instance, of kind CPU.
        "instance_group": _cpu_instances("1"),
        "parameters": _parameters(
            values, models.TENSORRT_LLM_PARAMETERS, models.TENSORRT_LLM_RENAMED, models.TENSORRT_LLM_FIXED
        ),
    }


def _bls(values: dict[str, str]) -> dict[str, Any]:
    return {
        "name": "tensorrt_llm_bls",
        "backend": "python",
        "max_batch_size": int(values["triton_max_batch_size"]),
        "model_transaction_policy": {"decoupled": values["decoupled_mode"] == "true"},
        "input": _tensors(models.TENSORRT_LLM_BLS_INPUTS, values),
        "output": _tensors(models.TENSORRT_LLM_BLS_OUTPUTS, values),
        "parameters": _parameters(values, models.BLS_PARAMETERS),
        "instance_group": _cpu_instances(values["bls_instance_count"]),
    }


def _ensemble(values: dict[str, str]) -> dict[str, Any]:
    return {
        "name": "ensemble",
        "platform": "ensemble",
        "max_batch_size": int(values["triton_max_batch_size"]),
        "input": _tensors(models.ENSEMBLE_INPUTS, values),
        "output": _tensors(models.ENSEMBLE_OUTPUTS, values),
        "ensemble_scheduling": {
            "step": [
                {
                    "model_name": step.model,
                    "model_version": -1,
                    "input_map": [{"key": key, "value": value} for key, value in step.inputs],
                    "output_map": [{"key": key, "value": value} for key, value in step.outputs],
                }
                for step in models.ENSEMBLE_STEPS
            ]
        },
    }
