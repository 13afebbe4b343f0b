"""Horizontal autoscaling of a version's Deployment on CPU, memory, GPU utilisation, QPS, the
engine's queue and its time to first token: the spec a model writes, and the
HorizontalPodAutoscaler that serves it where the platform scales with HPAs (with KEDA, a
ScaledObject: scaled_object.py)."""

from __future__ import annotations

import math
from decimal import Decimal
from typing import Annotated, Any, Literal

from pydantic import Field, field_validator, model_validator
from pydantic_core import PydanticCustomError

from inference_platform.config.base import ConfigModel, Duration, config_problems, duration_nanoseconds
from inference_platform.platform import custom_metrics

# Under a minute a version would sleep between two requests.
MIN_IDLE_NANOSECONDS = 60 * 10**9

# Kubernetes quantities go down to nano units; a finer value would be rounded up by the API server.
_QUANTITY_SUFFIXES = (("", 0), ("m", 3), ("u", 6), ("n", 9))


def _decimal(value: float) -> Decimal:
    """The decimal a float was written as (0.0015, not 0.00150000000000000003...)."""
    return Decimal(repr(value))


def _quantity(value: Decimal) -> str:
    """A Kubernetes quantity that is exactly `value`: 0.6 -> 600m, 20 -> 20, 0.0015 -> 1500u."""
    for suffix, places in _QUANTITY_SUFFIXES:
        scaled = value.scaleb(places)
        if scaled == scaled.to_integral_value():
            return f"{int(scaled)}{suffix}"
    raise ValueError(f"{value} is more precise than a Kubernetes quantity (nano units)")


