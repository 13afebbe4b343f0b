"""NVIDIA Triton Inference Server: ONNX, TensorRT and TorchScript models.

Triton reads a model repository, <repo>/<model>/config.pbtxt beside <repo>/<model>/<version>/
model.<ext>. The config.pbtxt (a ModelConfig in protobuf text) is generated from typed settings,
or supplied whole by the user and checked with Triton's own ModelConfig message. Auto-completion
of configs is off (strict model config), so what is reviewed is what runs. (Triton's TensorFlow
backend is deprecated since 25.03: serve SavedModels with the tfserving runtime.)
"""

from __future__ import annotations

import functools
import importlib.util
from pathlib import Path
from typing import Annotated, Any, ClassVar, Literal

from google.protobuf import text_format
from pydantic import Field, model_validator

from inference_platform import pins
from inference_platform.config.base import ConfigModel, config_problems
from inference_platform.platform.gpu_nodes import GpuNodes
from inference_platform.serving.analysis_spec import PayloadProtocol
from inference_platform.serving.model_spec import ModelSpecBase, ModelVersion
from inference_platform.serving.resources import ResourceList, Resources
from inference_platform.serving.runtimes import pbtxt
from inference_platform.serving.runtimes.base import (
    Probes,
    ServerContainer,
    config_mount,
    http_probe,
    model_server_container,
)
from inference_platform.serving.server_plan import ExampleRequest, MetricsEndpoint, ServerPlan

HTTP_PORT = 8000
GRPC_PORT = 8001
METRICS_PORT = 8002
METRICS_PATH = "/metrics"
REPOSITORY = "/models"
# The NGC image's default user is root; it ships a triton-server user with this id.
RUN_AS_USER = 1000

PLATFORMS = {"onnx": "onnxruntime_onnx", "tensorrt": "tensorrt_plan", "pytorch": "pytorch_libtorch"}
# The file Triton looks for in each version directory.
MODEL_FILES = {"onnx": "model.onnx", "tensorrt": "model.plan", "pytorch": "model.pt"}
DataType = Literal[
    "BOOL",
    "UINT8",
    "UINT16",
    "UINT32",
    "UINT64",
    "INT8",
    "INT16",
    "INT32",
    "INT64",
    "FP16",
    "FP32",
    "FP64",
    "STRING",
    "BF16",
]

# The settings a supplied config.pbtxt replaces, by field name and as written in config.
TYPED_CONFIG = {
    "max_batch_size": "maxBatchSize",
    "inputs": "inputs",
    "outputs": "outputs",
    "dynamic_batching": "dynamicBatching",
    "instance_groups": "instanceGroups",
}
DEFAULT_RESOURCES = Resources(
    requests=ResourceList(cpu="1", memory="2Gi"),
    limits=ResourceList(cpu="4", memory="8Gi"),
)


class Tensor(ConfigModel):
    name: Annotated[str, Field(min_length=1)] = Field(description="The tensor's name in the model.")
    data_type: DataType = Field(description="FP32, INT64, STRING, ... (Triton's TYPE_ without the prefix).")
    dims: Annotated[list[Annotated[int, Field(ge=-1)]], Field(min_length=1)] = Field(
        description="Shape without the batch dimension; -1 for a variable size."
    )

    def config(self) -> dict[str, Any]:
        return {"name": self.name, "data_type": pbtxt.Enum(f"TYPE_{self.data_type}"), "dims": self.dims}


class DynamicBatching(ConfigModel):
    preferred_batch_size: list[Annotated[int, Field(ge=1)]] = Field(
        default_factory=list, description="Batch sizes the batcher aims for."
    )
    max_queue_delay_microseconds: Annotated[int, Field(ge=0)] = Field(
        default=0, description="How long a request may wait for a batch, in microseconds."
    )


class InstanceGroup(ConfigModel):
    count: Annotated[int, Field(ge=1, le=64)] = Field(default=1, description="Instances in the group.")
    kind: Literal["cpu", "gpu"] | None = Field(default=None, description="gpu when the model has a GPU, else cpu.")


# Tensors a generated config needs (an empty list is refused), and a supplied configPbtxt replaces.
REQUIRED_WITHOUT_CONFIG_PBTXT = "Required without configPbtxt"


