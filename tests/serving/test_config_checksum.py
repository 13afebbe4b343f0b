"""The pod annotation that rolls a workload when its generated config changes: one name, written
by every workload that reads a config at start (model versions, their LeaderWorkerSet groups, the
payload comparator)."""

from __future__ import annotations

from pathlib import Path

from inference_platform.serving.config_checksum import CONFIG_CHECKSUM
from tests.serving.test_multi_node import group
from tests.serving.test_payload_capture import comparator, iris
from tests.serving.test_scale_to_zero import render

SRC = Path(__file__).resolve().parents[2] / "src"


def test_the_annotation_is_named_in_one_module() -> None:
    spelled = sorted(
        str(path.relative_to(SRC)) for path in SRC.rglob("*.py") if "config-sha256" in path.read_text(encoding="utf-8")
    )
    assert spelled == ["inference_platform/serving/config_checksum.py"]


def test_each_version_rolls_on_its_own_config() -> None:
    objects = render(iris(analysis={}))
    checksums = {
        name: objects["Deployment", name]["spec"]["template"]["metadata"]["annotations"][CONFIG_CHECKSUM]
        for name in ("iris-v1", "iris-v2")
    }
    assert checksums["iris-v1"] != checksums["iris-v2"]  # each version's model settings name it


def test_a_groups_workers_roll_with_its_leader() -> None:
    template = render(group())["LeaderWorkerSet", "deepseek-v1-group"]["spec"]["leaderWorkerTemplate"]
    leader, worker = (template[key]["metadata"]["annotations"] for key in ("leaderTemplate", "workerTemplate"))
    assert worker[CONFIG_CHECKSUM] == leader[CONFIG_CHECKSUM]


def test_the_comparator_rolls_on_a_new_config() -> None:
    def checksum(*models: dict[str, object]) -> str:
        deployment = comparator(*models)["Deployment", "inference-comparator"]
        annotation: str = deployment["spec"]["template"]["metadata"]["annotations"][CONFIG_CHECKSUM]
        return annotation

    assert checksum(iris()) != checksum(iris(), iris(name="churn"))
