"""LLM-aware routing through the Gateway API Inference Extension: a model's settings for its
inference pools, and each pool's endpoint picker as the pinned `inferencepool` chart deploys it.

Per version, the chart renders an InferencePool selecting the version's serving pods and port, and
its endpoint picker (EPP): a Deployment, Service, config and RBAC. For each request the gateway
asks the picker (Envoy's ext_proc, on EXT_PROC_PORT) which pod of the pool to send it to; the picker
scores the pods on what it reads from their engines' metrics (queue, KV-cache use, loaded LoRA
adapters) and on the prompts it has routed (prefix cache).

The picker runs outside the mesh (no sidecar): the gateway reaches it over the picker's own TLS,
as the chart's DestinationRule for Istio says, and it reads each pod's engine metrics where
Prometheus does, on the sidecar agent's merged-metrics port, which STRICT mTLS leaves in plain text.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal, get_args

import pulumi
import yaml
from pydantic import Field, model_validator

from inference_platform.config.base import ConfigModel, config_problems, duplicate_problems
from inference_platform.platform.ingress_gateway import MERGED_METRICS_PATH, MERGED_METRICS_PORT
from inference_platform.serving.resources import ResourceList, Resources

PickerEngine = Literal["vllm", "sglang"]
"""Whose metric names an engine publishes: the picker's built-in engine configs (vLLM's are its defaults)."""
Scorer = Literal["prefix-cache-scorer", "queue-scorer", "kv-cache-utilization-scorer", "lora-affinity-scorer"]
"""The scorer plugins the pinned picker registers (cmd/epp/runner/runner.go) that need no parameters here."""
SCORERS: tuple[Scorer, ...] = get_args(Scorer)
Routing = Literal["virtual-service", "inference-pool"]
POOL_GROUP = "inference.networking.k8s.io"

# The picker's ports (the chart's Deployment): ext_proc gRPC, gRPC health, its own metrics.
EXT_PROC_PORT = 9002
HEALTH_PORT = 9003
# The picker's image is distroless `nonroot`.
PICKER_USER = 65532
# The plugins file the chart mounts at /config, written by us into the chart's ConfigMap.
PLUGINS_FILE = "inference-platform.yaml"
PICKER_CONFIG_API = "inference.networking.x-k8s.io/v1alpha1"
# The chart names a pool's picker <release, cut to 40>-epp and labels its pods with it.
PICKER_NAME_BASE = 40
PICKER_POD_LABEL = "inferencepool"
# ... and every picker's pods with its mode (the chart's modeLabels).
PICKER_MODE_LABELS = {"inference.networking.k8s.io/igw-mode": "inferencepool"}
# SGLang's gauges reach the v1.4.0 picker only through its data layer (an experimental feature
# gate): the metric flags the chart sets for `modelServerType: sglang` are refused by that picker
# (pkg/epp/server/options.go: "configure metrics via engineConfigs in EndpointPickerConfig").
DATA_LAYER_GATE = "dataLayer"
METRICS_SOURCE = "metrics-data-source"
METRICS_EXTRACTOR = "model-server-protocol-metrics"
# The picker's engine configs give SGLang no LoRA metric (its loraSpec is empty).
LORA_ENGINES: tuple[PickerEngine, ...] = ("vllm",)
INJECT_LABEL = "sidecar.istio.io/inject"


class ScorerWeight(ConfigModel):
    type: Scorer = Field(
        description="prefix-cache-scorer: prefers the pod likely to hold the prompt's prefix in its KV cache; "
        "queue-scorer: the shortest waiting queue; kv-cache-utilization-scorer: the emptiest KV cache; "
        "lora-affinity-scorer: a pod with the requested LoRA adapter loaded, or room to load it."
    )
    weight: Annotated[float, Field(gt=0, le=1000)] = Field(
        default=1, description="How much this scorer counts against the others."
    )


DEFAULT_SCORERS = (
    ScorerWeight(type="queue-scorer", weight=2),
    ScorerWeight(type="kv-cache-utilization-scorer", weight=2),
    ScorerWeight(type="prefix-cache-scorer", weight=3),
)
"""The chart's default scheduling profile (its default-plugins.yaml)."""

DEFAULT_PICKER_RESOURCES = Resources(
    requests=ResourceList(cpu="500m", memory="1Gi"),
    limits=ResourceList(cpu="2", memory="4Gi"),
)


