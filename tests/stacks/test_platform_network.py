"""The platform's own namespaces, closed edge by edge: for every stack, rendered with its charts,
the NetworkPolicies (evaluated as Kubernetes evaluates them, tests/cluster.py) open exactly the
edge table's (pod, pod, port) triples and addresses, in program and chart pods alike; what the
charts' workloads need (webhooks, aggregated APIs, scrape targets, DNS, istiod) is reachable;
and a render opened too wide or closed too tight on purpose is caught."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
import yaml

from inference_platform.config.errors import ConfigError
from inference_platform.platform import network
from inference_platform.stack.config import StackConfig, parse_stack_config
from inference_platform.stack.platform_components import platform_edges
from tests.cluster import Address, Cluster, selects
from tests.conftest import ROOT, write_stack_file
from tests.stacks import cluster_checks as checks
from tests.stacks.conftest import Rendered, render_cluster, shared_render

pytestmark = pytest.mark.slow


def api_server(config: StackConfig) -> Address:
    return checks._representative(network.Addresses("api-server", tuple(config.platform.network.api_server.cidrs)))


def edge_problems(cluster: Cluster, config: StackConfig) -> list[str]:
    return checks.edge_table_problems(cluster, platform_edges(config), config.namespace)


def test_the_policies_open_exactly_the_edge_table(rendered: Rendered) -> None:
    assert edge_problems(rendered.cluster, rendered.config) == []


def test_every_platform_pod_is_behind_a_default_deny_or_its_own_policy(rendered: Rendered) -> None:
    """No pod of the program or a chart runs unisolated, outside kube-system's own pods."""
    cluster = rendered.cluster
    for pod in cluster.pods():
        for policy_type in ("Ingress", "Egress"):
            assert any(
                p["metadata"]["namespace"] == pod.namespace
                and selects(p["spec"]["podSelector"], pod.labels)
                and policy_type in p["spec"]["policyTypes"]
                for p in cluster.of_kind("NetworkPolicy")
            ), f"{pod.owner}: no {policy_type} policy"
    assert not [p for p in cluster.of_kind("NetworkPolicy") if p["metadata"]["namespace"] == "kube-system"]


def test_the_api_server_reaches_every_webhook_and_aggregated_api(rendered: Rendered) -> None:
    assert checks.webhook_reach_problems(rendered.cluster, api_server(rendered.config)) == []


def test_every_pod_reaches_dns_and_every_proxy_istiod(rendered: Rendered) -> None:
    assert checks.dns_and_mesh_problems(rendered.cluster) == []


# --- Opened too wide, closed too tight, on purpose ----------------------------------------------


@pytest.fixture(scope="module")
def prod(tmp_path_factory: pytest.TempPathFactory) -> Rendered:
    return shared_render("prod", tmp_path_factory)


def policy(cluster: Cluster, namespace: str, name: str) -> dict[str, Any]:
    (found,) = [
        p
        for p in cluster.of_kind("NetworkPolicy")
        if p["metadata"]["namespace"] == namespace and p["metadata"]["name"] == name
    ]
    return found


