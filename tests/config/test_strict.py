"""Strict scalars (config/base.py ConfigModel): a boolean is never a number or a string, a string
never a number; durations take their documented forms, with a hint for a bare number."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from inference_platform.cli.main import main
from inference_platform.config.errors import INCOMPLETE, ConfigError
from inference_platform.serving import InferenceServiceArgs
from tests.conftest import base_config, write_stack_file


def render_errors(tmp_path: Path, capsys: pytest.CaptureFixture[str], config: dict[str, Any]) -> list[str]:
    """The problems a render of `config` reports (exit 2, nothing written), without their positions."""
    path = write_stack_file(tmp_path / "Pulumi.s.yaml", config)
    out = tmp_path / "out"
    assert main(["render", "--stack", "s", "--config", str(path), "--out", str(out)]) == 2
    assert not out.exists()
    lines = [line for line in capsys.readouterr().err.splitlines()[1:] if line != f"  {INCOMPLETE}"]
    assert all(line.startswith(f"  {path}:") for line in lines), lines
    return [line.split(": ", 1)[1] for line in lines]


def test_a_boolean_weight_is_refused_not_read_as_1(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    config = base_config()
    config["inference-platform:models"][1]["versions"][0]["weight"] = True
    assert render_errors(tmp_path, capsys, config) == [
        "models[1] (churn).versions[0] (v1).weight: must be a whole number, not true"
    ]


def test_a_string_is_not_a_number_nor_a_boolean_a_string(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    config = base_config()
    churn = config["inference-platform:models"][1]
    churn["replicas"] = "2"
    churn["versions"][0]["name"] = False
    assert render_errors(tmp_path, capsys, config) == [
        "models[1] (churn).replicas: must be a whole number, not the string '2'",
        "models[1] (churn).versions[0].name: must be a string, not false",
    ]


def test_a_bare_number_for_a_duration_says_to_write_its_unit(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = base_config()
    config["inference-platform:models"][1]["timeout"] = 60
    assert render_errors(tmp_path, capsys, config) == [
        "models[1] (churn).timeout: 60 is a bare number: write a duration with its unit (60s, 60ms, 60m)"
    ]


def test_quantities_keep_taking_numbers_and_floats_whole_numbers(tmp_path: Path) -> None:
    config = base_config()
    churn = config["inference-platform:models"][1]
    churn["resources"] = {"requests": {"cpu": 2, "memory": "4Gi"}, "limits": {"cpu": 2.5, "memory": "4Gi"}}
    config["inference-platform:models"][0]["versions"][2]["mirrorPercent"] = 50  # a float field, a whole number
    path = write_stack_file(tmp_path / "Pulumi.s.yaml", config)
    assert main(["render", "--stack", "s", "--config", str(path), "--out", str(tmp_path / "out")]) == 0


def test_a_library_user_gets_the_same_refusal_from_python_values() -> None:
    model = {
        "name": "churn",
        "runtime": "mlserver",
        "versions": [{"name": "v1", "modelUri": "pvc://m/1", "weight": True}],
    }
    with pytest.raises(ConfigError) as raised:
        InferenceServiceArgs.parse({"model": model, "namespace": "service", "domain": "example.com"})
    ((path, message),) = [(p.path, p.message) for p in raised.value.problems]
    assert path.endswith("versions[0] (v1).weight") or path == "model.versions[0].weight"
    assert message == "must be a whole number, not true"
