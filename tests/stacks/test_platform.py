"""The platform layer through the real program: pinned charts, their values, and install order."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pulumi
import pytest

from inference_platform import pins
from inference_platform.cli.render import Registration, RenderResult
from inference_platform.cli.render_files import chart_documents
from inference_platform.platform.gpu_nodes import GPU_RESOURCE
from inference_platform.platform.hami import GPU_CORES_RESOURCE, GPU_MEMORY_PERCENT_RESOURCE, GPU_MEMORY_RESOURCE
from tests.conftest import base_config, full_config
from tests.serving.test_multi_node import group

Render = Callable[[dict[str, Any]], RenderResult]


@pytest.fixture(scope="module")
def full(tmp_path_factory: pytest.TempPathFactory) -> RenderResult:
    from inference_platform.cli.render import run_program
    from inference_platform.cli.stack_file import read_stack_file
    from tests.conftest import write_stack_file

    path = write_stack_file(tmp_path_factory.mktemp("platform") / "Pulumi.full.yaml", full_config())
    return run_program("full", read_stack_file(path))


def charts(result: RenderResult) -> dict[str, dict[str, Any]]:
    return {chart["name"]: chart for chart in chart_documents(result)}


def registration(result: RenderResult, type_: str, name: str) -> Registration:
    return next(r for r in result.registrations if r.type == type_ and r.name == name)


def depends_on(result: RenderResult, dependent: Registration) -> set[str]:
    names = {r.urn: r.name for r in result.registrations}
    return {names[urn] for urn in dependent.dependencies if urn in names}


def test_every_chart_comes_from_its_pin(full: RenderResult) -> None:
    expected = {
        "istio-base": (pins.ISTIO_BASE, "istio-system", "helm.v4.Chart"),
        "istiod": (pins.ISTIOD, "istio-system", "helm.v4.Chart"),
        "istio-cni": (pins.ISTIO_CNI, "istio-system", "helm.v4.Chart"),
        "istio-ingressgateway": (pins.ISTIO_GATEWAY, "istio-ingress", "helm.v4.Chart"),
        "prometheus": (pins.PROMETHEUS, "monitoring", "helm.v4.Chart"),
        "prometheus-adapter": (pins.PROMETHEUS_ADAPTER, "monitoring", "helm.v4.Chart"),
        "dcgm-exporter": (pins.DCGM_EXPORTER, "gpu-monitoring", "helm.v4.Chart"),
        "hami": (pins.HAMI, "hami-system", "helm.v3.Release"),
        "metrics-server": (pins.METRICS_SERVER, "metrics-server", "helm.v4.Chart"),
        "grafana": (pins.GRAFANA, "monitoring", "helm.v4.Chart"),
        "lws": (pins.LWS, "lws-system", "helm.v4.Chart"),
        # chat's inference pools, one a version, in the models' namespace.
        **{f"chat-{v}": (pins.INFERENCE_POOL, "service", "helm.v4.Chart") for v in ("v1", "v2", "v3")},
    }
    found = charts(full)
    files = {name: found.pop(name)["file"] for name in list(found) if found[name]["kind"] == "yaml.v2.ConfigFile"}
    assert files == {
        "gateway-api-crds": pins.GATEWAY_API_CRDS.url,
        "inference-extension-crds": pins.INFERENCE_EXTENSION_CRDS.url,
    }
    assert found.keys() == expected.keys()
    for name, (pin, namespace, kind) in expected.items():
        chart = found[name]
        # An OCI chart is named by its reference alone (helm.v4.Chart takes no repository for it).
        source = (None, f"{pin.repository}/{pin.chart}") if pin.is_oci else (pin.repository, pin.chart)
        assert (chart["repository"], chart["chart"], chart["version"]) == (*source, pin.version)
        assert (chart["namespace"], chart["kind"]) == (namespace, kind)


def test_istio_installs_in_order_and_istio_objects_wait_for_istiod(full: RenderResult) -> None:
    chart_type = "kubernetes:helm.sh/v4:Chart"
    assert "istio-base" in depends_on(full, registration(full, chart_type, "istiod"))
    # Istio's order: base, istiod, cni, gateway.
    assert "istiod" in depends_on(full, registration(full, chart_type, "istio-cni"))
    gateway_chart = registration(full, chart_type, "istio-ingressgateway")
    assert {"istiod", "istio-cni", "istio-ingress"} <= depends_on(full, gateway_chart)
    gateway = registration(full, "kubernetes:networking.istio.io/v1:Gateway", "inference-gateway")
    assert {"istiod", "istio-ingress"} <= depends_on(full, gateway)
    istio_objects = [r for r in full.manifests if r.type.startswith("kubernetes:networking.istio.io/v1:")]
    owners = full.component_labels()
    model_objects = [
        r
        for r in full.manifests
        if owners[r.urn].startswith("inference-platform:serving:") and r.inputs["kind"] != "Namespace"
    ]
    assert len(model_objects) > 30
    for dependent in istio_objects + model_objects:
        assert "istiod" in depends_on(full, dependent), dependent.name
    # Injected pods' istio-validation fails on a node without the CNI agent.
    for dependent in model_objects:
        assert "istio-cni" in depends_on(full, dependent), dependent.name


def test_istio_values_avoid_the_validator_conflict_and_label_the_gateway(full: RenderResult) -> None:
    found = charts(full)
    for name in ("istio-base", "istiod"):
        assert found[name]["values"]["base"]["validationFailurePolicy"] == "Fail"
    # The injector's istio-validation instead of istio-init: model namespaces enforce restricted.
    assert found["istiod"]["values"]["cni"] == {"enabled": True}
    gateway = found["istio-ingressgateway"]["values"]
    assert gateway["labels"] == {"istio": "ingressgateway"}
    assert gateway["service"]["type"] == "LoadBalancer"
    assert all("nodePort" not in port for port in gateway["service"]["ports"])
    assert found["istiod"]["values"]["global"]["tag"] == pins.ISTIO_VERSION


def test_the_gateway_serves_every_model_host_with_tls(full: RenderResult) -> None:
    gateway = registration(full, "kubernetes:networking.istio.io/v1:Gateway", "inference-gateway").inputs
    http, https = gateway["spec"]["servers"]
    assert gateway["spec"]["selector"] == {"istio": "ingressgateway"}
    assert http["hosts"] == https["hosts"] == ["*.models.example.com", "models.example.com"]
    assert http["tls"] == {"httpsRedirect": True}
    assert https["tls"] == {"mode": "SIMPLE", "credentialName": "models-tls"}
    assert full.outputs["models"]["iris"]["urls"][0] == "https://iris.models.example.com/"


def test_node_ports_for_kind(render_config: Render) -> None:
    config = base_config() | {"inference-platform:platform": {"ingress": {"serviceType": "NodePort"}}}
    gateway = charts(render_config(config))["istio-ingressgateway"]["values"]["service"]
    assert gateway["type"] == "NodePort"
    assert {p["name"]: p.get("nodePort") for p in gateway["ports"]} == {
        "status-port": None,
        "http2": 30080,
        "https": 30443,
    }


def test_gpu_components_agree_with_what_models_request(full: RenderResult) -> None:
    found = charts(full)
    hami = found["hami"]["values"]
    assert hami["scheduler"]["kubeScheduler"]["image"]["tag"] == "v1.30.4"
    assert (hami["resourceName"], hami["resourceMem"], hami["resourceMemPercentage"], hami["resourceCores"]) == (
        GPU_RESOURCE,
        GPU_MEMORY_RESOURCE,
        GPU_MEMORY_PERCENT_RESOURCE,
        GPU_CORES_RESOURCE,
    )
    assert hami["devicePlugin"]["nvidiaNodeSelector"] == {"gpu": "on"}
    assert hami["devicePlugin"]["service"]["annotations"]["prometheus.io/port"] == "9394"

    dcgm = found["dcgm-exporter"]["values"]
    assert dcgm["serviceMonitor"] == {"enabled": False}
    assert dcgm["service"]["annotations"] == {
        "prometheus.io/scrape": "true",
        "prometheus.io/port": "9400",
        "prometheus.io/path": "/metrics",
    }
    assert dcgm["nodeSelector"] == {"gpu": "on"}
    assert dcgm["tolerations"] == [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}]

    # Under HAMi, container_gpu_usage comes from HAMi's per-container metric.
    adapter = found["prometheus-adapter"]["values"]["rules"]["custom"]
    assert adapter[0]["seriesQuery"].startswith("hami_container_device_utilization_ratio{")


def test_without_hami_gpu_usage_comes_from_dcgm(render_config: Render) -> None:
    config = base_config() | {"inference-platform:platform": {"dcgmExporter": {"enabled": True}}}
    adapter = charts(render_config(config))["prometheus-adapter"]["values"]["rules"]["custom"]
    assert adapter[0]["seriesQuery"].startswith("DCGM_FI_DEV_GPU_UTIL{")


def test_raw_values_are_laid_over_the_generated_ones(render_config: Render) -> None:
    config = base_config() | {
        "inference-platform:platform": {
            "prometheus": {"values": {"server": {"resources": {"requests": {"memory": "4Gi"}}, "retention": "30d"}}},
            "ingress": {"values": {"istiod": {"env": {"PILOT_TRACE_SAMPLING": "1.0"}}}},
        }
    }
    found = charts(render_config(config))
    server = found["prometheus"]["values"]["server"]
    assert server["resources"] == {
        "requests": {"cpu": "500m", "memory": "4Gi"},
        "limits": {"cpu": "2", "memory": "8Gi"},
    }
    assert server["retention"] == "30d"
    assert server["persistentVolume"] == {"enabled": True, "size": "50Gi"}  # generated values stay
    # istiod's chart reads its env at the top level (`pilot.env` is ignored since the values were flattened).
    assert found["istiod"]["values"]["env"] == {"ENABLE_NATIVE_SIDECARS": "true", "PILOT_TRACE_SAMPLING": "1.0"}
    assert "pilot" not in found["istiod"]["values"]


def test_each_component_can_be_switched_off(render_config: Render) -> None:
    config = base_config() | {
        "inference-platform:platform": {
            "ingress": {"enabled": False},
            "prometheus": {"enabled": False},
            "prometheusAdapter": {"enabled": False},
        }
    }
    result = render_config(config)
    assert not result.charts
    virtual_service = registration(result, "kubernetes:networking.istio.io/v1:VirtualService", "iris").inputs
    assert virtual_service["spec"]["gateways"] == ["istio-ingress/inference-gateway"]


def test_platform_components_are_typed_components(full: RenderResult) -> None:
    components = {r.type for r in full.registrations if not r.custom}
    assert {
        "inference-platform:platform:IngressGateway",
        "inference-platform:platform:Prometheus",
        "inference-platform:platform:PrometheusAdapter",
        "inference-platform:platform:DcgmExporter",
        "inference-platform:platform:Hami",
    } <= components


def test_the_gateway_selector_is_configurable_and_used_everywhere(render_config: Render) -> None:
    config = base_config() | {
        "inference-platform:platform": {"ingress": {"gateway": {"selector": {"istio": "public-gateway"}}}}
    }
    config["inference-platform:models"][0]["protection"] = {"clients": {"denyCidrs": ["10.6.6.0/24"]}}
    result = render_config(config)
    assert charts(result)["istio-ingressgateway"]["values"]["labels"] == {"istio": "public-gateway"}
    gateway = registration(result, "kubernetes:networking.istio.io/v1:Gateway", "inference-gateway").inputs
    assert gateway["spec"]["selector"] == {"istio": "public-gateway"}
    policy = registration(result, "kubernetes:security.istio.io/v1:AuthorizationPolicy", "iris-gateway").inputs
    assert policy["spec"]["selector"] == {"matchLabels": {"istio": "public-gateway"}}


@pytest.mark.parametrize(
    ("ingress", "expected"),
    [
        ({}, "Local"),
        ({"serviceType": "NodePort"}, "Local"),
        ({"externalTrafficPolicy": "Cluster"}, "Cluster"),
        ({"serviceType": "ClusterIP"}, None),
    ],
)
def test_the_gateway_keeps_client_addresses_by_default(
    render_config: Render, ingress: dict[str, str], expected: str | None
) -> None:
    """Allow and deny lists need the client's address: Local keeps it past the node."""
    config = base_config() | {"inference-platform:platform": {"ingress": ingress}}
    service = charts(render_config(config))["istio-ingressgateway"]["values"]["service"]
    assert service.get("externalTrafficPolicy") == expected


