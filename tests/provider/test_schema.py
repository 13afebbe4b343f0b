"""The package schema: what the provider serves is the committed plugin/schema.json, it satisfies
Pulumi's own package metaschema, every reference in it resolves, and the real plugin serves it
over gRPC the way `pulumi package add` asks for it."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import grpc
import jsonschema
import pytest
from pulumi.provider.experimental.component import ComponentProvider
from pulumi.runtime.proto import provider_pb2, provider_pb2_grpc

from inference_platform.provider import args, codegen
from inference_platform.provider.components import COMPONENTS
from inference_platform.provider.host import schema
from tests.conftest import ROOT

SCHEMA_FILE = ROOT / "plugin" / "schema.json"
METASCHEMA = Path(
    __import__("os").environ.get("INFRA_TEST_PULUMI_METASCHEMA")
    or ROOT.parent / "shared" / "pulumi" / "pulumi-package-metaschema.json"
)
# Types every Pulumi package may name without defining them.
BUILTIN_REFS = {"pulumi.json#/Any", "pulumi.json#/Archive", "pulumi.json#/Asset", "pulumi.json#/Json"}


def served() -> str:
    return json.dumps(schema(), indent=2, sort_keys=True) + "\n"


def test_the_committed_schema_is_the_one_the_provider_serves() -> None:
    assert SCHEMA_FILE.read_text(encoding="utf-8") == served(), "plugin/schema.json is stale: run `make provider`"


def test_the_argument_types_are_generated_from_the_config_models() -> None:
    generated = codegen.generate(codegen.ARGUMENTS)
    assert Path(args.__file__).read_text(encoding="utf-8") == generated, (
        "provider/args.py is stale: run `make provider`"
    )


def test_the_package_serves_its_components_under_the_index_module() -> None:
    resources = schema()["resources"]
    assert sorted(resources) == [
        "inference-platform:index:InferencePlatform",
        "inference-platform:index:InferenceService",
        "inference-platform:index:ModelNamespace",
        "inference-platform:index:PayloadComparator",
        "inference-platform:index:Pipeline",
    ]
    assert all(resource["isComponent"] for resource in resources.values())
    assert [component.TYPE for component in COMPONENTS] == [
        f"inference-platform:index:{component.__name__}" for component in COMPONENTS
    ]


def test_inputs_are_plain_values_and_outputs_what_a_consumer_needs() -> None:
    resources = schema()["resources"]
    for resource in resources.values():
        assert all(prop.get("plain") is True for prop in resource["inputProperties"].values())
    outputs = {token.split(":")[-1]: sorted(r["properties"]) for token, r in resources.items()}
    assert outputs == {
        "InferencePlatform": ["capacity", "models", "pipelines", "platform"],
        "InferenceService": ["adapters", "curl", "mirrors", "urls", "weights"],
        "ModelNamespace": ["name"],
        "PayloadComparator": ["host"],
        "Pipeline": ["curl", "models", "urls"],
    }
    assert resources["inference-platform:index:InferenceService"]["requiredInputs"] == ["domain", "model", "namespace"]


def metaschema() -> dict[str, Any]:
    if not METASCHEMA.is_file():
        pytest.skip(
            f"no Pulumi package metaschema at {METASCHEMA}: it is pulumi/pulumi's pkg/codegen/schema/pulumi.json "
            "(set INFRA_TEST_PULUMI_METASCHEMA to a copy)"
        )
    # The metaschema's patterns use (?<name>...) groups, which Python's re spells (?P<name>...).
    document: dict[str, Any] = json.loads(METASCHEMA.read_text(encoding="utf-8").replace("(?<", "(?P<"))
    return document


def test_the_schema_satisfies_pulumis_package_metaschema() -> None:
    meta = metaschema()
    validator = jsonschema.validators.validator_for(meta)(meta)
    errors = sorted(validator.iter_errors(schema()), key=lambda e: list(e.absolute_path))
    assert [f"{list(e.absolute_path)}: {e.message}" for e in errors] == []


def test_the_metaschema_refuses_what_the_sdk_writes_for_enum_values_and_a_bad_name() -> None:
    """The SDK's ComponentProvider writes `description: null` into enum values, which the
    metaschema refuses (the provider serves its schema without them), and checks names."""
    meta = metaschema()
    validator = jsonschema.validators.validator_for(meta)(meta)
    sdk = json.loads(ComponentProvider(list(COMPONENTS), "inference-platform", version="0.2.0").schema or "{}")
    refused = {e.absolute_path[1] for e in validator.iter_errors(sdk) if list(e.absolute_path)[:1] == ["types"]}
    assert refused == {token for token, spec in schema()["types"].items() if "enum" in spec}
    assert refused  # the package has enums: the check above checks something
    broken = schema() | {"name": "1-not-a-package-name"}
    assert [e.message for e in validator.iter_errors(broken)] == [
        "'1-not-a-package-name' does not match '^[a-zA-Z][-a-zA-Z0-9_]*$'"
    ]


def references(node: Any) -> Iterator[str]:
    if isinstance(node, dict):
        if isinstance(node.get("$ref"), str):
            yield node["$ref"]
        for value in node.values():
            yield from references(value)
    elif isinstance(node, list):
        for value in node:
            yield from references(value)


def test_every_reference_resolves() -> None:
    document = schema()
    found = set(references(document))
    local = {ref for ref in found if ref.startswith("#/types/")}
    assert found - local <= BUILTIN_REFS
    assert {ref.removeprefix("#/types/") for ref in local} <= set(document["types"])
    # and every defined type is used: nothing generated that no input reaches
    assert {ref.removeprefix("#/types/") for ref in local} == set(document["types"])


def test_the_plugin_serves_the_schema_over_grpc_as_pulumi_package_add_asks_for_it() -> None:
    """The CLI starts the plugin with the engine's address, reads the port it prints, and calls
    GetSchema; nothing reaches the engine for that."""
    plugin = subprocess.Popen(
        [sys.executable, str(ROOT / "plugin" / "__main__.py"), "127.0.0.1:1"],
        cwd=ROOT / "plugin",
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    try:
        assert plugin.stdout is not None
        port = int(plugin.stdout.readline())
        with grpc.insecure_channel(f"127.0.0.1:{port}") as channel:
            response = provider_pb2_grpc.ResourceProviderStub(channel).GetSchema(
                provider_pb2.GetSchemaRequest(version=0), timeout=30
            )
    finally:
        plugin.terminate()
        plugin.wait(timeout=30)
    assert json.dumps(json.loads(response.schema), indent=2, sort_keys=True) + "\n" == served()
