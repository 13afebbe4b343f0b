"""Who can reach whom between models and pipelines, computed from the rendered NetworkPolicies
and AuthorizationPolicies (tests/cluster.py evaluates them as Kubernetes and Istio would): every
call the stack file declares is open in both layers, and no other pair is open in either."""

from __future__ import annotations

import copy
from itertools import product
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest

from tests.cluster import Address, Cluster, Pod, selects
from tests.conftest import full_config, keda_config, model_cache_config, write_stack_file
from tests.stacks.cluster_checks import gateway_pods
from tests.stacks.conftest import render_cluster, shared_render

NAMESPACE = "service"


COMPARATOR = "inference-comparator"


def declared_edges(config: dict[str, Any]) -> set[tuple[str, str]]:
    """Read from the stack file itself: each model's `calls`, every model a pipeline's steps name,
    and each model that compares its shadows' answers to the comparator it streams them to."""
    models = config["inference-platform:models"]
    edges = {(m["name"], callee) for m in models for callee in m.get("calls", [])}
    for pipeline in config.get("inference-platform:pipelines", []):
        for node in pipeline["nodes"].values():
            edges |= {(pipeline["name"], step["model"]) for step in node["steps"] if "model" in step}
    return edges | {(m["name"], COMPARATOR) for m in compared(config)}


def compared(config: dict[str, Any]) -> list[dict[str, Any]]:
    return [m for m in config["inference-platform:models"] if m.get("analysis", {}).get("payloads", {}).get("enabled")]


def workloads(cluster: Cluster) -> dict[str, Pod]:
    """One pod template per model or pipeline in the model namespace, by its `app` label (inference
    pools' pickers have none: cluster_checks.picker_reach_problems judges them)."""
    return {pod.labels["app"]: pod for pod in cluster.pods() if pod.namespace == NAMESPACE and "app" in pod.labels}


def serving_port(cluster: Cluster, app: str) -> int:
    """Where a caller's request lands: the container port behind the app's Service port 80."""
    service = cluster.service(app, NAMESPACE)
    assert service is not None
    [(_, port), *_] = cluster.endpoints(service, 80)
    return port


def all_ports(pod: Pod) -> set[int]:
    return set(pod.ports.values()) | {15020, 15090}


def reachability(cluster: Cluster) -> tuple[set[tuple[str, str]], set[tuple[str, str]]]:
    """The (caller, callee) pairs open in the network layer and in the mesh layer, on any port."""
    pods = workloads(cluster)
    network, mesh = set(), set()
    for (source, src), (destination, dst) in product(pods.items(), repeat=2):
        if source == destination:
            continue
        if any(cluster.network_admits(src, dst, port) for port in all_ports(dst)):
            network.add((source, destination))
        if any(cluster.mesh_admits(src, dst, port) for port in all_ports(dst)):
            mesh.add((source, destination))
    return network, mesh


def rendered(stack: str, config: dict[str, Any], tmp_path_factory: pytest.TempPathFactory) -> Cluster:
    root = tmp_path_factory.mktemp(f"reachability-{stack}")
    return render_cluster(stack, write_stack_file(root / f"Pulumi.{stack}.yaml", config), root / "render").cluster


@pytest.fixture(scope="module")
def full(tmp_path_factory: pytest.TempPathFactory) -> tuple[dict[str, Any], Cluster]:
    config = full_config()
    return config, rendered("full", config, tmp_path_factory)


def test_the_stack_declares_calls_and_pipelines(full: tuple[dict[str, Any], Cluster]) -> None:
    config, cluster = full
    edges = declared_edges(config)

    assert ("bert", "embed") in edges
    assert {caller for caller, _ in edges} >= {"detect-classify", "churn-ab", "assist"}
    assert {("iris", COMPARATOR), ("mnist", COMPARATOR)} <= edges
    assert set(workloads(cluster)) >= {caller for caller, _ in edges} | {callee for _, callee in edges}


def test_every_declared_call_is_open_on_the_callees_serving_port_in_both_layers(
    full: tuple[dict[str, Any], Cluster],
) -> None:
    config, cluster = full
    pods = workloads(cluster)

    for caller, callee in sorted(declared_edges(config)):
        if callee == COMPARATOR:
            continue  # not a model: below
        port = serving_port(cluster, callee)
        assert cluster.network_admits(pods[caller], pods[callee], port), f"{caller} -> {callee}: network"
        assert cluster.mesh_admits(pods[caller], pods[callee], port), f"{caller} -> {callee}: mesh"


def test_no_undeclared_pair_is_open_in_either_layer(full: tuple[dict[str, Any], Cluster]) -> None:
    config, cluster = full

    network, mesh = reachability(cluster)

    assert network == declared_edges(config)
    assert mesh == declared_edges(config)