def test_every_component_registers_the_outputs_a_user_needs(full: RenderResult) -> None:
    components = {r.urn: r for r in full.registrations if not r.custom and r.type.startswith("inference-platform:")}
    assert full.component_outputs.keys() == components.keys()
    outputs = {f"{components[urn].type}::{components[urn].name}": out for urn, out in full.component_outputs.items()}
    assert outputs["inference-platform:platform:IngressGateway::ingress"] == {
        "gateway": "istio-ingress/inference-gateway",
        "service": "istio-ingressgateway.istio-ingress.svc.cluster.local",
    }
    assert outputs["inference-platform:platform:Prometheus::prometheus"] == {
        "url": "http://prometheus-server.monitoring.svc:80"
    }
    iris = outputs["inference-platform:serving:InferenceService::iris"]
    assert iris["urls"] == ["https://iris.models.example.com/", "https://models.example.com/models/iris/"]
    assert (iris["weights"], iris["mirrors"]) == ({"v1": 90, "v2": 10}, {"v3": 50})


def test_hamis_device_plugin_selects_hamis_nodes_among_the_gpu_nodes(render_config: Render) -> None:
    """Helm merges maps, so the chart's `gpu: "on"` applies whatever we pass: it is written out."""
    config = base_config() | {"inference-platform:platform": {"kubernetesVersion": "1.30.4", "hami": {"enabled": True}}}
    hami = charts(render_config(config))["hami"]["values"]
    assert hami["devicePlugin"]["nvidiaNodeSelector"] == {"gpu": "on", "nvidia.com/gpu.present": "true"}


