"""The Kubernetes and Istio objects of one model, built as plain data.

Names and selectors depend only on the model and version names, never on weights or other
settings, so a traffic change edits objects in place and `pulumi up` never replaces them.
"""

from __future__ import annotations

import copy
import hashlib
import json
import math
from typing import Any

from pydantic import Field

from components.autoscaling import horizontal_pod_autoscaler
from components.config_base import ConfigModel, DNS1123Label, DNSSubdomain, duration_seconds
from components.gpu import VISIBLE_DEVICES, GpuNodes
from components.ingress_gateway import GATEWAY_RELEASE, GatewayRef
from components.model_spec import ModelVersion, ResourceList, Resources, TransformerSpec
from components.model_storage import StorageAccess, download_port, is_downloaded, model_files
from components.prometheus import MetricsScraper
from components.protection import access_policy, gateway_policies, rate_limit_filter
from components.runtimes import ModelSpec
from components.runtimes.base import (
    CONFIG_VOLUME,
    MODEL_VOLUME,
    SCRATCH_PATH,
    SCRATCH_VOLUME,
    ServerPlan,
    http_probe,
    tcp_probe,
)

# Clients reach every model on the same port, whatever its runtime listens on.
MODEL_SERVICE_PORT = 80
PART_OF = "inference-platform"
TRANSFORMER_CONTAINER = "transformer"
TRANSFORMER_SCRATCH = "transformer-scratch"
# With a transformer in front, the server's own HTTP port is renamed so the entry point is `http`.
PREDICTOR_HTTP_PORT_NAME = "http-predictor"
CONTAINER_SECURITY = {
    "allowPrivilegeEscalation": False,
    "readOnlyRootFilesystem": True,
    "capabilities": {"drop": ["ALL"]},
}
# The storage initializer image runs as this (non-root) user.
INITIALIZER_USER = 1000
# Before a pod stops, it keeps serving this long while endpoints and routes drop it.
PRESTOP_SECONDS = 10
# pulumi-kubernetes waits this long for a Deployment to roll out (its default is 10 minutes).
ROLLOUT_TIMEOUT_ANNOTATION = "pulumi.com/timeoutSeconds"
# Beyond the servers' startup probes: pulling images and downloading model files.
ROLLOUT_ALLOWANCE_SECONDS = 15 * 60
LIFECYCLE = {"preStop": {"sleep": {"seconds": PRESTOP_SECONDS}}}
# Istio's sidecar serves merged metrics here; Prometheus scrapes it.
MERGED_METRICS_PORT = 15020
TRANSFORMER_RESOURCES = Resources(
    requests=ResourceList(cpu="100m", memory="256Mi"),
    limits=ResourceList(cpu="1", memory="1Gi"),
)


class InferenceServiceArgs(ConfigModel):
    """Everything an InferenceService needs: the model and where the platform puts it."""

    model: ModelSpec
    namespace: DNS1123Label
    domain: DNSSubdomain
    gateway: GatewayRef = GatewayRef()
    url_scheme: str = "http"
    gpu_nodes: GpuNodes = Field(default_factory=GpuNodes)
    storage: StorageAccess | None = Field(default=None, description="Credentials for downloaded model files.")
    metrics_scraper: MetricsScraper | None = Field(
        default=None, description="Prometheus: the only workload that may reach metrics ports."
    )

    @property
    def host(self) -> str:
        """The model's own host name."""
        return f"{self.model.name}.{self.domain}"

    @property
    def shared_host(self) -> str:
        """The gateway's host for path-based access: <domain>/models/<model>/."""
        return self.domain

    @property
    def path_prefix(self) -> str:
        return f"/models/{self.model.name}/"

    @property
    def service_fqdn(self) -> str:
        return f"{self.model.name}.{self.namespace}.svc.cluster.local"


def version_name(args: InferenceServiceArgs, version: ModelVersion) -> str:
    return f"{args.model.name}-{version.name}"


def selector_labels(args: InferenceServiceArgs, version: ModelVersion | None = None) -> dict[str, str]:
    """The labels Services and Istio subsets select on. Never change these for an existing version."""
    labels = {"app": args.model.name}
    if version is not None:
        labels["version"] = version.name
    return labels


