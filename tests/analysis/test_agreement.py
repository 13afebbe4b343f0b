"""The payload alerts, judged by the real promtool on series shaped as the comparator exports them
(`inference_payload_pairs_total{namespace, model, version, result}` and
`inference_payload_unpaired_total{..., side}`, the version naming the shadow): both sides of
`minAgreement` and `minPairs`, a join that pairs nothing, and silence when all agree."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.analysis.test_comparison import alerts_of, rule_files, run_promtool
from tests.conftest import base_config

pytestmark = pytest.mark.slow

MINUTES = 40
EVAL = "30m"
PAYLOAD_ALERTS = ("InferencePayloadDisagreement", "InferencePayloadJoinBroken")
SHADOW = 'namespace="service",model="iris",version="v3"'


def config() -> dict[str, Any]:
    """base_config's iris (v1 primary, v3 its shadow) comparing answers: 99 % of at least 100 pairs."""
    stack = base_config()
    stack["inference-platform:models"][0]["analysis"] = {"payloads": {"enabled": True}}
    return stack


def counter(name: str, per_minute: int, **labels: str) -> dict[str, str]:
    extra = "".join(f',{key}="{value}"' for key, value in labels.items())
    return {"series": f"{name}{{{SHADOW}{extra}}}", "values": f"0+{per_minute}x{MINUTES}"}


def pairs(agree: int, disagree: int) -> list[dict[str, str]]:
    series = []
    if agree:
        series.append(counter("inference_payload_pairs_total", agree, result="agree"))
    if disagree:
        series.append(counter("inference_payload_pairs_total", disagree, result="disagree"))
    return series


def as_written(rule: dict[str, Any]) -> dict[str, Any]:
    """A payload alert fires with its rule's labels, which name the shadow, and its annotations."""
    return {"exp_labels": rule["labels"], "exp_annotations": rule["annotations"]}


def fires(tmp_path: Path, series: list[dict[str, str]], firing: set[str]) -> subprocess.CompletedProcess[str]:
    """promtool expecting exactly `firing` of iris v3's alerts, every other alert of the stack silent."""
    return run_promtool(tmp_path, series, {(name, "v3") for name in firing}, config(), expect=as_written)


def assert_fires(tmp_path: Path, series: list[dict[str, str]], firing: set[str]) -> None:
    done = fires(tmp_path, series, firing)
    assert done.returncode == 0, done.stdout + done.stderr


def test_a_shadow_that_answers_as_the_primary_stays_silent(tmp_path: Path) -> None:
    assert_fires(tmp_path, pairs(100, 0), set())


def test_the_harness_would_notice_a_missing_alert(tmp_path: Path) -> None:
    assert fires(tmp_path, pairs(100, 0), {"InferencePayloadDisagreement"}).returncode != 0


@pytest.mark.parametrize(
    ("agree", "disagree", "firing"),
    [
        (991, 9, False),  # 99.1 %: inside 0.99
        (989, 11, True),  # 98.9 %: outside
        (98, 2, True),  # 98 % of 1,000 pairs over the 10-minute window
        (0, 50, True),  # nothing agrees: 0, not no data
    ],
)
def test_disagreement_fires_below_min_agreement(tmp_path: Path, agree: int, disagree: int, firing: bool) -> None:
    assert_fires(tmp_path, pairs(agree, disagree), {"InferencePayloadDisagreement"} if firing else set())


@pytest.mark.parametrize(("per_minute", "firing"), [(9, False), (11, True)])
def test_too_few_pairs_are_not_judged(tmp_path: Path, per_minute: int, firing: bool) -> None:
    """Half of them disagree; 90 pairs in the window is under minPairs (100), 110 is not."""
    half = per_minute // 2
    series = pairs(per_minute - half, half)
    assert_fires(tmp_path, series, {"InferencePayloadDisagreement"} if firing else set())


def test_shadow_answers_that_never_pair_break_the_join(tmp_path: Path) -> None:
    unpaired = counter("inference_payload_unpaired_total", 50, side="shadow")
    assert_fires(tmp_path, [unpaired], {"InferencePayloadJoinBroken"})
    # Some unpaired answers beside pairs are normal (a primary's request routed to a canary).
    assert_fires(tmp_path, [unpaired, *pairs(100, 0)], set())
    # Unpaired primaries alone are normal too: the mirror copies only a share of requests.
    assert_fires(tmp_path, [counter("inference_payload_unpaired_total", 50, side="primary")], set())


def test_only_models_that_compare_payloads_get_the_alerts(tmp_path: Path) -> None:
    _, alerting = rule_files(config(), tmp_path)
    # What every test above judges, silent or firing, exists for the shadow of the model that compares.
    assert {(name, "v3") for name in PAYLOAD_ALERTS} <= set(alerts_of(alerting))
    _, alerting = rule_files(base_config(), tmp_path)
    assert not {name for name, _ in alerts_of(alerting)} & set(PAYLOAD_ALERTS)
