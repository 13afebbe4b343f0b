"""A model's versions under KEDA: a ScaledObject instead of an HPA, and for a model that sleeps at
zero replicas, what wakes each version, the routes through the HTTP add-on's interceptor and the
interceptor's way in. Built as data, object by object."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import ValidationError

from inference_platform.config.errors import problems_from_validation
from inference_platform.platform.keda import HttpAddOnRef, KedaRef
from inference_platform.serving.inference_service.args import InferenceServiceArgs
from inference_platform.serving.inference_service.manifests import model_manifests
from inference_platform.stack.config import UNIONS
from tests.owner_schemas import validate

PROMETHEUS = "http://prometheus-server.monitoring.svc:80"
ADD_ON = HttpAddOnRef(namespace="keda")
INTERCEPTOR = "keda-add-ons-http-interceptor-proxy.keda.svc.cluster.local"
INTERCEPTOR_PODS = {
    "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "keda"}},
    "podSelector": {
        "matchLabels": {"app.kubernetes.io/component": "interceptor", "app.kubernetes.io/name": "http-add-on"}
    },
}


def iris(**settings: Any) -> dict[str, Any]:
    """v1 and v2 live at 90/10, v3 a 50 % shadow."""
    return {
        "name": "iris",
        "runtime": "mlserver",
        "versions": [
            {"name": "v1", "modelUri": "pvc://models/iris/v1", "weight": 90},
            {"name": "v2", "modelUri": "pvc://models/iris/v2", "weight": 10},
            {"name": "v3", "modelUri": "pvc://models/iris/v3", "mirrorPercent": 50},
        ],
        **settings,
    }


def render(model: dict[str, Any], *, keda: KedaRef | None = None, **args: Any) -> dict[tuple[str, str], dict[str, Any]]:
    built = InferenceServiceArgs.model_validate(
        {"model": model, "namespace": "service", "domain": "models.example.com", "keda": keda, **args}
    )
    return {(m["kind"], m["metadata"]["name"]): m for m in model_manifests(built)}


def keda(add_on: bool = True, gpu_source: str = "dcgm") -> KedaRef:
    return KedaRef.model_validate(
        {"prometheusUrl": PROMETHEUS, "gpuSource": gpu_source, "httpAddOn": ADD_ON if add_on else None}
    )


SLEEPS = {"minReplicas": 0, "maxReplicas": 3, "requestsPerSecond": 5}


def test_with_keda_a_version_gets_a_scaled_object_in_place_of_its_hpa() -> None:
    scaling = {"minReplicas": 2, "maxReplicas": 8, "cpuUtilization": 70, "memoryUtilization": 80}
    objects = render(iris(autoscaling=scaling | {"scaleDownStabilizationSeconds": 600}), keda=keda(add_on=False))
    assert not [key for key in objects if key[0] == "HorizontalPodAutoscaler"]
    scaled = objects["ScaledObject", "iris-v1"]
    assert scaled["apiVersion"] == "keda.sh/v1alpha1"
    assert scaled["metadata"]["annotations"] == {"scaledobject.keda.sh/transfer-hpa-ownership": "true"}
    assert scaled["spec"] == {
        "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "iris-v1"},
        "minReplicaCount": 2,
        "maxReplicaCount": 8,
        # The HPA KEDA makes is the one ours was: switching hands it over instead of adding one.
        "advanced": {
            "horizontalPodAutoscalerConfig": {
                "name": "iris-v1",
                "behavior": {"scaleDown": {"stabilizationWindowSeconds": 600}},
            }
        },
        "triggers": [
            {"type": "cpu", "name": "cpu", "metricType": "Utilization", "metadata": {"value": "70"}},
            {"type": "memory", "name": "memory", "metricType": "Utilization", "metadata": {"value": "80"}},
        ],
    }
    assert {key for key in objects if key[0] == "ScaledObject"} == {
        ("ScaledObject", f"iris-{v}") for v in ("v1", "v2", "v3")
    }
    # The Deployment leaves replicas to the autoscaler, as with an HPA.
    assert "replicas" not in objects["Deployment", "iris-v1"]["spec"]


def test_gpu_and_request_targets_become_prometheus_triggers_over_the_adapters_series() -> None:
    scaling = {"minReplicas": 1, "maxReplicas": 4, "gpuUtilization": 60, "requestsPerSecond": 2.5}
    gpu = {"gpu": {"mode": "exclusive", "count": 1}}
    triggers = render(iris(autoscaling=scaling, **gpu), keda=keda(add_on=False, gpu_source="hami"))[
        "ScaledObject", "iris-v2"
    ]["spec"]["triggers"]
    pods = 'up{job="kubernetes-pods",namespace="service",app="iris",version="v2"}'
    assert triggers == [
        {
            "type": "prometheus",
            "name": "gpu-utilization",
            "metadata": {
                "serverAddress": PROMETHEUS,
                "query": 'sum(avg_over_time(hami_container_device_utilization_ratio{namespace="service",pod!=""}[5m]) '
                f"and on(namespace, pod) {pods}) / 100 or vector(0)",
                "threshold": "0.6",
            },
        },
        {
            "type": "prometheus",
            "name": "requests-per-second",
            "metadata": {
                "serverAddress": PROMETHEUS,
                "query": 'sum(rate(istio_requests_total{namespace="service",pod!="",reporter="destination"}[1m]) '
                f"and on(namespace, pod) {pods}) or vector(0)",
                "threshold": "2.5",
            },
        },
    ]


def test_without_a_target_a_scaled_object_scales_on_cpu_at_80_as_an_hpa_would() -> None:
    objects = render(iris(autoscaling={"minReplicas": 1, "maxReplicas": 2}), keda=keda(add_on=False))
    assert objects["ScaledObject", "iris-v1"]["spec"]["triggers"] == [
        {"type": "cpu", "name": "cpu", "metricType": "Utilization", "metadata": {"value": "80"}}
    ]


def test_a_sleeping_live_version_is_woken_by_the_interceptor() -> None:
    objects = render(iris(autoscaling=SLEEPS | {"idleAfter": "20m"}), keda=keda())
    spec = objects["ScaledObject", "iris-v1"]["spec"]
    assert (spec["minReplicaCount"], spec["maxReplicaCount"], spec["cooldownPeriod"]) == (0, 3, 1200)
    # It may not sleep before `pulumi up` has seen it boot: the version's rollout budget.
    assert spec["initialCooldownPeriod"] == int(
        objects["Deployment", "iris-v1"]["metadata"]["annotations"]["pulumi.com/timeoutSeconds"]
    )
    assert spec["triggers"][-1] == {
        "type": "external-push",
        "name": "wake",
        "metadata": {"scalerAddress": "keda-add-ons-http-external-scaler.keda:9090", "interceptorRoute": "iris-v1"},
    }
    assert [t["name"] for t in spec["triggers"]] == ["requests-per-second", "wake"]


def test_a_sleeping_shadow_wakes_with_its_models_live_traffic() -> None:
    triggers = render(iris(autoscaling=SLEEPS), keda=keda())["ScaledObject", "iris-v3"]["spec"]["triggers"]
    assert triggers[-1] == {
        "type": "prometheus",
        "name": "wake",
        "metadata": {
            "serverAddress": PROMETHEUS,
            "query": 'sum(rate(istio_requests_total{reporter="destination",namespace="service",app="iris",'
            'version=~"v1|v2"}[1m])) or vector(0)',
            "threshold": "1000000000",
            "activationThreshold": "0",
        },
    }


def test_each_live_version_has_an_interceptor_route_within_the_models_timeout() -> None:
    objects = render(iris(autoscaling=SLEEPS, timeout="90s"), keda=keda())
    routes = {name for kind, name in objects if kind == "InterceptorRoute"}
    assert routes == {"iris-v1", "iris-v2"}  # not the shadow: mirrors never pass the interceptor
    assert objects["InterceptorRoute", "iris-v1"]["spec"] == {
        "target": {"service": "iris-v1", "port": 8080},
        "rules": [{"hosts": ["iris-v1.service.svc.cluster.local"]}],
        "timeouts": {"request": "90s", "responseHeader": "90s"},
        # hold: requests wait in the interceptor, so what is pending wakes the version
        "scalingMetric": {"concurrency": {"targetValue": 100}},
    }


def test_respond_answers_503_with_retry_after_and_wakes_on_the_request_rate() -> None:
    route = render(iris(autoscaling=SLEEPS | {"wake": "respond"}), keda=keda())["InterceptorRoute", "iris-v2"]["spec"]
    assert route["scalingMetric"] == {"requestRate": {"targetValue": 100, "window": "1m"}}
    assert route["coldStart"] == {
        "placeholder": {
            "response": {
                "statusCode": 503,
                "headers": {"Retry-After": "30", "Content-Type": "application/json"},
                "body": '{"error": "iris-v2 is waking up: retry after 30 seconds"}',
            }
        }
    }


def test_a_transformer_is_what_the_interceptor_reaches() -> None:
    model = iris(autoscaling=SLEEPS, transformer={"image": "registry.example.com/t:1", "port": 9080})
    objects = render(model, keda=keda())
    assert objects["InterceptorRoute", "iris-v1"]["spec"]["target"] == {"service": "iris-v1", "port": 9080}
    assert objects["NetworkPolicy", "iris-v1-wake"]["spec"]["ingress"][0]["ports"] == [
        {"protocol": "TCP", "port": 9080}
    ]


@pytest.mark.parametrize("name", ["iris", "iris-mesh"])
def test_routes_keep_their_weights_through_the_interceptor_and_mirror_straight_to_the_shadow(name: str) -> None:
    objects = render(iris(autoscaling=SLEEPS), keda=keda())
    routes = [route for route in objects["VirtualService", name]["spec"]["http"] if "redirect" not in route]
    assert routes
    for route in routes:
        assert route["route"] == [
            {
                "destination": {"host": INTERCEPTOR, "port": {"number": 8080}},
                "headers": {"request": {"set": {"Host": f"iris-{version}.service.svc.cluster.local"}}},
                "weight": weight,
            }
            for version, weight in (("v1", 90), ("v2", 10))
        ]
        assert route["mirrors"] == [
            {
                "destination": {"host": "iris.service.svc.cluster.local", "subset": "v3", "port": {"number": 80}},
                "percentage": {"value": 50},
            }
        ]


def test_the_interceptor_may_reach_exactly_the_live_versions_http_port() -> None:
    objects = render(iris(autoscaling=SLEEPS), keda=keda())
    assert {name for kind, name in objects if name.endswith("-wake")} == {"iris-v1-wake", "iris-v2-wake"}
    network = objects["NetworkPolicy", "iris-v1-wake"]["spec"]
    assert network == {
        "podSelector": {"matchLabels": {"app": "iris", "version": "v1"}},
        "policyTypes": ["Ingress"],
        "ingress": [
            {
                "from": [INTERCEPTOR_PODS],
                "ports": [{"protocol": "TCP", "port": 8080}],
            }
        ],
    }
    mesh = objects["AuthorizationPolicy", "iris-v1-wake"]["spec"]
    assert mesh == {
        "selector": {"matchLabels": {"app": "iris", "version": "v1"}},
        "action": "ALLOW",
        "rules": [
            {
                "from": [{"source": {"principals": ["cluster.local/ns/keda/sa/keda-add-ons-http-interceptor"]}}],
                "to": [{"operation": {"ports": ["8080"]}}],
            }
        ],
    }


def test_a_caller_of_a_sleeping_model_may_reach_the_interceptor() -> None:
    callee = {
        "name": "embed",
        "namespace": "service",
        "serviceAccount": "embed",
        "ports": [8000],
        "wakesThrough": ADD_ON,
    }
    egress = render(iris(), callees=[callee])["NetworkPolicy", "iris"]["spec"]["egress"]
    assert egress == [
        {"to": [{"podSelector": {"matchLabels": {"app": "embed"}}}], "ports": [{"protocol": "TCP", "port": 8000}]},
        {
            "to": [INTERCEPTOR_PODS],
            "ports": [{"protocol": "TCP", "port": 8080}],
        },
    ]


def test_a_disruption_budget_never_blocks_the_step_to_zero() -> None:
    """maxUnavailable, never minAvailable: a budget only ever limits evictions, and allows zero pods."""
    budget = render(iris(autoscaling=SLEEPS), keda=keda())["PodDisruptionBudget", "iris-v1"]["spec"]
    assert budget == {"maxUnavailable": 1, "selector": {"matchLabels": {"app": "iris", "version": "v1"}}}


def test_a_model_that_does_not_sleep_renders_alike_with_or_without_the_add_on() -> None:
    model = iris(autoscaling={"minReplicas": 1, "maxReplicas": 3, "requestsPerSecond": 5})
    assert render(model, keda=keda(add_on=True)) == render(model, keda=keda(add_on=False))


def test_every_object_passes_the_kubernetes_and_istio_schemas() -> None:
    objects = render(iris(autoscaling=SLEEPS | {"wake": "respond"}), keda=keda())
    builtin = [o for o in objects.values() if not o["apiVersion"].startswith(("keda.sh", "http.keda.sh"))]
    for obj in builtin:
        validate(obj)


def refused(model: dict[str, Any], keda_ref: KedaRef | None) -> list[tuple[str, str]]:
    with pytest.raises(ValidationError) as raised:
        InferenceServiceArgs.model_validate(
            {"model": model, "namespace": "service", "domain": "models.example.com", "keda": keda_ref}
        )
    return [(p.path, p.message) for p in problems_from_validation(raised.value, UNIONS)]


@pytest.mark.parametrize("keda_ref", [None, keda(add_on=False)], ids=["no-keda", "no-add-on"])
def test_a_model_cannot_sleep_without_the_add_on(keda_ref: KedaRef | None) -> None:
    assert refused(iris(autoscaling=SLEEPS), keda_ref) == [
        (
            "model.autoscaling.minReplicas",
            "a model sleeps at zero only with KEDA and its HTTP add-on: set keda.httpAddOn",
        )
    ]


def test_protection_still_applies_at_the_gateway_before_the_interceptor() -> None:
    """The gateway's guards (client addresses, headers, JWT) and the pods' rate limit are those of
    the same model awake: they select the gateway's and the model's pods, not the route's
    destination, so a request is judged at the gateway before the interceptor holds it."""
    protection = {
        "rateLimit": {"requestsPerSecond": 50},
        "clients": {"allowCidrs": ["10.0.0.0/8"]},
        "requireHeaders": [{"name": "x-team", "values": ["ml"]}],
        "jwt": {"issuer": "https://auth.example.com", "jwksUri": "https://auth.example.com/jwks"},
    }
    kinds = {"EnvoyFilter", "RequestAuthentication", "AuthorizationPolicy"}
    asleep = render(iris(autoscaling=SLEEPS, protection=protection), keda=keda())
    awake = render(iris(autoscaling=SLEEPS | {"minReplicas": 1}, protection=protection), keda=keda())
    guards = {key: obj for key, obj in asleep.items() if key[0] in kinds and not key[1].endswith("-wake")}
    assert {kind for kind, _ in guards} == kinds
    assert guards == {key: obj for key, obj in awake.items() if key[0] in kinds}
