"""Who may reach whom: the one home for the rules that open a path to a workload's pods.

Every workload in the model namespace starts behind the namespace's default deny (nothing in or
out) and STRICT mTLS, so a path exists only where both layers open it:
- the network: the callee's NetworkPolicy lets the caller's pods in on its serving ports, and the
  caller's lets its pods out to the callee's;
- the mesh: the callee's ALLOW AuthorizationPolicy names the caller's service account.
The gateway reaches the port its routes carry HTTP to (a model's gRPC port is for declared callers
only), Prometheus only its metrics ports, and a model or pipeline reaches another only where the
stack declares the call. A model that sleeps at
zero replicas is reached through the HTTP add-on's interceptor: its callers may reach the
interceptor, and the interceptor exactly its live versions' HTTP port.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from pydantic import Field

from inference_platform.config.base import ConfigModel, DNS1123Label
from inference_platform.platform.ingress_gateway import MERGED_METRICS_PORT
from inference_platform.platform.keda import INTERCEPTOR_PROXY_PORT, HttpAddOnRef
from inference_platform.platform.network import AddressRange
from inference_platform.platform.prometheus import MetricsScraper
from inference_platform.serving.inference_pool import EXT_PROC_PORT

TRUST_DOMAIN = "cluster.local"
APP_LABEL = "app"


class Workload(ConfigModel):
    """Pods that call or are called: selected by their `app` label, running as one service account."""

    name: DNS1123Label
    namespace: DNS1123Label
    service_account: DNS1123Label
    # Not strict: a tuple arrives as a list from outputs and JSON.
    ports: tuple[int, ...] = Field(strict=False, description="The serving ports callers may reach.")
    wakes_through: HttpAddOnRef | None = Field(
        default=None, description="Set when it sleeps at zero replicas: callers reach it through the interceptor."
    )

    @property
    def selector(self) -> dict[str, str]:
        return {APP_LABEL: self.name}

    @property
    def principal(self) -> str:
        return principal(self.namespace, self.service_account)


@dataclass(frozen=True)
class Access:
    """Everything that may reach one workload's pods, and the workloads its pods may call."""

    workload: Workload
    gateway_namespace: str
    gateway_account: str
    metrics_ports: tuple[int, ...]
    scraper: MetricsScraper | None = None
    callers: Sequence[Workload] = field(default_factory=tuple)
    callees: Sequence[Workload] = field(default_factory=tuple)
    # The ports the gateway routes to, when not all serving ports: its routes carry HTTP only, so a
    # server's gRPC port stays closed to it (declared callers still reach it in the mesh).
    gateway_ports: tuple[int, ...] | None = None

    @property
    def from_gateway(self) -> tuple[int, ...]:
        return self.workload.ports if self.gateway_ports is None else self.gateway_ports


def principal(namespace: str, service_account: str) -> str:
    """A workload's identity in the mesh, as AuthorizationPolicy `principals` match it."""
    return f"{TRUST_DOMAIN}/ns/{namespace}/sa/{service_account}"


def _ports(ports: Sequence[int]) -> list[dict[str, Any]]:
    return [{"protocol": "TCP", "port": port} for port in ports]


def _namespace(name: str) -> dict[str, Any]:
    return {"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": name}}}


def network_policy(access: Access, metadata: dict[str, Any]) -> dict[str, Any]:
    """Who reaches the workload's pods, and where they may go (on top of the namespace's default deny)."""
    serving = list(access.workload.ports)
    gateway = _ports(access.from_gateway)
    ingress: list[dict[str, Any]] = [{"from": [_namespace(access.gateway_namespace)], "ports": gateway}]
    scraper = access.scraper
    if scraper is not None:
        monitoring = _namespace(scraper.namespace) | {"podSelector": {"matchLabels": scraper.pod_labels}}
        # Istio's merged endpoint (the sidecar agent's port, outside Envoy's mTLS and access
        # policies: this rule is what keeps it to Prometheus) and the server's own.
        scraped = sorted({MERGED_METRICS_PORT, *access.metrics_ports})
        ingress.append({"from": [monitoring], "ports": _ports(scraped)})
    ingress += [
        {"from": [{"podSelector": {"matchLabels": caller.selector}}], "ports": _ports(serving)}
        for caller in access.callers
    ]
    spec: dict[str, Any] = {
        "podSelector": {"matchLabels": access.workload.selector},
        "policyTypes": ["Ingress", "Egress"],
        "ingress": ingress,
    }
    egress = [
        {"to": [{"podSelector": {"matchLabels": callee.selector}}], "ports": _ports(callee.ports)}
        for callee in access.callees
    ]
    # A callee asleep at zero replicas is reached through the interceptor (its shadows still directly).
    egress += [
        {"to": [_interceptor(add_on)], "ports": _ports([INTERCEPTOR_PROXY_PORT])}
        for add_on in dict.fromkeys(c.wakes_through for c in access.callees if c.wakes_through is not None)
    ]
    if egress:
        spec["egress"] = egress
    return {"apiVersion": "networking.k8s.io/v1", "kind": "NetworkPolicy", "metadata": metadata, "spec": spec}


