"""Per-model protection, namespace defaults and pod hardening, as rendered for real models."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import boto3
import pytest
from pydantic import TypeAdapter, ValidationError

from inference_platform.platform.prometheus import MetricsScraper
from inference_platform.serving.inference_service.args import InferenceServiceArgs
from inference_platform.serving.inference_service.manifests import model_manifests
from inference_platform.serving.model_namespace import ModelNamespaceArgs, default_deny, strict_mtls
from inference_platform.serving.model_storage import StorageAccess, StorageCredentials
from inference_platform.serving.runtimes import ModelSpec
from tests.conftest import ROOT
from tests.owner_schemas import validate

ENVOY_PYTHON = ROOT / ".venv-envoy" / "bin" / "python"
ENVOY_PARSE = Path(__file__).with_name("envoy_parse.py")
MODEL_SPEC: TypeAdapter[ModelSpec] = TypeAdapter(ModelSpec)
TF_METRICS = "/monitoring/prometheus/metrics"
VERSIONS = [
    {"name": "v1", "modelUri": "pvc://models/iris/v1", "weight": 100},
    {"name": "v2", "modelUri": "s3://bucket/iris/2", "mirrorPercent": 10},
]


def render(
    monitoring: str | None = "monitoring", runtime: str = "mlserver", **settings: Any
) -> dict[tuple[str, str], dict[str, Any]]:
    spec = MODEL_SPEC.validate_python({"name": "iris", "runtime": runtime, "versions": VERSIONS} | settings)
    scraper = MetricsScraper(namespace=monitoring) if monitoring is not None else None
    # v2 is read from a public bucket.
    storage = StorageAccess(secret_name="model-storage-credentials", s3_anonymous=True)
    args = InferenceServiceArgs(
        model=spec, namespace="service", domain="models.example.com", metrics_scraper=scraper, storage=storage
    )
    manifests = model_manifests(args)
    for manifest in manifests:
        validate(manifest)
    return {(m["kind"], m["metadata"]["name"]): m for m in manifests}


def envoy_parse(type_url: str, value: dict[str, Any]) -> dict[str, Any]:
    assert ENVOY_PYTHON.exists(), "Envoy's messages live in .venv-envoy: run `make test`, which builds it"
    done = subprocess.run(
        [str(ENVOY_PYTHON), str(ENVOY_PARSE)],
        input=json.dumps({"type_url": type_url, "value": value}),
        capture_output=True,
        text=True,
        check=True,
    )
    result: dict[str, Any] = json.loads(done.stdout)
    return result


def test_rate_limit_is_envoys_local_rate_limit_at_each_pod() -> None:
    objects = render(protection={"rateLimit": {"requestsPerSecond": 50, "burst": 100}})
    spec = objects[("EnvoyFilter", "iris-rate-limit")]["spec"]
    assert spec["workloadSelector"] == {"labels": {"app": "iris"}}
    (patch,) = spec["configPatches"]
    assert patch["applyTo"] == "HTTP_FILTER"
    assert patch["match"]["context"] == "SIDECAR_INBOUND"
    typed = patch["patch"]["value"]["typed_config"]

    parsed = envoy_parse(typed["type_url"], typed["value"])

    assert parsed.get("ok"), parsed
    assert "max_tokens: 100" in parsed["text"]
    assert "tokens_per_fill {\n    value: 50\n  }" in parsed["text"]


def test_envoys_messages_reject_a_misspelt_field() -> None:
    url = "type.googleapis.com/envoy.extensions.filters.http.local_ratelimit.v3.LocalRateLimit"
    assert "tokn_bucket" in envoy_parse(url, {"stat_prefix": "x", "tokn_bucket": {}})["error"]


def test_no_rate_limit_unless_asked() -> None:
    assert not [key for key in render() if key[0] == "EnvoyFilter"]


def test_client_lists_headers_and_jwt_are_deny_rules_scoped_to_the_model() -> None:
    objects = render(
        protection={
            "clients": {"allowCidrs": ["10.0.0.0/8", "2001:db8::/32"], "denyCidrs": ["10.6.6.0/24"]},
            "requireHeaders": [{"name": "x-team", "values": ["ml", "search"]}],
            "jwt": {
                "issuer": "https://auth.example.com",
                "jwksUri": "https://auth.example.com/jwks",
                "audiences": ["iris"],
            },
        }
    )
    policy = objects[("AuthorizationPolicy", "iris-gateway")]
    assert policy["metadata"]["namespace"] == "istio-ingress"
    spec = policy["spec"]
    assert spec["action"] == "DENY"  # an ALLOW on the shared gateway would shut out every other model
    assert spec["selector"] == {"matchLabels": {"istio": "ingressgateway"}}
    deny, allow, header, jwt = spec["rules"]
    assert deny["from"] == [{"source": {"remoteIpBlocks": ["10.6.6.0/24"]}}]
    assert allow["from"] == [{"source": {"notRemoteIpBlocks": ["10.0.0.0/8", "2001:db8::/32"]}}]
    assert header["when"] == [{"key": "request.headers[x-team]", "notValues": ["ml", "search"]}]
    assert jwt["from"] == [{"source": {"notRequestPrincipals": ["https://auth.example.com/*"]}}]
    for rule in spec["rules"]:
        assert rule["to"] == [
            {"operation": {"hosts": ["iris.models.example.com", "iris.models.example.com:*"]}},
            {"operation": {"hosts": ["models.example.com", "models.example.com:*"], "paths": ["/models/iris/*"]}},
        ]
    authn = objects[("RequestAuthentication", "iris-jwt")]["spec"]
    assert authn["jwtRules"] == [
        {
            "issuer": "https://auth.example.com",
            "jwksUri": "https://auth.example.com/jwks",
            "audiences": ["iris"],
            "forwardOriginalToken": True,
        }
    ]


def test_nothing_at_the_gateway_by_default() -> None:
    assert not [key for key in render() if key[1] in ("iris-gateway", "iris-jwt")]


@pytest.mark.parametrize(
    ("runtime", "settings", "path"),
    [
        ("vllm", {"gpu": "exclusive"}, "/metrics"),
        ("tfserving", {"versions": [{"name": "v1", "modelUri": "pvc://models/iris/1", "weight": 100}]}, TF_METRICS),
    ],
)
def test_metrics_on_the_serving_port_stay_inside_the_cluster(runtime: str, settings: dict[str, Any], path: str) -> None:
    """vLLM and TF Serving serve metrics on the port the gateway routes to: the gateway refuses them."""
    objects = render(runtime=runtime, **settings)
    (private,) = objects[("AuthorizationPolicy", "iris-gateway")]["spec"]["rules"]
    assert "from" not in private  # from anyone
    # Exact, and below it: vLLM serves /metrics/ too.
    assert private["to"] == [
        {
            "operation": {
                "hosts": ["iris.models.example.com", "iris.models.example.com:*"],
                "paths": [path, f"{path}/*"],
            }
        },
        {
            "operation": {
                "hosts": ["models.example.com", "models.example.com:*"],
                "paths": [f"/models/iris{path}", f"/models/iris{path}/*"],
            }
        },
    ]
    # Prometheus reaches them inside the mesh like any metrics port; no separate metrics rule.
    assert len(objects[("AuthorizationPolicy", "iris-access")]["spec"]["rules"]) == 1


def test_circuit_breaking_ejects_a_pod_not_the_version() -> None:
    policy = render()[("DestinationRule", "iris")]["spec"]["trafficPolicy"]
    assert policy["outlierDetection"] == {
        "consecutive5xxErrors": 5,
        "interval": "10s",
        "baseEjectionTime": "30s",
        "maxEjectionPercent": 50,
    }
    assert policy["connectionPool"]["tcp"]["maxConnections"] == 1024
    assert policy["connectionPool"]["http"]["http1MaxPendingRequests"] == 1024


def test_only_the_gateway_reaches_serving_ports_in_the_mesh() -> None:
    spec = render()[("AuthorizationPolicy", "iris-access")]["spec"]
    assert spec["action"] == "ALLOW"
    assert spec["selector"] == {"matchLabels": {"app": "iris"}}
    # Prometheus has no sidecar, so no principal could name it: it scrapes :15020 outside Envoy,
    # which the NetworkPolicy keeps to Prometheus' pods.
    assert spec["rules"] == [
        {
            "from": [{"source": {"principals": ["cluster.local/ns/istio-ingress/sa/istio-ingressgateway"]}}],
            # HTTP only: no gateway route carries gRPC, so MLServer's 8081 stays closed to it.
            "to": [{"operation": {"ports": ["8080"]}}],
        }
    ]


def test_network_policy_lets_in_the_gateway_and_prometheus_and_out_the_download() -> None:
    objects = render()
    spec = objects[("NetworkPolicy", "iris")]["spec"]
    gateway, prometheus = spec["ingress"]
    assert gateway["from"] == [{"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "istio-ingress"}}}]
    assert [p["port"] for p in gateway["ports"]] == [8080]  # not gRPC 8081: no route carries it
    # Prometheus' server pods only, not everything else in its namespace.
    assert prometheus["from"] == [
        {
            "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "monitoring"}},
            "podSelector": {"matchLabels": {"inference-platform.io/role": "metrics-scraper"}},
        }
    ]
    assert [p["port"] for p in prometheus["ports"]] == [8082, 15020]
    assert "egress" not in spec
    # v2 downloads from S3: only its own pods may leave the cluster, and only to HTTPS.
    assert ("NetworkPolicy", "iris-v1-download") not in objects
    download = objects[("NetworkPolicy", "iris-v2-download")]["spec"]
    assert download["podSelector"] == {"matchLabels": {"app": "iris", "version": "v2"}}
    assert download["policyTypes"] == ["Egress"]
    (egress,) = download["egress"]
    assert [p["port"] for p in egress["ports"]] == [443]


def test_without_downloads_or_prometheus_nothing_more_is_open() -> None:
    versions = [VERSIONS[0] | {"weight": 100}]
    objects = render(monitoring=None, versions=versions)
    spec = objects[("NetworkPolicy", "iris")]["spec"]
    assert "egress" not in spec
    assert not [key for key in objects if key[1].endswith("-download")]
    assert len(spec["ingress"]) == 1
    assert render(monitoring=None)[("AuthorizationPolicy", "iris-access")]["spec"]["rules"][1:] == []


def test_the_namespace_is_strict_mtls_and_default_deny() -> None:
    args = ModelNamespaceArgs(name="service")
    assert strict_mtls(args)["spec"] == {"mtls": {"mode": "STRICT"}}
    deny = default_deny(args)["spec"]
    assert deny["podSelector"] == {}
    assert deny["policyTypes"] == ["Ingress", "Egress"]
    assert "ingress" not in deny
    dns, istiod = deny["egress"]
    assert {p["port"] for p in dns["ports"]} == {53}
    assert istiod["ports"] == [{"protocol": "TCP", "port": 15012}]
    for manifest in (strict_mtls(args), default_deny(args)):
        validate(manifest)


def test_pods_shut_down_gracefully_spread_out_and_keep_capacity() -> None:
    objects = render(replicas=3, timeout="45s")
    deployment = objects[("Deployment", "iris-v1")]["spec"]
    pod = deployment["template"]["spec"]
    assert deployment["strategy"]["rollingUpdate"]["maxUnavailable"] == 0
    assert pod["terminationGracePeriodSeconds"] == 10 + 45 + 5
    for container in pod["containers"]:
        assert container["lifecycle"] == {"preStop": {"sleep": {"seconds": 10}}}
        assert container["securityContext"]["readOnlyRootFilesystem"] is True
    (spread,) = pod["topologySpreadConstraints"]
    assert spread["topologyKey"] == "kubernetes.io/hostname"
    assert spread["labelSelector"] == {"matchLabels": {"app": "iris", "version": "v1"}}
    budget = objects[("PodDisruptionBudget", "iris-v1")]["spec"]
    assert budget == {"maxUnavailable": 1, "selector": {"matchLabels": {"app": "iris", "version": "v1"}}}


def test_a_single_replica_gets_no_disruption_budget() -> None:
    assert not [key for key in render() if key[0] == "PodDisruptionBudget"]
    assert ("PodDisruptionBudget", "iris-v1") in render(autoscaling={"minReplicas": 1, "maxReplicas": 2})


@pytest.mark.parametrize(
    ("protection", "words"),
    [
        ({"clients": {"allowCidrs": ["10.0.0.300/8"]}}, "not an IP address or CIDR block"),
        ({"clients": {"allowCidrs": ["10.0.0.0/8"], "denyCidrs": ["10.0.0.0/8"]}}, "both allowed and denied"),
        ({"jwt": {"issuer": "x", "jwksUri": "http://insecure/jwks"}}, "must be an https:// URL"),
        ({"requireHeaders": [{"name": "X-Team", "values": ["a"]}]}, "must be an HTTP header's name in lowercase"),
        ({"rateLimit": {"requestsPerSecond": 0}}, "greater than or equal to 1"),
        ({"circuitBreaker": {"maxEjectionPercent": 101}}, "less than or equal to 100"),
    ],
)
def test_bad_protection_settings_are_config_errors(protection: dict[str, Any], words: str) -> None:
    with pytest.raises(ValidationError, match=words):
        render(protection=protection)


def test_the_generated_s3_credentials_file_is_what_boto3_reads(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    credentials = StorageCredentials.model_validate({"s3": {"accessKeyId": "AKIAEXAMPLE", "secretAccessKey": "s3cr3t"}})
    path = tmp_path / "aws-credentials"
    path.write_text(credentials.secret_data()["aws-credentials"])
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_PROFILE", "AWS_CONFIG_FILE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(path))
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "none"))

    found = boto3.Session().get_credentials()

    assert found is not None
    assert (found.access_key, found.secret_key) == ("AKIAEXAMPLE", "s3cr3t")


def test_torchserve_runs_as_a_numeric_user() -> None:
    """Its image's USER is the name `model-server`, which the kubelet cannot check against runAsNonRoot."""
    pod = render(runtime="torchserve")[("Deployment", "iris-v1")]["spec"]["template"]["spec"]
    assert pod["securityContext"]["runAsNonRoot"] is True
    assert pod["securityContext"]["runAsUser"] == 1000


