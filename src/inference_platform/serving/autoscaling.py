"""Horizontal autoscaling of a version's Deployment on CPU, memory, GPU utilisation and QPS."""

from __future__ import annotations

from decimal import Decimal
from typing import Annotated, Any

from pydantic import Field, field_validator, model_validator
from pydantic_core import PydanticCustomError

from inference_platform.config.base import ConfigModel, config_problems
from inference_platform.platform import custom_metrics

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

    min_replicas: Annotated[int, Field(ge=1, le=1000)] = 1
    max_replicas: Annotated[int, Field(ge=1, le=1000)] = 1
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
    scale_down_stabilization_seconds: Annotated[int, Field(ge=0, le=3600)] = Field(
        default=300, description="How long load must stay low before replicas are removed."
    )

    @field_validator("requests_per_second")
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
        if self.min_replicas > self.max_replicas:
            raise config_problems(
                [("minReplicas", f"{self.min_replicas} is more than maxReplicas ({self.max_replicas})")]
            )
        return self

    @property
    def enabled(self) -> bool:
        return self.max_replicas > self.min_replicas

    @property
    def uses_resource_metrics(self) -> bool:
        """Scales on CPU or memory (CPU is also what an HPA without targets uses): metrics.k8s.io."""
        return self.enabled and any(metric["type"] == "Resource" for metric in self.metrics())

    @property
    def uses_custom_metrics(self) -> bool:
        return self.gpu_utilization is not None or self.requests_per_second is not None

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


def horizontal_pod_autoscaler(metadata: dict[str, Any], spec: AutoscalingSpec) -> dict[str, Any]:
    """The autoscaling/v2 HPA for the Deployment named in `metadata` (same name and namespace)."""
    return {
        "apiVersion": "autoscaling/v2",
        "kind": "HorizontalPodAutoscaler",
        "metadata": metadata,
        "spec": {
            "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": metadata["name"]},
            "minReplicas": spec.min_replicas,
            "maxReplicas": spec.max_replicas,
            "metrics": spec.metrics(),
            "behavior": {"scaleDown": {"stabilizationWindowSeconds": spec.scale_down_stabilization_seconds}},
        },
    }
