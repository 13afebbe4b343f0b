"""The whole cluster, offline: each stack rendered with its charts expanded by real Helm, and
the program's objects and the charts' objects checked together (tests/stacks/cluster_checks.py)."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest

from tests.cluster import Cluster
from tests.conftest import full_config, write_stack_file
from tests.stacks import cluster_checks as checks
from tests.stacks.conftest import Rendered, render_cluster, shared_render


def test_every_registered_chart_is_expanded(rendered: Rendered) -> None:
    releases = {chart["name"] for chart in rendered.cluster.chart_values}
    assert releases == set(rendered.cluster.charts)
    assert all(rendered.cluster.charts[release] for release in releases)


def test_chart_objects_pass_the_kubernetes_schemas_strictly(rendered: Rendered) -> None:
    chart_objects = [o for objects in rendered.cluster.charts.values() for o in objects]
    assert checks.kubernetes_schema_problems(chart_objects, rendered.kubernetes_version) == []


def test_program_objects_pass_the_kubernetes_schemas_at_the_stacks_version(rendered: Rendered) -> None:
    assert checks.kubernetes_schema_problems(rendered.cluster.program, rendered.kubernetes_version) == []


def test_custom_objects_pass_the_crds_the_charts_render(rendered: Rendered) -> None:
    assert sum(checks.is_custom(o) for o in rendered.cluster.program) >= 5
    assert checks.custom_resource_problems(rendered.cluster) == []


def test_custom_objects_meet_their_crds_cel_rules(rendered: Rendered) -> None:
    if rendered.stack == "keda":
        # ScaledObjects' replica bounds, InterceptorRoutes' target, scaling metric and cold start
        assert checks.rules_evaluated(rendered.cluster) >= 20
    assert checks.cel_problems(rendered.cluster) == []


SEAMS = {
    "no object twice": checks.duplicate_problems,
    "gateway selector and ports": checks.gateway_problems,
    "gateway reaches every routed port": checks.gateway_reach_problems,
    "prometheus reaches every scraped port": checks.scrape_problems,
    "scrape jobs unchanged": checks.scrape_job_problems,
    "adapter rules, metrics and prometheus url": checks.adapter_problems,
    "aggregated APIs served": checks.api_service_problems,
    "istiod env and mesh config": checks.istiod_problems,
    "injection covers meshed namespaces and the gateway": checks.injection_problems,
    "outputs name rendered services": checks.output_problems,
    "grafana reads prometheus, has the dashboards and its admin secret": checks.grafana_problems,
    "one autoscaler a workload, each ScaledObject as KEDA's webhook wants it": checks.keda_webhook_problems,
    "interceptor routes: a Host claimed once, its Service, the woken version's pods": checks.interceptor_route_problems,
    "probes ask ports their containers declare": checks.probe_problems,
    "leader worker sets: lws's webhook rules, leaders alone serve, a group reaches only itself": (
        checks.leader_worker_set_problems
    ),
    "inference pools: their pods, pickers, routes and Gateway, and istiod's switch": checks.pool_problems,
    "pickers: the gateway alone reaches them, they read only their pools' merged metrics": checks.picker_reach_problems,
    "HTTPRoutes carry each model's weights and mirrors": checks.route_weight_problems,
}


@pytest.mark.parametrize("check", SEAMS.values(), ids=SEAMS.keys())
def test_the_seams_hold(rendered: Rendered, check: checks.Check) -> None:
    assert check(rendered.cluster) == []


def test_hami_runs_the_clusters_kube_scheduler(rendered: Rendered) -> None:
    assert checks.hami_problems(rendered.cluster, rendered.kubernetes_version) == []


def test_stacks_that_scale_on_cpu_get_metrics_server(rendered: Rendered) -> None:
    uses_cpu = any(model.autoscaling.uses_resource_metrics for model in rendered.config.models)
    assert ("metrics-server" in rendered.cluster.charts) == uses_cpu
    if uses_cpu:
        (api,) = rendered.cluster.of_kind("APIService", release="metrics-server")
        assert (api["spec"]["group"], api["spec"]["version"]) == ("metrics.k8s.io", "v1beta1")


# --- Each check finds what it looks for in a render broken on purpose -------------------------


@pytest.fixture(scope="module")
def dev(tmp_path_factory: pytest.TempPathFactory) -> Rendered:
    return shared_render("dev", tmp_path_factory)


def broken(dev: Rendered) -> Cluster:
    return copy.deepcopy(dev.cluster)


def find(objects: list[dict[str, Any]], kind: str, name: str) -> dict[str, Any]:
    (found,) = [o for o in objects if o["kind"] == kind and o["metadata"]["name"] == name]
    return found


def test_schemas_refuse_a_misspelt_field(dev: Rendered) -> None:
    cluster = broken(dev)
    deployment = find(cluster.charts["prometheus"], "Deployment", "prometheus-server")
    deployment["spec"]["replica"] = 2
    assert checks.kubernetes_schema_problems(cluster.charts["prometheus"], "1.33.0") != []
    virtual_service = find(cluster.program, "VirtualService", "iris")
    virtual_service["spec"]["http"][0]["timout"] = "5s"
    (problem,) = checks.custom_resource_problems(cluster)
    assert "VirtualService service/iris" in problem
    assert "timout" in problem


def test_an_object_from_two_places_is_found(dev: Rendered) -> None:
    cluster = broken(dev)
    cluster.charts["prometheus"].append(copy.deepcopy(find(cluster.program, "Namespace", "monitoring")))
    assert checks.duplicate_problems(cluster) == ["Namespace /monitoring (core) is rendered 2 times"]


def test_a_gateway_selecting_no_pod_is_found(dev: Rendered) -> None:
    cluster = broken(dev)
    checks.istio_gateway(cluster)["spec"]["selector"] = {"istio": "ingress"}
    assert checks.gateway_problems(cluster) == [
        "the Gateway's selector {'istio': 'ingress'} matches no pod of the gateway chart"
    ]
    cluster = broken(dev)
    checks.istio_gateway(cluster)["spec"]["servers"][0]["port"]["number"] = 8080
    assert "server port 8080" in checks.gateway_problems(cluster)[0]


def test_a_network_policy_that_shuts_out_the_gateway_is_found(dev: Rendered) -> None:
    cluster = broken(dev)
    policy = find(cluster.program, "NetworkPolicy", "iris")
    policy["spec"]["ingress"][0]["ports"] = [{"protocol": "TCP", "port": 9999}]
    problems = checks.gateway_reach_problems(cluster)
    assert problems
    assert all("keep the gateway" in p and "iris" in p for p in problems)


def test_a_route_to_a_missing_port_is_found(dev: Rendered) -> None:
    cluster = broken(dev)
    find(cluster.program, "VirtualService", "churn")["spec"]["http"][0]["route"][0]["destination"]["port"]["number"] = 9
    assert any("reaches no pod" in p for p in checks.gateway_reach_problems(cluster))


def test_scraping_problems_are_found(dev: Rendered) -> None:
    cluster = broken(dev)
    template = find(cluster.program, "Deployment", "churn-v1")["spec"]["template"]
    template["metadata"]["annotations"]["prometheus.io/port"] = "9102"
    problems = checks.scrape_problems(cluster)
    assert "Deployment service/churn-v1 is scraped on port 9102, which none of its containers declares" in problems
    cluster = broken(dev)
    find(cluster.program, "NetworkPolicy", "iris")["spec"]["ingress"].pop()  # Prometheus' rule
    problems = checks.scrape_problems(cluster)
    assert any("keep Prometheus from Deployment service/iris-v1:15020" in p for p in problems)


def test_a_chart_that_changes_the_scrape_jobs_is_found(dev: Rendered) -> None:
    cluster = broken(dev)
    config_map = find(cluster.charts["prometheus"], "ConfigMap", "prometheus-server")
    config_map["data"]["prometheus.yml"] = config_map["data"]["prometheus.yml"].replace(
        "honor_labels: true", "honor_labels: false", 1
    )
    assert len(checks.scrape_job_problems(cluster)) == 1


def test_adapter_problems_are_found(dev: Rendered) -> None:
    cluster = broken(dev)
    hpa = find(cluster.program, "HorizontalPodAutoscaler", "iris-v1")
    hpa["spec"]["metrics"][0]["pods"]["metric"]["name"] = "requests_per_minute"
    assert any(
        "scales on requests_per_minute, which no adapter rule serves" in p for p in checks.adapter_problems(cluster)
    )
    cluster = broken(dev)
    container = find(cluster.charts["prometheus-adapter"], "Deployment", "prometheus-adapter")["spec"]["template"][
        "spec"
    ]["containers"][0]
    container["args"] = [a.replace("prometheus-server.monitoring", "prometheus.monitoring") for a in container["args"]]
    assert checks.adapter_problems(cluster) == [
        "the adapter's --prometheus-url http://prometheus.monitoring.svc:80 names Service monitoring/prometheus, "
        "which is not rendered"
    ]


def test_an_api_service_without_pods_is_found(dev: Rendered) -> None:
    cluster = broken(dev)
    service = find(cluster.charts["prometheus-adapter"], "Service", "prometheus-adapter")
    service["spec"]["selector"] = {"app": "nothing"}
    assert checks.api_service_problems(cluster) == [
        "APIService v1beta1.custom.metrics.k8s.io: Service Service monitoring/prometheus-adapter reaches no pod on 443"
    ]


def test_istiod_without_the_programs_settings_is_found(dev: Rendered) -> None:
    cluster = broken(dev)
    deployment = find(cluster.charts["istiod"], "Deployment", "istiod")
    (discovery,) = deployment["spec"]["template"]["spec"]["containers"]
    discovery["env"] = [e for e in discovery["env"] if e["name"] != "ENABLE_NATIVE_SIDECARS"]
    assert checks.istiod_problems(cluster) == ["istiod's env has ENABLE_NATIVE_SIDECARS=None, the program sets 'true'"]


def test_a_namespace_the_injector_skips_is_found(dev: Rendered) -> None:
    cluster = broken(dev)
    (injector,) = cluster.of_kind("MutatingWebhookConfiguration", release="istiod")
    # An injector that only takes namespaces labelled for a revision.
    for webhook in injector["webhooks"]:
        webhook["namespaceSelector"] = {"matchLabels": {"istio.io/rev": "canary"}}
    problems = checks.injection_problems(cluster)
    assert "istiod's injector does not take Deployment service/iris-v1" in problems


def test_outputs_naming_no_service_are_found(dev: Rendered) -> None:
    cluster = broken(dev)
    cluster.outputs["platform"]["gatewayService"] = "istio-gateway.istio-ingress.svc.cluster.local"
    assert checks.output_problems(cluster) == [
        "output platform.gatewayService names istio-ingress/istio-gateway, which is not rendered"
    ]


def test_a_kube_scheduler_of_another_version_is_found(tmp_path: Path) -> None:
    rendered = render_cluster("full", write_stack_file(tmp_path / "Pulumi.full.yaml", full_config()), tmp_path / "out")
    assert checks.hami_problems(rendered.cluster, rendered.kubernetes_version) == []
    assert checks.hami_problems(rendered.cluster, "1.31.0") == [
        "HAMi runs registry.k8s.io/kube-scheduler:v1.30.4, not registry.k8s.io/kube-scheduler:v1.31.0"
    ]


def test_grafana_problems_are_found(tmp_path: Path) -> None:
    rendered = render_cluster("full", write_stack_file(tmp_path / "Pulumi.full.yaml", full_config()), tmp_path / "out")
    assert checks.grafana_problems(rendered.cluster) == []
    cluster = copy.deepcopy(rendered.cluster)
    config_map = find(cluster.charts["grafana"], "ConfigMap", "grafana")
    config_map["data"]["datasources.yaml"] = config_map["data"]["datasources.yaml"].replace(":80", ":9090")
    assert checks.grafana_problems(cluster) == [
        "Grafana's datasource Prometheus http://prometheus-server.monitoring.svc:9090: Service "
        "Service monitoring/prometheus-server has no port 9090 that reaches a pod"
    ]
    cluster = copy.deepcopy(rendered.cluster)
    cluster.program = [o for o in cluster.program if o["kind"] != "Secret" or o["metadata"]["name"] != "grafana-admin"]
    assert len(checks.grafana_problems(cluster)) == 2


@pytest.fixture(scope="module")
def keda(tmp_path_factory: pytest.TempPathFactory) -> Rendered:
    return shared_render("keda", tmp_path_factory)


def test_cel_rules_the_json_schemas_cannot_see_are_found(keda: Rendered) -> None:
    cluster = copy.deepcopy(keda.cluster)
    scaled = find(cluster.program, "ScaledObject", "iris-v1")
    scaled["spec"]["minReplicaCount"] = 5
    route = find(cluster.program, "InterceptorRoute", "embed-v1")
    route["spec"]["target"]["portName"] = "http"
    del route["spec"]["coldStart"]["placeholder"]
    (jwt,) = [o for o in cluster.program if o["kind"] == "RequestAuthentication"][:1]
    jwt["spec"]["jwtRules"][0]["jwksUri"] = "ftp://auth.example.com/jwks"
    assert checks.custom_resource_problems(cluster) == []  # each is schema-valid
    assert sorted(checks.cel_problems(cluster)) == sorted(
        [
            "ScaledObject service/iris-v1: spec: minReplicaCount must be less than or equal to maxReplicaCount",
            "InterceptorRoute service/embed-v1: spec.target: exactly one of 'port' or 'portName' must be set",
            "InterceptorRoute service/embed-v1: spec.coldStart: "
            "at least one of 'fallback' or 'placeholder' must be set",
            f"RequestAuthentication {jwt['metadata']['namespace']}/{jwt['metadata']['name']}: "
            "spec.jwtRules[0].jwksUri: url must have scheme http:// or https://",
        ]
    )


def test_a_cel_rule_calling_a_function_nobody_implemented_is_reported(keda: Rendered) -> None:
    cluster = copy.deepcopy(keda.cluster)
    crd = next(
        c
        for c in cluster.program + cluster.charts["keda"]
        if c["kind"] == "CustomResourceDefinition" and c["spec"]["names"]["kind"] == "ScaledObject"
    )
    validations = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"][
        "x-kubernetes-validations"
    ]
    validations.append({"rule": "quantity(string(self.maxReplicaCount)).isInteger()"})
    problems = checks.cel_problems(cluster)
    assert problems
    assert all("quantity(" in p and "cannot be evaluated" in p for p in problems)


def test_what_kedas_webhook_refuses_is_found(keda: Rendered) -> None:
    cluster = copy.deepcopy(keda.cluster)
    hpa = {
        "apiVersion": "autoscaling/v2",
        "kind": "HorizontalPodAutoscaler",
        "metadata": {"name": "churn-extra", "namespace": "service"},
        "spec": {"scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "churn-v1"}},
    }
    cluster.program.append(hpa)
    llama = find(cluster.program, "ScaledObject", "llama-v1")
    llama["spec"]["triggers"].append(copy.deepcopy(llama["spec"]["triggers"][0]))
    churn = find(cluster.program, "ScaledObject", "churn-v1")
    churn["metadata"]["name"] = "churn-" + "x" * 60
    iris = find(cluster.program, "ScaledObject", "iris-v1")
    iris["spec"]["triggers"] = [
        {"type": "cpu", "name": "cpu", "metricType": "Utilization", "metadata": {"value": "80"}}
    ]
    problems = checks.keda_webhook_problems(cluster)
    long = f"ScaledObject service/{churn['metadata']['name']}"
    assert sorted(problems) == sorted(
        [
            f"service/Deployment/churn-v1 has 2 autoscalers: HorizontalPodAutoscaler service/churn-extra, {long}",
            f"{long}: name {churn['metadata']['name']!r} is longer than 63 characters",
            f"ScaledObject service/llama-v1: trigger names {[t['name'] for t in llama['spec']['triggers']]} repeat",
            "ScaledObject service/iris-v1: only cpu/memory triggers and minReplicaCount 0: "
            "it would never scale to zero",
        ]
    )


def test_a_second_external_metrics_api_and_a_missing_interceptor_are_found(keda: Rendered) -> None:
    cluster = copy.deepcopy(keda.cluster)
    (external,) = [a for a in cluster.of_kind("APIService") if a["spec"]["group"] == "external.metrics.k8s.io"]
    # prometheus-adapter with `rules.external` set would serve the same group
    cluster.charts["prometheus-adapter"] = [copy.deepcopy(external)]
    assert "2 APIServices serve external.metrics.k8s.io/v1beta1" in checks.api_service_problems(cluster)
    cluster = copy.deepcopy(keda.cluster)
    cluster.charts["keda-add-ons-http"] = [
        o
        for o in cluster.charts["keda-add-ons-http"]
        if (o["kind"], o["metadata"]["name"]) != ("Service", "keda-add-ons-http-interceptor-proxy")
    ]
    problems = checks.gateway_reach_problems(cluster)
    assert problems
    assert all("keda-add-ons-http-interceptor-proxy" in p for p in problems)
    assert all(any(model in p for p in problems) for model in ("iris", "embed", "llama"))


def test_interceptor_route_problems_are_found(keda: Rendered) -> None:
    cluster = copy.deepcopy(keda.cluster)
    assert checks.interceptor_route_problems(cluster) == []
    assert len(cluster.of_kind("InterceptorRoute")) == 4  # iris v1 and v2, embed, llama
    # a Host nobody claims: the interceptor would answer 404
    virtual_service = find(cluster.program, "VirtualService", "iris")
    virtual_service["spec"]["http"][0]["route"][1]["headers"]["request"]["set"]["Host"] = "iris-v2.service"
    # a route to a port its Service does not have
    find(cluster.program, "InterceptorRoute", "llama-v1")["spec"]["target"]["port"] = 9000
    # a version woken by another version's route
    find(cluster.program, "ScaledObject", "embed-v1")["spec"]["triggers"][-1]["metadata"]["interceptorRoute"] = (
        "iris-v1"
    )
    assert sorted(checks.interceptor_route_problems(cluster)) == sorted(
        [
            "VirtualService service/iris sets Host iris-v2.service, which 0 InterceptorRoutes claim",
            "InterceptorRoute service/llama-v1: Service Service service/llama-v1 reaches no pod on 9000",
            "ScaledObject service/llama-v1 wakes on InterceptorRoute service/llama-v1, whose Service reaches []",
            "ScaledObject service/embed-v1 wakes on InterceptorRoute service/iris-v1, whose Service reaches "
            "['Deployment service/iris-v1']",
        ]
    )


def test_what_lws_refuses_and_a_group_opened_too_wide_are_found(keda: Rendered) -> None:
    """The LeaderWorkerSet checks fail on a set lws's webhook would refuse, a Service that reaches
    a worker, a group policy that admits the whole namespace and one that shuts a group's own pods out."""
    assert checks.leader_worker_set_problems(keda.cluster) == []
    cluster = copy.deepcopy(keda.cluster)
    lws = find(cluster.program, "LeaderWorkerSet", "deepseek-v1-group")
    lws["spec"]["rolloutStrategy"]["rollingUpdateConfiguration"] = {"maxUnavailable": 0, "maxSurge": 0}
    lws["spec"]["leaderWorkerTemplate"]["restartPolicy"] = "Always"
    del find(cluster.program, "Service", "deepseek-v1")["spec"]["selector"]["leaderworkerset.sigs.k8s.io/worker-index"]
    find(cluster.program, "NetworkPolicy", "deepseek-v1-group-0")["spec"]["ingress"] = [{}]
    del find(cluster.program, "NetworkPolicy", "deepseek-v1-group-1")["spec"]["egress"]
    problems = checks.leader_worker_set_problems(cluster)
    assert "LeaderWorkerSet service/deepseek-v1-group: maxUnavailable must not be 0 when maxSurge is 0" in problems
    assert "LeaderWorkerSet service/deepseek-v1-group: restartPolicy Always is not one lws knows" in problems
    assert any(p.startswith("Service service/deepseek-v1 selects") and "worker" in p for p in problems)
    assert any("outside the group, reaches LeaderWorkerSet service/deepseek-v1-group group 0" in p for p in problems)
    assert any(
        "group 1 worker cannot reach LeaderWorkerSet service/deepseek-v1-group group 1 leader" in p for p in problems
    )


