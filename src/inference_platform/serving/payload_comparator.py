"""The payload comparator: the service that pairs each shadow's answer with the primary's answer to
the same request and counts how often they agree (the `comparator/` package; its image is pinned
in pins.py). Deployed in the model namespace when some model compares payloads.

It runs one replica: both sides of a request must reach the same process to pair, and Envoy
opens each ext_proc stream to any endpoint of the Service, so a second replica would split the
pairs between two joiners that never see each other's half. The capture fails open, so a
comparator that restarts costs the models nothing but the pairs of that moment; hence no
disruption budget either. What it holds is bounded by `bufferMib`; payloads stay in its memory,
never logged, never written.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from types import MappingProxyType
from typing import Annotated, Any, Final

import pulumi
from pydantic import Field

from inference_platform import pins
from inference_platform.config.base import ConfigModel, DNS1123Label, PinnedImage, duration_seconds
from inference_platform.kube import register
from inference_platform.platform.ingress_gateway import MERGED_METRICS_PORT
from inference_platform.platform.prometheus import MetricsScraper
from inference_platform.serving.access import principal, service_account
from inference_platform.serving.analysis_spec import PAYLOAD_PROTOCOL_ALIASES, PayloadProtocol
from inference_platform.serving.config_checksum import config_checksum
from inference_platform.serving.inference_service.pods import CONTAINER_SECURITY
from inference_platform.serving.model_namespace import PART_OF_LABELS
from inference_platform.serving.model_spec import ModelSpecBase
from inference_platform.serving.payload_capture import (
    COMPARATOR,
    COMPARATOR_GRPC_PORT,
    COMPARATOR_METRICS_PORT,
    ComparatorRef,
    captured_versions,
)
from inference_platform.serving.resources import ResourceList, Resources
from inference_platform.serving.runtimes import ModelSpec

CONFIG_DIR = "/etc/inference-comparator"
CONFIG_FILE = "comparator.json"
USER = 65532  # the image's non-root user
# Slack past the model's timeout for the later side of a pair to arrive: a mirrored request is
# sent after its primary's starts, and either may be the slower.
WINDOW_SLACK_SECONDS = 10
# The names the comparator image deployed by default (pins.COMPARATOR_IMAGE, 0.1.0) reads: it was
# released before any JSON was named `json`, and reads that protocol only by its former name,
# which every comparator since still reads (PAYLOAD_PROTOCOL_ALIASES). Written so until the pin moves
# to a release that reads `json`.
DEPLOYED_COMPARATOR_NAMES: Final[Mapping[PayloadProtocol, str]] = MappingProxyType(
    {current: former for former, current in PAYLOAD_PROTOCOL_ALIASES.items()}
)
DEFAULT_RESOURCES = Resources(
    requests=ResourceList(cpu="250m", memory="256Mi"),
    limits=ResourceList(cpu="1", memory="512Mi"),
)


class PayloadComparatorConfig(ConfigModel):
    """The comparator's image, resources and memory budget."""

    image: PinnedImage | None = Field(default=None, description="Overrides the pinned comparator image (a mirror).")
    resources: Resources = Field(
        default=Resources(),
        description="The comparator's requests and limits (250m/256Mi requested, 1 CPU/512Mi limit by default).",
    )
    buffer_mib: Annotated[int, Field(ge=8, le=16_384)] = Field(
        default=64, description="At most this much request and response bodies held while waiting for a pair."
    )
    max_body_kib: Annotated[int, Field(ge=1, le=1_048_576)] = Field(
        default=1024, description="A larger body is not compared (counted as dropped, reason body_too_large)."
    )


class PayloadComparatorArgs(ConfigModel):
    namespace: DNS1123Label
    models: list[ModelSpec] = Field(description="The models that compare payloads.")
    config: PayloadComparatorConfig = Field(default_factory=PayloadComparatorConfig)
    metrics_scraper: MetricsScraper | None = None

    @property
    def ref(self) -> ComparatorRef:
        return ComparatorRef(namespace=self.namespace)

    @property
    def compared(self) -> list[ModelSpecBase]:
        return [model for model in self.models if captured_versions(model)]


