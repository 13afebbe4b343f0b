"""Autoscaling on the engine's queue (autoscaling.queueDepth): vLLM's, SGLang's and TensorRT-LLM's own
gauges of waiting requests, read through prometheus-adapter (HPAs) or a KEDA trigger (ScaledObjects), each query
evaluated by promtool on series named as the engines export them."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

from inference_platform.config.errors import ConfigError, problems_from_validation
from inference_platform.platform import custom_metrics
from inference_platform.platform.prometheus_adapter import (
    PrometheusAdapterArgs,
    PrometheusAdapterConfig,
    adapter_values,
)
from inference_platform.serving.pipeline import PipelineSpec
from inference_platform.serving.runtimes.sglang import SGLangModel
from inference_platform.serving.runtimes.triton_llm import TritonLLMModel
from inference_platform.serving.runtimes.vllm import VLLMModel
from inference_platform.stack.config import UNIONS, parse_stack_config, project_values
from tests.conftest import ROOT, base_config
from tests.platform.test_adapter_queries import expand, promtool_test
from tests.serving.test_scale_to_zero import keda, render

WAITING = "vllm:num_requests_waiting"
SGLANG_QUEUE = "sglang:num_queue_reqs"
VLLM_LOGGERS = ROOT / ".venv-vllm" / "lib" / "python3.11" / "site-packages" / "vllm" / "v1" / "metrics" / "loggers.py"
SGLANG_METRICS = (
    ROOT / ".venv-sglang" / "lib" / "python3.11" / "site-packages" / "sglang" / "srt" / "observability"
) / "metrics_collector.py"
SCALING = {"minReplicas": 1, "maxReplicas": 6, "queueDepth": 4}
# TensorRT-LLM's gauge family of requests by state, as the Gateway API inference extension's endpoint
# picker reads it for Triton (its chart's modelServerType triton-tensorrt-llm, ../shared's notes).
TRTLLM_FAMILY = "nv_trt_llm_request_metrics"
TRTLLM_QUEUE = 'nv_trt_llm_request_metrics{request_type="waiting"}'
EPP_NOTES = ROOT.parent / "shared" / "inference-extension" / "v1.4.0" / "README.md"


def llama(**settings: Any) -> dict[str, Any]:
    return {
        "name": "llama",
        "runtime": "vllm",
        "gpu": "exclusive",
        "versions": [
            {"name": "v1", "modelUri": "hf://meta-llama/Llama-3.1-8B-Instruct", "weight": 100},
            {"name": "v2", "modelUri": "hf://meta-llama/Llama-3.1-8B-Instruct", "mirrorPercent": 10},
        ],
        "autoscaling": SCALING,
        **settings,
    }


def test_the_gauge_is_the_one_vllm_declares() -> None:
    """The name as vLLM's own metrics logger registers it, read from the pinned wheel in .venv-vllm."""
    assert VLLM_LOGGERS.exists(), "vLLM's source comes from .venv-vllm: run `make test`, which builds it"
    source = VLLM_LOGGERS.read_text()
    assert re.search(r'_gauge_cls\(\s*name="vllm:num_requests_waiting",', source)
    assert VLLMModel.QUEUE_METRIC == WAITING


def test_sglangs_gauge_is_the_one_sglang_declares() -> None:
    """The scheduler's queue gauge as SGLang's metrics collector registers it (the pinned wheel in .venv-sglang)."""
    assert SGLANG_METRICS.exists(), "SGLang's source comes from .venv-sglang: run `make test`, which builds it"
    source = SGLANG_METRICS.read_text()
    assert re.search(r'self\.num_queue_reqs = Gauge\(\s*name="sglang:num_queue_reqs",', source)
    assert SGLangModel.QUEUE_METRIC == SGLANG_QUEUE


def test_an_hpa_targets_waiting_requests_per_pod() -> None:
    hpa = render(llama())["HorizontalPodAutoscaler", "llama-v1"]
    assert hpa["spec"]["metrics"] == [
        {
            "type": "Pods",
            "pods": {"metric": {"name": "requests_waiting"}, "target": {"type": "AverageValue", "averageValue": "4"}},
        }
    ]


