"""`python -m infra analyze` against the real Prometheus (Debian's build) on loopback, its TSDB
backfilled with promtool from OpenMetrics text shaped as Istio's sidecars report requests."""

from __future__ import annotations

import copy
import json
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from grafana_foundation_sdk.cog.encoder import JSONEncoder
from grafana_foundation_sdk.models.dashboard import Dashboard as GrafanaDashboard

from inference_platform.analysis import comparison
from inference_platform.analysis.dashboards import model_dashboard, panel_queries
from inference_platform.cli.exit_codes import ExitCode
from inference_platform.cli.main import main
from inference_platform.cli.stack_file import read_stack_file
from inference_platform.stack.config import parse_stack_config, project_values
from tests.conftest import base_config, write_stack_file
from tests.platform.istio_series import DURATIONS_TYPE, PAIRS_TYPE, REQUESTS_TYPE, pair_samples, request_samples
from tests.platform.prometheus_harness import PROMTOOL, RunningPrometheus, prometheus
from tests.platform.prometheus_harness import backfilled as backfilled_series
from tests.ports import free_port

pytestmark = pytest.mark.slow

STEP = 15  # seconds between samples, as the platform scrapes
MINUTES = 40
# 5 % of v3's requests fail from minute 20 on; before that every version is clean.
SHADOW_FAILS_FROM = 20 * 60

# base_config's iris (v1 90, v2 10, v3 mirrored 50), churn with a shadow that sees too little
# traffic, and a model with a single version (nothing to compare).
CONFIG: dict[str, Any] = base_config()
CONFIG["inference-platform:models"][1]["versions"].append(
    {"name": "v2", "modelUri": "pvc://models/churn/v2", "mirrorPercent": 1}
)
CONFIG["inference-platform:models"].append(
    {"name": "solo", "runtime": "mlserver", "versions": [{"name": "v1", "modelUri": "pvc://m/solo", "weight": 100}]}
)
# Requests per second by (model, version); churn's shadow sees too few to judge.
RATES = {("iris", "v1"): 9.0, ("iris", "v2"): 1.0, ("iris", "v3"): 5.0, ("churn", "v1"): 4.0, ("churn", "v2"): 0.05}
# The payload comparator's pairs per second by shadow (the stack samples half of iris's requests):
# iris's v3 agrees on every pair until minute 25, then on 2.5 of every 2.6; churn's pairs are few.
AGREE = {("iris", "v3"): 2.5, ("churn", "v2"): 0.04}
DISAGREE_FROM, DISAGREE = 25 * 60, {("iris", "v3"): 0.1}