def test_a_probe_on_a_port_the_container_lacks_is_found(dev: Rendered) -> None:
    cluster = broken(dev)
    container = find(cluster.program, "Deployment", "iris-v1")["spec"]["template"]["spec"]["containers"][0]
    container["readinessProbe"]["httpGet"]["port"] = 9999
    container["livenessProbe"] = {"tcpSocket": {"port": "metricz"}}
    problems = checks.probe_problems(cluster)
    assert problems == [
        "Deployment service/iris-v1 predictor readinessProbe: port 9999 is not a container port",
        "Deployment service/iris-v1 predictor livenessProbe: no container port named metricz",
    ]


# --- Inference pools: each check finds its problem in the llm-routing render, broken on purpose ----


@pytest.fixture(scope="module")
def pools(tmp_path_factory: pytest.TempPathFactory) -> Rendered:
    return shared_render("llm-routing", tmp_path_factory)


def test_pool_objects_that_break_their_crds_rules_are_found(pools: Rendered) -> None:
    cluster = broken(pools)
    route = find(cluster.program, "HTTPRoute", "chat-by-path")
    route["spec"]["rules"][0]["matches"].append({"path": {"type": "Exact", "value": "/x"}})  # rewrite needs one prefix
    pool = find(cluster.charts["chat-v1"], "InferencePool", "chat-v1")
    pool["spec"]["targetPorts"].append({"number": 8000})  # the same port twice
    problems = checks.cel_problems(cluster)
    assert any("HTTPRoute llm/chat-by-path" in p and "exactly one PathPrefix" in p for p in problems), problems
    assert any("InferencePool llm/chat-v1" in p for p in problems), problems
    cluster = broken(pools)
    find(cluster.program, "HTTPRoute", "chat")["spec"]["rules"][0]["timeout"] = "5s"  # not `timeouts`
    assert any("HTTPRoute llm/chat" in p and "timeout" in p for p in checks.custom_resource_problems(cluster))