def test_models_wait_for_hami_when_it_shares_gpus(full: RenderResult) -> None:
    owners = full.component_labels()
    release = next(r for r in full.charts if owners[r.urn] == "inference-platform:platform:Hami::hami")
    serving = [r for r in full.manifests if owners[r.urn].startswith("inference-platform:serving:InferenceService")]
    assert len(serving) > 30
    for dependent in serving:
        assert release.urn in dependent.dependencies, dependent.name


def test_hamis_kube_scheduler_comes_from_registry_k8s_io_or_a_mirror(render_config: Render) -> None:
    platform: dict[str, Any] = {"kubernetesVersion": "1.31.2", "hami": {"enabled": True}}
    image = charts(render_config(base_config() | {"inference-platform:platform": platform}))["hami"]["values"]
    assert image["scheduler"]["kubeScheduler"]["image"] == {
        "registry": "registry.k8s.io",
        "repository": "kube-scheduler",
        "tag": "v1.31.2",
    }
    platform["hami"]["kubeSchedulerImage"] = {"registry": "mirror.internal:5000", "repository": "k8s/kube-scheduler"}
    image = charts(render_config(base_config() | {"inference-platform:platform": platform}))["hami"]["values"]
    assert image["scheduler"]["kubeScheduler"]["image"] == {
        "registry": "mirror.internal:5000",
        "repository": "k8s/kube-scheduler",
        "tag": "v1.31.2",
    }


