"""A rendered cluster as data: the program's objects and the charts' objects of one render, and
the few pieces of Kubernetes semantics the whole-cluster checks need, evaluated over them.

Nothing here restates what the program meant to do: label selectors, Services and
NetworkPolicies are evaluated as Kubernetes evaluates them, over whatever was rendered.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from inference_platform.cli.render_files import read_chart_objects, read_render

# Namespaces every cluster has; the program creates the others it uses.
BUILT_IN_NAMESPACES = ("default", "kube-system", "kube-public", "kube-node-lease")
POD_TEMPLATES = {
    "Deployment": ("spec", "template"),
    "StatefulSet": ("spec", "template"),
    "DaemonSet": ("spec", "template"),
    "Job": ("spec", "template"),
}


def dig(value: Any, *path: str) -> Any:
    for key in path:
        if not isinstance(value, Mapping):
            return None
        value = value.get(key)
    return value


def selects(selector: Mapping[str, Any] | None, labels: Mapping[str, str]) -> bool:
    """A Kubernetes label selector (matchLabels and matchExpressions) against a set of labels.
    An empty selector selects everything; a missing one (None) selects nothing."""
    if selector is None:
        return False
    if any(labels.get(key) != value for key, value in (selector.get("matchLabels") or {}).items()):
        return False
    for expression in selector.get("matchExpressions") or []:
        key, operator, values = expression["key"], expression["operator"], expression.get("values") or []
        present = key in labels
        if operator == "In" and not (present and labels[key] in values):
            return False
        if operator == "NotIn" and present and labels[key] in values:
            return False
        if operator == "Exists" and not present:
            return False
        if operator == "DoesNotExist" and present:
            return False
    return True


@dataclass(frozen=True)
class Pod:
    """A pod template of a workload, where it runs and what it listens on."""

    owner: str
    namespace: str
    labels: Mapping[str, str]
    annotations: Mapping[str, str]
    spec: Mapping[str, Any]

    @property
    def ports(self) -> dict[str, int]:
        """Container ports by name (unnamed ones by their number)."""
        ports: dict[str, int] = {}
        for container in self.spec.get("containers") or []:
            for port in container.get("ports") or []:
                ports[port.get("name") or str(port["containerPort"])] = port["containerPort"]
        return ports

    def resolve(self, port: int | str) -> int | None:
        """A Service's targetPort (a number or a container port's name) on this pod."""
        if isinstance(port, int):
            return port
        return self.ports.get(port)


@dataclass(frozen=True)
class Address:
    """A peer outside the pod network: the API server, a node's kubelet, a client on the internet.
    Pods are judged by selectors only (their addresses are the cluster's to give), addresses by
    ipBlocks only."""

    name: str
    ip: str


def _in_block(ip: str, block: Mapping[str, Any] | None) -> bool:
    """An ipBlock peer (cidr, less its `except` blocks) against an address."""
    if block is None:
        return False
    address = ipaddress.ip_address(ip)
    network = ipaddress.ip_network(block["cidr"])
    if address.version != network.version or address not in network:
        return False
    return not any(
        address in ipaddress.ip_network(e)
        for e in block.get("except") or []
        if ipaddress.ip_network(e).version == address.version
    )


# The labels the LeaderWorkerSet controller puts on the pods it makes from a set's templates.
LWS_NAME = "leaderworkerset.sigs.k8s.io/name"
LWS_GROUP_INDEX = "leaderworkerset.sigs.k8s.io/group-index"
LWS_WORKER_INDEX = "leaderworkerset.sigs.k8s.io/worker-index"
LWS_GROUPS = 2
"""Groups of each set the cluster model holds: enough to tell one group's pods from another's."""


def group_pods(workload: Mapping[str, Any]) -> Iterator[Pod]:
    """The pods the LWS controller makes of a set: per group a leader (worker index 0, from the
    leader template) and a worker (index 1, from the worker template), each with the template's
    labels plus the controller's."""
    name, namespace = workload["metadata"]["name"], workload["metadata"]["namespace"]
    templates = workload["spec"]["leaderWorkerTemplate"]
    for group in range(LWS_GROUPS):
        for worker, key in ((1, "workerTemplate"), (0, "leaderTemplate")):
            template = templates.get(key) or templates["workerTemplate"]
            metadata = template.get("metadata") or {}
            labels = dict(metadata.get("labels") or {})
            labels |= {LWS_NAME: name, LWS_GROUP_INDEX: str(group), LWS_WORKER_INDEX: str(worker)}
            yield Pod(
                owner=f"LeaderWorkerSet {namespace}/{name} group {group} {'leader' if worker == 0 else 'worker'}",
                namespace=namespace,
                labels=labels,
                annotations=metadata.get("annotations") or {},
                spec=template["spec"],
            )


@dataclass
class Cluster:
    program: list[dict[str, Any]]
    charts: dict[str, list[dict[str, Any]]]
    chart_values: list[dict[str, Any]]
    outputs: dict[str, Any]
    namespaces: dict[str, dict[str, str]] = field(default_factory=dict)

    @classmethod
    def read(cls, directory: Path) -> Cluster:
        program, chart_values, outputs = read_render(directory)
        cluster = cls(program, read_chart_objects(directory), chart_values, outputs)
        for name in BUILT_IN_NAMESPACES:
            cluster.namespaces[name] = {"kubernetes.io/metadata.name": name}
        for namespace in cluster.of_kind("Namespace"):
            name = namespace["metadata"]["name"]
            # The API server labels every namespace with its own name.
            cluster.namespaces[name] = (namespace["metadata"].get("labels") or {}) | {
                "kubernetes.io/metadata.name": name
            }
        return cluster

    @property
    def objects(self) -> list[dict[str, Any]]:
        return self.program + [o for objects in self.charts.values() for o in objects]

    def of_kind(self, kind: str, *, release: str | None = None) -> list[dict[str, Any]]:
        source = self.objects if release is None else self.charts[release]
        return [o for o in source if o["kind"] == kind]

    def one(self, kind: str, *, release: str | None = None, name: str | None = None) -> dict[str, Any]:
        found = [o for o in self.of_kind(kind, release=release) if name is None or o["metadata"]["name"] == name]
        assert len(found) == 1, f"expected one {kind} {name or ''} in {release or 'the render'}, found {len(found)}"
        return found[0]

    def pods(self, *, release: str | None = None) -> Iterator[Pod]:
        source = self.objects if release is None else self.charts[release]
        for workload in source:
            if workload["kind"] == "LeaderWorkerSet":
                yield from group_pods(workload)
                continue
            path = POD_TEMPLATES.get(workload["kind"])
            template = dig(workload, *path) if path else None
            if template is None:
                continue
            metadata = template.get("metadata") or {}
            yield Pod(
                owner=f"{workload['kind']} {workload['metadata']['namespace']}/{workload['metadata']['name']}",
                namespace=workload["metadata"]["namespace"],
                labels=metadata.get("labels") or {},
                annotations=metadata.get("annotations") or {},
                spec=template["spec"],
            )

    def service(self, name: str, namespace: str) -> dict[str, Any] | None:
        for service in self.of_kind("Service"):
            if service["metadata"]["name"] == name and service["metadata"].get("namespace") == namespace:
                return service
        return None

    def endpoints(self, service: Mapping[str, Any], port: int) -> list[tuple[Pod, int]]:
        """The pods behind a Service's port, each with the container port the traffic lands on."""
        spec = service["spec"]
        (service_port,) = [p for p in spec["ports"] if p["port"] == port] or [None]
        if service_port is None or not spec.get("selector"):
            return []
        found = []
        for pod in self.pods():
            if pod.namespace == service["metadata"]["namespace"] and selects(
                {"matchLabels": spec["selector"]}, pod.labels
            ):
                # A numbered targetPort needs no declared container port; a named one does.
                target = pod.resolve(service_port.get("targetPort", port))
                if target is not None:
                    found.append((pod, target))
        return found

    def _peer_matches(self, peer: Mapping[str, Any], policy_namespace: str, pod: Pod) -> bool:
        if "ipBlock" in peer:
            return False  # pod-to-pod traffic is judged by the selectors
        namespace_selector = peer.get("namespaceSelector")
        if namespace_selector is None:
            namespace_ok = pod.namespace == policy_namespace
        else:
            namespace_ok = selects(namespace_selector, self.namespaces.get(pod.namespace, {}))
        return namespace_ok and selects(peer.get("podSelector", {}), pod.labels)

    @staticmethod
    def _port_matches(rule: Mapping[str, Any], pod: Pod | None, port: int) -> bool:
        """A rule's ports (numbers, ranges or the destination's named ports) against a TCP port."""
        ports = rule.get("ports")
        if not ports:
            return True
        for entry in ports:
            if entry.get("protocol", "TCP") != "TCP":
                continue
            wanted, end = entry.get("port"), entry.get("endPort")
            if wanted is None:
                return True
            if end is not None and isinstance(wanted, int) and wanted <= port <= end:
                return True
            resolved = wanted if isinstance(wanted, int) or pod is None else pod.resolve(wanted)
            if end is None and resolved == port:
                return True
        return False

    def policies_admit(self, pod: Pod, direction: str, peer: Pod | Address, port: int, port_pod: Pod | None) -> bool:
        """Whether NetworkPolicies around `pod` let it talk with `peer` (ingress: from; egress: to)."""
        policy_type = "Ingress" if direction == "ingress" else "Egress"
        selecting = [
            p
            for p in self.of_kind("NetworkPolicy")
            if p["metadata"]["namespace"] == pod.namespace
            and selects(p["spec"].get("podSelector", {}), pod.labels)
            and policy_type in (p["spec"].get("policyTypes") or ["Ingress"])
        ]
        if not selecting:
            return True  # not isolated
        peers_key = "from" if direction == "ingress" else "to"
        for policy in selecting:
            for rule in policy["spec"].get(direction) or []:
                peers = rule.get(peers_key)
                if isinstance(peer, Address):
                    peer_ok = not peers or any(_in_block(peer.ip, p.get("ipBlock")) for p in peers)
                else:
                    peer_ok = not peers or any(self._peer_matches(p, pod.namespace, peer) for p in peers)
                if peer_ok and self._port_matches(rule, port_pod, port):
                    return True
        return False

    def egress_to_address(self, source: Pod, address: Address, port: int) -> bool:
        """Whether NetworkPolicies let `source`'s pods open a TCP connection to an address outside the pod network."""
        return self.policies_admit(source, "egress", address, port, None)

    def ingress_from_address(self, destination: Pod, address: Address, port: int) -> bool:
        """Whether NetworkPolicies let an address outside the pod network reach `destination`'s pods on `port`."""
        return self.policies_admit(destination, "ingress", address, port, destination)

    def network_admits(self, source: Pod, destination: Pod, port: int) -> bool:
        """Whether NetworkPolicies let `source`'s pods open a TCP connection to `destination`'s on `port`."""
        return self.policies_admit(source, "egress", destination, port, destination) and self.policies_admit(
            destination, "ingress", source, port, destination
        )

    def mesh_admits(self, source: Pod, destination: Pod, port: int) -> bool:
        """Whether Istio's AuthorizationPolicies let `source`'s sidecar call `destination`'s on
        `port` (Istio's order: any matching DENY refuses; with ALLOW policies, one must match).

        Only what an in-mesh call between pods carries is judged (the caller's principal and the
        port); a policy on the destination that needs more (hosts, paths, JWTs) fails the check
        rather than being guessed at."""
        applicable = [
            p
            for p in self.of_kind("AuthorizationPolicy")
            if p["metadata"]["namespace"] in (destination.namespace, ISTIO_ROOT_NAMESPACE)
            and ("selector" not in p["spec"] or selects(p["spec"]["selector"], destination.labels))
        ]
        account = source.spec.get("serviceAccountName") or "default"
        principal = f"cluster.local/ns/{source.namespace}/sa/{account}"

        def rule_matches(rule: Mapping[str, Any]) -> bool:
            unknown = set(rule) - {"from", "to"}
            unknown |= {k for s in rule.get("from") or [] for k in s["source"]} - {"principals", "notPrincipals"}
            unknown |= {k for o in rule.get("to") or [] for k in o["operation"]} - {"ports", "notPorts"}
            assert not unknown, f"the evaluator does not judge {sorted(unknown)}"
            sources = [s["source"] for s in rule.get("from") or []]
            operations = [o["operation"] for o in rule.get("to") or []]
            source_ok = not sources or any(
                ("principals" not in s or _principal_in(principal, s["principals"]))
                and not _principal_in(principal, s.get("notPrincipals") or [])
                for s in sources
            )
            operation_ok = not operations or any(
                ("ports" not in o or str(port) in o["ports"]) and str(port) not in (o.get("notPorts") or [])
                for o in operations
            )
            return source_ok and operation_ok

        by_action: dict[str, list[Mapping[str, Any]]] = {"ALLOW": [], "DENY": []}
        for policy in applicable:
            by_action.setdefault(policy["spec"].get("action", "ALLOW"), []).append(policy)
        if any(rule_matches(rule) for policy in by_action["DENY"] for rule in policy["spec"].get("rules") or []):
            return False
        if not by_action["ALLOW"]:
            return True
        return any(rule_matches(rule) for policy in by_action["ALLOW"] for rule in policy["spec"].get("rules") or [])


ISTIO_ROOT_NAMESPACE = "istio-system"


def _principal_in(principal: str, patterns: list[str]) -> bool:
    """Istio's principal matching: exact, or `*` as a whole, prefix or suffix wildcard."""
    for pattern in patterns:
        if pattern in ("*", principal):
            return True
        if pattern.endswith("*") and principal.startswith(pattern[:-1]):
            return True
        if pattern.startswith("*") and principal.endswith(pattern[1:]):
            return True
    return False