def test_a_pool_selecting_no_pod_a_missing_picker_and_a_route_to_nowhere_are_found(pools: Rendered) -> None:
    cluster = broken(pools)
    find(cluster.charts["chat-v1"], "InferencePool", "chat-v1")["spec"]["selector"]["matchLabels"]["version"] = "v9"
    find(cluster.charts["chat-v2"], "Service", "chat-v2-epp")["spec"]["selector"] = {"inferencepool": "gone"}
    find(cluster.program, "HTTPRoute", "chat")["spec"]["rules"][0]["backendRefs"][0]["name"] = "chat-v7"
    problems = checks.pool_problems(cluster)
    assert "InferencePool llm/chat-v1 selects no pod" in problems
    assert "InferencePool llm/chat-v2's picker chat-v2-epp reaches no pod" in problems
    assert "HTTPRoute llm/chat routes to InferencePool chat-v7, which is not rendered" in problems


def test_istiod_without_the_switch_and_a_gateway_bound_elsewhere_are_found(pools: Rendered) -> None:
    cluster = broken(pools)
    istiod = cluster.one("Deployment", release="istiod")
    for container in istiod["spec"]["template"]["spec"]["containers"]:
        container["env"] = [
            e for e in container.get("env") or [] if e["name"] != "ENABLE_GATEWAY_API_INFERENCE_EXTENSION"
        ]
    (gateway,) = [g for g in cluster.program if g["kind"] == "Gateway" and g["apiVersion"].startswith("gateway.")]
    gateway["spec"]["addresses"][0]["value"] = "elsewhere.istio-ingress.svc.cluster.local"
    problems = checks.pool_problems(cluster)
    assert "InferencePools are rendered but istiod does not route to them" in problems
    assert any("is bound to elsewhere.istio-ingress" in p for p in problems), problems