@pytest.mark.parametrize(
    ("autoscaling", "setting", "installed"),
    [
        (None, "auto", False),
        ({"minReplicas": 1, "maxReplicas": 3, "requestsPerSecond": 5}, "auto", False),
        ({"minReplicas": 1, "maxReplicas": 3, "cpuUtilization": 70}, "auto", True),
        ({"minReplicas": 1, "maxReplicas": 3, "memoryUtilization": 70}, "auto", True),
        # An HPA with no target scales on CPU, as Kubernetes would.
        ({"minReplicas": 1, "maxReplicas": 3}, "auto", True),
        # Equal bounds: a fixed replica count, no HPA.
        ({"minReplicas": 2, "maxReplicas": 2, "cpuUtilization": 70}, "auto", False),
        ({"minReplicas": 1, "maxReplicas": 3, "cpuUtilization": 70}, False, False),
        (None, True, True),
    ],
)
def test_metrics_server_comes_with_cpu_or_memory_autoscaling(
    render_config: Render, autoscaling: dict[str, Any] | None, setting: str | bool, installed: bool
) -> None:
    config = base_config() | {"inference-platform:platform": {"metricsServer": {"enabled": setting}}}
    if autoscaling is not None:
        config["inference-platform:models"][1]["autoscaling"] = autoscaling
    result = render_config(config)
    assert ("metrics-server" in charts(result)) == installed
    assert ("resourceMetrics" in result.outputs["platform"]) == installed