def adapter_rules(queue_series: list[str]) -> list[dict[str, Any]]:
    args = PrometheusAdapterArgs(
        config=PrometheusAdapterConfig(),
        namespace="monitoring",
        prometheus_url="http://prometheus-server.monitoring.svc",
        prometheus_port=80,
        gpu_source="dcgm",
        queue_series=queue_series,
    )
    rules: list[dict[str, Any]] = adapter_values(args)["rules"]["custom"]
    return rules


def engine_queue(pod: str, waiting: int, namespace: str = "service") -> dict[str, str]:
    """vLLM's gauge as Prometheus scrapes it from a pod: its own labels, then the pod's."""
    labels = f'engine="0",model_name="llama",namespace="{namespace}",pod="{pod}",app="llama",version="{pod[6:8]}"'
    return {"series": f"{WAITING}{{{labels}}}", "values": f"{waiting}x20"}


def sglang_queue(pod: str, waiting: int, namespace: str = "service") -> dict[str, str]:
    """SGLang's gauge as Prometheus scrapes it: its own labels (model_name, tp_rank...), then the pod's."""
    labels = f'model_name="qwen",tp_rank="0",pp_rank="0",namespace="{namespace}",pod="{pod}",app="qwen"'
    return {"series": f"{SGLANG_QUEUE}{{{labels}}}", "values": f"{waiting}x20"}


def test_the_adapter_reads_the_gauge_per_pod_only_where_a_model_scales_on_it(tmp_path: Path) -> None:
    assert [r["name"]["as"] for r in adapter_rules([])] == ["container_gpu_usage", "requests_per_second"]
    (rule,) = [r for r in adapter_rules([WAITING]) if r["name"]["as"] == custom_metrics.REQUESTS_WAITING]
    promtool_test(
        tmp_path,
        [engine_queue("llama-v1-a", 3), engine_queue("llama-v1-b", 9), engine_queue("llama-v1-c", 5, "other")],
        [
            {
                "expr": expand(rule, "service", ["llama-v1-a", "llama-v1-b"]),
                "exp_samples": [
                    {"labels": '{pod="llama-v1-a"}', "value": 3},
                    {"labels": '{pod="llama-v1-b"}', "value": 9},
                ],
            },
            # What the adapter lists before it serves the metric: every pod's series, in a namespace.
            {
                "expr": f"count({rule['seriesQuery']})",
                "exp_samples": [{"labels": "{}", "value": 3}],
            },
        ],
    )


def test_one_rule_reads_both_engines_gauges_each_pod_its_own(tmp_path: Path) -> None:
    """vLLM and SGLang models scaling on their queues in one stack: the adapter serves
    requests_waiting from one rule, whichever engine a pod runs."""
    (rule,) = [r for r in adapter_rules([SGLANG_QUEUE, WAITING]) if r["name"]["as"] == custom_metrics.REQUESTS_WAITING]
    for named_after in (WAITING, SGLANG_QUEUE):
        # The adapter fills <<.Series>> with the series it named the metric after: the query must not depend on it.
        assert re.fullmatch(rule["name"]["matches"], named_after)
    series = [engine_queue("llama-v1-a", 3), sglang_queue("qwen-v1-a", 7), sglang_queue("qwen-v1-b", 2, "other")]
    promtool_test(
        tmp_path,
        series,
        [
            {
                "expr": expand(rule, "service", ["llama-v1-a", "qwen-v1-a"]),
                "exp_samples": [
                    {"labels": '{pod="llama-v1-a"}', "value": 3},
                    {"labels": '{pod="qwen-v1-a"}', "value": 7},
                ],
            },
            {"expr": f"count({rule['seriesQuery']})", "exp_samples": [{"labels": "{}", "value": 3}]},
        ],
    )


def qwen(**settings: Any) -> dict[str, Any]:
    return {
        "name": "qwen",
        "runtime": "sglang",
        "gpu": "exclusive",
        "versions": [{"name": "v1", "modelUri": "hf://Qwen/Qwen3-8B", "weight": 100}],
        "autoscaling": SCALING,
        **settings,
    }