class AutoscalingSpec(ConfigModel):
    """Scales each version between minReplicas and maxReplicas; off while they are equal."""

    min_replicas: Annotated[int, Field(ge=0, le=1000)] = Field(
        default=1,
        description="0 lets a version sleep at zero replicas while idle, woken by its first request "
        "(needs platform.autoscaler: keda).",
    )
    max_replicas: Annotated[int, Field(ge=1, le=1000)] = Field(
        default=1,
        description="An autoscaler per version when above minReplicas; equal, that many replicas and no autoscaler.",
    )
    cpu_utilization: Annotated[int, Field(ge=1, le=1000)] | None = Field(
        default=None, description="Target average CPU use, in percent of the requests."
    )
    memory_utilization: Annotated[int, Field(ge=1, le=1000)] | None = Field(
        default=None, description="Target average memory use, in percent of the requests."
    )
    gpu_utilization: Annotated[int, Field(ge=1, le=100)] | None = Field(
        default=None, description="Target average GPU utilisation per pod, in percent (container_gpu_usage)."
    )
    requests_per_second: Annotated[float, Field(ge=0.001, le=1_000_000)] | None = Field(
        default=None, description="Target requests per second per pod (requests_per_second)."
    )
    queue_depth: Annotated[int, Field(ge=1, le=100_000)] | None = Field(
        default=None,
        description="Target requests waiting in the engine's queue per pod (requests_waiting): for LLM "
        "engines, whose GPU shows 100 % while the queue grows. Runtimes that export a queue gauge only.",
    )
    time_to_first_token_p90: Annotated[float, Field(ge=0.001, le=3600)] | None = Field(
        default=None,
        description="Target p90 time to first token in seconds (time_to_first_token_p90_seconds): each pod's "
        "90th percentile over the last 2 minutes, from the engine's own histogram, averaged over the version's "
        "pods. Runtimes with a time-to-first-token histogram only (vllm, sglang; custom with "
        "metrics.timeToFirstTokenHistogram).",
    )
    scale_down_stabilization_seconds: Annotated[int, Field(ge=0, le=3600)] = Field(
        default=300, description="How long load must stay low before replicas are removed."
    )
    idle_after: Duration = Field(
        default="15m",
        description="With minReplicas 0: how long a version goes without a request before it sleeps "
        "(KEDA's cooldownPeriod); 1m to 24h.",
    )
    wake: Literal["hold", "respond"] = Field(
        default="hold",
        description="With minReplicas 0, what a request to a sleeping version gets: hold (kept until a pod is "
        "ready, within the model's timeout) or respond (503 with Retry-After at once, for cold starts of minutes).",
    )

    @field_validator("requests_per_second", "time_to_first_token_p90")
    @classmethod
    def _exact_as_a_quantity(cls, value: float | None) -> float | None:
        exponent = None if value is None else _decimal(value).as_tuple().exponent
        if isinstance(exponent, int) and exponent < -_QUANTITY_SUFFIXES[-1][1]:
            raise PydanticCustomError(
                "quantity_precision",
                "{value} has more than nine decimal places: Kubernetes quantities stop at nano units",
                {"value": value},
            )
        return value

    @model_validator(mode="after")
    def _range(self) -> AutoscalingSpec:
        problems = []
        if self.min_replicas > self.max_replicas:
            problems.append(("minReplicas", f"{self.min_replicas} is more than maxReplicas ({self.max_replicas})"))
        if self.scales_to_zero and duration_nanoseconds(self.idle_after) < MIN_IDLE_NANOSECONDS:
            problems.append(
                ("idleAfter", f"{self.idle_after} is under a minute: versions would sleep between requests")
            )
        for key, field in (("idleAfter", "idle_after"), ("wake", "wake")):
            if field in self.model_fields_set and not self.scales_to_zero:
                problems.append((key, "only for a model that scales to zero: set minReplicas to 0, or drop this"))
        if problems:
            raise config_problems(problems)
        return self

    @property
    def scales_to_zero(self) -> bool:
        return self.min_replicas == 0

    @property
    def idle_seconds(self) -> int:
        """KEDA's cooldownPeriod: idleAfter in whole seconds, rounded up."""
        return math.ceil(duration_nanoseconds(self.idle_after) / 10**9)

    @property
    def enabled(self) -> bool:
        return self.max_replicas > self.min_replicas

    @property
    def uses_resource_metrics(self) -> bool:
        """Scales on CPU or memory (CPU is also what an HPA without targets uses): metrics.k8s.io."""
        return self.enabled and any(metric["type"] == "Resource" for metric in self.metrics())

    @property
    def uses_custom_metrics(self) -> bool:
        targets = (self.gpu_utilization, self.requests_per_second, self.queue_depth, self.time_to_first_token_p90)
        return any(target is not None for target in targets)

    def metrics(self) -> list[dict[str, Any]]:
        metrics: list[dict[str, Any]] = []
        for resource, target in (("cpu", self.cpu_utilization), ("memory", self.memory_utilization)):
            if target is not None:
                metrics.append(
                    {
                        "type": "Resource",
                        "resource": {"name": resource, "target": {"type": "Utilization", "averageUtilization": target}},
                    }
                )
        for metric, value in (
            (
                custom_metrics.GPU_USAGE,
                None if self.gpu_utilization is None else Decimal(self.gpu_utilization).scaleb(-2),
            ),
            (
                custom_metrics.REQUESTS_PER_SECOND,
                None if self.requests_per_second is None else _decimal(self.requests_per_second),
            ),
            (custom_metrics.REQUESTS_WAITING, None if self.queue_depth is None else Decimal(self.queue_depth)),
            (
                custom_metrics.TIME_TO_FIRST_TOKEN_P90,
                None if self.time_to_first_token_p90 is None else _decimal(self.time_to_first_token_p90),
            ),
        ):
            if value is not None:
                metrics.append(
                    {
                        "type": "Pods",
                        "pods": {
                            "metric": {"name": metric},
                            "target": {"type": "AverageValue", "averageValue": _quantity(value)},
                        },
                    }
                )
        if not metrics:
            # What Kubernetes would assume anyway, written out so a reviewer sees it.
            metrics.append(
                {
                    "type": "Resource",
                    "resource": {"name": "cpu", "target": {"type": "Utilization", "averageUtilization": 80}},
                }
            )
        return metrics


class VersionAutoscaling(ConfigModel):
    """One version's own bounds, within its model's autoscaling (its targets and timings are the model's)."""

    min_replicas: Annotated[int, Field(ge=0, le=1000)] | None = Field(
        default=None,
        description="This version's floor: by default the model's minReplicas for a live version, and for a "
        "shadow 1 (0 where the model sleeps at zero; the model's where its bounds are equal). 0 only where the "
        "model's is 0: a model sleeps or wakes as a whole.",
    )
    max_replicas: Annotated[int, Field(ge=1, le=1000)] | None = Field(
        default=None, description="This version's ceiling: by default the model's maxReplicas, and at most that."
    )


def horizontal_pod_autoscaler(
    metadata: dict[str, Any], spec: AutoscalingSpec, target: dict[str, str] | None = None
) -> dict[str, Any]:
    """The autoscaling/v2 HPA for `target` (by default the Deployment named in `metadata`)."""
    return {
        "apiVersion": "autoscaling/v2",
        "kind": "HorizontalPodAutoscaler",
        "metadata": metadata,
        "spec": {
            "scaleTargetRef": target or {"apiVersion": "apps/v1", "kind": "Deployment", "name": metadata["name"]},
            "minReplicas": spec.min_replicas,
            "maxReplicas": spec.max_replicas,
            "metrics": spec.metrics(),
            "behavior": {"scaleDown": {"stabilizationWindowSeconds": spec.scale_down_stabilization_seconds}},
        },
    }
