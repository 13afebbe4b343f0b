"""Time to first token and time per output token: the recording rules and alerts the program
renders for LLM engines, run by the real promtool on series shaped as vLLM's and SGLang's own
histograms (names, labels and bucket bounds read from the pinned wheels: engine_histograms.py),
with the labels Prometheus' pods job adds when it scrapes a model pod. No engine runs here."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from inference_platform.analysis import comparison
from inference_platform.analysis.dashboards import model_dashboard, panel_queries
from inference_platform.cli.render import run_program
from inference_platform.cli.render_files import chart_documents
from inference_platform.cli.stack_file import read_stack_file
from inference_platform.serving.runtimes.sglang import SGLangModel
from inference_platform.serving.runtimes.vllm import VLLMModel
from inference_platform.stack.config import parse_stack_config, project_values
from tests.conftest import base_config, write_stack_file
from tests.platform.prometheus_harness import PROMTOOL
from tests.serving import engine_histograms
from tests.serving.engine_histograms import EngineHistogram, promtool_series, scraped_labels

pytestmark = pytest.mark.slow

NAMESPACE = "service"
MINUTES = 40
EVAL = "30m"
# Observations per minute of each version (seconds -> requests), 1,000 a minute. With vLLM's
# time-to-first-token bounds (..., 0.06, 0.08, 0.1, 0.25, 0.5, ...) FAST's p50 is 0.08 s and its
# p95 0.25 s (950 of 1,000 at or below 0.25); SLOW's p95 is 0.25 + 50/100 x 0.25 = 0.375 s, 50 %
# above. `slower(a)`: a of them at 0.4 s, p95 0.25 + (a - 50)/a x 0.25.
VLLM_TTFT = {"fast": {0.07: 500, 0.2: 450, 0.4: 50}, "slow": {0.07: 500, 0.2: 400, 0.4: 100}}
VLLM_TTFT_BOUNDS = (0.06, 0.08, 0.1, 0.25, 0.5)
# vLLM's time per output token (bounds 0.01, 0.025, 0.05, 0.075, ...): p95 0.025 s, and
# 0.05 + 150/200 x 0.025 = 0.06875 s when 200 of 1,000 take 60 ms a token.
VLLM_TPOT = {"fast": {0.02: 950, 0.06: 50}, "slow": {0.02: 800, 0.06: 200}}
VLLM_TPOT_BOUNDS = (0.025, 0.05, 0.075)
# SGLang's time to first token (bounds 0.1, 0.2, 0.4, 0.6, ...): p95 0.4 s, and 0.4 + 50/100 x 0.2
# = 0.5 s (25 % above); its time per output token (..., 0.025, 0.03, ..., 0.04, 0.06, ...): p95 0.025 s.
SGLANG_TTFT = {"fast": {0.3: 950, 0.5: 50}, "slow": {0.3: 900, 0.5: 100}}
SGLANG_TTFT_BOUNDS = (0.2, 0.4, 0.6)
SGLANG_TPOT = {"fast": {0.025: 950, 0.05: 50}}
TTFT_ALERT, TPOT_ALERT = comparison.TTFT.alert, comparison.TPOT.alert


def slower(a: int) -> dict[float, int]:
    return {0.07: 500, 0.2: 450 - (a - 50), 0.4: a}


def llm_config() -> dict[str, Any]:
    """base_config's iris and churn (mlserver: no token latency), a vLLM model with a canary and a
    shadow whose time-to-first-token threshold is 10 %, and an SGLang model with a canary."""
    config = base_config()
    config["inference-platform:models"] += [
        {
            "name": "llama",
            "runtime": "vllm",
            "gpu": "exclusive",
            "versions": [
                {"name": "v1", "modelUri": "hf://meta-llama/Llama-3.1-8B-Instruct", "weight": 90},
                {"name": "v2", "modelUri": "hf://meta-llama/Llama-3.1-8B-Instruct", "weight": 10},
                {"name": "v3", "modelUri": "hf://meta-llama/Llama-3.1-8B-Instruct", "mirrorPercent": 50},
            ],
            "analysis": {"maxTimeToFirstTokenIncreasePercent": 10},
        },
        {
            "name": "qwen",
            "runtime": "sglang",
            "gpu": "exclusive",
            "versions": [
                {"name": "v1", "modelUri": "hf://Qwen/Qwen3-8B", "weight": 90},
                {"name": "v2", "modelUri": "hf://Qwen/Qwen3-8B", "weight": 10},
            ],
        },
    ]
    return config


def vllm(name: str | None) -> EngineHistogram:
    assert name is not None
    return engine_histograms.vllm()[name]


def sglang(name: str | None) -> EngineHistogram:
    assert name is not None
    return engine_histograms.sglang()[name]


def test_the_histograms_are_the_ones_the_engines_declare() -> None:
    """The names the runtimes give, as the engines' metrics code registers them (the pinned wheels),
    and what each measures by its own help text: time per output token is each request's (its
    decode time over its tokens after the first), not the gap between two tokens."""
    assert vllm(VLLMModel.TTFT_HISTOGRAM).help == "Histogram of time to first token in seconds."
    assert vllm(VLLMModel.TPOT_HISTOGRAM).help == "Histogram of time_per_output_token_seconds per request."
    assert sglang(SGLangModel.TTFT_HISTOGRAM).help == "Histogram of time to first token in seconds."
    assert sglang(SGLangModel.TPOT_HISTOGRAM).help.startswith("Per-request TPOT in seconds")
    # Both also have a per-token gap histogram, which is not what the runtimes name.
    assert {"vllm:inter_token_latency_seconds", "sglang:inter_token_latency_seconds"} <= set(
        engine_histograms.vllm()
    ) | set(engine_histograms.sglang())
    # The engines' own labels, which the rules sum over: vLLM's engine index, SGLang's streaming flag.
    assert vllm(VLLMModel.TTFT_HISTOGRAM).labels == ("model_name", "engine")
    assert sglang(SGLangModel.TTFT_HISTOGRAM).labels == ("model_name", "engine_type", "is_streaming")
    # The bounds the distributions below are written against.
    assert set(VLLM_TTFT_BOUNDS) <= set(vllm(VLLMModel.TTFT_HISTOGRAM).bounds)
    assert set(VLLM_TPOT_BOUNDS) <= set(vllm(VLLMModel.TPOT_HISTOGRAM).bounds)
    assert set(SGLANG_TTFT_BOUNDS) <= set(sglang(SGLangModel.TTFT_HISTOGRAM).bounds)


@pytest.fixture(scope="module")
def rule_files(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """The recording and alerting rule files the program gives Prometheus for llm_config."""
    directory = tmp_path_factory.mktemp("rules")
    stack = read_stack_file(write_stack_file(directory / "Pulumi.dev.yaml", llm_config()))
    (prometheus,) = [c for c in chart_documents(run_program("dev", stack)) if c["name"] == "prometheus"]
    paths = []
    for name in ("recording_rules.yml", "alerting_rules.yml"):
        paths.append(directory / name)
        paths[-1].write_text(yaml.safe_dump(prometheus["values"]["serverFiles"][name], sort_keys=False))
    return paths[0], paths[1]


def alerts_of(rules: Path) -> dict[tuple[str, str, str], dict[str, Any]]:
    groups = yaml.safe_load(rules.read_text())["groups"]
    return {(r["alert"], r["labels"]["model"], r["labels"]["version"]): r for g in groups for r in g["rules"]}


def llama(
    version: str,
    ttft: dict[float, int] | None = None,
    tpot: dict[float, int] | None = None,
    scale: float = 1.0,
) -> list[dict[str, str]]:
    """A vLLM version's two pods, each running two engines (data parallel), as scraped: the first
    engine of each pod answers the requests under 0.25 s, the second the rest, so only their sum
    is the version's distribution."""
    series = []
    for signal, histogram, shape in (
        ("ttft", vllm(VLLMModel.TTFT_HISTOGRAM), ttft or VLLM_TTFT["fast"]),
        ("tpot", vllm(VLLMModel.TPOT_HISTOGRAM), tpot or VLLM_TPOT["fast"]),
    ):
        split = 0.25 if signal == "ttft" else 0.025
        for pod in ("a", "b"):
            for engine, first in (("0", True), ("1", False)):
                observed = {v: n * scale / 2 for v, n in shape.items() if (v <= split) == first}
                labels = scraped_labels(histogram, NAMESPACE, "llama", version, f"llama-{version}-{pod}", engine=engine)
                series += promtool_series(histogram, labels, observed, MINUTES)
    return series


