"""prometheus-adapter's rules, expanded for concrete pods and evaluated by promtool on synthetic series."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any, Literal

import pytest
import yaml

from inference_platform.platform import custom_metrics
from inference_platform.platform.prometheus_adapter import (
    PrometheusAdapterArgs,
    PrometheusAdapterConfig,
    adapter_values,
)
from tests.platform.prometheus_harness import PROMTOOL

pytestmark = pytest.mark.slow


def expand(rule: dict[str, Any], namespace: str, pods: list[str]) -> str:
    """What the adapter sends to Prometheus for an HPA asking about `pods` (prometheus-adapter
    pkg/naming/metrics_query.go): the series name, matchers for the namespace and the pods
    (`=` for one pod, `=~` for several), grouped by pod."""
    pod_matcher = f'pod="{pods[0]}"' if len(pods) == 1 else f'pod=~"{"|".join(pods)}"'
    series = rule["name"]["matches"].strip("^$")
    query = str(rule["metricsQuery"])
    query = query.replace("<<.Series>>", series)
    query = query.replace("<<.LabelMatchers>>", f'namespace="{namespace}",{pod_matcher}')
    query = query.replace("<<.GroupBy>>", "pod")
    assert "<<" not in query, query
    return query


def promtool_test(tmp_path: Path, input_series: list[dict[str, str]], checks: list[dict[str, Any]]) -> None:
    tests = {
        "rule_files": [],
        "evaluation_interval": "1m",
        "tests": [
            {
                "interval": "30s",
                "input_series": input_series,
                "promql_expr_test": [check | {"eval_time": "10m"} for check in checks],
            }
        ],
    }
    path = tmp_path / "tests.yml"
    path.write_text(yaml.safe_dump(tests, sort_keys=False))
    done = subprocess.run([PROMTOOL, "test", "rules", str(path)], capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stdout + done.stderr


def rules(gpu_source: Literal["dcgm", "hami"]) -> dict[str, dict[str, Any]]:
    args = PrometheusAdapterArgs(
        config=PrometheusAdapterConfig(),
        namespace="monitoring",
        prometheus_url="http://prometheus-server.monitoring.svc",
        prometheus_port=80,
        gpu_source=gpu_source,
    )
    custom = adapter_values(args)["rules"]["custom"]
    return {rule["name"]["as"]: rule for rule in custom}


def test_gpu_usage_from_dcgm_is_the_pods_5_minute_average_over_100(tmp_path: Path) -> None:
    rule = rules("dcgm")[custom_metrics.GPU_USAGE]
    pod = 'namespace="service",pod="resnet-v1-7d9f",container="predictor"'
    promtool_test(
        tmp_path,
        [
            {"series": f'DCGM_FI_DEV_GPU_UTIL{{{pod},gpu="0"}}', "values": "60x20"},
            {"series": 'DCGM_FI_DEV_GPU_UTIL{namespace="service",pod="two-gpus",gpu="0"}', "values": "60x20"},
            {"series": 'DCGM_FI_DEV_GPU_UTIL{namespace="service",pod="two-gpus",gpu="1"}', "values": "40x20"},
            {"series": 'DCGM_FI_DEV_GPU_UTIL{namespace="other",pod="resnet-v1-7d9f",gpu="0"}', "values": "99x20"},
        ],
        [
            {
                "expr": expand(rule, "service", ["resnet-v1-7d9f"]),
                "exp_samples": [{"labels": '{pod="resnet-v1-7d9f"}', "value": 0.6}],
            },
            {
                "expr": expand(rule, "service", ["resnet-v1-7d9f", "two-gpus"]),
                "exp_samples": [
                    {"labels": '{pod="resnet-v1-7d9f"}', "value": 0.6},
                    {"labels": '{pod="two-gpus"}', "value": 1.0},
                ],
            },
        ],
    )


def test_gpu_usage_averages_exactly_the_last_5_minutes(tmp_path: Path) -> None:
    """Zero for 5 minutes, then busy and falling off: the 5-minute mean, not the last sample (20),
    the last minute's mean or a 10-minute mean. The sample at the window's start equals the mean
    of the rest, so Prometheus 2 (closed windows) and 3 (left-open windows) agree."""
    rule = rules("dcgm")[custom_metrics.GPU_USAGE]
    promtool_test(
        tmp_path,
        [
            {
                "series": 'DCGM_FI_DEV_GPU_UTIL{namespace="service",pod="resnet-v1-7d9f",gpu="0"}',
                "values": "0x9 60 70x7 20x1",
            }
        ],
        [
            {
                "expr": expand(rule, "service", ["resnet-v1-7d9f"]),
                "exp_samples": [{"labels": '{pod="resnet-v1-7d9f"}', "value": 0.6}],
            }
        ],
    )


def test_gpu_usage_under_hami_is_each_containers_own_share(tmp_path: Path) -> None:
    """Two pods share one device at 30 % and 50 %: each scales on its own use, not the device's 80 %."""
    rule = rules("hami")[custom_metrics.GPU_USAGE]
    labels = 'namespace="service",container="predictor",vdevice_index="0",device_uuid="GPU-0a1b"'
    promtool_test(
        tmp_path,
        [
            {"series": f'hami_container_device_utilization_ratio{{{labels},pod="llama-v1-a"}}', "values": "30x20"},
            {"series": f'hami_container_device_utilization_ratio{{{labels},pod="embed-v1-b"}}', "values": "50x20"},
        ],
        [
            {
                "expr": expand(rule, "service", ["llama-v1-a", "embed-v1-b"]),
                "exp_samples": [
                    {"labels": '{pod="llama-v1-a"}', "value": 0.3},
                    {"labels": '{pod="embed-v1-b"}', "value": 0.5},
                ],
            }
        ],
    )


