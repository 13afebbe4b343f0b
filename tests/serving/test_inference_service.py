"""The InferenceService component through Pulumi's mocks: its children, parents and outputs."""

from __future__ import annotations

from typing import Any

import pulumi

from inference_platform.cli.render import RenderResult
from inference_platform.platform.gpu_nodes import GpuNodes
from inference_platform.serving.inference_service import InferenceService, InferenceServiceArgs
from inference_platform.serving.inference_service.pods import deployment
from inference_platform.serving.inference_service.routing import mesh_virtual_service, virtual_service
from inference_platform.serving.runtimes.mlserver import MLServerModel
from tests.conftest import base_config
from tests.owner_schemas import validate

TYPE = "inference-platform:serving:InferenceService"


def args() -> InferenceServiceArgs:
    """The base config's iris: v1 and v2 live at 90/10, v3 a 50 % shadow."""
    model = MLServerModel.model_validate(base_config()["inference-platform:models"][0])
    return InferenceServiceArgs(model=model, namespace="service", domain="models.example.com", url_scheme="https")


@pulumi.runtime.test
def test_outputs_are_urls_curl_weights_and_mirrors(pulumi_mocks: RenderResult) -> pulumi.Output[Any]:
    service = InferenceService("iris", args())

    def check(values: list[Any]) -> None:
        urls, curl, weights, mirrors = values
        assert urls == ["https://iris.models.example.com/", "https://models.example.com/models/iris/"]
        assert curl.startswith("curl -sS https://iris.models.example.com/v2/models/iris/infer ")
        assert weights == {"v1": 90, "v2": 10}
        assert mirrors == {"v3": 50}

    return pulumi.Output.all(service.urls, service.curl, service.weights, service.mirrors).apply(check)


def test_children_are_typed_resources_parented_to_the_component(pulumi_mocks: RenderResult) -> None:
    @pulumi.runtime.test
    def build() -> pulumi.Output[str]:
        return InferenceService("iris", args()).urn

    build()  # returns once every registration has finished

    component = next(r for r in pulumi_mocks.registrations if r.type == TYPE)
    assert not component.custom
    children = [r for r in pulumi_mocks.registrations if r.parent == component.urn]
    assert sorted((c.type, c.name) for c in children) == sorted(
        [("kubernetes:core/v1:ConfigMap", f"iris-{v}") for v in ("v1", "v2", "v3")]
        + [("kubernetes:apps/v1:Deployment", f"iris-{v}") for v in ("v1", "v2", "v3")]
        + [("kubernetes:core/v1:Service", f"iris-{v}") for v in ("v1", "v2", "v3")]
        + [
            ("kubernetes:core/v1:ServiceAccount", "iris"),
            ("kubernetes:core/v1:Service", "iris"),
            ("kubernetes:networking.istio.io/v1:DestinationRule", "iris"),
            ("kubernetes:networking.istio.io/v1:VirtualService", "iris"),
            ("kubernetes:networking.istio.io/v1:VirtualService", "iris-mesh"),
            ("kubernetes:security.istio.io/v1:AuthorizationPolicy", "iris-access"),
            ("kubernetes:networking.k8s.io/v1:NetworkPolicy", "iris"),
        ]
    )
    assert len(pulumi_mocks.registrations) == 1 + len(children)


def test_routes_split_live_traffic_and_mirror_shadows() -> None:
    spec = virtual_service(args())["spec"]

    assert spec["gateways"] == ["istio-ingress/inference-gateway"]
    assert spec["hosts"] == ["iris.models.example.com", "models.example.com"]
    by_path, by_host, _ = spec["http"]
    assert by_path["match"] == [{"uri": {"prefix": "/models/iris/"}}]
    assert by_path["rewrite"] == {"uri": "/"}
    assert by_host["match"] == [{"authority": {"prefix": "iris.models.example.com"}}]
    for route in (by_path, by_host):
        assert [(r["destination"]["subset"], r["weight"]) for r in route["route"]] == [("v1", 90), ("v2", 10)]
        assert [(m["destination"]["subset"], m["percentage"]["value"]) for m in route["mirrors"]] == [("v3", 50)]
        assert {r["destination"]["host"] for r in route["route"]} == {"iris.service.svc.cluster.local"}
        assert route["timeout"] == "60s"
        # One attempt may take the whole timeout; only failures before the request reached the
        # server are retried (a 503 may be the server's own answer).
        assert route["retries"] == {
            "attempts": 2,
            "perTryTimeout": "60s",
            "retryOn": "connect-failure,refused-stream,reset-before-request",
        }


