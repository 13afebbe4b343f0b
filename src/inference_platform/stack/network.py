"""The platform's edge table: every connection the platform's own pods (program and chart pods,
outside the models' namespace) open or accept, and why. platform/network.py builds the
NetworkPolicies from it; the models' side of the edges that reach them is serving/access.py's.

Read it as the answer to "who talks to whom": each edge is one row of the security review. Each
chart component's rows are one function here, which its entry in stack/platform_components.py
names; `platform_edges` there writes the rows of the components a stack installs, in order.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from urllib.parse import urlsplit

import pulumi

from inference_platform.platform import (
    ascend_device_plugin,
    dcgm_exporter,
    grafana,
    hami,
    ingress_gateway,
    keda,
    leader_worker_set,
    metrics_server,
    model_cache_agent,
    prometheus,
    prometheus_adapter,
)
from inference_platform.platform.ingress_gateway import MERGED_METRICS_PORT
from inference_platform.platform.network import (
    BUILT_IN_NAMESPACE,
    DNS_PORT,
    INTERNET,
    Addresses,
    AllPods,
    Edge,
    Peer,
    Pods,
    pod_groups,
)
from inference_platform.serving import cache_agent, inference_pool
from inference_platform.serving.cached_files import cached_versions
from inference_platform.serving.payload_capture import COMPARATOR_METRICS_PORT
from inference_platform.serving.pipeline.manifests import ROUTER_PORT
from inference_platform.stack.config import StackConfig


def _model_serving_ports(config: StackConfig) -> tuple[int, ...]:
    """What the gateway forwards to in the models' namespace: the ports its routes carry HTTP to
    (models' `http` ports, not their gRPC ports) and the pipelines' router."""
    ports = {model.http_port for model in config.models}
    return tuple(sorted(ports | ({ROUTER_PORT} if config.pipelines else set())))


def _jwks_ports(config: StackConfig) -> tuple[int, ...]:
    """The ports of the models' JWT issuers' key sets (https: 443 unless the URI names one)."""
    uris = [m.protection.jwt.jwks_uri for m in config.models if m.protection.jwt is not None]
    return tuple(sorted({urlsplit(uri).port or 443 for uri in uris}))


def _model_metrics_ports(config: StackConfig) -> tuple[int, ...]:
    """What Prometheus scrapes in the models' namespace: the sidecars' merged metrics, the servers'
    own, and the payload comparator's."""
    ports = {MERGED_METRICS_PORT}
    for model in config.models:
        plan = model.plan(model.primary, config.platform.gpu_nodes)
        if plan.metrics is not None:
            ports.add(plan.metrics.port)
    if any(model.analysis.payloads.enabled for model in config.models):
        ports.add(COMPARATOR_METRICS_PORT)
    return tuple(sorted(ports))


def edge_ports(config: StackConfig) -> dict[str, tuple[int, ...]]:
    """The ports the table opens for a stack's models, by what they are for: what a shard's models
    need the platform stack's table to have opened."""
    return {
        "gatewayPorts": _model_serving_ports(config),
        "metricsPorts": _model_metrics_ports(config),
        "jwksPorts": _jwks_ports(config),
        "sleepingPorts": _sleeping_ports(config),
    }


def _sleeping_ports(config: StackConfig) -> tuple[int, ...]:
    """The HTTP ports of the models that sleep at zero: where the interceptor forwards to."""
    return tuple(sorted({m.http_port for m in config.models if m.autoscaling.scales_to_zero}))


@dataclass
class EdgeTable:
    """The rows being written for one stack, the peers rows share, and which chart components the
    stack installs (their classes: a row that joins two components is written only when both are)."""

    config: StackConfig
    installed: frozenset[type[pulumi.ComponentResource]]
    edges: list[Edge] = field(default_factory=list)

    @property
    def api_server(self) -> Addresses:
        return Addresses("api-server", tuple(self.config.platform.network.api_server.cidrs))

    @property
    def models(self) -> AllPods:
        return AllPods(self.config.namespace)

    @property
    def prometheus(self) -> Pods:
        return Pods.of("prometheus", self.config.platform.prometheus.namespace, prometheus.SCRAPER_POD_LABELS)

    @property
    def interceptor(self) -> Pods | None:
        add_on = self.config.http_add_on
        if add_on is None or keda.Keda not in self.installed:
            return None
        return Pods.of("keda-http-interceptor", add_on.namespace, keda.INTERCEPTOR_POD_LABELS)

    def add(self, source: Peer, destination: Peer, ports: tuple[int, ...], why: str) -> None:
        self.edges.append(Edge(source, destination, ports, why))

    def watches_api(self, pods: Pods, what: str) -> None:
        self.add(pods, self.api_server, tuple(self.config.platform.network.api_server.ports), f"{pods.name} {what}")

    def serves_api_server(self, pods: Pods, port: int, what: str) -> None:
        self.add(self.api_server, pods, (port,), f"the API server calls {what}")

    def scraped(self, pods: Pods | AllPods, ports: tuple[int, ...], what: str) -> None:
        if prometheus.Prometheus in self.installed:
            self.add(self.prometheus, pods, ports, f"Prometheus scrapes {what}")

    def queries_prometheus(self, pods: Pods, why: str) -> None:
        if prometheus.Prometheus in self.installed:
            self.add(pods, self.prometheus, (prometheus.LISTEN_PORT,), why)

    def dns(self) -> list[Edge]:
        """Every platform namespace's way to the cluster's DNS: the rows written last."""
        namespaces = sorted({p.namespace for p in pod_groups(self.edges)} - {self.config.namespace})
        return [Edge(AllPods(ns), AllPods(BUILT_IN_NAMESPACE), (DNS_PORT,), "DNS", ("UDP", "TCP")) for ns in namespaces]


def istio_edges(table: EdgeTable) -> None:
    config = table.config
    gateway_ref = config.platform.ingress.gateway
    istiod = Pods.of("istiod", ingress_gateway.ISTIO_NAMESPACE, ingress_gateway.ISTIOD_POD_LABELS)
    gateway = Pods.of("ingress-gateway", gateway_ref.namespace, gateway_ref.selector)
    table.serves_api_server(istiod, ingress_gateway.ISTIOD_WEBHOOK_PORT, "istiod's sidecar injection and validation")
    table.watches_api(istiod, "watches the cluster's services, pods and Istio objects")
    cni = Pods.of("istio-cni-node", ingress_gateway.ISTIO_NAMESPACE, ingress_gateway.CNI_POD_LABELS)
    table.watches_api(cni, "watches pods to redirect injected pods' traffic (and repair pods it missed)")
    table.scraped(cni, (ingress_gateway.CNI_MONITORING_PORT,), "Istio's CNI node agent")
    interceptor = table.interceptor
    proxies: list[Peer] = [gateway, table.models, *([interceptor] if interceptor else [])]
    for proxy in proxies:
        table.add(proxy, istiod, (ingress_gateway.ISTIOD_XDS_PORT,), "a proxy fetches its config and certificate")
    table.scraped(istiod, (ingress_gateway.ISTIOD_MONITORING_PORT,), "istiod")
    jwks_ports = _jwks_ports(config)
    if jwks_ports:
        # istiod fetches a RequestAuthentication's jwksUri itself and hands the keys to the proxies.
        table.add(istiod, INTERNET, jwks_ports, "istiod fetches JWT issuers' signing keys (jwksUri)")
    table.add(INTERNET, gateway, ingress_gateway.GATEWAY_PORTS, "clients (and load balancers' probes)")
    if config.models or config.pipelines:
        table.add(gateway, table.models, _model_serving_ports(config), "the gateway routes to models")
    if interceptor is not None:
        table.add(gateway, interceptor, (keda.INTERCEPTOR_PROXY_PORT,), "the gateway routes to sleeping models")
    if config.inference_routes is not None:
        pickers = Pods.of("endpoint-pickers", config.namespace, inference_pool.PICKER_MODE_LABELS)
        table.add(gateway, pickers, (inference_pool.EXT_PROC_PORT,), "the gateway asks inference pools' pickers")
    table.scraped(gateway, (MERGED_METRICS_PORT,), "the gateway's proxy")


def prometheus_edges(table: EdgeTable) -> None:
    config = table.config
    table.watches_api(table.prometheus, "discovers its targets (kubernetes_sd)")
    if config.models or config.pipelines:
        table.scraped(table.models, _model_metrics_ports(config), "the models, their sidecars and the comparator")


def prometheus_adapter_edges(table: EdgeTable) -> None:
    platform = table.config.platform
    adapter = Pods.of("prometheus-adapter", platform.prometheus.namespace, prometheus_adapter.POD_LABELS)
    table.serves_api_server(adapter, prometheus_adapter.API_PORT, "the custom metrics API")
    table.watches_api(adapter, "serves an aggregated API (delegated auth) and maps metrics to objects")
    table.queries_prometheus(adapter, "the adapter turns series into custom metrics")


def grafana_edges(table: EdgeTable) -> None:
    config = table.config.platform.grafana
    pods = Pods.of("grafana", config.namespace, grafana.POD_LABELS)
    table.queries_prometheus(pods, "dashboards query it")
    if table.config.sharded:
        table.watches_api(pods, "gathers the shards' dashboards (its sidecar)")
    if config.expose and ingress_gateway.IngressGateway in table.installed:
        gateway_ref = table.config.platform.ingress.gateway
        gateway = Pods.of("ingress-gateway", gateway_ref.namespace, gateway_ref.selector)
        table.add(gateway, pods, (grafana.LISTEN_PORT,), "Grafana is exposed")


def metrics_server_edges(table: EdgeTable) -> None:
    network = table.config.platform.network
    server = Pods.of("metrics-server", table.config.platform.metrics_server.namespace, metrics_server.POD_LABELS)
    table.serves_api_server(server, metrics_server.API_PORT, "the resource metrics API")
    table.watches_api(server, "serves an aggregated API (delegated auth) and lists nodes")
    kubelets = Addresses("kubelets", tuple(network.kubelets.cidrs))
    table.add(server, kubelets, tuple(network.kubelets.ports), "metrics-server reads the kubelets")


def dcgm_exporter_edges(table: EdgeTable) -> None:
    exporter = Pods.of("dcgm-exporter", table.config.platform.dcgm_exporter.namespace, dcgm_exporter.POD_LABELS)
    table.scraped(exporter, (dcgm_exporter.PORT,), "dcgm-exporter's GPU metrics")


def keda_edges(table: EdgeTable) -> None:
    namespace = table.config.platform.keda.namespace
    operator = Pods.of("keda-operator", namespace, keda.OPERATOR_POD_LABELS)
    metrics_api = Pods.of("keda-metrics-apiserver", namespace, keda.METRICS_API_POD_LABELS)
    admission = Pods.of("keda-admission", namespace, keda.ADMISSION_POD_LABELS)
    table.queries_prometheus(operator, "KEDA's triggers query it")
    table.watches_api(operator, "watches ScaledObjects and scales their targets")
    table.serves_api_server(metrics_api, keda.METRICS_API_PORT, "the external metrics API")
    table.watches_api(metrics_api, "serves an aggregated API (delegated auth)")
    table.add(metrics_api, operator, (keda.OPERATOR_PORT,), "the metrics API asks the operator")
    table.serves_api_server(admission, keda.ADMISSION_PORT, "KEDA's validating webhooks")
    table.watches_api(admission, "checks ScaledObjects against the objects they scale")
    interceptor = table.interceptor
    if interceptor is None:
        return
    scaler = Pods.of("keda-http-scaler", namespace, keda.SCALER_POD_LABELS)
    table.add(operator, scaler, (keda.EXTERNAL_SCALER_PORT,), "KEDA asks the add-on's scaler")
    table.add(scaler, interceptor, (keda.INTERCEPTOR_ADMIN_PORT,), "the scaler counts pending requests")
    table.watches_api(scaler, "finds the interceptors' endpoints")
    table.watches_api(interceptor, "watches InterceptorRoutes and endpoints")
    table.watches_api(Pods.of("keda-http-operator", namespace, keda.ADD_ON_OPERATOR_POD_LABELS), "watches routes")
    table.add(table.models, interceptor, (keda.INTERCEPTOR_PROXY_PORT,), "callers reach sleeping models")
    table.add(interceptor, table.models, _sleeping_ports(table.config), "the interceptor forwards to sleeping models")
    table.scraped(interceptor, (MERGED_METRICS_PORT,), "the interceptor's sidecar")


def leader_worker_set_edges(table: EdgeTable) -> None:
    controller = Pods.of("lws-controller", leader_worker_set.NAMESPACE, leader_worker_set.POD_LABELS)
    table.serves_api_server(controller, leader_worker_set.WEBHOOK_PORT, "LWS's webhooks and CRD conversion")
    table.watches_api(controller, "creates groups' pods and Services")


def hami_edges(table: EdgeTable) -> None:
    namespace = table.config.platform.hami.namespace
    scheduler = Pods.of("hami-scheduler", namespace, hami.SCHEDULER_POD_LABELS)
    device_plugin = Pods.of("hami-device-plugin", namespace, hami.DEVICE_PLUGIN_POD_LABELS)
    table.serves_api_server(scheduler, hami.WEBHOOK_PORT, "HAMi's mutating webhook")
    table.watches_api(scheduler, "schedules vGPU pods and binds them")
    table.watches_api(device_plugin, "annotates its node's devices and pods")
    table.watches_api(
        Pods.of("hami-admission-jobs", namespace, hami.ADMISSION_JOB_POD_LABELS), "writes its certificate"
    )
    table.scraped(device_plugin, (hami.MONITOR_PORT,), "HAMi's per-container GPU metrics")


def ascend_device_plugin_edges(table: EdgeTable) -> None:
    platform = table.config.platform
    plugin = Pods.of("hami-ascend-device-plugin", platform.hami.namespace, ascend_device_plugin.POD_LABELS)
    # The kubelet's device-plugin socket is a host path: no network.
    table.watches_api(plugin, "annotates its node's NPUs and the pods it allocates them to")
    if platform.npu_nodes.soft_slicing:
        # Its exporter runs only on soft-slicing nodes.
        table.scraped(plugin, (ascend_device_plugin.MONITOR_PORT,), "HAMi's Ascend device plugin's vNPU metrics")


def model_cache_edges(table: EdgeTable) -> None:
    """The cache agent downloads what the cached versions' storage initializers would, on the same
    ports (to the internet, as theirs: the storage endpoints have no fixed addresses)."""
    config = table.config
    versions = cached_versions(config.models)
    access = config.storage.access(cache_agent.SECRET_NAME) if config.storage is not None else None
    for kind in config.platform.model_cache.kinds:
        agent = Pods.of(cache_agent.daemon_set_name(kind), model_cache_agent.NAMESPACE, cache_agent.pod_labels(kind))
        ports = cache_agent.download_ports([v for v in versions if v.kind == kind], access)
        if ports:
            table.add(agent, INTERNET, ports, f"the {kind} nodes' cache agent downloads the cached models")
        table.scraped(agent, (cache_agent.METRICS_PORT,), f"the {kind} nodes' cache agent's series")