def test_a_picker_open_to_all_or_reading_another_pool_is_found(pools: Rendered) -> None:
    cluster = broken(pools)
    # A pod of a namespace nobody fences, and a picker whose policy lets anyone in on any port.
    stray = copy.deepcopy(find(cluster.program, "Deployment", "iris-v1"))
    stray["metadata"] = {"name": "stray", "namespace": "default"}
    cluster.program.append(stray)
    rule = find(cluster.program, "NetworkPolicy", "chat-v1-epp")["spec"]["ingress"][0]
    del rule["from"], rule["ports"]
    problems = checks.picker_reach_problems(cluster)
    assert "Deployment default/stray reaches Deployment llm/chat-v1-epp:9002" in problems, problems
    assert any("istio-ingressgateway reaches Deployment llm/chat-v1-epp:9090" in p for p in problems) is False
    cluster = broken(pools)
    egress = find(cluster.program, "NetworkPolicy", "chat-v1-epp")["spec"]["egress"][0]
    egress["to"][0]["podSelector"]["matchLabels"] = {"app": "chat"}  # every version's pods
    ingress = find(cluster.program, "NetworkPolicy", "chat-v2-picker")["spec"]["ingress"][0]
    ingress["from"] = [{"podSelector": {}}]  # and v2's pods admitting any pod of the namespace
    problems = checks.picker_reach_problems(cluster)
    assert any("chat-v1-epp reaches Deployment llm/chat-v2:15020" in p for p in problems), problems
    cluster = broken(pools)
    find(cluster.program, "NetworkPolicy", "chat-v1-epp")["spec"]["ingress"][0]["ports"] = [{"port": 9003}]
    assert any(
        "keep the gateway from Deployment llm/chat-v1-epp:9002" in p for p in checks.picker_reach_problems(cluster)
    )


def test_route_weights_and_mirrors_unlike_the_models_are_found(pools: Rendered) -> None:
    cluster = broken(pools)
    rule = find(cluster.program, "HTTPRoute", "chat")["spec"]["rules"][0]
    rule["backendRefs"][0]["weight"] = 50
    rule["filters"][-1]["requestMirror"] = rule["filters"][-1]["requestMirror"] | {"fraction": {"numerator": 1}}
    problems = checks.route_weight_problems(cluster)
    assert any("weights" in p and "'v1': 50" in p for p in problems), problems
    assert any("mirrors" in p for p in problems), problems


def test_a_pod_slipping_out_of_the_mesh_is_found(pools: Rendered) -> None:
    cluster = broken(pools)
    deployment = find(cluster.program, "Deployment", "chat-v1")
    deployment["spec"]["template"]["metadata"]["labels"]["sidecar.istio.io/inject"] = "false"
    assert "Deployment llm/chat-v1 opts out of the mesh" in checks.injection_problems(cluster)