def object_labels(args: InferenceServiceArgs, version: ModelVersion | None = None) -> dict[str, str]:
    labels = {
        "app.kubernetes.io/name": args.model.name,
        "app.kubernetes.io/component": "predictor",
        "app.kubernetes.io/part-of": PART_OF,
        "app.kubernetes.io/managed-by": "pulumi",
        "inference-platform/runtime": args.model.runtime,
    }
    if version is not None:
        labels["app.kubernetes.io/instance"] = version_name(args, version)
        labels["app.kubernetes.io/version"] = version.name
    return selector_labels(args, version) | labels


def _metadata(args: InferenceServiceArgs, name: str, version: ModelVersion | None = None) -> dict[str, Any]:
    return {"name": name, "namespace": args.namespace, "labels": object_labels(args, version)}


def scrape_annotations(plan: ServerPlan) -> dict[str, str]:
    """The annotations Prometheus' kubernetes_sd relabel rules keep and follow (on the pods;
    Istio's injector points them at the sidecar, which serves these metrics merged with its own)."""
    return {
        "prometheus.io/scrape": "true",
        "prometheus.io/port": str(plan.metrics_port),
        "prometheus.io/path": plan.metrics_path,
    }


def config_map(args: InferenceServiceArgs, version: ModelVersion, plan: ServerPlan) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": _metadata(args, version_name(args, version), version),
        "data": dict(sorted(plan.config_files.items())),
    }


def _config_checksum(plan: ServerPlan) -> str:
    """Changes whenever the generated config does, so a config change rolls the pods."""
    payload = json.dumps(plan.config_files, sort_keys=True).encode()
    return hashlib.sha256(payload).hexdigest()


def _predictor(args: InferenceServiceArgs, plan: ServerPlan, model_sub_path: str | None) -> dict[str, Any]:
    """The server container with the model's files, GPUs and (behind a transformer) renamed port."""
    container = copy.deepcopy(plan.container)
    if model_sub_path is not None:
        for mount in container["volumeMounts"]:
            if mount["name"] == MODEL_VOLUME:
                mount["subPath"] = model_sub_path
    placement = args.model.gpu.placement(args.gpu_nodes)
    if placement.limits:
        container["resources"].setdefault("limits", {}).update(placement.limits)
    if placement.env:
        env = [e for e in container.get("env", []) if e["name"] not in placement.env]
        env += [{"name": name, "value": value} for name, value in placement.env.items()]
        container["env"] = sorted(env, key=lambda e: e["name"])
    if args.model.transformer is not None:
        for port in container["ports"]:
            if port["name"] == "http":
                port["name"] = PREDICTOR_HTTP_PORT_NAME
    container["securityContext"] = CONTAINER_SECURITY
    container["lifecycle"] = LIFECYCLE
    container["imagePullPolicy"] = "Always"
    return container


def _transformer(args: InferenceServiceArgs, transformer: TransformerSpec, plan: ServerPlan) -> dict[str, Any]:
    """The pre/post-processing container: it takes requests on `http` and calls the server on localhost."""
    env = {
        "PREDICTOR_HOST": f"localhost:{plan.http_port}",
        "MODEL_NAME": args.model.name,
        "PORT": str(transformer.port),
        VISIBLE_DEVICES: "none",
    }
    env.update({e.name: e.value for e in transformer.env})
    probe = (
        http_probe(transformer.health_path, transformer.port, period=10, failures=3)
        if transformer.health_path
        else tcp_probe(transformer.port, period=10, failures=3)
    )
    container: dict[str, Any] = {"name": TRANSFORMER_CONTAINER, "image": transformer.image}
    if transformer.command:
        container["command"] = transformer.command
    if transformer.args:
        container["args"] = transformer.args
    container.update(
        {
            "ports": [{"name": "http", "containerPort": transformer.port, "protocol": "TCP"}],
            "env": [{"name": name, "value": value} for name, value in sorted(env.items())],
            "resources": transformer.resources.over(TRANSFORMER_RESOURCES).to_kubernetes(),
            "volumeMounts": [{"name": TRANSFORMER_SCRATCH, "mountPath": SCRATCH_PATH}],
            "startupProbe": probe | {"failureThreshold": 60},
            "readinessProbe": probe,
            "livenessProbe": tcp_probe(transformer.port, period=10, failures=3),
            "securityContext": CONTAINER_SECURITY
            | ({"runAsUser": transformer.run_as_user} if transformer.run_as_user is not None else {}),
            "lifecycle": LIFECYCLE,
            "imagePullPolicy": "Always",
        }
    )
    return container


