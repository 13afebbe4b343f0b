"""Any server image (Ollama, BentoML, TGI, DJL-Serving, a vendor's LLM server): the team names the
image, how it starts, the port it serves on and how to tell it is ready; the platform gives it
what every model gets (model files, GPUs, routes, weights and mirrors, autoscaling, protection,
analysis on the sidecar's request metrics).

What the platform cannot know about an arbitrary image is asked for, not guessed: `image`, `port`
and `readiness` are required, and the pod's hardening (non-root, read-only root file system)
holds, so an image that writes outside /tmp names its `writablePaths`, and one whose USER is root
or a name runs as a numeric `runAsUser`: under runAsNonRoot the kubelet refuses to start it
otherwise. Which user an image runs as is not in the stack file, so a model says: a `runAsUser`,
or `nonRootImage: true` for an image whose USER is already a numeric non-root user.
"""

from __future__ import annotations

import math
from typing import Annotated, Any, ClassVar, Literal

from pydantic import Field, model_validator

from inference_platform.config.base import (
    ConfigModel,
    Duration,
    Matches,
    config_problems,
    duration_seconds,
)
from inference_platform.platform.gpu_nodes import GpuNodes
from inference_platform.serving.analysis_spec import PayloadProtocol
from inference_platform.serving.model_spec import ISTIO_PORTS, ModelSpecBase, ModelVersion
from inference_platform.serving.resources import ResourceList, Resources
from inference_platform.serving.runtimes.base import (
    SCRATCH_PATH,
    Probe,
    Probes,
    ServerContainer,
    http_probe,
    model_server_container,
    tcp_probe,
)
from inference_platform.serving.server_plan import ExampleRequest, MetricsEndpoint, ServerPlan

Port = Annotated[int, Field(ge=1, le=65535)]
AbsolutePath = Annotated[str, Matches(r"^/[^\s]*$", "an absolute path (starting with /) without spaces")]
PROBE_PERIOD_SECONDS = 10
MAY_RUN_AS_ROOT = (
    "pods run with runAsNonRoot, and the kubelet refuses to start an image whose USER is root or a name "
    "(CreateContainerConfigError: container has runAsNonRoot and image will run as root): set runAsUser "
    "to a numeric user (e.g. runAsUser: 1000), or nonRootImage: true if the image's USER is a numeric "
    "user other than 0"
)
WRITABLE_VOLUME = "writable-{}"
# Every container gets requests and limits; a model's `resources` overrides these.
DEFAULT_RESOURCES = Resources(
    requests=ResourceList(cpu="1", memory="2Gi"),
    limits=ResourceList(cpu="4", memory="8Gi"),
)


class ProbeSpec(ConfigModel):
    """One health check: GET `path` (HTTP 200-399 passes), or a TCP connect when `path` is unset."""

    path: AbsolutePath | None = Field(default=None, description="HTTP path to GET; a TCP check when unset.")
    port: Port | None = Field(default=None, description="The port to check; the serving port when unset.")
    timeout_seconds: Annotated[int, Field(ge=1, le=300)] = Field(default=5, description="How long one probe may take.")
    failure_threshold: Annotated[int, Field(ge=1, le=100)] = Field(
        default=3, description="Failed probes in a row before the pod is unready (or, for liveness, restarted)."
    )

    def to_kubernetes(self, serving_port: int, *, failures: int | None = None) -> Probe:
        port, failures = self.port or serving_port, failures or self.failure_threshold
        if self.path is None:
            return tcp_probe(port, period=PROBE_PERIOD_SECONDS, failures=failures, timeout=self.timeout_seconds)
        return http_probe(self.path, port, period=PROBE_PERIOD_SECONDS, failures=failures, timeout=self.timeout_seconds)


# A Prometheus metric name.
METRIC_NAME = r"^[a-zA-Z_:][a-zA-Z0-9_:]*$"


