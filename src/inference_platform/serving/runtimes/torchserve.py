"""TorchServe: PyTorch models packaged as .mar archives.

The generated `config.properties` binds inference and metrics to 0.0.0.0, keeps the management
API on loopback, turns Prometheus metrics on, and loads the model's archive from the model store
at start with its workers and batching settings. The tests boot a real TorchServe with it.
"""

from __future__ import annotations

import json
from typing import Annotated, ClassVar, Literal

from pydantic import Field, model_validator

from inference_platform import pins
from inference_platform.config.base import Matches, config_problems
from inference_platform.platform.gpu_nodes import GpuNodes
from inference_platform.serving.analysis_spec import PayloadProtocol
from inference_platform.serving.model_spec import ModelSpecBase, ModelVersion
from inference_platform.serving.resources import ResourceList, Resources
from inference_platform.serving.runtimes.base import (
    SCRATCH_PATH,
    Probes,
    ServerContainer,
    config_mount,
    exec_probe,
    http_probe,
    model_server_container,
)
from inference_platform.serving.server_plan import ExampleRequest, MetricsEndpoint, ServerPlan

INFERENCE_PORT = 8080
MANAGEMENT_PORT = 8081
METRICS_PORT = 8082
METRICS_PATH = "/metrics"
# The image's USER is the name `model-server`, which the kubelet cannot check against
# runAsNonRoot. Any numeric user works: the image's files are world-readable and the server
# writes only to the scratch volume.
RUN_AS_USER = 1000
CONFIG_DIR = "/etc/torchserve"
MODEL_STORE = "/home/model-server/model-store"

DEFAULT_RESOURCES = Resources(
    requests=ResourceList(cpu="1", memory="2Gi"),
    limits=ResourceList(cpu="4", memory="4Gi"),
)


def properties_file(properties: dict[str, str]) -> str:
    """A Java .properties file; values here never start with spaces nor hold backslashes."""
    for key, value in properties.items():
        if "\\" in value or value != value.strip() or "\n" in value:
            raise ValueError(f"{key}: cannot write {value!r} as a properties value")
    return "".join(f"{key}={value}\n" for key, value in properties.items())


