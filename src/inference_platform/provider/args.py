"""The component package's argument types, generated from the config models: do not edit.

`python -m inference_platform.provider.codegen` (`make provider`) writes this file from the
pydantic models (provider/codegen.py says how); a test fails when it is stale. Pulumi's component
analyzer reads these annotations as types, hence no `from __future__ import annotations`.
"""

from enum import Enum
from typing import Any, NotRequired, TypedDict


class ModelRuntime(str, Enum):
    Tfserving = "tfserving"
    Torchserve = "torchserve"
    Triton = "triton"
    TritonLlm = "triton-llm"
    Mlserver = "mlserver"
    Vllm = "vllm"
    Sglang = "sglang"
    Mindie = "mindie"
    Custom = "custom"


class GpuMode(str, Enum):
    None_ = "none"
    Exclusive = "exclusive"
    Vgpu = "vgpu"
    Shared = "shared"


class NpuType(str, Enum):
    Ascend910A = "Ascend910A"
    Ascend910B2 = "Ascend910B2"
    Ascend910B3 = "Ascend910B3"
    Ascend910B41 = "Ascend910B4-1"
    Ascend910B4 = "Ascend910B4"
    Ascend310P = "Ascend310P"
    Ascend910C = "Ascend910C"


class NpuMode(str, Enum):
    Exclusive = "exclusive"
    Vnpu = "vnpu"


class NpuSlicing(str, Enum):
    Template = "template"
    Soft = "soft"


class AutoscalingWake(str, Enum):
    Hold = "hold"
    Respond = "respond"


class ModelRouting(str, Enum):
    VirtualService = "virtual-service"
    InferencePool = "inference-pool"


class InferencePoolEngine(str, Enum):
    Vllm = "vllm"
    Sglang = "sglang"


class ScorerWeightType(str, Enum):
    PrefixCacheScorer = "prefix-cache-scorer"
    QueueScorer = "queue-scorer"
    KvCacheUtilizationScorer = "kv-cache-utilization-scorer"
    LoraAffinityScorer = "lora-affinity-scorer"


class InferencePoolFailureMode(str, Enum):
    FailOpen = "FailOpen"
    FailClose = "FailClose"


class PayloadComparisonProtocol(str, Enum):
    OpenInferenceV2 = "open-inference-v2"
    Tfserving = "tfserving"
    Json = "json"
    Openai = "openai"
    Torchserve = "torchserve"


class RolloutStatusPhase(str, Enum):
    Shadow = "shadow"
    Canary = "canary"
    Promoted = "promoted"
    RolledBack = "rolled-back"


class RolloutStatusDecision(str, Enum):
    Advance = "advance"
    Hold = "hold"
    Rollback = "rollback"
    Paused = "paused"
    Resume = "resume"


class ModelFormat(str, Enum):
    Onnx = "onnx"
    Tensorrt = "tensorrt"
    Pytorch = "pytorch"
    Sklearn = "sklearn"
    Xgboost = "xgboost"
    Lightgbm = "lightgbm"


class TensorDataType(str, Enum):
    BOOL = "BOOL"
    UINT8 = "UINT8"
    UINT16 = "UINT16"
    UINT32 = "UINT32"
    UINT64 = "UINT64"
    INT8 = "INT8"
    INT16 = "INT16"
    INT32 = "INT32"
    INT64 = "INT64"
    FP16 = "FP16"
    FP32 = "FP32"
    FP64 = "FP64"
    STRING = "STRING"
    BF16 = "BF16"


class InstanceGroupKind(str, Enum):
    Cpu = "cpu"
    Gpu = "gpu"


class ModelPipeline(str, Enum):
    Ensemble = "ensemble"
    Bls = "bls"


class ModelBatchingStrategy(str, Enum):
    InflightFusedBatching = "inflight_fused_batching"
    V1 = "V1"


class ModelLogitsDatatype(str, Enum):
    FP32 = "FP32"
    FP16 = "FP16"
    BF16 = "BF16"


class ModelDtype(str, Enum):
    Auto = "auto"
    Half = "half"
    Float16 = "float16"
    Bfloat16 = "bfloat16"
    Float = "float"
    Float32 = "float32"


class GraphNodeRouterType(str, Enum):
    Sequence = "Sequence"
    Switch = "Switch"
    Ensemble = "Ensemble"
    Splitter = "Splitter"


class GraphStepData(str, Enum):
    Request = "$request"
    Response = "$response"


class GraphStepDependency(str, Enum):
    Soft = "Soft"
    Hard = "Hard"


class PipelineAutoscalingWake(str, Enum):
    Hold = "hold"
    Respond = "respond"


class PipelineRouting(str, Enum):
    VirtualService = "virtual-service"
    InferencePool = "inference-pool"


class IngressGatewayServiceType(str, Enum):
    LoadBalancer = "LoadBalancer"
    NodePort = "NodePort"
    ClusterIP = "ClusterIP"


class IngressGatewayExternalTrafficPolicy(str, Enum):
    Local = "Local"
    Cluster = "Cluster"


class PrometheusSubcharts(str, Enum):
    Alertmanager = "alertmanager"
    KubeStateMetrics = "kube-state-metrics"
    PrometheusNodeExporter = "prometheus-node-exporter"
    PrometheusPushgateway = "prometheus-pushgateway"


class TolerationOperator(str, Enum):
    Exists = "Exists"
    Equal = "Equal"


class TolerationEffect(str, Enum):
    NoSchedule = "NoSchedule"
    PreferNoSchedule = "PreferNoSchedule"
    NoExecute = "NoExecute"


class NpuPoolType(str, Enum):
    Ascend910A = "Ascend910A"
    Ascend910B2 = "Ascend910B2"
    Ascend910B3 = "Ascend910B3"
    Ascend910B41 = "Ascend910B4-1"
    Ascend910B4 = "Ascend910B4"
    Ascend310P = "Ascend310P"
    Ascend910C = "Ascend910C"


class PlatformAutoscaler(str, Enum):
    Hpa = "hpa"
    Keda = "keda"


class ModelCacheNodes(str, Enum):
    Gpu = "gpu"
    Npu = "npu"
    Both = "both"


class KedaRefGpuSource(str, Enum):
    Dcgm = "dcgm"
    Hami = "hami"


class VersionAutoscaling(TypedDict):
    """One version's own bounds, within its model's autoscaling (its targets and timings are the model's)."""

    min_replicas: NotRequired[int]
    """This version's floor: by default the model's minReplicas for a live version, and for a shadow 1 (0 where the model sleeps at zero; the model's where its bounds are equal). 0 only where the model's is 0: a model sleeps or wakes as a whole."""
    max_replicas: NotRequired[int]
    """This version's ceiling: by default the model's maxReplicas, and at most that."""


class ResourceList(TypedDict):
    cpu: NotRequired[str]
    """CPU, a Kubernetes quantity (500m, 2); unset keeps the runtime's default."""
    memory: NotRequired[str]
    """Memory, a Kubernetes quantity (512Mi, 8Gi); unset keeps the runtime's default."""


class Resources(TypedDict):
    """Container requests and limits; keys left out keep the runtime's defaults."""

    requests: NotRequired[ResourceList]
    """What the scheduler reserves for the container."""
    limits: NotRequired[ResourceList]
    """The most the container may use."""


class EnvVar(TypedDict):
    name: str
    """The variable's name."""
    value: str
    """Its value, as a string."""


class LoraAdapter(TypedDict):
    """A LoRA adapter the version's engine serves beside the base model, under its own name."""

    name: str
    """What clients ask for in the OpenAI `model` field (SGLang: <model>:<name>); a DNS label of at most 55 characters, unique in the version, and neither the model's name nor a version's."""
    uri: str
    """Where its files are (adapter_config.json and the weights): pvc://<claim>/<path> (mounted), or s3://, gs://, http(s)://, hf:// (downloaded before the server starts, with the model's credentials)."""
    download_size: NotRequired[str]
    """Size of the volume a downloaded adapter goes to; its download requests that much ephemeral storage on top of what the pod's earlier downloads took. Unused for pvc://. Default: \"2Gi\"."""


