"""Declared calls between models, as rendered for real models: access in both layers for exactly
the declared edge, and the callee's URL in the caller's containers."""

from __future__ import annotations

from typing import Any

from pydantic import TypeAdapter

from inference_platform.platform.prometheus import MetricsScraper
from inference_platform.serving.access import Workload
from inference_platform.serving.inference_service.args import InferenceServiceArgs, model_workload
from inference_platform.serving.inference_service.manifests import model_manifests
from inference_platform.serving.runtimes import ModelSpec
from tests.owner_schemas import validate

MODEL_SPEC: TypeAdapter[ModelSpec] = TypeAdapter(ModelSpec)
NAMESPACE = "service"


def spec(name: str, runtime: str = "mlserver", **settings: Any) -> ModelSpec:
    versions = [{"name": "v1", "modelUri": f"pvc://models/{name}/v1", "weight": 100}]
    return MODEL_SPEC.validate_python({"name": name, "runtime": runtime, "versions": versions} | settings)


def render(
    model: ModelSpec, callers: list[Workload] | None = None, callees: list[Workload] | None = None
) -> dict[tuple[str, str], dict[str, Any]]:
    args = InferenceServiceArgs(
        model=model,
        namespace=NAMESPACE,
        domain="models.example.com",
        metrics_scraper=MetricsScraper(namespace="monitoring"),
        callers=callers or [],
        callees=callees or [],
    )
    manifests = model_manifests(args)
    for manifest in manifests:
        validate(manifest)
    return {(m["kind"], m["metadata"]["name"]): m for m in manifests}


def containers(objects: dict[tuple[str, str], dict[str, Any]], name: str) -> dict[str, dict[str, Any]]:
    pod = objects[("Deployment", name)]["spec"]["template"]["spec"]
    return {c["name"]: c for c in pod["containers"]}


def env(container: dict[str, Any]) -> dict[str, str]:
    return {e["name"]: e["value"] for e in container.get("env", [])}


TOKENIZER = {"image": "registry.example.com/tokenizer:1.2.0", "port": 9080}
TENSORS = {
    "inputs": [{"name": "x", "dataType": "FP32", "dims": [4]}],
    "outputs": [{"name": "y", "dataType": "FP32", "dims": [2]}],
}
EMBED = spec("text-embed", "triton", format="onnx", **TENSORS)
EMBED_WORKLOAD = model_workload(EMBED, NAMESPACE)


def test_each_model_runs_as_its_own_service_account_without_a_token() -> None:
    objects = render(spec("iris"))

    account = objects[("ServiceAccount", "iris")]
    assert account["automountServiceAccountToken"] is False
    pod = objects[("Deployment", "iris-v1")]["spec"]["template"]["spec"]
    assert pod["serviceAccountName"] == "iris"
    assert pod["automountServiceAccountToken"] is False


def test_a_caller_gets_each_callees_url_in_every_container() -> None:
    caller = spec("bert", "torchserve", transformer=TOKENIZER, calls=["text-embed"])

    objects = render(caller, callees=[EMBED_WORKLOAD])

    url = "http://text-embed.service.svc.cluster.local"
    for container in containers(objects, "bert-v1").values():
        assert env(container)["TEXT_EMBED_URL"] == url


def test_the_models_own_env_var_wins_over_the_generated_url() -> None:
    elsewhere = "http://embed.other.example.com"
    caller = spec("bert", calls=["text-embed"], env=[{"name": "TEXT_EMBED_URL", "value": elsewhere}])

    objects = render(caller, callees=[EMBED_WORKLOAD])

    [server] = containers(objects, "bert-v1").values()
    assert [e for e in server["env"] if e["name"] == "TEXT_EMBED_URL"] == [
        {"name": "TEXT_EMBED_URL", "value": elsewhere}
    ]


