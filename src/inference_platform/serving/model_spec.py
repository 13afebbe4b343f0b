"""What a platform team writes about one model: its versions, where their files are, and how
traffic reaches them. Runtime-specific settings live in each runtime's own subclass
(runtimes/); this module holds what every runtime shares.
"""

from __future__ import annotations

import re
from abc import abstractmethod
from collections.abc import Callable
from typing import Annotated, Any, ClassVar, Literal

from pydantic import Field, model_validator

from inference_platform.config.base import (
    ConfigModel,
    DNS1035Label,
    DNS1123Label,
    Duration,
    Matches,
    Percent,
    PinnedImage,
    Quantity,
    config_problems,
    duplicate_problems,
    duration_nanoseconds,
)
from inference_platform.platform import ascend
from inference_platform.platform.gpu_nodes import GpuNodes
from inference_platform.platform.npu_nodes import NpuNodes
from inference_platform.serving.analysis_spec import AnalysisSpec, PayloadProtocol, current_protocol
from inference_platform.serving.autoscaling import AutoscalingSpec, VersionAutoscaling
from inference_platform.serving.gpu import GpuPlacement, GpuSpec, NoGpu
from inference_platform.serving.inference_pool import (
    LORA_ENGINES,
    PICKER_NAME_BASE,
    InferencePoolSpec,
    PickerEngine,
    Routing,
)
from inference_platform.serving.lora import LoraAdapter, LoraLimits
from inference_platform.serving.model_storage import ModelUri
from inference_platform.serving.npu import NpuField
from inference_platform.serving.protection import Protection
from inference_platform.serving.resources import Resources
from inference_platform.serving.rollout_spec import RolloutSpec
from inference_platform.serving.server_plan import ExampleRequest, ServerPlan

# Kubernetes names (Services above all) are DNS labels of at most 63 characters.
MAX_NAME_LENGTH = 63


class EnvVar(ConfigModel):
    name: Annotated[
        str,
        Field(max_length=256),
        Matches(
            r"^[-._a-zA-Z][-._a-zA-Z0-9]*$",
            "a variable name: letters, digits, '.', '_' and '-', not starting with a digit",
        ),
    ] = Field(description="The variable's name.")
    value: str = Field(description="Its value, as a string.")


class ModelVersion(ConfigModel):
    """One version of a model: its own Deployment and Service, live or shadow."""

    name: DNS1123Label = Field(
        description="DNS label; <model>-<version> names its Deployment, Service and, for runtimes with a "
        "generated config, ConfigMap. "
        "TF Serving and Triton number versions: end it in a number (v3 is version 3)."
    )
    model_uri: ModelUri = Field(
        description="pvc://<claim>/<path> (mounted), or s3://, gs://, http(s)://, hf:// (downloaded first)."
    )
    weight: Annotated[int, Field(ge=0, le=100)] | None = Field(
        default=None, description="Share of live traffic in percent; live weights of a model add up to 100."
    )
    mirror_percent: Percent | None = Field(
        default=None, description="Makes this version a shadow that gets a copy of this share of requests."
    )
    replicas: Annotated[int, Field(ge=0, le=1000)] | None = Field(
        default=None, description="Overrides the model's replicas for this version."
    )
    autoscaling: VersionAutoscaling | None = Field(
        default=None,
        description="{minReplicas, maxReplicas}: this version's own bounds within the model's autoscaling "
        "(a canary's or a shadow's floor below the primary's); the model's targets apply.",
    )
    image: PinnedImage | None = Field(default=None, description="Overrides the runtime's image for this version.")
    resources: Resources | None = Field(
        default=None, description="Overrides the model's requests and limits for this version."
    )
    env: list[EnvVar] = Field(
        default_factory=list, description="[{name, value}] added to this version's server container."
    )
    args: list[str] = Field(default_factory=list, description="Appended to the model's server arguments.")
    adapters: list[LoraAdapter] = Field(
        default_factory=list,
        description="LoRA adapters this version's engine serves beside the base model, each under its own name "
        "(runtimes vllm and sglang): [{name, uri}], each fetched like the model into /mnt/adapters/<name>.",
    )
    cache: bool | None = Field(
        default=None,
        description="Keep this version's files (and its adapters') on the cache nodes' local disk "
        "(platform.modelCache); by default the model's `cache`.",
    )

    @model_validator(mode="after")
    def _live_or_shadow(self) -> ModelVersion:
        if self.weight is not None and self.mirror_percent is not None:
            raise config_problems([("", "a version is either live (weight) or a shadow (mirrorPercent), not both")])
        if self.weight is None and self.mirror_percent is None:
            raise config_problems([("", "set weight (a live version, 0 to keep it idle) or mirrorPercent (a shadow)")])
        return self

    @property
    def is_live(self) -> bool:
        return self.weight is not None

    @property
    def number(self) -> int | None:
        """The number a version name ends in (v3 -> 3), for servers that number versions."""
        match = re.search(r"([0-9]+)$", self.name)
        return int(match.group(1)) if match else None


