"""Declared calls between models: every mistake is a config error with its path, before anything
is registered."""

from __future__ import annotations

from typing import Any

import pytest

from inference_platform.config.base import find_cycles
from inference_platform.config.errors import ConfigError, Problem
from inference_platform.stack.config import parse_stack_config, project_values
from tests.conftest import base_config

MODELS = "inference-platform:models"


def with_models(*extra: dict[str, Any], iris_calls: list[str] | None = None) -> dict[str, Any]:
    config = base_config()
    config[MODELS] += list(extra)
    if iris_calls is not None:
        config[MODELS][0]["calls"] = iris_calls
    return config


def model(name: str, calls: list[str]) -> dict[str, Any]:
    versions = [{"name": "v1", "modelUri": f"pvc://models/{name}/v1", "weight": 100}]
    return {"name": name, "runtime": "mlserver", "versions": versions, "calls": calls}


def problems(config: dict[str, Any]) -> list[Problem]:
    with pytest.raises(ConfigError) as raised:
        parse_stack_config(project_values(config))
    return raised.value.problems


def test_declared_calls_are_valid_and_become_edges() -> None:
    config = with_models(model("ranker", ["churn", "iris"]), iris_calls=["churn"])

    parsed = parse_stack_config(project_values(config))

    assert parsed.call_edges() == [("iris", "churn"), ("ranker", "churn"), ("ranker", "iris")]


def test_a_callee_must_be_a_model_of_the_stack() -> None:
    assert problems(with_models(iris_calls=["churn", "fraud"])) == [
        Problem("models[0].calls[1]", "'fraud' is not a model of this stack")
    ]


def test_a_model_cannot_call_itself() -> None:
    assert problems(with_models(iris_calls=["iris"])) == [Problem("models[0].calls[0]", "a model cannot call itself")]


def test_a_callee_is_listed_once() -> None:
    assert problems(with_models(iris_calls=["churn", "churn"])) == [
        Problem("models[0].calls[1]", "callee 'churn' is defined twice (also calls[0])")
    ]


def test_calls_in_a_circle_are_refused_where_the_circle_closes() -> None:
    config = with_models(model("ranker", ["iris"]), iris_calls=["churn"])
    config[MODELS][1]["calls"] = ["ranker"]

    assert problems(config) == [
        Problem("models[2].calls[0]", "calls go round in a circle: iris -> churn -> ranker -> iris")
    ]


def test_a_model_named_like_another_models_mesh_route_is_refused() -> None:
    config = with_models(model("iris-mesh", []))

    assert problems(config) == [
        Problem(
            "models[2].name",
            "its objects would be named 'iris-mesh', like those of models[0].name: rename one",
        )
    ]


@pytest.mark.parametrize(
    ("calls", "cycles"),
    [
        ({"a": ["b"], "b": ["c"], "c": []}, []),
        ({"a": ["b", "c"], "b": ["c"], "c": []}, []),  # a diamond is not a circle
        ({"a": ["b"], "b": ["a"]}, [["a", "b", "a"]]),
        ({"a": ["b", "c"], "b": ["a"], "c": ["a"]}, [["a", "b", "a"], ["a", "c", "a"]]),
        ({"x": ["a"], "a": ["b"], "b": ["a"]}, [["a", "b", "a"]]),
    ],
)
def test_find_cycles_finds_each_circle_once(calls: dict[str, list[str]], cycles: list[list[str]]) -> None:
    assert find_cycles(calls) == cycles


def test_a_long_chain_of_calls_does_not_recurse() -> None:
    chain = {f"m{i}": [f"m{i + 1}"] for i in range(5000)}

    assert find_cycles(chain) == []
    assert find_cycles(chain | {"m5000": ["m0"]}) == [[f"m{i}" for i in range(5001)] + ["m0"]]
