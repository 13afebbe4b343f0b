"""The cluster platform: one component per pinned upstream chart, each with its typed config and a
raw-values escape hatch. Nothing here knows of models or of a stack."""

from inference_platform.platform.ascend_device_plugin import (
    AscendDevicePlugin,
    AscendDevicePluginArgs,
    AscendDevicePluginConfig,
)
from inference_platform.platform.dcgm_exporter import DcgmExporter, DcgmExporterArgs, DcgmExporterConfig
from inference_platform.platform.gpu_nodes import GpuNodes, Toleration
from inference_platform.platform.grafana import Grafana, GrafanaArgs, GrafanaConfig
from inference_platform.platform.hami import Hami, HamiArgs, HamiConfig
from inference_platform.platform.ingress_gateway import (
    GatewayRef,
    IngressGateway,
    IngressGatewayArgs,
    IngressGatewayConfig,
)
from inference_platform.platform.keda import Keda, KedaArgs, KedaConfig
from inference_platform.platform.leader_worker_set import (
    LeaderWorkerSetArgs,
    LeaderWorkerSetConfig,
    LeaderWorkerSetController,
)
from inference_platform.platform.metrics_server import MetricsServer, MetricsServerArgs, MetricsServerConfig
from inference_platform.platform.prometheus import (
    MetricsScraper,
    Prometheus,
    PrometheusArgs,
    PrometheusConfig,
    RuleFiles,
)
from inference_platform.platform.prometheus_adapter import (
    PrometheusAdapter,
    PrometheusAdapterArgs,
    PrometheusAdapterConfig,
)

__all__ = [
    "AscendDevicePlugin",
    "AscendDevicePluginArgs",
    "AscendDevicePluginConfig",
    "DcgmExporter",
    "DcgmExporterArgs",
    "DcgmExporterConfig",
    "GatewayRef",
    "GpuNodes",
    "Grafana",
    "GrafanaArgs",
    "GrafanaConfig",
    "Hami",
    "HamiArgs",
    "HamiConfig",
    "IngressGateway",
    "IngressGatewayArgs",
    "IngressGatewayConfig",
    "Keda",
    "KedaArgs",
    "KedaConfig",
    "LeaderWorkerSetArgs",
    "LeaderWorkerSetConfig",
    "LeaderWorkerSetController",
    "MetricsScraper",
    "MetricsServer",
    "MetricsServerArgs",
    "MetricsServerConfig",
    "Prometheus",
    "PrometheusAdapter",
    "PrometheusAdapterArgs",
    "PrometheusAdapterConfig",
    "PrometheusArgs",
    "PrometheusConfig",
    "RuleFiles",
    "Toleration",
]
