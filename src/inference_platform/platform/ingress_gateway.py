"""The platform's Istio ingress: Istio's base, istiod, CNI and gateway charts, and the shared Gateway.

Every model's VirtualService binds to the one Gateway this creates: a wildcard host for all
models, so adding a model never touches the gateway.
"""

from __future__ import annotations

import json
from typing import Annotated, Any, Literal

import pulumi
from pydantic import Field

from inference_platform import pins
from inference_platform.config.base import ConfigModel, DNS1123Label, DNSSubdomain, Labels
from inference_platform.kube import register
from inference_platform.platform import pod_security
from inference_platform.platform.helm import chart, manifest_file, merge_values, own_namespace

DEFAULT_GATEWAY_NAMESPACE = "istio-ingress"
DEFAULT_GATEWAY_NAME = "inference-gateway"
ISTIO_NAMESPACE = "istio-system"
GATEWAY_RELEASE = "istio-ingressgateway"
CNI_RELEASE = "istio-cni"
# What the chart would derive from the release name without "istio-"; set explicitly as the
# gateway pods' labels, so a different selector cannot leave the Gateway object selecting nothing.
DEFAULT_GATEWAY_SELECTOR = {"istio": "ingressgateway"}
# istiod's pods and ports (the istiod chart): sidecars and gateways fetch config and certificates
# on XDS_PORT, the API server calls its injection and validation webhooks on WEBHOOK_PORT, and
# Prometheus scrapes MONITORING_PORT (its pods' annotation).
ISTIOD_POD_LABELS = {"app": "istiod"}
ISTIOD_XDS_PORT = 15012
ISTIOD_WEBHOOK_PORT = 15017
ISTIOD_MONITORING_PORT = 15014
# The CNI node agent's pods (the cni chart's DaemonSet, on the pod network in sidecar mode) and the
# port Prometheus scrapes (their annotation).
CNI_POD_LABELS = {"k8s-app": "istio-cni-node"}
CNI_MONITORING_PORT = 15014
# Every Istio proxy's agent serves the app's metrics and Envoy's together here, in plain text
# (meshConfig.enablePrometheusMerge), outside Envoy's mTLS and access policies.
MERGED_METRICS_PORT = 15020
MERGED_METRICS_PATH = "/stats/prometheus"
# The gateway's listeners (the Service's targetPorts) and its status port, which load balancers probe.
GATEWAY_PORTS = (80, 443, 15021)


class GatewayRef(ConfigModel):
    """Where the Istio Gateway object lives, and the labels of the gateway pods that serve it.
    VirtualServices name it as `<namespace>/<name>`; gateway access policies select its pods."""

    namespace: DNS1123Label = Field(default=DEFAULT_GATEWAY_NAMESPACE, description="The gateway's namespace.")
    name: DNS1123Label = Field(default=DEFAULT_GATEWAY_NAME, description="The Istio Gateway's name.")
    selector: Labels = Field(
        default_factory=lambda: dict(DEFAULT_GATEWAY_SELECTOR),
        min_length=1,
        description="Labels of the gateway pods: the Gateway object and gateway access policies select them.",
    )

    @property
    def qualified_name(self) -> str:
        return f"{self.namespace}/{self.name}"

    @property
    def pools_name(self) -> str:
        """The Gateway API Gateway that inference-pool routes (HTTPRoutes) attach to: served by the
        same gateway pods as the Istio Gateway, on the same ports."""
        return f"{self.name}-pools"


class GatewayTls(ConfigModel):
    secret_name: DNS1123Label = Field(
        description="A kubernetes.io/tls Secret in the gateway namespace, for *.<domain> and <domain>."
    )
    https_redirect: bool = Field(default=True, description="Answer plain HTTP with a redirect to HTTPS.")


class NodePorts(ConfigModel):
    http: Annotated[int, Field(ge=30000, le=32767)] = Field(default=30080, description="The node port serving HTTP.")
    https: Annotated[int, Field(ge=30000, le=32767)] = Field(default=30443, description="The node port serving HTTPS.")