class ModelVersion(TypedDict):
    """One version of a model: its own Deployment and Service, live or shadow."""

    name: str
    """DNS label; <model>-<version> names its Deployment, Service and, for runtimes with a generated config, ConfigMap. TF Serving and Triton number versions: end it in a number (v3 is version 3)."""
    model_uri: str
    """pvc://<claim>/<path> (mounted), or s3://, gs://, http(s)://, hf:// (downloaded first)."""
    weight: NotRequired[int]
    """Share of live traffic in percent; live weights of a model add up to 100."""
    mirror_percent: NotRequired[float]
    """Makes this version a shadow that gets a copy of this share of requests."""
    replicas: NotRequired[int]
    """Overrides the model's replicas for this version."""
    autoscaling: NotRequired[VersionAutoscaling]
    """{minReplicas, maxReplicas}: this version's own bounds within the model's autoscaling (a canary's or a shadow's floor below the primary's); the model's targets apply."""
    image: NotRequired[str]
    """Overrides the runtime's image for this version."""
    resources: NotRequired[Resources]
    """Overrides the model's requests and limits for this version."""
    env: NotRequired[list[EnvVar]]
    """[{name, value}] added to this version's server container."""
    args: NotRequired[list[str]]
    """Appended to the model's server arguments."""
    adapters: NotRequired[list[LoraAdapter]]
    """LoRA adapters this version's engine serves beside the base model, each under its own name (runtimes vllm and sglang): [{name, uri}], each fetched like the model into /mnt/adapters/<name>."""
    cache: NotRequired[bool]
    """Keep this version's files (and its adapters') on the cache nodes' local disk (platform.modelCache); by default the model's `cache`."""


class Gpu(TypedDict):
    """One of: none, exclusive, vgpu, shared, chosen by `mode`."""

    mode: GpuMode
    """No GPU resources, and NVIDIA_VISIBLE_DEVICES=none so a CPU pod on a GPU node cannot touch a GPU."""
    count: NotRequired[int]
    """Whole GPUs per pod. Default: 1. Only with mode exclusive or vgpu."""
    memory_mib: NotRequired[int]
    """Memory cap per vGPU in MiB. Only with mode vgpu."""
    memory_percent: NotRequired[int]
    """Memory cap per vGPU as a percentage of the device. Only with mode vgpu."""
    cores: NotRequired[int]
    """Share of the device's compute (SMs) in percent. Only with mode vgpu."""
    visible_devices: NotRequired[str]
    """'all', device indices (0,1) or GPU UUIDs. Default: \"all\". Only with mode shared."""


class NpuSpec(TypedDict):
    """Ascend NPUs for each pod, of one chip type."""

    type: NpuType
    """The chip, as HAMi names it: Ascend910A, Ascend910B2, Ascend910B3, Ascend910B4, Ascend910B4-1, Ascend310P or Ascend910C; pods ask for huawei.com/<type>."""
    mode: NotRequired[NpuMode]
    """exclusive: whole NPUs; vnpu: virtual NPUs, a share of a card's memory (and AI cores). Default: \"exclusive\"."""
    count: NotRequired[int]
    """NPUs (or vNPUs) per pod. Default: 1."""
    memory_mib: NotRequired[int]
    """Device memory per vNPU in MiB (huawei.com/<type>-memory); hard slicing rounds it up to the first template that holds it. Unset: a whole card. Only with mode vnpu."""
    cores: NotRequired[int]
    """Share of a card's AI cores in percent (huawei.com/<type>-core). Only with slicing soft."""
    slicing: NotRequired[NpuSlicing]
    """How vNPUs are cut: template (HAMi's hard templates) or soft (hami-vnpu-core: exact memory, a share of cores; needs platform.npuNodes.softSlicing or the node's hami-vnpu-core annotation). Only with mode vnpu. Default: \"template\"."""


class AutoscalingSpec(TypedDict):
    """Scales each version between minReplicas and maxReplicas; off while they are equal."""

    min_replicas: NotRequired[int]
    """0 lets a version sleep at zero replicas while idle, woken by its first request (needs platform.autoscaler: keda). Default: 1."""
    max_replicas: NotRequired[int]
    """An autoscaler per version when above minReplicas; equal, that many replicas and no autoscaler. Default: 1."""
    cpu_utilization: NotRequired[int]
    """Target average CPU use, in percent of the requests."""
    memory_utilization: NotRequired[int]
    """Target average memory use, in percent of the requests."""
    gpu_utilization: NotRequired[int]
    """Target average GPU utilisation per pod, in percent (container_gpu_usage)."""
    requests_per_second: NotRequired[float]
    """Target requests per second per pod (requests_per_second)."""
    queue_depth: NotRequired[int]
    """Target requests waiting in the engine's queue per pod (requests_waiting): for LLM engines, whose GPU shows 100 % while the queue grows. Runtimes that export a queue gauge only."""
    time_to_first_token_p90: NotRequired[float]
    """Target p90 time to first token in seconds (time_to_first_token_p90_seconds): each pod's 90th percentile over the last 2 minutes, from the engine's own histogram, averaged over the version's pods. Runtimes with a time-to-first-token histogram only (vllm, sglang; custom with metrics.timeToFirstTokenHistogram)."""
    scale_down_stabilization_seconds: NotRequired[int]
    """How long load must stay low before replicas are removed. Default: 300."""
    idle_after: NotRequired[str]
    """With minReplicas 0: how long a version goes without a request before it sleeps (KEDA's cooldownPeriod); 1m to 24h. Default: \"15m\"."""
    wake: NotRequired[AutoscalingWake]
    """With minReplicas 0, what a request to a sleeping version gets: hold (kept until a pod is ready, within the model's timeout) or respond (503 with Retry-After at once, for cold starts of minutes). Default: \"hold\"."""


class TransformerSpec(TypedDict):
    """Pre- and post-processing in front of the model server, in the same pod. It receives every request on `port` and calls the server at PREDICTOR_HOST (localhost)."""

    image: str
    """The transformer's image: a tag other than latest, or an @sha256: digest."""
    port: NotRequired[int]
    """The port it serves on: the Service and routes point at it. Default: 9080."""
    command: NotRequired[list[str]]
    """Overrides the image's entrypoint."""
    args: NotRequired[list[str]]
    """Arguments to its command."""
    env: NotRequired[list[EnvVar]]
    """[{name, value}] added to its container (beside PREDICTOR_HOST=localhost:<server port>)."""
    resources: NotRequired[Resources]
    """Its container's requests and limits."""
    health_path: NotRequired[str]
    """HTTP path that answers 200 when ready; a TCP check on the port when unset."""
    run_as_user: NotRequired[int]
    """A numeric user to run as, when the image's USER is root or a name: pods must run as non-root, which the kubelet can only check for a number."""


class RateLimit(TypedDict):
    requests_per_second: int
    """Sustained requests per second each pod accepts; past it, 429."""
    burst: NotRequired[int]
    """Requests a pod accepts at once after a quiet spell (the bucket's size)."""


class ClientAccess(TypedDict):
    allow_cidrs: NotRequired[list[str]]
    """Only these client addresses (empty: any)."""
    deny_cidrs: NotRequired[list[str]]
    """Never these client addresses."""


class HeaderRequirement(TypedDict):
    name: str
    """Lowercase header name."""
    values: list[str]
    """The values accepted; any other (or none) is refused."""


class JwtRequirement(TypedDict):
    issuer: str
    """The tokens' issuer (iss)."""
    jwks_uri: str
    """Where the issuer's signing keys are published (https)."""
    audiences: NotRequired[list[str]]
    """Accepted audiences (aud); none: any."""


class CircuitBreaker(TypedDict):
    """Defaults eject a failing pod for a while, and never more than half of a version's pods."""

    max_connections: NotRequired[int]
    """TCP connections to a version at most (maxConnections). Default: 1024."""
    max_pending_requests: NotRequired[int]
    """Requests waiting for a connection at most (http1MaxPendingRequests). Default: 1024."""
    max_requests: NotRequired[int]
    """Requests in flight to a version at most (http2MaxRequests). Default: 1024."""
    connect_timeout: NotRequired[str]
    """TCP connect timeout. Default: \"5s\"."""
    consecutive_errors: NotRequired[int]
    """5xx responses in a row that eject a pod. Default: 5."""
    interval: NotRequired[str]
    """How often pods are checked for ejection. Default: \"10s\"."""
    base_ejection_time: NotRequired[str]
    """How long an ejected pod stays out (longer each time it is ejected again). Default: \"30s\"."""
    max_ejection_percent: NotRequired[int]
    """The largest share of a version's pods ejected at once. Default: 50."""


class Protection(TypedDict):
    rate_limit: NotRequired[RateLimit]
    """Envoy's local rate limit at each pod."""
    clients: NotRequired[ClientAccess]
    """Client address lists, enforced at the gateway."""
    require_headers: NotRequired[list[HeaderRequirement]]
    """Headers a request must carry, enforced at the gateway."""
    jwt: NotRequired[JwtRequirement]
    """Callers must present a valid JWT from this issuer."""
    circuit_breaker: NotRequired[CircuitBreaker]
    """Connection limits and outlier ejection in the DestinationRule."""


