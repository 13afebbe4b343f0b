"""Autoscaling: one autoscaling/v2 HPA per version, and Deployments that leave replicas to it."""

from __future__ import annotations

import re
from decimal import Decimal
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from kubernetes.utils import parse_quantity
from pydantic import ValidationError

from inference_platform.serving.autoscaling import AutoscalingSpec
from inference_platform.serving.inference_service.args import InferenceServiceArgs
from inference_platform.serving.inference_service.manifests import model_manifests
from inference_platform.serving.runtimes.triton import TritonModel
from tests.owner_schemas import validate

TENSORS = {
    "inputs": [{"name": "x", "dataType": "FP32", "dims": [4]}],
    "outputs": [{"name": "y", "dataType": "FP32", "dims": [2]}],
}


def render(**settings: Any) -> list[dict[str, Any]]:
    spec = TritonModel.model_validate(
        {
            "name": "resnet",
            "runtime": "triton",
            "format": "onnx",
            "gpu": "exclusive",
            "versions": [
                {"name": "v1", "modelUri": "pvc://m/r/1", "weight": 90},
                {"name": "v2", "modelUri": "pvc://m/r/2", "weight": 10},
            ],
            **TENSORS,
            **settings,
        }
    )
    return model_manifests(InferenceServiceArgs(model=spec, namespace="service", domain="models.example.com"))