def settings(args: PayloadComparatorArgs) -> dict[str, Any]:
    """The comparator's config file: every compared model's primary, shadows, protocol and tolerances."""
    models = []
    for model in args.compared:
        payloads = model.analysis.payloads
        models.append(
            {
                "namespace": args.namespace,
                "model": model.name,
                "protocol": DEPLOYED_COMPARATOR_NAMES.get(model.payload_protocol, model.payload_protocol),
                "primary": model.primary.name,
                "shadows": [v.name for v in model.versions if v.mirror_percent],
                "windowSeconds": int(duration_seconds(model.timeout)) + WINDOW_SLACK_SECONDS,
                "absoluteTolerance": payloads.absolute_tolerance,
                "relativeTolerance": payloads.relative_tolerance,
                "minTextSimilarity": payloads.min_text_similarity,
                "sample": payloads.sample,
            }
        )
    return {
        "maxBufferedBytes": args.config.buffer_mib * 1024 * 1024,
        "maxBodyBytes": args.config.max_body_kib * 1024,
        "models": models,
    }


def _metadata(args: PayloadComparatorArgs, name: str = COMPARATOR) -> dict[str, Any]:
    labels = args.ref.selector | PART_OF_LABELS | {"app.kubernetes.io/name": COMPARATOR}
    return {"name": name, "namespace": args.namespace, "labels": labels}


def config_map(args: PayloadComparatorArgs) -> dict[str, Any]:
    text = json.dumps(settings(args), indent=2, sort_keys=True) + "\n"
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": _metadata(args), "data": {CONFIG_FILE: text}}


def deployment(args: PayloadComparatorArgs, config_text: str) -> dict[str, Any]:
    container = {
        "name": COMPARATOR,
        "image": args.config.image or pins.COMPARATOR_IMAGE,
        "args": [
            "--config",
            f"{CONFIG_DIR}/{CONFIG_FILE}",
            "--grpc-port",
            str(COMPARATOR_GRPC_PORT),
            "--metrics-port",
            str(COMPARATOR_METRICS_PORT),
        ],
        "ports": [
            {"name": "grpc", "containerPort": COMPARATOR_GRPC_PORT, "protocol": "TCP"},
            {"name": "http-metrics", "containerPort": COMPARATOR_METRICS_PORT, "protocol": "TCP"},
        ],
        "resources": args.config.resources.over(DEFAULT_RESOURCES).to_kubernetes(),
        "readinessProbe": {"httpGet": {"path": "/metrics", "port": COMPARATOR_METRICS_PORT}, "periodSeconds": 10},
        "livenessProbe": {"tcpSocket": {"port": COMPARATOR_GRPC_PORT}, "periodSeconds": 10, "failureThreshold": 3},
        "volumeMounts": [{"name": "config", "mountPath": CONFIG_DIR, "readOnly": True}],
        "securityContext": CONTAINER_SECURITY,
        "imagePullPolicy": "Always",
    }
    annotations = {
        "prometheus.io/scrape": "true",
        "prometheus.io/port": str(COMPARATOR_METRICS_PORT),
        "prometheus.io/path": "/metrics",
    } | config_checksum(config_text)  # it reads its config once: a changed config restarts it
    pod = {
        "serviceAccountName": COMPARATOR,
        "automountServiceAccountToken": False,
        "enableServiceLinks": False,
        "securityContext": {"runAsNonRoot": True, "runAsUser": USER, "seccompProfile": {"type": "RuntimeDefault"}},
        "containers": [container],
        "volumes": [{"name": "config", "configMap": {"name": COMPARATOR}}],
    }
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": _metadata(args),
        "spec": {
            "replicas": 1,
            "revisionHistoryLimit": 5,
            "selector": {"matchLabels": args.ref.selector},
            "template": {"metadata": {"labels": _metadata(args)["labels"], "annotations": annotations}, "spec": pod},
        },
    }