class ScorerWeight(TypedDict):
    type: ScorerWeightType
    """prefix-cache-scorer: prefers the pod likely to hold the prompt's prefix in its KV cache; queue-scorer: the shortest waiting queue; kv-cache-utilization-scorer: the emptiest KV cache; lora-affinity-scorer: a pod with the requested LoRA adapter loaded, or room to load it."""
    weight: NotRequired[float]
    """How much this scorer counts against the others. Default: 1."""


class InferencePoolSpec(TypedDict):
    """The endpoint picker of each of the model's versions, with `routing: inference-pool`."""

    engine: NotRequired[InferencePoolEngine]
    """runtime custom only: whose metric names the image publishes (vllm or sglang), which the picker reads its queue, KV-cache and LoRA figures by; vLLM and SGLang models name their own."""
    scorers: NotRequired[list[ScorerWeight]]
    """How the picker chooses a pod: its scorers and their weights (the chart's default profile: queue-scorer 2, kv-cache-utilization-scorer 2, prefix-cache-scorer 3)."""
    replicas: NotRequired[int]
    """Picker pods per version; above 1 they elect a leader and only it serves (the prefix cache scorer keeps its index in memory). Default: 1."""
    failure_mode: NotRequired[InferencePoolFailureMode]
    """When the picker cannot answer: FailOpen lets the gateway pick a pod itself, FailClose refuses the request. Default: \"FailOpen\"."""
    resources: NotRequired[Resources]
    """The picker container's requests and limits (the chart's own, 4 CPUs and 8Gi, are sized for thousands of requests a second)."""


class RetryPolicy(TypedDict):
    attempts: NotRequired[int]
    """How many times a request is retried (0: never). Default: 2."""
    per_try_timeout: NotRequired[str]
    """Cut-off for one attempt; the model's timeout when unset, so a slow answer is not cut."""
    retry_on: NotRequired[str]
    """Envoy's retry conditions, comma-separated; the default retries only requests that never reached the model. Default: \"connect-failure,refused-stream,reset-before-request\"."""


class PayloadComparison(TypedDict):
    """Compare what each shadow answers with what the primary answered to the same request."""

    enabled: NotRequired[bool]
    """Compare each shadow's answers with the primary's (needs a shadow); deploys the payload comparator. Default: false."""
    min_agreement: NotRequired[float]
    """The share of paired requests a shadow must answer as the primary did. Default: 0.99."""
    min_pairs: NotRequired[int]
    """Fewer pairs than this in the window is too little to judge. Default: 100."""
    absolute_tolerance: NotRequired[float]
    """Numbers agree within absoluteTolerance + relativeTolerance x |primary's|. Default: 1e-06."""
    relative_tolerance: NotRequired[float]
    """Numbers agree when |a - b| <= absoluteTolerance + relativeTolerance * |a|, a the primary's. Default: 0.0001."""
    min_text_similarity: NotRequired[float]
    """Texts that differ agree when their normalised similarity is at least this. Default: 0.9."""
    sample: NotRequired[float]
    """The share of request ids compared (chosen by a hash of the id). Default: 1.0."""
    protocol: NotRequired[PayloadComparisonProtocol]
    """How answers are read; by default the runtime's (`json`, any JSON, behind a transformer). `torchserve` is `json`'s former name, read as `json`."""


class AnalysisSpec(TypedDict):
    """How a canary or shadow is judged against the model's primary (alerts and `infra analyze`)."""

    window: NotRequired[str]
    """The span compared, ending now (or at `--at`). Default: \"10m\"."""
    min_requests: NotRequired[int]
    """Fewer requests than this, for a version or the primary, is too little to judge. Default: 100."""
    max_error_ratio_increase: NotRequired[float]
    """Allowed rise of the 5xx ratio over the primary's, in absolute points (0.01 = 1 %). Default: 0.01."""
    max_latency_increase_percent: NotRequired[float]
    """Allowed rise of p95 latency over the primary's, in percent of the primary's. Default: 20."""
    max_time_to_first_token_increase_percent: NotRequired[float]
    """LLM engines: allowed rise of p95 time to first token over the primary's, in percent of the primary's (runtimes with a time-to-first-token histogram only). Default: 20."""
    max_time_per_output_token_increase_percent: NotRequired[float]
    """LLM engines: allowed rise of p95 time per output token over the primary's, in percent of the primary's (runtimes with a time-per-output-token histogram only). Default: 20."""
    payloads: NotRequired[PayloadComparison]
    """Compare the shadows' answers with the primary's."""


class ShadowFirst(TypedDict):
    """A dark launch before the first step: the candidate gets a copy of requests; none of its answers reach a user."""

    mirror_percent: float
    """The share of requests mirrored to the candidate while it is a shadow (1 to 100)."""
    duration: NotRequired[str]
    """The least time in the shadow phase before the first step (at least analysis.window); by default the rollout's interval."""


class RolloutStatus(TypedDict):
    """Where the rollout stands: written by `python -m infra rollout` only (remove it to restart)."""

    phase: RolloutStatusPhase
    """shadow (mirrored, before the first step), canary (at a step), promoted or rolled-back (finished)."""
    step: int
    """The step the candidate is at, from 1 (steps[0]); 0 in the shadow phase (and after a rollback from it)."""
    primary: str
    """The version with the most live weight when the rollout started."""
    baseline: dict[str, int]
    """The live weights of the versions other than the candidate when the rollout started: they shrink in proportion at each step, and are restored by a rollback."""
    since: str
    """When the rollout reached its phase and step (RFC 3339)."""
    failures: NotRequired[int]
    """Failing verdicts in a row at this step. Default: 0."""
    failed_at: NotRequired[str]
    """When the last failing verdict was counted (a run at that time counts it once)."""
    decision: RolloutStatusDecision
    """The last decision written."""
    reason: NotRequired[str]
    """Why, with the figures. Default: \"\"."""
    paused: NotRequired[str]
    """Written when the candidate's weights are not what the rollout last wrote (a person moved them): nothing changes until this key is removed (the rollout then resumes, its step's weights back)."""


class RolloutSpec(TypedDict):
    """A candidate version taken step by step to all of the model's traffic by `python -m infra rollout`."""

    candidate: str
    """The version rolled out: one of the model's versions, not its primary."""
    steps: list[int]
    """The candidate's live weight at each step, strictly increasing within 1..99; after the last it takes 100."""
    interval: str
    """The least time at a step before the next (at least analysis.window)."""
    failure_limit: NotRequired[int]
    """Failing verdicts in a row before the rollback. Default: 1."""
    shadow_first: NotRequired[ShadowFirst]
    """{mirrorPercent, duration}: a dark launch before the first step."""
    retire_previous: NotRequired[bool]
    """After promotion, remove the previous primary from versions (false: keep it, at weight 0). Default: false."""
    status: NotRequired[RolloutStatus]
    """Where the rollout stands: written by `python -m infra rollout` only, never by hand (remove it to restart the rollout; remove status.paused to resume one)."""


class Batching(TypedDict):
    """Server-side batching (TF Serving's BatchingParameters)."""

    max_batch_size: NotRequired[int]
    """The largest batch (max_batch_size). Default: 32."""
    batch_timeout_micros: NotRequired[int]
    """How long a batch waits to fill, in microseconds (batch_timeout_micros). Default: 1000."""
    max_enqueued_batches: NotRequired[int]
    """Batches queued at most (max_enqueued_batches). Default: 100."""
    num_batch_threads: NotRequired[int]
    """Threads processing batches (num_batch_threads). Default: 4."""
    pad_variable_length_inputs: NotRequired[bool]
    """Pad inputs of different lengths to batch them (pad_variable_length_inputs). Default: false."""


class Tensor(TypedDict):
    name: str
    """The tensor's name in the model."""
    data_type: TensorDataType
    """FP32, INT64, STRING, ... (Triton's TYPE_ without the prefix)."""
    dims: list[int]
    """Shape without the batch dimension; -1 for a variable size."""


class DynamicBatching(TypedDict):
    preferred_batch_size: NotRequired[list[int]]
    """Batch sizes the batcher aims for."""
    max_queue_delay_microseconds: NotRequired[int]
    """How long a request may wait for a batch, in microseconds. Default: 0."""


class InstanceGroup(TypedDict):
    count: NotRequired[int]
    """Instances in the group. Default: 1."""
    kind: NotRequired[InstanceGroupKind]
    """gpu when the model has a GPU, else cpu."""


