"""The repository's own stacks meet the policy pack (its checks are plain functions: policies/rules.py)."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

import pytest

from inference_platform.cli.render import RenderResult, run_program
from inference_platform.cli.stack_file import read_stack_file
from inference_platform.stack.config import parse_stack_config, project_values
from tests.conftest import EXAMPLE_STACKS, ROOT, STACKS, model_cache_config, stack_file, write_stack_file


def load_rules() -> ModuleType:
    spec = importlib.util.spec_from_file_location("policy_rules", ROOT / "policies" / "rules.py")
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


rules = load_rules()
RESOURCE_CHECKS = [
    rules.unpinned_images,
    rules.missing_requests_and_limits,
    rules.gpu_without_gpu_nodes,
    rules.traffic_weights,
]


# Beside the repository's stacks, the generated stack with the node-local model cache on.
GENERATED = {"model-cache": model_cache_config}


def config_path(stack: str, directory: Path) -> Path:
    if stack in GENERATED:
        return write_stack_file(directory / f"Pulumi.{stack}.yaml", GENERATED[stack]())
    return stack_file(stack)


@pytest.fixture(scope="module", params=[*STACKS, *EXAMPLE_STACKS, *GENERATED])
def rendered(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> tuple[str, RenderResult]:
    stack: str = request.param
    path = config_path(stack, tmp_path_factory.mktemp(stack))
    return stack, run_program(stack, read_stack_file(path))


def test_no_resource_violates_a_mandatory_policy(rendered: tuple[str, RenderResult]) -> None:
    _, result = rendered
    violations = [
        f"{r.type} {r.name}: {message}"
        for r in result.manifests
        for check in RESOURCE_CHECKS
        for message in check(r.type, r.inputs)
    ]
    assert violations == []


def test_model_namespaces_have_injection(rendered: tuple[str, RenderResult]) -> None:
    _, result = rendered
    assert rules.namespaces_without_injection((r.type, r.inputs) for r in result.manifests) == []


def test_the_checks_see_the_stacks_model_workloads(rendered: tuple[str, RenderResult], tmp_path: Path) -> None:
    """A Deployment per version of every model served by single pods, at least: the checks above looked
    at them (the pack's rules see Deployments; a multi-node model's versions are LeaderWorkerSets)."""
    stack, result = rendered
    config = parse_stack_config(project_values(read_stack_file(config_path(stack, tmp_path)).config))
    versions = sum(len(model.versions) for model in config.models if model.group_size == 1)
    assert versions >= 1
    assert sum(rules.is_model_workload(r.type, r.inputs) for r in result.manifests) >= versions


def test_production_meets_the_advisory_policies_too() -> None:
    result = run_program("prod", read_stack_file(ROOT / "Pulumi.prod.yaml"))
    resources = [(r.type, r.inputs) for r in result.manifests]
    assert rules.stack_of(result.manifests[0].urn) == "prod"
    assert rules.too_few_replicas(resources) == []
    assert rules.without_disruption_budget(resources) == []