def service(args: PayloadComparatorArgs) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": _metadata(args),
        "spec": {
            "type": "ClusterIP",
            "selector": args.ref.selector,
            "ports": [
                # Named grpc: Istio speaks HTTP/2 to it, as the sidecars' gRPC clients need.
                {"name": "grpc", "port": COMPARATOR_GRPC_PORT, "targetPort": "grpc", "protocol": "TCP"},
                {"name": "http-metrics", "port": COMPARATOR_METRICS_PORT, "targetPort": "http-metrics"},
            ],
        },
    }


def _captured(args: PayloadComparatorArgs) -> list[tuple[ModelSpecBase, str]]:
    return [(model, version.name) for model in args.compared for version in captured_versions(model)]


def network_policy(args: PayloadComparatorArgs) -> dict[str, Any]:
    """In: the captured versions' pods to the gRPC port, Prometheus to the metrics; out: nothing
    beyond the namespace's DNS and istiod."""
    grpc = [{"protocol": "TCP", "port": COMPARATOR_GRPC_PORT}]
    ingress: list[dict[str, Any]] = [
        {"from": [{"podSelector": {"matchLabels": {"app": model.name, "version": version}}}], "ports": grpc}
        for model, version in _captured(args)
    ]
    scraper = args.metrics_scraper
    if scraper is not None:
        prometheus = {
            "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": scraper.namespace}},
            "podSelector": {"matchLabels": scraper.pod_labels},
        }
        ports = [{"protocol": "TCP", "port": port} for port in (COMPARATOR_METRICS_PORT, MERGED_METRICS_PORT)]
        ingress.append({"from": [prometheus], "ports": ports})
    spec = {"podSelector": {"matchLabels": args.ref.selector}, "policyTypes": ["Ingress", "Egress"], "ingress": ingress}
    return {"apiVersion": "networking.k8s.io/v1", "kind": "NetworkPolicy", "metadata": _metadata(args), "spec": spec}


def authorization_policy(args: PayloadComparatorArgs) -> dict[str, Any]:
    """The compared models' identities to the gRPC port (a model's versions share one identity:
    the NetworkPolicy is what narrows it to the primary's and shadows' pods)."""
    principals = sorted({principal(args.namespace, model.name) for model in args.compared})
    rules = [
        {
            "from": [{"source": {"principals": principals}}],
            "to": [{"operation": {"ports": [str(COMPARATOR_GRPC_PORT)]}}],
        }
    ]
    return {
        "apiVersion": "security.istio.io/v1",
        "kind": "AuthorizationPolicy",
        "metadata": _metadata(args),
        "spec": {"selector": {"matchLabels": args.ref.selector}, "action": "ALLOW", "rules": rules},
    }


def comparator_manifests(args: PayloadComparatorArgs) -> list[dict[str, Any]]:
    config = config_map(args)
    return [
        service_account(_metadata(args)),
        config,
        deployment(args, config["data"][CONFIG_FILE]),
        service(args),
        network_policy(args),
        authorization_policy(args),
    ]


class PayloadComparator(pulumi.ComponentResource):
    """The comparator's Deployment, Service, config and access policies."""

    TYPE = "inference-platform:serving:PayloadComparator"

    host: pulumi.Output[str]

    def __init__(self, name: str, args: PayloadComparatorArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__(self.TYPE, name, None, opts)
        child = pulumi.ResourceOptions(parent=self, depends_on=opts.depends_on if opts else None)
        for manifest in comparator_manifests(args):
            register(manifest, child)
        self.host = pulumi.Output.from_input(args.ref.host)
        self.register_outputs({"host": self.host})
