"""The payload protocols' names: the platform's (serving/analysis_spec.py) and the comparator's
package's (inference_comparator.protocols) are one list, held together here; any JSON is `json`,
and `torchserve`, its former name, is still read wherever a stack or a config names a protocol."""

from __future__ import annotations

import json
from typing import Any, get_args

import pytest
from inference_comparator import protocols as comparator_protocols
from inference_comparator.config import parse_config

from inference_platform import pins
from inference_platform.serving.analysis_spec import (
    PAYLOAD_PROTOCOL_ALIASES,
    PAYLOAD_PROTOCOLS,
    PayloadComparison,
    PayloadProtocolAlias,
)
from tests.serving.test_payload_capture import args, comparator, iris

# What the comparator image 0.1.0 reads (its released config.py): it predates the name `json`.
READ_BY_COMPARATOR_0_1_0 = ("open-inference-v2", "tfserving", "torchserve", "openai")


def test_the_platform_and_the_comparator_name_the_same_protocols() -> None:
    assert PAYLOAD_PROTOCOLS == comparator_protocols.PROTOCOLS
    assert PAYLOAD_PROTOCOL_ALIASES == comparator_protocols.ALIASES
    assert set(PAYLOAD_PROTOCOL_ALIASES) == set(get_args(PayloadProtocolAlias))


@pytest.mark.parametrize("name", ["json", "torchserve"])
def test_a_stack_names_any_json_json_or_by_its_former_name(name: str) -> None:
    assert PayloadComparison.model_validate({"enabled": True, "protocol": name}).protocol == "json"
    model = args(iris(analysis={"payloads": {"enabled": True, "protocol": name}})).model
    assert model.payload_protocol == "json"


def test_a_stack_file_may_name_the_former_name_in_its_schema() -> None:
    schema = PayloadComparison.model_json_schema()["properties"]["protocol"]
    (names,) = [option["enum"] for option in schema["anyOf"] if "enum" in option]
    assert sorted(names) == sorted([*PAYLOAD_PROTOCOLS, *PAYLOAD_PROTOCOL_ALIASES])


def torchserve(**settings: Any) -> dict[str, Any]:
    return {
        "name": "resnet",
        "runtime": "torchserve",
        "versions": [
            {"name": "v1", "modelUri": "pvc://models/resnet/v1", "weight": 100},
            {"name": "v2", "modelUri": "pvc://models/resnet/v2", "mirrorPercent": 10},
        ],
        "analysis": {"payloads": {"enabled": True}},
        **settings,
    }


@pytest.mark.parametrize(
    ("model", "meant"),
    [
        (iris(), "open-inference-v2"),
        (iris(transformer={"image": "registry.example.com/pre:1.0.0"}), "json"),
        (torchserve(), "json"),
        *((iris(analysis={"payloads": {"enabled": True, "protocol": name}}), name) for name in PAYLOAD_PROTOCOLS),
        (iris(analysis={"payloads": {"enabled": True, "protocol": "torchserve"}}), "json"),
    ],
)
def test_the_comparator_reads_the_config_the_platform_writes_as_the_protocol_meant(
    model: dict[str, Any], meant: str
) -> None:
    assert args(model).model.payload_protocol == meant
    text = comparator(model)["ConfigMap", "inference-comparator"]["data"]["comparator.json"]
    (read,) = parse_config(json.loads(text)).models
    assert read.protocol == meant


def test_the_config_names_protocols_as_the_deployed_comparator_reads_them() -> None:
    """The image pins.py deploys reads `json` by its former name only: the config writes that."""
    assert pins.COMPARATOR_IMAGE.endswith(":0.1.0"), (
        "the comparator pin moved: if its release reads `json`, write it (payload_comparator.py) and update this test"
    )
    models = [iris(analysis={"payloads": {"enabled": True, "protocol": name}}) for name in PAYLOAD_PROTOCOLS]
    text = comparator(*(m | {"name": f"m{i}"} for i, m in enumerate(models)))["ConfigMap", "inference-comparator"]
    written = [model["protocol"] for model in json.loads(text["data"]["comparator.json"])["models"]]
    assert len(written) == len(PAYLOAD_PROTOCOLS)
    assert set(written) <= set(READ_BY_COMPARATOR_0_1_0)
