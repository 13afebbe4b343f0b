"""The cluster platform: one component per pinned upstream chart, each with its typed config and a
raw-values escape hatch. Nothing here knows of models or of a stack."""

from inference_platform.platform.dcgm_exporter import DcgmExporter, DcgmExporterConfig
from inference_platform.platform.gpu_nodes import GpuNodes, Toleration
from inference_platform.platform.grafana import Grafana, GrafanaArgs, GrafanaConfig
from inference_platform.platform.hami import Hami, HamiConfig
from inference_platform.platform.ingress_gateway import (
    GatewayRef,
    IngressGateway,
    IngressGatewayArgs,
    IngressGatewayConfig,
)
from inference_platform.platform.metrics_server import MetricsServer, MetricsServerConfig
from inference_platform.platform.prometheus import MetricsScraper, Prometheus, PrometheusConfig, RuleFiles
from inference_platform.platform.prometheus_adapter import (
    PrometheusAdapter,
    PrometheusAdapterArgs,
    PrometheusAdapterConfig,
)

__all__ = [
    "DcgmExporter",
    "DcgmExporterConfig",
    "GatewayRef",
    "GpuNodes",
    "Grafana",
    "GrafanaArgs",
    "GrafanaConfig",
    "Hami",
    "HamiConfig",
    "IngressGateway",
    "IngressGatewayArgs",
    "IngressGatewayConfig",
    "MetricsScraper",
    "MetricsServer",
    "MetricsServerConfig",
    "Prometheus",
    "PrometheusAdapter",
    "PrometheusAdapterArgs",
    "PrometheusAdapterConfig",
    "PrometheusConfig",
    "RuleFiles",
    "Toleration",
]
