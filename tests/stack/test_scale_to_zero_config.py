"""Scale to zero in a stack file: what it needs of the platform, and every mistake refused with its
path and exact message before anything is registered (KEDA's own admission webhook fails open)."""

from __future__ import annotations

from typing import Any

import pytest

from inference_platform.config.errors import ConfigError, Problem
from inference_platform.stack.config import parse_stack_config, project_values
from tests.conftest import base_config

MODELS = "inference-platform:models"
PLATFORM = "inference-platform:platform"
SLEEPS = {"minReplicas": 0, "maxReplicas": 3}


def config(autoscaler: str = "keda", **iris: Any) -> dict[str, Any]:
    """The base stack with iris's settings changed, scaling with `autoscaler`."""
    stack = base_config()
    stack[PLATFORM] = {"autoscaler": autoscaler}
    stack[MODELS][0] |= iris
    return stack


def problems(stack: dict[str, Any]) -> list[Problem]:
    with pytest.raises(ConfigError) as raised:
        parse_stack_config(project_values(stack))
    return raised.value.problems


def test_a_sleeping_model_with_keda_is_valid_and_brings_the_add_on() -> None:
    parsed = parse_stack_config(project_values(config(autoscaling=SLEEPS)))
    assert parsed.http_add_on is not None
    assert parsed.keda is not None
    assert parsed.keda.http_add_on == parsed.http_add_on
    assert parsed.keda.prometheus_url == "http://prometheus-server.monitoring.svc:80"
    assert parse_stack_config(project_values(config(autoscaling={"maxReplicas": 3}))).http_add_on is None


def test_keda_needs_no_adapter_and_hpa_keeps_it() -> None:
    scaling = {"maxReplicas": 3, "requestsPerSecond": 5}
    assert not parse_stack_config(project_values(config(autoscaling=scaling))).platform.installs_prometheus_adapter
    assert parse_stack_config(project_values(config("hpa", autoscaling=scaling))).platform.installs_prometheus_adapter
    explicit = config(autoscaling=scaling)
    explicit[PLATFORM]["prometheusAdapter"] = {"enabled": True}
    assert parse_stack_config(project_values(explicit)).platform.installs_prometheus_adapter


def test_sleeping_needs_keda_naming_both_settings() -> None:
    assert problems(config("hpa", autoscaling=SLEEPS)) == [
        Problem(
            "models[0].autoscaling.minReplicas",
            "0 (sleeping at zero replicas) needs KEDA: set platform.autoscaler to keda",
        )
    ]


def test_sleeping_with_fixed_replicas_is_refused() -> None:
    assert problems(config(autoscaling=SLEEPS, replicas=2)) == [
        Problem("models[0].replicas", "set replicas or autoscaling, not both: autoscaling's bounds decide replicas")
    ]


@pytest.mark.parametrize(
    ("idle", "message"),
    [
        ("30s", "30s is under a minute: versions would sleep between requests"),
        ("59999ms", "59999ms is under a minute: versions would sleep between requests"),
        ("25h", "'25h' is longer than a day"),
    ],
)
def test_idle_after_is_a_minute_to_a_day(idle: str, message: str) -> None:
    assert problems(config(autoscaling=SLEEPS | {"idleAfter": idle})) == [
        Problem("models[0].autoscaling.idleAfter", message)
    ]


@pytest.mark.parametrize("idle", ["1m", "60s", "24h"])
def test_idle_after_at_its_bounds_is_valid(idle: str) -> None:
    parse_stack_config(project_values(config(autoscaling=SLEEPS | {"idleAfter": idle})))


@pytest.mark.parametrize(("key", "value"), [("wake", "respond"), ("idleAfter", "20m")])
def test_sleep_settings_without_sleeping_are_refused(key: str, value: str) -> None:
    assert problems(config(autoscaling={"maxReplicas": 3, key: value})) == [
        Problem(
            f"models[0].autoscaling.{key}",
            "only for a model that scales to zero: set minReplicas to 0, or drop this",
        )
    ]


def test_a_pipeline_may_not_depend_hard_on_a_sleeping_model() -> None:
    stack = config(autoscaling=SLEEPS)
    stack["inference-platform:pipelines"] = [
        {
            "name": "ab",
            "nodes": {
                "root": {
                    "routerType": "Sequence",
                    "steps": [{"model": "churn"}, {"model": "iris", "data": "$response", "dependency": "Hard"}],
                }
            },
        }
    ]
    assert problems(stack) == [
        Problem(
            "pipelines[0].nodes.root.steps[1].dependency",
            "'iris' sleeps at zero replicas, and while it wakes its requests wait or get 503, past the router's 60s "
            "cut-off for a cold start of minutes: a Hard step would fail the pipeline on every cold start; make it "
            "Soft, or keep the model awake (minReplicas 1)",
        )
    ]
    stack["inference-platform:pipelines"][0]["nodes"]["root"]["steps"][1]["dependency"] = "Soft"
    parse_stack_config(project_values(stack))


def test_a_pipelines_router_does_not_sleep() -> None:
    stack = config()
    stack["inference-platform:pipelines"] = [
        {
            "name": "ab",
            "nodes": {"root": {"routerType": "Splitter", "steps": [{"model": "churn", "weight": 100}]}},
            "autoscaling": SLEEPS | {"requestsPerSecond": 10},
        }
    ]
    assert problems(stack) == [
        Problem("pipelines[0].autoscaling.minReplicas", "a pipeline's router does not sleep: set 1 or more")
    ]


def test_keda_reads_prometheus() -> None:
    stack = config(autoscaling={"maxReplicas": 3})
    stack[PLATFORM]["prometheus"] = {"enabled": False}
    assert problems(stack) == [Problem("platform.autoscaler", "KEDA's triggers read Prometheus: enable prometheus too")]


def test_names_past_63_characters_are_refused_before_keda_would() -> None:
    """A ScaledObject, its HPA and InterceptorRoute take the Deployment's name, a label value for KEDA."""
    parse_stack_config(project_values(config(name="m" * 60, autoscaling=SLEEPS)))  # 63 with "-v1"
    assert problems(config(name="m" * 61, autoscaling=SLEEPS)) == [
        Problem(
            f"models[0].versions[{i}].name",
            f"'{'m' * 61}-v{i + 1}', the name of this version's Deployment and Service, is 64 characters; "
            "Kubernetes allows 63: shorten the model or version name",
        )
        for i in range(3)
    ]


@pytest.mark.parametrize("wake", ["hold", "respond"])
def test_wake_is_hold_or_respond(wake: str) -> None:
    parse_stack_config(project_values(config(autoscaling=SLEEPS | {"wake": wake})))
    assert problems(config(autoscaling=SLEEPS | {"wake": "queue"})) == [
        Problem("models[0].autoscaling.wake", "unknown value 'queue': use one of hold, respond")
    ]


def test_an_unknown_autoscaler_is_refused() -> None:
    assert problems(config("knative")) == [
        Problem("platform.autoscaler", "unknown value 'knative': use one of hpa, keda")
    ]