def openmetrics(start: int) -> str:
    """Counters and histogram buckets, sample by sample, as Prometheus would have scraped them."""
    times = [start + step * STEP for step in range(MINUTES * 60 // STEP + 1)]
    requests, durations = [REQUESTS_TYPE], [DURATIONS_TYPE]
    for (model, version), rate in RATES.items():
        failing = [(model, version) == ("iris", "v3") and step * STEP > SHADOW_FAILS_FROM for step in range(len(times))]
        added = [(rate * STEP * (0.95 if fails else 1), rate * STEP * (0.05 if fails else 0)) for fails in failing]
        answered, timed = request_samples(model, version, times, added)
        requests += answered
        durations += timed
    gpu = ["# TYPE hami_container_device_utilization_ratio gauge"]
    up = ["# TYPE up gauge"]
    for model, version in RATES:
        pod = f"{model}-{version}-7c9f8d4b6-x2v9q"
        for t in times:
            gpu.append(
                f'hami_container_device_utilization_ratio{{namespace="service",pod="{pod}",container="server",'
                f'vdevice_index="0"}} 42 {t}'
            )
            up.append(
                f'up{{job="kubernetes-pods",namespace="service",app="{model}",version="{version}",pod="{pod}"}} 1 {t}'
            )
    pairs = [PAIRS_TYPE]
    for (model, version), rate in AGREE.items():
        disagreeing = DISAGREE.get((model, version), 0.0)
        pairs += pair_samples(
            model,
            version,
            times,
            [(rate * STEP, disagreeing * STEP * (step * STEP > DISAGREE_FROM)) for step in range(len(times))],
        )
    return "\n".join([*requests, *durations, *gpu, *up, *pairs, "# EOF"]) + "\n"


@pytest.fixture(scope="module")
def backfilled(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[RunningPrometheus, int]]:
    directory = tmp_path_factory.mktemp("prometheus")
    start = int(time.time()) // 3600 * 3600 - 3 * 3600
    with prometheus(directory, backfilled_series(directory, openmetrics(start))) as running:
        yield running, start


@pytest.fixture(scope="module")
def stack_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_stack_file(tmp_path_factory.mktemp("stack") / "Pulumi.dev.yaml", CONFIG)


def analyze(stack_file: Path, url: str, *extra: str) -> int:
    return main(["analyze", "--stack", "dev", "--config", str(stack_file), "--prometheus", url, *extra])


def verdicts(report: dict[str, Any]) -> dict[tuple[str, str], str]:
    return {(m["model"], c["version"]): c["verdict"] for m in report["models"] for c in m["candidates"]}


def test_every_verdict_in_json(backfilled: tuple[RunningPrometheus, int], stack_file: Path, capsys: Any) -> None:
    running, start = backfilled
    at = start + 35 * 60
    assert analyze(stack_file, running.url, "--at", str(at), "--format", "json") == ExitCode.CANDIDATE_FAILED
    report = json.loads(capsys.readouterr().out)
    assert report["stack"] == "dev"
    assert report["window"] == "10m"
    assert report["at"] == time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(at))
    assert [m["model"] for m in report["models"]] == ["iris", "churn"]  # solo has nothing to compare
    assert verdicts(report) == {
        ("iris", "v2"): "pass",
        ("iris", "v3"): "fail",
        ("churn", "v2"): "insufficient-data",
    }
    iris = report["models"][0]
    assert iris["primary"] == "v1"
    assert set(iris["primaryStats"]) == {"requests", "errorRatio", "p50Ms", "p95Ms", "p99Ms"}
    assert iris["primaryStats"]["requests"] == pytest.approx(9 * 600, rel=0.01)
    assert iris["primaryStats"]["errorRatio"] == 0
    assert iris["primaryStats"]["p95Ms"] == pytest.approx(90)
    canary, shadow = iris["candidates"]
    assert set(canary) == {"version", "role", "requests", "errorRatio", "p50Ms", "p95Ms", "p99Ms", "verdict", "reasons"}
    assert (canary["role"], canary["reasons"]) == ("canary", [])
    assert canary["requests"] == pytest.approx(600, rel=0.01)
    assert shadow["role"] == "shadow"
    assert shadow["errorRatio"] == pytest.approx(0.05, abs=1e-6)
    assert shadow["reasons"] == [
        "error ratio 5.00% is 5.00 percentage points above the primary's 0.00% (allowed 1 percentage point)"
    ]
    churn = report["models"][1]["candidates"][0]
    assert churn["reasons"] == ["it served 30 requests, fewer than minRequests (100 requests)"]
    counts = [iris["primaryStats"]["requests"], *(c["requests"] for m in report["models"] for c in m["candidates"])]
    assert all(type(count) is int for count in counts), counts


def test_one_model_and_insufficient_data_exit_3(
    backfilled: tuple[RunningPrometheus, int], stack_file: Path, capsys: Any
) -> None:
    running, start = backfilled
    assert analyze(stack_file, running.url, "--at", str(start + 35 * 60), "--model", "churn", "--format", "json") == 3
    report = json.loads(capsys.readouterr().out)
    assert verdicts(report) == {("churn", "v2"): "insufficient-data"}


def test_before_the_shadow_failed_everything_passes(
    backfilled: tuple[RunningPrometheus, int], stack_file: Path, capsys: Any
) -> None:
    running, start = backfilled
    rfc3339 = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(start + 18 * 60))
    assert analyze(stack_file, running.url, "--at", rfc3339, "--model", "iris", "--format", "json") == 0
    assert set(verdicts(json.loads(capsys.readouterr().out)).values()) == {"pass"}