def pod_spec(args: InferenceServiceArgs, version: ModelVersion, plan: ServerPlan) -> dict[str, Any]:
    files = model_files(
        version.model_uri,
        volume_name=MODEL_VOLUME,
        download_size=str(args.model.download_size),
        access=args.storage,
        scratch_volume=SCRATCH_VOLUME,
        security_context=CONTAINER_SECURITY | {"runAsUser": INITIALIZER_USER},
    )
    containers = [_predictor(args, plan, files.sub_path)]
    volumes = [files.volume, {"name": SCRATCH_VOLUME, "emptyDir": {}}]
    if plan.config_files:
        volumes.append({"name": CONFIG_VOLUME, "configMap": {"name": version_name(args, version)}})
    volumes += [*files.extra_volumes, *plan.volumes]
    transformer = args.model.transformer
    if transformer is not None:
        containers.insert(0, _transformer(args, transformer, plan))
        volumes.append({"name": TRANSFORMER_SCRATCH, "emptyDir": {}})
    security: dict[str, Any] = {"runAsNonRoot": True, "seccompProfile": {"type": "RuntimeDefault"}}
    if plan.run_as_user is not None:
        security["runAsUser"] = plan.run_as_user
    spec: dict[str, Any] = {
        "automountServiceAccountToken": False,
        "enableServiceLinks": False,
        "securityContext": security,
        # In-flight requests finish: the preStop pause, then up to the request timeout.
        "terminationGracePeriodSeconds": PRESTOP_SECONDS + int(duration_seconds(args.model.timeout)) + 5,
        "topologySpreadConstraints": [
            {
                "maxSkew": 1,
                "topologyKey": "kubernetes.io/hostname",
                "whenUnsatisfiable": "ScheduleAnyway",
                "labelSelector": {"matchLabels": selector_labels(args, version)},
            }
        ],
    }
    if files.init_container is not None:
        spec["initContainers"] = [files.init_container | {"imagePullPolicy": "Always"}]
    spec["containers"] = containers
    spec["volumes"] = volumes
    spec.update(args.model.gpu.placement(args.gpu_nodes).pod_fields())
    return spec


def rollout_timeout_seconds(args: InferenceServiceArgs, pod: dict[str, Any]) -> int:
    """How long a version may take to become ready: as configured, or the longest startup probe
    budget of its containers plus time to pull images and download the model."""
    if args.model.rollout_timeout is not None:
        return math.ceil(duration_seconds(args.model.rollout_timeout))
    startup = max(
        (
            probe.get("initialDelaySeconds", 0) + probe["periodSeconds"] * probe["failureThreshold"]
            for container in pod["containers"]
            if (probe := container.get("startupProbe")) is not None
        ),
        default=0,
    )
    return startup + ROLLOUT_ALLOWANCE_SECONDS


def deployment(args: InferenceServiceArgs, version: ModelVersion, plan: ServerPlan) -> dict[str, Any]:
    name = version_name(args, version)
    spec: dict[str, Any] = {}
    if not args.model.autoscaling.enabled:
        # With an autoscaler, replicas stay unset so Pulumi never fights it over the count.
        spec["replicas"] = args.model.fixed_replicas(version)
    pod = pod_spec(args, version, plan)
    metadata = _metadata(args, name, version)
    metadata["annotations"] = {ROLLOUT_TIMEOUT_ANNOTATION: str(rollout_timeout_seconds(args, pod))}
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": metadata,
        "spec": spec
        | {
            "revisionHistoryLimit": 5,
            "selector": {"matchLabels": selector_labels(args, version)},
            "strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 1, "maxUnavailable": 0}},
            "template": {
                "metadata": {
                    "labels": object_labels(args, version),
                    "annotations": scrape_annotations(plan)
                    | {"inference-platform/config-sha256": _config_checksum(plan)},
                },
                "spec": pod,
            },
        },
    }


def version_service(args: InferenceServiceArgs, version: ModelVersion, pod: dict[str, Any]) -> dict[str, Any]:
    """Names one version's ports: `kubectl port-forward` to debug a shadow (in the mesh only the
    gateway is admitted, by the model's access policy).

    It carries no scrape annotations: Prometheus scrapes the pods, where Istio serves the app's
    metrics with Envoy's on the sidecar (plain text, so it works under STRICT mTLS); scraping the
    Service's endpoints too would duplicate every series.
    """
    metadata = _metadata(args, version_name(args, version), version)
    ports = [
        {"name": port["name"], "port": port["containerPort"], "targetPort": port["name"], "protocol": "TCP"}
        for container in pod["containers"]
        for port in container["ports"]
    ]
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": metadata,
        "spec": {"type": "ClusterIP", "selector": selector_labels(args, version), "ports": ports},
    }


