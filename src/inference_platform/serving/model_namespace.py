"""The namespace models run in, with the mesh's and the network's defaults: nothing gets in or
out unless a model's own policies say so."""

# No `from __future__ import annotations`: the component package (provider/) reads the
# component's annotations as types at run time.
from typing import Any

import pulumi
from pydantic import Field

from inference_platform.config.base import ConfigModel, DNS1123Label
from inference_platform.kube import register
from inference_platform.platform.pod_security import PodSecurity

PART_OF_LABELS = {"app.kubernetes.io/part-of": "inference-platform", "app.kubernetes.io/managed-by": "pulumi"}


class ModelNamespaceArgs(ConfigModel):
    name: DNS1123Label
    istio_namespace: DNS1123Label = "istio-system"
    host_access: list[str] = Field(
        default_factory=list,
        description="Why some model of the namespace needs the node's files (each model's hostPath volumes, "
        "serving.host_access): the namespace then enforces privileged, says why in its annotation, and still "
        "audits and warns at restricted.",
    )


# Model pods are built to the restricted level, and with Istio's CNI node agent (platform/
# ingress_gateway.py) the injected pods are too: the injector adds an unprivileged istio-validation
# init container instead of istio-init (root, NET_ADMIN and NET_RAW). So the namespace enforces
# restricted, unless one of its models mounts the node's files (a hostPath volume: MindIE across
# nodes), which only privileged admits.
POD_SECURITY = PodSecurity("restricted")
# Then the namespace enforces privileged, audits and warns at restricted (what falls short is
# reported to whoever applies it and in the API server's audit log), and says which models need it
# and why in this annotation.
HOST_ACCESS_POD_SECURITY = PodSecurity("privileged", report="restricted")
HOST_ACCESS_ANNOTATION = "inference-platform.io/privileged-for"


def pod_security(args: ModelNamespaceArgs) -> PodSecurity:
    return HOST_ACCESS_POD_SECURITY if args.host_access else POD_SECURITY


def namespace(args: ModelNamespaceArgs) -> dict[str, Any]:
    labels = {"istio-injection": "enabled"} | PART_OF_LABELS | pod_security(args).labels()
    metadata: dict[str, Any] = {"name": args.name, "labels": labels}
    if args.host_access:
        metadata["annotations"] = {HOST_ACCESS_ANNOTATION: "; ".join(args.host_access)}
    return {"apiVersion": "v1", "kind": "Namespace", "metadata": metadata}


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
