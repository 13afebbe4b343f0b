"""Pipeline graphs are checked before anything is registered: every structural mistake is a
config error with its path and an exact message, all reported at once."""

from __future__ import annotations

from typing import Any

import pytest

from inference_platform.config.errors import ConfigError, Problem
from inference_platform.stack.config import StackConfig, parse_stack_config, project_values
from tests.conftest import base_config

PIPELINES = "inference-platform:pipelines"


def step(model: str = "iris", **more: Any) -> dict[str, Any]:
    return {"model": model} | more


def pipeline(nodes: dict[str, Any], **more: Any) -> dict[str, Any]:
    return {"name": "flow", "nodes": nodes} | more


def sequence(*steps: dict[str, Any]) -> dict[str, Any]:
    return {"routerType": "Sequence", "steps": list(steps)}


def parse(*pipelines: dict[str, Any]) -> StackConfig:
    config = base_config()
    config[PIPELINES] = list(pipelines)
    return parse_stack_config(project_values(config))


def problems(*pipelines: dict[str, Any]) -> list[Problem]:
    with pytest.raises(ConfigError) as raised:
        parse(*pipelines)
    return raised.value.problems


def test_a_valid_graph_parses_and_names_its_models_in_order() -> None:
    parsed = parse(
        pipeline(
            {
                "root": sequence(step("churn"), {"node": "rest"}),
                "rest": {"routerType": "Ensemble", "steps": [step("iris"), step("churn")]},
            }
        )
    )

    [flow] = parsed.pipelines
    assert flow.models == ["churn", "iris"]
    assert parsed.call_edges() == [("flow", "churn"), ("flow", "iris")]


def test_the_graph_needs_a_root_node() -> None:
    assert problems(pipeline({"start": sequence(step())})) == [
        Problem("pipelines[0].nodes", "no node named 'root': the router starts every request there")
    ]


def test_a_model_step_names_a_model_of_the_stack() -> None:
    assert problems(pipeline({"root": sequence(step("fraud"))})) == [
        Problem("pipelines[0].nodes.root.steps[0].model", "'fraud' is not a model of this stack")
    ]


def test_a_node_step_names_a_node_of_the_graph() -> None:
    assert problems(pipeline({"root": sequence({"node": "later"})})) == [
        Problem("pipelines[0].nodes.root.steps[0].node", "'later' is not a node of this pipeline")
    ]


def test_a_step_calls_a_model_or_a_node() -> None:
    assert problems(pipeline({"root": sequence({"data": "$request"})})) == [
        Problem(
            "pipelines[0].nodes.root.steps[0]",
            "set model (a model of this stack) or node (another node of this pipeline)",
        )
    ]


def test_a_step_does_not_call_both() -> None:
    nodes = {"root": sequence({"model": "iris", "node": "root"})}

    assert problems(pipeline(nodes)) == [
        Problem("pipelines[0].nodes.root.steps[0]", "a step calls a model or a node, not both")
    ]


def test_node_steps_must_not_go_round_in_a_circle() -> None:
    nodes = {"root": sequence({"node": "a"}), "a": sequence(step(), {"node": "root"})}

    assert problems(pipeline(nodes)) == [
        Problem("pipelines[0].nodes.a.steps[1].node", "nodes go round in a circle: root -> a -> root")
    ]


def test_splitter_weights_add_up_to_100() -> None:
    splitter = {"routerType": "Splitter", "steps": [step(weight=70), step("churn", weight=20)]}

    assert problems(pipeline({"root": splitter})) == [
        Problem("pipelines[0].nodes.root.steps", "Splitter weights add up to 90; they must add up to 100")
    ]


def test_every_splitter_step_has_a_weight() -> None:
    splitter = {"routerType": "Splitter", "steps": [step(weight=100), step("churn")]}

    assert problems(pipeline({"root": splitter})) == [
        Problem("pipelines[0].nodes.root.steps[1].weight", "a Splitter step needs a weight")
    ]


def test_only_splitter_steps_take_a_weight() -> None:
    assert problems(pipeline({"root": sequence(step(weight=100))})) == [
        Problem("pipelines[0].nodes.root.steps[0].weight", "only Splitter steps take a weight, not Sequence")
    ]