class MetricsSpec(ConfigModel):
    port: Port | None = Field(
        default=None, description="Where the server publishes metrics; the serving port when unset."
    )
    path: AbsolutePath = Field(default="/metrics", description="The path the metrics are served at.")
    queue_gauge: (
        Annotated[
            str,
            Matches(METRIC_NAME, "a Prometheus metric name: letters, digits, '_' and ':', not starting with a digit"),
        ]
        | None
    ) = Field(
        default=None,
        description="The server's gauge of requests waiting (e.g. TGI's tgi_queue_size), for autoscaling.queueDepth.",
    )
    time_to_first_token_histogram: (
        Annotated[
            str,
            Matches(METRIC_NAME, "a Prometheus metric name: letters, digits, '_' and ':', not starting with a digit"),
        ]
        | None
    ) = Field(
        default=None,
        description="The server's histogram of time to first token in seconds, named without _bucket "
        "(a vLLM-compatible server's vllm:time_to_first_token_seconds): token-latency rules, alerts, "
        "analysis and autoscaling.timeToFirstTokenP90.",
    )
    time_per_output_token_histogram: (
        Annotated[
            str,
            Matches(METRIC_NAME, "a Prometheus metric name: letters, digits, '_' and ':', not starting with a digit"),
        ]
        | None
    ) = Field(
        default=None,
        description="The server's histogram of each request's time per output token in seconds, named "
        "without _bucket: token-latency rules, alerts and analysis.",
    )


class ExampleSpec(ConfigModel):
    path: AbsolutePath = Field(description="Where one inference request is POSTed.")
    body: dict[str, Any] = Field(default_factory=dict, description="Its JSON body.")


