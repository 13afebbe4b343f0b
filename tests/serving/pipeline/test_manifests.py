"""A pipeline's objects: KServe's router given the graph as KServe's controller would give it,
hardened, routed and protected like a model, checked against the owners' schemas."""

from __future__ import annotations

import copy
import json
from typing import Any

import jsonschema
import pytest
from pydantic import TypeAdapter

from inference_platform.platform.prometheus import MetricsScraper
from inference_platform.serving.access import Workload
from inference_platform.serving.pipeline import PipelineArgs, PipelineSpec
from inference_platform.serving.pipeline.manifests import pipeline_manifests, router_graph
from inference_platform.serving.pipeline.spec import GraphNode, GraphStep
from tests.conftest import PIPELINES
from tests.owner_schemas import validate
from tests.serving.pipeline.graph_schema import graph_spec_schema, validate_graph

SPEC: TypeAdapter[PipelineSpec] = TypeAdapter(PipelineSpec)
MODELS = ["resnet", "mnist", "churn", "iris", "llama"]
URLS = {name: f"http://{name}.service.svc.cluster.local/v2/models/{name}/infer" for name in MODELS}


def args(pipeline: dict[str, Any]) -> PipelineArgs:
    spec = SPEC.validate_python(pipeline)
    return PipelineArgs(
        pipeline=spec,
        namespace="service",
        domain="models.example.com",
        metrics_scraper=MetricsScraper(namespace="monitoring"),
        callees=[Workload(name=m, namespace="service", service_account=m, ports=(8080,)) for m in spec.models],
        step_urls={m: URLS[m] for m in spec.models},
    )


def objects(pipeline: dict[str, Any]) -> dict[tuple[str, str], dict[str, Any]]:
    manifests = pipeline_manifests(args(pipeline))
    for manifest in manifests:
        validate(manifest)
    return {(m["kind"], m["metadata"]["name"]): m for m in manifests}


def router(pipeline: dict[str, Any]) -> dict[str, Any]:
    pod = objects(pipeline)[("Deployment", pipeline["name"])]["spec"]["template"]["spec"]
    [container] = pod["containers"]
    result: dict[str, Any] = container
    return result


def graph_json(pipeline: dict[str, Any]) -> dict[str, Any]:
    arguments = router(pipeline)["args"]
    assert arguments[0] == "--graph-json"
    result: dict[str, Any] = json.loads(arguments[1])
    return result


@pytest.mark.parametrize("pipeline", PIPELINES, ids=[p["name"] for p in PIPELINES])
def test_every_graph_passes_kserves_inference_graph_schema(pipeline: dict[str, Any]) -> None:
    validate_graph(graph_json(pipeline))


@pytest.mark.parametrize(
    ("breakage", "field"),
    [
        (lambda g: g["nodes"]["root"]["steps"][0].update(model="resnet"), "model"),
        (lambda g: g["nodes"]["root"].update(routerType="Parallel"), "Parallel"),
        (lambda g: g["nodes"]["root"]["steps"][0].update(dependency="Sometimes"), "Sometimes"),
        (lambda g: g["nodes"]["root"].pop("routerType"), "routerType"),
    ],
    ids=["unknown-step-key", "unknown-router-type", "unknown-dependency", "no-router-type"],
)
def test_the_schema_check_refuses_what_the_crd_refuses(breakage: Any, field: str) -> None:
    graph = copy.deepcopy(graph_json(PIPELINES[0]))
    breakage(graph)

    with pytest.raises(jsonschema.ValidationError, match=field):
        validate_graph(graph)


def test_model_steps_carry_kserves_service_name_and_the_derived_url() -> None:
    graph = graph_json(PIPELINES[0])

    assert graph == {
        "nodes": {
            "root": {
                "routerType": "Sequence",
                "steps": [
                    {"name": "detect", "serviceName": "resnet", "serviceUrl": URLS["resnet"]},
                    {
                        "name": "classify",
                        "serviceName": "mnist",
                        "serviceUrl": URLS["mnist"],
                        "data": "$response",
                        "dependency": "Hard",
                    },
                ],
            }
        }
    }


def test_node_steps_name_the_node_and_no_url() -> None:
    graph = graph_json(PIPELINES[2])

    assert graph["nodes"]["root"]["steps"][0] == {"nodeName": "vision", "condition": "inputs"}
    assert graph == router_graph(args(PIPELINES[2]).pipeline, URLS)


def test_the_router_is_kserves_pinned_image_on_8080_ready_on_readyz() -> None:
    container = router(PIPELINES[0])

    assert container["image"] == "docker.io/kserve/router:v0.20.0"
    assert container["ports"] == [{"name": "http", "containerPort": 8080, "protocol": "TCP"}]
    assert container["readinessProbe"]["httpGet"] == {"path": "/readyz", "port": 8080}
    assert container["env"] == [{"name": "PROPAGATE_HEADERS", "value": "x-request-id,x-b3-.*"}]
    assert container["securityContext"]["readOnlyRootFilesystem"] is True


