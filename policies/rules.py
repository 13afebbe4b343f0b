"""The checks behind the policy pack, as plain functions over a resource's type and properties.

Each returns the violations it finds, as sentences. __main__.py wraps them into Pulumi policies;
keeping them free of pulumi_policy lets anything call them.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from typing import Any

WORKLOADS = {
    "kubernetes:apps/v1:Deployment": ("spec", "template", "spec"),
    "kubernetes:apps/v1:StatefulSet": ("spec", "template", "spec"),
    "kubernetes:apps/v1:DaemonSet": ("spec", "template", "spec"),
    "kubernetes:apps/v1:ReplicaSet": ("spec", "template", "spec"),
    "kubernetes:batch/v1:Job": ("spec", "template", "spec"),
    "kubernetes:batch/v1:CronJob": ("spec", "jobTemplate", "spec", "template", "spec"),
    "kubernetes:core/v1:Pod": ("spec",),
}
VIRTUAL_SERVICE = "kubernetes:networking.istio.io/v1:VirtualService"
HTTP_ROUTE = "kubernetes:gateway.networking.k8s.io/v1:HTTPRoute"
# A Gateway API backendRef without a weight weighs 1.
DEFAULT_BACKEND_WEIGHT = 1
NAMESPACE = "kubernetes:core/v1:Namespace"
DEPLOYMENT = "kubernetes:apps/v1:Deployment"
HPA = "kubernetes:autoscaling/v2:HorizontalPodAutoscaler"
PDB = "kubernetes:policy/v1:PodDisruptionBudget"
STACK = "pulumi:pulumi:Stack"
GPU_RESOURCE_PREFIX = "nvidia.com/"
# The Istio gateway chart's pods say `image: auto`; istiod's injector puts its pinned proxy there.
INJECTED_IMAGE = "auto"
MODEL_LABELS = {"app.kubernetes.io/part-of": "inference-platform", "app.kubernetes.io/component": "predictor"}


def _get(mapping: Any, *path: str) -> Any:
    for key in path:
        if not isinstance(mapping, Mapping):
            return None
        mapping = mapping.get(key)
    return mapping


def pod_spec(resource_type: str, props: Mapping[str, Any]) -> Mapping[str, Any] | None:
    path = WORKLOADS.get(resource_type)
    spec = _get(props, *path) if path else None
    return spec if isinstance(spec, Mapping) else None


def _containers(spec: Mapping[str, Any]) -> Iterator[Mapping[str, Any]]:
    for key in ("initContainers", "containers"):
        yield from (c for c in spec.get(key) or [] if isinstance(c, Mapping))


def image_is_pinned(image: str) -> bool:
    """A digest, or a tag other than latest (a registry port is not a tag)."""
    if "@sha256:" in image:
        return True
    name = image.rsplit("/", 1)[-1]
    tag = name.partition(":")[2]
    return bool(tag) and tag != "latest"


def unpinned_images(resource_type: str, props: Mapping[str, Any]) -> list[str]:
    spec = pod_spec(resource_type, props)
    if spec is None:
        return []
    return [
        f"container {c.get('name')!r} runs {c.get('image')!r}: pin a tag other than latest, or a digest"
        for c in _containers(spec)
        if c.get("image") != INJECTED_IMAGE and not image_is_pinned(str(c.get("image") or ""))
    ]


def missing_requests_and_limits(resource_type: str, props: Mapping[str, Any]) -> list[str]:
    spec = pod_spec(resource_type, props)
    if spec is None:
        return []
    problems = []
    for container in _containers(spec):
        resources = container.get("resources") or {}
        missing = [
            f"{kind}.{name}"
            for kind in ("requests", "limits")
            for name in ("cpu", "memory")
            if not _get(resources, kind, name)
        ]
        if missing:
            problems.append(f"container {container.get('name')!r} has no {', '.join(missing)}")
    return problems


def gpu_without_gpu_nodes(resource_type: str, props: Mapping[str, Any]) -> list[str]:
    spec = pod_spec(resource_type, props)
    if spec is None:
        return []
    gpu = [
        str(c.get("name"))
        for c in _containers(spec)
        if any(
            str(name).startswith(GPU_RESOURCE_PREFIX)
            for kind in ("requests", "limits")
            for name in (_get(c, "resources", kind) or {})
        )
    ]
    required_affinity = _get(spec, "affinity", "nodeAffinity", "requiredDuringSchedulingIgnoredDuringExecution")
    if gpu and not spec.get("nodeSelector") and not required_affinity:
        return [f"containers {', '.join(gpu)} request GPUs but the pod selects no GPU nodes"]
    return []


def _split_problem(name: str, weights: list[Any]) -> list[str]:
    """A route that splits traffic over `weights` and does not split all of it."""
    total = sum(w or 0 for w in weights)
    if total == 100:
        return []
    return [f"route {name!r} splits traffic {weights}: the weights add up to {total}, not 100"]


def virtual_service_weights(resource_type: str, props: Mapping[str, Any]) -> list[str]:
    if resource_type != VIRTUAL_SERVICE:
        return []
    problems = []
    for index, route in enumerate(_get(props, "spec", "http") or []):
        destinations = route.get("route") or [] if isinstance(route, Mapping) else []
        weights = [d.get("weight") for d in destinations if isinstance(d, Mapping)]
        if not weights:  # a redirect or a direct response: no traffic to split
            continue
        if len(weights) == 1 and weights[0] in (None, 100):
            continue
        problems += _split_problem(route.get("name") or f"http[{index}]", weights)
    return problems


def http_route_weights(resource_type: str, props: Mapping[str, Any]) -> list[str]:
    """The same for an HTTPRoute's rules (inference pools' routes): backends' weights add up to 100."""
    if resource_type != HTTP_ROUTE:
        return []
    problems = []
    for index, rule in enumerate(_get(props, "spec", "rules") or []):
        backends = rule.get("backendRefs") or [] if isinstance(rule, Mapping) else []
        weights = [b.get("weight", DEFAULT_BACKEND_WEIGHT) for b in backends if isinstance(b, Mapping)]
        if len(weights) >= 2:  # one backend takes every request; none: a redirect
            problems += _split_problem(rule.get("name") or f"rules[{index}]", weights)
    return problems


