"""The comparator's config file: what loads, and each mistake refused by its key path."""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from inference_comparator.config import ConfigError, ModelConfig, load_config, parse_config
from inference_comparator.protocols import Tolerances

GOOD: dict[str, Any] = {
    "maxBufferedBytes": 67108864,
    "maxBodyBytes": 1048576,
    "models": [
        {
            "namespace": "service",
            "model": "iris",
            "protocol": "open-inference-v2",
            "primary": "v1",
            "shadows": ["v3"],
            "windowSeconds": 70,
            "absoluteTolerance": 1e-6,
            "relativeTolerance": 1e-4,
            "minTextSimilarity": 0.9,
            "sample": 1.0,
        },
        {
            "namespace": "service",
            "model": "chat",
            "protocol": "openai",
            "primary": "v2",
            "shadows": ["v3", "v4"],
            "windowSeconds": 310.5,
            "absoluteTolerance": 0,
            "relativeTolerance": 0,
            "minTextSimilarity": 1,
            "sample": 0.05,
        },
    ],
}


def good() -> dict[str, Any]:
    return copy.deepcopy(GOOD)


def test_a_good_config_loads(tmp_path: Path) -> None:
    path = tmp_path / "comparator.json"
    path.write_text(json.dumps(GOOD))
    config = load_config(path)
    assert config.max_buffered_bytes == 67108864
    assert config.max_body_bytes == 1048576
    assert config.models[0] == ModelConfig(
        namespace="service",
        model="iris",
        protocol="open-inference-v2",
        primary="v1",
        shadows=("v3",),
        window_seconds=70.0,
        tolerances=Tolerances(absolute=1e-6, relative=1e-4, min_text_similarity=0.9),
        sample=1.0,
    )
    assert config.model("service", "chat") == config.models[1]
    assert config.models[1].shadows == ("v3", "v4")
    assert config.models[1].sample == 0.05
    assert config.model("service", "other") is None
    assert config.model("other", "iris") is None


def test_no_models_is_a_config() -> None:
    assert parse_config({**good(), "models": []}).models == ()


def _set(path: str, value: Any) -> Callable[[dict[str, Any]], None]:
    def mutate(doc: dict[str, Any]) -> None:
        *parents, last = path.split(".")
        target: Any = doc
        for part in parents:
            target = target[int(part)] if part.isdigit() else target[part]
        target[int(last) if last.isdigit() else last] = value

    return mutate


def _delete(path: str) -> Callable[[dict[str, Any]], None]:
    def mutate(doc: dict[str, Any]) -> None:
        *parents, last = path.split(".")
        target: Any = doc
        for part in parents:
            target = target[int(part)] if part.isdigit() else target[part]
        del target[last]

    return mutate


def _duplicate_model(doc: dict[str, Any]) -> None:
    doc["models"].append({**doc["models"][0], "primary": "v7", "shadows": ["v8"]})


