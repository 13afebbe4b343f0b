"""The comparison rules, judged by the real promtool: every stack's rule files pass `promtool check
rules`, and `promtool test rules` evaluates the alerts on series shaped exactly as Istio's
sidecars report them (reporter="destination", the pod's app and version as destination_app and
destination_version), on both sides of every threshold."""

from __future__ import annotations

import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from inference_platform.analysis import comparison
from inference_platform.cli.render import run_program
from inference_platform.cli.render_files import chart_documents
from inference_platform.cli.stack_file import read_stack_file
from inference_platform.stack.config import parse_stack_config, project_values
from tests.conftest import ROOT, STACKS, base_config, full_config, write_stack_file
from tests.platform.prometheus_harness import PROMTOOL

pytestmark = pytest.mark.slow

NAMESPACE, MODEL = "service", "iris"
# base_config's iris: v1 live 90 (the primary), v2 live 10 (a canary), v3 mirrored 50 (a shadow).
MINUTES = 40
EVAL = "30m"
FAST = {"25": 300, "50": 450, "100": 600, "250": 600, "500": 600}  # per minute of 600: p95 = 90 ms
SLOW = FAST | {"100": 561}  # p95 = 100 + 9/39 x 150 = 134.6 ms: 50 % slower


def rule_files(config: dict[str, Any], directory: Path) -> list[Path]:
    stack = parse_stack_config(project_values(config))
    compared = [
        (found, model.analysis) for model in stack.models if (found := comparison.comparison(model, stack.namespace))
    ]
    paths = []
    for name, document in (
        ("recording.yml", comparison.recording_rules()),
        ("alerting.yml", comparison.alert_rules(compared, "dev")),
    ):
        path = directory / name
        path.write_text(yaml.safe_dump(document, sort_keys=False))
        paths.append(path)
    return paths


def labels(version: str, **extra: str) -> str:
    pairs = {
        "reporter": "destination",
        "destination_workload_namespace": NAMESPACE,
        "destination_app": MODEL,
        "destination_version": version,
        "destination_service": f"{MODEL}-{version}.{NAMESPACE}.svc.cluster.local",
        "source_workload": "istio-ingressgateway",
        "request_protocol": "http",
    } | extra
    return ",".join(f'{k}="{v}"' for k, v in pairs.items())


def version_series(
    version: str, per_minute: int, errors: int = 0, buckets: dict[str, int] | None = None
) -> list[dict[str, str]]:
    """One version's counters: `per_minute` requests, `errors` of them 503s, durations by `buckets`
    (cumulative counts per minute at each upper bound, scaled to `per_minute`)."""
    series = [
        {
            "series": f"istio_requests_total{{{labels(version, response_code='200')}}}",
            "values": f"0+{per_minute - errors}x{MINUTES}",
        }
    ]
    if errors:
        series.append(
            {
                "series": f"istio_requests_total{{{labels(version, response_code='503')}}}",
                "values": f"0+{errors}x{MINUTES}",
            }
        )
    shape = buckets or FAST
    for bound, count in [*shape.items(), ("+Inf", 600)]:
        scaled = count * per_minute // 600
        bucket = labels(version, response_code="200", le=bound)
        series.append(
            {
                "series": f"istio_request_duration_milliseconds_bucket{{{bucket}}}",
                "values": f"0+{scaled}x{MINUTES}",
            }
        )
    return series


def alerts_of(rules: Path) -> dict[tuple[str, str], dict[str, Any]]:
    groups = yaml.safe_load(rules.read_text())["groups"]
    return {(r["alert"], r["labels"]["version"]): r for g in groups for r in g["rules"]}


def expected(rule: dict[str, Any]) -> dict[str, Any]:
    """The alert as it fires: the rule's labels and annotations, and the labels its expression keeps."""
    # Matching on(namespace, app) keeps just those; the rule's labels name the version.
    kept = {"destination_workload_namespace": NAMESPACE, "destination_app": MODEL}
    return {"exp_labels": rule["labels"] | kept, "exp_annotations": rule["annotations"]}