class TorchServeModel(ModelSpecBase):
    SERVER_PORTS: ClassVar[dict[str, int]] = {"http": INFERENCE_PORT, "http-metrics": METRICS_PORT}
    INFERENCE_PATH: ClassVar[str] = "/predictions/{name}"  # TorchServe's inference API
    PAYLOAD_PROTOCOL: ClassVar[PayloadProtocol] = "json"

    runtime: Literal["torchserve"] = Field(
        description="TorchServe: a .mar archive; inference 8080, metrics 8082 (management on loopback only)."
    )
    mar_file: (
        Annotated[
            str, Matches(r"^[A-Za-z0-9._-]+\.mar$", "a file name ending in .mar (letters, digits, '.', '_' and '-')")
        ]
        | None
    ) = Field(default=None, description="The archive in the model's directory; <name>.mar when unset.")
    mar_version: Annotated[str, Matches(r"^[A-Za-z0-9._-]+$", "letters, digits, '.', '_' and '-'")] = Field(
        default="1.0", description="The --version the archive was made with: its worker settings are keyed by it."
    )
    min_workers: Annotated[int, Field(ge=1, le=256)] = Field(
        default=1, description="Workers started for the model (minWorkers)."
    )
    max_workers: Annotated[int, Field(ge=1, le=256)] = Field(default=1, description="Workers at most (maxWorkers).")
    batch_size: Annotated[int, Field(ge=1, le=10_000)] = Field(
        default=1, description="Requests batched together (batchSize)."
    )
    max_batch_delay_ms: Annotated[int, Field(ge=0, le=60_000)] = Field(
        default=100, description="How long a batch waits to fill, in milliseconds (maxBatchDelay)."
    )
    response_timeout_seconds: Annotated[int, Field(ge=1, le=3600)] = Field(
        default=120, description="How long a worker may take to answer (responseTimeout)."
    )
    job_queue_size: Annotated[int, Field(ge=1, le=1_000_000)] = Field(
        default=100, description="Requests queued for the model at most (job_queue_size)."
    )

    @model_validator(mode="after")
    def _workers(self) -> TorchServeModel:
        if self.min_workers > self.max_workers:
            raise config_problems([("minWorkers", f"{self.min_workers} is more than maxWorkers ({self.max_workers})")])
        return self

    @property
    def archive(self) -> str:
        return self.mar_file or f"{self.name}.mar"

    def properties(self) -> dict[str, str]:
        # load_models reads these, keyed by the archive's model name and version (defaultVersion
        # and marName are only read when restoring snapshots).
        model_settings = {
            self.mar_version: {
                "minWorkers": self.min_workers,
                "maxWorkers": self.max_workers,
                "batchSize": self.batch_size,
                "maxBatchDelay": self.max_batch_delay_ms,
                "responseTimeout": self.response_timeout_seconds,
            }
        }
        gpus = self.gpu.device_count
        return {
            "inference_address": f"http://0.0.0.0:{INFERENCE_PORT}",
            # Registering and deleting models stays inside the pod; the model API is off as well.
            "management_address": f"http://127.0.0.1:{MANAGEMENT_PORT}",
            "metrics_address": f"http://0.0.0.0:{METRICS_PORT}",
            "metrics_mode": "prometheus",
            "enable_model_api": "false",
            # Token authorization is on by default and would demand a per-pod key on every call.
            # Access is enforced by the mesh instead (mTLS and authorization policies), and the
            # management API listens on loopback only.
            "disable_token_authorization": "true",
            "enable_envvars_config": "false",
            "install_py_dep_per_model": "false",
            "model_store": MODEL_STORE,
            "load_models": f"{self.name}={self.archive}",
            "models": json.dumps({self.name: model_settings}, sort_keys=True, separators=(",", ":")),
            "number_of_gpu": str(gpus if gpus is not None else 1),
            "job_queue_size": str(self.job_queue_size),
        }

    def ready_check(self) -> list[str]:
        """An exec probe: is at least one worker of the model READY, per the management API?

        TorchServe's /ping answers 200 while workers are still loading, and keeps doing so for
        minutes after a model fails, so it cannot gate traffic. The management API is bound to
        loopback, which only a command inside the container can reach; the image has Python.
        """
        script = (
            "import json,sys,urllib.request as u;"
            f"m=json.load(u.urlopen('http://127.0.0.1:{MANAGEMENT_PORT}/models/{self.name}',timeout=4));"
            "sys.exit(0 if any(w.get('status')=='READY' for v in m for w in v.get('workers',[])) else 1)"
        )
        return ["python3", "-c", script]

    def plan(self, version: ModelVersion, gpu_nodes: GpuNodes) -> ServerPlan:
        ready = self.ready_check()
        server = ServerContainer(
            image=pins.TORCHSERVE_GPU_IMAGE if self.gpu.mode != "none" else pins.TORCHSERVE_IMAGE,
            resources=DEFAULT_RESOURCES,
            model_dir=MODEL_STORE,
            command=["torchserve", "--start", "--foreground", "--ts-config", f"{CONFIG_DIR}/config.properties"],
            # TorchServe writes logs and unpacked archives relative to these; the root is read-only.
            env={
                "HOME": SCRATCH_PATH,
                "LOG_LOCATION": f"{SCRATCH_PATH}/logs",
                "METRICS_LOCATION": f"{SCRATCH_PATH}/logs",
                "TEMP": SCRATCH_PATH,
            },
            working_dir=SCRATCH_PATH,
            config_mounts=[config_mount(CONFIG_DIR)],
            probes=Probes.ready_after_start(
                exec_probe(ready, period=10, failures=3),
                # /ping turns 500 once workers have failed to recover for minutes: restart then.
                http_probe("/ping", INFERENCE_PORT, period=10, failures=3),
                startup_period=5,
                startup_failures=120,
            ),
        )
        container = model_server_container(self, version, server)
        return ServerPlan(
            container=container,
            config_files={"config.properties": properties_file(self.properties())},
            http_port=INFERENCE_PORT,
            metrics=MetricsEndpoint(METRICS_PORT, METRICS_PATH),
            run_as_user=RUN_AS_USER,
        )

    def example_request(self) -> ExampleRequest:
        return ExampleRequest(path=self.inference_path, body={"data": [1.0, 2.0, 3.0, 4.0]})