def test_a_keda_trigger_reads_sglangs_queue(tmp_path: Path) -> None:
    scaled = render(qwen(), keda=keda(add_on=False))["ScaledObject", "qwen-v1"]
    (trigger,) = [t for t in scaled["spec"]["triggers"] if t["name"] == "queue-depth"]

    def up(pod: str) -> dict[str, str]:
        return {
            "series": f'up{{job="kubernetes-pods",namespace="service",pod="{pod}",app="qwen",version="v1"}}',
            "values": "1x20",
        }

    series = [sglang_queue("qwen-v1-a", 5), sglang_queue("qwen-v1-b", 6), engine_queue("llama-v1-a", 40)]
    series += [up("qwen-v1-a"), up("qwen-v1-b")]
    promtool_test(
        tmp_path, series, [{"expr": trigger["metadata"]["query"], "exp_samples": [{"labels": "{}", "value": 11}]}]
    )


def test_a_keda_trigger_sums_the_versions_own_pods_queues(tmp_path: Path) -> None:
    scaled = render(llama(autoscaling=SCALING | {"minReplicas": 1}), keda=keda(add_on=False))[
        "ScaledObject", "llama-v1"
    ]
    (trigger,) = [t for t in scaled["spec"]["triggers"] if t["name"] == "queue-depth"]
    assert (trigger["type"], trigger["metadata"]["threshold"]) == ("prometheus", "4")

    def up(pod: str, version: str) -> dict[str, str]:
        labels = f'job="kubernetes-pods",namespace="service",pod="{pod}",app="llama",version="{version}"'
        return {"series": f"up{{{labels}}}", "values": "1x20"}

    series = [engine_queue("llama-v1-a", 3), engine_queue("llama-v1-b", 9), engine_queue("llama-v2-a", 40)]
    series += [up("llama-v1-a", "v1"), up("llama-v1-b", "v1"), up("llama-v2-a", "v2")]
    promtool_test(
        tmp_path, series, [{"expr": trigger["metadata"]["query"], "exp_samples": [{"labels": "{}", "value": 12}]}]
    )
    promtool_test(tmp_path, [], [{"expr": trigger["metadata"]["query"], "exp_samples": [{"labels": "{}", "value": 0}]}])


def problems(error: ValidationError) -> list[tuple[str, str]]:
    return [(p.path, p.message) for p in problems_from_validation(error, UNIONS)]


def test_a_runtime_without_a_queue_gauge_is_refused() -> None:
    config = base_config()
    config["inference-platform:models"][0]["autoscaling"] = {"maxReplicas": 3, "queueDepth": 2}
    with pytest.raises(ConfigError) as raised:
        parse_stack_config(project_values(config))
    assert (
        "models[0].autoscaling.queueDepth",
        f"{config['inference-platform:models'][0]['runtime']} exports no gauge of waiting requests: scale on "
        "requestsPerSecond, gpuUtilization or CPU",
    ) in [(p.path, p.message) for p in raised.value.problems]


def test_a_routers_queue_is_refused() -> None:
    pipeline = {
        "name": "chain",
        "nodes": {"root": {"routerType": "Sequence", "steps": [{"model": "llama"}]}},
        "autoscaling": {"maxReplicas": 3, "queueDepth": 2},
    }
    with pytest.raises(ValidationError) as raised:
        PipelineSpec.model_validate(pipeline)
    assert ("autoscaling.queueDepth", "a router has no engine queue: scale on requestsPerSecond or CPU") in problems(
        raised.value
    )


def test_the_stack_gives_the_adapter_the_gauge_its_models_scale_on() -> None:
    config = base_config()
    assert parse_stack_config(project_values(config)).queue_series == []
    config["inference-platform:models"].append(llama())
    assert parse_stack_config(project_values(config)).queue_series == [WAITING]
    config["inference-platform:models"].append(qwen())
    assert parse_stack_config(project_values(config)).queue_series == [SGLANG_QUEUE, WAITING]


