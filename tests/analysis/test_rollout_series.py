"""A model's rollout in Prometheus and Grafana (comparison.py's rollout rules, dashboards.py's rollout
panel): the series recorded from what the stack declares, joined to the comparison series, and
InferenceRolloutStarvedOfData, run by the real promtool (`promtool test rules`) on series shaped as
Istio's sidecars report them; the panel's queries against a real Prometheus, the recorded series
backfilled by promtool from the rule file; and which models of a rendered stack get them."""

from __future__ import annotations

import copy
import json
import shutil
import subprocess
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest
import yaml
from grafana_foundation_sdk.cog.encoder import JSONEncoder
from grafana_foundation_sdk.models.dashboard import Dashboard as GrafanaDashboard

from inference_platform.analysis import comparison
from inference_platform.analysis.dashboards import ROLLOUT_PANEL, model_dashboard, panel_queries, rollout_queries
from inference_platform.cli.render import run_program
from inference_platform.cli.render_files import chart_documents
from inference_platform.cli.stack_file import read_stack_file
from inference_platform.stack.config import StackConfig, parse_stack_config, project_values
from tests.conftest import base_config, full_config, write_stack_file
from tests.platform.prometheus_harness import PROMTOOL, backfilled, prometheus

pytestmark = pytest.mark.slow

NAMESPACE, MODEL = "service", "iris"
MINUTES = 100
STARVED = comparison.ROLLOUT_STARVED
# base_config's iris: v1 live 90 (the primary), v2 live 10, v3 mirrored 50. Rolled out: v2, at its
# first step; in the shadow phase, v3 (mirrored 50 %) before its first step.
CANARY: dict[str, Any] = {
    "candidate": "v2",
    "steps": [10, 50],
    "interval": "15m",
    "status": {
        "phase": "canary",
        "step": 1,
        "primary": "v1",
        "baseline": {"v1": 90},
        "since": "2026-12-01T09:00:00Z",
        "decision": "advance",
    },
}
SHADOW: dict[str, Any] = {
    "candidate": "v3",
    "steps": [20, 50],
    "interval": "15m",
    "shadowFirst": {"mirrorPercent": 50, "duration": "20m"},
    "status": {
        "phase": "shadow",
        "step": 0,
        "primary": "v1",
        "baseline": {"v1": 90, "v2": 10},
        "since": "2026-12-01T09:00:00Z",
        "decision": "advance",
    },
}


def rollout_config(rollout: dict[str, Any] | None, sleeps: bool = False) -> dict[str, Any]:
    config = base_config()
    iris = config["inference-platform:models"][0]
    assert iris["name"] == MODEL
    if rollout is not None:
        iris["rollout"] = copy.deepcopy(rollout)
    if sleeps:
        config["inference-platform:platform"] = {"autoscaler": "keda"}
        iris["autoscaling"] = {"minReplicas": 0, "maxReplicas": 3}
    return config


def parsed(config: dict[str, Any]) -> StackConfig:
    return parse_stack_config(project_values(config))


def iris(config: dict[str, Any]) -> comparison.Comparison:
    stack = parsed(config)
    found = comparison.comparison(stack.models[0], stack.namespace)
    assert found is not None
    return found


def rendered(config: dict[str, Any], directory: Path, stack: str = "dev") -> tuple[dict[str, Any], dict[str, Any]]:
    """The alerting rule file and the dashboards the program gives Prometheus and Grafana."""
    result = run_program(stack, read_stack_file(write_stack_file(directory / f"Pulumi.{stack}.yaml", config)))
    charts = {c["name"]: c for c in chart_documents(result)}
    alerting = charts["prometheus"]["values"]["serverFiles"]["alerting_rules.yml"]
    grafana = charts.get("grafana", {"values": {"dashboards": {"none": {}}}})  # the dev stack installs none
    (provided,) = grafana["values"]["dashboards"].values()
    dashboards = {name: json.loads(entry["json"]) for name, entry in provided.items()}
    return alerting, dashboards