def test_a_longer_window_dilutes_the_failure(
    backfilled: tuple[RunningPrometheus, int], stack_file: Path, capsys: Any
) -> None:
    """--window replaces the model's: over 30 minutes, 15 of them failing, v3 fails 2.5 %."""
    running, start = backfilled
    at = str(start + 35 * 60)
    assert (
        analyze(stack_file, running.url, "--at", at, "--model", "iris", "--window", "30m", "--format", "json")
        == ExitCode.CANDIDATE_FAILED
    )
    report = json.loads(capsys.readouterr().out)
    assert report["window"] == "30m"
    assert report["models"][0]["candidates"][1]["errorRatio"] == pytest.approx(0.025, rel=0.05)


@pytest.fixture(scope="module")
def sleeping_stack_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The same models with KEDA, iris sleeping at zero replicas."""
    config = copy.deepcopy(CONFIG)
    config["inference-platform:platform"] = {"autoscaler": "keda"}
    config["inference-platform:models"][0]["autoscaling"] = {"minReplicas": 0, "maxReplicas": 3}
    return write_stack_file(tmp_path_factory.mktemp("sleeping") / "Pulumi.dev.yaml", config)


def test_a_model_asleep_through_the_window_is_idle(
    backfilled: tuple[RunningPrometheus, int], stack_file: Path, sleeping_stack_file: Path, capsys: Any
) -> None:
    """An hour before the first sample nobody called iris: asleep, not short of data; awake, its
    versions are judged as any model's."""
    running, start = backfilled
    before = str(start - 3600)
    assert analyze(sleeping_stack_file, running.url, "--at", before, "--model", "iris", "--format", "json") == 3
    report = json.loads(capsys.readouterr().out)
    assert verdicts(report) == {("iris", "v2"): "idle", ("iris", "v3"): "idle"}
    assert report["models"][0]["candidates"][0]["reasons"] == [
        "the model slept at zero replicas: no request in the window"
    ]
    assert analyze(stack_file, running.url, "--at", before, "--model", "iris", "--format", "json") == 3
    assert set(verdicts(json.loads(capsys.readouterr().out)).values()) == {"insufficient-data"}
    at = str(start + 35 * 60)
    assert (
        analyze(sleeping_stack_file, running.url, "--at", at, "--model", "iris", "--format", "json")
        == ExitCode.CANDIDATE_FAILED
    )
    assert verdicts(json.loads(capsys.readouterr().out)) == {("iris", "v2"): "pass", ("iris", "v3"): "fail"}