def traffic_weights(resource_type: str, props: Mapping[str, Any]) -> list[str]:
    """A route that splits traffic (a VirtualService's or an HTTPRoute's) splits all of it."""
    return virtual_service_weights(resource_type, props) + http_route_weights(resource_type, props)


def stack_of(urn: str) -> str:
    """urn:pulumi:<stack>::<project>::<type>::<name> -> <stack>"""
    return urn.split("::", 1)[0].rsplit(":", 1)[-1]


def is_model_workload(resource_type: str, props: Mapping[str, Any]) -> bool:
    labels = _get(props, "metadata", "labels") or {}
    return resource_type == DEPLOYMENT and all(labels.get(k) == v for k, v in MODEL_LABELS.items())


def namespaces_without_injection(resources: Iterable[tuple[str, Mapping[str, Any]]]) -> list[str]:
    """Model workloads must live in namespaces this stack creates with Istio sidecar injection."""
    items = list(resources)
    injected = {
        _get(props, "metadata", "name")
        for resource_type, props in items
        if resource_type == NAMESPACE
        and (
            (_get(props, "metadata", "labels") or {}).get("istio-injection") == "enabled"
            or (_get(props, "metadata", "labels") or {}).get("istio.io/rev")
        )
    }
    model_namespaces = sorted(
        {
            str(_get(props, "metadata", "namespace"))
            for resource_type, props in items
            if is_model_workload(resource_type, props)
        }
    )
    return [
        f"namespace {namespace!r} runs models but has no Istio sidecar injection (istio-injection: enabled)"
        for namespace in model_namespaces
        if namespace not in injected
    ]


