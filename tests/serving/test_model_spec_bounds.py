"""Boundaries of a model's settings: valid exactly where docs/serving.md says they are, an error just past.

Each case is a pair: the setting at its limit (no problems), and one step over it (exactly one
problem, at the setting's path). The config is the shared base stack with iris (models[0]) changed.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from inference_platform.config.errors import ConfigError
from inference_platform.stack.config import parse_stack_config, project_values
from tests.conftest import base_config

Model = dict[str, Any]


def problems(change: Callable[[Model], Any]) -> list[tuple[str, str]]:
    config = base_config()
    change(config["inference-platform:models"][0])
    try:
        parse_stack_config(project_values(config))
    except ConfigError as error:
        return [(problem.path, problem.message) for problem in error.problems]
    return []


def timeouts(timeout: str, per_try: str) -> Callable[[Model], None]:
    return lambda model: model.update(timeout=timeout, retries={"perTryTimeout": per_try})


def mirror(percent: float) -> Callable[[Model], None]:
    return lambda model: model["versions"][2].update(mirrorPercent=percent)


def weights(first: int, second: int) -> Callable[[Model], None]:
    def change(model: Model) -> None:
        model["versions"][0]["weight"], model["versions"][1]["weight"] = first, second

    return change


def transformer_port(port: int) -> Callable[[Model], None]:
    return lambda model: model.update(transformer={"image": "registry.example.com/t:1", "port": port})


def version_name(length: int) -> Callable[[Model], None]:
    """The version name that makes `iris-<version>` (its Deployment and Service) this long."""
    return lambda model: model["versions"][0].update(name="v" * (length - len("iris-")))


# (id, at the limit, just past it, the path of the problem, words in its message)
BOUNDS: list[tuple[str, Callable[[Model], Any], Callable[[Model], Any], str, str]] = [
    (
        "per-try-timeout-equal-to-timeout",
        timeouts("60s", "60s"),
        timeouts("60s", "60001ms"),
        "models[0].retries.perTryTimeout",
        "60001ms is longer than the model's timeout (60s)",
    ),
    (
        "per-try-timeout-equal-in-other-units",
        timeouts("1m30s", "90000ms"),
        timeouts("1m30s", "90000.000001ms"),
        "models[0].retries.perTryTimeout",
        "is longer than the model's timeout (1m30s)",
    ),
    # 102 * 0.001 and 0.102 are different floats: the same time must still be equal.
    (
        "per-try-timeout-equal-as-milliseconds",
        timeouts("0.102s", "102ms"),
        timeouts("0.102s", "0.102000001s"),
        "models[0].retries.perTryTimeout",
        "0.102000001s is longer than the model's timeout (0.102s)",
    ),
    (
        "per-try-timeout-equal-as-seconds",
        timeouts("9ms", "0.009s"),
        timeouts("9ms", "9000001ns"),
        "models[0].retries.perTryTimeout",
        "9000001ns is longer than the model's timeout (9ms)",
    ),
    (
        "timeout-of-a-day",
        lambda model: model.update(timeout="24h"),
        lambda model: model.update(timeout="24h1ms"),
        "models[0].timeout",
        "'24h1ms' is longer than a day",
    ),
    (
        "timeout-of-a-day-in-milliseconds",
        lambda model: model.update(timeout="86400000ms"),
        lambda model: model.update(timeout="86400001ms"),
        "models[0].timeout",
        "'86400001ms' is longer than a day",
    ),
    ("mirror-of-everything", mirror(100), mirror(100.001), "models[0].versions[2].mirrorPercent", "at most"),
    ("mirror-of-a-sliver", mirror(0.001), mirror(0), "models[0].versions[2].mirrorPercent", "more than 0"),
    (
        "an-idle-live-version",
        weights(100, 0),
        weights(100, -1),
        "models[0].versions[1].weight",
        "at least 0",
    ),
    (
        "name-of-63-characters",
        version_name(63),
        version_name(64),
        "models[0].versions[0].name",
        "is 64 characters; Kubernetes allows 63",
    ),
    (
        "transformer-port-below-istio",
        transformer_port(14999),
        transformer_port(15000),
        "models[0].transformer.port",
        "15000 is taken in the pod",
    ),
    (
        "transformer-port-above-istio",
        transformer_port(15100),
        transformer_port(15099),
        "models[0].transformer.port",
        "15099 is taken in the pod",
    ),
    (
        "transformer-port-highest",
        transformer_port(65535),
        transformer_port(65536),
        "models[0].transformer.port",
        "at most 65535",
    ),
    (
        "retry-attempts",
        lambda model: model.update(retries={"attempts": 10}),
        lambda model: model.update(retries={"attempts": 11}),
        "models[0].retries.attempts",
        "at most 10",
    ),
    (
        "replicas",
        lambda model: model.update(replicas=1000),
        lambda model: model.update(replicas=1001),
        "models[0].replicas",
        "at most 1000",
    ),
    (
        "autoscaling-equal-bounds",
        lambda model: model.update(autoscaling={"minReplicas": 3, "maxReplicas": 3}),
        lambda model: model.update(autoscaling={"minReplicas": 4, "maxReplicas": 3}),
        "models[0].autoscaling.minReplicas",
        "4 is more than maxReplicas (3)",
    ),
    (
        "autoscaling-lowest-request-rate",
        lambda model: model.update(autoscaling={"maxReplicas": 3, "requestsPerSecond": 0.001}),
        lambda model: model.update(autoscaling={"maxReplicas": 3, "requestsPerSecond": 0.000999}),
        "models[0].autoscaling.requestsPerSecond",
        "at least 0.001",
    ),
]


@pytest.mark.parametrize(
    ("at_limit", "past_limit", "path", "words"), [b[1:] for b in BOUNDS], ids=[b[0] for b in BOUNDS]
)
def test_valid_at_the_limit_and_an_error_just_past_it(
    at_limit: Callable[[Model], Any], past_limit: Callable[[Model], Any], path: str, words: str
) -> None:
    assert problems(at_limit) == []

    ((found_path, message),) = problems(past_limit)
    assert found_path == path
    assert words in message