class ProbeSpec(TypedDict):
    """One health check: GET `path` (HTTP 200-399 passes), or a TCP connect when `path` is unset."""

    path: NotRequired[str]
    """HTTP path to GET; a TCP check when unset."""
    port: NotRequired[int]
    """The port to check; the serving port when unset."""
    timeout_seconds: NotRequired[int]
    """How long one probe may take. Default: 5."""
    failure_threshold: NotRequired[int]
    """Failed probes in a row before the pod is unready (or, for liveness, restarted). Default: 3."""


class MetricsSpec(TypedDict):
    port: NotRequired[int]
    """Where the server publishes metrics; the serving port when unset."""
    path: NotRequired[str]
    """The path the metrics are served at. Default: \"/metrics\"."""
    queue_gauge: NotRequired[str]
    """The server's gauge of requests waiting (e.g. TGI's tgi_queue_size), for autoscaling.queueDepth."""
    time_to_first_token_histogram: NotRequired[str]
    """The server's histogram of time to first token in seconds, named without _bucket (a vLLM-compatible server's vllm:time_to_first_token_seconds): token-latency rules, alerts, analysis and autoscaling.timeToFirstTokenP90."""
    time_per_output_token_histogram: NotRequired[str]
    """The server's histogram of each request's time per output token in seconds, named without _bucket: token-latency rules, alerts and analysis."""


class ExampleSpec(TypedDict):
    path: str
    """Where one inference request is POSTed."""
    body: NotRequired[dict[str, Any]]
    """Its JSON body."""


class Model(TypedDict):
    """One of: tfserving, torchserve, triton, triton-llm, mlserver, vllm, sglang, mindie, custom, chosen by `runtime`."""

    name: str
    """Served at <name>.<domain>; also the Kubernetes name prefix."""
    runtime: ModelRuntime
    """TF Serving: a SavedModel; REST 8501, gRPC 8500."""
    versions: list[ModelVersion]
    """At least one version; live ones (weight) split traffic, shadows (mirrorPercent) get copies."""
    replicas: NotRequired[int]
    """Pods per version (a version may override it); not with an autoscaling range. Default: 1."""
    image: NotRequired[str]
    """Overrides the runtime's pinned default image."""
    resources: NotRequired[Resources]
    """requests/limits with cpu/memory for the server container; unset keys keep the runtime's defaults."""
    env: NotRequired[list[EnvVar]]
    """[{name, value}] added to the server container; a version's env merges with it."""
    args: NotRequired[list[str]]
    """Appended to the generated server arguments."""
    gpu: NotRequired[Gpu]
    """none, exclusive, vgpu or shared: a mode alone (gpu: exclusive) or {mode, ...} with its settings."""
    npu: NotRequired[NpuSpec]
    """Ascend NPUs through HAMi instead of NVIDIA GPUs: a chip type alone (npu: Ascend910B3, one whole NPU) or {type, mode, count, ...}; runtimes mindie, vllm and custom."""
    autoscaling: NotRequired[AutoscalingSpec]
    """Scales each version between minReplicas and maxReplicas (a shadow from 1, or 0 where the model sleeps; a version may set its own bounds within these: versions[].autoscaling)."""
    transformer: NotRequired[TransformerSpec]
    """A pre/post-processing container in front of the server, in the same pod."""
    download_size: NotRequired[str]
    """Size of the volume downloaded model files go to (s3, gs, http(s), hf), and the ephemeral storage the download requests, so the pod is scheduled on a node with room for it. Default: \"20Gi\"."""
    protection: NotRequired[Protection]
    """Rate limit, client access, JWT and circuit breaking."""
    timeout: NotRequired[str]
    """Request timeout at the gateway. Default: \"60s\"."""
    routing: NotRequired[ModelRouting]
    """How the gateway spreads a version's requests over its pods: virtual-service (Istio, round robin) or inference-pool (LLM engines: an endpoint picker per version chooses the pod by its queue, KV cache, loaded LoRA adapters and the prompt's cached prefix; a Gateway API HTTPRoute). Default: \"virtual-service\"."""
    inference_pool: NotRequired[InferencePoolSpec]
    """With routing inference-pool: the pickers' scorers, size and failure mode."""
    rollout_timeout: NotRequired[str]
    """How long `pulumi up` waits for a version's pods to be ready; by default the server's startup budget plus 15 minutes for image pulls and downloads."""
    retries: NotRequired[RetryPolicy]
    """Retries at the gateway and in the mesh; perTryTimeout defaults to timeout, so a slow answer is never cut early."""
    analysis: NotRequired[AnalysisSpec]
    """How canaries and shadows are judged against the primary: alerts and `infra analyze`."""
    calls: NotRequired[list[str]]
    """Other models of the stack this model's code calls: each gets <MODEL>_URL in the containers' environment, and access is opened for exactly these calls."""
    cache: NotRequired[bool]
    """Keep every version's files (and their adapters') on the cache nodes' local disk (platform.modelCache): pods read them there instead of downloading them (a version may say otherwise). Default: false."""
    rollout: NotRequired[RolloutSpec]
    """{candidate, steps, interval, ...}: a version taken step by step to all the traffic by `python -m infra rollout`, each step gated by analyze's verdict (docs/rollouts.md); its status is the command's to write."""
    batching: NotRequired[Batching]
    """Turns server-side batching on. Only with runtime tfserving."""
    platform_config: NotRequired[str]
    """A PlatformConfigMap in protobuf text, passed to --platform_config_file as is. Only with runtime tfserving."""
    mar_file: NotRequired[str]
    """The archive in the model's directory; <name>.mar when unset. Only with runtime torchserve."""
    mar_version: NotRequired[str]
    """The --version the archive was made with: its worker settings are keyed by it. Default: \"1.0\". Only with runtime torchserve."""
    min_workers: NotRequired[int]
    """Workers started for the model (minWorkers). Default: 1. Only with runtime torchserve."""
    max_workers: NotRequired[int]
    """Workers at most (maxWorkers). Default: 1. Only with runtime torchserve."""
    batch_size: NotRequired[int]
    """Requests batched together (batchSize). Default: 1. Only with runtime torchserve."""
    max_batch_delay_ms: NotRequired[int]
    """How long a batch waits to fill, in milliseconds (maxBatchDelay). Default: 100. Only with runtime torchserve."""
    response_timeout_seconds: NotRequired[int]
    """How long a worker may take to answer (responseTimeout). Default: 120. Only with runtime torchserve."""
    job_queue_size: NotRequired[int]
    """Requests queued for the model at most (job_queue_size). Default: 100. Only with runtime torchserve."""
    format: NotRequired[ModelFormat]
    """Picks the backend and the file name in each version directory (model.onnx, ...). Only with runtime triton or mlserver."""
    max_batch_size: NotRequired[int]
    """The model's max_batch_size (0: the model does not batch). Only with runtime triton, triton-llm, mlserver or mindie."""
    inputs: NotRequired[list[Tensor]]
    """Required without configPbtxt: the model's inputs (name, dataType like FP32, dims), at least one, from which its config is generated. Only with runtime triton."""
    outputs: NotRequired[list[Tensor]]
    """Required without configPbtxt: the model's outputs, at least one, shaped as inputs. Only with runtime triton."""
    dynamic_batching: NotRequired[DynamicBatching]
    """Turns Triton's dynamic batcher on. Only with runtime triton."""
    instance_groups: NotRequired[list[InstanceGroup]]
    """Model instances and where they run (instance_group). Only with runtime triton."""
    config_pbtxt: NotRequired[str]
    """A whole config.pbtxt instead of the settings above; checked against ModelConfig. Only with runtime triton."""
    engine: NotRequired[str]
    """The TensorRT-LLM engine's directory inside the model's files (built with the TensorRT-LLM of the pinned image, 0.19.0). Only with runtime triton-llm."""
    tokenizer: NotRequired[str]
    """The Hugging Face tokenizer's directory inside the model's files. Default: \".\". Only with runtime triton-llm."""
    pipeline: NotRequired[ModelPipeline]
    """ensemble: Triton chains preprocessing, tensorrt_llm and postprocessing; bls: the Python model tensorrt_llm_bls calls them. The generate path names it. Default: \"ensemble\". Only with runtime triton-llm."""
    max_queue_delay_microseconds: NotRequired[int]
    """How long a request may wait to be batched with others, in microseconds. Default: 0. Only with runtime triton-llm."""
    max_queue_size: NotRequired[int]
    """Requests queued before Triton rejects new ones (0: no limit). Default: 0. Only with runtime triton-llm."""
    kv_cache_free_gpu_mem_fraction: NotRequired[float]
    """Share of the GPU memory left after loading the engine that the KV cache takes; the backend's 0.9 when unset. Only with runtime triton-llm."""
    batching_strategy: NotRequired[ModelBatchingStrategy]
    """In-flight batching, or V1 (static batches). Default: \"inflight_fused_batching\". Only with runtime triton-llm."""
    decoupled: NotRequired[bool]
    """Decoupled mode, which streaming needs: generate_stream answers token by token. Off, generate only. Default: true. Only with runtime triton-llm."""
    exclude_input_in_output: NotRequired[bool]
    """Answer with the completion alone, no prompt. Default: true. Only with runtime triton-llm."""
    logits_datatype: NotRequired[ModelLogitsDatatype]
    """The data type of the context and generation logits outputs. Default: \"FP32\". Only with runtime triton-llm."""
    preprocessing_instances: NotRequired[int]
    """Instances of the tokenizer model. Default: 1. Only with runtime triton-llm."""
    postprocessing_instances: NotRequired[int]
    """Instances of the detokenizer model. Default: 1. Only with runtime triton-llm."""
    bls_instances: NotRequired[int]
    """Instances of the BLS model (pipeline bls), each serving one request at a time. Default: 1. Only with runtime triton-llm."""
    shm_size: NotRequired[str]
    """Shared memory, through which Triton's Python models exchange tensors. Default: \"2Gi\". Only with runtime triton-llm, vllm or sglang."""
    max_batch_time: NotRequired[float]
    """Adaptive batching: seconds to wait for a batch to fill. Default: 0. Only with runtime mlserver."""
    parallel_workers: NotRequired[int]
    """Inference worker processes (0 runs inference in the server process). Default: 1. Only with runtime mlserver."""
    tensor_parallel_size: NotRequired[int]
    """GPUs (or NPUs) one replica spreads the model over; must match the GPU (or NPU) count. Default: 1. Only with runtime vllm or sglang."""
    max_model_len: NotRequired[int]
    """Longest context (prompt and output) in tokens; the model's own when unset. Only with runtime vllm or sglang."""
    dtype: NotRequired[ModelDtype]
    """The weights' and activations' data type (--dtype). Default: \"auto\". Only with runtime vllm or sglang."""
    gpu_memory_utilization: NotRequired[float]
    """Share of the device the engine takes (weights and KV cache); derived from a vGPU or vNPU memory cap when unset. Only with runtime vllm or sglang."""
    max_loras: NotRequired[int]
    """LoRA adapters one batch serves at once, each a slot of GPU memory the engine reserves inside its share (vLLM --max-loras; SGLang --max-loras-per-batch, one more for the base model); at least the adapters of every version, which is the default. Only with runtime vllm or sglang."""
    max_lora_rank: NotRequired[int]
    """The largest rank of the adapters, which sizes every slot (--max-lora-rank); vLLM takes some ranks only (a config error lists them) and defaults to 16, where a larger adapter fails the start; SGLang reads it from the adapters when unset. Only with runtime vllm or sglang."""
    nodes: NotRequired[int]
    """Nodes one replica spans: a group of this many pods (a leader and workers), each with gpu.count GPUs (or npu.count NPUs), so the engine spans nodes x gpu.count GPUs. Default: 1. Only with runtime vllm or mindie."""
    pipeline_parallel_size: NotRequired[int]
    """Pipeline stages; `nodes` by default. tensorParallelSize x pipelineParallelSize must equal nodes x gpu.count (or npu.count). Only with runtime vllm."""
    world_size: NotRequired[int]
    """NPUs one pod's engine spans (ModelConfig worldSize); npu.count, which it must equal, by default. Only with runtime mindie."""
    max_seq_len: NotRequired[int]
    """Longest sequence, prompt and output, in tokens (maxSeqLen). Default: 2560. Only with runtime mindie."""
    max_input_token_len: NotRequired[int]
    """Longest prompt in tokens (maxInputTokenLen); at most maxSeqLen. Default: 2048. Only with runtime mindie."""
    command: NotRequired[list[str]]
    """Overrides the image's entrypoint. Only with runtime custom."""
    port: NotRequired[int]
    """The HTTP port the server listens on (required). Only with runtime custom."""
    grpc_port: NotRequired[int]
    """A gRPC port beside it, for declared callers in the mesh (a version's Service); the gateway routes HTTP only, so it stays closed to the gateway. Only with runtime custom."""
    readiness: NotRequired[ProbeSpec]
    """When a pod takes requests (required): an HTTP path or a TCP check. Only with runtime custom."""
    liveness: NotRequired[ProbeSpec]
    """When a pod is restarted; a TCP check on the serving port when unset. Only with runtime custom."""
    startup_timeout: NotRequired[str]
    """How long the server may take to become ready once started (readiness is polled). Default: \"30m\". Only with runtime custom."""
    metrics: NotRequired[MetricsSpec]
    """The server's own Prometheus metrics, if it has any. Only with runtime custom."""
    example: NotRequired[ExampleSpec]
    """One inference request (path and body), for the stack's curl line and pipelines. Only with runtime custom."""
    model_dir: NotRequired[str]
    """Where the version's model files are mounted. Default: \"/mnt/models\". Only with runtime custom."""
    writable_paths: NotRequired[list[str]]
    """Directories the server writes to beyond /tmp (the root file system is read-only): an emptyDir each. Only with runtime custom."""
    run_as_user: NotRequired[int]
    """A numeric user to run as, when the image's USER is root or a name: pods run as non-root (required unless nonRootImage). Only with runtime custom."""
    non_root_image: NotRequired[bool]
    """The image's USER is a numeric user other than 0 (e.g. USER 1000), which the kubelet verifies under runAsNonRoot: no runAsUser needed. Default: false. Only with runtime custom."""


