"""The registry (stack/platform_components.py) is the one place per chart component: every chart
component the library has is one entry, a stack registers exactly the entries it installs, and
its closed platform network covers exactly their charts' namespaces. Read from the real program
run under mocks for every stack the cluster tests render, never from a list typed here again.
And every component the library has is built the same way, `(name, args, opts)`."""

from __future__ import annotations

import importlib
import inspect
import pkgutil

import pulumi
import pytest

import inference_platform
from inference_platform import pins
from inference_platform.cli.render import Registration, RenderResult, run_program
from inference_platform.cli.stack_file import read_stack_file
from inference_platform.platform import helm
from inference_platform.platform.helm import BUILT_IN_NAMESPACES
from inference_platform.platform.network import PlatformNetwork
from inference_platform.serving.inference_service import InferenceService
from inference_platform.stack.config import StackConfig, parse_stack_config, project_values
from inference_platform.stack.platform_components import COMPONENTS, installed
from tests.stacks.conftest import CLUSTER_STACKS, stack_config_path

CHART_TYPES = ("kubernetes:helm.sh/v4:Chart", "kubernetes:helm.sh/v3:Release")
PLATFORM_TYPE = "inference-platform:platform:"


def components_in(package: str) -> list[type[pulumi.ComponentResource]]:
    """Every ComponentResource subclass defined in `package`'s modules."""
    root = importlib.import_module(package)
    modules = [root] + [
        importlib.import_module(info.name) for info in pkgutil.walk_packages(root.__path__, f"{package}.")
    ]
    return sorted(
        {
            value
            for module in modules
            for value in vars(module).values()
            if inspect.isclass(value)
            and issubclass(value, pulumi.ComponentResource)
            and value.__module__.startswith(package)
        },
        key=lambda c: c.__qualname__,
    )


def registered(result: RenderResult, type_prefix: str) -> dict[str, Registration]:
    return {r.urn: r for r in result.registrations if r.type.startswith(type_prefix)}