class IngressGatewayConfig(ConfigModel):
    enabled: bool = Field(
        default=True,
        description="Install Istio; off when the cluster already runs it, with Istio's CNI node agent: model "
        "namespaces enforce Pod Security restricted, which the istio-init container injected without it breaks.",
    )
    gateway: GatewayRef = Field(
        default_factory=GatewayRef,
        description="The Gateway's namespace and name and the selector labelling the gateway pods.",
    )
    service_type: Literal["LoadBalancer", "NodePort", "ClusterIP"] = Field(
        default="LoadBalancer",
        description="NodePort on clusters without a load balancer (kind), or `pulumi up` waits for an address forever.",
    )
    node_ports: NodePorts = Field(default_factory=NodePorts, description="With NodePort: the fixed node ports.")
    external_traffic_policy: Literal["Local", "Cluster"] = Field(
        default="Local",
        description="Local keeps the client's address, which allow and deny lists need (nodes without a gateway "
        "pod then get no traffic); Cluster spreads over every node but shows the gateway a node's address.",
    )
    replicas: Annotated[int, Field(ge=1, le=50)] = Field(default=1, description="Gateway pods.")
    trusted_proxies: Annotated[int, Field(ge=0, le=10)] = Field(
        default=0,
        description="Proxies in front of the gateway that append X-Forwarded-For (1 behind an L7 load balancer); "
        "client allow and deny lists see the address before them.",
    )
    tls: GatewayTls | None = Field(
        default=None, description="Serves HTTPS with this certificate's Secret (credentialName)."
    )
    values: dict[str, dict[str, Any]] = Field(
        default_factory=dict,
        description="Raw chart values laid over the generated ones, by chart: base, istiod, cni, gateway "
        "(e.g. `cni: {platform: k3s}` where the node's CNI paths are not the standard ones).",
    )

    @property
    def url_scheme(self) -> str:
        return "https" if self.tls is not None else "http"


# istiod flips the default validator's failurePolicy to Fail once running. A chart re-rendered
# on every update (helm.v4.Chart, like `helm template`) would render Ignore and conflict with
# that on server-side apply: render what istiod sets.
VALIDATION = {"base": {"validationFailurePolicy": "Fail"}}


def base_values() -> dict[str, Any]:
    return VALIDATION | {"defaultRevision": "default", "global": {"istioNamespace": ISTIO_NAMESPACE}}


# istiod routes an HTTPRoute to an InferencePool only with this on (off by default in Istio 1.30:
# pilot/pkg/features/experimental.go); without it such a route is refused.
INFERENCE_EXTENSION_ENV = "ENABLE_GATEWAY_API_INFERENCE_EXTENSION"
# Istio's GatewayClass (istiod creates it): a Gateway of this class is programmed by istiod.
GATEWAY_CLASS = "istio"
HTTP_PORT, HTTPS_PORT = 80, 443
# The CRDs inference-pool routes need, by the resource names that install them.
CRD_FILES = (("gateway-api-crds", pins.GATEWAY_API_CRDS), ("inference-extension-crds", pins.INFERENCE_EXTENSION_CRDS))


def istiod_values(inference_extension: bool = False) -> dict[str, Any]:
    env = {"ENABLE_NATIVE_SIDECARS": "true"}
    if inference_extension:
        env[INFERENCE_EXTENSION_ENV] = "true"
    return VALIDATION | {
        "global": {"hub": pins.ISTIO_HUB, "tag": pins.ISTIO_VERSION, "istioNamespace": ISTIO_NAMESPACE},
        # Sidecars serve the app's and Envoy's metrics together on :15020, in plain text, so
        # Prometheus scrapes meshed pods without mTLS.
        "meshConfig": {"enablePrometheusMerge": True},
        # Sidecars start as native sidecar containers, before init containers: the storage
        # initializer's downloads then go through a running proxy instead of into a void, and
        # the proxy outlives the server on shutdown. (istiod's own setting is `auto`, which turns
        # them on only from Kubernetes 1.33; the chart reads istiod's env at the top level.)
        "env": env,
        # The chart sets requests only; the policy pack wants limits on every container.
        "resources": {"requests": {"cpu": "500m", "memory": "2Gi"}, "limits": {"cpu": "2", "memory": "4Gi"}},
        # The CNI node agent (cni_values) redirects injected pods' traffic: the injector then adds an
        # unprivileged istio-validation init container instead of istio-init (root, NET_ADMIN and
        # NET_RAW), and the injected pods meet Pod Security `restricted`. (The injector's template
        # reads it as `pilot.cni.enabled`; the chart's values are flat, as with env.)
        "cni": {"enabled": True},
    }