def test_the_evaluator_sees_an_undeclared_opening(tmp_path: Path, full: tuple[dict[str, Any], Cluster]) -> None:
    """The check above can fail: a render where one NetworkPolicy lets every pod in, and one
    AuthorizationPolicy admits every principal, shows those extra pairs."""
    config, cluster = full
    broken = copy.deepcopy(cluster)
    iris_policy = next(p for p in broken.program if p["kind"] == "NetworkPolicy" and p["metadata"]["name"] == "iris")
    iris_policy["spec"]["ingress"].append({"from": [{"podSelector": {}}]})
    for policy in broken.program:
        if policy["kind"] == "NetworkPolicy" and policy["metadata"]["name"] == "llama":
            policy["spec"]["egress"] = [{"to": [{"podSelector": {}}]}]
    churn_access = next(p for p in broken.program if p["metadata"]["name"] == "churn-access")
    churn_access["spec"]["rules"].append({"from": [{"source": {"principals": ["*"]}}]})

    network, mesh = reachability(broken)

    assert ("llama", "iris") in network - declared_edges(config)
    assert ("llama", "churn") in mesh - declared_edges(config)


def test_exactly_the_compared_primaries_and_shadows_reach_the_comparators_grpc_port(
    full: tuple[dict[str, Any], Cluster],
) -> None:
    """The network layer narrows it to the captured versions' pods; the mesh layer admits the
    model's identity, which all its versions share."""
    config, cluster = full
    (comparator,) = [pod for pod in cluster.pods() if pod.labels.get("app") == COMPARATOR]
    grpc = comparator.ports["grpc"]
    # Each primary and its shadows (chat's, on inference pools, too).
    captured = {("iris", "v1"), ("iris", "v3"), ("mnist", "v1"), ("mnist", "v2"), ("chat", "v1"), ("chat", "v3")}
    assert {(m["name"], m["versions"][0]["name"]) for m in compared(config)} <= captured
    by_version = {
        (pod.labels["app"], pod.labels.get("version", "")): pod
        for pod in cluster.pods()
        if pod.namespace == NAMESPACE and "app" in pod.labels
    }

    network = {key for key, pod in by_version.items() if cluster.network_admits(pod, comparator, grpc)}
    mesh = {key for key, pod in by_version.items() if cluster.mesh_admits(pod, comparator, grpc)}

    assert network == captured
    assert mesh == {key for key in by_version if key[0] in {"iris", "mnist", "chat"}}
    assert {
        port
        for port in all_ports(comparator)
        for key in captured
        if cluster.network_admits(by_version[key], comparator, port)
    } == {grpc}


def test_prometheus_scrapes_the_comparator_and_the_comparator_calls_no_model(
    full: tuple[dict[str, Any], Cluster],
) -> None:
    _, cluster = full
    (comparator,) = [pod for pod in cluster.pods() if pod.labels.get("app") == COMPARATOR]
    (prometheus,) = [pod for pod in cluster.pods() if pod.owner == "Deployment monitoring/prometheus-server"]
    assert cluster.network_admits(prometheus, comparator, comparator.ports["http-metrics"])
    assert not cluster.network_admits(prometheus, comparator, comparator.ports["grpc"])
    reached = {
        pod.owner
        for pod in cluster.pods()
        if pod is not comparator and any(cluster.network_admits(comparator, pod, port) for port in all_ports(pod))
    }
    assert reached == {"Deployment istio-system/istiod"}  # what the namespace lets every pod reach (and DNS)


# --- Through the interceptor: the KEDA stack, where iris, embed and llama sleep at zero ---------

SLEEPING = {"iris", "embed", "llama"}
INTERCEPTOR_PROXY = 8080


@pytest.fixture(scope="module")
def keda(tmp_path_factory: pytest.TempPathFactory) -> tuple[dict[str, Any], Cluster]:
    config = keda_config()
    return config, rendered("keda", config, tmp_path_factory)


def interceptor(cluster: Cluster) -> Pod:
    (pod,) = [p for p in cluster.pods() if p.labels.get("app.kubernetes.io/component") == "interceptor"]
    return pod


def live_versions(config: dict[str, Any]) -> set[tuple[str, str]]:
    """Read from the stack file: the versions of each model that take a share of its traffic."""
    return {
        (model["name"], version["name"])
        for model in config["inference-platform:models"]
        for version in model["versions"]
        if version.get("weight", 0) > 0 or len(model["versions"]) == 1
    }


def test_the_interceptor_reaches_exactly_the_sleeping_models_live_versions(
    keda: tuple[dict[str, Any], Cluster],
) -> None:
    config, cluster = keda
    proxy = interceptor(cluster)
    expected = {(app, version) for app, version in live_versions(config) if app in SLEEPING}
    assert ("iris", "v3") not in expected  # iris' shadow takes its mirror from the gateway

    for layer in (cluster.network_admits, cluster.mesh_admits):
        reached = {
            (pod.labels["app"], pod.labels.get("version", ""))
            for pod in cluster.pods()
            # Pickers (no app label, outside the mesh) are judged by cluster_checks.picker_reach_problems.
            if pod.namespace == NAMESPACE
            and "app" in pod.labels
            and any(layer(proxy, pod, port) for port in all_ports(pod))
        }
        assert reached == expected, layer.__name__
    for pod in cluster.pods():
        if (pod.labels.get("app"), pod.labels.get("version")) in expected:
            # the HTTP port alone: not gRPC, not metrics
            opened = {port for port in all_ports(pod) if cluster.network_admits(proxy, pod, port)}
            assert opened == {pod.ports["http"]}, pod.owner