@pytest.fixture(scope="module")
def payloads_stack_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The same models, comparing iris's and churn's shadows' answers with their primaries'."""
    config = copy.deepcopy(CONFIG)
    for model in config["inference-platform:models"][:2]:
        model["analysis"] = {"payloads": {"enabled": True, "sample": 0.5}}
    return write_stack_file(tmp_path_factory.mktemp("payloads") / "Pulumi.dev.yaml", config)


def shadows(report: dict[str, Any]) -> dict[tuple[str, str], dict[str, Any]]:
    return {(m["model"], c["version"]): c for m in report["models"] for c in m["candidates"] if c["role"] == "shadow"}


def test_a_shadow_that_answers_differently_fails(
    backfilled: tuple[RunningPrometheus, int], payloads_stack_file: Path, capsys: Any
) -> None:
    """Minutes 25 to 35: 1,500 agreeing and 60 disagreeing pairs, 96.2 %, under the 99 % asked for;
    its error ratio fails it too, and both reasons are given."""
    running, start = backfilled
    assert (
        analyze(payloads_stack_file, running.url, "--at", str(start + 35 * 60), "--format", "json")
        == ExitCode.CANDIDATE_FAILED
    )
    found = shadows(json.loads(capsys.readouterr().out))
    iris = found["iris", "v3"]
    assert (iris["pairs"], iris["agreement"]) == (pytest.approx(1560, rel=0.01), pytest.approx(2.5 / 2.6, abs=1e-3))
    assert iris["verdict"] == "fail"
    assert iris["reasons"][1] == "agrees with v1 on 96.2% of 1,560 paired requests, below 99%"
    churn = found["churn", "v2"]
    assert churn["verdict"] == "insufficient-data"
    assert churn["pairs"] == pytest.approx(24, rel=0.05)
    assert churn["reasons"][-1] == "24 of its answers were paired with v1's, fewer than payloads.minPairs (100 pairs)"


def test_a_shadow_that_answers_the_same_passes_and_the_table_shows_it(
    backfilled: tuple[RunningPrometheus, int], payloads_stack_file: Path, capsys: Any
) -> None:
    running, start = backfilled
    at = str(start + 18 * 60)
    assert analyze(payloads_stack_file, running.url, "--at", at, "--model", "iris", "--format", "json") == 0
    iris = shadows(json.loads(capsys.readouterr().out))["iris", "v3"]
    assert (iris["verdict"], iris["agreement"], iris["pairs"]) == ("pass", 1.0, pytest.approx(1500, rel=0.01))
    assert analyze(payloads_stack_file, running.url, "--at", at, "--model", "iris", "--format", "markdown") == 0
    assert "| iris | v3 | shadow | 3000 | 0.00% | 25 | 90 | 98 | 100.0% of 1500 | pass |" in capsys.readouterr().out


def test_without_payloads_a_shadow_has_no_pairs_to_judge(
    backfilled: tuple[RunningPrometheus, int], stack_file: Path, capsys: Any
) -> None:
    """The same series, a stack that does not compare payloads: the comparator's series are not
    asked for, and the shadow is judged as before."""
    running, start = backfilled
    assert analyze(stack_file, running.url, "--at", str(start + 18 * 60), "--model", "iris", "--format", "json") == 0
    iris = shadows(json.loads(capsys.readouterr().out))["iris", "v3"]
    assert (iris["verdict"], iris["reasons"], iris["pairs"], iris["agreement"]) == ("pass", [], 0, None)


def test_table_and_markdown(
    backfilled: tuple[RunningPrometheus, int], stack_file: Path, payloads_stack_file: Path, capsys: Any
) -> None:
    running, start = backfilled
    at = str(start + 35 * 60)
    assert analyze(payloads_stack_file, running.url, "--at", at, "--format", "markdown") == ExitCode.CANDIDATE_FAILED
    markdown = capsys.readouterr().out
    assert markdown.startswith("## Canary and shadow analysis: stack `dev`\n")
    assert (
        "| iris | v3 | shadow | 3000 | 5.00% | 25 | 90 | 98 | 96.2% of 1560 | "
        "fail: error ratio 5.00% is 5.00 percentage points" in markdown
    )
    assert "| iris | v1 | primary | 5400 | 0.00% | 25 | 90 | 98 | — |  |" in markdown
    assert analyze(stack_file, running.url, "--at", at, "--format", "markdown") == ExitCode.CANDIDATE_FAILED
    assert "| iris | v3 | shadow | 3000 | 5.00% | 25 | 90 | 98 | — | fail: error ratio" in capsys.readouterr().out
    assert analyze(stack_file, running.url, "--at", at) == ExitCode.CANDIDATE_FAILED
    table = capsys.readouterr().out
    assert "insufficient-data" in table
    assert "fail: error ratio" in table


def test_prometheus_down_is_exit_4(stack_file: Path, capsys: Any) -> None:
    url = f"http://127.0.0.1:{free_port()}"
    assert analyze(stack_file, url) == 4
    err = capsys.readouterr().err
    assert err == f"analyze: cannot reach Prometheus at {url}: ConnectionError\n"


def test_an_answer_that_is_not_prometheus_is_exit_4(stack_file: Path, tmp_path: Path, capsys: Any) -> None:
    """Something else answers on the URL (a plain file server): one line, no traceback."""
    (tmp_path / "api" / "v1").mkdir(parents=True)
    (tmp_path / "api" / "v1" / "query").write_text("<html>not Prometheus</html>")
    port = free_port()
    server = subprocess.Popen(
        [sys.executable, "-m", "http.server", str(port), "--bind", "127.0.0.1", "--directory", str(tmp_path)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        url = f"http://127.0.0.1:{port}"
        for _ in range(50):
            if analyze(stack_file, url) == 4 and "not a query result" in capsys.readouterr().err:
                break
            time.sleep(0.1)
        else:
            pytest.fail("the file server never answered")
    finally:
        server.terminate()
        server.wait(timeout=10)


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--model", "nope"], "analyze: --model: the stack has no model 'nope'\n"),
        (["--at", "yesterday"], "analyze: --at: Invalid isoformat string: 'yesterday'\n"),
        (["--at", "2026-12-01T10:00:00"], "analyze: --at: 2026-12-01T10:00:00 has no time zone (add Z or an offset)\n"),
    ],
)
def test_bad_usage_is_exit_2(stack_file: Path, extra: list[str], message: str, capsys: Any) -> None:
    assert analyze(stack_file, "http://127.0.0.1:9", *extra) == 2
    assert capsys.readouterr().err == message


@pytest.mark.parametrize("url", ["127.0.0.1:19090", "localhost:9090", "ftp://127.0.0.1:9090", "http://"])
def test_a_url_that_is_not_http_is_a_usage_error(stack_file: Path, url: str, capsys: Any) -> None:
    """Not an unreachable Prometheus (exit 4): the command line is wrong, and argparse says so."""
    with pytest.raises(SystemExit) as exited:
        analyze(stack_file, url)
    assert exited.value.code == ExitCode.CONFIG_ERROR
    assert f"argument --prometheus: not an http(s) URL: {url!r}" in capsys.readouterr().err


def test_a_model_with_nothing_to_compare_says_so(stack_file: Path, tmp_path: Path, capsys: Any) -> None:
    """Exit 3 with the reason, before asking Prometheus (nothing listens at port 9): not an empty table and 0."""
    assert analyze(stack_file, "http://127.0.0.1:9", "--model", "solo") == ExitCode.INSUFFICIENT_DATA
    assert capsys.readouterr() == ("", "analyze: --model solo has nothing to compare: it has one version (v1)\n")
    idle = copy.deepcopy(CONFIG)
    idle["inference-platform:models"][-1]["versions"].append({"name": "v2", "modelUri": "pvc://m/solo2", "weight": 0})
    path = write_stack_file(tmp_path / "Pulumi.dev.yaml", idle)
    assert analyze(path, "http://127.0.0.1:9", "--model", "solo") == ExitCode.INSUFFICIENT_DATA
    assert "no version but its primary has a weight or a mirror" in capsys.readouterr().err


def test_a_bad_window_and_a_bad_config_are_exit_2(stack_file: Path, tmp_path: Path, capsys: Any) -> None:
    with pytest.raises(SystemExit) as exited:
        analyze(stack_file, "http://127.0.0.1:9", "--window", "ten minutes")
    assert exited.value.code == 2
    assert "not a duration: 'ten minutes'" in capsys.readouterr().err
    bad = dict(CONFIG)
    bad["inference-platform:models"] = [{**CONFIG["inference-platform:models"][0], "analysis": {"minRequests": 0}}]
    path = write_stack_file(tmp_path / "Pulumi.bad.yaml", bad)
    assert analyze(path, "http://127.0.0.1:9") == 2
    err = capsys.readouterr().err
    assert f"\n  {path}:18:7: models[0] (iris).analysis.minRequests: " in err
    assert "Traceback" not in err


def test_every_dashboard_panel_query_returns_series(
    backfilled: tuple[RunningPrometheus, int], stack_file: Path
) -> None:
    """Each panel's PromQL, run by promtool against the backfilled Prometheus, for every model
    the dashboards cover: valid, and answering with series."""
    running, start = backfilled
    config = parse_stack_config(project_values(read_stack_file(stack_file).config))
    covered = [c for m in config.models if (c := comparison.comparison(m, config.namespace)) is not None]
    assert [c.model for c in covered] == ["iris", "churn"]
    queries = [
        (c.model, title, q) for c in covered for title, pairs in panel_queries(c, "hami").items() for q, _ in pairs
    ]
    assert len(queries) > 20
    for model, title, query in queries:
        done = subprocess.run(
            [PROMTOOL, "query", "instant", f"--time={start + 35 * 60}", running.url, query],
            capture_output=True,
            text=True,
            check=False,
        )
        assert done.returncode == 0, (model, title, done.stderr)
        assert done.stdout.strip(), f"{model} / {title}: no series for {query}"


def test_a_sleeping_models_replica_panel_shows_zero_per_version(
    backfilled: tuple[RunningPrometheus, int], sleeping_stack_file: Path
) -> None:
    """Before any pod was scraped, each version's line reads 0 (not no data); awake, its pods."""
    running, start = backfilled
    config = parse_stack_config(project_values(read_stack_file(sleeping_stack_file).config))
    iris = comparison.comparison(config.models[0], config.namespace)
    assert iris is not None
    panel = panel_queries(iris, "hami")["Replicas (pods scraped)"]
    assert [legend for _, legend in panel] == ["v1", "v2", "v3"]
    for at, expected in ((start - 3600, "0"), (start + 35 * 60, "1")):
        for query, version in panel:
            done = subprocess.run(
                [PROMTOOL, "query", "instant", f"--time={at}", running.url, query],
                capture_output=True,
                text=True,
                check=True,
            )
            assert done.stdout.strip().endswith(f"=> {expected} @[{at}]"), (version, done.stdout)


