"""Prometheus (the prometheus-community chart, no operator) with a scrape configuration we generate.

Targets are found through Kubernetes service discovery and kept or dropped by annotation, the
convention the seeds use: `prometheus.io/scrape: "true"` opts in, `prometheus.io/scheme`,
`/path` and `/port` say where the metrics are. The chart's default jobs are switched off so the
scrape configuration is exactly what is below, and what the tests run a real Prometheus on.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Any, Literal, get_args

import pulumi
from pydantic import Field

from inference_platform import pins
from inference_platform.config.base import ConfigModel, DNS1123Label, Duration, Labels, Matches, Quantity
from inference_platform.platform import pod_security
from inference_platform.platform.helm import chart, merge_values, own_namespace

RELEASE = "prometheus"
# The chart names the server Service <release>-server when the release name contains "prometheus".
SERVER_SERVICE = f"{RELEASE}-server"
SERVER_PORT = 80

# The chart's built-in jobs (chart 29.x); each is turned off by name, since Pulumi cannot send
# the `scrapeConfigs: null` that would drop them all.
CHART_DEFAULT_JOBS = (
    "prometheus",
    "kubernetes-api-servers",
    "kubernetes-nodes",
    "kubernetes-nodes-cadvisor",
    "kubernetes-service-endpoints",
    "kubernetes-service-endpoints-slow",
    "prometheus-pushgateway",
    "kubernetes-services",
    "kubernetes-pods",
    "kubernetes-pods-slow",
)
# Our label on the server's pods, so network policies can let in Prometheus and nothing else
# from its namespace.
SCRAPER_POD_LABELS = {"inference-platform.io/role": "metrics-scraper"}
# What the server container listens on, behind the Service's SERVER_PORT.
LISTEN_PORT = 9090
Subchart = Literal["alertmanager", "kube-state-metrics", "prometheus-node-exporter", "prometheus-pushgateway"]
SUBCHARTS: tuple[Subchart, ...] = get_args(Subchart)


def _annotation_relabels(kind: str) -> list[dict[str, Any]]:
    """Keep targets whose Service (or pod) opts in, and follow its scheme, path and port annotations."""
    annotation = f"__meta_kubernetes_{kind}_annotation_prometheus_io"
    return [
        {"source_labels": [f"{annotation}_scrape"], "action": "keep", "regex": "true"},
        {
            "source_labels": [f"{annotation}_scheme"],
            "action": "replace",
            "target_label": "__scheme__",
            "regex": "(https?)",
        },
        {
            "source_labels": [f"{annotation}_path"],
            "action": "replace",
            "target_label": "__metrics_path__",
            "regex": "(.+)",
        },
        {
            "source_labels": ["__address__", f"{annotation}_port"],
            "action": "replace",
            "target_label": "__address__",
            "regex": r"(.+?)(?::\d+)?;(\d+)",
            "replacement": "$1:$2",
        },
    ]


def service_endpoints_job() -> dict[str, Any]:
    """Every endpoint of an annotated Service (exporters: dcgm-exporter, HAMi's monitor, ...)."""
    return {
        "job_name": "kubernetes-service-endpoints",
        # Exporters that report for other pods (dcgm-exporter names the pod owning a GPU) keep
        # their own namespace, pod and container labels.
        "honor_labels": True,
        "kubernetes_sd_configs": [{"role": "endpointslice"}],
        "relabel_configs": [
            *_annotation_relabels("service"),
            {"action": "labelmap", "regex": "__meta_kubernetes_service_label_(.+)"},
            {
                "source_labels": ["__meta_kubernetes_namespace"],
                "action": "replace",
                "target_label": "kubernetes_namespace",
            },
            {
                "source_labels": ["__meta_kubernetes_service_name"],
                "action": "replace",
                "target_label": "kubernetes_name",
            },
        ],
    }


def pods_job() -> dict[str, Any]:
    """Every annotated pod. Istio's injector points meshed pods' annotations at the sidecar's
    :15020, which serves the app's metrics and Envoy's (istio_requests_total) together."""
    return {
        "job_name": "kubernetes-pods",
        "honor_labels": True,
        "kubernetes_sd_configs": [{"role": "pod"}],
        "relabel_configs": [
            *_annotation_relabels("pod"),
            {"source_labels": ["__meta_kubernetes_pod_phase"], "action": "drop", "regex": "Pending|Succeeded|Failed"},
            {"action": "labelmap", "regex": "__meta_kubernetes_pod_label_(.+)"},
            {"source_labels": ["__meta_kubernetes_namespace"], "action": "replace", "target_label": "namespace"},
            {"source_labels": ["__meta_kubernetes_pod_name"], "action": "replace", "target_label": "pod"},
        ],
    }


def scrape_configs() -> list[dict[str, Any]]:
    return [service_endpoints_job(), pods_job()]


class MetricsScraper(ConfigModel):
    """Who scrapes the model pods: what their network and access policies let in to metrics ports."""

    namespace: DNS1123Label
    pod_labels: Labels = Field(default_factory=lambda: dict(SCRAPER_POD_LABELS), min_length=1)


class PrometheusConfig(ConfigModel):
    enabled: bool = Field(
        default=True,
        description="Install Prometheus (autoscaling on custom metrics, KEDA, alerts and dashboards need it).",
    )
    namespace: DNS1123Label = Field(default="monitoring", description="Prometheus' namespace.")
    retention: Annotated[
        str, Matches(r"^[0-9]+(ms|s|m|h|d|w|y)$", "a whole number and its unit (ms, s, m, h, d, w or y), such as 15d")
    ] = Field(default="15d", description="How long samples are kept.")
    retention_size: (
        Annotated[
            str,
            Matches(r"^[0-9]+(KB|MB|GB|TB|PB)$", "a whole number and its unit (KB, MB, GB, TB or PB), such as 50GB"),
        ]
        | None
    ) = Field(default=None, description="The most disk samples may take (512MB, 40GB); none: no size bound.")
    scrape_interval: Duration = Field(
        default="15s",
        description="requests_per_second is a rate over one minute, which needs several samples in it.",
    )
    storage_size: Quantity = Field(default="50Gi", description="The size of Prometheus' volume.")
    storage_class: str | None = Field(
        default=None, description="The volume's StorageClass; none: the cluster's default."
    )
    subcharts: list[Subchart] = Field(
        default_factory=list, description="The chart's bundled subcharts to install; none by default."
    )
    values: dict[str, Any] = Field(default_factory=dict, description="Raw chart values laid over the generated ones.")

    @property
    def url(self) -> str:
        return f"http://{SERVER_SERVICE}.{self.namespace}.svc"

    @property
    def scraper(self) -> MetricsScraper:
        return MetricsScraper(namespace=self.namespace)


# Prometheus writes only to its volume and needs no privilege at all.
CONTAINER_SECURITY = {
    "allowPrivilegeEscalation": False,
    "readOnlyRootFilesystem": True,
    "capabilities": {"drop": ["ALL"]},
}


# Rule files that shards write as ConfigMaps (an environment of several stacks): labelled so in
# Prometheus' namespace, gathered by a sidecar into a directory the server loads and its reloader
# watches. The sidecar is the image Grafana's pinned chart gathers dashboards with.
RULES_LABEL = "inference-platform.io/prometheus-rules"
RULES_DIRECTORY = "/etc/prometheus/shards"
RULES_VOLUME = "shard-rules"
RULES_SIDECAR = "shard-rules"


def rules_sidecar(config: PrometheusConfig) -> dict[str, Any]:
    """The chart values that load every rule ConfigMap labelled RULES_LABEL in Prometheus' namespace."""
    mount = {"name": RULES_VOLUME, "mountPath": RULES_DIRECTORY}
    sidecar = {
        "image": pins.K8S_SIDECAR_IMAGE,
        "env": [
            {"name": "LABEL", "value": RULES_LABEL},
            {"name": "LABEL_VALUE", "value": "true"},
            {"name": "FOLDER", "value": RULES_DIRECTORY},
            {"name": "NAMESPACE", "value": config.namespace},
            {"name": "RESOURCE", "value": "configmap"},
        ],
        "resources": {"requests": {"cpu": "10m", "memory": "64Mi"}, "limits": {"cpu": "100m", "memory": "128Mi"}},
        "securityContext": CONTAINER_SECURITY,
        "volumeMounts": [mount],
    }
    return {
        "server": {
            "sidecarContainers": {RULES_SIDECAR: sidecar},
            "extraVolumes": [{"name": RULES_VOLUME, "emptyDir": {}}],
            "extraVolumeMounts": [mount | {"readOnly": True}],
        },
        "configmapReload": {
            "prometheus": {"extraVolumeDirs": [RULES_DIRECTORY], "extraVolumeMounts": [mount | {"readOnly": True}]}
        },
        # The chart's two files (which hold the platform's own rules), and the shards'.
        "serverFiles": {
            "prometheus.yml": {
                "rule_files": [
                    "/etc/config/recording_rules.yml",
                    "/etc/config/alerting_rules.yml",
                    f"{RULES_DIRECTORY}/*.yml",
                ]
            }
        },
    }


def prometheus_values(config: PrometheusConfig, rules: RuleFiles | None = None) -> dict[str, Any]:
    volume: dict[str, Any] = {"enabled": True, "size": str(config.storage_size)}
    if config.storage_class is not None:
        volume["storageClass"] = config.storage_class
    server: dict[str, Any] = {
        # The chart sets no resources; requests and limits on every container (the policy pack).
        "resources": {"requests": {"cpu": "500m", "memory": "2Gi"}, "limits": {"cpu": "2", "memory": "8Gi"}},
        "podLabels": SCRAPER_POD_LABELS,
        # Laid over the chart's own pod context (uid 65534, non-root, fsGroup).
        "securityContext": {"seccompProfile": {"type": "RuntimeDefault"}},
        "containerSecurityContext": CONTAINER_SECURITY,
        "retention": config.retention,
        "persistentVolume": volume,
        "global": {"scrape_interval": config.scrape_interval, "evaluation_interval": config.scrape_interval},
    }
    if config.retention_size is not None:
        server["retentionSize"] = config.retention_size
    return {
        "server": server,
        "configmapReload": {
            "prometheus": {
                "resources": {
                    "requests": {"cpu": "10m", "memory": "32Mi"},
                    "limits": {"cpu": "100m", "memory": "64Mi"},
                },
                "containerSecurityContext": CONTAINER_SECURITY,
            }
        },
        "scrapeConfigs": {job: {"enabled": False} for job in CHART_DEFAULT_JOBS},
        "serverFiles": {
            "prometheus.yml": {"scrape_configs": scrape_configs()},
            # The chart lists both files in rule_files.
            **({} if rules is None else {"recording_rules.yml": rules.recording, "alerting_rules.yml": rules.alerting}),
        },
        **{subchart: {"enabled": subchart in config.subcharts} for subchart in SUBCHARTS},
    }


@dataclass(frozen=True)
class RuleFiles:
    """Prometheus rule files (`{"groups": [...]}`): recording rules and alerting rules."""

    recording: dict[str, Any]
    alerting: dict[str, Any]


class PrometheusArgs(ConfigModel):
    config: PrometheusConfig = Field(default_factory=PrometheusConfig)
    rules: RuleFiles | None = Field(default=None, description="Rule files to load; none by default.")
    rules_from_config_maps: bool = Field(
        default=False,
        description="Also load the rule files other stacks write as ConfigMaps labelled with RULES_LABEL in "
        "Prometheus' namespace (an environment's shards).",
    )


class Prometheus(pulumi.ComponentResource):
    url: pulumi.Output[str]

    def __init__(self, name: str, args: PrometheusArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("inference-platform:platform:Prometheus", name, None, opts)
        config = args.config
        waits = own_namespace(config.namespace, self, pod_security.BASELINE)
        values = prometheus_values(config, args.rules)
        if args.rules_from_config_maps:
            values = merge_values(values, rules_sidecar(config))
        values = merge_values(values, config.values)
        chart(RELEASE, pins.PROMETHEUS, config.namespace, values, pulumi.ResourceOptions(parent=self, depends_on=waits))
        self.url = pulumi.Output.from_input(f"{config.url}:{SERVER_PORT}")
        self.register_outputs({"url": self.url})