def model_service(args: InferenceServiceArgs) -> dict[str, Any]:
    """The host Istio routes to; DestinationRule subsets pick the version by its label."""
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": _metadata(args, args.model.name),
        "spec": {
            "type": "ClusterIP",
            "selector": selector_labels(args),
            "ports": [{"name": "http", "port": MODEL_SERVICE_PORT, "targetPort": "http", "protocol": "TCP"}],
        },
    }


def destination_rule(args: InferenceServiceArgs) -> dict[str, Any]:
    return {
        "apiVersion": "networking.istio.io/v1",
        "kind": "DestinationRule",
        "metadata": _metadata(args, args.model.name),
        "spec": {
            "host": args.service_fqdn,
            "trafficPolicy": args.model.protection.circuit_breaker.traffic_policy(),
            "subsets": [{"name": v.name, "labels": {"version": v.name}} for v in args.model.versions],
        },
    }


def _destination(args: InferenceServiceArgs, version_name: str) -> dict[str, Any]:
    return {"host": args.service_fqdn, "subset": version_name, "port": {"number": MODEL_SERVICE_PORT}}


def _route_body(args: InferenceServiceArgs) -> dict[str, Any]:
    model = args.model
    body: dict[str, Any] = {
        "route": [
            {"destination": _destination(args, name), "weight": weight} for name, weight in model.live_weights.items()
        ],
    }
    if model.mirrors:
        body["mirrors"] = [
            {"destination": _destination(args, name), "percentage": {"value": percent}}
            for name, percent in model.mirrors.items()
        ]
    body["timeout"] = model.timeout
    retries = model.retries
    per_try = retries.per_try_timeout or model.timeout
    body["retries"] = (
        {"attempts": retries.attempts, "perTryTimeout": per_try, "retryOn": retries.retry_on}
        if retries.attempts
        else {"attempts": 0}
    )
    return body


def virtual_service(args: InferenceServiceArgs) -> dict[str, Any]:
    """Weighted routes to live versions and mirrors to shadows, on two entry points.

    `<model>.<domain>` serves the model at the root. `<domain>/models/<model>/` is the gateway's
    shared host; every model's VirtualService lists it, and Istio merges those on the gateway,
    so the by-host route must match on the authority or it would swallow other models' paths.
    """
    body = _route_body(args)
    return {
        "apiVersion": "networking.istio.io/v1",
        "kind": "VirtualService",
        "metadata": _metadata(args, args.model.name),
        "spec": {
            "hosts": [args.host, args.shared_host],
            "gateways": [args.gateway.qualified_name],
            "http": [
                {
                    "name": "by-path",
                    "match": [{"uri": {"prefix": args.path_prefix}}],
                    "rewrite": {"uri": "/"},
                }
                | body,
                {"name": "by-host", "match": [{"authority": {"prefix": args.host}}]} | body,
            ],
        },
    }


def disruption_budget(args: InferenceServiceArgs, version: ModelVersion) -> dict[str, Any] | None:
    """At most one pod of a version down for voluntary disruptions, when it can have several."""
    autoscaling = args.model.autoscaling
    most = autoscaling.max_replicas if autoscaling.enabled else args.model.fixed_replicas(version)
    if most < 2:
        return None
    return {
        "apiVersion": "policy/v1",
        "kind": "PodDisruptionBudget",
        "metadata": _metadata(args, version_name(args, version), version),
        "spec": {"maxUnavailable": 1, "selector": {"matchLabels": selector_labels(args, version)}},
    }


def _pod_ports(pod: dict[str, Any]) -> dict[str, int]:
    return {port["name"]: port["containerPort"] for c in pod["containers"] for port in c["ports"]}


