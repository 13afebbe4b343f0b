"""Autoscaling on p90 time to first token (autoscaling.timeToFirstTokenP90): the HPA's per-pod
metric served by prometheus-adapter, the KEDA trigger, and the config errors, each query evaluated
by promtool (Prometheus' own engine) on series shaped as vLLM's and SGLang's histograms are scraped
(engine_histograms.py: names, labels and bounds read from the pinned wheels). No engine runs here."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from inference_platform.cli.main import main
from inference_platform.platform import custom_metrics
from inference_platform.serving.runtimes.sglang import SGLangModel
from inference_platform.serving.runtimes.vllm import VLLMModel
from inference_platform.stack.config import parse_stack_config, project_values
from tests.conftest import RUNTIME_MINIMUMS, base_config, write_stack_file
from tests.platform.test_adapter_queries import expand, promtool_test
from tests.serving import engine_histograms
from tests.serving.engine_histograms import promtool_series, scraped_labels
from tests.serving.test_queue_depth import adapter_rules
from tests.serving.test_scale_to_zero import keda, render

pytestmark = pytest.mark.slow

SCALING = {"minReplicas": 1, "maxReplicas": 6, "timeToFirstTokenP90": 0.5}
# First tokens per 30 s (the promtool harness's interval) by value in seconds. With vLLM's bounds
# (..., 0.1, 0.25, 0.5, ...) a pod at QUICK has p90 0.25 s (900 of 1,000 at or below 0.25), one at
# SLOWER 0.25 + 100/200 x 0.25 = 0.375 s; SLOWEST's p90 is past 2.5 s. SGLang's bounds (..., 0.2,
# 0.4, 0.6, ...) put QUICK_SGLANG's p90 at 0.4 s.
QUICK = {0.2: 900, 0.4: 100}
SLOWER = {0.2: 800, 0.4: 200}
SLOWEST = {3.0: 1000}
QUICK_SGLANG = {0.3: 900, 0.5: 100}


def llama(**settings: Any) -> dict[str, Any]:
    return {
        "name": "llama",
        "runtime": "vllm",
        "gpu": "exclusive",
        "versions": [
            {"name": "v1", "modelUri": "hf://meta-llama/Llama-3.1-8B-Instruct", "weight": 90},
            {"name": "v2", "modelUri": "hf://meta-llama/Llama-3.1-8B-Instruct", "weight": 10},
        ],
        "autoscaling": SCALING,
        **settings,
    }


def vllm_pod(pod: str, version: str, observed: dict[float, int], namespace: str = "service") -> list[dict[str, str]]:
    """A vLLM pod's time to first token as scraped, from two engines: engine 0 answered the first
    tokens under 0.25 s, engine 1 the rest (only the pod's sum is its distribution)."""
    assert VLLMModel.TTFT_HISTOGRAM is not None
    histogram = engine_histograms.vllm()[VLLMModel.TTFT_HISTOGRAM]
    series = []
    for engine, first in (("0", True), ("1", False)):
        labels = scraped_labels(histogram, namespace, "llama", version, pod, engine=engine)
        share = {v: n for v, n in observed.items() if (v <= 0.25) == first}
        series += promtool_series(histogram, labels, share, 20)
    return series


def sglang_pod(pod: str, observed: dict[float, int]) -> list[dict[str, str]]:
    assert SGLangModel.TTFT_HISTOGRAM is not None
    histogram = engine_histograms.sglang()[SGLangModel.TTFT_HISTOGRAM]
    labels = scraped_labels(histogram, "service", "qwen", "v1", pod)
    return promtool_series(histogram, labels, observed, 20)


def up(pod: str, version: str, app: str = "llama") -> dict[str, str]:
    labels = f'job="kubernetes-pods",namespace="service",pod="{pod}",app="{app}",version="{version}"'
    return {"series": f"up{{{labels}}}", "values": "1x20"}


def micro(expression: str) -> str:
    """The query's value in microseconds, rounded: the interpolation's last bits are not the test's business."""
    return f"round(({expression}) * 1e6)"


def test_an_hpa_targets_each_pods_p90_in_seconds() -> None:
    hpa = render(llama())["HorizontalPodAutoscaler", "llama-v1"]
    assert hpa["spec"]["metrics"] == [
        {
            "type": "Pods",
            "pods": {
                "metric": {"name": "time_to_first_token_p90_seconds"},
                "target": {"type": "AverageValue", "averageValue": "500m"},
            },
        }
    ]


def test_the_adapter_serves_each_pods_p90_over_its_engines(tmp_path: Path) -> None:
    """Per pod: its own p90, both engines counted; a pod without a first token in the window has
    no value rather than NaN; vLLM's and SGLang's histograms in one rule, each pod its own."""
    assert [r["name"]["as"] for r in adapter_rules([])] == ["container_gpu_usage", "requests_per_second"]
    histograms = [SGLangModel.TTFT_HISTOGRAM, VLLMModel.TTFT_HISTOGRAM]
    assert None not in histograms
    (rule,) = [
        r
        for r in custom_metrics.adapter_rules("dcgm", (), [h for h in histograms if h])
        if r["name"]["as"] == custom_metrics.TIME_TO_FIRST_TOKEN_P90
    ]
    for named_after in ("vllm:time_to_first_token_seconds_bucket", "sglang:time_to_first_token_seconds_bucket"):
        assert re.fullmatch(rule["name"]["matches"], named_after)
    series = vllm_pod("llama-v1-a", "v1", QUICK) + vllm_pod("llama-v1-b", "v1", SLOWER)
    series += vllm_pod("llama-v1-idle", "v1", {}) + sglang_pod("qwen-v1-a", QUICK_SGLANG)
    series += vllm_pod("llama-v1-a", "v1", SLOWEST, namespace="other")
    pods = ["llama-v1-a", "llama-v1-b", "llama-v1-idle", "qwen-v1-a"]
    promtool_test(
        tmp_path,
        series,
        [
            {
                "expr": micro(expand(rule, "service", pods)),
                "exp_samples": [
                    {"labels": '{pod="llama-v1-a"}', "value": 250_000},
                    {"labels": '{pod="llama-v1-b"}', "value": 375_000},
                    {"labels": '{pod="qwen-v1-a"}', "value": 400_000},
                ],
            },
            {"expr": micro(expand(rule, "service", ["llama-v1-idle"])), "exp_samples": []},
        ],
    )


def test_the_adapter_gets_the_rule_only_where_a_model_scales_on_it() -> None:
    config = base_config()
    assert parse_stack_config(project_values(config)).ttft_histograms == []
    config["inference-platform:models"].append(llama(autoscaling={"minReplicas": 1, "maxReplicas": 3}))
    assert parse_stack_config(project_values(config)).ttft_histograms == []
    config["inference-platform:models"].append(llama(name="llama2"))
    assert parse_stack_config(project_values(config)).ttft_histograms == ["vllm:time_to_first_token_seconds"]
    rules = custom_metrics.adapter_rules("dcgm", (), ["vllm:time_to_first_token_seconds"])
    assert [r["name"]["as"] for r in rules][-1] == custom_metrics.TIME_TO_FIRST_TOKEN_P90


def test_a_keda_trigger_averages_the_versions_own_pods_p90(tmp_path: Path) -> None:
    """The same figure the HPA compares: the mean of each pod's p90 over the version's pods that had
    a first token (here 0.25 and 0.375 s), as a Value, so replicas scale by how far it is from the
    target; another version's pods, a namesake in another namespace and an idle pod do not count;
    0 with no pod at all."""
    scaled = render(llama(), keda=keda(add_on=False))["ScaledObject", "llama-v1"]
    (trigger,) = [t for t in scaled["spec"]["triggers"] if t["name"] == "time-to-first-token"]
    assert (trigger["type"], trigger["metricType"], trigger["metadata"]["threshold"]) == ("prometheus", "Value", "0.5")
    query = trigger["metadata"]["query"]
    series = vllm_pod("llama-v1-a", "v1", QUICK) + vllm_pod("llama-v1-b", "v1", SLOWER)
    series += vllm_pod("llama-v1-idle", "v1", {}) + vllm_pod("llama-v2-a", "v2", SLOWEST)
    series += vllm_pod("llama-v1-a", "v1", SLOWEST, namespace="other")
    series += [up("llama-v1-a", "v1"), up("llama-v1-b", "v1"), up("llama-v1-idle", "v1"), up("llama-v2-a", "v2")]
    promtool_test(tmp_path, series, [{"expr": micro(query), "exp_samples": [{"labels": "{}", "value": 312_500}]}])
    promtool_test(tmp_path, [], [{"expr": query, "exp_samples": [{"labels": "{}", "value": 0}]}])


def test_a_keda_trigger_reads_sglangs_histogram(tmp_path: Path) -> None:
    qwen = {
        "name": "qwen",
        "runtime": "sglang",
        "gpu": "exclusive",
        "versions": [{"name": "v1", "modelUri": "hf://Qwen/Qwen3-8B", "weight": 100}],
        "autoscaling": SCALING | {"timeToFirstTokenP90": 1.5, "queueDepth": 4},
    }
    scaled = render(qwen, keda=keda(add_on=False))["ScaledObject", "qwen-v1"]
    assert [t["name"] for t in scaled["spec"]["triggers"]] == ["queue-depth", "time-to-first-token"]
    trigger = scaled["spec"]["triggers"][1]
    assert trigger["metadata"]["threshold"] == "1.5"
    series = (
        sglang_pod("qwen-v1-a", QUICK_SGLANG) + vllm_pod("llama-v1-a", "v1", SLOWEST) + [up("qwen-v1-a", "v1", "qwen")]
    )
    promtool_test(
        tmp_path,
        series,
        [{"expr": micro(trigger["metadata"]["query"]), "exp_samples": [{"labels": "{}", "value": 400_000}]}],
    )


def test_a_custom_server_scales_on_the_histogram_it_names(tmp_path: Path) -> None:
    served = RUNTIME_MINIMUMS["custom"] | {
        "name": "tgi",
        "versions": [{"name": "v1", "modelUri": "pvc://models/tgi", "weight": 100}],
        "metrics": {"timeToFirstTokenHistogram": "vllm:time_to_first_token_seconds"},
        "autoscaling": SCALING,
    }
    scaled = render(served, keda=keda(add_on=False))["ScaledObject", "tgi-v1"]
    (trigger,) = scaled["spec"]["triggers"]
    assert "vllm:time_to_first_token_seconds_bucket{" in trigger["metadata"]["query"]


def positions(path: Path, key: str) -> list[tuple[int, int]]:
    """Where each `key:` of the stack file is, 1-based line and column."""
    found = []
    for number, line in enumerate(path.read_text().splitlines(), start=1):
        column = line.find(f"{key}:")
        if column >= 0:
            found.append((number, column + 1))
    return found


def test_bad_token_latency_settings_are_reported_at_their_lines_nothing_written(tmp_path: Path, capsys: Any) -> None:
    """A time-to-first-token target on a runtime without the histogram (MLServer; a custom server
    that names none), and token thresholds where there is nothing to judge: every problem at once,
    at its line and column, with the model's name; nothing is rendered."""
    config = base_config()
    models = config["inference-platform:models"]
    models[0]["autoscaling"] = {"maxReplicas": 3, "timeToFirstTokenP90": 0.8}
    models[1]["analysis"] = {"maxTimeToFirstTokenIncreasePercent": 10, "maxTimePerOutputTokenIncreasePercent": 30}
    models.append(
        RUNTIME_MINIMUMS["custom"]
        | {
            "name": "opaque",
            "versions": [{"name": "v1", "modelUri": "pvc://models/opaque", "weight": 100}],
            "metrics": {"queueGauge": "queue_size"},
            "autoscaling": {"maxReplicas": 2, "timeToFirstTokenP90": 1},
        }
    )
    config["inference-platform:pipelines"] = [
        {
            "name": "chain",
            "nodes": {"root": {"routerType": "Sequence", "steps": [{"model": "iris"}]}},
            "autoscaling": {"maxReplicas": 3, "timeToFirstTokenP90": 1},
        }
    ]
    path = write_stack_file(tmp_path / "Pulumi.t.yaml", config)
    out = tmp_path / "out"
    assert main(["render", "--stack", "t", "--config", str(path), "--out", str(out)]) == 2
    assert not out.exists()
    err = capsys.readouterr().err
    targets, ttft_limit, tpot_limit = (
        positions(path, key)
        for key in ("timeToFirstTokenP90", "maxTimeToFirstTokenIncreasePercent", "maxTimePerOutputTokenIncreasePercent")
    )
    expected = [
        (
            targets[0],
            "models[0] (iris).autoscaling.timeToFirstTokenP90: mlserver exports no histogram of time to "
            "first token: scale on queueDepth, requestsPerSecond, gpuUtilization or CPU",
        ),
        (
            ttft_limit[0],
            "models[1] (churn).analysis.maxTimeToFirstTokenIncreasePercent: "
            f"{models[1]['runtime']} exports no histogram of time to first token: drop this",
        ),
        (
            tpot_limit[0],
            "models[1] (churn).analysis.maxTimePerOutputTokenIncreasePercent: "
            f"{models[1]['runtime']} exports no histogram of time per output token: drop this",
        ),
        (
            targets[1],
            "models[2] (opaque).autoscaling.timeToFirstTokenP90: custom exports no histogram of time to first token",
        ),
        (
            targets[2],
            "pipelines[0] (chain).autoscaling.timeToFirstTokenP90: a router generates no tokens: scale on "
            "requestsPerSecond or CPU",
        ),
    ]
    for (line, column), message in expected:
        assert f"{path}:{line}:{column}: {message}" in err, (line, column, message, err)
    assert "Traceback" not in err