def test_the_path_without_its_trailing_slash_is_redirected_to_it() -> None:
    """`/models/iris` matches no prefix `/models/iris/`: the gateway answers it with a redirect, 308
    so that a POST stays a POST with its body (301 and 302 let clients turn it into a GET)."""
    service = virtual_service(args())
    validate(service)
    routes = service["spec"]["http"]
    assert routes[-1] == {
        "name": "add-slash",
        "match": [{"uri": {"exact": "/models/iris"}}],
        "redirect": {"uri": "/models/iris/", "redirectCode": 308},
    }
    # After the by-host route: at iris.models.example.com every path is the server's own.
    assert [route["name"] for route in routes] == ["by-path", "by-host", "add-slash"]


def test_calls_from_inside_the_mesh_get_the_same_split_and_mirrors() -> None:
    """A pipeline or a calling model reaches the model's Service through its own sidecar: the
    sidecar must split and mirror as the gateway does, or shadows would take live traffic."""
    gateway_route = virtual_service(args())["spec"]["http"][1]
    mesh = mesh_virtual_service(args())

    assert mesh["metadata"]["name"] == "iris-mesh"
    assert mesh["spec"]["gateways"] == ["mesh"]
    assert mesh["spec"]["hosts"] == ["iris.service.svc.cluster.local"]
    [route] = mesh["spec"]["http"]
    assert "match" not in route
    assert {k: v for k, v in route.items() if k != "name"} == {
        k: v for k, v in gateway_route.items() if k not in ("name", "match")
    }


def transformer_pod(transformer: dict[str, Any]) -> dict[str, Any]:
    config = base_config()["inference-platform:models"][0] | {"transformer": transformer}
    model = MLServerModel.model_validate(config)
    spec: dict[str, Any] = deployment(
        InferenceServiceArgs(model=model, namespace="service", domain="models.example.com"),
        model.versions[0],
        model.plan(model.versions[0], GpuNodes()),
    )["spec"]["template"]["spec"]
    return spec


def test_a_transformer_takes_requests_and_calls_the_server_on_localhost() -> None:
    pod = transformer_pod(
        {
            "image": "registry.example.com/pre:1.0.0",
            "port": 9090,
            "args": ["--workers", "2"],
            "env": [{"name": "MODEL_NAME", "value": "renamed"}],
            "healthPath": "/healthz",
            "runAsUser": 1001,
        }
    )

    transformer, server = pod["containers"]
    assert transformer["name"] == "transformer"
    assert transformer["args"] == ["--workers", "2"]
    assert "command" not in transformer
    assert {e["name"]: e["value"] for e in transformer["env"]} == {
        "MODEL_NAME": "renamed",  # the team's own value wins
        "NVIDIA_VISIBLE_DEVICES": "none",
        "PORT": "9090",
        "PREDICTOR_HOST": "localhost:8080",
    }
    assert transformer["ports"] == [{"name": "http", "containerPort": 9090, "protocol": "TCP"}]
    assert transformer["readinessProbe"]["httpGet"] == {"path": "/healthz", "port": 9090}
    assert transformer["startupProbe"]["failureThreshold"] == 60
    assert transformer["livenessProbe"]["tcpSocket"] == {"port": 9090}
    assert transformer["securityContext"]["runAsUser"] == 1001
    assert transformer["resources"] == {
        "requests": {"cpu": "100m", "memory": "256Mi"},
        "limits": {"cpu": "1", "memory": "1Gi"},
    }
    # The server's own HTTP port steps aside for the transformer's.
    assert {p["name"] for p in server["ports"]} >= {"http-predictor"}
    assert "http" not in {p["name"] for p in server["ports"]}


def test_a_transformer_without_a_health_path_is_checked_on_its_port() -> None:
    [transformer, _] = transformer_pod({"image": "registry.example.com/pre:1.0.0", "command": ["serve"]})["containers"]

    assert transformer["command"] == ["serve"]
    assert "args" not in transformer
    assert transformer["readinessProbe"]["tcpSocket"] == {"port": 9080}
    assert "runAsUser" not in transformer["securityContext"]