class TransformerSpec(ConfigModel):
    """Pre- and post-processing in front of the model server, in the same pod.

    It receives every request on `port` and calls the server at PREDICTOR_HOST (localhost).
    """

    image: PinnedImage = Field(description="The transformer's image: a tag other than latest, or an @sha256: digest.")
    port: Annotated[int, Field(ge=1, le=65535)] = Field(
        default=9080, description="The port it serves on: the Service and routes point at it."
    )
    command: list[str] | None = Field(default=None, description="Overrides the image's entrypoint.")
    args: list[str] = Field(default_factory=list, description="Arguments to its command.")
    env: list[EnvVar] = Field(
        default_factory=list,
        description="[{name, value}] added to its container (beside PREDICTOR_HOST=localhost:<server port>).",
    )
    resources: Resources = Field(default=Resources(), description="Its container's requests and limits.")
    health_path: Annotated[str, Matches(r"^/", "a path starting with /")] | None = Field(
        default=None, description="HTTP path that answers 200 when ready; a TCP check on the port when unset."
    )
    run_as_user: Annotated[int, Field(ge=1, le=2147483647)] | None = Field(
        default=None,
        description="A numeric user to run as, when the image's USER is root or a name: pods must run as "
        "non-root, which the kubelet can only check for a number.",
    )


class RetryPolicy(ConfigModel):
    attempts: Annotated[int, Field(ge=0, le=10)] = Field(
        default=2, description="How many times a request is retried (0: never)."
    )
    per_try_timeout: Duration | None = Field(
        default=None,
        description="Cut-off for one attempt; the model's timeout when unset, so a slow answer is not cut.",
    )
    # Only failures where the request never reached the model: retrying those is always safe. (A
    # 503 or gRPC UNAVAILABLE may come from the server itself, and retrying would pile load on it.)
    retry_on: Annotated[
        str,
        Matches(
            r"^[a-z0-9-]+(,[a-z0-9-]+)*$", "Envoy retry conditions separated by commas, without spaces (5xx,reset)"
        ),
    ] = Field(
        default="connect-failure,refused-stream,reset-before-request",
        description="Envoy's retry conditions, comma-separated; the default retries only requests "
        "that never reached the model.",
    )

    def to_istio(self, timeout: str) -> dict[str, Any]:
        """An Istio route's `retries` under a route `timeout` (the cut-off of one attempt by default)."""
        if not self.attempts:
            return {"attempts": 0}
        return {"attempts": self.attempts, "perTryTimeout": self.per_try_timeout or timeout, "retryOn": self.retry_on}


# Istio's sidecar listens on these; a container must not.
ISTIO_PORTS = range(15000, 15100)