def test_the_caller_may_leave_for_the_callees_pods_on_its_serving_ports_only() -> None:
    objects = render(spec("bert", calls=["text-embed"]), callees=[EMBED_WORKLOAD])

    policy = objects[("NetworkPolicy", "bert")]["spec"]
    assert policy["egress"] == [
        {
            "to": [{"podSelector": {"matchLabels": {"app": "text-embed"}}}],
            "ports": [{"protocol": "TCP", "port": 8000}, {"protocol": "TCP", "port": 8001}],
        }
    ]
    # Calling opens nothing towards the caller.
    access = objects[("AuthorizationPolicy", "bert-access")]["spec"]["rules"]
    assert [rule["from"][0]["source"]["principals"] for rule in access] == [
        ["cluster.local/ns/istio-ingress/sa/istio-ingressgateway"]
    ]


def test_the_callee_admits_the_callers_pods_and_identity_on_its_serving_ports() -> None:
    bert = model_workload(spec("bert", calls=["text-embed"]), NAMESPACE)

    objects = render(EMBED, callers=[bert])

    ingress = objects[("NetworkPolicy", "text-embed")]["spec"]["ingress"]
    assert ingress[-1] == {
        "from": [{"podSelector": {"matchLabels": {"app": "bert"}}}],
        "ports": [{"protocol": "TCP", "port": 8000}, {"protocol": "TCP", "port": 8001}],
    }
    rules = objects[("AuthorizationPolicy", "text-embed-access")]["spec"]["rules"]
    assert rules[-1] == {
        "from": [{"source": {"principals": ["cluster.local/ns/service/sa/bert"]}}],
        "to": [{"operation": {"ports": ["8000", "8001"]}}],
    }
    assert "egress" not in objects[("NetworkPolicy", "text-embed")]["spec"]


def test_a_model_that_calls_nothing_gains_nothing() -> None:
    alone = render(spec("iris"))
    declared_empty = render(spec("iris", calls=[]))

    assert alone == declared_empty
    policy = alone[("NetworkPolicy", "iris")]["spec"]
    assert "egress" not in policy
    assert all("URL" not in name for c in containers(alone, "iris-v1").values() for name in env(c))


def test_serving_ports_are_the_pods_http_and_grpc_ports() -> None:
    """Callers' egress uses the callee's config; its pods must listen exactly there."""
    for model in (EMBED, spec("iris"), spec("bert", "torchserve", transformer=TOKENIZER)):
        objects = render(model)
        ports = {
            port["name"]: port["containerPort"]
            for container in containers(objects, f"{model.name}-v1").values()
            for port in container["ports"]
        }
        assert model.serving_ports == tuple(sorted(ports[name] for name in ("http", "grpc") if name in ports))


def test_the_gateway_reaches_only_the_port_it_routes_to_not_grpc() -> None:
    """The gateway's routes carry HTTP to the `http` port only: its gRPC port (Triton 8001) stays
    closed to the gateway in both layers, and open to a declared caller in the mesh."""
    caller = model_workload(spec("bert", "torchserve", calls=["text-embed"]), NAMESPACE)
    objects = render(EMBED, callers=[caller])
    gateway = {"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "istio-ingress"}}}

    ingress = objects[("NetworkPolicy", "text-embed")]["spec"]["ingress"]
    assert [rule["ports"] for rule in ingress if rule["from"] == [gateway]] == [[{"protocol": "TCP", "port": 8000}]]
    from_caller = [
        rule["ports"] for rule in ingress if rule["from"] == [{"podSelector": {"matchLabels": {"app": "bert"}}}]
    ]
    assert from_caller == [[{"protocol": "TCP", "port": 8000}, {"protocol": "TCP", "port": 8001}]]
    rules = objects[("AuthorizationPolicy", "text-embed-access")]["spec"]["rules"]
    by_source = {rule["from"][0]["source"]["principals"][0]: rule["to"] for rule in rules}
    assert by_source == {
        "cluster.local/ns/istio-ingress/sa/istio-ingressgateway": [{"operation": {"ports": ["8000"]}}],
        "cluster.local/ns/service/sa/bert": [{"operation": {"ports": ["8000", "8001"]}}],
    }