# The CNI node agent's DaemonSet (the cni chart) and the Pod Security level its namespace needs: it
# mounts the node's CNI directories by hostPath and runs as root with NET_ADMIN, NET_RAW, SYS_ADMIN
# and SYS_PTRACE (to enter pods' network namespaces). It acts only on the
# pods istiod injects (the chart's excludeNamespaces keeps kube-system out), and adds itself to the
# node's CNI configuration chain (chained), removing itself when uninstalled.
CNI_NAMESPACE_SECURITY = pod_security.PRIVILEGED


def cni_values() -> dict[str, Any]:
    return {
        "global": {"hub": pins.ISTIO_HUB, "tag": pins.ISTIO_VERSION},
        # The chart sets requests only; the policy pack wants limits on every container.
        "resources": {"requests": {"cpu": "100m", "memory": "100Mi"}, "limits": {"cpu": "500m", "memory": "512Mi"}},
    }


def gateway_values(config: IngressGatewayConfig) -> dict[str, Any]:
    ports: list[dict[str, Any]] = [
        {"name": "status-port", "port": 15021, "targetPort": 15021, "protocol": "TCP"},
        {"name": "http2", "port": 80, "targetPort": 80, "protocol": "TCP"},
        {"name": "https", "port": 443, "targetPort": 443, "protocol": "TCP"},
    ]
    if config.service_type == "NodePort":
        ports[1]["nodePort"] = config.node_ports.http
        ports[2]["nodePort"] = config.node_ports.https
    topology = {"gatewayTopology": {"numTrustedProxies": config.trusted_proxies}}
    service: dict[str, Any] = {"type": config.service_type, "ports": ports}
    if config.service_type != "ClusterIP":
        service["externalTrafficPolicy"] = config.external_traffic_policy
    return {
        "labels": config.gateway.selector,
        # Merged with the chart's own pod annotations (injection template, scraping).
        "podAnnotations": {"proxy.istio.io/config": json.dumps(topology, separators=(",", ":"))},
        "service": service,
        "autoscaling": {"enabled": False},
        "replicaCount": config.replicas,
    }


def gateway_object(config: IngressGatewayConfig, domain: str) -> dict[str, Any]:
    """The Istio Gateway: *.<domain> (one host per model) and <domain> (paths /models/<model>/)."""
    hosts = [f"*.{domain}", domain]
    http: dict[str, Any] = {"port": {"number": 80, "name": "http", "protocol": "HTTP"}, "hosts": hosts}
    servers = [http]
    if config.tls is not None:
        if config.tls.https_redirect:
            http["tls"] = {"httpsRedirect": True}
        servers.append(
            {
                "port": {"number": 443, "name": "https", "protocol": "HTTPS"},
                "hosts": hosts,
                "tls": {"mode": "SIMPLE", "credentialName": config.tls.secret_name},
            }
        )
    return {
        "apiVersion": "networking.istio.io/v1",
        "kind": "Gateway",
        "metadata": {"name": config.gateway.name, "namespace": config.gateway.namespace},
        "spec": {"selector": config.gateway.selector, "servers": servers},
    }


class InferenceRoutes(ConfigModel):
    """What the Gateway for inference-pool routes admits: HTTPRoutes from these namespaces, and with
    TLS, a listener for each of these hosts."""

    namespaces: Annotated[list[DNS1123Label], Field(min_length=1)] = Field(
        description="The namespaces whose HTTPRoutes may attach."
    )
    hosts: list[DNSSubdomain] = Field(
        default_factory=list, description="The hosts served over TLS (a listener each: HTTPS is matched by name)."
    )


def pools_gateway_object(config: IngressGatewayConfig, routes: InferenceRoutes) -> dict[str, Any]:
    """The Gateway API Gateway HTTPRoutes to inference pools attach to, of Istio's class, bound to
    the gateway pods the chart deploys (`addresses` names their Service: Istio's manual deployment,
    so istiod programs those pods, and no second gateway is deployed). Its HTTP listener shares port
    80 with the Istio Gateway's server, whose routes istiod merges with these by host. Over TLS each
    pool-routed model has its own HTTPS listener named by its host: an exact server name, which
    wins over the Istio Gateway's wildcard (and a listener for the shared host would collide with
    it), so such models are served over TLS at their own host only."""
    allowed = {
        "namespaces": {
            "from": "Selector",
            "selector": {
                "matchExpressions": [
                    {"key": "kubernetes.io/metadata.name", "operator": "In", "values": sorted(routes.namespaces)}
                ]
            },
        }
    }
    listeners: list[dict[str, Any]] = []
    if config.tls is None or not config.tls.https_redirect:
        listeners.append({"name": "http", "port": HTTP_PORT, "protocol": "HTTP", "allowedRoutes": allowed})
    if config.tls is not None:
        certificate = {"kind": "Secret", "group": "", "name": config.tls.secret_name}
        listeners += [
            {
                "name": f"https-{index}",
                "hostname": host,
                "port": HTTPS_PORT,
                "protocol": "HTTPS",
                "tls": {"mode": "Terminate", "certificateRefs": [certificate]},
                "allowedRoutes": allowed,
            }
            for index, host in enumerate(sorted(routes.hosts))
        ]
    service = f"{GATEWAY_RELEASE}.{config.gateway.namespace}.svc.cluster.local"
    return {
        "apiVersion": "gateway.networking.k8s.io/v1",
        "kind": "Gateway",
        "metadata": {"name": config.gateway.pools_name, "namespace": config.gateway.namespace},
        "spec": {
            "gatewayClassName": GATEWAY_CLASS,
            "addresses": [{"type": "Hostname", "value": service}],
            "listeners": listeners,
        },
    }


