"""The platform's own network, closed edge by edge: a default deny in every namespace the
platform's charts run pods in, and one NetworkPolicy per group of pods, built from a table of
edges (stack/network.py declares the table; models' policies are serving/access.py's).

A NetworkPolicy cannot name the API server or the nodes by label, so those are address ranges,
settings of the cluster (`platform.network`). The kubelet's probes need no edge: a pod's own node
always reaches it (Kubernetes' NetworkPolicy semantics).
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Annotated, Any, Literal

import pulumi
from pydantic import AfterValidator, Field

from inference_platform.config.base import ConfigModel, SchemaRule
from inference_platform.kube import register

Port = Annotated[int, Field(ge=1, le=65535)]
PRIVATE_RANGES = ("10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16")
DNS_PORT = 53
BUILT_IN_NAMESPACE = "kube-system"
NAME_LABEL = "kubernetes.io/metadata.name"
PART_OF_LABELS = {"app.kubernetes.io/part-of": "inference-platform"}


def _cidr(value: str) -> str:
    try:
        return str(ipaddress.ip_network(value, strict=True))
    except ValueError as error:
        raise ValueError(f"not a CIDR block: {error}") from None


_OCTET = "(25[0-5]|2[0-4][0-9]|1[0-9]{2}|[1-9]?[0-9])"
CIDR_RULE = SchemaRule(
    anyOf=[
        {"pattern": rf"^({_OCTET}\.){{3}}{_OCTET}(/(3[0-2]|[0-2]?[0-9]))?$"},
        {"pattern": r"^[0-9A-Fa-f:.]*:[0-9A-Fa-f:.]*(/[0-9]{1,3})?$"},
    ]
)
"""An IPv4 or IPv6 address or CIDR block, for editors (JSON Schema); the validators parse them with
ipaddress, which also checks what a pattern does not: an IPv6 address's groups, a prefix's host bits."""

Cidr = Annotated[str, AfterValidator(_cidr), CIDR_RULE]


class AddressRange(ConfigModel):
    cidrs: list[Cidr] = Field(min_length=1, description="CIDR blocks (10.0.0.0/8, 172.18.0.2/32).")
    ports: list[Port] = Field(min_length=1, description="TCP ports on those addresses.")


class NetworkConfig(ConfigModel):
    """How the platform's namespaces are closed, and where the cluster's own endpoints are."""

    closed: bool = Field(
        default=True,
        description="A default deny (ingress and egress) in every namespace the platform runs pods in, "
        "and exactly the edges its workloads need; false leaves them open (the models' namespace stays closed).",
    )
    api_server: AddressRange = Field(
        default_factory=lambda: AddressRange(cidrs=list(PRIVATE_RANGES), ports=[443, 6443]),
        description="Where the API server is, as pods' traffic reaches it (after the kubernetes Service's "
        "translation: its endpoints, `kubectl get endpoints kubernetes`), and where its calls to webhooks and "
        "aggregated APIs come from. The default, the private ranges on 443 and 6443, fits most clusters; narrow it.",
    )
    kubelets: AddressRange = Field(
        default_factory=lambda: AddressRange(cidrs=list(PRIVATE_RANGES), ports=[10250]),
        description="The nodes' kubelets, which metrics-server scrapes (the nodes' addresses).",
    )


@dataclass(frozen=True)
class Pods:
    """A group of pods: those its labels select in its namespace; `name` names its policy."""

    name: str
    namespace: str
    labels: tuple[tuple[str, str], ...]

    @classmethod
    def of(cls, name: str, namespace: str, labels: Mapping[str, str]) -> Pods:
        return cls(name, namespace, tuple(sorted(labels.items())))


@dataclass(frozen=True)
class AllPods:
    """Every pod of a namespace (the models' sidecars, the cluster's DNS in kube-system)."""

    namespace: str


@dataclass(frozen=True)
class Addresses:
    """Peers outside the pod network: the API server, the kubelets, the internet."""

    name: str
    cidrs: tuple[str, ...]


Peer = Pods | AllPods | Addresses
Protocol = Literal["TCP", "UDP"]


@dataclass(frozen=True)
class Edge:
    """`source` may open connections to `destination` on `ports`, because `why`."""

    source: Peer
    destination: Peer
    ports: tuple[int, ...]
    why: str
    protocols: tuple[Protocol, ...] = ("TCP",)


INTERNET = Addresses("internet", ("0.0.0.0/0", "::/0"))


def _peers(peer: Peer) -> list[dict[str, Any]]:
    if isinstance(peer, Addresses):
        return [{"ipBlock": {"cidr": cidr}} for cidr in peer.cidrs]
    namespace: dict[str, Any] = {"namespaceSelector": {"matchLabels": {NAME_LABEL: peer.namespace}}}
    if isinstance(peer, Pods):
        namespace["podSelector"] = {"matchLabels": dict(peer.labels)}
    return [namespace]


def _rule(edge: Edge, peer: Peer, direction: Literal["from", "to"]) -> dict[str, Any]:
    ports = [{"protocol": protocol, "port": port} for port in edge.ports for protocol in edge.protocols]
    return {direction: _peers(peer), "ports": ports}


def _policy(name: str, namespace: str, selector: dict[str, str], into: list[Edge], out: list[Edge]) -> dict[str, Any]:
    spec: dict[str, Any] = {"podSelector": {"matchLabels": selector}, "policyTypes": ["Ingress", "Egress"]}
    if into:
        spec["ingress"] = [_rule(e, e.source, "from") for e in into]
    if out:
        spec["egress"] = [_rule(e, e.destination, "to") for e in out]
    metadata = {"name": name, "namespace": namespace, "labels": PART_OF_LABELS}
    return {"apiVersion": "networking.k8s.io/v1", "kind": "NetworkPolicy", "metadata": metadata, "spec": spec}


def pod_groups(edges: Iterable[Edge]) -> list[Pods]:
    found = {peer for e in edges for peer in (e.source, e.destination) if isinstance(peer, Pods)}
    return sorted(found, key=lambda p: (p.namespace, p.name))


def closed_namespaces(edges: Iterable[Edge], model_namespace: str) -> list[str]:
    """The namespaces of the table's pod groups: the platform's own (never kube-system, which holds
    the cluster's own pods, nor the models', whose policies are access.py's)."""
    return sorted({p.namespace for p in pod_groups(edges)} - {BUILT_IN_NAMESPACE, model_namespace})


def network_policies(edges: Sequence[Edge], model_namespace: str) -> list[dict[str, Any]]:
    """Per closed namespace a default deny carrying its namespace-wide edges (DNS), and per pod
    group there a policy with its own. A group kept in kube-system, where there is no default
    deny, gets a policy that isolates it and carries its namespace's way out (DNS) too."""
    closed = closed_namespaces(edges, model_namespace)
    policies = []
    for namespace in closed:
        everyone = AllPods(namespace)
        into = [e for e in edges if e.destination == everyone]
        policies.append(_policy("default-deny", namespace, {}, into, [e for e in edges if e.source == everyone]))
    for group in pod_groups(edges):
        if group.namespace == model_namespace:
            continue
        out = [e for e in edges if e.source == group]
        if group.namespace not in closed:
            out += [e for e in edges if e.source == AllPods(group.namespace)]
        into = [e for e in edges if e.destination == group]
        policies.append(_policy(group.name, group.namespace, dict(group.labels), into, out))
    return sorted(policies, key=lambda p: (p["metadata"]["namespace"], p["metadata"]["name"]))


@dataclass(frozen=True)
class PlatformNetworkArgs:
    edges: tuple[Edge, ...]
    """The edge table (stack/network.py writes the stack's)."""
    model_namespace: str
    """The models' namespace, whose policies are serving/access.py's."""


class PlatformNetwork(pulumi.ComponentResource):
    """The platform's NetworkPolicies, from its edge table."""

    def __init__(self, name: str, args: PlatformNetworkArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("inference-platform:platform:PlatformNetwork", name, None, opts)
        edges, model_namespace = args.edges, args.model_namespace
        self.policies = network_policies(edges, model_namespace)
        for policy in self.policies:
            metadata = policy["metadata"]
            register(policy, pulumi.ResourceOptions(parent=self), name=f"{metadata['namespace']}-{metadata['name']}")
        self.namespaces = pulumi.Output.from_input(closed_namespaces(edges, model_namespace))
        self.register_outputs({"namespaces": self.namespaces})