def test_no_header_patterns_means_no_propagate_headers() -> None:
    assert "env" not in router(PIPELINES[1])


def test_autoscaling_on_qps_leaves_replicas_to_the_autoscaler_with_a_disruption_budget() -> None:
    found = objects(PIPELINES[0])
    name = PIPELINES[0]["name"]

    assert "replicas" not in found[("Deployment", name)]["spec"]
    hpa = found[("HorizontalPodAutoscaler", name)]["spec"]
    assert (hpa["minReplicas"], hpa["maxReplicas"]) == (2, 6)
    assert hpa["metrics"][0]["pods"]["metric"]["name"] == "requests_per_second"
    assert found[("PodDisruptionBudget", name)]["spec"]["maxUnavailable"] == 1


def test_one_replica_has_no_disruption_budget_and_no_autoscaler() -> None:
    found = objects(PIPELINES[1])

    assert found[("Deployment", "churn-ab")]["spec"]["replicas"] == 1
    assert not {kind for kind, _ in found} & {"HorizontalPodAutoscaler", "PodDisruptionBudget"}


def test_served_like_a_model_at_its_host_and_under_pipelines() -> None:
    spec = objects(PIPELINES[1])[("VirtualService", "churn-ab")]["spec"]

    assert spec["hosts"] == ["churn-ab.models.example.com", "models.example.com"]
    by_path, by_host, add_slash = spec["http"]
    assert by_path["match"] == [{"uri": {"prefix": "/pipelines/churn-ab/"}}]
    # Without its trailing slash the path matches no prefix: redirected (308 keeps a POST a POST).
    assert add_slash == {
        "name": "add-slash",
        "match": [{"uri": {"exact": "/pipelines/churn-ab"}}],
        "redirect": {"uri": "/pipelines/churn-ab/", "redirectCode": 308},
    }
    assert by_path["rewrite"] == {"uri": "/"}
    assert by_host["match"] == [{"authority": {"prefix": "churn-ab.models.example.com"}}]
    assert by_path["route"] == [{"destination": {"host": "churn-ab.service.svc.cluster.local", "port": {"number": 80}}}]


def test_protection_options_are_a_models() -> None:
    found = objects(PIPELINES[0])
    name = PIPELINES[0]["name"]

    assert ("EnvoyFilter", f"{name}-rate-limit") in found
    assert ("RequestAuthentication", f"{name}-jwt") in found
    assert found[("AuthorizationPolicy", f"{name}-gateway")]["spec"]["action"] == "DENY"


def test_the_router_may_leave_only_for_the_models_its_graph_names() -> None:
    found = objects(PIPELINES[2])

    egress = found[("NetworkPolicy", "assist")]["spec"]["egress"]
    assert [rule["to"][0]["podSelector"]["matchLabels"]["app"] for rule in egress] == ["llama", "resnet", "mnist"]
    rules = found[("AuthorizationPolicy", "assist-access")]["spec"]["rules"]
    assert [rule["from"][0]["source"]["principals"] for rule in rules] == [
        ["cluster.local/ns/istio-ingress/sa/istio-ingressgateway"]
    ]
    pod = found[("Deployment", "assist")]["spec"]["template"]["spec"]
    assert pod["serviceAccountName"] == "assist"
    assert pod["automountServiceAccountToken"] is False


def test_the_config_keys_are_the_crds_keys_with_the_crds_values() -> None:
    """What a team writes is checked by the config model; it must be the CRD's own shape, so a
    graph the model accepts is one the router reads (serviceName/nodeName are model/node here)."""
    nodes = graph_spec_schema()["properties"]["nodes"]["additionalProperties"]
    steps = nodes["properties"]["steps"]["items"]["properties"]
    renamed = {"model": "serviceName", "node": "nodeName"}
    node_fields = GraphNode.model_json_schema(by_alias=True)["properties"]
    step_fields = GraphStep.model_json_schema(by_alias=True)["properties"]

    assert set(node_fields) <= set(nodes["properties"])
    assert sorted(node_fields["routerType"]["enum"]) == sorted(nodes["properties"]["routerType"]["enum"])
    assert {renamed.get(key, key) for key in step_fields} <= set(steps)
    for key, crd_key in (("dependency", "dependency"), ("data", "data"), ("weight", "weight")):
        [ours] = [option for option in step_fields[key]["anyOf"] if option.get("type") != "null"]
        assert ours["type"] == steps[crd_key]["type"]
        if "enum" in steps[crd_key]:
            assert sorted(ours["enum"]) == sorted(steps[crd_key]["enum"])
