"""TensorFlow Serving: SavedModels over REST (8501) and gRPC (8500).

The server reads `models.config` (a ModelServerConfig), `monitoring.config` (Prometheus on the
REST port) and, when set, batching parameters and a platform config, all protobuf text. Each
pod serves one version, laid out as TF Serving expects: <base_path>/<version number>/.
"""

from __future__ import annotations

from typing import Annotated, Any, ClassVar, Literal

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

GRPC_PORT = 8500
REST_PORT = 8501
METRICS_PATH = "/monitoring/prometheus/metrics"
CONFIG_DIR = "/etc/tfserving"
MODELS_ROOT = "/models"
# The image runs as root; the server needs no privileges.
RUN_AS_USER = 1000

DEFAULT_RESOURCES = Resources(
    requests=ResourceList(cpu="1", memory="2Gi"),
    limits=ResourceList(cpu="4", memory="4Gi"),
)


class Batching(ConfigModel):
    """Server-side batching (TF Serving's BatchingParameters)."""

    max_batch_size: Annotated[int, Field(ge=1, le=100_000)] = Field(
        default=32, description="The largest batch (max_batch_size)."
    )
    batch_timeout_micros: Annotated[int, Field(ge=0, le=60_000_000)] = Field(
        default=1000, description="How long a batch waits to fill, in microseconds (batch_timeout_micros)."
    )
    max_enqueued_batches: Annotated[int, Field(ge=1, le=1_000_000)] = Field(
        default=100, description="Batches queued at most (max_enqueued_batches)."
    )
    num_batch_threads: Annotated[int, Field(ge=1, le=1024)] = Field(
        default=4, description="Threads processing batches (num_batch_threads)."
    )
    pad_variable_length_inputs: bool = Field(
        default=False, description="Pad inputs of different lengths to batch them (pad_variable_length_inputs)."
    )

    def parameters(self) -> dict[str, Any]:
        """BatchingParameters wraps its numbers in google.protobuf.Int64Value."""
        return {
            "max_batch_size": {"value": self.max_batch_size},
            "batch_timeout_micros": {"value": self.batch_timeout_micros},
            "max_enqueued_batches": {"value": self.max_enqueued_batches},
            "num_batch_threads": {"value": self.num_batch_threads},
            "pad_variable_length_inputs": self.pad_variable_length_inputs,
        }


class TFServingModel(ModelSpecBase):
    SERVER_PORTS: ClassVar[dict[str, int]] = {"http": REST_PORT, "grpc": GRPC_PORT}
    INFERENCE_PATH: ClassVar[str] = "/v1/models/{name}:predict"  # TF Serving's REST predict API
    PAYLOAD_PROTOCOL: ClassVar[PayloadProtocol] = "tfserving"

    runtime: Literal["tfserving"] = Field(description="TF Serving: a SavedModel; REST 8501, gRPC 8500.")
    batching: Batching | None = Field(default=None, description="Turns server-side batching on.")
    platform_config: str | None = Field(
        default=None, description="A PlatformConfigMap in protobuf text, passed to --platform_config_file as is."
    )

    @model_validator(mode="after")
    def _numbered_versions(self) -> TFServingModel:
        problems = self.unnumbered_versions("TF Serving")
        if self.batching is not None and self.platform_config is not None:
            # server.cc reads --enable_batching and --batching_parameters_file only without a platform config.
            problems.append(
                (
                    "batching",
                    "TF Serving ignores batching settings when a platformConfig is given: "
                    "put batching_parameters in the platform config instead",
                )
            )
        if problems:
            raise config_problems(problems)
        return self

    @property
    def base_path(self) -> str:
        return f"{MODELS_ROOT}/{self.name}"

    def models_config(self, version: ModelVersion) -> dict[str, Any]:
        """The ModelServerConfig: this model, serving exactly the version this pod runs."""
        return {
            "model_config_list": {
                "config": [
                    {
                        "name": self.name,
                        "base_path": self.base_path,
                        "model_platform": "tensorflow",
                        "model_version_policy": {"specific": {"versions": [version.number]}},
                    }
                ]
            }
        }

    @staticmethod
    def monitoring_config() -> dict[str, Any]:
        return {"prometheus_config": {"enable": True, "path": METRICS_PATH}}

    def config_files(self, version: ModelVersion) -> dict[str, str]:
        files = {
            "models.config": pbtxt.dumps(self.models_config(version)),
            "monitoring.config": pbtxt.dumps(self.monitoring_config()),
        }
        if self.batching is not None:
            files["batching.config"] = pbtxt.dumps(self.batching.parameters())
        if self.platform_config is not None:
            files["platform.config"] = self.platform_config.rstrip("\n") + "\n"
        return files

    def server_args(self, files: dict[str, str]) -> list[str]:
        args = [
            f"--port={GRPC_PORT}",
            f"--rest_api_port={REST_PORT}",
            f"--model_config_file={CONFIG_DIR}/models.config",
            f"--monitoring_config_file={CONFIG_DIR}/monitoring.config",
        ]
        if "batching.config" in files:
            args += ["--enable_batching=true", f"--batching_parameters_file={CONFIG_DIR}/batching.config"]
        if "platform.config" in files:
            args.append(f"--platform_config_file={CONFIG_DIR}/platform.config")
        return args

    def plan(self, version: ModelVersion, gpu_nodes: GpuNodes) -> ServerPlan:
        files = self.config_files(version)
        uses_gpu = self.gpu.mode != "none"
        # The version's metadata answers 200 only once that version is loaded and servable
        # (404 while loading or after a failed load); the model's status answers 200 throughout.
        loaded = f"/v1/models/{self.name}/versions/{version.number}/metadata"
        server = ServerContainer(
            image=pins.TFSERVING_GPU_IMAGE if uses_gpu else pins.TFSERVING_IMAGE,
            resources=DEFAULT_RESOURCES,
            model_dir=f"{self.base_path}/{version.number}",
            # The image's entrypoint adds --model_name and --model_base_path for a single model;
            # start the server itself, with the config file, so the arguments say what runs.
            command=["tensorflow_model_server"],
            args=self.server_args(files),
            # Without it TensorFlow takes all GPU memory up front, past any vGPU or shared budget.
            env={"TF_FORCE_GPU_ALLOW_GROWTH": "true"} if uses_gpu else {},
            config_mounts=[config_mount(CONFIG_DIR)],
            probes=Probes.ready_after_start(
                http_probe(loaded, REST_PORT, period=10, failures=3),
                http_probe(f"/v1/models/{self.name}", REST_PORT, period=10, failures=3),
                startup_period=5,
                startup_failures=120,
            ),
        )
        container = model_server_container(self, version, server)
        return ServerPlan(
            container=container,
            config_files=files,
            http_port=REST_PORT,
            metrics=MetricsEndpoint(REST_PORT, METRICS_PATH),
            run_as_user=RUN_AS_USER,
        )

    def example_request(self) -> ExampleRequest:
        return ExampleRequest(path=self.inference_path, body={"instances": [[1.0, 2.0, 5.0]]})