def test_grafana_is_off_by_default_and_never_holds_the_password_in_values(render_config: Render) -> None:
    assert "grafana" not in charts(render_config(base_config()))
    config = base_config() | {
        "inference-platform:platform": {"grafana": {"enabled": True, "adminPassword": "p4ssw0rd-for-grafana"}}
    }
    result = render_config(config)
    values = charts(result)["grafana"]["values"]
    assert "p4ssw0rd" not in str(values)
    assert values["admin"] == {
        "existingSecret": "grafana-admin",
        "userKey": "admin-user",
        "passwordKey": "admin-password",
    }
    (secret,) = [r.inputs for r in result.manifests if r.inputs["kind"] == "Secret"]
    assert secret["stringData"] == {"admin-password": "[secret]", "admin-user": "[secret]"}
    (source,) = values["datasources"]["datasources.yaml"]["datasources"]
    assert source["url"] == "http://prometheus-server.monitoring.svc:80"
    assert sorted(values["dashboards"]["inference-platform"]) == ["iris"]  # churn has one version
    assert result.outputs["platform"]["grafana"] == "http://grafana.monitoring.svc:80"
    assert not [r for r in result.manifests if r.inputs["kind"] == "VirtualService" and r.name == "grafana"]
    # It never talks to the API: no RBAC (the chart's empty ClusterRole would differ from what the
    # API server stores of it on every `pulumi up`, as the rehearsal showed).
    assert values["automountServiceAccountToken"] is False
    assert values["rbac"] == {"create": False}


def test_grafana_can_be_served_through_the_gateway(render_config: Render) -> None:
    grafana = {"enabled": True, "adminPassword": "p4ssw0rd-for-grafana", "expose": True}
    result = render_config(base_config() | {"inference-platform:platform": {"grafana": grafana}})
    (route,) = [r.inputs for r in result.manifests if r.inputs["kind"] == "VirtualService" and r.name == "grafana"]
    assert route["spec"]["hosts"] == ["grafana.models.example.com"]
    assert route["spec"]["gateways"] == ["istio-ingress/inference-gateway"]
    destination = route["spec"]["http"][0]["route"][0]["destination"]
    assert destination == {"host": "grafana.monitoring.svc.cluster.local", "port": {"number": 80}}
    assert result.outputs["platform"]["grafana"] == "http://grafana.models.example.com/"


# --- KEDA ------------------------------------------------------------------------------------


def keda_stack(sleeps: bool, adapter: bool | None = None) -> dict[str, Any]:
    config = base_config()
    config["inference-platform:platform"] = {"autoscaler": "keda"}
    if adapter is not None:
        config["inference-platform:platform"]["prometheusAdapter"] = {"enabled": adapter}
    scaling = {"minReplicas": 0 if sleeps else 1, "maxReplicas": 3, "requestsPerSecond": 5}
    config["inference-platform:models"][0]["autoscaling"] = scaling
    return config