class TritonModel(ModelSpecBase):
    SERVER_PORTS: ClassVar[dict[str, int]] = {"http": HTTP_PORT, "grpc": GRPC_PORT, "http-metrics": METRICS_PORT}
    INFERENCE_PATH: ClassVar[str] = "/v2/models/{name}/infer"  # Open Inference Protocol v2
    PAYLOAD_PROTOCOL: ClassVar[PayloadProtocol] = "open-inference-v2"

    runtime: Literal["triton"] = Field(
        description="Triton: model.onnx, model.plan or model.pt; HTTP 8000, gRPC 8001, metrics 8002."
    )
    format: Literal["onnx", "tensorrt", "pytorch"] = Field(
        description="Picks the backend and the file name in each version directory (model.onnx, ...)."
    )
    max_batch_size: Annotated[int, Field(ge=0, le=100_000)] = Field(
        default=0, description="The model's max_batch_size (0: the model does not batch)."
    )
    inputs: list[Tensor] = Field(
        default_factory=list,
        description=f"{REQUIRED_WITHOUT_CONFIG_PBTXT}: the model's inputs (name, dataType like FP32, dims), "
        "at least one, from which its config is generated.",
    )
    outputs: list[Tensor] = Field(
        default_factory=list,
        description=f"{REQUIRED_WITHOUT_CONFIG_PBTXT}: the model's outputs, at least one, shaped as inputs.",
    )
    dynamic_batching: DynamicBatching | None = Field(default=None, description="Turns Triton's dynamic batcher on.")
    instance_groups: list[InstanceGroup] = Field(
        default_factory=list, description="Model instances and where they run (instance_group)."
    )
    config_pbtxt: str | None = Field(
        default=None, description="A whole config.pbtxt instead of the settings above; checked against ModelConfig."
    )

    @model_validator(mode="after")
    def _config(self) -> TritonModel:
        problems = self.unnumbered_versions("Triton")
        if self.config_pbtxt is not None:
            problems += [
                (alias, "set either configPbtxt or this, not both")
                for field, alias in TYPED_CONFIG.items()
                if field in self.model_fields_set
            ]
            problems += [("configPbtxt", message) for message in self._check_supplied_config()]
        else:
            problems += [
                (key, "a strict model config needs at least one; list the model's tensors")
                for key, tensors in (("inputs", self.inputs), ("outputs", self.outputs))
                if not tensors
            ]
            problems += self._batching_and_instance_problems()
        if problems:
            raise config_problems(problems)
        return self

    def _batching_and_instance_problems(self) -> list[tuple[str, str]]:
        problems = []
        batching = self.dynamic_batching
        if batching is not None and self.max_batch_size == 0:
            problems.append(("dynamicBatching", "needs maxBatchSize above 0: a model without a batch dimension"))
        elif batching is not None:
            maximum = self.max_batch_size
            problems += [
                (f"dynamicBatching.preferredBatchSize[{i}]", f"{size} is more than maxBatchSize ({maximum})")
                for i, size in enumerate(batching.preferred_batch_size)
                if size > self.max_batch_size
            ]
        if self.gpu.mode == "none":
            problems += [
                (f"instanceGroups[{i}].kind", "gpu instances need a GPU: set the model's gpu, or kind cpu")
                for i, group in enumerate(self.instance_groups)
                if group.kind == "gpu"
            ]
        return problems

    def _check_supplied_config(self) -> list[str]:
        message = model_config_message()
        try:
            text_format.Parse(self.config_pbtxt or "", message)
        except text_format.ParseError as error:
            return [f"not a valid Triton ModelConfig: {error}"]
        problems = []
        if not message.platform and not message.backend:
            problems.append("it names no platform or backend, which a strict model config needs")
        if not message.input or not message.output:
            problems.append("it lists no input or no output tensors, which a strict model config needs")
        if message.name and message.name != self.name:
            problems.append(f"its name is {message.name!r}; Triton requires the model's name, {self.name!r}")
        if message.platform and message.platform != PLATFORMS[self.format]:
            problems.append(
                f"its platform is {message.platform!r}, but format {self.format} means {PLATFORMS[self.format]!r}"
            )
        return problems

    def triton_config(self, version: ModelVersion) -> dict[str, Any]:
        default_kind = "gpu" if self.gpu.mode != "none" else "cpu"
        groups = self.instance_groups or [InstanceGroup()]
        config: dict[str, Any] = {
            "name": self.name,
            "platform": PLATFORMS[self.format],
            "max_batch_size": self.max_batch_size,
            "version_policy": {"specific": {"versions": [version.number]}},
            "input": [tensor.config() for tensor in self.inputs],
            "output": [tensor.config() for tensor in self.outputs],
            "instance_group": [
                {"count": group.count, "kind": pbtxt.Enum(f"KIND_{(group.kind or default_kind).upper()}")}
                for group in groups
            ],
        }
        if self.dynamic_batching is not None:
            config["dynamic_batching"] = {
                "preferred_batch_size": self.dynamic_batching.preferred_batch_size,
                "max_queue_delay_microseconds": self.dynamic_batching.max_queue_delay_microseconds,
            }
        return config

    def config_text(self, version: ModelVersion) -> str:
        if self.config_pbtxt is not None:
            return self.config_pbtxt.rstrip("\n") + "\n"
        return pbtxt.dumps(self.triton_config(version))

    def plan(self, version: ModelVersion, gpu_nodes: GpuNodes) -> ServerPlan:
        model_dir = f"{REPOSITORY}/{self.name}"
        uses_gpu = self.gpu.mode != "none"
        server = ServerContainer(
            image=pins.TRITON_IMAGE,
            resources=DEFAULT_RESOURCES,
            model_dir=f"{model_dir}/{version.number}",
            command=["tritonserver"],
            args=server_args(REPOSITORY, uses_gpu=uses_gpu),
            config_mounts=[config_mount(f"{model_dir}/config.pbtxt", "config.pbtxt")],
            probes=health_probes(startup_period=5, startup_failures=120),
        )
        container = model_server_container(self, version, server)
        return ServerPlan(
            container=container,
            config_files={"config.pbtxt": self.config_text(version)},
            http_port=HTTP_PORT,
            metrics=MetricsEndpoint(METRICS_PORT, METRICS_PATH),
            run_as_user=RUN_AS_USER,
        )

    def _first_input(self) -> tuple[str, str, list[int], bool] | None:
        """(name, data type, dims, batched) of the first input, from the settings or the supplied config."""
        if self.config_pbtxt is None:
            if not self.inputs:
                return None
            tensor = self.inputs[0]
            return tensor.name, tensor.data_type, tensor.dims, self.max_batch_size > 0
        message = text_format.Parse(self.config_pbtxt, model_config_message())
        if not message.input:
            return None
        first = message.input[0]
        data_type = message.DESCRIPTOR.fields_by_name["input"].message_type.fields_by_name["data_type"]
        data_type_name = data_type.enum_type.values_by_number[first.data_type].name.removeprefix("TYPE_")
        return first.name, data_type_name, list(first.dims), message.max_batch_size > 0

    def example_request(self) -> ExampleRequest:
        """An Open Inference Protocol request shaped after the first input (zeros)."""
        path = self.inference_path
        first = self._first_input()
        if first is None:
            return ExampleRequest(path=path, body={"inputs": []})
        name, data_type, dims, batched = first
        shape = ([1] if batched else []) + [d if d > 0 else 1 for d in dims]
        size = 1
        for dim in shape:
            size *= dim
        # Every value: the curl line generates a large body rather than printing it (serving/curl.py).
        data: Any = [""] * size if data_type == "STRING" else [0] * size
        return ExampleRequest(
            path=path, body={"inputs": [{"name": name, "shape": shape, "datatype": data_type, "data": data}]}
        )


