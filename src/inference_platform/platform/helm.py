"""Installing pinned upstream Helm charts with values built as data, plus one escape hatch."""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from typing import Any

import pulumi
import pulumi_kubernetes as k8s

from inference_platform.kube import register
from inference_platform.pins import ChartPin, ManifestPin
from inference_platform.platform.pod_security import PodSecurity


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


def manifest_file(name: str, pin: ManifestPin, opts: pulumi.ResourceOptions) -> k8s.yaml.v2.ConfigFile:
    """A release's published manifest (CRDs no chart installs), applied from its pinned URL: every
    object in it becomes its own resource, as a chart's do."""
    return k8s.yaml.v2.ConfigFile(name, file=pin.url, opts=opts)


BUILT_IN_NAMESPACES = ("kube-system", "default")


def own_namespace(
    name: str, parent: pulumi.Resource, security: PodSecurity, create: bool = True
) -> list[pulumi.Resource]:
    """A chart component's namespace, parented to the component: created unless the cluster has it
    already (or `create` is false: another component's), with the Pod Security level its pods need;
    what the chart waits for. Every chart component makes its namespaces here."""
    if name in BUILT_IN_NAMESPACES or not create:
        return []
    manifest = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name, "labels": security.labels()}}
    return [register(manifest, pulumi.ResourceOptions(parent=parent))]


def dependencies(opts: pulumi.ResourceOptions | None) -> list[pulumi.Resource]:
    """The resources `opts.depends_on` names, for a component to hand to the children that wait for
    them (Pulumi does not pass a component's dependencies on to its children)."""
    named = None if opts is None else opts.depends_on
    if named is None:
        return []
    if isinstance(named, pulumi.Resource):
        return [named]
    found = [r for r in named if isinstance(r, pulumi.Resource)] if isinstance(named, Sequence) else []
    if not isinstance(named, Sequence) or len(found) != len(named):
        raise TypeError("a platform component's opts.depends_on must list resources, not outputs")
    return found
