"""The YAML example (examples/yaml/Pulumi.yaml): every property it sets is one the schema's inputs
have, of the type they have, every required input is set and every output it reads exists; and
each of its resources constructs through the provider, validation included."""

from __future__ import annotations

import re
from typing import Any

import pulumi
import pytest
import yaml

from inference_platform.cli.render import record
from inference_platform.provider.host import InferencePlatformProvider, schema
from inference_platform.serving.runtimes import RUNTIMES
from tests.conftest import ROOT

EXAMPLE = ROOT / "examples" / "yaml" / "Pulumi.yaml"
JSON_TYPES: dict[str, tuple[type, ...]] = {
    "string": (str,),
    "integer": (int,),
    "number": (int, float),
    "boolean": (bool,),
    "array": (list,),
    "object": (dict,),
}


def mismatches(value: Any, spec: dict[str, Any], types: dict[str, Any], path: str) -> list[str]:
    """Where `value` does not fit the schema property `spec`."""
    ref = spec.get("$ref")
    if ref == "pulumi.json#/Any":
        return []
    if ref is not None:
        spec = types[ref.removeprefix("#/types/")]
    if "enum" in spec:
        allowed = [member["value"] for member in spec["enum"]]
        return [] if value in allowed else [f"{path}: {value!r} is not one of {allowed}"]
    kind = spec.get("type", "object")
    if (isinstance(value, bool) and kind in ("integer", "number")) or not isinstance(value, JSON_TYPES[kind]):
        return [f"{path}: {value!r} is not of type {kind}"]
    if isinstance(value, list):
        return [p for i, item in enumerate(value) for p in mismatches(item, spec["items"], types, f"{path}[{i}]")]
    if not isinstance(value, dict):
        return []
    if "properties" in spec:
        return object_mismatches(value, spec["properties"], spec.get("required", []), types, path)
    return [p for k, v in value.items() for p in mismatches(v, spec["additionalProperties"], types, f"{path}.{k}")]


def object_mismatches(
    value: dict[str, Any], properties: dict[str, Any], required: list[str], types: dict[str, Any], path: str
) -> list[str]:
    found = [f"{path}.{key}: not a property" for key in value if key not in properties]
    found += [f"{path}.{key}: required" for key in required if key not in value]
    found += [
        p
        for key, item in value.items()
        if key in properties
        for p in mismatches(item, properties[key], types, f"{path}.{key}")
    ]
    return found


def example() -> dict[str, Any]:
    document: dict[str, Any] = yaml.safe_load(EXAMPLE.read_text(encoding="utf-8"))
    return document


def components() -> list[tuple[str, dict[str, Any]]]:
    return [
        (name, resource)
        for name, resource in example()["resources"].items()
        if resource["type"].startswith("inference-platform:index:")
    ]


def test_the_example_uses_the_package_it_names() -> None:
    document = example()
    assert document["runtime"] == "yaml"
    assert (ROOT / "examples" / "yaml" / document["packages"]["inference-platform"] / "PulumiPlugin.yaml").is_file()
    assert {resource["type"] for _, resource in components()} == {
        "inference-platform:index:InferencePlatform",
        "inference-platform:index:InferenceService",
    }


@pytest.mark.parametrize(("name", "resource"), components(), ids=[name for name, _ in components()])
def test_each_resources_properties_are_the_schemas_inputs(name: str, resource: dict[str, Any]) -> None:
    document = schema()
    spec = document["resources"][resource["type"]]
    assert (
        object_mismatches(
            resource["properties"], spec["inputProperties"], spec["requiredInputs"], document["types"], name
        )
        == []
    )


def test_the_check_finds_a_misspelt_key_a_wrong_type_and_an_unknown_enum_value() -> None:
    document = schema()
    spec = document["resources"]["inference-platform:index:InferenceService"]
    bad = {"namespace": 5, "domian": "x", "model": {"name": "m", "runtime": "onnx", "versions": []}}
    assert object_mismatches(bad, spec["inputProperties"], spec["requiredInputs"], document["types"], "r") == [
        "r.domian: not a property",
        "r.domain: required",
        "r.namespace: 5 is not of type string",
        f"r.model.runtime: 'onnx' is not one of {list(RUNTIMES)}",
    ]


def test_every_output_the_example_reads_is_one_its_resource_has() -> None:
    document, served = example(), schema()["resources"]
    for expression in document["outputs"].values():
        (resource, output) = re.fullmatch(r"\$\{(\w+)\.(\w+)[^}]*\}", expression).groups()  # type: ignore[union-attr]
        assert output in served[document["resources"][resource]["type"]]["properties"], expression


@pytest.mark.parametrize(("name", "resource"), components(), ids=[name for name, _ in components()])
def test_each_resource_constructs_through_the_provider(name: str, resource: dict[str, Any]) -> None:
    def build() -> None:
        InferencePlatformProvider().construct(name, resource["type"], resource["properties"], pulumi.ResourceOptions())

    kinds = {r.inputs.get("kind") for r in record(build, "example").registrations}
    assert {"Deployment", "Service", "VirtualService"} <= kinds