def of_kind(manifests: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    return [m for m in manifests if m["kind"] == kind]


def test_an_hpa_per_version_scales_on_every_requested_signal() -> None:
    manifests = render(
        autoscaling={
            "minReplicas": 2,
            "maxReplicas": 8,
            "cpuUtilization": 70,
            "memoryUtilization": 80,
            "gpuUtilization": 60,
            "requestsPerSecond": 2.5,
            "scaleDownStabilizationSeconds": 600,
        }
    )

    hpas = of_kind(manifests, "HorizontalPodAutoscaler")
    assert [h["metadata"]["name"] for h in hpas] == ["resnet-v1", "resnet-v2"]
    spec = hpas[0]["spec"]
    assert spec["scaleTargetRef"] == {"apiVersion": "apps/v1", "kind": "Deployment", "name": "resnet-v1"}
    assert (spec["minReplicas"], spec["maxReplicas"]) == (2, 8)
    assert spec["metrics"] == [
        {"type": "Resource", "resource": {"name": "cpu", "target": {"type": "Utilization", "averageUtilization": 70}}},
        {
            "type": "Resource",
            "resource": {"name": "memory", "target": {"type": "Utilization", "averageUtilization": 80}},
        },
        {
            "type": "Pods",
            "pods": {
                "metric": {"name": "container_gpu_usage"},
                "target": {"type": "AverageValue", "averageValue": "600m"},
            },
        },
        {
            "type": "Pods",
            "pods": {
                "metric": {"name": "requests_per_second"},
                "target": {"type": "AverageValue", "averageValue": "2500m"},
            },
        },
    ]
    assert spec["behavior"] == {"scaleDown": {"stabilizationWindowSeconds": 600}}
    for manifest in manifests:
        validate(manifest)


def test_deployments_leave_replicas_to_the_autoscaler() -> None:
    scaled = render(autoscaling={"minReplicas": 1, "maxReplicas": 3, "gpuUtilization": 60})
    fixed = render(replicas=2)

    assert all("replicas" not in d["spec"] for d in of_kind(scaled, "Deployment"))
    assert [d["spec"]["replicas"] for d in of_kind(fixed, "Deployment")] == [2, 2]
    assert not of_kind(fixed, "HorizontalPodAutoscaler")


def test_equal_bounds_mean_no_autoscaler() -> None:
    manifests = render(autoscaling={"minReplicas": 3, "maxReplicas": 3})
    assert not of_kind(manifests, "HorizontalPodAutoscaler")
    assert [d["spec"]["replicas"] for d in of_kind(manifests, "Deployment")] == [3, 3]


def test_without_targets_the_default_cpu_target_is_written_out() -> None:
    (hpa, _) = of_kind(render(autoscaling={"maxReplicas": 4}), "HorizontalPodAutoscaler")
    assert hpa["spec"]["metrics"] == [
        {"type": "Resource", "resource": {"name": "cpu", "target": {"type": "Utilization", "averageUtilization": 80}}}
    ]


@pytest.mark.parametrize(
    ("settings", "words"),
    [
        ({"autoscaling": {"minReplicas": 5, "maxReplicas": 2}}, "5 is more than maxReplicas (2)"),
        ({"gpu": "none", "autoscaling": {"maxReplicas": 3, "gpuUtilization": 50}}, "the model has no GPU"),
        ({"replicas": 3, "autoscaling": {"maxReplicas": 3}}, "set replicas or autoscaling, not both"),
        ({"replicas": 2, "autoscaling": {"minReplicas": 3, "maxReplicas": 3}}, "set replicas or autoscaling, not both"),
        ({"autoscaling": {"maxReplicas": 3, "gpuUtilization": 150}}, "less than or equal to 100"),
        (
            {"gpu": {"mode": "shared"}, "autoscaling": {"maxReplicas": 3, "gpuUtilization": 50}},
            "no exporter reports its use",
        ),
        ({"autoscaling": {"maxReplicas": 3, "requestsPerSecond": 0.0001}}, "greater than or equal to 0.001"),
        (
            {"autoscaling": {"maxReplicas": 3, "requestsPerSecond": 0.0010000000001}},
            "more than nine decimal places: Kubernetes quantities stop at nano units",
        ),
    ],
)
def test_impossible_autoscaling_is_a_config_error(settings: dict[str, Any], words: str) -> None:
    with pytest.raises(ValidationError, match=words.replace("(", r"\(").replace(")", r"\)")):
        render(**settings)


# apimachinery's grammar: a signed decimal, then a binary or decimal SI suffix or an exponent.
KUBERNETES_QUANTITY = re.compile(
    r"[+-]?([0-9]+(\.[0-9]*)?|\.[0-9]+)(Ki|Mi|Gi|Ti|Pi|Ei|n|u|m|k|M|G|T|P|E|[eE][+-]?[0-9]+)?"
)


def rps_target(requests_per_second: float) -> str:
    spec = AutoscalingSpec.model_validate({"maxReplicas": 4, "requestsPerSecond": requests_per_second})
    (metric,) = spec.metrics()
    assert metric["pods"]["metric"]["name"] == "requests_per_second"
    target: str = metric["pods"]["target"]["averageValue"]
    return target


@pytest.mark.parametrize(
    ("requests_per_second", "quantity"),
    [
        (1.001, "1001m"),
        (2.01, "2010m"),
        (0.0015, "1500u"),
        (0.001, "1m"),
        (123.456789, "123456789u"),
        (999_999.000000001, "999999000000001n"),
        # Values milli-units hold keep their form byte for byte.
        (0.6, "600m"),
        (2.5, "2500m"),
        (20, "20"),
        (1_000_000, "1000000"),
    ],
)
def test_fractional_request_rates_keep_their_precision(requests_per_second: float, quantity: str) -> None:
    (hpa, _) = of_kind(
        render(autoscaling={"maxReplicas": 4, "requestsPerSecond": requests_per_second}), "HorizontalPodAutoscaler"
    )
    (metric,) = hpa["spec"]["metrics"]
    target = metric["pods"]["target"]["averageValue"]

    assert target == quantity
    assert KUBERNETES_QUANTITY.fullmatch(target)
    assert parse_quantity(target) == Decimal(str(requests_per_second))


@settings(deadline=None, derandomize=True)  # the same rates on every run, as the hostile-config tests
@given(st.decimals(min_value=Decimal("0.001"), max_value=Decimal(1_000_000), places=9))
def test_every_rate_the_config_accepts_is_the_exact_target(written: Decimal) -> None:
    """Up to nine decimal places (nano units), whatever the magnitude, the quantity is the value written."""
    target = rps_target(float(written))
    assert KUBERNETES_QUANTITY.fullmatch(target)
    assert parse_quantity(target) == written


@pytest.mark.parametrize(("percent", "quantity"), [(1, "10m"), (60, "600m"), (99, "990m"), (100, "1")])
def test_gpu_targets_are_fractions_of_one_gpu(percent: int, quantity: str) -> None:
    (metric,) = AutoscalingSpec.model_validate({"maxReplicas": 4, "gpuUtilization": percent}).metrics()
    assert metric["pods"]["target"]["averageValue"] == quantity
    assert parse_quantity(quantity) * 100 == percent
