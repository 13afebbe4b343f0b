"""Constructing each component through the provider, with inputs shaped as the wire delivers them
(camelCase keys, every number a double), registers exactly the objects the native class
registers for the same config; a bad input is refused with the field path a stack file's report
gives, before anything is registered."""

from __future__ import annotations

import json
from typing import Any

import pulumi
import pytest
from pulumi.errors import InputPropertiesError
from pulumi.runtime import rpc

from inference_platform.cli.render import RenderResult, record, run_program
from inference_platform.cli.stack_file import read_stack_file
from inference_platform.config.errors import ConfigError
from inference_platform.provider.host import InferencePlatformProvider
from inference_platform.serving import (
    InferenceService,
    InferenceServiceArgs,
    ModelNamespace,
    ModelNamespaceArgs,
    PayloadComparator,
    PayloadComparatorArgs,
    Pipeline,
    PipelineArgs,
    PipelineSpec,
)
from inference_platform.stack.config import parse_stack_config, project_values
from tests.conftest import PIPELINES, as_pulumi_up, base_config, full_config, write_stack_file

TOKEN = "inference-platform:index:{}"
DOMAIN = "models.example.com"


def wire(value: Any) -> Any:
    """A value as the engine hands it to a provider: every number a double."""
    if isinstance(value, bool):
        return value
    if isinstance(value, (int, float)):
        return float(value)
    if isinstance(value, dict):
        return {key: wire(item) for key, item in value.items()}
    if isinstance(value, list):
        return [wire(item) for item in value]
    return value


def construct(component: str, name: str, inputs: dict[str, Any]) -> None:
    InferencePlatformProvider().construct(name, TOKEN.format(component), wire(inputs), pulumi.ResourceOptions())


def registered(result: RenderResult, root_type: str | None = None) -> list[tuple[Any, ...]]:
    """Every registration as (type, name, parent, dependencies, inputs, outputs), with the root
    (the stack, or the component the provider constructed) named `root`: URNs differ between a
    child of the stack and a child of a component, the objects must not."""
    by_urn = {r.urn: r for r in result.registrations}

    def label(urn: str) -> str:
        found = by_urn.get(urn)
        return "root" if found is None or found.type == root_type else f"{found.type}::{found.name}"

    return sorted(
        (
            r.type,
            r.name,
            label(r.parent),
            tuple(sorted(label(d) for d in r.dependencies)),
            json.dumps(r.inputs, sort_keys=True),
            json.dumps(result.component_outputs.get(r.urn), sort_keys=True),
        )
        for r in result.registrations
        if r.type != root_type
    )


def same_objects(native: RenderResult, provided: RenderResult, component: str) -> None:
    """The children of the native component and of the provider's are the same objects, and the
    two components registered the same outputs."""
    native_type, provided_type = f"inference-platform:serving:{component}", TOKEN.format(component)
    natively = registered(native, native_type)
    assert len(natively) > 1, "the native component registered (almost) nothing: the comparison would prove nothing"
    assert registered(provided, provided_type) == natively
    (native_root,) = [r for r in native.registrations if r.type == native_type]
    (provided_root,) = [r for r in provided.registrations if r.type == provided_type]
    assert provided.component_outputs[provided_root.urn] == native.component_outputs[native_root.urn]


def test_the_whole_stack_registers_what_the_program_registers(tmp_path: Any) -> None:
    config = full_config(decrypted=True)
    stack_file = read_stack_file(write_stack_file(tmp_path / "Pulumi.full.yaml", config))
    program = run_program("all-features", as_pulumi_up(stack_file))
    provided = record(lambda: construct("InferencePlatform", "platform", project_values(config)), "all-features")
    token = TOKEN.format("InferencePlatform")
    assert registered(provided, token) == registered(program)
    (component,) = [r for r in provided.registrations if r.type == token]
    outputs = provided.component_outputs[component.urn]
    assert outputs == program.outputs
    assert set(outputs) == {"platform", "models", "pipelines", "capacity"}


def service_inputs() -> list[dict[str, Any]]:
    """Each model of the all-features stack placed as the stack places it, as one component's inputs."""
    models = full_config()["inference-platform:models"]
    embed = {"name": "embed", "namespace": "service", "serviceAccount": "embed", "ports": [8000]}
    return [
        {
            "model": model,
            "namespace": "service",
            "domain": DOMAIN,
            "urlScheme": "https",
            "gpuNodes": {"memoryMib": 81920, "nodeSelector": {"gpu": "on"}},
            "storage": {
                "secretName": "model-storage-credentials",
                "s3Endpoint": "https://minio.example.com",
                "s3Keys": True,
            },
            "metricsScraper": {"namespace": "monitoring"},
            "callers": [embed] if model["name"] != "embed" else [],
            **comparator(model),
        }
        for model in models
    ]


def comparator(model: dict[str, Any]) -> dict[str, Any]:
    """Where a model that compares its shadows' answers streams them."""
    return {"comparator": {"namespace": "service"}} if model.get("analysis", {}).get("payloads") else {}


@pytest.mark.parametrize("inputs", service_inputs(), ids=lambda inputs: inputs["model"]["name"])
def test_an_inference_service_registers_what_the_native_class_registers(inputs: dict[str, Any]) -> None:
    name = inputs["model"]["name"]
    native = record(lambda: InferenceService(name, InferenceServiceArgs.model_validate(inputs)), "unit")
    provided = record(lambda: construct("InferenceService", name, inputs), "unit")
    same_objects(native, provided, "InferenceService")


