"""The cluster platform layer: ingress, metrics, GPU monitoring and sharing, each switchable."""

from __future__ import annotations

from dataclasses import dataclass, field

import pulumi

from inference_platform.analysis import comparison
from inference_platform.analysis.dashboards import model_dashboard
from inference_platform.platform.dcgm_exporter import DcgmExporter
from inference_platform.platform.grafana import Grafana, GrafanaArgs
from inference_platform.platform.hami import Hami
from inference_platform.platform.ingress_gateway import IngressGateway, IngressGatewayArgs
from inference_platform.platform.keda import Keda
from inference_platform.platform.leader_worker_set import LeaderWorkerSetController
from inference_platform.platform.metrics_server import MetricsServer
from inference_platform.platform.network import PlatformNetwork
from inference_platform.platform.prometheus import SERVER_PORT, Prometheus, RuleFiles
from inference_platform.platform.prometheus_adapter import PrometheusAdapter, PrometheusAdapterArgs
from inference_platform.serving.analysis_spec import AnalysisSpec
from inference_platform.stack.config import StackConfig
from inference_platform.stack.network import platform_edges


@dataclass
class Platform:
    ready: list[pulumi.Resource] = field(default_factory=list)
    """What model resources wait for: istiod, whose webhook checks every Istio object, and HAMi."""
    outputs: dict[str, pulumi.Input[str]] = field(default_factory=dict)
    """The platform's endpoints: the gateway, Prometheus, Grafana, the resource metrics API."""


def comparisons(config: StackConfig) -> list[tuple[comparison.Comparison, AnalysisSpec]]:
    """Each model with more than one version: its primary, candidates and thresholds."""
    return [
        (found, model.analysis)
        for model in config.models
        if (found := comparison.comparison(model, config.namespace)) is not None
    ]


def comparison_rules(config: StackConfig) -> RuleFiles:
    """Per-version recording rules, and alerts comparing each canary and shadow with its primary."""
    payloads = any(model.analysis.payloads.enabled for model in config.models)
    return RuleFiles(
        comparison.recording_rules(payloads), comparison.alert_rules(comparisons(config), pulumi.get_stack())
    )


def deploy_platform(config: StackConfig, parent: pulumi.Resource | None = None) -> Platform:
    platform = config.platform
    result = Platform()
    outputs = result.outputs
    under = pulumi.ResourceOptions(parent=parent)
    prometheus: Prometheus | None = None
    components: list[pulumi.Resource] = []
    if platform.ingress.enabled:
        ingress = IngressGateway("ingress", IngressGatewayArgs(config=platform.ingress, domain=config.domain), under)
        result.ready += ingress.ready
        components.append(ingress)
        outputs |= {"gateway": ingress.gateway, "gatewayService": ingress.service}
    if platform.prometheus.enabled:
        prometheus = Prometheus("prometheus", platform.prometheus, comparison_rules(config), under)
        outputs["prometheus"] = prometheus.url
        components.append(prometheus)
        if platform.installs_prometheus_adapter:
            adapter = PrometheusAdapter(
                "prometheus-adapter",
                PrometheusAdapterArgs(
                    config=platform.prometheus_adapter,
                    namespace=platform.prometheus.namespace,
                    prometheus_url=platform.prometheus.url,
                    prometheus_port=SERVER_PORT,
                    gpu_source=platform.gpu_metrics or "dcgm",
                    queue_series=config.queue_series,
                ),
                opts=pulumi.ResourceOptions(parent=parent, depends_on=[prometheus]),
            )
            components.append(adapter)
    if platform.grafana.enabled:
        dashboards = {
            compared.model: model_dashboard(compared, platform.gpu_metrics) for compared, _ in comparisons(config)
        }
        grafana = Grafana(
            "grafana",
            GrafanaArgs(
                config=platform.grafana,
                prometheus_url=f"{platform.prometheus.url}:{SERVER_PORT}",
                dashboards=dashboards,
                domain=config.domain,
                create_namespace=platform.grafana.namespace != platform.prometheus.namespace,
                gateway=platform.ingress.gateway.qualified_name if platform.grafana.expose else None,
                url_scheme=platform.ingress.url_scheme,
            ),
            after=[*result.ready, *filter(None, [prometheus])],
            opts=under,
        )
        outputs["grafana"] = grafana.url
        components.append(grafana)
    if config.installs_metrics_server:
        metrics_server = MetricsServer("metrics-server", platform.metrics_server, under)
        outputs["resourceMetrics"] = metrics_server.api_group
        components.append(metrics_server)
    if platform.dcgm_exporter.enabled:
        components.append(DcgmExporter("dcgm-exporter", platform.dcgm_exporter, platform.gpu_nodes, under))
    if platform.autoscaler == "keda":
        # Models' ScaledObjects (and InterceptorRoutes) wait for the charts that bring their CRDs;
        # the add-on's interceptor, for istiod, whose injector gives it its sidecar.
        keda = Keda(
            "keda", platform.keda, http_add_on=config.http_add_on is not None, after=list(result.ready), opts=under
        )
        result.ready += keda.ready
        components.append(keda)
    if config.installs_leader_worker_set:
        # LeaderWorkerSets wait for the chart that brings their CRD and webhooks.
        lws = LeaderWorkerSetController("lws", platform.leader_worker_set, under)
        result.ready.append(lws.ready)
        components.append(lws)
    if platform.hami.enabled and platform.kubernetes_version is not None:
        # vGPU pods must meet HAMi's webhook and scheduler: a pod created before them keeps the
        # default scheduler, which cannot place its gpumem and gpucores requests.
        hami = Hami("hami", platform.hami, platform.gpu_nodes, platform.kubernetes_version, under)
        result.ready.append(hami)
        components.append(hami)
    if platform.network.closed:
        # After the components, whose children are the namespaces the policies go into.
        PlatformNetwork(
            "platform-network",
            platform_edges(config),
            config.namespace,
            pulumi.ResourceOptions(parent=parent, depends_on=components),
        )
    return result