@pytest.fixture(scope="module", params=CLUSTER_STACKS)
def run(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> tuple[StackConfig, RenderResult]:
    stack: str = request.param
    path = stack_config_path(stack, tmp_path_factory.mktemp(stack))
    stack_file = read_stack_file(path)
    return parse_stack_config(project_values(stack_file.config)), run_program(stack, stack_file)


def chart_owners(result: RenderResult) -> dict[str, set[str]]:
    """Per platform component (`Type::name`), the namespaces its charts install into."""
    components = registered(result, PLATFORM_TYPE)
    owners: dict[str, set[str]] = {}
    for chart in result.registrations:
        if chart.type in CHART_TYPES and chart.parent in components:
            owner = components[chart.parent]
            owners.setdefault(f"{owner.type.removeprefix(PLATFORM_TYPE)}::{owner.name}", set()).add(
                chart.inputs["namespace"]
            )
    return owners


def own_namespaces(result: RenderResult) -> set[str]:
    """The namespaces a platform component of objects of its own makes for them (the model cache's)."""
    owners = result.component_labels()
    charts = set().union(*chart_owners(result).values())
    return {
        r.inputs["metadata"]["name"]
        for r in result.manifests
        if r.inputs["kind"] == "Namespace" and owners[r.urn].startswith(PLATFORM_TYPE)
    } - charts


def test_every_other_chart_is_a_models_inference_pool_in_the_models_namespace(
    run: tuple[StackConfig, RenderResult],
) -> None:
    """Charts outside the platform's components are a model's own: each version's inference pool and
    its picker (routing: inference-pool), in the models' namespace, which the models' policies close."""
    config, result = run
    components = registered(result, PLATFORM_TYPE)
    by_urn = {r.urn: r for r in result.registrations}
    others = [r for r in result.registrations if r.type in CHART_TYPES and r.parent not in components]
    pooled = {f"{m.name}-{v.name}" for m in config.models if m.routed_by_pool for v in m.versions}
    assert {r.inputs["name"] for r in others} == pooled
    for chart in others:
        assert by_urn[chart.parent].type == InferenceService.TYPE
        assert (chart.inputs["chart"], chart.inputs["namespace"]) == (pins.INFERENCE_POOL.reference, config.namespace)


def installs_a_chart(component: type[pulumi.ComponentResource]) -> bool:
    """Whether the component's constructor calls helm.py's chart() or release()."""
    names = component.__init__.__code__.co_names
    return any(getattr(helm, name).__name__ in names for name in ("chart", "release"))


def registers_objects(component: type[pulumi.ComponentResource]) -> bool:
    """Whether the constructor registers Kubernetes objects built as data (kube.py's register)."""
    return "register" in component.__init__.__code__.co_names


def test_every_chart_component_is_one_entry() -> None:
    """Each component class under platform/ that installs a Helm chart, or deploys objects of its
    own (HAMi's Ascend device plugin), is a registry entry, once; the platform network, built by
    the platform layer from every entry's edges, is none."""
    entries = [entry.component for entry in COMPONENTS]
    assert len(entries) == len(set(entries))
    assert len({entry.name for entry in COMPONENTS}) == len(COMPONENTS)
    found = components_in("inference_platform.platform")
    deploying = {c for c in found if installs_a_chart(c) or registers_objects(c)} - {PlatformNetwork}
    assert set(entries) == deploying


def test_the_components_owning_charts_are_the_entries(run: tuple[StackConfig, RenderResult]) -> None:
    """What a stack registers under its platform components is what the registry says it installs:
    the same components under the same names, and every chart's owner among them."""
    config, result = run
    expected = {f"{entry.component.__name__}::{entry.name}" for entry in installed(config)}
    components = {f"{r.type.removeprefix(PLATFORM_TYPE)}::{r.name}" for r in registered(result, PLATFORM_TYPE).values()}
    assert components - {"PlatformNetwork::platform-network"} == expected
    charted = {f"{e.component.__name__}::{e.name}" for e in installed(config) if installs_a_chart(e.component)}
    assert set(chart_owners(result)) == charted
    # A component of objects of its own puts them in installed charts' namespaces, which the
    # closed network covers (the Ascend device plugin: HAMi's), or in one it makes (the model cache).
    owners = result.component_labels()
    charts = set().union(*chart_owners(result).values()) | own_namespaces(result)
    for entry in installed(config):
        if installs_a_chart(entry.component):
            continue
        label = f"{PLATFORM_TYPE}{entry.component.__name__}::{entry.name}"
        namespaces = {r.inputs["metadata"].get("namespace") for r in result.manifests if owners[r.urn] == label}
        assert namespaces - {None} <= charts, entry.name


def test_the_closed_network_covers_exactly_the_installed_charts_namespaces(
    run: tuple[StackConfig, RenderResult],
) -> None:
    """The default denies the rendered platform network writes are in the namespaces of the
    installed components' charts and those the components of objects of their own make (less the
    cluster's own and the models'): none missing, none extra."""
    config, result = run
    if not config.platform.network.closed:
        pytest.skip("the stack leaves the platform's namespaces open")
    network = next(r for r in result.registrations if r.type == f"{PLATFORM_TYPE}PlatformNetwork")
    policies = [
        r.inputs["metadata"]
        for r in result.registrations
        if r.parent == network.urn and r.type == "kubernetes:networking.k8s.io/v1:NetworkPolicy"
    ]
    denied = {p["namespace"] for p in policies if p["name"] == "default-deny"}
    charts = set().union(*chart_owners(result).values()) | own_namespaces(result)
    assert denied == charts - set(BUILT_IN_NAMESPACES) - {config.namespace}
    # And no policy of a pod group outside those namespaces (kube-system keeps groups of its own).
    assert {p["namespace"] for p in policies} <= charts


@pytest.mark.parametrize("package", ["platform", "serving", "stack", "provider"])
def test_every_component_is_built_from_name_args_and_opts(package: str) -> None:
    """One constructor shape for every component of the library: `(name, args, opts)`."""
    found = components_in(f"{inference_platform.__name__}.{package}")
    assert found
    for component in found:
        parameters = list(inspect.signature(component.__init__).parameters)
        assert parameters == ["self", "name", "args", "opts"], component.__qualname__
