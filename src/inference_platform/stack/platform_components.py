"""The platform's chart components, one entry each: the one place that says whether a stack
installs a component, how it is deployed from the stack's config, and which rows it adds to the
platform's edge table. `deploy_platform` (platform_layer.py) and `platform_edges` loop over
COMPONENTS, in its order: the install order, and the order of the table's rows.

A new chart component is its module under platform/ and one entry here (docs/contributing.md).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

import pulumi

from inference_platform.analysis import comparison
from inference_platform.analysis.dashboards import model_dashboard
from inference_platform.platform.ascend_device_plugin import AscendDevicePlugin, AscendDevicePluginArgs
from inference_platform.platform.dcgm_exporter import DcgmExporter, DcgmExporterArgs
from inference_platform.platform.grafana import Grafana, GrafanaArgs
from inference_platform.platform.hami import Hami, HamiArgs
from inference_platform.platform.ingress_gateway import IngressGateway, IngressGatewayArgs
from inference_platform.platform.keda import Keda, KedaArgs
from inference_platform.platform.leader_worker_set import LeaderWorkerSetArgs, LeaderWorkerSetController
from inference_platform.platform.metrics_server import MetricsServer, MetricsServerArgs
from inference_platform.platform.model_cache_agent import ModelCacheAgent, ModelCacheAgentArgs
from inference_platform.platform.network import Edge
from inference_platform.platform.prometheus import SERVER_PORT, Prometheus, PrometheusArgs, RuleFiles
from inference_platform.platform.prometheus_adapter import PrometheusAdapter, PrometheusAdapterArgs
from inference_platform.serving.analysis_spec import AnalysisSpec
from inference_platform.serving.cache_agent import SECRET_NAME, CacheAgentArgs, manifests
from inference_platform.serving.cached_files import cached_versions
from inference_platform.stack import network
from inference_platform.stack.config import StackConfig

ComponentType = type[pulumi.ComponentResource]


@dataclass(frozen=True)
class Deployed:
    """A component as installed, and what it hands the rest of the stack."""

    component: pulumi.ComponentResource
    ready: tuple[pulumi.Resource, ...] = ()
    """What model resources wait for (istiod's webhook, the CRDs' charts, HAMi)."""
    outputs: Mapping[str, pulumi.Input[str]] = field(default_factory=dict)
    """The platform's endpoints it serves (the stack's `platform` output)."""


Installed = Mapping[ComponentType, Deployed]
"""The components deployed so far, by class: what a later one waits for."""


@dataclass(frozen=True)
class PlatformComponent:
    """One chart component of the platform."""

    name: str
    """Its resource name (part of every URN under it)."""
    component: ComponentType
    installs: Callable[[StackConfig], bool]
    """Whether the stack installs it."""
    deploy: Callable[[str, StackConfig, Installed, pulumi.ResourceOptions], Deployed]
    """Builds its args from the stack's config and constructs it, `(name, args, opts)`; ordering
    only through `opts.depends_on`, on components earlier in COMPONENTS."""
    edges: Callable[[network.EdgeTable], None]
    """Writes its rows of the edge table (stack/network.py)."""


def comparisons(config: StackConfig) -> list[tuple[comparison.Comparison, AnalysisSpec]]:
    """Each model with more than one version: its primary, candidates and thresholds."""
    return [
        (found, model.analysis)
        for model in config.models
        if (found := comparison.comparison(model, config.namespace)) is not None
    ]


def comparison_rules(config: StackConfig) -> RuleFiles:
    """Per-version recording rules (the LLM engines' token latency too, where the stack has any), and
    alerts comparing each canary and shadow with its primary. A platform stack's shards write their
    models' alerts themselves (stack/fleet.py)."""
    payloads = any(model.analysis.payloads.enabled for model in config.models)
    recording = comparison.recording_rules(payloads, comparison.stack_token_histograms(config.models))
    compared = [] if config.sharded else comparisons(config)
    return RuleFiles(recording, comparison.alert_rules(compared, pulumi.get_stack()))


def _after(opts: pulumi.ResourceOptions, waits: list[pulumi.Resource]) -> pulumi.ResourceOptions:
    return pulumi.ResourceOptions.merge(opts, pulumi.ResourceOptions(depends_on=waits))


def _ready(installed: Installed, *components: ComponentType) -> list[pulumi.Resource]:
    """What the named components, where installed, hand their dependents."""
    return [resource for c in components if c in installed for resource in installed[c].ready]


def _ingress(name: str, config: StackConfig, _: Installed, opts: pulumi.ResourceOptions) -> Deployed:
    args = IngressGatewayArgs(
        config=config.platform.ingress, domain=config.domain, inference_routes=config.inference_routes
    )
    ingress = IngressGateway(name, args, opts)
    return Deployed(ingress, tuple(ingress.ready), {"gateway": ingress.gateway, "gatewayService": ingress.service})


def _prometheus(name: str, config: StackConfig, _: Installed, opts: pulumi.ResourceOptions) -> Deployed:
    args = PrometheusArgs(
        config=config.platform.prometheus, rules=comparison_rules(config), rules_from_config_maps=config.sharded
    )
    prometheus = Prometheus(name, args, opts)
    return Deployed(prometheus, outputs={"prometheus": prometheus.url})


def _prometheus_adapter(name: str, config: StackConfig, installed: Installed, opts: pulumi.ResourceOptions) -> Deployed:
    platform = config.platform
    args = PrometheusAdapterArgs(
        config=platform.prometheus_adapter,
        namespace=platform.prometheus.namespace,
        prometheus_url=platform.prometheus.url,
        prometheus_port=SERVER_PORT,
        gpu_source=platform.gpu_metrics or "dcgm",
        queue_series=config.queue_series,
        ttft_histograms=config.ttft_histograms,
    )
    return Deployed(PrometheusAdapter(name, args, _after(opts, [installed[Prometheus].component])))


def _grafana(name: str, config: StackConfig, installed: Installed, opts: pulumi.ResourceOptions) -> Deployed:
    platform = config.platform
    # A platform stack's shards write their models' dashboards themselves (stack/fleet.py).
    compared = [] if config.sharded else comparisons(config)
    dashboards = {c.model: model_dashboard(c, platform.gpu_metrics) for c, _ in compared}
    args = GrafanaArgs(
        config=platform.grafana,
        prometheus_url=f"{platform.prometheus.url}:{SERVER_PORT}",
        dashboards=dashboards,
        domain=config.domain,
        create_namespace=platform.grafana.namespace != platform.prometheus.namespace,
        gateway=platform.ingress.gateway.qualified_name if platform.grafana.expose else None,
        url_scheme=platform.ingress.url_scheme,
        dashboards_from_config_maps=config.sharded,
    )
    # istiod (whose webhook checks the VirtualService) and Prometheus (whose namespace it may share).
    prometheus = [installed[Prometheus].component] if Prometheus in installed else []
    grafana = Grafana(name, args, _after(opts, [*_ready(installed, IngressGateway), *prometheus]))
    return Deployed(grafana, outputs={"grafana": grafana.url})


def _metrics_server(name: str, config: StackConfig, _: Installed, opts: pulumi.ResourceOptions) -> Deployed:
    metrics_server = MetricsServer(name, MetricsServerArgs(config=config.platform.metrics_server), opts)
    return Deployed(metrics_server, outputs={"resourceMetrics": metrics_server.api_group})


def _dcgm_exporter(name: str, config: StackConfig, _: Installed, opts: pulumi.ResourceOptions) -> Deployed:
    args = DcgmExporterArgs(config=config.platform.dcgm_exporter, nodes=config.platform.gpu_nodes)
    return Deployed(DcgmExporter(name, args, opts))


def _keda(name: str, config: StackConfig, installed: Installed, opts: pulumi.ResourceOptions) -> Deployed:
    # Models' ScaledObjects (and InterceptorRoutes) wait for the charts that bring their CRDs;
    # the add-on's interceptor, for istiod, whose injector gives it its sidecar.
    args = KedaArgs(config=config.platform.keda, http_add_on=config.http_add_on is not None)
    keda = Keda(name, args, _after(opts, _ready(installed, IngressGateway)))
    return Deployed(keda, tuple(keda.ready))


def _leader_worker_set(name: str, config: StackConfig, _: Installed, opts: pulumi.ResourceOptions) -> Deployed:
    # LeaderWorkerSets wait for the chart that brings their CRD and webhooks.
    lws = LeaderWorkerSetController(name, LeaderWorkerSetArgs(config=config.platform.leader_worker_set), opts)
    return Deployed(lws, (lws.ready,))


def _hami(name: str, config: StackConfig, _: Installed, opts: pulumi.ResourceOptions) -> Deployed:
    # vGPU pods must meet HAMi's webhook and scheduler: a pod created before them keeps the
    # default scheduler, which cannot place its gpumem and gpucores requests.
    platform = config.platform
    if platform.kubernetes_version is None:
        raise ValueError("platform.kubernetesVersion is required with HAMi (the stack config checks this first)")
    args = HamiArgs(
        config=platform.hami,
        nodes=platform.gpu_nodes,
        kubernetes_version=platform.kubernetes_version,
        npu_nodes=platform.npu_nodes if config.uses_npus else None,
    )
    hami = Hami(name, args, opts)
    return Deployed(hami, (hami,))


def _ascend_device_plugin(
    name: str, config: StackConfig, installed: Installed, opts: pulumi.ResourceOptions
) -> Deployed:
    # In HAMi's namespace, reading HAMi's device config: after HAMi's release, which makes both.
    platform = config.platform
    args = AscendDevicePluginArgs(
        config=platform.ascend_device_plugin, namespace=platform.hami.namespace, nodes=platform.npu_nodes
    )
    plugin = AscendDevicePlugin(name, args, _after(opts, [installed[Hami].component]))
    return Deployed(plugin)


def _model_cache(name: str, config: StackConfig, _: Installed, opts: pulumi.ResourceOptions) -> Deployed:
    platform = config.platform
    storage = config.storage
    secret = storage.secret_data() if storage is not None else {}
    args = CacheAgentArgs(
        config=platform.model_cache,
        namespace=config.namespace,
        versions=tuple(cached_versions(config.models)),
        gpu_nodes=platform.gpu_nodes,
        npu_nodes=platform.npu_nodes,
        access=storage.access(SECRET_NAME) if storage is not None else None,
        secret_data={key: pulumi.Output.secret(value) for key, value in sorted(secret.items())} or None,
    )
    return Deployed(ModelCacheAgent(name, ModelCacheAgentArgs(manifests(args)), opts))


COMPONENTS: tuple[PlatformComponent, ...] = (
    PlatformComponent("ingress", IngressGateway, lambda c: c.platform.ingress.enabled, _ingress, network.istio_edges),
    PlatformComponent(
        "prometheus", Prometheus, lambda c: c.platform.prometheus.enabled, _prometheus, network.prometheus_edges
    ),
    PlatformComponent(
        "prometheus-adapter",
        PrometheusAdapter,
        lambda c: c.platform.prometheus.enabled and c.platform.installs_prometheus_adapter,
        _prometheus_adapter,
        network.prometheus_adapter_edges,
    ),
    PlatformComponent("grafana", Grafana, lambda c: c.platform.grafana.enabled, _grafana, network.grafana_edges),
    PlatformComponent(
        "metrics-server",
        MetricsServer,
        lambda c: c.installs_metrics_server,
        _metrics_server,
        network.metrics_server_edges,
    ),
    PlatformComponent(
        "dcgm-exporter",
        DcgmExporter,
        lambda c: c.platform.dcgm_exporter.enabled,
        _dcgm_exporter,
        network.dcgm_exporter_edges,
    ),
    PlatformComponent("keda", Keda, lambda c: c.platform.autoscaler == "keda", _keda, network.keda_edges),
    PlatformComponent(
        "lws",
        LeaderWorkerSetController,
        lambda c: c.installs_leader_worker_set,
        _leader_worker_set,
        network.leader_worker_set_edges,
    ),
    PlatformComponent(
        "hami",
        Hami,
        lambda c: c.platform.hami.enabled and c.platform.kubernetes_version is not None,
        _hami,
        network.hami_edges,
    ),
    PlatformComponent(
        "ascend-device-plugin",
        AscendDevicePlugin,
        lambda c: c.installs_ascend_device_plugin,
        _ascend_device_plugin,
        network.ascend_device_plugin_edges,
    ),
    PlatformComponent(
        "model-cache",
        ModelCacheAgent,
        lambda c: c.platform.model_cache.enabled,
        _model_cache,
        network.model_cache_edges,
    ),
)


def installed(config: StackConfig) -> list[PlatformComponent]:
    """The components the stack installs, in install order."""
    return [entry for entry in COMPONENTS if entry.installs(config)]


def platform_edges(config: StackConfig) -> list[Edge]:
    """The edge table, for one stack: only the rows of what the stack installs, then DNS."""
    components = installed(config)
    table = network.EdgeTable(config, frozenset(entry.component for entry in components))
    for entry in components:
        entry.edges(table)
    return table.edges + table.dns()