class RolloutSettings(TypedDict):
    """How the stack's rollouts reach the cluster (the rollout workflow, docs/rollouts.md)."""

    auto_merge_rollbacks: NotRequired[bool]
    """The rollout workflow merges a pull request whose only traffic moves are rollbacks without waiting for a review (the environment's branch protection still applies); one that also advances, starts or resumes a model is reviewed. false: a person merges every one. Default: false."""


class GraphStep(TypedDict):
    """One step of a node: a call to a model of the stack, or to another node of the graph."""

    name: NotRequired[str]
    """The step's name; an Ensemble keys each step's response by it."""
    model: NotRequired[str]
    """A model of this stack (KServe's serviceName)."""
    node: NotRequired[str]
    """Another node of this pipeline (KServe's nodeName)."""
    data: NotRequired[GraphStepData]
    """In a Sequence, what this step receives: the request, or the previous response."""
    condition: NotRequired[str]
    """A GJSON path: a Switch takes the first step whose path exists in the request; a Sequence step runs only when it exists in the previous response."""
    weight: NotRequired[int]
    """A Splitter's share of requests for this step, in percent."""
    dependency: NotRequired[GraphStepDependency]
    """Hard: a failure of this step ends the node with that failure."""


class GraphNode(TypedDict):
    router_type: GraphNodeRouterType
    """Sequence, Switch, Ensemble or Splitter, as in KServe."""
    steps: list[GraphStep]
    """The node's steps: each names a model of the stack or another node of the graph."""


class PipelineAutoscalingSpec(TypedDict):
    """A pipeline router's scaling: a model's settings, less sleeping at zero (its router must answer the first request itself)."""

    min_replicas: NotRequired[int]
    """1 or more: a pipeline's router does not sleep at zero replicas (0 is refused). Default: 1."""
    max_replicas: NotRequired[int]
    """An autoscaler per version when above minReplicas; equal, that many replicas and no autoscaler. Default: 1."""
    cpu_utilization: NotRequired[int]
    """Target average CPU use, in percent of the requests."""
    memory_utilization: NotRequired[int]
    """Target average memory use, in percent of the requests."""
    gpu_utilization: NotRequired[int]
    """Target average GPU utilisation per pod, in percent (container_gpu_usage)."""
    requests_per_second: NotRequired[float]
    """Target requests per second per pod (requests_per_second)."""
    queue_depth: NotRequired[int]
    """Target requests waiting in the engine's queue per pod (requests_waiting): for LLM engines, whose GPU shows 100 % while the queue grows. Runtimes that export a queue gauge only."""
    time_to_first_token_p90: NotRequired[float]
    """Target p90 time to first token in seconds (time_to_first_token_p90_seconds): each pod's 90th percentile over the last 2 minutes, from the engine's own histogram, averaged over the version's pods. Runtimes with a time-to-first-token histogram only (vllm, sglang; custom with metrics.timeToFirstTokenHistogram)."""
    scale_down_stabilization_seconds: NotRequired[int]
    """How long load must stay low before replicas are removed. Default: 300."""
    idle_after: NotRequired[str]
    """Not for a pipeline: its router does not sleep (refused when set). Default: \"15m\"."""
    wake: NotRequired[PipelineAutoscalingWake]
    """Not for a pipeline: its router does not sleep (refused when set). Default: \"hold\"."""