@pytest.fixture(scope="module")
def canary_rules(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The alerting rule file the program renders for iris rolling out v2 (with its recording rules)."""
    directory = tmp_path_factory.mktemp("rules")
    alerting, _ = rendered(rollout_config(CANARY), directory)
    path = directory / "alerting_rules.yml"
    path.write_text(yaml.safe_dump(alerting, sort_keys=False))
    return path


def rules_file(config: dict[str, Any], directory: Path) -> Path:
    path = directory / "alerting_rules.yml"
    compared = iris(config)
    document = comparison.alert_rules([(compared, parsed(config).models[0].analysis)], "dev")
    path.write_text(yaml.safe_dump(document, sort_keys=False))
    return path


# --- Series and promtool --------------------------------------------------------------------


def labels(version: str) -> str:
    pairs = {
        "reporter": "destination",
        "destination_workload_namespace": NAMESPACE,
        "destination_app": MODEL,
        "destination_version": version,
        "source_workload": "istio-ingressgateway",
        "response_code": "200",
    }
    return ",".join(f'{k}="{v}"' for k, v in pairs.items())


def requests(version: str, *segments: tuple[int, int]) -> dict[str, str]:
    """A version's request counter at 1-minute samples: (minutes, requests a minute) one after the other."""
    values, total = ["0"], 0
    for minutes, per_minute in segments:
        values += [str(total := total + per_minute) for _ in range(minutes)]
    return {"series": f"istio_requests_total{{{labels(version)}}}", "values": " ".join(values)}


def rule_of(rules: Path, alert: str = STARVED) -> dict[str, Any]:
    groups: list[dict[str, Any]] = yaml.safe_load(rules.read_text())["groups"]
    rules_found: list[dict[str, Any]] = [r for g in groups for r in g["rules"] if r.get("alert") == alert]
    (rule,) = rules_found
    return rule


def firing(rule: dict[str, Any], phase: str, candidate: str) -> dict[str, Any]:
    """The alert as it fires: the rule's labels and annotations over the step series' labels."""
    series = {
        "destination_workload_namespace": NAMESPACE,
        "destination_app": MODEL,
        "destination_version": candidate,
        "phase": phase,
    }
    return {"exp_labels": series | rule["labels"], "exp_annotations": rule["annotations"]}


def promtool_test(
    directory: Path,
    rules: Path,
    series: list[dict[str, str]],
    alerts: Sequence[tuple[str, list[dict[str, Any]]]] = (),
    exprs: Sequence[dict[str, Any]] = (),
) -> subprocess.CompletedProcess[str]:
    """`promtool test rules`: STARVED expected to fire as `alerts` says ((eval time, alerts)), and
    each of `exprs` (promql_expr_test entries)."""
    document = {
        "rule_files": [str(rules)],
        "evaluation_interval": "1m",
        "tests": [
            {
                "interval": "1m",
                "input_series": series,
                "alert_rule_test": [{"eval_time": at, "alertname": STARVED, "exp_alerts": exp} for at, exp in alerts],
                "promql_expr_test": list(exprs),
            }
        ],
    }
    path = directory / "test.yml"
    path.write_text(yaml.safe_dump(document, sort_keys=False))
    return subprocess.run([PROMTOOL, "test", "rules", str(path)], capture_output=True, text=True, check=False)


def assert_passes(done: subprocess.CompletedProcess[str]) -> None:
    assert done.returncode == 0, done.stdout + done.stderr


# Requests a minute: 600 (6,000 in the 10-minute window) is plenty; 5 (50) is under minRequests (100).
PLENTY, FEW = 600, 5


def test_the_series_record_the_declared_weight_and_step_and_join_the_comparison_series(
    tmp_path: Path, canary_rules: Path
) -> None:
    declared = f'destination_workload_namespace="{NAMESPACE}",destination_app="{MODEL}",destination_version="v2"'
    by_version = "on(destination_workload_namespace, destination_app, destination_version)"
    exprs = [
        {
            "eval_time": "5m",
            "expr": comparison.ROLLOUT_WEIGHT,
            "exp_samples": [{"labels": f'{comparison.ROLLOUT_WEIGHT}{{{declared},phase="canary"}}', "value": 10}],
        },
        {
            "eval_time": "5m",
            "expr": comparison.ROLLOUT_STEP,
            "exp_samples": [{"labels": f'{comparison.ROLLOUT_STEP}{{{declared},phase="canary"}}', "value": 1}],
        },
        {
            # The candidate's request rate (Istio's series, as the comparison rules split them), picked
            # out by the rollout's series: they join on the comparison's labels.
            "eval_time": "20m",
            "expr": f"{comparison.request_rate('5m')} and {by_version} {comparison.ROLLOUT_WEIGHT}",
            "exp_samples": [{"labels": f"{{{declared}}}", "value": 1}],
        },
    ]
    series = [requests("v1", (MINUTES, 540)), requests("v2", (MINUTES, 60))]
    assert_passes(promtool_test(tmp_path, canary_rules, series, exprs=exprs))


def test_the_harness_would_notice_a_wrong_declared_weight(tmp_path: Path, canary_rules: Path) -> None:
    exprs = [{"eval_time": "5m", "expr": f"{comparison.ROLLOUT_WEIGHT} == 25", "exp_samples": [{"value": 25}]}]
    done = promtool_test(tmp_path, canary_rules, [requests("v1", (MINUTES, PLENTY))], exprs=exprs)
    assert done.returncode != 0


def test_a_starved_candidate_fires_after_three_intervals_and_not_before(tmp_path: Path, canary_rules: Path) -> None:
    """Starved from the first evaluation; 3 x 15m later, it fires."""
    rule = rule_of(canary_rules)
    assert rule["for"] == "45m"
    series = [requests("v1", (MINUTES, PLENTY)), requests("v2", (MINUTES, FEW))]
    alerts = [("44m", []), ("45m", [firing(rule, "canary", "v2")]), ("90m", [firing(rule, "canary", "v2")])]
    assert_passes(promtool_test(tmp_path, canary_rules, series, alerts))


def test_a_starved_primary_fires_too(tmp_path: Path, canary_rules: Path) -> None:
    rule = rule_of(canary_rules)
    series = [requests("v1", (MINUTES, FEW)), requests("v2", (MINUTES, PLENTY))]
    assert_passes(promtool_test(tmp_path, canary_rules, series, [("44m", []), ("45m", [firing(rule, "canary", "v2")])]))


def test_a_candidate_with_no_series_at_all_fires(tmp_path: Path, canary_rules: Path) -> None:
    """Never a request (its pods never ready): no series of its own, and still starved."""
    rule = rule_of(canary_rules)
    series = [requests("v1", (MINUTES, PLENTY))]
    assert_passes(promtool_test(tmp_path, canary_rules, series, [("45m", [firing(rule, "canary", "v2")])]))


def test_enough_traffic_never_fires(tmp_path: Path, canary_rules: Path) -> None:
    series = [requests("v1", (MINUTES, PLENTY)), requests("v2", (MINUTES, PLENTY))]
    assert_passes(promtool_test(tmp_path, canary_rules, series, [("45m", []), ("90m", [])]))


def test_just_enough_requests_in_the_window_is_enough(tmp_path: Path, canary_rules: Path) -> None:
    """12 a minute: 120 in the window, over minRequests (100); 9 a minute (90) is under."""
    rule = rule_of(canary_rules)
    enough = [requests("v1", (MINUTES, PLENTY)), requests("v2", (MINUTES, 12))]
    assert_passes(promtool_test(tmp_path, canary_rules, enough, [("60m", [])]))
    short = [requests("v1", (MINUTES, PLENTY)), requests("v2", (MINUTES, 9))]
    assert_passes(promtool_test(tmp_path, canary_rules, short, [("60m", [firing(rule, "canary", "v2")])]))


def test_traffic_that_comes_back_restarts_the_count(tmp_path: Path, canary_rules: Path) -> None:
    """Starved for 30 minutes, served for 10, starved again: 45 minutes after it went short again."""
    rule = rule_of(canary_rules)
    series = [requests("v1", (MINUTES, PLENTY)), requests("v2", (30, FEW), (10, PLENTY), (60, FEW))]
    # Short again once the window no longer holds the 10 busy minutes (about 50m: the window is 10m).
    alerts = [("60m", []), ("94m", []), ("97m", [firing(rule, "canary", "v2")])]
    assert_passes(promtool_test(tmp_path, canary_rules, series, alerts))


def test_in_the_shadow_phase_the_mirror_percent_and_three_shadow_durations(tmp_path: Path) -> None:
    config = rollout_config(SHADOW)
    rules = rules_file(config, tmp_path)
    rule = rule_of(rules)
    assert (rule["for"], rule["labels"]["role"]) == ("1h", "shadow")  # 3 x shadowFirst.duration (20m)
    declared = f'destination_workload_namespace="{NAMESPACE}",destination_app="{MODEL}",destination_version="v3"'
    exprs = [
        {
            "eval_time": "5m",
            "expr": comparison.ROLLOUT_WEIGHT,
            "exp_samples": [{"labels": f'{comparison.ROLLOUT_WEIGHT}{{{declared},phase="shadow"}}', "value": 50}],
        },
        {
            "eval_time": "5m",
            "expr": comparison.ROLLOUT_STEP,
            "exp_samples": [{"labels": f'{comparison.ROLLOUT_STEP}{{{declared},phase="shadow"}}', "value": 0}],
        },
    ]
    series = [requests("v1", (MINUTES, PLENTY)), requests("v2", (MINUTES, 60)), requests("v3", (MINUTES, FEW))]
    alerts = [("59m", []), ("60m", [firing(rule, "shadow", "v3")])]
    assert_passes(promtool_test(tmp_path, rules, series, alerts, exprs))


def test_a_sleeping_model_with_no_request_is_idle_not_starved(tmp_path: Path) -> None:
    """Asleep at zero replicas (no pod, no series): `judge` calls it idle; once the primary serves
    and the candidate stays asleep, it is starved."""
    config = rollout_config(CANARY, sleeps=True)
    rules = rules_file(config, tmp_path)
    rule = rule_of(rules)
    assert_passes(promtool_test(tmp_path, rules, [], [("90m", [])]))
    series = [requests("v1", (MINUTES, PLENTY))]
    # The first evaluation sees one sample of v1's counter, no increase yet: pending from the second.
    assert_passes(promtool_test(tmp_path, rules, series, [("45m", []), ("46m", [firing(rule, "canary", "v2")])]))


@pytest.mark.parametrize(
    ("interval", "held_for"),
    [("15m", "45m"), ("20m", "1h"), ("1h30m", "4h30m"), ("1m30s", "4m30s"), ("0.5s", "1s500ms")],
)
def test_held_for_is_three_intervals_as_prometheus_writes_a_duration(interval: str, held_for: str) -> None:
    rollout = comparison.DeclaredRollout("v2", "v1", "canary", 1, 10, interval)
    assert rollout.held_for == held_for


# --- Which models get them --------------------------------------------------------------------


def test_a_rollout_not_started_or_finished_has_no_series() -> None:
    assert iris(rollout_config(None)).rollout is None
    not_started = copy.deepcopy(CANARY)
    del not_started["status"]
    assert iris(rollout_config(not_started)).rollout is None
    finished = copy.deepcopy(CANARY)
    finished["status"] |= {"phase": "promoted", "step": 2}
    assert iris(rollout_config(finished)).rollout is None
    paused = copy.deepcopy(CANARY)
    paused["status"]["paused"] = "v2's weight is 20 in the file, the rollout wrote 10"
    assert iris(rollout_config(paused)).rollout == comparison.DeclaredRollout("v2", "v1", "canary", 1, 10, "15m")


def test_without_a_rollout_the_rules_and_dashboard_are_as_before() -> None:
    """iris without a rollout: the same rule group and panels as before, no rollout series."""
    without = iris(rollout_config(None))
    stack = parsed(rollout_config(None))
    group = comparison.alert_rules([(without, stack.models[0].analysis)], "dev")["groups"][0]
    assert not [r for r in group["rules"] if r.get("record") or r["alert"] == STARVED]
    assert not [t for t in panel_queries(without, None) if t.startswith("Rollout")]


def test_the_all_features_render_holds_the_rollout_of_qwen_only(tmp_path: Path) -> None:
    """qwen is at step 1 of its rollout (v2 at 10 %); mnist's rollout has not started (no status)."""
    alerting, dashboards = rendered(full_config(), tmp_path, "all-features")
    rollout_rules = {
        group["name"]: [r.get("record") or r["alert"] for r in group["rules"] if "rollout" in str(r).lower()]
        for group in alerting["groups"]
    }
    assert {name: rules for name, rules in rollout_rules.items() if rules} == {
        "inference-service-qwen": [comparison.ROLLOUT_WEIGHT, comparison.ROLLOUT_STEP, STARVED]
    }
    (qwen,) = [g for g in alerting["groups"] if g["name"] == "inference-service-qwen"]
    weight, step, alert = qwen["rules"][-3:]
    labels = {"destination_workload_namespace": "service", "destination_app": "qwen", "destination_version": "v2"}
    assert (weight["expr"], weight["labels"]) == ("vector(10)", labels | {"phase": "canary"})
    assert (step["expr"], step["labels"]) == ("vector(1)", labels | {"phase": "canary"})
    assert alert["for"] == "45m"
    titles = {
        name: [p["title"] for p in d["panels"] if p["title"].startswith("Rollout")] for name, d in dashboards.items()
    }
    assert {name: found for name, found in titles.items() if found} == {"qwen": [ROLLOUT_PANEL.format(candidate="v2")]}
    assert "mnist" in titles  # a dashboard of its own (a shadow), without the panel


def test_the_rollout_panel_survives_grafanas_own_types() -> None:
    """Parsed by the SDK's Dashboard model and written back: the overrides and all, nothing Grafana's
    types do not know; the declared series on the right axis, the traffic on the left."""
    document = model_dashboard(iris(rollout_config(CANARY)), None)
    assert json.loads(JSONEncoder(sort_keys=True).encode(GrafanaDashboard.from_json(document))) == document
    (panel,) = [p for p in document["panels"] if p["title"] == ROLLOUT_PANEL.format(candidate="v2")]
    assert panel["fieldConfig"]["defaults"]["unit"] == "reqps"
    overridden = [o["matcher"]["options"] for o in panel["fieldConfig"]["overrides"]]
    assert [t["refId"] for t in panel["targets"]][: len(overridden)] == overridden == ["A", "B"]
    assert [t["legendFormat"] for t in panel["targets"]] == [
        "{{destination_version}} declared weight ({{phase}})",
        "step",
        "v2 (candidate) requests/s",
        "v1 (primary) requests/s",
    ]


# --- The panel against a real Prometheus ------------------------------------------------------

STEP = 15  # seconds between samples, as the platform scrapes


def openmetrics(start: int) -> str:
    """iris's v1 and v2 serving 9 and 1 requests a second for 40 minutes from `start`."""
    lines = ["# TYPE istio_requests counter"]
    for version, rate in (("v1", 9), ("v2", 1)):
        lines += [
            f"istio_requests_total{{{labels(version)}}} {rate * STEP * step} {start + STEP * step}"
            for step in range(40 * 60 // STEP + 1)
        ]
    return "\n".join([*lines, "# EOF"]) + "\n"


@pytest.fixture(scope="module")
def with_recorded_rollout(tmp_path_factory: pytest.TempPathFactory, canary_rules: Path) -> Iterator[tuple[str, int]]:
    """A Prometheus holding Istio's series and, backfilled by `promtool tsdb create-blocks-from rules`
    from the rendered rule group (its recording rules), the rollout's series over the same time."""
    directory = tmp_path_factory.mktemp("prometheus")
    start = int(time.time()) // 3600 * 3600 - 3 * 3600
    config = backfilled(directory, openmetrics(start))
    group = yaml.safe_load(canary_rules.read_text())["groups"]
    records = [{"name": g["name"], "rules": [r for r in g["rules"] if "record" in r]} for g in group]
    recording = directory / "rollout-records.yml"
    recording.write_text(yaml.safe_dump({"groups": [g for g in records if g["rules"]]}, sort_keys=False))
    blocks = directory / "recorded"
    with prometheus(directory, config) as running:
        done = subprocess.run(
            [
                PROMTOOL,
                "tsdb",
                "create-blocks-from",
                "rules",
                f"--start={start}",
                f"--end={start + 40 * 60}",
                f"--url={running.url}",
                f"--output-dir={blocks}",
                str(recording),
            ],
            capture_output=True,
            text=True,
            check=False,
        )
        assert done.returncode == 0, done.stdout + done.stderr
    for block in blocks.iterdir():
        shutil.move(block, directory / "data" / block.name)
    with prometheus(directory, config) as running:
        yield running.url, start


def query(url: str, at: int, expression: str) -> str:
    done = subprocess.run(
        [PROMTOOL, "query", "instant", f"--time={at}", url, expression], capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, (expression, done.stderr)
    return done.stdout.strip()


def test_the_rollout_panels_queries_return_series(with_recorded_rollout: tuple[str, int]) -> None:
    url, start = with_recorded_rollout
    compared = iris(rollout_config(CANARY))
    assert compared.rollout is not None
    queries = rollout_queries(compared, compared.rollout)
    assert panel_queries(compared, None)[ROLLOUT_PANEL.format(candidate="v2")] == queries
    answers = [query(url, start + 35 * 60, expression) for expression, _ in queries]
    assert all(answers), list(zip(queries, answers, strict=True))
    weight, step, candidate, primary = answers
    assert weight.endswith(f"=> 10 @[{start + 35 * 60}]"), weight
    assert step.endswith(f"=> 1 @[{start + 35 * 60}]"), step
    assert 'destination_version="v2"' in candidate
    assert 'destination_version="v1"' in primary


def test_a_query_with_no_series_answers_nothing(with_recorded_rollout: tuple[str, int]) -> None:
    """What the test above would see of a series the backfill did not write."""
    url, start = with_recorded_rollout
    assert query(url, start + 35 * 60, comparison.declared(comparison.ROLLOUT_STEP, NAMESPACE, "churn")) == ""
