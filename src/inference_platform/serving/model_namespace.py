"""The namespace models run in, with the mesh's and the network's defaults: nothing gets in or
out unless a model's own policies say so."""

# No `from __future__ import annotations`: the component package (provider/) reads the
# component's annotations as types at run time.
from typing import Any

import pulumi

from inference_platform.config.base import ConfigModel, DNS1123Label
from inference_platform.kube import register
from inference_platform.platform.pod_security import PodSecurity

PART_OF_LABELS = {"app.kubernetes.io/part-of": "inference-platform", "app.kubernetes.io/managed-by": "pulumi"}


class ModelNamespaceArgs(ConfigModel):
    name: DNS1123Label
    istio_namespace: DNS1123Label = "istio-system"


# Model pods are built to the restricted level, but Istio's sidecar injector adds its istio-init
# container (root, NET_ADMIN and NET_RAW) to every pod of a meshed namespace unless the mesh runs
# Istio's CNI plugin, which this platform does not install: no level short of privileged admits
# the injected pods (Istio's "Install Istio with Pod Security Admission"). So the namespace enforces
# privileged and warns and audits at restricted: a workload whose pod template falls short of it
# (PSA checks Deployments' and the other workloads' templates, as written, before injection) is
# reported to whoever applies it and in the API server's audit log.
POD_SECURITY = PodSecurity("privileged", report="restricted")


def namespace(args: ModelNamespaceArgs) -> dict[str, Any]:
    labels = {"istio-injection": "enabled"} | PART_OF_LABELS | POD_SECURITY.labels()
    return {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": args.name, "labels": labels}}


def strict_mtls(args: ModelNamespaceArgs) -> dict[str, Any]:
    """Only mutually authenticated traffic from the mesh reaches the sidecars."""
    return {
        "apiVersion": "security.istio.io/v1",
        "kind": "PeerAuthentication",
        "metadata": {"name": "default", "namespace": args.name, "labels": PART_OF_LABELS},
        "spec": {"mtls": {"mode": "STRICT"}},
    }


def default_deny(args: ModelNamespaceArgs) -> dict[str, Any]:
    """No traffic in or out, except DNS and the sidecars' connection to istiod."""

    def namespace_selector(name: str) -> dict[str, Any]:
        return {"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": name}}}

    return {
        "apiVersion": "networking.k8s.io/v1",
        "kind": "NetworkPolicy",
        "metadata": {"name": "default-deny", "namespace": args.name, "labels": PART_OF_LABELS},
        "spec": {
            "podSelector": {},
            "policyTypes": ["Ingress", "Egress"],
            "egress": [
                {
                    "to": [namespace_selector("kube-system")],
                    "ports": [{"protocol": "UDP", "port": 53}, {"protocol": "TCP", "port": 53}],
                },
                # xDS and certificates from istiod.
                {"to": [namespace_selector(args.istio_namespace)], "ports": [{"protocol": "TCP", "port": 15012}]},
            ],
        },
    }


class ModelNamespace(pulumi.ComponentResource):
    """The models' namespace: Istio sidecar injection, STRICT mutual TLS, and a default-deny network policy."""

    TYPE = "inference-platform:serving:ModelNamespace"

    name: pulumi.Output[str]

    def __init__(self, name: str, args: ModelNamespaceArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__(self.TYPE, name, None, opts)
        created = register(namespace(args), pulumi.ResourceOptions(parent=self))
        after = pulumi.ResourceOptions(parent=self, depends_on=[created, *self._dependencies(opts)])
        register(strict_mtls(args), after)
        register(default_deny(args), after)
        self.name = pulumi.Output.from_input(args.name)
        self.register_outputs({"name": self.name})

    @staticmethod
    def _dependencies(opts: pulumi.ResourceOptions | None) -> list[pulumi.Resource]:
        depends_on = opts.depends_on if opts is not None else None
        return list(depends_on) if isinstance(depends_on, list) else []
