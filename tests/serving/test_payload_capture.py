"""Capturing the primary's and the shadows' exchanges for the payload comparator, and the
comparator itself, built as data object by object (the end-to-end run with a real Envoy is
tests/serving/test_payload_end_to_end.py)."""

from __future__ import annotations

import json
from typing import Any

import pytest
from pydantic import ValidationError

from inference_platform import pins
from inference_platform.config.errors import problems_from_validation
from inference_platform.platform.prometheus import MetricsScraper
from inference_platform.serving.config_checksum import CONFIG_CHECKSUM
from inference_platform.serving.inference_service.args import InferenceServiceArgs
from inference_platform.serving.inference_service.manifests import model_manifests
from inference_platform.serving.payload_capture import ComparatorRef
from inference_platform.serving.payload_comparator import (
    PayloadComparatorArgs,
    PayloadComparatorConfig,
    comparator_manifests,
)
from inference_platform.stack.config import UNIONS
from tests.owner_schemas import validate

COMPARATOR = ComparatorRef(namespace="service")
PAYLOADS = {"payloads": {"enabled": True}}


def iris(**settings: Any) -> dict[str, Any]:
    """v1 the primary (90), v2 a canary (10), v3 and v4 shadows."""
    return {
        "name": "iris",
        "runtime": "mlserver",
        "versions": [
            {"name": "v1", "modelUri": "pvc://models/iris/v1", "weight": 90},
            {"name": "v2", "modelUri": "pvc://models/iris/v2", "weight": 10},
            {"name": "v3", "modelUri": "pvc://models/iris/v3", "mirrorPercent": 50},
            {"name": "v4", "modelUri": "pvc://models/iris/v4", "mirrorPercent": 5},
        ],
        "analysis": PAYLOADS,
        **settings,
    }


def args(model: dict[str, Any], comparator: ComparatorRef | None = COMPARATOR) -> InferenceServiceArgs:
    return InferenceServiceArgs.model_validate(
        {"model": model, "namespace": "service", "domain": "models.example.com", "comparator": comparator}
    )


def render(model: dict[str, Any]) -> dict[tuple[str, str], dict[str, Any]]:
    return {(m["kind"], m["metadata"]["name"]): m for m in model_manifests(args(model))}


def comparator(*models: dict[str, Any], **config: Any) -> dict[tuple[str, str], dict[str, Any]]:
    built = PayloadComparatorArgs.model_validate(
        {
            "namespace": "service",
            "models": [args(m).model for m in models],
            "config": PayloadComparatorConfig.model_validate(config),
            "metricsScraper": MetricsScraper(namespace="monitoring"),
        }
    )
    return {(m["kind"], m["metadata"]["name"]): m for m in comparator_manifests(built)}


def test_the_primary_and_each_shadow_are_captured_the_canary_is_not() -> None:
    objects = render(iris())
    filters = sorted(name for kind, name in objects if kind == "EnvoyFilter" and name.endswith("-capture"))
    assert filters == ["iris-v1-capture", "iris-v3-capture", "iris-v4-capture"]
    policies = sorted(name for kind, name in objects if kind == "NetworkPolicy" and name.endswith("-capture"))
    assert policies == filters


def test_a_rollout_starting_in_the_dark_captures_only_in_its_shadow_phase() -> None:
    """A model whose rollout has shadowFirst compares answers with no shadow before the shadow phase
    (its candidate idle) and after it (a canary): then nothing is captured, the primary included."""
    rollout = {"candidate": "v2", "steps": [50], "interval": "15m", "shadowFirst": {"mirrorPercent": 20}}
    before = {
        **iris(rollout=rollout),
        "versions": [
            {"name": "v1", "modelUri": "pvc://models/iris/v1", "weight": 100},
            {"name": "v2", "modelUri": "pvc://models/iris/v2", "weight": 0},
        ],
    }
    assert not [name for kind, name in render(before) if kind in {"EnvoyFilter", "NetworkPolicy"} and "capture" in name]
    shadow = {**before, "versions": [before["versions"][0], {**before["versions"][1], "mirrorPercent": 20}]}
    del shadow["versions"][1]["weight"]
    filters = sorted(name for kind, name in render(shadow) if kind == "EnvoyFilter" and name.endswith("-capture"))
    assert filters == ["iris-v1-capture", "iris-v2-capture"]