def _selects(selector: Mapping[str, Any] | None, labels: Mapping[str, Any]) -> bool:
    match = (selector or {}).get("matchLabels") or {}
    return bool(match) and all(labels.get(k) == v for k, v in match.items())


def shadow_workloads(items: list[tuple[str, Mapping[str, Any]]]) -> set[str]:
    """The Deployments of shadow versions: what routes only mirror to (a VirtualService's mirrors,
    `<model>.<namespace>...` subset `<version>`; an HTTPRoute's RequestMirror filters, the version's
    Service), never send live requests to."""
    mirrored: set[str] = set()
    for resource_type, props in items:
        for rule in (_get(props, "spec", "http") or []) if resource_type == VIRTUAL_SERVICE else []:
            for mirror in rule.get("mirrors") or [] if isinstance(rule, Mapping) else []:
                host, subset = _get(mirror, "destination", "host"), _get(mirror, "destination", "subset")
                if isinstance(host, str) and isinstance(subset, str):
                    mirrored.add(f"{host.split('.')[0]}-{subset}")
        for rule in (_get(props, "spec", "rules") or []) if resource_type == HTTP_ROUTE else []:
            for route_filter in rule.get("filters") or [] if isinstance(rule, Mapping) else []:
                name = _get(route_filter, "requestMirror", "backendRef", "name")
                if isinstance(name, str):
                    mirrored.add(name)
    return mirrored


def too_few_replicas(resources: Iterable[tuple[str, Mapping[str, Any]]]) -> list[str]:
    """Each model Deployment that takes live requests runs at least two replicas, fixed or as the
    autoscaler's floor. A shadow (its floor 1 by default) is exempt: a drain of its one pod pauses
    the comparison of its answers, and no client's request waits on it."""
    items = list(resources)
    shadows = shadow_workloads(items)
    floors = {
        _get(props, "spec", "scaleTargetRef", "name"): _get(props, "spec", "minReplicas") or 1
        for resource_type, props in items
        if resource_type == HPA
    }
    problems = []
    for resource_type, props in items:
        if not is_model_workload(resource_type, props):
            continue
        name = _get(props, "metadata", "name")
        replicas = floors.get(name, _get(props, "spec", "replicas") or 1)
        if replicas < 2 and name not in shadows:
            problems.append(f"Deployment {name!r} runs {replicas} replica: one node drain takes the version down")
    return problems


def without_disruption_budget(resources: Iterable[tuple[str, Mapping[str, Any]]]) -> list[str]:
    """Each model Deployment is covered by a PodDisruptionBudget selecting its pods."""
    items = list(resources)
    budgets = [
        (_get(props, "metadata", "namespace"), _get(props, "spec", "selector"))
        for resource_type, props in items
        if resource_type == PDB
    ]
    problems = []
    for resource_type, props in items:
        if not is_model_workload(resource_type, props):
            continue
        namespace = _get(props, "metadata", "namespace")
        labels = _get(props, "spec", "template", "metadata", "labels") or {}
        if not any(ns == namespace and _selects(selector, labels) for ns, selector in budgets):
            problems.append(f"Deployment {_get(props, 'metadata', 'name')!r} has no PodDisruptionBudget")
    return problems


def gpus_short_at_peak(resources: Iterable[tuple[str, Mapping[str, Any]]]) -> list[str]:
    """The program's capacity plan (the stack output `capacity`) says the models at their
    autoscalers' maximum need more GPUs than the cluster declares."""
    for resource_type, props in resources:
        capacity = props.get("capacity") if resource_type == STACK else None
        if _get(capacity, "fits", "peak") is False:
            gpus, declared = _get(capacity, "gpus") or {}, _get(capacity, "declared")
            return [
                f"at peak the models need {gpus.get('peak')} GPUs (awake {gpus.get('awake', gpus.get('min'))}, "
                f"at their minimum {gpus.get('min')}), more than the {declared} declared (platform.gpuNodes): "
                "scaling up will leave pods Pending"
            ]
    return []