def test_keda_comes_from_its_pins_and_the_add_on_only_when_a_model_sleeps(render_config: Render) -> None:
    sleeping = charts(render_config(keda_stack(sleeps=True)))
    for name, pin in (("keda", pins.KEDA), ("keda-add-ons-http", pins.KEDA_HTTP_ADD_ON)):
        chart = sleeping[name]
        assert (chart["repository"], chart["chart"], chart["version"]) == (pin.repository, pin.chart, pin.version)
        assert (chart["namespace"], chart["kind"]) == ("keda", "helm.v4.Chart")
    assert sleeping["keda-add-ons-http"]["values"]["podSecurityContext"]["runAsNonRoot"] is True
    awake = charts(render_config(keda_stack(sleeps=False)))
    assert "keda" in awake
    assert "keda-add-ons-http" not in awake
    # KEDA replaces prometheus-adapter unless it is asked for; both then serve their own API
    assert "prometheus-adapter" not in sleeping
    assert "prometheus-adapter" in charts(render_config(keda_stack(sleeps=True, adapter=True)))


def test_the_add_on_waits_for_keda_and_istiod_and_scaled_objects_for_both(render_config: Render) -> None:
    """The add-on's chart renders a ScaledObject for its own interceptor (KEDA's CRD), and the
    interceptor needs istiod's injector for its sidecar."""
    result = render_config(keda_stack(sleeps=True))
    add_on = registration(result, "kubernetes:helm.sh/v4:Chart", "keda-add-ons-http")
    assert {"keda", "istiod"} <= depends_on(result, add_on)
    scaled = registration(result, "kubernetes:keda.sh/v1alpha1:ScaledObject", "iris-v1")
    route = registration(result, "kubernetes:http.keda.sh/v1beta1:InterceptorRoute", "iris-v1")
    assert {"keda", "keda-add-ons-http"} <= depends_on(result, scaled)
    assert {"keda", "keda-add-ons-http"} <= depends_on(result, route)
    assert "inference-platform:platform:Keda" in {r.type for r in result.registrations if not r.custom}


def test_only_the_interceptors_pods_are_labelled_for_the_mesh(render_config: Render) -> None:
    add_on = registration(render_config(keda_stack(sleeps=True)), "kubernetes:helm.sh/v4:Chart", "keda-add-ons-http")
    (transform,) = add_on.transforms

    def deployment(name: str) -> dict[str, Any]:
        template = {"metadata": {"labels": {"app.kubernetes.io/name": "http-add-on"}}, "spec": {}}
        return {"metadata": {"name": name}, "spec": {"template": template}}

    def run(type_: str, props: dict[str, Any]) -> Any:
        return transform(pulumi.ResourceTransformArgs(True, type_, "x", props, pulumi.ResourceOptions()))

    result = run("kubernetes:apps/v1:Deployment", deployment("keda-add-ons-http-interceptor"))
    assert result.props["spec"]["template"]["metadata"]["labels"] == {
        "app.kubernetes.io/name": "http-add-on",
        "sidecar.istio.io/inject": "true",
    }
    assert run("kubernetes:apps/v1:Deployment", deployment("keda-add-ons-http-external-scaler")) is None
    assert run("kubernetes:core/v1:Service", {"metadata": {"name": "keda-add-ons-http-interceptor"}}) is None


def test_the_lws_controller_comes_only_with_a_model_across_nodes(render_config: Render) -> None:
    config = base_config()
    assert "lws" not in charts(render_config(config))
    config["inference-platform:models"].append(group())
    lws = charts(render_config(config))["lws"]
    assert (lws["chart"], lws["version"], lws["namespace"]) == (
        "oci://registry.k8s.io/lws/charts/lws",
        "v0.10.0",
        "lws-system",
    )
    assert lws["values"]["resources"]["limits"] == {"cpu": "1", "memory": "1Gi"}
