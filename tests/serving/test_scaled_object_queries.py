"""The Prometheus queries of the ScaledObjects' triggers, taken from rendered ScaledObjects and
evaluated by promtool (Prometheus' own engine) on synthetic series: each answers exactly one
sample, as KEDA's Prometheus scaler needs, summed over the version's pods and nobody else's, and
0 when a version has no pods or no traffic."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from inference_platform.platform.keda import HttpAddOnRef, KedaRef
from tests.platform.test_adapter_queries import promtool_test
from tests.serving.test_scale_to_zero import iris, render

pytestmark = pytest.mark.slow

PROMETHEUS = "http://prometheus-server.monitoring.svc:80"
SCALING = {"minReplicas": 0, "maxReplicas": 4, "gpuUtilization": 60, "requestsPerSecond": 5}


def triggers(version: str, gpu_source: str = "dcgm") -> dict[str, dict[str, Any]]:
    keda = KedaRef.model_validate(
        {"prometheusUrl": PROMETHEUS, "gpuSource": gpu_source, "httpAddOn": HttpAddOnRef(namespace="keda")}
    )
    model = iris(autoscaling=SCALING, gpu={"mode": "exclusive", "count": 1})
    scaled = render(model, keda=keda)["ScaledObject", f"iris-{version}"]
    return {trigger["name"]: trigger["metadata"] for trigger in scaled["spec"]["triggers"]}


def up(pod: str, version: str, namespace: str = "service") -> dict[str, str]:
    """The scrape target of one pod, with the pod's labels (Prometheus' kubernetes-pods job)."""
    labels = f'job="kubernetes-pods",namespace="{namespace}",pod="{pod}",app="iris",version="{version}"'
    return {"series": f"up{{{labels}}}", "values": "1x20"}


def served(pod: str, per_30s: int, *, reporter: str = "destination", namespace: str = "service") -> dict[str, str]:
    labels = f'namespace="{namespace}",pod="{pod}",reporter="{reporter}",app="iris",version="{pod[5:7]}"'
    return {"series": f"istio_requests_total{{{labels}}}", "values": f"0+{per_30s}x20"}


def one(value: float) -> list[dict[str, Any]]:
    return [{"labels": "{}", "value": value}]


def test_requests_per_second_sums_the_versions_own_pods(tmp_path: Path) -> None:
    query = triggers("v1")["requests-per-second"]["query"]
    promtool_test(
        tmp_path,
        [
            up("iris-v1-a", "v1"),
            up("iris-v1-b", "v1"),
            up("iris-v2-c", "v2"),
            served("iris-v1-a", 150),  # 5 per second
            served("iris-v1-b", 90),  # 3 per second
            served("iris-v2-c", 600),  # another version's pod
            served("iris-v1-a", 900, reporter="source"),  # calls it makes
            served("iris-v1-a", 900, namespace="other"),  # a pod of the same name elsewhere
        ],
        [{"expr": query, "exp_samples": one(8)}],
    )


def test_a_version_with_no_pods_or_no_traffic_reads_zero(tmp_path: Path) -> None:
    rate = triggers("v1")["requests-per-second"]["query"]
    gpu = triggers("v1")["gpu-utilization"]["query"]
    promtool_test(
        tmp_path,
        # asleep: no pod of v1 is scraped; v2 is up and busy
        [up("iris-v2-c", "v2"), served("iris-v2-c", 600)],
        [{"expr": rate, "exp_samples": one(0)}, {"expr": gpu, "exp_samples": one(0)}],
    )
    promtool_test(
        tmp_path,
        # awake and idle: its pod is up, nothing reaches it
        [up("iris-v1-a", "v1")],
        [{"expr": rate, "exp_samples": one(0)}, {"expr": gpu, "exp_samples": one(0)}],
    )


def test_gpu_utilization_is_the_sum_of_the_versions_pods_over_100(tmp_path: Path) -> None:
    query = triggers("v2")["gpu-utilization"]["query"]
    device = 'DCGM_FI_DEV_GPU_UTIL{{namespace="service",pod="{pod}",gpu="{gpu}"}}'
    promtool_test(
        tmp_path,
        [
            up("iris-v2-a", "v2"),
            up("iris-v2-b", "v2"),
            up("iris-v1-c", "v1"),
            {"series": device.format(pod="iris-v2-a", gpu="0"), "values": "60x20"},
            {"series": device.format(pod="iris-v2-b", gpu="1"), "values": "30x20"},
            {"series": device.format(pod="iris-v1-c", gpu="2"), "values": "99x20"},
        ],
        # against a threshold of 0.6 a replica: 0.9 asks for two
        [{"expr": query, "exp_samples": one(0.9)}],
    )


def test_a_shadow_wakes_on_its_models_live_traffic_only(tmp_path: Path) -> None:
    wake = triggers("v3")["wake"]
    assert (wake["threshold"], wake["activationThreshold"]) == ("1000000000", "0")
    promtool_test(
        tmp_path,
        [
            served("iris-v1-a", 150),
            served("iris-v2-b", 30),
            served("iris-v3-c", 300),  # the mirror the shadow already gets
        ],
        [{"expr": wake["query"], "exp_samples": one(6)}],
    )
    promtool_test(tmp_path, [served("iris-v3-c", 300)], [{"expr": wake["query"], "exp_samples": one(0)}])