class PipelineSpec(TypedDict):
    """One pipeline: its graph, and how its router runs."""

    name: str
    """Served at <name>.<domain> and <domain>/pipelines/<name>/."""
    nodes: dict[str, GraphNode]
    """The graph; requests start at the node named root."""
    replicas: NotRequired[int]
    """Router pods; not with an autoscaling range. Default: 1."""
    autoscaling: NotRequired[PipelineAutoscalingSpec]
    """Scales the router on requestsPerSecond or CPU."""
    propagate_headers: NotRequired[list[str]]
    """Request headers (Go regular expressions) the router passes on to every step; its PROPAGATE_HEADERS."""
    timeout: NotRequired[str]
    """Request timeout at the gateway; the router itself stops at 60s. Default: \"60s\"."""
    retries: NotRequired[RetryPolicy]
    """Retries at the gateway, as for a model."""
    resources: NotRequired[Resources]
    """The router container's requests and limits."""
    image: NotRequired[str]
    """Overrides the pinned KServe router image (a mirror)."""
    protection: NotRequired[Protection]
    """Rate limit, client access, JWT and circuit breaking."""
    routing: NotRequired[PipelineRouting]
    """virtual-service, always: the router is no LLM engine an inference pool's picker could read. Default: \"virtual-service\"."""


class GatewayRef(TypedDict):
    """Where the Istio Gateway object lives, and the labels of the gateway pods that serve it. VirtualServices name it as `<namespace>/<name>`; gateway access policies select its pods."""

    namespace: NotRequired[str]
    """The gateway's namespace. Default: \"istio-ingress\"."""
    name: NotRequired[str]
    """The Istio Gateway's name. Default: \"inference-gateway\"."""
    selector: NotRequired[dict[str, str]]
    """Labels of the gateway pods: the Gateway object and gateway access policies select them."""


class NodePorts(TypedDict):
    http: NotRequired[int]
    """The node port serving HTTP. Default: 30080."""
    https: NotRequired[int]
    """The node port serving HTTPS. Default: 30443."""


class GatewayTls(TypedDict):
    secret_name: str
    """A kubernetes.io/tls Secret in the gateway namespace, for *.<domain> and <domain>."""
    https_redirect: NotRequired[bool]
    """Answer plain HTTP with a redirect to HTTPS. Default: true."""


class IngressGatewayConfig(TypedDict):
    enabled: NotRequired[bool]
    """Install Istio; off when the cluster already runs it, with Istio's CNI node agent: model namespaces enforce Pod Security restricted, which the istio-init container injected without it breaks. Default: true."""
    gateway: NotRequired[GatewayRef]
    """The Gateway's namespace and name and the selector labelling the gateway pods."""
    service_type: NotRequired[IngressGatewayServiceType]
    """NodePort on clusters without a load balancer (kind), or `pulumi up` waits for an address forever. Default: \"LoadBalancer\"."""
    node_ports: NotRequired[NodePorts]
    """With NodePort: the fixed node ports."""
    external_traffic_policy: NotRequired[IngressGatewayExternalTrafficPolicy]
    """Local keeps the client's address, which allow and deny lists need (nodes without a gateway pod then get no traffic); Cluster spreads over every node but shows the gateway a node's address. Default: \"Local\"."""
    replicas: NotRequired[int]
    """Gateway pods. Default: 1."""
    trusted_proxies: NotRequired[int]
    """Proxies in front of the gateway that append X-Forwarded-For (1 behind an L7 load balancer); client allow and deny lists see the address before them. Default: 0."""
    tls: NotRequired[GatewayTls]
    """Serves HTTPS with this certificate's Secret (credentialName)."""
    values: NotRequired[dict[str, dict[str, Any]]]
    """Raw chart values laid over the generated ones, by chart: base, istiod, cni, gateway (e.g. `cni: {platform: k3s}` where the node's CNI paths are not the standard ones)."""


class PrometheusConfig(TypedDict):
    enabled: NotRequired[bool]
    """Install Prometheus (autoscaling on custom metrics, KEDA, alerts and dashboards need it). Default: true."""
    namespace: NotRequired[str]
    """Prometheus' namespace. Default: \"monitoring\"."""
    retention: NotRequired[str]
    """How long samples are kept. Default: \"15d\"."""
    retention_size: NotRequired[str]
    """The most disk samples may take (512MB, 40GB); none: no size bound."""
    scrape_interval: NotRequired[str]
    """requests_per_second is a rate over one minute, which needs several samples in it. Default: \"15s\"."""
    storage_size: NotRequired[str]
    """The size of Prometheus' volume. Default: \"50Gi\"."""
    storage_class: NotRequired[str]
    """The volume's StorageClass; none: the cluster's default."""
    subcharts: NotRequired[list[PrometheusSubcharts]]
    """The chart's bundled subcharts to install; none by default."""
    values: NotRequired[dict[str, Any]]
    """Raw chart values laid over the generated ones."""


class PrometheusAdapterConfig(TypedDict):
    enabled: NotRequired[Any]
    """auto: installed while the platform autoscales with HPAs (KEDA reads Prometheus itself). Default: \"auto\"."""
    values: NotRequired[dict[str, Any]]
    """Raw chart values laid over the generated ones."""


class MetricsServerConfig(TypedDict):
    enabled: NotRequired[Any]
    """auto: installed when any model scales on CPU or memory; false on clusters that ship their own. Default: \"auto\"."""
    namespace: NotRequired[str]
    """metrics-server's own namespace, closed like the platform's others; kube-system for clusters that must keep it there (its pods then get a policy of their own, and kube-system no default deny). Default: \"metrics-server\"."""
    kubelet_insecure_tls: NotRequired[bool]
    """Skip verifying kubelets' serving certificates: only for clusters whose kubelets serve self-signed ones (kind). Default: false."""
    values: NotRequired[dict[str, Any]]
    """Raw chart values laid over the generated ones."""


class GrafanaConfig(TypedDict):
    enabled: NotRequired[bool]
    """Dashboards comparing each model's versions. Default: false."""
    namespace: NotRequired[str]
    """Grafana's namespace. Default: \"monitoring\"."""
    admin_password: NotRequired[str]
    """Required when enabled; a Pulumi secret (`pulumi config set --secret --path 'platform.grafana.adminPassword'`). Never left to the chart, which would invent a new one on every render."""
    expose: NotRequired[bool]
    """Serve Grafana through the gateway at grafana.<domain>. Default: false."""
    values: NotRequired[dict[str, Any]]
    """Raw chart values laid over the generated ones."""


class DcgmExporterConfig(TypedDict):
    enabled: NotRequired[bool]
    """Install dcgm-exporter on the GPU nodes. Default: false."""
    namespace: NotRequired[str]
    """dcgm-exporter's namespace. Default: \"gpu-monitoring\"."""
    values: NotRequired[dict[str, Any]]
    """Raw chart values laid over the generated ones."""


class KubeSchedulerImage(TypedDict):
    """Where HAMi's kube-scheduler comes from; its tag is always the cluster's version."""

    registry: NotRequired[str]
    """An air-gapped cluster's mirror of registry.k8s.io. Default: \"registry.k8s.io\"."""
    repository: NotRequired[str]
    """The image's repository in that registry. Default: \"kube-scheduler\"."""


class HamiConfig(TypedDict):
    enabled: NotRequired[bool]
    """GPU sharing with HAMi: lets models use gpu: vgpu. Default: false."""
    namespace: NotRequired[str]
    """HAMi's own namespace, closed like the platform's others; kube-system for clusters that must keep it there (its pods then get policies of their own, and kube-system no default deny). Default: \"hami-system\"."""
    kube_scheduler_image: NotRequired[KubeSchedulerImage]
    """The kube-scheduler image HAMi runs, tagged with kubernetesVersion; point it at an air-gapped mirror."""
    memory_scaling: NotRequired[float]
    """HAMi's deviceMemoryScaling: above 1 hands out more GPU memory than a device has, backed by host memory (idle models), at the risk of out-of-memory errors when they all wake. Default: 1."""
    core_scaling: NotRequired[float]
    """HAMi's deviceCoreScaling: above 1 oversubscribes a GPU's cores. Default: 1."""
    split_count: NotRequired[int]
    """HAMi's deviceSplitCount: the most vGPUs one GPU is split into. Default: 10."""
    values: NotRequired[dict[str, Any]]
    """Raw chart values laid over the generated ones."""