def test_tensorrt_llms_gauge_is_the_waiting_requests_of_its_family() -> None:
    if not EPP_NOTES.exists():
        pytest.skip(f"the inference extension's notes are not in {EPP_NOTES.parent} (../shared beside the checkout)")
    assert "`nv_trt_llm_request_metrics{request_type=waiting}`" in EPP_NOTES.read_text()
    assert TritonLLMModel.QUEUE_METRIC == TRTLLM_QUEUE


def trtllm_requests(pod: str, waiting: int, namespace: str = "service") -> list[dict[str, str]]:
    """The backend's request gauges as Triton exports them from a pod (one per request_type), then the pod's
    labels: only `waiting` is the queue."""
    counts = {"waiting": waiting, "active": 50, "max": 64, "scheduled": 50, "context": 2}
    return [
        {
            "series": f'{TRTLLM_FAMILY}{{model="tensorrt_llm",request_type="{kind}",version="1",'
            f'namespace="{namespace}",pod="{pod}",app="mistral"}}',
            "values": f"{count}x20",
        }
        for kind, count in counts.items()
    ]


def test_one_rule_reads_a_labelled_gauge_beside_plain_ones(tmp_path: Path) -> None:
    """TensorRT-LLM's queue is one label value of a gauge family: the rule counts only that series,
    beside vLLM's plain gauge, and the plain gauges' rule stays as it was."""
    (plain,) = [r for r in adapter_rules([SGLANG_QUEUE, WAITING]) if r["name"]["as"] == custom_metrics.REQUESTS_WAITING]
    assert plain["metricsQuery"] == (
        'sum({__name__=~"sglang:num_queue_reqs|vllm:num_requests_waiting",<<.LabelMatchers>>}) by (<<.GroupBy>>)'
    )
    (rule,) = [r for r in adapter_rules([TRTLLM_QUEUE, WAITING]) if r["name"]["as"] == custom_metrics.REQUESTS_WAITING]
    for named_after in (WAITING, TRTLLM_FAMILY):
        assert re.fullmatch(rule["name"]["matches"], named_after)
    series = [engine_queue("llama-v1-a", 3), *trtllm_requests("mistral-v1-a", 7), *trtllm_requests("mistral-v1-b", 2)]
    promtool_test(
        tmp_path,
        series,
        [
            {
                "expr": expand(rule, "service", ["llama-v1-a", "mistral-v1-a"]),
                "exp_samples": [
                    {"labels": '{pod="llama-v1-a"}', "value": 3},
                    {"labels": '{pod="mistral-v1-a"}', "value": 7},
                ],
            },
            {"expr": f"count({rule['seriesQuery']})", "exp_samples": [{"labels": "{}", "value": 11}]},
        ],
    )


def test_a_keda_trigger_reads_tensorrt_llms_waiting_requests(tmp_path: Path) -> None:
    mistral = {
        "name": "mistral",
        "runtime": "triton-llm",
        "engine": "engine",
        "gpu": "exclusive",
        "versions": [{"name": "v1", "modelUri": "pvc://models/mistral-7b-trtllm", "weight": 100}],
        "autoscaling": SCALING,
    }
    scaled = render(mistral, keda=keda(add_on=False))["ScaledObject", "mistral-v1"]
    (trigger,) = [t for t in scaled["spec"]["triggers"] if t["name"] == "queue-depth"]

    def up(pod: str) -> dict[str, str]:
        return {
            "series": f'up{{job="kubernetes-pods",namespace="service",pod="{pod}",app="mistral",version="v1"}}',
            "values": "1x20",
        }

    series = [*trtllm_requests("mistral-v1-a", 5), *trtllm_requests("mistral-v1-b", 6), engine_queue("llama-v1-a", 40)]
    series += [up("mistral-v1-a"), up("mistral-v1-b")]
    promtool_test(
        tmp_path, series, [{"expr": trigger["metadata"]["query"], "exp_samples": [{"labels": "{}", "value": 11}]}]
    )