def test_requests_per_second_counts_server_side_requests_over_a_minute(tmp_path: Path) -> None:
    rule = rules("dcgm")[custom_metrics.REQUESTS_PER_SECOND]
    server = 'namespace="service",pod="iris-v1-abc",reporter="destination",response_code="200"'
    promtool_test(
        tmp_path,
        [
            # 150 requests every 30 s: 5 per second, received by the pod.
            {"series": f"istio_requests_total{{{server}}}", "values": "0+150x20"},
            # Calls the same pod makes to others are reported by its sidecar as the source.
            {
                "series": 'istio_requests_total{namespace="service",pod="iris-v1-abc",reporter="source"}',
                "values": "0+900x20",
            },
        ],
        [
            {
                "expr": expand(rule, "service", ["iris-v1-abc"]),
                "exp_samples": [{"labels": '{pod="iris-v1-abc"}', "value": 5}],
            }
        ],
    )


def test_the_adapter_serves_only_the_platforms_rules() -> None:
    values = adapter_values(
        PrometheusAdapterArgs(
            config=PrometheusAdapterConfig(),
            namespace="monitoring",
            prometheus_url="http://prometheus-server.monitoring.svc",
            prometheus_port=80,
            gpu_source="dcgm",
        )
    )
    assert values["prometheus"] == {"url": "http://prometheus-server.monitoring.svc", "port": 80}
    assert values["rules"]["default"] is False
    assert [r["name"]["as"] for r in values["rules"]["custom"]] == ["container_gpu_usage", "requests_per_second"]
    for rule in values["rules"]["custom"]:
        assert rule["resources"]["overrides"] == {"namespace": {"resource": "namespace"}, "pod": {"resource": "pod"}}


def test_requests_per_second_follow_the_last_minute(tmp_path: Path) -> None:
    """5 req/s for 9 minutes, then 20 req/s: the one-minute rate says 20 (five minutes would say 8)."""
    rule = rules("dcgm")[custom_metrics.REQUESTS_PER_SECOND]
    server = 'namespace="service",pod="iris-v1-abc",reporter="destination"'
    promtool_test(
        tmp_path,
        [{"series": f"istio_requests_total{{{server}}}", "values": "0+150x18 3300+600x2"}],
        [
            {
                "expr": expand(rule, "service", ["iris-v1-abc"]),
                "exp_samples": [{"labels": '{pod="iris-v1-abc"}', "value": 20}],
            }
        ],
    )


# prometheus-adapter's DiscoveryRule (pkg/config/config.go): the keys it reads; any other is ignored.
DISCOVERY_RULE_KEYS = {"seriesQuery", "seriesFilters", "resources", "name", "metricsQuery"}


@pytest.mark.parametrize("gpu_source", ["dcgm", "hami"])
def test_each_rule_discovers_its_series_with_keys_the_adapter_reads(
    tmp_path: Path, gpu_source: Literal["dcgm", "hami"]
) -> None:
    """The adapter lists series by seriesQuery before it can serve a metric: each rule's must find
    the series its metricsQuery reads, on a pod in a namespace (what it maps to Kubernetes objects)."""
    found = rules(gpu_source)
    source = custom_metrics.DCGM_GPU_UTIL if gpu_source == "dcgm" else custom_metrics.HAMI_GPU_UTIL
    series = {
        custom_metrics.GPU_USAGE: f'{source}{{namespace="service",pod="iris-v1-abc"}}',
        custom_metrics.REQUESTS_PER_SECOND: 'istio_requests_total{namespace="service",pod="iris-v1-abc"}',
    }
    for name, rule in found.items():
        assert set(rule) <= DISCOVERY_RULE_KEYS
        assert {"seriesQuery", "name", "metricsQuery", "resources"} <= set(rule)
        promtool_test(
            tmp_path,
            [
                {"series": series[name], "values": "1+0x20"},
                # Without a pod (a node-level series) the adapter could not name an object.
                {"series": series[name].replace(',pod="iris-v1-abc"', ""), "values": "1+0x20"},
            ],
            [{"expr": rule["seriesQuery"], "exp_samples": [{"labels": series[name], "value": 1}]}],
        )
