"""prometheus-adapter: serves the custom metrics autoscaling reads (platform/custom_metrics.py)."""

from __future__ import annotations

from typing import Any, Literal

import pulumi
from pydantic import Field

from inference_platform import pins
from inference_platform.config.base import ConfigModel
from inference_platform.platform import custom_metrics
from inference_platform.platform.helm import chart, merge_values

RELEASE = "prometheus-adapter"
POD_LABELS = {"app.kubernetes.io/name": "prometheus-adapter", "app.kubernetes.io/instance": RELEASE}
# The custom metrics API the API server aggregates.
API_PORT = 6443


class PrometheusAdapterConfig(ConfigModel):
    enabled: bool | Literal["auto"] = Field(
        default="auto",
        description="auto: installed while the platform autoscales with HPAs (KEDA reads Prometheus itself).",
    )
    values: dict[str, Any] = Field(default_factory=dict, description="Raw chart values laid over the generated ones.")

    def installed(self, needed: bool) -> bool:
        return needed if self.enabled == "auto" else self.enabled


class PrometheusAdapterArgs(ConfigModel):
    config: PrometheusAdapterConfig
    namespace: str
    prometheus_url: str = Field(description="Prometheus' Service URL without the port.")
    prometheus_port: int
    gpu_source: Literal["dcgm", "hami"] = Field(
        description="Source of container_gpu_usage: DCGM (whole GPUs) or HAMi (per container, under sharing)."
    )
    queue_series: list[str] = Field(
        default_factory=list,
        description="The runtimes' queue gauges requests_waiting is read from, when some model scales on one.",
    )
    ttft_histograms: list[str] = Field(
        default_factory=list,
        description="The runtimes' time-to-first-token histograms time_to_first_token_p90_seconds is read "
        "from, when some model scales on it.",
    )


def adapter_values(args: PrometheusAdapterArgs) -> dict[str, Any]:
    source = custom_metrics.HAMI_GPU_UTIL if args.gpu_source == "hami" else custom_metrics.DCGM_GPU_UTIL
    return {
        "prometheus": {"url": args.prometheus_url, "port": args.prometheus_port},
        "resources": {"requests": {"cpu": "100m", "memory": "128Mi"}, "limits": {"cpu": "500m", "memory": "512Mi"}},
        # Only the platform's rules: the chart's defaults would publish dozens of other metrics.
        "rules": {
            "default": False,
            "custom": custom_metrics.adapter_rules(source, args.queue_series, args.ttft_histograms),
        },
    }


class PrometheusAdapter(pulumi.ComponentResource):
    def __init__(self, name: str, args: PrometheusAdapterArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("inference-platform:platform:PrometheusAdapter", name, None, opts)
        values = merge_values(adapter_values(args), args.config.values)
        chart(RELEASE, pins.PROMETHEUS_ADAPTER, args.namespace, values, pulumi.ResourceOptions(parent=self))
        served = [custom_metrics.GPU_USAGE, custom_metrics.REQUESTS_PER_SECOND]
        served += [custom_metrics.REQUESTS_WAITING] * bool(args.queue_series)
        served += [custom_metrics.TIME_TO_FIRST_TOKEN_P90] * bool(args.ttft_histograms)
        self.metrics = pulumi.Output.from_input(served)
        self.register_outputs({"metrics": self.metrics})