def test_a_policy_opened_too_wide_shows_the_extra_pair(prod: Rendered) -> None:
    cluster = copy.deepcopy(prod.cluster)
    # Prometheus let in from the gateway's namespace, and the gateway let out to it.
    gateway_namespace = {"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "istio-ingress"}}}
    monitoring = {"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "monitoring"}}}
    policy(cluster, "monitoring", "prometheus")["spec"]["ingress"].append(
        {"from": [gateway_namespace], "ports": [{"protocol": "TCP", "port": 9090}]}
    )
    policy(cluster, "istio-ingress", "ingress-gateway")["spec"]["egress"].append(
        {"to": [monitoring], "ports": [{"protocol": "TCP", "port": 9090}]}
    )
    assert edge_problems(cluster, prod.config) == [
        "Deployment istio-ingress/istio-ingressgateway -> Deployment monitoring/prometheus-server:9090: "
        "open but not in the table"
    ]


def test_an_address_block_opened_too_wide_shows_the_extra_way_out(prod: Rendered) -> None:
    cluster = copy.deepcopy(prod.cluster)
    policy(cluster, "gpu-monitoring", "dcgm-exporter")["spec"]["egress"] = [
        {"to": [{"ipBlock": {"cidr": "0.0.0.0/0"}}], "ports": [{"protocol": "TCP", "port": 443}]}
    ]
    problems = edge_problems(cluster, prod.config)
    assert problems
    assert all(p.startswith("DaemonSet gpu-monitoring/dcgm-exporter -> ") for p in problems)
    assert (
        "DaemonSet gpu-monitoring/dcgm-exporter -> an address outside the cluster:443: open but not in the table"
        in problems
    )


def test_a_policy_closed_too_tight_shows_the_missing_pairs(prod: Rendered) -> None:
    cluster = copy.deepcopy(prod.cluster)
    istiod = policy(cluster, "istio-system", "istiod")
    # istiod's webhooks shut to the API server.
    istiod["spec"]["ingress"] = [r for r in istiod["spec"]["ingress"] if "ipBlock" not in r["from"][0]]
    problems = edge_problems(cluster, prod.config)
    # The API server's default blocks are the kubelets' too: one address, both names.
    assert "api-server or kubelets -> Deployment istio-system/istiod:15017: in the table but shut" in problems
    assert {p.split(":")[0] for p in problems} == {"api-server or kubelets -> Deployment istio-system/istiod"}
    reach = checks.webhook_reach_problems(cluster, api_server(prod.config))
    assert reach
    assert all("istio-system/istiod:15017" in p for p in reach)


def test_a_namespace_without_dns_is_found(prod: Rendered) -> None:
    cluster = copy.deepcopy(prod.cluster)
    policy(cluster, "metrics-server", "default-deny")["spec"].pop("egress")
    assert checks.dns_and_mesh_problems(cluster) == [
        "NetworkPolicies keep Deployment metrics-server/metrics-server from DNS"
    ]
    assert edge_problems(cluster, prod.config) == [
        "Deployment metrics-server/metrics-server -> the cluster's DNS (kube-system/kube-dns):53: in the table but shut"
    ]


# --- Charts kept in kube-system, a narrowed API server, the network left open -------------------


def prod_values(**platform: Any) -> dict[str, Any]:
    document: dict[str, Any] = yaml.safe_load((ROOT / "Pulumi.prod.yaml").read_text(encoding="utf-8"))["config"]
    document["inference-platform:platform"] = document.get("inference-platform:platform", {}) | platform
    return document


def test_hami_and_metrics_server_kept_in_kube_system(tmp_path: Path) -> None:
    """Their pods get policies of their own; kube-system gets no default deny."""
    base = prod_values()["inference-platform:platform"]
    values = prod_values(
        hami=base["hami"] | {"namespace": "kube-system"},
        metricsServer=base.get("metricsServer", {}) | {"namespace": "kube-system"},
    )
    rendered = render_cluster("prod", write_stack_file(tmp_path / "Pulumi.prod.yaml", values), tmp_path / "render")
    cluster = rendered.cluster
    in_kube_system = {
        p["metadata"]["name"] for p in cluster.of_kind("NetworkPolicy") if p["metadata"]["namespace"] == "kube-system"
    }
    assert in_kube_system == {"hami-scheduler", "hami-device-plugin", "hami-admission-jobs", "metrics-server"}
    assert edge_problems(cluster, rendered.config) == []
    assert checks.webhook_reach_problems(cluster, api_server(rendered.config)) == []
    assert checks.dns_and_mesh_problems(cluster) == []


def test_the_api_server_setting_narrows_the_ways_to_it(tmp_path: Path) -> None:
    values = prod_values(network={"apiServer": {"cidrs": ["172.18.0.2/32"], "ports": [6443]}})
    rendered = render_cluster("prod", write_stack_file(tmp_path / "Pulumi.prod.yaml", values), tmp_path / "render")
    cluster = rendered.cluster
    istiod = policy(cluster, "istio-system", "istiod")
    assert {"to": [{"ipBlock": {"cidr": "172.18.0.2/32"}}], "ports": [{"protocol": "TCP", "port": 6443}]} in (
        istiod["spec"]["egress"]
    )
    (pod,) = [p for p in cluster.pods() if p.owner == "Deployment istio-system/istiod"]
    assert cluster.egress_to_address(pod, Address("api-server", "172.18.0.2"), 6443)
    assert not cluster.egress_to_address(pod, Address("elsewhere", "10.0.0.1"), 6443)
    assert edge_problems(cluster, rendered.config) == []


def test_an_open_platform_network_has_no_platform_policies(tmp_path: Path) -> None:
    values = prod_values(network={"closed": False})
    rendered = render_cluster("prod", write_stack_file(tmp_path / "Pulumi.prod.yaml", values), tmp_path / "render")
    namespaces = {p["metadata"]["namespace"] for p in rendered.cluster.of_kind("NetworkPolicy")}
    assert namespaces == {rendered.config.namespace}


@pytest.mark.parametrize(
    ("setting", "path"),
    [
        ({"apiServer": {"cidrs": ["10.0.0.1/8"], "ports": [443]}}, "platform.network.apiServer.cidrs[0]"),
        ({"apiServer": {"cidrs": [], "ports": [443]}}, "platform.network.apiServer.cidrs"),
        ({"kubelets": {"cidrs": ["10.0.0.0/8"], "ports": [70000]}}, "platform.network.kubelets.ports[0]"),
        ({"open": True}, "platform.network.open"),
    ],
)
def test_bad_network_settings_are_refused_with_their_path(setting: dict[str, Any], path: str) -> None:
    with pytest.raises(ConfigError) as raised:
        parse_stack_config({"domain": "models.example.com", "platform": {"network": setting}})
    assert [p.path for p in raised.value.problems] == [path]


@pytest.mark.parametrize(
    ("platform", "path"),
    [
        ({"prometheus": {"subcharts": ["kube-state-metrics"]}}, "platform.prometheus.subcharts"),
        ({"metricsServer": {"enabled": True, "namespace": "monitoring"}}, "platform.metricsServer.namespace"),
        (
            {"kubernetesVersion": "1.30.4", "hami": {"enabled": True, "namespace": "gpu-monitoring"}},
            "platform.hami.namespace",
        ),
        (
            {
                "kubernetesVersion": "1.30.4",
                "hami": {"enabled": True, "namespace": "gpu"},
                "metricsServer": {"enabled": True, "namespace": "gpu"},
            },
            "platform.metricsServer.namespace",
        ),
    ],
)
def test_what_the_closed_network_cannot_hold_is_refused(platform: dict[str, Any], path: str) -> None:
    """Subcharts the table has no rows for; a namespace of its own that another component creates."""
    with pytest.raises(ConfigError) as raised:
        parse_stack_config({"domain": "models.example.com", "platform": platform})
    assert [p.path for p in raised.value.problems] == [path]


def test_istiod_may_fetch_jwt_issuers_keys(prod: Rendered) -> None:
    """prod's models check JWTs: istiod, which fetches the issuers' jwksUri, may reach them on 443."""
    assert any(m.protection.jwt is not None for m in prod.config.models)
    (istiod,) = [p for p in prod.cluster.pods() if p.owner == "Deployment istio-system/istiod"]
    assert prod.cluster.egress_to_address(istiod, Address("issuer", "203.0.113.7"), 443)
    assert not prod.cluster.egress_to_address(istiod, Address("issuer", "203.0.113.7"), 80)