def qwen(version: str, ttft: dict[float, int] | None = None) -> list[dict[str, str]]:
    """An SGLang version's pod, its requests half streamed and half not."""
    series = []
    for histogram, shape in (
        (sglang(SGLangModel.TTFT_HISTOGRAM), ttft or SGLANG_TTFT["fast"]),
        (sglang(SGLangModel.TPOT_HISTOGRAM), SGLANG_TPOT["fast"]),
    ):
        for streaming in ("true", "false"):
            labels = scraped_labels(histogram, NAMESPACE, "qwen", version, f"qwen-{version}-a", is_streaming=streaming)
            series += promtool_series(histogram, labels, {v: n / 2 for v, n in shape.items()}, MINUTES)
    return series


def healthy() -> list[dict[str, str]]:
    return llama("v1") + llama("v2") + llama("v3") + qwen("v1") + qwen("v2")


def run_promtool(
    directory: Path, rules: tuple[Path, Path], series: list[dict[str, str]], firing: set[tuple[str, str, str]]
) -> subprocess.CompletedProcess[str]:
    """`promtool test rules` expecting exactly `firing` ((alert, model, version)) at EVAL, no other
    alert of the file. A token alert keeps the engines' series' namespace and app, matched on."""
    recording, alerting = rules
    found = alerts_of(alerting)
    tests = [
        {
            "eval_time": EVAL,
            "alertname": name,
            "exp_alerts": [
                {
                    "exp_labels": found[key]["labels"] | {"namespace": NAMESPACE, "app": key[1]},
                    "exp_annotations": found[key]["annotations"],
                }
                for key in sorted(firing)
                if key[0] == name
            ],
        }
        for name in sorted({name for name, _, _ in found})
    ]
    document = {
        "rule_files": [str(recording), str(alerting)],
        "evaluation_interval": "1m",
        "tests": [{"interval": "1m", "input_series": series, "alert_rule_test": tests}],
    }
    (directory / "test.yml").write_text(yaml.safe_dump(document, sort_keys=False))
    return subprocess.run(
        [PROMTOOL, "test", "rules", str(directory / "test.yml")], capture_output=True, text=True, check=False
    )