def authorization_policy(access: Access, metadata: dict[str, Any]) -> dict[str, Any]:
    """ALLOW the gateway's service account, and each declared caller's, to the serving ports; nobody else.

    Prometheus gets no rule here: it runs outside the mesh (no sidecar, so no identity a principal
    could match) and scrapes the sidecar agent's merged-metrics port 15020, which Envoy's mTLS and
    access policies do not cover. The NetworkPolicy is what keeps that port to Prometheus."""

    def to(ports: Sequence[int]) -> list[dict[str, Any]]:
        return [{"operation": {"ports": [str(port) for port in ports]}}]

    sources = [(principal(access.gateway_namespace, access.gateway_account), access.from_gateway)]
    sources += [(caller.principal, access.workload.ports) for caller in access.callers]
    rules = [{"from": [{"source": {"principals": [source]}}], "to": to(ports)} for source, ports in sources]
    return {
        "apiVersion": "security.istio.io/v1",
        "kind": "AuthorizationPolicy",
        "metadata": metadata,
        "spec": {"selector": {"matchLabels": access.workload.selector}, "action": "ALLOW", "rules": rules},
    }


def _interceptor(add_on: HttpAddOnRef) -> dict[str, Any]:
    return _namespace(add_on.namespace) | {"podSelector": {"matchLabels": add_on.pod_labels}}


def wake_policies(
    add_on: HttpAddOnRef, selector: dict[str, str], port: int, metadata: dict[str, Any]
) -> list[dict[str, Any]]:
    """The interceptor's way in to one live version of a model that sleeps at zero: its pods on the
    HTTP port in the network, its service account in the mesh; no other version, no other port."""
    network = {
        "apiVersion": "networking.k8s.io/v1",
        "kind": "NetworkPolicy",
        "metadata": metadata,
        "spec": {
            "podSelector": {"matchLabels": selector},
            "policyTypes": ["Ingress"],
            "ingress": [{"from": [_interceptor(add_on)], "ports": _ports([port])}],
        },
    }
    mesh = {
        "apiVersion": "security.istio.io/v1",
        "kind": "AuthorizationPolicy",
        "metadata": metadata,
        "spec": {
            "selector": {"matchLabels": selector},
            "action": "ALLOW",
            "rules": [
                {
                    "from": [{"source": {"principals": [principal(add_on.namespace, add_on.service_account)]}}],
                    "to": [{"operation": {"ports": [str(port)]}}],
                }
            ],
        },
    }
    return [network, mesh]


def egress_policy(
    metadata: dict[str, Any], selector: dict[str, str], to: list[dict[str, Any]], ports: list[int]
) -> dict[str, Any]:
    """One way out for the pods `selector` picks: to the peers `to`, on `ports`."""
    return {
        "apiVersion": "networking.k8s.io/v1",
        "kind": "NetworkPolicy",
        "metadata": metadata,
        "spec": {
            "podSelector": {"matchLabels": selector},
            "policyTypes": ["Egress"],
            "egress": [{"to": to, "ports": _ports(ports)}],
        },
    }


def internet_egress_policy(metadata: dict[str, Any], selector: dict[str, str], ports: list[int]) -> dict[str, Any]:
    """The way out of the cluster on `ports`, for the pods `selector` picks (model and adapter downloads)."""
    return egress_policy(metadata, selector, [{"ipBlock": {"cidr": "0.0.0.0/0"}}, {"ipBlock": {"cidr": "::/0"}}], ports)


def service_account(metadata: dict[str, Any]) -> dict[str, Any]:
    """A workload's identity: the callees' access policies name it, so it is the workload's own.
    Pods never see its token (the platform's workloads do not call the Kubernetes API)."""
    return {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": metadata, "automountServiceAccountToken": False}


def picker_policies(
    picker: dict[str, str],
    pool: dict[str, str],
    gateway: tuple[str, dict[str, str]],
    api_server: AddressRange,
    metadata: tuple[dict[str, Any], dict[str, Any]],
) -> list[dict[str, Any]]:
    """An inference pool's endpoint picker (its pods: `picker`) and the pool's pods (`pool`): the
    gateway asks the picker on its ext_proc port, and nothing else reaches it; the picker reads its
    pool's pods' merged metrics, nothing else of theirs and no other pod's, and watches its pool and
    pods through the API server. The picker is outside the mesh: the network is its only fence."""
    gateway_namespace, gateway_pods = gateway
    picker_metadata, pool_metadata = metadata
    api = [{"ipBlock": {"cidr": cidr}} for cidr in api_server.cidrs]
    picker_policy = {
        "apiVersion": "networking.k8s.io/v1",
        "kind": "NetworkPolicy",
        "metadata": picker_metadata,
        "spec": {
            "podSelector": {"matchLabels": picker},
            "policyTypes": ["Ingress", "Egress"],
            "ingress": [
                {
                    "from": [_namespace(gateway_namespace) | {"podSelector": {"matchLabels": gateway_pods}}],
                    "ports": _ports([EXT_PROC_PORT]),
                }
            ],
            "egress": [
                {"to": [{"podSelector": {"matchLabels": pool}}], "ports": _ports([MERGED_METRICS_PORT])},
                {"to": api, "ports": _ports(api_server.ports)},
            ],
        },
    }
    pool_policy = {
        "apiVersion": "networking.k8s.io/v1",
        "kind": "NetworkPolicy",
        "metadata": pool_metadata,
        "spec": {
            "podSelector": {"matchLabels": pool},
            "policyTypes": ["Ingress"],
            "ingress": [{"from": [{"podSelector": {"matchLabels": picker}}], "ports": _ports([MERGED_METRICS_PORT])}],
        },
    }
    return [picker_policy, pool_policy]