class InferencePoolSpec(ConfigModel):
    """The endpoint picker of each of the model's versions, with `routing: inference-pool`."""

    engine: PickerEngine | None = Field(
        default=None,
        description="runtime custom only: whose metric names the image publishes (vllm or sglang), which the "
        "picker reads its queue, KV-cache and LoRA figures by; vLLM and SGLang models name their own.",
    )
    scorers: Annotated[list[ScorerWeight], Field(min_length=1)] = Field(
        default_factory=lambda: list(DEFAULT_SCORERS),
        description="How the picker chooses a pod: its scorers and their weights (the chart's default profile: "
        "queue-scorer 2, kv-cache-utilization-scorer 2, prefix-cache-scorer 3).",
    )
    replicas: Annotated[int, Field(ge=1, le=5)] = Field(
        default=1,
        description="Picker pods per version; above 1 they elect a leader and only it serves (the prefix "
        "cache scorer keeps its index in memory).",
    )
    failure_mode: Literal["FailOpen", "FailClose"] = Field(
        default="FailOpen",
        description="When the picker cannot answer: FailOpen lets the gateway pick a pod itself, FailClose "
        "refuses the request.",
    )
    resources: Resources = Field(
        default=DEFAULT_PICKER_RESOURCES,
        description="The picker container's requests and limits (the chart's own, 4 CPUs and 8Gi, are sized "
        "for thousands of requests a second).",
    )

    @model_validator(mode="after")
    def _distinct_scorers(self) -> InferencePoolSpec:
        problems = duplicate_problems([s.type for s in self.scorers], "scorers[{}].type", "scorer")
        if problems:
            raise config_problems(problems)
        return self


def picker_name(pool: str) -> str:
    """The picker's Deployment, Service and pod label, as the chart names them."""
    return f"{pool[:PICKER_NAME_BASE]}-epp"


def picker_config(spec: InferencePoolSpec, engine: PickerEngine) -> dict[str, Any]:
    """The picker's EndpointPickerConfig: the scorers, weighted, in one profile; for SGLang, the data
    layer that reads SGLang's gauges."""
    plugins: list[dict[str, Any]] = [{"type": s.type} for s in spec.scorers]
    data_layer = engine != "vllm"
    if data_layer:
        plugins += [
            {"type": METRICS_SOURCE},
            {"type": METRICS_EXTRACTOR, "parameters": {"defaultEngine": engine}},
        ]
    profile = {"name": "default", "plugins": [{"pluginRef": s.type, "weight": _number(s.weight)} for s in spec.scorers]}
    config: dict[str, Any] = {
        "apiVersion": PICKER_CONFIG_API,
        "kind": "EndpointPickerConfig",
        "plugins": plugins,
        "schedulingProfiles": [profile],
    }
    if data_layer:
        config["data"] = {"sources": [{"pluginRef": METRICS_SOURCE, "extractors": [{"pluginRef": METRICS_EXTRACTOR}]}]}
        config["featureGates"] = [DATA_LAYER_GATE]
    return config


def _number(value: float) -> int | float:
    """A weight as written: 2, not 2.0."""
    return int(value) if float(value).is_integer() else value


def chart_values(spec: InferencePoolSpec, engine: PickerEngine, selector: dict[str, str], port: int) -> dict[str, Any]:
    """The `inferencepool` chart's values for one version's pool: its pods and port, Istio as the
    provider (a DestinationRule for the picker's TLS), the picker's config, size and metrics."""
    text = yaml.safe_dump(picker_config(spec, engine), sort_keys=False)
    return {
        "inferencePool": {
            "modelServers": {"matchLabels": dict(selector)},
            "targetPorts": [{"number": port}],
            # The chart's other types set metric flags the v1.4.0 picker refuses: SGLang's gauges go
            # through the config's data layer instead.
            "modelServerType": "vllm",
        },
        "provider": {"name": "istio"},
        "inferenceExtension": {
            "replicas": spec.replicas,
            "failureMode": spec.failure_mode,
            "image": {"pullPolicy": "IfNotPresent"},
            "resources": spec.resources.over(DEFAULT_PICKER_RESOURCES).to_kubernetes(),
            "pluginsConfigFile": PLUGINS_FILE,
            "pluginsCustomConfig": {PLUGINS_FILE: text},
            "flags": {
                "model-server-metrics-port": MERGED_METRICS_PORT,
                "model-server-metrics-path": MERGED_METRICS_PATH,
            },
        },
    }


def harden_picker(args: pulumi.ResourceTransformArgs) -> pulumi.ResourceTransformResult | None:
    """The picker's pods as the chart leaves them, kept out of the mesh (the gateway speaks the
    picker's own TLS to it) and hardened: the chart sets no security context, and the image runs as
    distroless' nonroot user, writing nothing to disk."""
    props: dict[str, Any] = dict(args.props)
    if args.type_ != "kubernetes:apps/v1:Deployment":
        return None
    template = props["spec"]["template"]
    metadata = template.get("metadata") or {}
    pod = dict(template["spec"])
    pod["securityContext"] = {
        "runAsNonRoot": True,
        "runAsUser": PICKER_USER,
        "runAsGroup": PICKER_USER,
        "seccompProfile": {"type": "RuntimeDefault"},
    }
    container_context = {
        "allowPrivilegeEscalation": False,
        "readOnlyRootFilesystem": True,
        "capabilities": {"drop": ["ALL"]},
    }
    pod["containers"] = [c | {"securityContext": container_context} for c in pod["containers"]]
    labels = (metadata.get("labels") or {}) | {INJECT_LABEL: "false"}
    template = template | {"metadata": metadata | {"labels": labels}, "spec": pod}
    return pulumi.ResourceTransformResult(
        props=props | {"spec": props["spec"] | {"template": template}}, opts=args.opts
    )