def assert_fires(
    tmp_path: Path, rules: tuple[Path, Path], series: list[dict[str, str]], firing: set[tuple[str, str, str]]
) -> None:
    done = run_promtool(tmp_path, rules, series, firing)
    assert done.returncode == 0, done.stdout + done.stderr


def test_the_alerts_are_rendered_for_llm_engines_only(rule_files: tuple[Path, Path]) -> None:
    """Every candidate of an LLM model gets both alerts; iris and churn (MLServer) none."""
    _, alerting = rule_files
    token_alerts = sorted((m, v, a) for a, m, v in alerts_of(alerting) if a in (TTFT_ALERT, TPOT_ALERT))
    assert token_alerts == [
        ("llama", version, alert) for version in ("v2", "v3") for alert in sorted((TPOT_ALERT, TTFT_ALERT))
    ] + [("qwen", "v2", alert) for alert in sorted((TPOT_ALERT, TTFT_ALERT))]
    rule = alerts_of(alerting)[TTFT_ALERT, "llama", "v3"]
    assert rule["labels"] == {
        "model": "llama",
        "version": "v3",
        "role": "shadow",
        "namespace": NAMESPACE,
        "severity": "warning",
    }
    assert rule["annotations"]["action"].startswith("Stop it: python -m infra promote --stack dev --model llama")
    assert "--mirror v3=0" in rule["annotations"]["action"]


