"""Every object a stack renders is accepted by the schema of whoever owns its kind."""

from __future__ import annotations

import copy
from typing import Any

import kubernetes_validate
import pytest

from tests.conftest import STACKS
from tests.owner_schemas import IstioSchemaError, validate, validate_istio, validate_kubernetes


def test_every_object_of_every_stack_passes_its_owners_schema(stack_manifests: list[dict[str, Any]]) -> None:
    assert stack_manifests, "the stack rendered nothing"
    for manifest in stack_manifests:
        validate(manifest)


def test_both_environments_exist() -> None:
    assert {"dev", "prod"} <= set(STACKS)


def test_strict_kubernetes_validation_rejects_an_unknown_field(dev_manifests: list[dict[str, Any]]) -> None:
    deployment = copy.deepcopy(next(m for m in dev_manifests if m["kind"] == "Deployment"))
    deployment["spec"]["template"]["spec"]["containers"][0]["readinessProbe"]["httpGet"]["pth"] = "/"
    with pytest.raises(kubernetes_validate.ValidationError):
        validate_kubernetes(deployment)


@pytest.mark.parametrize(
    ("kind", "mutate"),
    [
        ("VirtualService", lambda spec: spec["http"][0].update(mirorrs=[])),
        ("VirtualService", lambda spec: spec["http"][0].update(timeout=5)),
        ("DestinationRule", lambda spec: spec["subsets"][0].update(lables={"version": "v1"})),
    ],
    ids=["misspelt-key", "wrong-type", "misspelt-nested-key"],
)
def test_istio_validation_rejects_what_istio_would(dev_manifests: list[dict[str, Any]], kind: str, mutate: Any) -> None:
    manifest = copy.deepcopy(next(m for m in dev_manifests if m["kind"] == kind))
    mutate(manifest["spec"])
    with pytest.raises(IstioSchemaError):
        validate_istio(manifest)