MISTAKES: list[tuple[str, Callable[[dict[str, Any]], None], str]] = [
    ("unknown top-level key", _set("maxBufferedByte", 1), "maxBufferedByte: unknown key"),
    ("unknown model key", _set("models.0.samples", 1.0), "models[0].samples: unknown key"),
    ("missing top-level key", _delete("maxBodyBytes"), "maxBodyBytes: missing"),
    ("missing models", _delete("models"), "models: missing"),
    ("missing model key", _delete("models.1.primary"), "models[1].primary: missing"),
    ("missing tolerance", _delete("models.0.relativeTolerance"), "models[0].relativeTolerance: missing"),
    ("bad protocol", _set("models.0.protocol", "kserve-v1"), "models[0].protocol: must be one of"),
    ("absolute tolerance below 0", _set("models.0.absoluteTolerance", -1e-9), "models[0].absoluteTolerance:"),
    ("relative tolerance below 0", _set("models.1.relativeTolerance", -0.1), "models[1].relativeTolerance:"),
    ("tolerance not a number", _set("models.0.absoluteTolerance", "1e-6"), "models[0].absoluteTolerance:"),
    ("tolerance infinite", _set("models.0.absoluteTolerance", float("inf")), "models[0].absoluteTolerance:"),
    ("sample 0", _set("models.0.sample", 0), "models[0].sample:"),
    ("sample over 1", _set("models.0.sample", 1.01), "models[0].sample:"),
    ("sample below 0", _set("models.0.sample", -0.5), "models[0].sample:"),
    ("sample a boolean", _set("models.0.sample", True), "models[0].sample:"),
    ("similarity over 1", _set("models.1.minTextSimilarity", 1.5), "models[1].minTextSimilarity:"),
    ("window 0", _set("models.0.windowSeconds", 0), "models[0].windowSeconds:"),
    ("shadow equal to the primary", _set("models.1.shadows", ["v3", "v2"]), "models[1].shadows[1]:"),
    ("shadow twice", _set("models.1.shadows", ["v3", "v3"]), "models[1].shadows[1]:"),
    ("no shadows", _set("models.0.shadows", []), "models[0].shadows:"),
    ("shadows not a list", _set("models.0.shadows", "v3"), "models[0].shadows:"),
    ("empty version name", _set("models.0.primary", ""), "models[0].primary:"),
    ("bad namespace", _set("models.0.namespace", "a b"), "models[0].namespace:"),
    ("duplicate model", _duplicate_model, "models[2]: repeats models[0]"),
    ("buffer not an integer", _set("maxBufferedBytes", 1.5), "maxBufferedBytes:"),
    ("buffer 0", _set("maxBufferedBytes", 0), "maxBufferedBytes:"),
    ("body larger than the buffer", _set("maxBodyBytes", 67108865), "maxBodyBytes:"),
    ("models not a list", _set("models", {}), "models: must be a list"),
    ("model not an object", _set("models.0", "iris"), "models[0]: must be an object"),
]


@pytest.mark.parametrize(("mutate", "message"), [(m, msg) for _, m, msg in MISTAKES], ids=[n for n, _, _ in MISTAKES])
def test_each_mistake_is_refused_naming_its_key_path(mutate: Callable[[dict[str, Any]], None], message: str) -> None:
    doc = good()
    mutate(doc)
    with pytest.raises(ConfigError) as error:
        parse_config(doc)
    assert str(error.value).startswith(message)


@pytest.mark.parametrize("sample", [1, 1.0, 1e-6])
def test_sample_bounds(sample: float) -> None:
    doc = good()
    doc["models"][0]["sample"] = sample
    assert parse_config(doc).models[0].sample == sample


def test_top_level_not_an_object() -> None:
    with pytest.raises(ConfigError, match=r"^\(top level\): must be an object"):
        parse_config([GOOD])


def test_file_errors_name_the_file(tmp_path: Path) -> None:
    missing = tmp_path / "absent.json"
    with pytest.raises(ConfigError, match=r"absent\.json: cannot read"):
        load_config(missing)
    broken = tmp_path / "broken.json"
    broken.write_text('{"maxBufferedBytes": ')
    with pytest.raises(ConfigError, match=r"broken\.json: not JSON: .* line 1"):
        load_config(broken)


@pytest.mark.parametrize("name", ["json", "torchserve"])
def test_any_json_is_json_and_its_former_name_torchserve_is_still_read(name: str) -> None:
    doc = good()
    doc["models"][0]["protocol"] = name
    assert parse_config(doc).models[0].protocol == "json"


def test_a_wrong_protocol_is_told_every_name_read() -> None:
    with pytest.raises(ConfigError) as error:
        parse_config(_mutated(_set("models.0.protocol", "kserve-v1")))
    assert str(error.value) == (
        "models[0].protocol: must be one of open-inference-v2, tfserving, json, openai"
        " (or torchserve, json's former name), not 'kserve-v1'"
    )


def _mutated(mutate: Callable[[dict[str, Any]], None]) -> dict[str, Any]:
    doc = good()
    mutate(doc)
    return doc
