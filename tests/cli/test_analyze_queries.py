"""`infra analyze` asks Prometheus a fixed number of queries whatever the size of the fleet,
counted by the real Prometheus itself (`prometheus_http_requests_total`), its TSDB backfilled
with a fleet of models (tests/platform/fleet_series.py)."""

from __future__ import annotations

import json
import shutil
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from inference_platform.cli.main import main
from tests.conftest import write_stack_file
from tests.platform import fleet_series
from tests.platform.prometheus_harness import PROMETHEUS, PROMTOOL, RunningPrometheus, prometheus

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(
        shutil.which(PROMETHEUS) is None or shutil.which(PROMTOOL) is None,
        reason=f"{PROMETHEUS} and {PROMTOOL} are needed (Debian's prometheus package has both)",
    ),
]

FLEET = 30
MINUTES = 12
# Requests, error ratio, p50, p95 and p99 over the Istio series; pairs and agreement over the
# payload comparator's. Per distinct window.
ISTIO_STATISTICS, PAYLOAD_STATISTICS = 5, 2


@pytest.fixture(scope="module")
def fleet(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[RunningPrometheus, int]]:
    directory = tmp_path_factory.mktemp("fleet")
    start = int(time.time()) // 3600 * 3600 - 3 * 3600
    config = fleet_series.backfill(directory, FLEET, start, MINUTES)
    with prometheus(directory, config) as running:
        yield running, start + (MINUTES - 1) * 60


def analyze(running: RunningPrometheus, at: int, config: dict[str, Any], tmp_path: Path, *extra: str) -> int:
    stack_file = write_stack_file(tmp_path / "Pulumi.fleet.yaml", config)
    argv = ["analyze", "--stack", "fleet", "--config", str(stack_file), "--prometheus", running.url, "--at", str(at)]
    return main([*argv, "--format", "json", *extra])


def queries_for(
    running: RunningPrometheus, at: int, config: dict[str, Any], tmp_path: Path, capsys: Any, *extra: str
) -> tuple[int, dict[str, Any]]:
    """The queries one `analyze` sent, and its report."""
    before = running.instant_queries_answered()
    analyze(running, at, config, tmp_path, *extra)
    sent = running.instant_queries_answered() - before
    return sent, json.loads(capsys.readouterr().out)


def verdicts(report: dict[str, Any]) -> dict[tuple[str, str], str]:
    return {(m["model"], c["version"]): c["verdict"] for m in report["models"] for c in m["candidates"]}


def test_three_models_and_thirty_cost_the_same_queries(
    fleet: tuple[RunningPrometheus, int], tmp_path: Path, capsys: Any
) -> None:
    running, at = fleet
    few, few_report = queries_for(running, at, fleet_series.stack_config(3), tmp_path, capsys)
    many, many_report = queries_for(running, at, fleet_series.stack_config(FLEET), tmp_path, capsys)
    assert few == many == ISTIO_STATISTICS + PAYLOAD_STATISTICS
    # The answers were split per model and version: every candidate judged on its own series.
    assert len(verdicts(many_report)) == 2 * FLEET
    assert {key: v for key, v in verdicts(many_report).items() if v != "pass"} == {
        (fleet_series.model_name(i), version): "fail"
        for i in range(FLEET)
        for version, failing in (("v2", i % 7 == 3), ("v3", i % 11 == 5 or i % 13 == 7))
        if failing
    }
    assert many_report["models"][:3] == few_report["models"]


def test_a_model_of_the_fleet_reads_as_when_analyzed_alone(
    fleet: tuple[RunningPrometheus, int], tmp_path: Path, capsys: Any
) -> None:
    """The failing canary, the slow shadow and the disagreeing shadow: the same figures and
    verdicts in the whole fleet's report as with `--model`, which asks only about that model."""
    running, at = fleet
    config = fleet_series.stack_config(FLEET)
    _, whole = queries_for(running, at, config, tmp_path, capsys)
    by_name = {m["model"]: m for m in whole["models"]}
    for name in ("model-3", "model-5", "model-7"):
        sent, alone = queries_for(running, at, config, tmp_path, capsys, "--model", name)
        assert sent == ISTIO_STATISTICS + PAYLOAD_STATISTICS
        assert alone["models"] == [by_name[name]]
    assert by_name["model-7"]["candidates"][1]["reasons"] == [
        "agrees with v1 on 96.0% of 1,500 paired requests, below 99%"
    ]


def test_queries_grow_with_windows_and_payloads_not_with_models(
    fleet: tuple[RunningPrometheus, int], tmp_path: Path, capsys: Any
) -> None:
    """A model with a window of its own adds one query per statistic for that window; a fleet that
    compares no payloads does not ask for pairs; `--window` puts every model in one window."""
    running, at = fleet
    two_windows = fleet_series.stack_config(FLEET)
    two_windows["inference-platform:models"][4]["analysis"]["window"] = "5m"
    sent, report = queries_for(running, at, two_windows, tmp_path, capsys)
    assert (sent, report["window"]) == (2 * (ISTIO_STATISTICS + PAYLOAD_STATISTICS), "10m,5m")
    sent, report = queries_for(running, at, two_windows, tmp_path, capsys, "--window", "8m")
    assert (sent, report["window"]) == (ISTIO_STATISTICS + PAYLOAD_STATISTICS, "8m")
    no_payloads = fleet_series.stack_config(FLEET)
    for model in no_payloads["inference-platform:models"]:
        del model["analysis"]
    sent, report = queries_for(running, at, no_payloads, tmp_path, capsys)
    assert sent == ISTIO_STATISTICS
    assert {c["agreement"] for m in report["models"] for c in m["candidates"] if c["role"] == "shadow"} == {None}