class AscendDevicePluginConfig(TypedDict):
    """HAMi's Ascend device plugin, installed on the NPU nodes when some model runs on Ascend NPUs."""

    image: NotRequired[str]
    """The plugin's image (registry/repository:tag): an air-gapped cluster's mirror of the pinned one. Default: \"docker.io/projecthami/ascend-device-plugin:v1.4.0\"."""
    priority_class_name: NotRequired[str]
    """The plugin pods' PriorityClass (upstream's: NPU pods cannot start on a node without it). Default: \"system-node-critical\"."""
    create_runtime_class: NotRequired[bool]
    """Create the RuntimeClass NPU pods name (platform.npuNodes.runtimeClassName, handler ascend); false where the cluster already has it (Ascend Docker Runtime's or MindCluster's installer made one). Default: true."""


class Toleration(TypedDict):
    key: NotRequired[str]
    """The taint's key; none with Exists: every taint."""
    operator: NotRequired[TolerationOperator]
    """Exists (any value) or Equal (value). Default: \"Exists\"."""
    value: NotRequired[str]
    """The taint's value, with Equal."""
    effect: NotRequired[TolerationEffect]
    """The taint's effect; none: every effect."""


class GpuNodes(TypedDict):
    """Where GPU pods may run: the node labels to select and the taints to tolerate."""

    node_selector: NotRequired[dict[str, str]]
    """Node labels GPU pods select."""
    tolerations: NotRequired[list[Toleration]]
    """Taints of the GPU nodes that GPU pods tolerate."""
    memory_mib: NotRequired[int]
    """Memory of one GPU in MiB; turns a vGPU memoryPercent cap into MiB."""
    count: NotRequired[int]
    """GPU nodes in the cluster, for the capacity plan (with gpusPerNode)."""
    gpus_per_node: NotRequired[int]
    """GPUs on each GPU node, for the capacity plan (with count)."""
    group_topology_key: NotRequired[str]
    """The node label a multi-node group stays within (LeaderWorkerSet's exclusive topology: one group per domain, e.g. a rack's or an NVLink clique's label); null places groups anywhere. Default: \"topology.kubernetes.io/zone\"."""


class NpuPool(TypedDict):
    """Nodes of one NPU type, for the capacity plan."""

    type: NpuPoolType
    """The chip, as HAMi names it (Ascend910B3, Ascend310P, ...)."""
    count: int
    """Nodes with this chip."""
    npus_per_node: int
    """NPUs on each of them."""


class NpuNodes(TypedDict):
    """Where Ascend NPU pods run: the node labels to select, the taints to tolerate, the runtime class that mounts the devices."""

    node_selector: NotRequired[dict[str, str]]
    """Node labels NPU pods (and the Ascend device plugin) select; ascend=on is HAMi's."""
    tolerations: NotRequired[list[Toleration]]
    """Taints of the NPU nodes that NPU pods and the device plugin tolerate."""
    runtime_class_name: NotRequired[str]
    """The RuntimeClass of Ascend Docker Runtime (installed with the device plugin) NPU pods run with. Default: \"ascend\"."""
    soft_slicing: NotRequired[bool]
    """HAMi's hami-vnpu-core on every NPU node (devices.ascend.hamiVnpuCore): lets vNPU models use slicing: soft; a node's hami-vnpu-core annotation overrides it. Default: false."""
    group_topology_key: NotRequired[str]
    """The node label a multi-node group stays within (one group per domain); null places groups anywhere. Default: \"topology.kubernetes.io/zone\"."""
    pools: NotRequired[list[NpuPool]]
    """The cluster's NPU nodes by chip, for the capacity plan: [{type, count, npusPerNode}]."""


class KedaConfig(TypedDict):
    namespace: NotRequired[str]
    """KEDA's namespace, and its HTTP add-on's. Default: \"keda\"."""
    values: NotRequired[dict[str, Any]]
    """Raw values of the keda chart, laid over the generated ones."""
    http_add_on_values: NotRequired[dict[str, Any]]
    """Raw values of the keda-add-ons-http chart, laid over the generated ones."""


class LeaderWorkerSetConfig(TypedDict):
    values: NotRequired[dict[str, Any]]
    """Raw chart values laid over the generated ones."""


class AddressRange(TypedDict):
    cidrs: list[str]
    """CIDR blocks (10.0.0.0/8, 172.18.0.2/32)."""
    ports: list[int]
    """TCP ports on those addresses."""


class NetworkConfig(TypedDict):
    """How the platform's namespaces are closed, and where the cluster's own endpoints are."""

    closed: NotRequired[bool]
    """A default deny (ingress and egress) in every namespace the platform runs pods in, and exactly the edges its workloads need; false leaves them open (the models' namespace stays closed). Default: true."""
    api_server: NotRequired[AddressRange]
    """Where the API server is, as pods' traffic reaches it (after the kubernetes Service's translation: its endpoints, `kubectl get endpoints kubernetes`), and where its calls to webhooks and aggregated APIs come from. The default, the private ranges on 443 and 6443, fits most clusters; narrow it."""
    kubelets: NotRequired[AddressRange]
    """The nodes' kubelets, which metrics-server scrapes (the nodes' addresses)."""


class PayloadComparatorConfig(TypedDict):
    """The comparator's image, resources and memory budget."""

    image: NotRequired[str]
    """Overrides the pinned comparator image (a mirror)."""
    resources: NotRequired[Resources]
    """The comparator's requests and limits (250m/256Mi requested, 1 CPU/512Mi limit by default)."""
    buffer_mib: NotRequired[int]
    """At most this much request and response bodies held while waiting for a pair. Default: 64."""
    max_body_kib: NotRequired[int]
    """A larger body is not compared (counted as dropped, reason body_too_large). Default: 1024."""


class ModelCacheConfig(TypedDict):
    """Model files kept on the cache nodes' local disk, read by the pods of cached versions instead of a download."""

    enabled: NotRequired[bool]
    """Run the cache agent on the cache nodes and let models set `cache` (docs/model-cache.md). Default: false."""
    path: NotRequired[str]
    """Where the files live on each cache node's local disk: <path>/<namespace>/<model>/<version>/. Default: \"/var/lib/inference-models\"."""
    size: NotRequired[str]
    """What each cache node can hold (e.g. 800Gi): the cached versions' downloadSize must fit in it."""
    nodes: NotRequired[ModelCacheNodes]
    """Which nodes cache: the GPU nodes (platform.gpuNodes), the NPU nodes (platform.npuNodes), or both. Default: \"gpu\"."""


class PlatformConfig(TypedDict):
    """The cluster-wide pieces models run on; each can be switched off."""

    kubernetes_version: NotRequired[str]
    """The cluster's version (1.30.4); HAMi runs a kube-scheduler of this version."""
    ingress: NotRequired[IngressGatewayConfig]
    """Istio: the ingress gateway and the mesh's control plane."""
    prometheus: NotRequired[PrometheusConfig]
    """Prometheus, which scrapes the models, the sidecars and the exporters."""
    prometheus_adapter: NotRequired[PrometheusAdapterConfig]
    """prometheus-adapter: the custom metrics (GPU use, QPS, queue depth) HPAs read; needs Prometheus."""
    metrics_server: NotRequired[MetricsServerConfig]
    """metrics-server: the resource metrics API HPAs on CPU and memory read."""
    grafana: NotRequired[GrafanaConfig]
    """Grafana with a dashboard per compared model (off by default)."""
    dcgm_exporter: NotRequired[DcgmExporterConfig]
    """NVIDIA dcgm-exporter: per-GPU metrics on GPU nodes (off by default)."""
    hami: NotRequired[HamiConfig]
    """HAMi: GPU sharing, required for gpu: vgpu and for Ascend NPUs (off by default)."""
    ascend_device_plugin: NotRequired[AscendDevicePluginConfig]
    """HAMi's Ascend device plugin, installed in HAMi's namespace when some model runs on Ascend NPUs."""
    gpu_nodes: NotRequired[GpuNodes]
    """How GPU pods find and tolerate GPU nodes."""
    npu_nodes: NotRequired[NpuNodes]
    """How Ascend NPU pods find and tolerate NPU nodes, their runtime class, and the NPUs declared."""
    autoscaler: NotRequired[PlatformAutoscaler]
    """hpa: an HPA per autoscaled version, custom metrics from prometheus-adapter; keda: a KEDA ScaledObject instead (KEDA installed), which also lets models sleep at zero (minReplicas 0). Default: \"hpa\"."""
    keda: NotRequired[KedaConfig]
    """KEDA, with platform.autoscaler: keda."""
    leader_worker_set: NotRequired[LeaderWorkerSetConfig]
    """LeaderWorkerSet's controller, installed when some model spans several nodes (vLLM's nodes)."""
    network: NotRequired[NetworkConfig]
    """The platform's own namespaces closed edge by edge, and where the API server and kubelets are."""
    payload_comparator: NotRequired[PayloadComparatorConfig]
    """The comparator of shadows' answers, deployed when a model sets analysis.payloads.enabled."""
    model_cache: NotRequired[ModelCacheConfig]
    """{enabled, path, size, nodes}: model files kept on the cache nodes' local disk, read by the pods of the versions models cache (`cache`) instead of a download (docs/model-cache.md)."""