def test_the_filter_streams_both_directions_to_the_comparator_without_waiting() -> None:
    spec = render(iris())["EnvoyFilter", "iris-v3-capture"]["spec"]
    assert spec["workloadSelector"] == {"labels": {"app": "iris", "version": "v3"}}
    (patch,) = spec["configPatches"]
    assert patch["applyTo"] == "HTTP_FILTER"
    assert patch["match"] == {
        "context": "SIDECAR_INBOUND",
        "listener": {
            "portNumber": 8080,
            "filterChain": {
                "filter": {
                    "name": "envoy.filters.network.http_connection_manager",
                    "subFilter": {"name": "envoy.filters.http.router"},
                }
            },
        },
    }
    assert patch["patch"]["operation"] == "INSERT_BEFORE"
    value = patch["patch"]["value"]
    assert value["name"] == "envoy.filters.http.ext_proc"
    config = value["typed_config"]
    assert config["@type"] == "type.googleapis.com/envoy.extensions.filters.http.ext_proc.v3.ExternalProcessor"
    assert (config["observability_mode"], config["failure_mode_allow"]) == (True, True)
    assert config["grpc_service"] == {
        "envoy_grpc": {"cluster_name": "outbound|9001||inference-comparator.service.svc.cluster.local"},
        "initial_metadata": [
            {"key": "x-inference-namespace", "value": "service"},
            {"key": "x-inference-model", "value": "iris"},
            {"key": "x-inference-version", "value": "v3"},
        ],
    }
    modes = config["processing_mode"]
    assert (modes["request_body_mode"], modes["response_body_mode"]) == ("STREAMED", "STREAMED")
    assert (modes["request_header_mode"], modes["response_header_mode"]) == ("SEND", "SEND")


def test_behind_a_transformer_the_pods_http_port_is_captured() -> None:
    transformer = {"image": "registry.example.com/pre:1.0.0", "port": 9080}
    objects = render(iris(transformer=transformer))
    (patch,) = objects["EnvoyFilter", "iris-v1-capture"]["spec"]["configPatches"]
    assert patch["match"]["listener"]["portNumber"] == 9080


def test_the_captured_pods_may_reach_the_comparators_grpc_port_only() -> None:
    policy = render(iris())["NetworkPolicy", "iris-v1-capture"]["spec"]
    assert policy == {
        "podSelector": {"matchLabels": {"app": "iris", "version": "v1"}},
        "policyTypes": ["Egress"],
        "egress": [
            {
                "to": [{"podSelector": {"matchLabels": {"app": "inference-comparator"}}}],
                "ports": [{"protocol": "TCP", "port": 9001}],
            }
        ],
    }


def test_a_model_that_does_not_compare_renders_as_before() -> None:
    plain = iris(analysis={})
    assert render(plain) == {
        (m["kind"], m["metadata"]["name"]): m for m in model_manifests(args(plain, comparator=None))
    }
    assert not [key for key in render(plain) if key[1].endswith("-capture")]


def test_without_the_comparator_a_model_cannot_compare() -> None:
    with pytest.raises(ValidationError) as raised:
        args(iris(), comparator=None)
    assert [(p.path, p.message) for p in problems_from_validation(raised.value, UNIONS)] == [
        ("model.analysis.payloads.enabled", "answers are compared by the payload comparator: set comparator")
    ]


