"""A library program's config mistakes (config/base.py) name the model and its items as a stack
file's report does, at the program's file:line."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

from inference_platform.config.base import validation_config_error
from inference_platform.config.errors import ConfigError
from inference_platform.serving import InferenceServiceArgs
from inference_platform.stack.config import UNIONS

HERE = Path(__file__).name


def model(name: str, weight_key: str) -> dict[str, Any]:
    versions = [
        {"name": "v1", "modelUri": f"pvc://models/{name}/v1", "weight": 100},
        {"name": "v2", "modelUri": f"pvc://models/{name}/v2", weight_key: 0},
    ]
    return {"name": name, "runtime": "mlserver", "versions": versions}


def test_a_typo_in_a_model_built_in_a_loop_names_the_model_and_the_version() -> None:
    reports = []
    for name, key in (("iris", "weight"), ("fraud", "wieght")):
        try:
            InferenceServiceArgs.parse({"model": model(name, key), "namespace": "service", "domain": "example.com"})
            line = None
        except ConfigError as error:
            line = sys._getframe().f_lineno - 3
            reports.append((line, [str(problem) for problem in error.problems]))
    ((line, problems),) = reports
    assert problems == [
        f"{Path(__file__).relative_to(Path.cwd()) if Path(__file__).is_relative_to(Path.cwd()) else __file__}:{line}: "
        "model (fraud).versions[1] (v2).wieght: unknown setting 'wieght': did you mean 'weight'?"
    ]


def test_python_names_are_followed_too() -> None:
    """Keys written as Python names are reported as written."""
    data = {
        "model": model("fraud", "wieght"),
        "namespace": "service",
        "domain": "example.com",
        "gpu_nodes": {"cout": 1},
    }
    with pytest.raises(ConfigError) as raised:
        InferenceServiceArgs.parse(data)
    assert [problem.path for problem in raised.value.problems] == [
        "gpu_nodes.cout",
        "model (fraud).versions[1] (v2).wieght",
    ]


def test_a_constructors_error_that_escapes_names_the_model_too() -> None:
    with pytest.raises(ValidationError) as raised:
        InferenceServiceArgs(model=model("fraud", "wieght"), namespace="service", domain="example.com")  # type: ignore[arg-type]
    error = validation_config_error(raised.value, UNIONS, raised.value.__traceback__)
    assert [problem.path for problem in error.problems] == ["model (fraud).versions[1] (v2).wieght"]
    assert error.problems[0].position.endswith(f"{HERE}:{raised.traceback[0].lineno + 1}")
