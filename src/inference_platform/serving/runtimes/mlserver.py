"""MLServer (Seldon) serving scikit-learn, XGBoost and LightGBM models over the Open Inference Protocol.

The generated `settings.json` and `model-settings.json` are MLServer's own files; the tests parse
them with MLServer's settings models and boot a real MLServer with them.
"""

from __future__ import annotations

from typing import Annotated, Any, ClassVar, Literal

from pydantic import Field

from inference_platform import pins
from inference_platform.platform.gpu_nodes import GpuNodes
from inference_platform.serving.analysis_spec import PayloadProtocol
from inference_platform.serving.model_spec import ModelSpecBase, ModelVersion
from inference_platform.serving.resources import ResourceList, Resources
from inference_platform.serving.runtimes.base import (
    SCRATCH_PATH,
    Probes,
    ServerContainer,
    config_mount,
    http_probe,
    json_file,
    model_server_container,
)
from inference_platform.serving.server_plan import ExampleRequest, MetricsEndpoint, ServerPlan

HTTP_PORT = 8080
GRPC_PORT = 8081
METRICS_PORT = 8082
METRICS_PATH = "/metrics"
CONFIG_DIR = "/etc/mlserver"
MODEL_DIR = "/mnt/models"

IMPLEMENTATIONS = {
    "sklearn": "mlserver_sklearn.SKLearnModel",
    "xgboost": "mlserver_xgboost.XGBoostModel",
    "lightgbm": "mlserver_lightgbm.LightGBMModel",
}

DEFAULT_RESOURCES = Resources(
    requests=ResourceList(cpu="500m", memory="1Gi"),
    limits=ResourceList(cpu="2", memory="2Gi"),
)


class MLServerModel(ModelSpecBase):
    SERVER_PORTS: ClassVar[dict[str, int]] = {"http": HTTP_PORT, "grpc": GRPC_PORT, "http-metrics": METRICS_PORT}
    INFERENCE_PATH: ClassVar[str] = "/v2/models/{name}/infer"  # Open Inference Protocol v2
    PAYLOAD_PROTOCOL: ClassVar[PayloadProtocol] = "open-inference-v2"

    runtime: Literal["mlserver"] = Field(
        description="MLServer: sklearn, xgboost or lightgbm files; HTTP 8080, gRPC 8081, metrics 8082."
    )
    format: Literal["sklearn", "xgboost", "lightgbm"] = Field(
        default="sklearn", description="The model's framework, which picks MLServer's inference runtime."
    )
    max_batch_size: Annotated[int, Field(ge=0, le=100_000)] = Field(
        default=0, description="Adaptive batching: most requests merged into one batch (0 = off)."
    )
    max_batch_time: Annotated[float, Field(ge=0, le=60)] = Field(
        default=0, description="Adaptive batching: seconds to wait for a batch to fill."
    )
    parallel_workers: Annotated[int, Field(ge=0, le=64)] = Field(
        default=1, description="Inference worker processes (0 runs inference in the server process)."
    )

    def settings(self) -> dict[str, Any]:
        """The server's settings.json."""
        return {
            "debug": False,
            "host": "0.0.0.0",
            "http_port": HTTP_PORT,
            "grpc_port": GRPC_PORT,
            "metrics_port": METRICS_PORT,
            "metrics_endpoint": METRICS_PATH,
            "metrics_dir": f"{SCRATCH_PATH}/mlserver-metrics",
            "environments_dir": f"{SCRATCH_PATH}/mlserver-envs",
            "parallel_workers": self.parallel_workers,
            "load_models_at_startup": True,
            "model_repository_root": CONFIG_DIR,
        }

    def model_settings(self, version: ModelVersion) -> dict[str, Any]:
        """The model's model-settings.json; `uri` is the directory the version's files are mounted at."""
        settings: dict[str, Any] = {
            "name": self.name,
            "implementation": IMPLEMENTATIONS[self.format],
            "parameters": {"uri": MODEL_DIR, "version": version.name},
        }
        if self.max_batch_size:
            settings["max_batch_size"] = self.max_batch_size
            settings["max_batch_time"] = self.max_batch_time
        return settings

    def version_ready_path(self, version: ModelVersion) -> str:
        return f"/v2/models/{self.name}/versions/{version.name}/ready"

    def plan(self, version: ModelVersion, gpu_nodes: GpuNodes) -> ServerPlan:
        ready = self.version_ready_path(version)
        server = ServerContainer(
            image=pins.MLSERVER_IMAGE,
            resources=DEFAULT_RESOURCES,
            model_dir=MODEL_DIR,
            command=["mlserver", "start", CONFIG_DIR],
            config_mounts=[config_mount(CONFIG_DIR)],
            # Ready means this model version is loaded: MLServer's /v2/health/ready still answers 200
            # when the model failed to load (it counts only loaded models). Upstream's advice against
            # model-level readiness is about Seldon Core's agent, which loads models only after the
            # pod is Ready; here the files are in the pod before MLServer starts.
            # Loading can take minutes; the startup probe holds liveness off until then.
            probes=Probes.ready_after_start(
                http_probe(ready, HTTP_PORT, period=10, failures=3),
                http_probe("/v2/health/live", HTTP_PORT, period=10, failures=3),
                startup_period=5,
                startup_failures=120,
            ),
        )
        container = model_server_container(self, version, server)
        return ServerPlan(
            container=container,
            config_files={
                "settings.json": json_file(self.settings()),
                "model-settings.json": json_file(self.model_settings(version)),
            },
            http_port=HTTP_PORT,
            metrics=MetricsEndpoint(METRICS_PORT, METRICS_PATH),
        )

    def example_request(self) -> ExampleRequest:
        """An Open Inference Protocol request with one row of four features (the iris data's shape)."""
        return ExampleRequest(
            path=self.inference_path,
            body={"inputs": [{"name": "input-0", "shape": [1, 4], "datatype": "FP64", "data": [5.1, 3.5, 1.4, 0.2]}]},
        )
