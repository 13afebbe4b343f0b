"""The custom metrics autoscaling reads, and how prometheus-adapter computes them from Prometheus.

One place for both sides: the HorizontalPodAutoscalers name these metrics, the adapter's rules
serve them. Queries are Go templates over <<.Series>>, <<.LabelMatchers>> and <<.GroupBy>>,
which the adapter fills in for the pods an HPA asks about.
"""

from __future__ import annotations

from typing import Any

GPU_USAGE = "container_gpu_usage"
"""Per pod: GPU utilisation averaged over 5 minutes, summed over the pod's GPUs, as a fraction (0.6 = 60 %)."""

REQUESTS_PER_SECOND = "requests_per_second"
"""Per pod: requests the pod's sidecar received per second, over the last minute."""

# DCGM's per-device gauge in percent. dcgm-exporter labels it with the pod that owns the GPU.
DCGM_GPU_UTIL = "DCGM_FI_DEV_GPU_UTIL"
# HAMi's per-container utilisation of its vGPU slice, in percent. Under sharing, DCGM reports
# the whole device's utilisation to every pod on it, which would scale the wrong pods.
HAMI_GPU_UTIL = "hami_container_device_utilization_ratio"
ISTIO_REQUESTS = "istio_requests_total"

POD_RESOURCES = {"namespace": {"resource": "namespace"}, "pod": {"resource": "pod"}}


def gpu_usage_rule(source: str) -> dict[str, Any]:
    """container_gpu_usage from DCGM (whole GPUs) or from HAMi (shared GPUs)."""
    return {
        "seriesQuery": f'{source}{{namespace!="",pod!=""}}',
        "resources": {"overrides": POD_RESOURCES},
        "name": {"matches": f"^{source}$", "as": GPU_USAGE},
        "metricsQuery": "sum(avg_over_time(<<.Series>>{<<.LabelMatchers>>}[5m])) by (<<.GroupBy>>) / 100",
    }


def requests_per_second_rule() -> dict[str, Any]:
    """requests_per_second from Istio's server-side request counter."""
    return {
        "seriesQuery": f'{ISTIO_REQUESTS}{{namespace!="",pod!=""}}',
        "seriesFilters": [],
        "resources": {"overrides": POD_RESOURCES},
        "name": {"matches": f"^{ISTIO_REQUESTS}$", "as": REQUESTS_PER_SECOND},
        "metricsQuery": 'sum(rate(<<.Series>>{<<.LabelMatchers>>,reporter="destination"}[1m])) by (<<.GroupBy>>)',
    }


def adapter_rules(gpu_source: str) -> list[dict[str, Any]]:
    return [gpu_usage_rule(gpu_source), requests_per_second_rule()]