class CustomModel(ModelSpecBase):
    SERVER_PORTS: ClassVar[dict[str, int]] = {}
    INFERENCE_PATH: ClassVar[str] = "/"
    # Any JSON: the comparator compares the answers' bodies as they are.
    PAYLOAD_PROTOCOL: ClassVar[PayloadProtocol] = "json"
    # Any image: one built for Ascend (CANN) runs on NPUs.
    USES_NPUS: ClassVar[bool] = True

    runtime: Literal["custom"] = Field(description="Any server image: its port, probes and metrics as configured.")
    command: list[str] | None = Field(default=None, description="Overrides the image's entrypoint.")
    port: Port | None = Field(default=None, description="The HTTP port the server listens on (required).")
    grpc_port: Port | None = Field(
        default=None,
        description="A gRPC port beside it, for declared callers in the mesh (a version's Service); the "
        "gateway routes HTTP only, so it stays closed to the gateway.",
    )
    readiness: ProbeSpec | None = Field(
        default=None, description="When a pod takes requests (required): an HTTP path or a TCP check."
    )
    liveness: ProbeSpec | None = Field(
        default=None, description="When a pod is restarted; a TCP check on the serving port when unset."
    )
    startup_timeout: Duration = Field(
        default="30m", description="How long the server may take to become ready once started (readiness is polled)."
    )
    metrics: MetricsSpec | None = Field(default=None, description="The server's own Prometheus metrics, if it has any.")
    example: ExampleSpec | None = Field(
        default=None, description="One inference request (path and body), for the stack's curl line and pipelines."
    )
    model_dir: AbsolutePath = Field(default="/mnt/models", description="Where the version's model files are mounted.")
    writable_paths: list[AbsolutePath] = Field(
        default_factory=list,
        description="Directories the server writes to beyond /tmp (the root file system is read-only): "
        "an emptyDir each.",
    )
    run_as_user: Annotated[int, Field(ge=1, le=2147483647)] | None = Field(
        default=None,
        description="A numeric user to run as, when the image's USER is root or a name: pods run as non-root "
        "(required unless nonRootImage).",
    )
    non_root_image: bool = Field(
        default=False,
        description="The image's USER is a numeric user other than 0 (e.g. USER 1000), which the kubelet "
        "verifies under runAsNonRoot: no runAsUser needed.",
    )

    @model_validator(mode="after")
    def _what_the_image_cannot_tell(self) -> CustomModel:
        problems = []
        if self.image is None and any(v.image is None for v in self.versions):
            problems.append(("image", "a custom runtime runs the image you name: set image (pinned tag or digest)"))
        if self.port is None:
            problems.append(("port", "set the port the server listens on"))
        if self.readiness is None:
            problems.append(("readiness", "set how to tell the server is ready: {path: /health} or {} for a TCP check"))
        if self.run_as_user is None and not self.non_root_image:
            problems.append(("runAsUser", MAY_RUN_AS_ROOT))
        ports = {"port": self.port, "grpcPort": self.grpc_port}
        ports |= {"metrics.port": self.metrics.port if self.metrics else None}
        ports |= {f"{name}.port": probe.port if probe else None for name, probe in self._probes().items()}
        problems += [
            (path, f"{port} is Istio's (15000-15099): the sidecar listens there")
            for path, port in ports.items()
            if port in ISTIO_PORTS
        ]
        if self.grpc_port is not None and self.grpc_port == self.port:
            problems.append(("grpcPort", f"{self.grpc_port} is the HTTP port too: give gRPC a port of its own"))
        if self.routed_by_pool and self.metrics is None:
            problems.append(
                ("metrics", "an inference pool's picker chooses pods by the engine's gauges: set where they are served")
            )
        scratch = [f"writablePaths[{i}]" for i, path in enumerate(self.writable_paths) if path == SCRATCH_PATH]
        problems += [(path, f"{SCRATCH_PATH} is writable already (the scratch volume)") for path in scratch]
        if problems:
            raise config_problems(problems)
        return self

    def _probes(self) -> dict[str, ProbeSpec | None]:
        return {"readiness": self.readiness, "liveness": self.liveness}

    @property
    def server_ports(self) -> dict[str, int]:
        ports = {"http": self.port} if self.port is not None else {}
        if self.grpc_port is not None:
            ports["grpc"] = self.grpc_port
        extra = {self.metrics.port if self.metrics else None} | {p.port for p in self._probes().values() if p}
        extra -= {None, *ports.values()}
        ports |= {f"port-{number}": number for number in sorted(p for p in extra if p is not None)}
        return ports

    @property
    def queue_metric(self) -> str | None:
        return self.metrics.queue_gauge if self.metrics is not None else None

    @property
    def ttft_histogram(self) -> str | None:
        return self.metrics.time_to_first_token_histogram if self.metrics is not None else None

    @property
    def tpot_histogram(self) -> str | None:
        return self.metrics.time_per_output_token_histogram if self.metrics is not None else None

    @property
    def inference_path(self) -> str:
        return self.example.path if self.example is not None else self.INFERENCE_PATH

    def plan(self, version: ModelVersion, gpu_nodes: GpuNodes) -> ServerPlan:
        # The validator refuses a model without either.
        assert self.port is not None
        assert self.readiness is not None
        startup_failures = math.ceil(duration_seconds(self.startup_timeout) / PROBE_PERIOD_SECONDS)
        writable = [(WRITABLE_VOLUME.format(i), path) for i, path in enumerate(self.writable_paths)]
        server = ServerContainer(
            image="",  # never used: the validator requires an image on the model or every version
            resources=DEFAULT_RESOURCES,
            model_dir=self.model_dir,
            command=self.command or (),
            mounts=[{"name": name, "mountPath": path} for name, path in writable],
            probes=Probes(
                startup=self.readiness.to_kubernetes(self.port, failures=startup_failures),
                readiness=self.readiness.to_kubernetes(self.port),
                liveness=(self.liveness or ProbeSpec()).to_kubernetes(self.port),
            ),
        )
        container = model_server_container(self, version, server)
        metrics = None
        if self.metrics is not None:
            metrics = MetricsEndpoint(self.metrics.port or self.port, self.metrics.path)
        return ServerPlan(
            container=container,
            config_files={},
            http_port=self.port,
            metrics=metrics,
            run_as_user=self.run_as_user,
            volumes=tuple({"name": name, "emptyDir": {}} for name, _ in writable),
        )

    def example_request(self) -> ExampleRequest:
        if self.example is None:
            return ExampleRequest(path=self.INFERENCE_PATH, body={})
        return ExampleRequest(path=self.example.path, body=self.example.body)