class ModelSpecBase(ConfigModel):
    """Fields every runtime shares. Each runtime subclasses it with `runtime: Literal[...]`."""

    SERVER_PORTS: ClassVar[dict[str, int]]
    """The model server's container ports by name: http (what routes reach), grpc, http-metrics."""
    INFERENCE_PATH: ClassVar[str]
    """The HTTP path one inference request is POSTed to, `{name}` standing for the model's name."""
    PAYLOAD_PROTOCOL: ClassVar[PayloadProtocol]
    """How the payload comparator reads the server's answers."""
    QUEUE_METRIC: ClassVar[str | None] = None
    """The server's gauge of requests waiting in its queue, as it exports it: what autoscaling.queueDepth reads.
    A metric name, or a name with label matchers (`family{state="waiting"}`) for one series of a gauge family."""
    TTFT_HISTOGRAM: ClassVar[str | None] = None
    """The server's histogram of time to first token, in seconds, as it exports it (the family's name,
    without `_bucket`): what the token-latency rules, alerts, `infra analyze`, the dashboards and
    autoscaling.timeToFirstTokenP90 read. None for a server without one."""
    TPOT_HISTOGRAM: ClassVar[str | None] = None
    """The server's histogram of time per output token, in seconds (each request's decode time over its
    output tokens after the first), as it exports it, without `_bucket`. None for a server without one."""
    USES_NPUS: ClassVar[bool] = False
    """Whether the server runs on Ascend NPUs (`npu`)."""
    PICKER_ENGINE: ClassVar[PickerEngine | None] = None
    """The LLM engine whose metrics an inference pool's picker reads (`routing: inference-pool`); None
    for a server the picker cannot route for."""
    SUPPORTS_LORA: ClassVar[bool] = False
    """Whether the server serves LoRA adapters beside the base model (a version's `adapters`)."""

    name: DNS1035Label = Field(description="Served at <name>.<domain>; also the Kubernetes name prefix.")
    runtime: str
    versions: Annotated[list[ModelVersion], Field(min_length=1)] = Field(
        description="At least one version; live ones (weight) split traffic, shadows (mirrorPercent) get copies."
    )
    replicas: Annotated[int, Field(ge=0, le=1000)] = Field(
        default=1, description="Pods per version (a version may override it); not with an autoscaling range."
    )
    image: PinnedImage | None = Field(default=None, description="Overrides the runtime's pinned default image.")
    resources: Resources = Field(
        default=Resources(),
        description="requests/limits with cpu/memory for the server container; unset keys keep the runtime's defaults.",
    )
    env: list[EnvVar] = Field(
        default_factory=list,
        description="[{name, value}] added to the server container; a version's env merges with it.",
    )
    args: list[str] = Field(default_factory=list, description="Appended to the generated server arguments.")
    gpu: GpuSpec = Field(
        default=NoGpu(),
        description="none, exclusive, vgpu or shared: a mode alone (gpu: exclusive) or {mode, ...} with its settings.",
    )
    npu: NpuField = Field(
        default=None,
        description="Ascend NPUs through HAMi instead of NVIDIA GPUs: a chip type alone (npu: Ascend910B3, one "
        "whole NPU) or {type, mode, count, ...}; runtimes mindie, vllm and custom.",
    )
    autoscaling: AutoscalingSpec = Field(
        default=AutoscalingSpec(),
        description="Scales each version between minReplicas and maxReplicas (a shadow from 1, or 0 where the "
        "model sleeps; a version may set its own bounds within these: versions[].autoscaling).",
    )
    transformer: TransformerSpec | None = Field(
        default=None, description="A pre/post-processing container in front of the server, in the same pod."
    )
    download_size: Quantity = Field(
        default="20Gi",
        description="Size of the volume downloaded model files go to (s3, gs, http(s), hf), and the "
        "ephemeral storage the download requests, so the pod is scheduled on a node with room for it.",
    )
    protection: Protection = Field(
        default_factory=Protection, description="Rate limit, client access, JWT and circuit breaking."
    )
    timeout: Duration = Field(default="60s", description="Request timeout at the gateway.")
    routing: Routing = Field(
        default="virtual-service",
        description="How the gateway spreads a version's requests over its pods: virtual-service (Istio, round "
        "robin) or inference-pool (LLM engines: an endpoint picker per version chooses the pod by its queue, "
        "KV cache, loaded LoRA adapters and the prompt's cached prefix; a Gateway API HTTPRoute).",
    )
    inference_pool: InferencePoolSpec = Field(
        default_factory=InferencePoolSpec,
        description="With routing inference-pool: the pickers' scorers, size and failure mode.",
    )
    rollout_timeout: Duration | None = Field(
        default=None,
        description="How long `pulumi up` waits for a version's pods to be ready; by default the server's "
        "startup budget plus 15 minutes for image pulls and downloads.",
    )
    retries: RetryPolicy = Field(
        default=RetryPolicy(),
        description="Retries at the gateway and in the mesh; perTryTimeout defaults to timeout, "
        "so a slow answer is never cut early.",
    )
    analysis: AnalysisSpec = Field(
        default_factory=AnalysisSpec,
        description="How canaries and shadows are judged against the primary: alerts and `infra analyze`.",
    )
    calls: list[DNS1035Label] = Field(
        default_factory=list,
        description="Other models of the stack this model's code calls: each gets <MODEL>_URL in the "
        "containers' environment, and access is opened for exactly these calls.",
    )
    cache: bool = Field(
        default=False,
        description="Keep every version's files (and their adapters') on the cache nodes' local disk "
        "(platform.modelCache): pods read them there instead of downloading them (a version may say otherwise).",
    )
    rollout: RolloutSpec | None = Field(
        default=None,
        description="{candidate, steps, interval, ...}: a version taken step by step to all the traffic by "
        "`python -m infra rollout`, each step gated by analyze's verdict (docs/rollouts.md); its status is the "
        "command's to write.",
    )

    @model_validator(mode="after")
    def _check_versions(self) -> ModelSpecBase:
        problems = duplicate_problems([v.name for v in self.versions], "versions[{}].name", "version")
        problems += self.version_name_problems(
            lambda version: f"{self.name}-{version.name}", "the name of this version's Deployment and Service"
        )
        if self.transformer is not None:
            port = self.transformer.port
            if port in self.server_ports.values() or port in ISTIO_PORTS:
                taken = ", ".join(str(p) for p in sorted(self.server_ports.values()))
                problems.append(
                    ("transformer.port", f"{port} is taken in the pod (the server uses {taken}, Istio 15000-15099)")
                )
        problems += self._npu_problems()
        problems += self._autoscaling_problems()
        problems += self._routing_problems()
        # A rollout that starts in the dark compares its candidate's answers in its shadow phase, and
        # has no shadow before it or after it (payload_capture.py captures nothing then).
        compares_in_rollout = self.rollout is not None and self.rollout.shadow_first is not None
        if self.analysis.payloads.enabled and not self.mirrors and not compares_in_rollout:
            problems.append(
                (
                    "analysis.payloads.enabled",
                    "answers are compared between the primary and its shadows, and this model has no shadow: "
                    "give a version mirrorPercent (or the rollout a shadowFirst), or drop this",
                )
            )
        problems += self._token_latency_problems()
        problems += duplicate_problems(self.calls, "calls[{}]", "callee")
        problems += [(f"calls[{i}]", "a model cannot call itself") for i, n in enumerate(self.calls) if n == self.name]
        per_try = self.retries.per_try_timeout
        if per_try is not None and duration_nanoseconds(per_try) > duration_nanoseconds(self.timeout):
            problems.append(("retries.perTryTimeout", f"{per_try} is longer than the model's timeout ({self.timeout})"))
        live = [v for v in self.versions if v.is_live]
        if live and self.rollout is not None:
            names = [v.name for v in self.versions]
            live_weight = self.live_weights.get(self.rollout.candidate) or 0
            problems += self.rollout.problems(names, self.primary.name, self.analysis.window, live_weight)
        # A version that is neither live nor a shadow (no weight, `weight: ~`) is its own problem: the
        # weights cannot be added up without it, and are not reported beside it.
        undecided = any(v.weight is None and v.mirror_percent is None for v in self.versions)
        if not live and not undecided:
            problems.append(("versions", "no live version: give at least one version a weight"))
        elif not undecided:
            total = sum(v.weight or 0 for v in live)
            if total != 100:
                shares = ", ".join(f"{v.name}={v.weight}" for v in live)
                problems.append(
                    ("versions", f"live weights add up to {total} ({shares}); they must add up to exactly 100")
                )
        if problems:
            raise config_problems(problems)
        return self

    @model_validator(mode="after")
    def _check_adapters(self) -> ModelSpecBase:
        problems = self._adapter_problems()
        if problems:
            raise config_problems(problems)
        return self

    def version_name_problems(self, derive: Callable[[ModelVersion], str], what: str) -> list[tuple[str, str]]:
        """A problem at each version whose derived Kubernetes name (`derive`) passes 63 characters."""
        problems = []
        for index, version in enumerate(self.versions):
            derived = derive(version)
            if len(derived) > MAX_NAME_LENGTH:
                problems.append(
                    (
                        f"versions[{index}].name",
                        f"'{derived}', {what}, is {len(derived)} characters; Kubernetes allows {MAX_NAME_LENGTH}: "
                        "shorten the model or version name",
                    )
                )
        return problems

    def _adapter_problems(self) -> list[tuple[str, str]]:
        """Adapters only where the engine serves them, each under a name a client can tell apart
        from the version's other adapters, the base model's (the model's name) and the versions'."""
        if not self.SUPPORTS_LORA:
            return [
                (
                    f"versions[{j}].adapters",
                    f"{self.runtime} does not serve LoRA adapters: drop them, or serve the model with an engine "
                    "that does (runtime vllm or sglang)",
                )
                for j, version in enumerate(self.versions)
                if version.adapters
            ]
        versions = {version.name for version in self.versions}
        problems = []
        for j, version in enumerate(self.versions):
            path = f"versions[{j}].adapters[{{}}].name"
            problems += duplicate_problems([a.name for a in version.adapters], path, "adapter")
            for k, adapter in enumerate(version.adapters):
                if adapter.name == self.name:
                    problems.append(
                        (
                            path.format(k),
                            f"'{adapter.name}' is the model's own name, which the base model is served under: "
                            "name the adapter apart from it",
                        )
                    )
                elif adapter.name in versions:
                    problems.append(
                        (
                            path.format(k),
                            f"'{adapter.name}' is the name of a version of this model: name the adapter apart "
                            "from the versions, so a `model` field never reads as a version",
                        )
                    )
        return problems + self._adapters_across_versions() + self.lora_problems()

    def _adapters_across_versions(self) -> list[tuple[str, str]]:
        """Every adapter a version that takes traffic (weight above 0) serves must be served by every
        such version and by every shadow: requests reach a version by the weights (and a shadow by
        its mirror) whatever adapter they name, and one without it answers 404 (vLLM) or 400 (SGLang).
        A version at weight 0 takes no requests, so it may lack them until it is given a weight."""
        serving = [version for version in self.versions if version.weight]
        needed = list(dict.fromkeys(adapter.name for version in serving for adapter in version.adapters))
        problems = []
        for index, version in enumerate(self.versions):
            if version.weight == 0:
                continue
            own = {adapter.name for adapter in version.adapters}
            lacking = [name for name in needed if name not in own]
            if not lacking:
                continue
            by = {name: [v.name for v in serving if any(a.name == name for a in v.adapters)] for name in lacking}
            what = "; ".join(f"'{name}' (served by {', '.join(by[name])})" for name in lacking)
            role = "a shadow, it gets copies of" if version.mirror_percent is not None else "it takes its share of"
            problems.append(
                (
                    f"versions[{index}].adapters" if version.adapters else f"versions[{index}].name",
                    f"{version.name} lacks adapter(s) {what}: {role} the model's requests, whatever adapter they "
                    f"name, and would refuse those requests (vLLM 404, SGLang 400); list the same adapters on "
                    "every version that takes traffic and every shadow",
                )
            )
        return problems

    def lora_problems(self) -> list[tuple[str, str]]:
        """What the engine's LoRA limits say about the versions' adapters (a runtime that serves them)."""
        return []

    @property
    def most_adapters(self) -> int:
        """The most adapters any version lists."""
        return max(len(version.adapters) for version in self.versions)

    @property
    def served_adapters(self) -> list[str]:
        """The adapters the model's versions that take traffic (weight above 0) serve, by name, in the
        order they are first listed: what a client reaches through the model's routes (a shadow's only
        through mirroring, an idle version's not at all)."""
        names = [adapter.name for version in self.versions if version.weight for adapter in version.adapters]
        return list(dict.fromkeys(names))

    def lora_limits(self) -> LoraLimits | None:
        """What the model's adapters take in each pod that serves them; None without adapters."""
        return None

    def adapter_request(self, adapter: str) -> ExampleRequest:
        """An inference request to one of the model's adapters (a runtime with SUPPORTS_LORA)."""
        raise NotImplementedError(f"{self.runtime} serves no LoRA adapters")

    def _npu_problems(self) -> list[tuple[str, str]]:
        if self.npu is None:
            return []
        problems = []
        if not self.USES_NPUS:
            problems.append(("npu", f"{self.runtime} cannot use Ascend NPUs: use runtime mindie, vllm or custom"))
        if "gpu" in self.model_fields_set:
            problems.append(("gpu", "an Ascend model takes no NVIDIA GPU settings: drop gpu, npu gives its devices"))
        env = [(f"env[{i}]", e) for i, e in enumerate(self.env)]
        env += [(f"versions[{v}].env[{i}]", e) for v, ver in enumerate(self.versions) for i, e in enumerate(ver.env)]
        problems += [
            (f"{path}.name", f"{e.name} is set by HAMi's Ascend device plugin to the devices it allocated: drop it")
            for path, e in env
            if e.name in ascend.VISIBLE_DEVICES_ENV
        ]
        return problems

    def _token_latency_problems(self) -> list[tuple[str, str]]:
        """Token-latency thresholds on a model whose server has no such histogram: nothing to judge."""
        judged = self.analysis.model_fields_set
        return [
            (f"analysis.{key}", f"{self.runtime} exports no histogram of {what}: drop this")
            for key, field, histogram, what in (
                (
                    "maxTimeToFirstTokenIncreasePercent",
                    "max_time_to_first_token_increase_percent",
                    self.ttft_histogram,
                    "time to first token",
                ),
                (
                    "maxTimePerOutputTokenIncreasePercent",
                    "max_time_per_output_token_increase_percent",
                    self.tpot_histogram,
                    "time per output token",
                ),
            )
            if field in judged and histogram is None
        ]

    def _autoscaling_problems(self) -> list[tuple[str, str]]:
        problems = []
        if self.autoscaling.gpu_utilization is not None and self.npu is not None:
            # ascend-device-plugin v1.4.0 (internal/monitor/collector.go) gives each container's
            # hami_container_device_utilization_ratio the card's AICore rate, and serves it only
            # under soft slicing: pods sharing a card would see, and scale on, each other's load.
            problems.append(
                (
                    "autoscaling.gpuUtilization",
                    "nothing reports one pod's NPU use: HAMi's Ascend device plugin gives every container on a "
                    "card the whole card's AI Core utilisation (and only under soft slicing), so pods sharing "
                    "a card would scale on each other's load, and dcgm-exporter is NVIDIA's; scale on "
                    "requestsPerSecond or queueDepth",
                )
            )
        elif self.autoscaling.gpu_utilization is not None and self.gpu.mode == "none":
            problems.append(("autoscaling.gpuUtilization", "the model has no GPU to measure: set gpu, or drop this"))
        elif self.autoscaling.gpu_utilization is not None and self.gpu.mode == "shared":
            problems.append(
                (
                    "autoscaling.gpuUtilization",
                    "a shared GPU is not assigned to the pod, so no exporter reports its use: "
                    "use gpu mode exclusive or vgpu, or scale on requestsPerSecond",
                )
            )
        if self.autoscaling.queue_depth is not None and self.queue_metric is None:
            problems.append(
                (
                    "autoscaling.queueDepth",
                    f"{self.runtime} exports no gauge of waiting requests: scale on requestsPerSecond, "
                    "gpuUtilization or CPU",
                )
            )
        if self.autoscaling.time_to_first_token_p90 is not None and self.ttft_histogram is None:
            problems.append(
                (
                    "autoscaling.timeToFirstTokenP90",
                    f"{self.runtime} exports no histogram of time to first token: scale on queueDepth, "
                    "requestsPerSecond, gpuUtilization or CPU",
                )
            )
        if "autoscaling" in self.model_fields_set:
            fixed = ["replicas"] if "replicas" in self.model_fields_set else []
            fixed += [f"versions[{i}].replicas" for i, v in enumerate(self.versions) if v.replicas is not None]
            problems += [
                (path, "set replicas or autoscaling, not both: autoscaling's bounds decide replicas") for path in fixed
            ]
        return problems + self._version_bounds_problems()

    def _version_bounds_problems(self) -> list[tuple[str, str]]:
        """A version's own bounds: within the model's autoscaling, asleep exactly when the model is."""
        problems = []
        model = self.autoscaling
        for index, version in enumerate(self.versions):
            own = version.autoscaling
            if own is None:
                continue
            path = f"versions[{index}].autoscaling"
            if "autoscaling" not in self.model_fields_set:
                problems.append((path, "a version's bounds lie within the model's: set the model's autoscaling"))
                continue
            bounds = self.version_autoscaling(version)
            if own.max_replicas is not None and own.max_replicas > model.max_replicas:
                problems.append(
                    (
                        f"{path}.maxReplicas",
                        f"{own.max_replicas} is more than the model's maxReplicas ({model.max_replicas})",
                    )
                )
            if own.min_replicas is not None and (own.min_replicas == 0) != model.scales_to_zero:
                problems.append(
                    (
                        f"{path}.minReplicas",
                        "a model sleeps at zero as a whole (its routes wait on KEDA's interceptor): 0 only where the "
                        "model's minReplicas is 0, and then 0"
                        if model.scales_to_zero
                        else "0 only where the model's minReplicas is 0: a model sleeps at zero as a whole "
                        "(its routes wait on KEDA's interceptor)",
                    )
                )
            elif bounds.min_replicas > bounds.max_replicas:
                problems.append(
                    (
                        f"{path}.minReplicas",
                        f"{bounds.min_replicas} is more than this version's maxReplicas ({bounds.max_replicas})",
                    )
                )
        return problems

    @property
    def uses_resource_metrics(self) -> bool:
        """Some version's autoscaler scales on CPU or memory (metrics.k8s.io)."""
        return any(self.version_autoscaling(version).uses_resource_metrics for version in self.versions)

    def version_autoscaling(self, version: ModelVersion) -> AutoscalingSpec:
        """The model's autoscaling with this version's bounds: its own where it sets them; else the
        model's, but a shadow's floor is 1 (0 where the model sleeps at zero), not the model's, where the
        model autoscales (a model whose bounds are equal runs that many pods of every version)."""
        scaling = self.autoscaling
        floor, ceiling = scaling.min_replicas, scaling.max_replicas
        if version.mirror_percent is not None and scaling.enabled:
            floor = min(floor, 1)
        own = version.autoscaling
        if own is not None:
            floor = floor if own.min_replicas is None else own.min_replicas
            ceiling = ceiling if own.max_replicas is None else own.max_replicas
        if (floor, ceiling) == (scaling.min_replicas, scaling.max_replicas):
            return scaling
        return scaling.model_copy(update={"min_replicas": floor, "max_replicas": ceiling})

    def _routing_problems(self) -> list[tuple[str, str]]:
        if self.routing != "inference-pool":
            if "inference_pool" in self.model_fields_set:
                return [("inferencePool", "only with routing: inference-pool")]
            return []
        problems = []
        engine = self.picker_engine
        if "engine" in self.inference_pool.model_fields_set and self.PICKER_ENGINE is not None:
            problems.append(
                ("inferencePool.engine", f"{self.runtime} publishes {self.PICKER_ENGINE}'s metrics: drop this")
            )
        if engine is None:
            problems.append(
                (
                    "routing",
                    f"the endpoint picker routes OpenAI-style requests to LLM engines by the queue and KV-cache "
                    f"gauges it reads from them, and {self.runtime} publishes none it knows: use it with vllm, "
                    "sglang, or a custom image that names its engine (inferencePool.engine)"
                    if self.runtime != "custom"
                    else "a custom image is routed by a picker only when it names whose metrics it publishes: "
                    "set inferencePool.engine (vllm or sglang)",
                )
            )
        if self.autoscaling.scales_to_zero:
            problems.append(
                (
                    "autoscaling.minReplicas",
                    "a version asleep at zero has no pod for the picker to choose, and KEDA's interceptor, which "
                    "holds a request while the version wakes, cannot stand before a pool: keep 1 or more, or "
                    "route it through its VirtualService",
                )
            )
        problems += [
            (
                f"inferencePool.scorers[{i}].type",
                f"the picker reads which LoRA adapters a pod holds from vLLM's metrics only; {engine} publishes none",
            )
            for i, scorer in enumerate(self.inference_pool.scorers)
            if scorer.type == "lora-affinity-scorer" and engine is not None and engine not in LORA_ENGINES
        ]
        problems += [
            (
                f"versions[{index}].name",
                f"'{pool}', the version's inference pool, is {len(pool)} characters: its picker is named after "
                f"its first {PICKER_NAME_BASE} (the chart's rule), so keep the model and version names within that",
            )
            for index, version in enumerate(self.versions)
            if len(pool := f"{self.name}-{version.name}") > PICKER_NAME_BASE
        ]
        return problems

    @property
    def picker_engine(self) -> PickerEngine | None:
        """Whose metric names the model's pods publish, for an inference pool's picker."""
        return self.inference_pool.engine or self.PICKER_ENGINE

    @property
    def routed_by_pool(self) -> bool:
        """The gateway sends the model's requests through inference pools (an HTTPRoute)."""
        return self.routing == "inference-pool"

    def fixed_replicas(self, version: ModelVersion) -> int:
        """Replicas of a version without an autoscaler: its own, the model's, or autoscaling's
        bounds when they are equal (minReplicas = maxReplicas: no autoscaler, that many pods)."""
        if version.replicas is not None:
            return version.replicas
        if "autoscaling" in self.model_fields_set:
            return self.version_autoscaling(version).min_replicas
        return self.replicas

    def unnumbered_versions(self, server: str) -> list[tuple[str, str]]:
        """Problems for servers that number versions (TF Serving, Triton): names without a number."""
        return [
            (f"versions[{i}].name", f"{server} numbers versions: end the name in a number (v1, v2, ...)")
            for i, version in enumerate(self.versions)
            if version.number is None
        ]

    def group_problems(self) -> list[tuple[str, str]]:
        """What a replica made of a group of pods across nodes (group_size > 1, a LeaderWorkerSet
        group) cannot have: slices of devices, sleep at zero, a transformer, or a pod name that is
        no DNS label. The LWS controller names a group's pods <model>-<version>-group-<group>-<worker>,
        and a pod's hostname is its name: at most 63 characters (its webhook refuses more)."""
        problems = []
        if self.npu is not None and self.npu.mode == "vnpu":
            problems.append(("nodes", "a group spans whole nodes' NPUs: use npu mode exclusive, not vnpu"))
        elif self.gpu.mode in ("vgpu", "shared"):
            problems.append(("nodes", f"a group spans whole nodes' GPUs: use gpu mode exclusive, not {self.gpu.mode}"))
        if self.autoscaling.scales_to_zero:
            problems.append(("autoscaling.minReplicas", "a multi-node group does not sleep at zero: set 1 or more"))
        if self.transformer is not None:
            problems.append(("transformer", "a multi-node group serves from its leader alone: no transformer"))

        def last_pod(version: ModelVersion) -> str:
            groups = (
                self.version_autoscaling(version).max_replicas
                if "autoscaling" in self.model_fields_set
                else self.replicas
            )
            last_group = max(groups, version.replicas or 0, 1) - 1
            return f"{self.name}-{version.name}-group-{last_group}-{self.group_size - 1}"

        return problems + self.version_name_problems(
            last_pod, "the name of this version's last group's last pod (its hostname)"
        )

    @property
    def accelerator_count(self) -> int | None:
        """The GPUs or NPUs each pod gets (None when a shared GPU shows the pod all of a node's)."""
        return self.npu.count if self.npu is not None else self.gpu.device_count

    def placement(self, gpu_nodes: GpuNodes, npu_nodes: NpuNodes) -> GpuPlacement:
        """What the model's accelerators add to each pod: its NPUs, or its GPU mode's."""
        return self.npu.placement(npu_nodes) if self.npu is not None else self.gpu.placement(gpu_nodes)

    @property
    def accelerator_kind(self) -> Literal["gpu", "npu"] | None:
        """The kind of node the model's pods run on: NPU nodes, GPU nodes, or neither (None)."""
        if self.npu is not None:
            return "npu"
        return None if isinstance(self.gpu, NoGpu) else "gpu"

    def is_cached(self, version: ModelVersion) -> bool:
        """Whether the version's files are kept on the cache nodes: its own `cache`, else the model's."""
        return self.cache if version.cache is None else version.cache

    def cache_settings(self) -> list[tuple[str, ModelVersion]]:
        """Each cached version with the setting that caches it (a path relative to the model)."""
        return [
            ("cache" if version.cache is None else f"versions[{index}].cache", version)
            for index, version in enumerate(self.versions)
            if self.is_cached(version)
        ]

    @property
    def group_size(self) -> int:
        """Pods one replica is made of: 1, or a multi-node group's (a leader and its workers)."""
        return 1

    @property
    def server_ports(self) -> dict[str, int]:
        """The model server's container ports by name (SERVER_PORTS; a custom runtime's are configured)."""
        return self.SERVER_PORTS

    @property
    def queue_metric(self) -> str | None:
        """The server's queue gauge (QUEUE_METRIC; a custom runtime's is configured)."""
        return self.QUEUE_METRIC

    @property
    def ttft_histogram(self) -> str | None:
        """The server's time-to-first-token histogram (TTFT_HISTOGRAM; a custom runtime's is configured)."""
        return self.TTFT_HISTOGRAM

    @property
    def tpot_histogram(self) -> str | None:
        """The server's time-per-output-token histogram (TPOT_HISTOGRAM; a custom runtime's is configured)."""
        return self.TPOT_HISTOGRAM

    @property
    def inference_path(self) -> str:
        """Where a pipeline step (or any client) POSTs one inference request."""
        return self.INFERENCE_PATH.format(name=self.name)

    @property
    def http_port(self) -> int:
        """Where HTTP requests reach a pod: the transformer's port, or the server's."""
        return self.transformer.port if self.transformer is not None else self.server_ports["http"]

    @property
    def serving_ports(self) -> tuple[int, ...]:
        """The ports requests reach: the HTTP port (http_port) and the server's gRPC port."""
        grpc = self.server_ports.get("grpc")
        return tuple(sorted({self.http_port} | ({grpc} if grpc is not None else set())))

    @property
    def primary(self) -> ModelVersion:
        """The live version with the highest weight (the first listed on a tie): what canaries and
        shadows are judged against."""
        return max((v for v in self.versions if v.is_live), key=lambda v: v.weight or 0)

    @property
    def payload_protocol(self) -> PayloadProtocol:
        """How the comparator reads answers: as configured, else the runtime's; behind a transformer,
        whose answers are its own, as any JSON."""
        configured = self.analysis.payloads.protocol
        if configured is not None:
            return current_protocol(configured)
        return "json" if self.transformer is not None else self.PAYLOAD_PROTOCOL

    @property
    def live_weights(self) -> dict[str, int]:
        return {v.name: v.weight for v in self.versions if v.weight is not None}

    @property
    def mirrors(self) -> dict[str, float]:
        return {v.name: v.mirror_percent for v in self.versions if v.mirror_percent is not None}

    @abstractmethod
    def plan(self, version: ModelVersion, gpu_nodes: GpuNodes) -> ServerPlan:
        """How this runtime serves one version: its container, config files and ports."""

    @abstractmethod
    def example_request(self) -> ExampleRequest:
        """An inference request in the runtime's own protocol."""