@pytest.mark.parametrize("pipeline", PIPELINES, ids=lambda p: p["name"])
def test_a_pipeline_registers_what_the_native_class_registers(pipeline: dict[str, Any]) -> None:
    models = PipelineSpec.model_validate(pipeline).models
    inputs = {
        "pipeline": pipeline,
        "namespace": "service",
        "domain": DOMAIN,
        "metricsScraper": {"namespace": "monitoring"},
        "callees": [{"name": m, "namespace": "service", "serviceAccount": m, "ports": [8080, 8081]} for m in models],
        "stepUrls": {m: f"http://{m}.service.svc.cluster.local/v2/models/{m}/infer" for m in models},
        "exampleBody": {"inputs": [{"name": "x", "shape": [1], "datatype": "FP32", "data": [0.5]}]},
    }
    name = pipeline["name"]
    native = record(lambda: Pipeline(name, PipelineArgs.model_validate(inputs)), "unit")
    provided = record(lambda: construct("Pipeline", name, inputs), "unit")
    same_objects(native, provided, "Pipeline")


def test_a_payload_comparator_registers_what_the_native_class_registers() -> None:
    compared = [m for m in full_config()["inference-platform:models"] if comparator(m)]
    assert [m["name"] for m in compared] == ["iris", "mnist", "chat"]
    inputs = {"namespace": "service", "models": compared, "metricsScraper": {"namespace": "monitoring"}}
    native = record(lambda: PayloadComparator("compare", PayloadComparatorArgs.model_validate(inputs)), "unit")
    provided = record(lambda: construct("PayloadComparator", "compare", inputs), "unit")
    same_objects(native, provided, "PayloadComparator")


def test_a_model_namespace_registers_what_the_native_class_registers() -> None:
    inputs = {"name": "service", "istioNamespace": "istio-system"}
    native = record(lambda: ModelNamespace("service", ModelNamespaceArgs.model_validate(inputs)), "unit")
    provided = record(lambda: construct("ModelNamespace", "service", inputs), "unit")
    same_objects(native, provided, "ModelNamespace")


def refused(component: str, inputs: dict[str, Any]) -> list[tuple[str, str]]:
    """The property errors of a refused construction; nothing may have been registered."""
    errors: list[tuple[str, str]] = []

    def attempt() -> None:
        with pytest.raises(InputPropertiesError) as raised:
            construct(component, "bad", inputs)
        errors.extend((e["property_path"], e["reason"]) for e in raised.value.errors or [])

    result = record(attempt, "unit")
    assert result.registrations == []
    return errors


def test_a_bad_stack_is_refused_with_the_paths_and_messages_of_a_stack_file_report() -> None:
    config = base_config()
    config["inference-platform:models"][0]["versions"][0]["weight"] = 85
    config["inference-platform:models"][1]["maxModelLen"] = 4096
    config["inference-platform:platform"] = {"ingress": {"serviceType": "Ingress"}}
    with pytest.raises(ConfigError) as report:
        parse_stack_config(project_values(config))
    expected = [(p.path, p.message) for p in report.value.problems]
    assert [path for path, _ in expected] == [
        "models[0].versions",
        "models[1].maxModelLen",
        "platform.ingress.serviceType",
    ]
    assert refused("InferencePlatform", project_values(config)) == expected


def test_a_bad_inference_service_is_refused_with_each_field_path() -> None:
    inputs = service_inputs()[0] | {"namespace": "Service!"}
    inputs["model"] = {**inputs["model"], "maxModelLen": 4096, "replicas": 1.5}
    assert refused("InferenceService", inputs) == [
        ("model.maxModelLen", "'maxModelLen' is not a setting of the mlserver runtime"),
        ("model.replicas", "must be a whole number, not 1.5"),
        (
            "namespace",
            "'Service!' is not a valid name: use at most 63 lowercase letters, digits and '-', starting and ending "
            "with a letter or digit",
        ),
    ]


def test_missing_inputs_and_unknown_ones_are_refused_as_a_stack_file_refuses_them() -> None:
    # One problem per mistake: the misspelt key is the missing setting, not a second problem beside it.
    assert refused("Pipeline", {"namespace": "service", "domian": DOMAIN}) == [
        ("domian", "unknown setting 'domian': did you mean 'domain'?"),
        ("pipeline", "required, but not set"),
    ]


def test_a_value_not_known_yet_is_refused_with_its_path() -> None:
    def attempt() -> None:
        inputs = wire(service_inputs()[0])
        inputs["domain"] = pulumi.Output.from_input(DOMAIN)
        inputs["model"]["versions"][0]["modelUri"] = rpc.UNKNOWN
        with pytest.raises(InputPropertiesError) as raised:
            InferencePlatformProvider().construct("iris", TOKEN.format("InferenceService"), inputs, None)
        errors = raised.value.errors or []
        assert [e["property_path"] for e in errors] == ["model.versions[0].modelUri", "domain"]
        assert all("known before the deployment runs" in e["reason"] for e in errors)

    assert record(attempt, "unit").registrations == []


def test_secret_values_are_read_and_stay_secret() -> None:
    config = project_values(full_config(decrypted=True))
    secret = "wJalrXUtnFEMI-secret"
    config["storage"]["s3"]["secretAccessKey"] = rpc.wrap_rpc_secret(secret)
    provided = record(lambda: construct("InferencePlatform", "platform", config), "unit")
    rendered = json.dumps([r.inputs for r in provided.registrations])
    assert secret not in rendered
    (storage,) = [r for r in provided.registrations if r.name == "model-storage-credentials"]
    assert set(storage.inputs["stringData"].values()) == {"[secret]"}