def server_args(repository: str, *, uses_gpu: bool) -> list[str]:
    """tritonserver's flags: the repository, loaded whole at start, strict model config, the three ports."""
    return [
        f"--model-repository={repository}",
        "--model-control-mode=none",
        # Strict model config: the successor of the deprecated --strict-model-config=true.
        "--disable-auto-complete-config",
        f"--http-port={HTTP_PORT}",
        f"--grpc-port={GRPC_PORT}",
        f"--metrics-port={METRICS_PORT}",
        f"--allow-gpu-metrics={'true' if uses_gpu else 'false'}",
    ]


def health_probes(*, startup_period: int, startup_failures: int) -> Probes:
    """Strict readiness (Triton's default): ready only when every model in the repository loaded."""
    return Probes.ready_after_start(
        http_probe("/v2/health/ready", HTTP_PORT, period=10, failures=3),
        http_probe("/v2/health/live", HTTP_PORT, period=10, failures=3),
        startup_period=startup_period,
        startup_failures=startup_failures,
    )


@functools.cache
def _model_config_pb2() -> Any:
    """Triton's own model_config_pb2, loaded from the tritonclient package by file.

    Importing it the usual way runs tritonclient.grpc's __init__, which takes most of a second
    and registers Triton's gRPC service messages (package `inference`), whose names clash with
    other Open Inference Protocol clients (MLServer's) in the same process. ModelConfig itself
    depends on nothing but protobuf.
    """
    package = importlib.util.find_spec("tritonclient")
    origin = package.origin if package is not None else None
    path = Path(origin or ".").parent / "grpc" / "model_config_pb2.py"
    spec = importlib.util.spec_from_file_location("_triton_model_config_pb2", path)
    if origin is None or spec is None or spec.loader is None:  # pragma: no cover - a pinned requirement
        raise ModuleNotFoundError("tritonclient is needed to check a supplied config.pbtxt")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def model_config_message() -> Any:
    """An empty Triton ModelConfig message."""
    return _model_config_pb2().ModelConfig()