def test_a_transformer_image_can_be_given_a_numeric_user() -> None:
    transformer = {"image": "registry.example.com/tokenizer:1.2.0"}
    objects = render(transformer=transformer | {"runAsUser": 1001})
    containers = objects[("Deployment", "iris-v1")]["spec"]["template"]["spec"]["containers"]
    assert containers[0]["name"] == "transformer"
    assert containers[0]["securityContext"]["runAsUser"] == 1001
    unset = render(transformer=transformer)[("Deployment", "iris-v1")]["spec"]["template"]["spec"]["containers"]
    assert "runAsUser" not in unset[0]["securityContext"]


def test_pulumi_waits_as_long_as_a_version_may_take_to_start() -> None:
    """pulumi-kubernetes gives up on a Deployment after 10 minutes unless told otherwise."""

    def waits(**settings: Any) -> int:
        deployment = render(**settings)[("Deployment", "iris-v1")]
        startup = deployment["spec"]["template"]["spec"]["containers"][-1]["startupProbe"]
        budget: int = startup["periodSeconds"] * startup["failureThreshold"]
        seconds = int(deployment["metadata"]["annotations"]["pulumi.com/timeoutSeconds"])
        return seconds - budget

    assert waits() == 15 * 60  # the server's startup budget, plus pulls and downloads
    assert waits(runtime="vllm", gpu="exclusive") == 15 * 60  # a longer budget, the same allowance
    deployment = render(rolloutTimeout="2h")[("Deployment", "iris-v1")]
    assert deployment["metadata"]["annotations"] == {"pulumi.com/timeoutSeconds": "7200"}
