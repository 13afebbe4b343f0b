"""Registering Kubernetes objects built as data with their typed pulumi_kubernetes resource classes."""

from __future__ import annotations

import importlib
from typing import Any

import pulumi
import pulumi_kubernetes as k8s

# Built-in kinds get their typed class (schema-checked inputs, proper diffs); the rest are CRDs.
# Named, not imported: pulumi_kubernetes' modules load when an object is registered, so commands
# that only read config (analyze, capacity, promote) do not pay for them.
_TYPED: dict[tuple[str, str], tuple[str, str]] = {
    ("v1", "ConfigMap"): ("core.v1", "ConfigMap"),
    ("v1", "Namespace"): ("core.v1", "Namespace"),
    ("v1", "PersistentVolume"): ("core.v1", "PersistentVolume"),
    ("v1", "PersistentVolumeClaim"): ("core.v1", "PersistentVolumeClaim"),
    ("v1", "Secret"): ("core.v1", "Secret"),
    ("v1", "Service"): ("core.v1", "Service"),
    ("v1", "ServiceAccount"): ("core.v1", "ServiceAccount"),
    ("apps/v1", "DaemonSet"): ("apps.v1", "DaemonSet"),
    ("apps/v1", "Deployment"): ("apps.v1", "Deployment"),
    ("autoscaling/v2", "HorizontalPodAutoscaler"): ("autoscaling.v2", "HorizontalPodAutoscaler"),
    ("policy/v1", "PodDisruptionBudget"): ("policy.v1", "PodDisruptionBudget"),
    ("networking.k8s.io/v1", "NetworkPolicy"): ("networking.v1", "NetworkPolicy"),
    ("node.k8s.io/v1", "RuntimeClass"): ("node.v1", "RuntimeClass"),
    ("rbac.authorization.k8s.io/v1", "ClusterRole"): ("rbac.v1", "ClusterRole"),
    ("rbac.authorization.k8s.io/v1", "ClusterRoleBinding"): ("rbac.v1", "ClusterRoleBinding"),
}


def _typed_class(api_version: str, kind: str) -> Any:
    named = _TYPED.get((api_version, kind))
    if named is None:
        return None
    module, name = named
    return getattr(importlib.import_module(f"pulumi_kubernetes.{module}"), name)


# Top-level manifest keys as the typed classes name them.
_ARGUMENTS = {
    "stringData": "string_data",
    "automountServiceAccountToken": "automount_service_account_token",
    "roleRef": "role_ref",
}


def register(
    manifest: dict[str, Any], opts: pulumi.ResourceOptions | None = None, *, name: str | None = None
) -> pulumi.CustomResource:
    """Register one object; its logical name is its metadata.name (or `name` where objects of a
    kind share one in several namespaces), unique among objects of a kind."""
    api_version, kind = manifest["apiVersion"], manifest["kind"]
    fields = {_ARGUMENTS.get(key, key): value for key, value in manifest.items() if key not in ("apiVersion", "kind")}
    name = name or manifest["metadata"]["name"]
    typed = _typed_class(api_version, kind)
    if typed is not None:
        resource: pulumi.CustomResource = typed(name, opts=opts, **fields)
    else:
        resource = k8s.apiextensions.CustomResource(name, api_version=api_version, kind=kind, opts=opts, **fields)
    return resource
