"""Problems keep their paths as keys and indexes, so a stack file's reader can find them in the file."""

from __future__ import annotations

import pytest

from inference_platform.config.errors import ConfigError, Problem, format_path, parse_path
from inference_platform.stack.config import parse_stack_config


@pytest.mark.parametrize(
    "loc",
    [
        ("models", 0, "versions", 12, "weight"),
        ("pipelines", 3, "nodes", "root", "steps", 0, "model"),
        ("platform", "gpuNodes"),
        ("domain",),
        (),
    ],
)
def test_parse_path_undoes_format_path(loc: tuple[int | str, ...]) -> None:
    assert parse_path(format_path(loc)) == loc


def test_every_problem_of_a_validation_keeps_its_keys() -> None:
    """Field errors (pydantic's own paths) and cross-field ones (paths the validators write) alike."""
    models = [
        {"name": "iris", "runtime": "mlserver", "replicas": "lots", "versions": [{"name": "v1", "weight": 100}]},
        {"name": "fraud", "runtime": "mlserver", "versions": [{"name": "v1", "modelUri": "pvc://m/1", "weight": 5}]},
    ]
    with pytest.raises(ConfigError) as raised:
        parse_stack_config({"domain": "models.example.com", "models": models})

    assert [(problem.path, problem.loc) for problem in raised.value.problems] == [
        ("models[0].replicas", ("models", 0, "replicas")),
        ("models[0].versions[0].modelUri", ("models", 0, "versions", 0, "modelUri")),
        ("models[1].versions", ("models", 1, "versions")),
    ]


def test_a_problem_with_a_position_starts_with_it() -> None:
    problem = Problem("models[0].replicas", "must be at least 1", position="Pulumi.prod.yaml:7:7")

    assert str(problem) == "Pulumi.prod.yaml:7:7: models[0].replicas: must be at least 1"
    assert problem.keys == ("models", 0, "replicas")
    assert str(Problem("models[0].replicas", "must be at least 1")) == "models[0].replicas: must be at least 1"