class IngressGatewayArgs(ConfigModel):
    config: IngressGatewayConfig
    domain: DNSSubdomain
    inference_routes: InferenceRoutes | None = Field(
        default=None,
        description="Set when some model is routed through an inference pool: istiod routes to pools, the "
        "Gateway API's and the inference extension's CRDs are installed, and a Gateway API Gateway serves the "
        "HTTPRoutes.",
    )


class IngressGateway(pulumi.ComponentResource):
    """Istio (base, then istiod, then the CNI node agent, then the gateway) and the shared Gateway object."""

    gateway: pulumi.Output[str]
    service: pulumi.Output[str]
    ready: list[pulumi.Resource]
    """What Istio objects must wait for: istiod's validating webhook fails closed until it runs, and
    injected pods' istio-validation fails until the CNI agent runs on their node."""

    def __init__(self, name: str, args: IngressGatewayArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("inference-platform:platform:IngressGateway", name, None, opts)
        config = args.config
        raw = config.values
        # Privileged for the CNI node agent, as Istio installs it; istiod needs no more than baseline.
        system = own_namespace(ISTIO_NAMESPACE, self, CNI_NAMESPACE_SECURITY)
        # No injection label: the gateway's pods ask istiod for the gateway template themselves.
        ingress = own_namespace(config.gateway.namespace, self, pod_security.BASELINE)
        base = chart(
            "istio-base",
            pins.ISTIO_BASE,
            ISTIO_NAMESPACE,
            merge_values(base_values(), raw.get("base", {})),
            pulumi.ResourceOptions(parent=self, depends_on=system),
        )
        routes = args.inference_routes
        istiod = chart(
            "istiod",
            pins.ISTIOD,
            ISTIO_NAMESPACE,
            merge_values(istiod_values(routes is not None), raw.get("istiod", {})),
            pulumi.ResourceOptions(parent=self, depends_on=[base]),
        )
        cni = chart(
            CNI_RELEASE,
            pins.ISTIO_CNI,
            ISTIO_NAMESPACE,
            merge_values(cni_values(), raw.get("cni", {})),
            pulumi.ResourceOptions(parent=self, depends_on=[istiod]),
        )
        after_istiod = pulumi.ResourceOptions(parent=self, depends_on=[*ingress, istiod])
        chart(
            GATEWAY_RELEASE,
            pins.ISTIO_GATEWAY,
            config.gateway.namespace,
            merge_values(gateway_values(config), raw.get("gateway", {})),
            # Its pods get their proxy image from istiod's injector (image: auto); Istio's order puts
            # the CNI before it.
            pulumi.ResourceOptions(parent=self, depends_on=[*ingress, istiod, cni]),
        )
        register(gateway_object(config, args.domain), after_istiod)
        self.ready = [istiod, cni]
        if routes is not None:
            crds = [manifest_file(name, pin, pulumi.ResourceOptions(parent=self)) for name, pin in CRD_FILES]
            register(
                pools_gateway_object(config, routes),
                pulumi.ResourceOptions(parent=self, depends_on=[*ingress, istiod, *crds]),
            )
            # HTTPRoutes and InferencePools wait for their CRDs.
            self.ready += crds
        self.gateway = pulumi.Output.from_input(config.gateway.qualified_name)
        self.service = pulumi.Output.from_input(f"{GATEWAY_RELEASE}.{config.gateway.namespace}.svc.cluster.local")
        self.register_outputs({"gateway": self.gateway, "service": self.service})