def network_policy(args: InferenceServiceArgs, serving: list[int], metrics_port: int) -> dict[str, Any]:
    """Who reaches the model's pods, and where they may go (on top of the namespace's default deny)."""
    gateway = {"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": args.gateway.namespace}}}
    ingress: list[dict[str, Any]] = [{"from": [gateway], "ports": [{"protocol": "TCP", "port": p} for p in serving]}]
    scraper = args.metrics_scraper
    if scraper is not None:
        monitoring = {
            "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": scraper.namespace}},
            "podSelector": {"matchLabels": scraper.pod_labels},
        }
        # Istio's merged endpoint (the sidecar agent's port, outside Envoy's mTLS and access
        # policies: this rule is what keeps it to Prometheus) and the server's own.
        scraped = sorted({MERGED_METRICS_PORT, metrics_port})
        ingress.append({"from": [monitoring], "ports": [{"protocol": "TCP", "port": p} for p in scraped]})
    spec: dict[str, Any] = {
        "podSelector": {"matchLabels": selector_labels(args)},
        "policyTypes": ["Ingress", "Egress"],
        "ingress": ingress,
    }
    return {
        "apiVersion": "networking.k8s.io/v1",
        "kind": "NetworkPolicy",
        "metadata": _metadata(args, args.model.name),
        "spec": spec,
    }


def download_policy(args: InferenceServiceArgs, version: ModelVersion) -> dict[str, Any] | None:
    """The way out for a version whose storage initializer fetches model files from outside the
    cluster: its own policy, so adding or retiring a version leaves the model's policy alone."""
    if not is_downloaded(version.model_uri):
        return None
    port = download_port(version.model_uri, args.storage)
    return {
        "apiVersion": "networking.k8s.io/v1",
        "kind": "NetworkPolicy",
        "metadata": _metadata(args, f"{version_name(args, version)}-download", version),
        "spec": {
            "podSelector": {"matchLabels": selector_labels(args, version)},
            "policyTypes": ["Egress"],
            "egress": [
                {
                    "to": [{"ipBlock": {"cidr": "0.0.0.0/0"}}, {"ipBlock": {"cidr": "::/0"}}],
                    "ports": [{"protocol": "TCP", "port": port}],
                }
            ],
        },
    }


def protection_manifests(args: InferenceServiceArgs, ports: dict[str, int], plan: ServerPlan) -> list[dict[str, Any]]:
    """Rate limit, gateway access rules, in-mesh access and network policy of the model."""
    model, protection = args.model, args.model.protection
    serving = sorted({ports[name] for name in ("http", "grpc") if name in ports})
    # A server with metrics on its serving port would publish them through the gateway.
    private_paths = [plan.metrics_path, f"{plan.metrics_path}/*"] if plan.metrics_port in serving else []
    objects = gateway_policies(
        model.name,
        protection,
        gateway=(args.gateway.namespace, args.gateway.selector),
        hosts=(args.host, args.shared_host, args.path_prefix),
        private_paths=private_paths,
    )
    if protection.rate_limit is not None:
        name = f"{model.name}-rate-limit"
        objects.append(rate_limit_filter(name, args.namespace, selector_labels(args), protection.rate_limit))
    access = access_policy(
        f"{model.name}-access",
        args.namespace,
        selector_labels(args),
        gateway_account=(args.gateway.namespace, GATEWAY_RELEASE),
        serving_ports=serving,
    )
    objects.append(access | {"metadata": access["metadata"] | {"labels": object_labels(args)}})
    objects.append(network_policy(args, serving, plan.metrics_port))
    return objects


def model_manifests(args: InferenceServiceArgs) -> list[dict[str, Any]]:
    """Every object of the model, versions first, in a stable order."""
    objects: list[dict[str, Any]] = []
    plans = [(version, args.model.plan(version, args.gpu_nodes)) for version in args.model.versions]
    ports: dict[str, int] = {}
    for version, plan in plans:
        if plan.config_files:
            objects.append(config_map(args, version, plan))
        workload = deployment(args, version, plan)
        pod = workload["spec"]["template"]["spec"]
        objects.append(workload)
        objects.append(version_service(args, version, pod))
        if args.model.autoscaling.enabled:
            metadata = _metadata(args, version_name(args, version), version)
            objects.append(horizontal_pod_autoscaler(metadata, args.model.autoscaling))
        budget = disruption_budget(args, version)
        if budget is not None:
            objects.append(budget)
        download = download_policy(args, version)
        if download is not None:
            objects.append(download)
        ports = _pod_ports(pod)  # the same for every version of a model
    objects += [model_service(args), destination_rule(args), virtual_service(args)]
    objects += protection_manifests(args, ports, plans[-1][1])
    return objects
