"""Installing pinned upstream Helm charts with values built as data, plus one escape hatch."""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

import pulumi
import pulumi_kubernetes as k8s

from inference_platform.kube import register
from inference_platform.pins import ChartPin


def merge_values(generated: Mapping[str, Any], overrides: Mapping[str, Any]) -> dict[str, Any]:
    """`overrides` (a user's raw values) laid over the generated values, maps merged key by key."""
    merged = copy.deepcopy(dict(generated))
    for key, value in overrides.items():
        if isinstance(value, Mapping) and isinstance(merged.get(key), Mapping):
            merged[key] = merge_values(merged[key], value)
        else:
            merged[key] = copy.deepcopy(value)
    return merged


def chart(
    release: str, pin: ChartPin, namespace: str, values: Mapping[str, Any], opts: pulumi.ResourceOptions
) -> k8s.helm.v4.Chart:
    """helm.v4.Chart: every object of the chart becomes its own resource (per-object previews, policies)."""
    return k8s.helm.v4.Chart(
        release,
        name=release,
        chart=pin.reference,
        version=pin.version,
        namespace=namespace,
        # An OCI chart has no repository: its reference names it whole.
        repository_opts=None if pin.is_oci else k8s.helm.v4.RepositoryOptsArgs(repo=pin.repository),
        values=dict(values),
        opts=opts,
    )


def release(
    name: str, pin: ChartPin, namespace: str, values: Mapping[str, Any], opts: pulumi.ResourceOptions
) -> k8s.helm.v3.Release:
    """helm.v3.Release: real Helm, for charts that need Helm hooks (previews show only its inputs)."""
    return k8s.helm.v3.Release(
        name,
        name=name,
        chart=pin.chart,
        version=pin.version,
        namespace=namespace,
        repository_opts=k8s.helm.v3.RepositoryOptsArgs(repo=pin.repository),
        values=dict(values),
        atomic=True,
        cleanup_on_fail=True,
        opts=opts,
    )


BUILT_IN_NAMESPACES = ("kube-system", "default")


def own_namespace(name: str, parent: pulumi.Resource) -> list[pulumi.Resource]:
    """A chart's namespace, created unless the cluster has it already; what the chart waits for."""
    if name in BUILT_IN_NAMESPACES:
        return []
    manifest = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}}
    return [register(manifest, pulumi.ResourceOptions(parent=parent))]