def test_promtool_fails_a_query_that_finds_nothing_or_is_broken(backfilled: tuple[RunningPrometheus, int]) -> None:
    running, start = backfilled
    empty = subprocess.run(
        [PROMTOOL, "query", "instant", f"--time={start + 35 * 60}", running.url, 'up{app="nope"}'],
        capture_output=True,
        text=True,
        check=False,
    )
    assert (empty.returncode, empty.stdout.strip()) == (0, "")
    broken = subprocess.run(
        [PROMTOOL, "query", "instant", running.url, "sum by (app (up)"], capture_output=True, text=True, check=False
    )
    assert broken.returncode != 0


def test_dashboards_survive_grafanas_own_types(stack_file: Path) -> None:
    """Parsed by the SDK's Dashboard model and written back: nothing Grafana's types do not know."""
    config = parse_stack_config(project_values(read_stack_file(stack_file).config))
    for model in config.models:
        compared = comparison.comparison(model, config.namespace)
        if compared is None:
            continue
        document = model_dashboard(compared, "dcgm")
        parsed = GrafanaDashboard.from_json(document)
        assert json.loads(JSONEncoder(sort_keys=True).encode(parsed)) == document
        assert len(document["panels"]) == 7  # a row, then six panels
        misspelt = document | {"pannels": document["panels"]}
        assert json.loads(JSONEncoder(sort_keys=True).encode(GrafanaDashboard.from_json(misspelt))) != misspelt