def test_callers_of_a_sleeping_model_and_the_gateway_reach_the_interceptor(
    keda: tuple[dict[str, Any], Cluster],
) -> None:
    config, cluster = keda
    proxy, pods = interceptor(cluster), workloads(cluster)
    callers = {caller for caller, callee in declared_edges(config) if callee in SLEEPING}
    assert callers == {"bert", "churn-ab", "assist"}

    reaching = {
        app
        for app, pod in pods.items()
        if cluster.network_admits(pod, proxy, INTERCEPTOR_PROXY) and cluster.mesh_admits(pod, proxy, INTERCEPTOR_PROXY)
    }
    assert reaching == callers
    (gateway,) = gateway_pods(cluster)
    assert cluster.network_admits(gateway, proxy, INTERCEPTOR_PROXY)
    assert cluster.mesh_admits(gateway, proxy, INTERCEPTOR_PROXY)


def test_keda_reaches_prometheus_and_the_add_ons_scaler(keda: tuple[dict[str, Any], Cluster]) -> None:
    _, cluster = keda
    pods = {pod.owner: pod for pod in cluster.pods()}
    operator = pods["Deployment keda/keda-operator"]
    scaler = pods["Deployment keda/keda-add-ons-http-external-scaler"]
    # where the ScaledObjects' serverAddress lands
    (address,) = {t["metadata"]["serverAddress"] for t in prometheus_triggers(cluster)}
    parts = urlsplit(address)
    service_name, namespace, *_ = (parts.hostname or "").split(".")
    service = cluster.service(service_name, namespace)
    assert service is not None, address
    [(server, port)] = cluster.endpoints(service, parts.port or 80)
    assert cluster.network_admits(operator, server, port)
    assert cluster.network_admits(operator, scaler, scaler.ports["grpc"])
    assert cluster.network_admits(scaler, interceptor(cluster), interceptor(cluster).ports["admin"])


def prometheus_triggers(cluster: Cluster) -> list[dict[str, Any]]:
    return [t for o in cluster.of_kind("ScaledObject") for t in o["spec"]["triggers"] if t["type"] == "prometheus"]


def test_only_the_interceptor_of_keda_joins_the_mesh(keda: tuple[dict[str, Any], Cluster]) -> None:
    """Its sidecar is its only way in to STRICT mTLS pods; KEDA's own pods stay outside the mesh."""
    _, cluster = keda
    webhooks = [w for c in cluster.of_kind("MutatingWebhookConfiguration", release="istiod") for w in c["webhooks"]]

    def injected(pod: Pod) -> bool:
        namespace = cluster.namespaces.get(pod.namespace, {})
        return any(
            selects(w.get("namespaceSelector", {}), namespace) and selects(w.get("objectSelector", {}), pod.labels)
            for w in webhooks
        )

    in_keda = {pod.owner for pod in cluster.pods() if pod.namespace == "keda" and injected(pod)}
    assert in_keda == {"Deployment keda/keda-add-ons-http-interceptor"}


# --- With the node-local model cache (tests/conftest.py model_cache_config) ---------------------

INTERNET = Address("a model store on the internet", "203.0.113.10")


@pytest.fixture(scope="module")
def model_cache(tmp_path_factory: pytest.TempPathFactory) -> tuple[dict[str, Any], Cluster]:
    return model_cache_config(), shared_render("model-cache", tmp_path_factory).cluster


def version_pod(cluster: Cluster, model: str, version: str) -> Pod:
    (pod,) = [p for p in cluster.pods() if p.labels.get("app") == model and p.labels.get("version") == version]
    return pod


def test_with_the_model_cache_exactly_the_declared_pairs_are_open(model_cache: tuple[dict[str, Any], Cluster]) -> None:
    config, cluster = model_cache

    network, mesh = reachability(cluster)

    assert network == declared_edges(config)
    assert mesh == declared_edges(config)


def test_a_cached_version_has_no_way_out_to_storage_and_a_downloading_one_keeps_its_own(
    model_cache: tuple[dict[str, Any], Cluster],
) -> None:
    _, cluster = model_cache
    for model, version in [("llama", "v1"), ("resnet", "v1"), ("qwen", "v1")]:
        assert not cluster.egress_to_address(version_pod(cluster, model, version), INTERNET, 443), (model, version)
    assert cluster.egress_to_address(version_pod(cluster, "qwen", "v2"), INTERNET, 443)