@pytest.mark.parametrize(
    ("settings", "protocol"),
    [
        ({}, "open-inference-v2"),
        ({"transformer": {"image": "registry.example.com/pre:1.0.0"}}, "torchserve"),
        ({"analysis": {"payloads": {"enabled": True, "protocol": "tfserving"}}}, "tfserving"),
    ],
)
def test_the_comparator_reads_answers_as_the_runtime_writes_them(settings: dict[str, Any], protocol: str) -> None:
    config = json.loads(comparator(iris(**settings))["ConfigMap", "inference-comparator"]["data"]["comparator.json"])
    (model,) = config["models"]
    assert model["protocol"] == protocol


def test_the_comparators_config_names_primary_shadows_window_and_tolerances() -> None:
    objects = comparator(iris(timeout="30s", analysis={"payloads": {"enabled": True, "sample": 0.25}}), bufferMib=32)
    config = json.loads(objects["ConfigMap", "inference-comparator"]["data"]["comparator.json"])
    assert config == {
        "maxBufferedBytes": 32 * 1024 * 1024,
        "maxBodyBytes": 1024 * 1024,
        "models": [
            {
                "namespace": "service",
                "model": "iris",
                "protocol": "open-inference-v2",
                "primary": "v1",
                "shadows": ["v3", "v4"],
                "windowSeconds": 40,
                "absoluteTolerance": 1e-6,
                "relativeTolerance": 1e-4,
                "minTextSimilarity": 0.9,
                "sample": 0.25,
            }
        ],
    }


def test_the_comparator_runs_hardened_with_its_pinned_image_and_restarts_on_a_new_config() -> None:
    objects = comparator(iris())
    deployment = objects["Deployment", "inference-comparator"]
    assert deployment["spec"]["replicas"] == 1  # the join needs both sides of a request in one process
    pod = deployment["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    assert container["image"] == pins.COMPARATOR_IMAGE
    assert pod["securityContext"]["runAsNonRoot"] is True
    assert pod["automountServiceAccountToken"] is False
    assert container["securityContext"]["readOnlyRootFilesystem"] is True
    assert container["resources"]["limits"] == {"cpu": "1", "memory": "512Mi"}
    annotations = deployment["spec"]["template"]["metadata"]["annotations"]
    assert annotations["prometheus.io/port"] == "9090"
    assert "version" not in deployment["spec"]["template"]["metadata"]["labels"]  # its metrics carry `version`
    other = comparator(iris(analysis={"payloads": {"enabled": True, "minPairs": 5, "sample": 0.5}}))
    checksum = CONFIG_CHECKSUM
    assert (
        other["Deployment", "inference-comparator"]["spec"]["template"]["metadata"]["annotations"][checksum]
        != (annotations[checksum])
    )


def test_only_the_captured_pods_and_prometheus_reach_the_comparator() -> None:
    objects = comparator(iris(), iris(name="churn"))
    ingress = objects["NetworkPolicy", "inference-comparator"]["spec"]["ingress"]
    captured = [rule["from"][0]["podSelector"]["matchLabels"] for rule in ingress[:-1]]
    assert captured == [
        {"app": model, "version": version} for model in ("iris", "churn") for version in ("v1", "v3", "v4")
    ]
    assert all(rule["ports"] == [{"protocol": "TCP", "port": 9001}] for rule in ingress[:-1])
    assert ingress[-1]["ports"] == [{"protocol": "TCP", "port": 9090}, {"protocol": "TCP", "port": 15020}]
    rules = objects["AuthorizationPolicy", "inference-comparator"]["spec"]["rules"]
    assert rules == [
        {
            "from": [
                {"source": {"principals": ["cluster.local/ns/service/sa/churn", "cluster.local/ns/service/sa/iris"]}}
            ],
            "to": [{"operation": {"ports": ["9001"]}}],
        }
    ]


def test_every_object_passes_the_kubernetes_and_istio_schemas() -> None:
    for obj in [*render(iris()).values(), *comparator(iris()).values()]:
        validate(obj)