def test_switch_steps_have_conditions() -> None:
    switch = {"routerType": "Switch", "steps": [step(condition="inputs"), step("churn")]}

    assert problems(pipeline({"root": switch})) == [
        Problem(
            "pipelines[0].nodes.root.steps[1].condition",
            "a Switch step needs a condition (a GJSON path in the request)",
        )
    ]


@pytest.mark.parametrize(("key", "value"), [("data", "$body"), ("dependency", "Optional"), ("routerType", "Parallel")])
def test_enumerated_keys_take_only_their_values(key: str, value: str) -> None:
    node = sequence(step())
    if key == "routerType":
        node[key] = value
        path = "pipelines[0].nodes.root.routerType"
    else:
        node["steps"][0][key] = value
        path = f"pipelines[0].nodes.root.steps[0].{key}"

    [problem] = problems(pipeline({"root": node}))

    assert problem.path == path
    assert value in problem.message


def test_unknown_keys_are_refused() -> None:
    [problem] = problems(pipeline({"root": sequence(step(serviceUrl="http://x"))}))

    assert problem.path == "pipelines[0].nodes.root.steps[0].serviceUrl"


def test_the_timeout_fits_the_routers_own_limit() -> None:
    assert parse(pipeline({"root": sequence(step())}, timeout="60s")).pipelines[0].timeout == "60s"
    assert problems(pipeline({"root": sequence(step())}, timeout="61s")) == [
        Problem("pipelines[0].timeout", "61s is longer than the router's own limit of 60s")
    ]


def test_a_pipeline_cannot_take_a_models_name_or_object_names() -> None:
    assert problems(pipeline({"root": sequence(step())}, name="churn")) == [
        Problem("pipelines[0].name", "its objects would be named 'churn', like those of models[1].name: rename one")
    ]
    assert problems(pipeline({"root": sequence(step())}, name="iris-v1")) == [
        Problem(
            "pipelines[0].name",
            "its objects would be named 'iris-v1', like those of models[0].versions[0].name: rename one",
        )
    ]


def test_a_router_has_no_gpu_to_scale_on() -> None:
    scaling = {"minReplicas": 1, "maxReplicas": 3, "gpuUtilization": 50}

    assert problems(pipeline({"root": sequence(step())}, autoscaling=scaling)) == [
        Problem("pipelines[0].autoscaling.gpuUtilization", "a router has no GPU: scale on requestsPerSecond or CPU")
    ]


def test_every_problem_is_reported_at_once() -> None:
    nodes = {
        "root": sequence(step("fraud"), {"node": "missing"}),
        "split": {"routerType": "Splitter", "steps": [step(weight=50)]},
    }

    assert {p.path for p in problems(pipeline(nodes))} == {
        "pipelines[0].nodes.split.steps",
        "pipelines[0].nodes.root.steps[1].node",
        # The stack's check of model steps runs too, though the pipeline's own checks failed.
        "pipelines[0].nodes.root.steps[0].model",
    }


@pytest.mark.parametrize(("per_try", "valid"), [("30s", True), ("30000ms", True), ("30001ms", False), ("0.5m", True)])
def test_a_per_try_timeout_may_equal_the_timeout_in_any_unit(per_try: str, valid: bool) -> None:
    flow = pipeline({"root": sequence(step())}, timeout="30s", retries={"perTryTimeout": per_try})

    if valid:
        assert parse(flow).pipelines[0].retries.per_try_timeout == per_try
    else:
        assert problems(flow) == [
            Problem("pipelines[0].retries.perTryTimeout", f"{per_try} is longer than the pipeline's timeout (30s)")
        ]


def test_the_reference_says_what_a_pipelines_min_replicas_0_gets() -> None:
    """docs/config-reference.md said 0 lets a pipeline sleep; it is refused, and the reference
    (generated from the field's description) now says so in the refusal's words."""
    from inference_platform.cli.config_reference import reference_markdown
    from inference_platform.serving.pipeline.spec import ROUTER_DOES_NOT_SLEEP

    row = next(line for line in reference_markdown().splitlines() if "`pipelines[].autoscaling.minReplicas`" in line)
    assert "does not sleep" in row
    assert "lets a version sleep" not in row
    found = problems(pipeline({"root": sequence(step())}, autoscaling={"minReplicas": 0, "maxReplicas": 2}))
    assert [(p.path.split(".", 1)[-1], p.message) for p in found] == [
        ("autoscaling.minReplicas", ROUTER_DOES_NOT_SLEEP)
    ]