class S3Settings(TypedDict):
    endpoint: NotRequired[str]
    """S3-compatible endpoint URL (MinIO, Ceph, ...); AWS when unset."""
    region: NotRequired[str]
    """The bucket's region."""
    verify_ssl: NotRequired[bool]
    """Verify the endpoint's TLS certificate. Default: true."""
    access_key_id: NotRequired[str]
    """The access key id; set it with pulumi config set --secret --path."""
    secret_access_key: NotRequired[str]
    """The secret access key; set it with pulumi config set --secret --path."""
    anonymous: NotRequired[bool]
    """Read s3:// model files without credentials (a public bucket). Without keys and without this, an s3:// model URI is a config error. Default: false."""


class GcsSettings(TypedDict):
    service_account_key: str
    """The JSON key of a service account (a Pulumi secret)."""


class HuggingFaceSettings(TypedDict):
    token: str
    """An access token for gated or private repositories (a Pulumi secret)."""


class StorageCredentials(TypedDict):
    """Credentials the storage initializer uses, per scheme. Always stored as a Kubernetes Secret."""

    s3: NotRequired[S3Settings]
    """S3 (or S3-compatible) credentials and endpoint for s3:// model URIs."""
    gcs: NotRequired[GcsSettings]
    """A GCS service account key for gs:// model URIs."""
    huggingface: NotRequired[HuggingFaceSettings]
    """A Hugging Face token for hf:// model URIs."""


class InferencePlatformArgs(TypedDict):
    """Everything under `inference-platform:` in a stack file."""

    domain: str
    """Models are served at <model>.<domain> and <domain>/models/<model>/."""
    namespace: NotRequired[str]
    """The namespace model workloads run in. Default: \"service\"."""
    models: NotRequired[list[Model]]
    """The models to serve."""
    rollouts: NotRequired[RolloutSettings]
    """How `infra rollout`'s pull requests are merged (models[].rollout: each model's own)."""
    pipelines: NotRequired[list[PipelineSpec]]
    """Inference graphs over the models (KServe InferenceGraph shapes), served at <pipeline>.<domain>."""
    platform: NotRequired[PlatformConfig]
    """The cluster-wide pieces models run on; each can be switched off."""
    storage: NotRequired[StorageCredentials]
    """Credentials for downloading model files; store the values as Pulumi secrets."""
    shards: NotRequired[list[str]]
    """A platform stack: the stacks holding the environment's models (shards), each naming this one as its platformStack. The platform stack holds no models itself."""
    platform_stack: NotRequired[str]
    """A shard: the platform stack it runs on, as a StackReference names it (<org>/<project>/<stack>); its domain, namespace, platform and storage are that stack's. Only models and pipelines beside it."""


class ModelNamespaceArgs(TypedDict):
    name: str
    istio_namespace: NotRequired[str]
    """Default: \"istio-system\"."""
    host_access: NotRequired[list[str]]
    """Why some model of the namespace needs the node's files (each model's hostPath volumes, serving.host_access): the namespace then enforces privileged, says why in its annotation, and still audits and warns at restricted."""


class StorageAccess(TypedDict):
    """What a pod needs to know about the credentials: the Secret's name and the settings that are not secret. The secret values themselves never pass through the components."""

    secret_name: str
    s3_endpoint: NotRequired[str]
    s3_region: NotRequired[str]
    s3_verify_ssl: NotRequired[bool]
    """Default: true."""
    s3_keys: NotRequired[bool]
    """The Secret holds S3 keys (an AWS shared credentials file, aws-credentials). Default: false."""
    s3_anonymous: NotRequired[bool]
    """Read s3:// model files without credentials (a public bucket); an s3:// model URI needs this or s3Keys. Default: false."""
    gcs_key: NotRequired[bool]
    """Default: false."""
    hf_token: NotRequired[bool]
    """Default: false."""


class MetricsScraper(TypedDict):
    """Who scrapes the model pods: what their network and access policies let in to metrics ports."""

    namespace: str
    pod_labels: NotRequired[dict[str, str]]


class HttpAddOnRef(TypedDict):
    """Where the HTTP add-on runs: what a sleeping version's routes, policies and ScaledObject name."""

    namespace: NotRequired[str]
    """Default: \"keda\"."""


class Workload(TypedDict):
    """Pods that call or are called: selected by their `app` label, running as one service account."""

    name: str
    namespace: str
    service_account: str
    ports: list[int]
    """The serving ports callers may reach."""
    wakes_through: NotRequired[HttpAddOnRef]
    """Set when it sleeps at zero replicas: callers reach it through the interceptor."""


class KedaRef(TypedDict):
    """What a version's ScaledObject needs of the platform: the Prometheus its triggers query, where GPU use comes from, and the HTTP add-on that wakes versions asleep at zero replicas."""

    prometheus_url: str
    """The platform Prometheus' in-cluster URL with its port."""
    gpu_source: NotRequired[KedaRefGpuSource]
    """Source of GPU utilisation: DCGM (whole GPUs) or HAMi (per container, under sharing). Default: \"dcgm\"."""
    http_add_on: NotRequired[HttpAddOnRef]
    """Installed when some model scales to zero."""


class ComparatorRef(TypedDict):
    """Where the payload comparator runs: what the capture filters and access policies name."""

    namespace: str
    """The comparator's namespace (the model namespace)."""


class ModelCacheRef(TypedDict):
    """The node-local model cache, as a model's cached versions see it (platform.modelCache)."""

    path: str
    """Where the files live on each cache node's local disk: <path>/<namespace>/<model>/<version>/."""


class InferenceServiceArgs(TypedDict):
    """Everything an InferenceService needs: the model and where the platform puts it."""

    model: Model
    namespace: str
    domain: str
    gateway: NotRequired[GatewayRef]
    url_scheme: NotRequired[str]
    """Default: \"http\"."""
    gpu_nodes: NotRequired[GpuNodes]
    npu_nodes: NotRequired[NpuNodes]
    storage: NotRequired[StorageAccess]
    """Credentials for downloaded model files."""
    metrics_scraper: NotRequired[MetricsScraper]
    """Prometheus: the only workload that may reach metrics ports."""
    callers: NotRequired[list[Workload]]
    """Models and pipelines the stack declares as calling this model."""
    callees: NotRequired[list[Workload]]
    """The models this model calls (`calls`)."""
    keda: NotRequired[KedaRef]
    """Scale with KEDA (ScaledObjects) instead of HPAs; with its HTTP add-on, a model may sleep at zero."""
    comparator: NotRequired[ComparatorRef]
    """The payload comparator the primary and shadows stream their exchanges to."""
    network: NotRequired[NetworkConfig]
    """Where the API server is: an inference pool's picker watches its pool and pods through it."""
    model_cache: NotRequired[ModelCacheRef]
    """The node-local model cache the model's cached versions read their files from (platform.modelCache; docs/model-cache.md)."""


class PipelineArgs(TypedDict):
    """A pipeline and where the platform puts it; `step_urls` holds each model step's URL."""

    pipeline: PipelineSpec
    namespace: str
    domain: str
    gateway: NotRequired[GatewayRef]
    url_scheme: NotRequired[str]
    """Default: \"http\"."""
    metrics_scraper: NotRequired[MetricsScraper]
    callees: NotRequired[list[Workload]]
    """The models the graph names."""
    step_urls: NotRequired[dict[str, str]]
    """Each model's inference URL in the cluster, by model name."""
    example_body: NotRequired[dict[str, Any]]
    """The body of the `curl` output's request: the example request of the first model."""
    keda: NotRequired[KedaRef]
    """Scale with KEDA (a ScaledObject) instead of an HPA."""


class PayloadComparatorArgs(TypedDict):
    namespace: str
    models: list[Model]
    """The models that compare payloads."""
    config: NotRequired[PayloadComparatorConfig]
    metrics_scraper: NotRequired[MetricsScraper]
