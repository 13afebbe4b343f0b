"""A version's KEDA ScaledObject: what replaces its HorizontalPodAutoscaler where the platform scales
with KEDA, and what lets it sleep at zero replicas and wake again.

The targets become triggers over the series prometheus-adapter reads for HPAs (cpu and memory are
KEDA's own resource triggers). KEDA creates and owns an HPA for every ScaledObject; it is given
the name the HPA of ours has, so that switching a stack from HPAs to KEDA hands the running HPA
over (`transfer-hpa-ownership`) instead of making a second one. A version that sleeps has one
more trigger, the one that wakes it: for a live version the HTTP add-on's interceptor, which holds
its requests (waking.py); for a shadow the model's live traffic, which its mirror follows.
"""

from __future__ import annotations

from collections.abc import Mapping
from decimal import Decimal
from typing import Any

from inference_platform.platform import custom_metrics
from inference_platform.platform.keda import KedaRef
from inference_platform.serving.autoscaling import AutoscalingSpec

API_VERSION = "keda.sh/v1alpha1"
TRANSFER_HPA = "scaledobject.keda.sh/transfer-hpa-ownership"
# KEDA's own default for an HPA without targets is none; an HPA's is CPU at 80 %, as ours is.
DEFAULT_CPU_UTILIZATION = 80
# A shadow's wake trigger only wakes it: its threshold is past any request rate, so on its own it
# never asks for a second replica; the shadow's own triggers size it.
WAKE_ONLY_THRESHOLD = "1000000000"


def _number(value: Decimal) -> str:
    """A trigger threshold as KEDA parses it: a plain decimal, no exponent (0.6, 50, 0.0015)."""
    return format(value.normalize(), "f")


def _resource_trigger(resource: str, utilization: int) -> dict[str, Any]:
    return {"type": resource, "name": resource, "metricType": "Utilization", "metadata": {"value": str(utilization)}}


def target_triggers(
    spec: AutoscalingSpec,
    keda: KedaRef,
    namespace: str,
    pods: Mapping[str, str],
    *,
    queue_series: str | None = None,
    ttft_histogram: str | None = None,
) -> list[dict[str, Any]]:
    """The targets as triggers for the pods with the labels `pods` (a version's, a router's): cpu and
    memory utilisation, GPU use, requests per second, (from the runtime's gauge `queue_series`)
    requests waiting per pod and (from its histogram `ttft_histogram`) the pods' p90 time to first
    token, averaged and compared as a Value: replicas scale by how far it is from the target."""
    triggers = [
        _resource_trigger(resource, target)
        for resource, target in (("cpu", spec.cpu_utilization), ("memory", spec.memory_utilization))
        if target is not None
    ]
    source = custom_metrics.HAMI_GPU_UTIL if keda.gpu_source == "hami" else custom_metrics.DCGM_GPU_UTIL
    measured: list[tuple[str, float | None, int, str]] = [
        ("gpu-utilization", spec.gpu_utilization, 100, custom_metrics.pods_gpu_usage(source, namespace, pods)),
        ("requests-per-second", spec.requests_per_second, 1, custom_metrics.pods_requests_per_second(namespace, pods)),
    ]
    if spec.queue_depth is not None:
        if queue_series is None:
            raise ValueError("queueDepth needs the runtime's queue gauge")  # the model's config refuses it first
        measured.append(
            ("queue-depth", spec.queue_depth, 1, custom_metrics.pods_requests_waiting(queue_series, namespace, pods))
        )
    for name, target, per, query in measured:
        if target is not None:
            threshold = _number(Decimal(repr(target)) / per)
            metadata = {"serverAddress": keda.prometheus_url, "query": query, "threshold": threshold}
            triggers.append({"type": "prometheus", "name": name, "metadata": metadata})
    if spec.time_to_first_token_p90 is not None:
        if ttft_histogram is None:
            raise ValueError("timeToFirstTokenP90 needs the runtime's histogram")  # the model's config refuses it first
        query = custom_metrics.pods_time_to_first_token_p90(ttft_histogram, namespace, pods)
        metadata = {
            "serverAddress": keda.prometheus_url,
            "query": query,
            "threshold": _number(Decimal(repr(spec.time_to_first_token_p90))),
        }
        triggers.append(
            {"type": "prometheus", "name": "time-to-first-token", "metricType": "Value", "metadata": metadata}
        )
    return triggers or [_resource_trigger("cpu", DEFAULT_CPU_UTILIZATION)]


def scaled_object(
    metadata: dict[str, Any],
    spec: AutoscalingSpec,
    triggers: list[dict[str, Any]],
    target: dict[str, str] | None = None,
    *,
    initial_cooldown_seconds: int | None = None,
) -> dict[str, Any]:
    """The ScaledObject for `target` (by default the Deployment named in `metadata`)."""
    name = metadata["name"]
    body: dict[str, Any] = {
        "scaleTargetRef": target or {"apiVersion": "apps/v1", "kind": "Deployment", "name": name},
        "minReplicaCount": spec.min_replicas,
        "maxReplicaCount": spec.max_replicas,
    }
    if spec.scales_to_zero:
        # The step to zero waits this long after the last activity; a new version waits long enough
        # to boot and be seen ready by `pulumi up` before it may sleep at all.
        body["cooldownPeriod"] = spec.idle_seconds
        if initial_cooldown_seconds is not None:
            body["initialCooldownPeriod"] = initial_cooldown_seconds
    body["advanced"] = {
        "horizontalPodAutoscalerConfig": {
            "name": name,
            "behavior": {"scaleDown": {"stabilizationWindowSeconds": spec.scale_down_stabilization_seconds}},
        }
    }
    body["triggers"] = triggers
    annotations = dict(metadata.get("annotations") or {}) | {TRANSFER_HPA: "true"}
    metadata = metadata | {"annotations": annotations}
    return {"apiVersion": API_VERSION, "kind": "ScaledObject", "metadata": metadata, "spec": body}


def interceptor_trigger(keda: KedaRef, route: str) -> dict[str, Any]:
    """A live version's wake signal: the requests the HTTP add-on's interceptor holds for it."""
    assert keda.http_add_on is not None
    return {
        "type": "external-push",
        "name": "wake",
        "metadata": {"scalerAddress": keda.http_add_on.scaler_address, "interceptorRoute": route},
    }


def mirror_trigger(keda: KedaRef, namespace: str, app: str, live: list[str]) -> dict[str, Any]:
    """A shadow's wake signal: its model's live traffic, which its mirror copies (its own traffic is
    mirrored straight to it, never held, so nothing else would wake it)."""
    return {
        "type": "prometheus",
        "name": "wake",
        "metadata": {
            "serverAddress": keda.prometheus_url,
            "query": custom_metrics.live_requests_per_second(namespace, app, live),
            "threshold": WAKE_ONLY_THRESHOLD,
            "activationThreshold": "0",
        },
    }
