"""A change touches only what it must, and never renames an object or edits an immutable field.

Pulumi replaces a resource whose logical name or type changes, and Kubernetes refuses edits to
immutable fields (a Deployment's selector, a Service's clusterIP): either would mean downtime.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from inference_platform.cli.diff import ObjectDiff, diff_objects
from inference_platform.cli.render import RenderResult
from inference_platform.cli.render_files import manifest_documents
from tests.conftest import base_config

Config = dict[str, Any]
Render = Callable[[Config], RenderResult]


def iris_versions(config: Config) -> list[dict[str, Any]]:
    versions: list[dict[str, Any]] = config["inference-platform:models"][0]["versions"]
    return versions


def change(render: Render, mutate: Callable[[Config], Any]) -> tuple[RenderResult, RenderResult, ObjectDiff]:
    config = base_config()
    before = render(config)
    mutate(config)
    after = render(config)
    return before, after, diff_objects(manifest_documents(before), manifest_documents(after))


# The model's routes from the gateway and from inside the mesh (declared calls, pipelines).
IRIS_ROUTES = {
    "VirtualService service/iris (networking.istio.io/v1)",
    "VirtualService service/iris-mesh (networking.istio.io/v1)",
}


def test_changing_a_live_weight_changes_only_that_models_virtual_services(render_config: Render) -> None:
    def shift(config: Config) -> None:
        iris_versions(config)[0]["weight"] = 80
        iris_versions(config)[1]["weight"] = 20

    _, _, diff = change(render_config, shift)

    assert not diff.added
    assert not diff.removed
    assert set(diff.changed) == IRIS_ROUTES
    paths = {c.path for c in diff.changed["VirtualService service/iris (networking.istio.io/v1)"]}
    assert paths == {f"spec.http[{r}].route[{i}].weight" for r in ("by-path", "by-host") for i in (0, 1)}
    in_mesh = {c.path for c in diff.changed["VirtualService service/iris-mesh (networking.istio.io/v1)"]}
    assert in_mesh == {f"spec.http[in-mesh].route[{i}].weight" for i in (0, 1)}


def test_changing_a_mirror_percent_changes_only_that_models_virtual_services(render_config: Render) -> None:
    _, _, diff = change(render_config, lambda c: iris_versions(c)[2].update(mirrorPercent=20))

    assert not diff.added
    assert not diff.removed
    assert set(diff.changed) == IRIS_ROUTES


NEW_VERSION_OBJECTS = {
    "ConfigMap service/iris-v4 (v1)",
    "Deployment service/iris-v4 (apps/v1)",
    "Service service/iris-v4 (v1)",
}


@pytest.mark.parametrize(
    ("new", "own_objects"),
    [
        ({"name": "v4", "modelUri": "pvc://models/iris/v4", "weight": 0}, set()),
        # Fetched from S3: its own egress policy; the model's network policy stays as it was.
        (
            {"name": "v4", "modelUri": "s3://models/iris/v4", "mirrorPercent": 5},
            {"NetworkPolicy service/iris-v4-download (networking.k8s.io/v1)"},
        ),
    ],
    ids=["mounted", "downloaded"],
)
def test_adding_a_version_adds_its_objects_and_changes_only_the_routes(
    render_config: Render, new: dict[str, Any], own_objects: set[str]
) -> None:
    def add(config: Config) -> None:
        # From a public bucket (read anonymously, as the stack says): no credentials Secret either.
        config["inference-platform:storage"] = {"s3": {"anonymous": True}}
        iris_versions(config).append(new)

    _, _, diff = change(render_config, add)

    assert set(diff.added) == NEW_VERSION_OBJECTS | own_objects
    assert not diff.removed
    assert set(diff.changed) == IRIS_ROUTES | {"DestinationRule service/iris (networking.istio.io/v1)"}


def test_retiring_a_shadow_removes_its_objects_and_changes_only_the_routes(render_config: Render) -> None:
    _, _, diff = change(render_config, lambda c: iris_versions(c).pop(2))

    assert not diff.added
    assert set(diff.removed) == {
        "ConfigMap service/iris-v3 (v1)",
        "Deployment service/iris-v3 (apps/v1)",
        "Service service/iris-v3 (v1)",
    }
    assert set(diff.changed) == IRIS_ROUTES | {"DestinationRule service/iris (networking.istio.io/v1)"}


def test_adding_a_model_leaves_every_other_object_alone(render_config: Render) -> None:
    model = {
        "name": "fraud",
        "runtime": "mlserver",
        "versions": [{"name": "v1", "modelUri": "pvc://models/fraud/v1", "weight": 100}],
    }
    _, _, diff = change(render_config, lambda c: c["inference-platform:models"].append(model))

    assert not diff.removed
    assert not diff.changed
    assert {label.split()[1] for label in diff.added} == {
        "service/fraud",
        "service/fraud-v1",
        "service/fraud-access",
        "service/fraud-mesh",
    }


MUTATIONS: dict[str, Callable[[Config], Any]] = {
    "weights": lambda c: (iris_versions(c)[0].update(weight=50), iris_versions(c)[1].update(weight=50)),
    "mirror": lambda c: iris_versions(c)[2].update(mirrorPercent=5),
    "promote-shadow": lambda c: (
        iris_versions(c)[0].update(weight=50),
        iris_versions(c)[1].update(weight=0),
        iris_versions(c)[2].pop("mirrorPercent"),
        iris_versions(c)[2].update(weight=50),
    ),
    "replicas": lambda c: c["inference-platform:models"][0].update(replicas=3),
    "batching": lambda c: c["inference-platform:models"][0].update(maxBatchSize=8, maxBatchTime=0.01),
    "image": lambda c: iris_versions(c)[0].update(image="registry.example.com/mlserver:1.7.1-patched"),
}


@pytest.mark.parametrize("mutation", MUTATIONS.values(), ids=MUTATIONS.keys())
def test_no_change_renames_an_object_or_touches_an_immutable_field(
    render_config: Render, mutation: Callable[[Config], Any]
) -> None:
    before, after, diff = change(render_config, mutation)

    # More replicas bring disruption budgets; nothing else appears, nothing goes away.
    assert all(label.startswith("PodDisruptionBudget ") for label in diff.added)
    assert not diff.removed
    urns_before = {r.urn for r in before.registrations}
    urns_after = {r.urn for r in after.registrations}
    assert urns_before <= urns_after, "a logical name or type changed: Pulumi would replace the resource"
    immutable = ("spec.selector", "spec.clusterIP", "spec.type", "spec.host", "spec.hosts")
    for label, changes in diff.changed.items():
        for field in changes:
            assert not field.path.startswith(immutable), f"{label}: {field.path} changed"


AB_PIPELINE = {
    "name": "churn-ab",
    "nodes": {
        "root": {"routerType": "Splitter", "steps": [{"model": "churn", "weight": 80}, {"model": "iris", "weight": 20}]}
    },
}


def test_adding_a_pipeline_touches_only_the_access_rules_of_the_models_it_calls(render_config: Render) -> None:
    before, after, diff = change(
        render_config, lambda c: c.setdefault("inference-platform:pipelines", []).append(AB_PIPELINE)
    )

    assert not diff.removed
    assert {label.split()[1] for label in diff.added} == {"service/churn-ab", "service/churn-ab-access"}
    assert set(diff.changed) == {
        f"{kind} service/{name} ({api})"
        for model in ("churn", "iris")
        for kind, name, api in (
            ("NetworkPolicy", model, "networking.k8s.io/v1"),
            ("AuthorizationPolicy", f"{model}-access", "security.istio.io/v1"),
        )
    }
    for changes in diff.changed.values():
        assert all(change.path.startswith(("spec.ingress[", "spec.rules[")) for change in changes)
    assert "pipelines" not in before.outputs
    assert after.outputs["pipelines"]["churn-ab"]["urls"] == [
        "http://churn-ab.models.example.com/",
        "http://models.example.com/pipelines/churn-ab/",
    ]