def test_the_recording_rules_split_by_version_and_sum_pods_and_engines(
    tmp_path: Path, rule_files: tuple[Path, Path]
) -> None:
    """Each version's p50 and p95 over its pods and engines (vLLM's two engines each see part of the
    distribution; SGLang's streamed and unstreamed requests), one series per version."""
    recording, _ = rule_files
    series = llama("v1") + llama("v2", ttft=VLLM_TTFT["slow"], tpot=VLLM_TPOT["slow"]) + qwen("v1")
    # Rounded to the microsecond: the interpolation's last bits are not the test's business.
    expected = {
        "inference:time_to_first_token_seconds:p50_5m": [
            ("llama", "v1", 0.08),
            ("llama", "v2", 0.08),
            ("qwen", "v1", 0.2 + 0.2 * 500 / 950),  # rank 500 of the 950 in (0.2, 0.4]
        ],
        "inference:time_to_first_token_seconds:p95_5m": [
            ("llama", "v1", 0.25),
            ("llama", "v2", 0.375),
            ("qwen", "v1", 0.4),
        ],
        "inference:time_per_output_token_seconds:p95_5m": [
            ("llama", "v1", 0.025),
            ("llama", "v2", 0.06875),
            ("qwen", "v1", 0.025),
        ],
    }
    checks = [
        {
            "expr": f"round({record} * 1e6)",
            "eval_time": EVAL,
            "exp_samples": [
                {
                    "labels": f'{{app="{model}",namespace="{NAMESPACE}",version="{version}"}}',
                    "value": round(value * 1e6),
                }
                for model, version, value in samples
            ],
        }
        for record, samples in expected.items()
    ]
    document = {
        "rule_files": [str(recording)],
        "evaluation_interval": "1m",
        "tests": [{"interval": "1m", "input_series": series, "promql_expr_test": checks}],
    }
    (tmp_path / "test.yml").write_text(yaml.safe_dump(document, sort_keys=False))
    done = subprocess.run(
        [PROMTOOL, "test", "rules", str(tmp_path / "test.yml")], capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stdout + done.stderr


def test_healthy_llm_candidates_stay_silent(tmp_path: Path, rule_files: tuple[Path, Path]) -> None:
    assert_fires(tmp_path, rule_files, healthy(), set())


def test_the_harness_would_notice_a_missing_alert(tmp_path: Path, rule_files: tuple[Path, Path]) -> None:
    done = run_promtool(tmp_path, rule_files, healthy(), {(TTFT_ALERT, "llama", "v2")})
    assert done.returncode != 0


def test_a_canary_slow_to_its_first_token_fires(tmp_path: Path, rule_files: tuple[Path, Path]) -> None:
    series = llama("v1") + llama("v2", ttft=VLLM_TTFT["slow"]) + llama("v3") + qwen("v1") + qwen("v2")
    assert_fires(tmp_path, rule_files, series, {(TTFT_ALERT, "llama", "v2")})


def test_a_shadow_slow_per_output_token_fires(tmp_path: Path, rule_files: tuple[Path, Path]) -> None:
    series = llama("v1") + llama("v2") + llama("v3", tpot=VLLM_TPOT["slow"]) + qwen("v1") + qwen("v2")
    assert_fires(tmp_path, rule_files, series, {(TPOT_ALERT, "llama", "v3")})


def test_an_sglang_canary_slow_to_its_first_token_fires(tmp_path: Path, rule_files: tuple[Path, Path]) -> None:
    """p95 0.5 s against 0.4 s, 25 % above qwen's default 20 %."""
    series = llama("v1") + llama("v2") + llama("v3") + qwen("v1") + qwen("v2", ttft=SGLANG_TTFT["slow"])
    assert_fires(tmp_path, rule_files, series, {(TTFT_ALERT, "qwen", "v2")})


@pytest.mark.parametrize(
    ("at_400ms", "fires"),
    [
        (54, False),  # p95 0.2685 s against 0.25: 7.4 % slower, inside llama's 10 %
        (56, True),  # p95 0.2768 s: 10.7 % slower
    ],
)
def test_the_threshold_is_the_models_percent_of_the_primarys_p95(
    tmp_path: Path, rule_files: tuple[Path, Path], at_400ms: int, fires: bool
) -> None:
    series = llama("v1") + llama("v2", ttft=slower(at_400ms)) + llama("v3") + qwen("v1") + qwen("v2")
    assert_fires(tmp_path, rule_files, series, {(TTFT_ALERT, "llama", "v2")} if fires else set())


def test_too_few_first_tokens_are_not_judged(tmp_path: Path, rule_files: tuple[Path, Path]) -> None:
    """9 requests a minute, 90 in the 10-minute window, all slow: under minRequests (100)."""
    series = llama("v1") + llama("v2", ttft=VLLM_TTFT["slow"], scale=0.009) + llama("v3") + qwen("v1") + qwen("v2")
    assert_fires(tmp_path, rule_files, series, set())


def test_dashboards_show_token_latency_for_llm_engines_only() -> None:
    config = parse_stack_config(project_values(llm_config()))
    titles = {}
    for model in config.models:
        compared = comparison.comparison(model, config.namespace)
        if compared is not None:
            titles[model.name] = [p["title"] for p in model_dashboard(compared, "dcgm")["panels"]]
    token_panels = ["Time to first token", "Time per output token"]
    for name in ("iris", "churn"):
        assert not set(token_panels) & set(titles.get(name, [])), name
    for name in ("llama", "qwen"):
        assert titles[name][4:6] == token_panels, titles[name]
    llama_model = next(m for m in config.models if m.name == "llama")
    compared = comparison.comparison(llama_model, config.namespace)
    assert compared is not None
    (p95,) = [q for q, legend in panel_queries(compared, None)["Time to first token"] if legend == "{{version}} p95"]
    assert p95 == (
        "histogram_quantile(0.95, sum by (le, namespace, app, version) "
        '(rate(vllm:time_to_first_token_seconds_bucket{namespace="service",app="llama"}[5m])))'
    )