def run_promtool(
    directory: Path,
    series: list[dict[str, str]],
    firing: set[tuple[str, str]],
    config: dict[str, Any] | None = None,
    expect: Callable[[dict[str, Any]], dict[str, Any]] = expected,
) -> subprocess.CompletedProcess[str]:
    """`promtool test rules` expecting exactly `firing` ((alert, version) pairs) at EVAL, nothing
    else; `expect` says how each alert fires from its rule."""
    recording, alerting = rule_files(config or base_config(), directory)
    rules = alerts_of(alerting)
    names = sorted({name for name, _ in rules})
    tests = [
        {
            "eval_time": EVAL,
            "alertname": name,
            "exp_alerts": [expect(rules[key]) for key in sorted(firing) if key[0] == name],
        }
        for name in names
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


def assert_fires(tmp_path: Path, series: list[dict[str, str]], firing: set[tuple[str, str]], **kwargs: Any) -> None:
    done = run_promtool(tmp_path, series, firing, **kwargs)
    assert done.returncode == 0, done.stdout + done.stderr


def healthy() -> list[dict[str, str]]:
    return version_series("v1", 600) + version_series("v2", 600) + version_series("v3", 600)


@pytest.mark.parametrize("stack", [*STACKS, "all-features"])
def test_every_stacks_rule_files_pass_promtool_check(stack: str, tmp_path: Path) -> None:
    path = (
        write_stack_file(tmp_path / "Pulumi.full.yaml", full_config())
        if stack == "all-features"
        else ROOT / f"Pulumi.{stack}.yaml"
    )
    (prometheus,) = [c for c in chart_documents(run_program(stack, read_stack_file(path))) if c["name"] == "prometheus"]
    files = []
    for name in ("recording_rules.yml", "alerting_rules.yml"):
        document = prometheus["values"]["serverFiles"][name]
        assert document["groups"]
        files.append(tmp_path / name)
        files[-1].write_text(yaml.safe_dump(document))
    done = subprocess.run([PROMTOOL, "check", "rules", *map(str, files)], capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stdout + done.stderr


def test_promtool_check_refuses_a_broken_rule(tmp_path: Path) -> None:
    _, alerting = rule_files(base_config(), tmp_path)
    alerting.write_text(alerting.read_text().replace("histogram_quantile(", "histogram_quantile((", 1))
    done = subprocess.run([PROMTOOL, "check", "rules", str(alerting)], capture_output=True, text=True, check=False)
    assert done.returncode != 0


def test_a_healthy_canary_and_shadow_stay_silent(tmp_path: Path) -> None:
    assert_fires(tmp_path, healthy(), set())


def test_the_harness_would_notice_a_missing_alert(tmp_path: Path) -> None:
    done = run_promtool(tmp_path, healthy(), {("InferenceShadowGetsNoMirror", "v3")})
    assert done.returncode != 0


def test_a_shadow_with_5_percent_errors_against_a_clean_primary_fires(tmp_path: Path) -> None:
    series = version_series("v1", 600) + version_series("v2", 600) + version_series("v3", 600, errors=30)
    assert_fires(tmp_path, series, {("InferenceVersionErrorRatioAbovePrimary", "v3")})


def test_a_shadow_50_percent_slower_fires(tmp_path: Path) -> None:
    series = version_series("v1", 600) + version_series("v2", 600) + version_series("v3", 600, buckets=SLOW)
    assert_fires(tmp_path, series, {("InferenceVersionSlowerThanPrimary", "v3")})


def test_a_broken_mirror_fires(tmp_path: Path) -> None:
    series = version_series("v1", 600) + version_series("v2", 600)
    assert_fires(tmp_path, series, {("InferenceShadowGetsNoMirror", "v3")})


def test_a_canary_without_traffic_fires(tmp_path: Path) -> None:
    series = version_series("v1", 600) + version_series("v3", 600)
    assert_fires(tmp_path, series, {("InferenceVersionGetsNoTraffic", "v2")})


@pytest.mark.parametrize(
    ("primary_errors", "canary_errors", "fires"),
    [
        (0, 9, False),  # 0.9 points above a clean primary: inside 0.01
        (0, 11, True),  # 1.1 points: outside
        (20, 29, False),  # 2.0 % against 2.9 %
        (20, 31, True),  # 2.0 % against 3.1 %
    ],
)
def test_the_error_threshold_is_absolute_points(
    tmp_path: Path, primary_errors: int, canary_errors: int, fires: bool
) -> None:
    series = (
        version_series("v1", 1000, errors=primary_errors)
        + version_series("v2", 1000, errors=canary_errors)
        + version_series("v3", 1000, errors=primary_errors)
    )
    assert_fires(tmp_path, series, {("InferenceVersionErrorRatioAbovePrimary", "v2")} if fires else set())


@pytest.mark.parametrize(
    ("under_100ms", "fires"),
    [
        (569, False),  # p95 104.8 ms against the primary's 90: 16 % slower, inside 20 %
        (568, True),  # p95 109.4 ms: 21.5 % slower
    ],
)
def test_the_latency_threshold_is_percent_of_the_primarys_p95(tmp_path: Path, under_100ms: int, fires: bool) -> None:
    canary = FAST | {"100": under_100ms}
    series = version_series("v1", 600) + version_series("v2", 600, buckets=canary) + version_series("v3", 600)
    assert_fires(tmp_path, series, {("InferenceVersionSlowerThanPrimary", "v2")} if fires else set())


def test_too_few_requests_are_not_judged(tmp_path: Path) -> None:
    # 50 requests in the 10-minute window, half of them failing: below minRequests (100).
    series = version_series("v1", 600) + version_series("v2", 5, errors=2) + version_series("v3", 600)
    assert_fires(tmp_path, series, set())


def test_thresholds_come_from_the_models_analysis_settings(tmp_path: Path) -> None:
    config = base_config()
    config["inference-platform:models"][0]["analysis"] = {"maxErrorRatioIncrease": 0.05, "minRequests": 10}
    series = version_series("v1", 600) + version_series("v2", 5, errors=2) + version_series("v3", 600, errors=24)
    # v2: 40 % errors on 50 requests (enough now); v3: 4 %, inside the model's 5 points.
    assert_fires(tmp_path, series, {("InferenceVersionErrorRatioAbovePrimary", "v2")}, config=config)


def sleeping_config() -> dict[str, Any]:
    """base_config with KEDA, iris sleeping at zero replicas between requests."""
    config = base_config()
    config["inference-platform:platform"] = {"autoscaler": "keda"}
    config["inference-platform:models"][0]["autoscaling"] = {"minReplicas": 0, "maxReplicas": 3}
    return config


def test_a_model_asleep_at_zero_raises_nothing(tmp_path: Path) -> None:
    """No pod, no request, no series at all: nothing fires for any version."""
    assert_fires(tmp_path, [], set(), config=sleeping_config())


def test_a_version_that_stays_asleep_while_its_model_serves_fires(tmp_path: Path) -> None:
    """A sleeping canary that never wakes (no pod, so no series of its own) while v1 serves is not
    idle but broken: the same alerts as an awake model's."""
    series = version_series("v1", 600) + version_series("v3", 600)
    assert_fires(tmp_path, series, {("InferenceVersionGetsNoTraffic", "v2")}, config=sleeping_config())
    series = version_series("v1", 600) + version_series("v2", 600)
    assert_fires(tmp_path, series, {("InferenceShadowGetsNoMirror", "v3")}, config=sleeping_config())
