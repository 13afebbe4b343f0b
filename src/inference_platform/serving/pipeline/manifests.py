"""The objects of one pipeline: KServe's router with the graph, its Service and routes, its
protection, and access to exactly the models its graph names."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from pydantic import Field

from inference_platform import pins
from inference_platform.config.base import ConfigModel, DNS1123Label, DNSSubdomain, drop_none, duration_seconds
from inference_platform.platform.ingress_gateway import GATEWAY_RELEASE, GatewayRef
from inference_platform.platform.keda import KedaRef
from inference_platform.platform.prometheus import MetricsScraper
from inference_platform.serving.access import Access, Workload, authorization_policy, network_policy, service_account
from inference_platform.serving.autoscaling import horizontal_pod_autoscaler
from inference_platform.serving.inference_service.args import PART_OF, service_fqdn
from inference_platform.serving.inference_service.pods import CONTAINER_SECURITY
from inference_platform.serving.inference_service.routing import entry_routes
from inference_platform.serving.pipeline.spec import ROUTER_RESOURCES, PipelineSpec
from inference_platform.serving.protection import gateway_policies, rate_limit_filter
from inference_platform.serving.scaled_object import scaled_object, target_triggers

ROUTER_CONTAINER = "router"
ROUTER_PORT = 8080  # fixed in the router's code
READINESS_PATH = "/readyz"
PROPAGATE_HEADERS = "PROPAGATE_HEADERS"
SERVICE_PORT = 80
# On SIGTERM the router fails its readiness for 30s before it stops serving.
ROUTER_DRAIN_SECONDS = 30
# gcr.io/distroless/static:nonroot, the router image's base, runs as this user.
ROUTER_USER = 65532


class PipelineArgs(ConfigModel):
    """A pipeline and where the platform puts it; `step_urls` holds each model step's URL."""

    pipeline: PipelineSpec
    namespace: DNS1123Label
    domain: DNSSubdomain
    gateway: GatewayRef = GatewayRef()
    url_scheme: str = "http"
    metrics_scraper: MetricsScraper | None = None
    callees: list[Workload] = Field(default_factory=list, description="The models the graph names.")
    step_urls: dict[str, str] = Field(
        default_factory=dict, description="Each model's inference URL in the cluster, by model name."
    )
    example_body: dict[str, Any] | None = Field(
        default=None, description="The body of the `curl` output's request: the example request of the first model."
    )
    keda: KedaRef | None = Field(default=None, description="Scale with KEDA (a ScaledObject) instead of an HPA.")

    @property
    def name(self) -> str:
        return self.pipeline.name

    @property
    def host(self) -> str:
        return f"{self.name}.{self.domain}"

    @property
    def path_prefix(self) -> str:
        return f"/pipelines/{self.name}/"

    @property
    def service_fqdn(self) -> str:
        return service_fqdn(self.name, self.namespace)

    def workload(self) -> Workload:
        return Workload(name=self.name, namespace=self.namespace, service_account=self.name, ports=(ROUTER_PORT,))


def router_graph(pipeline: PipelineSpec, step_urls: Mapping[str, str]) -> dict[str, Any]:
    """The InferenceGraph spec the router reads, each model step's serviceUrl filled in as
    KServe's controller fills it in."""
    nodes = {
        name: {
            "routerType": node.router_type,
            "steps": [
                drop_none(
                    {
                        "name": step.name,
                        "serviceName": step.model,
                        "serviceUrl": step_urls[step.model] if step.model is not None else None,
                        "nodeName": step.node,
                        "data": step.data,
                        "condition": step.condition,
                        "weight": step.weight,
                        "dependency": step.dependency,
                    }
                )
                for step in node.steps
            ],
        }
        for name, node in pipeline.nodes.items()
    }
    return {"nodes": nodes}


def selector_labels(args: PipelineArgs) -> dict[str, str]:
    return args.workload().selector


def _metadata(args: PipelineArgs, name: str | None = None) -> dict[str, Any]:
    labels = selector_labels(args) | {
        "app.kubernetes.io/name": args.name,
        "app.kubernetes.io/component": "router",
        "app.kubernetes.io/part-of": PART_OF,
        "app.kubernetes.io/managed-by": "pulumi",
    }
    return {"name": name or args.name, "namespace": args.namespace, "labels": labels}


def _router(args: PipelineArgs) -> dict[str, Any]:
    pipeline = args.pipeline
    graph = json.dumps(router_graph(pipeline, args.step_urls), sort_keys=True, separators=(",", ":"))
    container: dict[str, Any] = {
        "name": ROUTER_CONTAINER,
        "image": pipeline.image or pins.KSERVE_ROUTER_IMAGE,
        "args": ["--graph-json", graph],
    }
    if pipeline.propagate_headers:
        container["env"] = [{"name": PROPAGATE_HEADERS, "value": ",".join(pipeline.propagate_headers)}]
    container |= {
        "ports": [{"name": "http", "containerPort": ROUTER_PORT, "protocol": "TCP"}],
        "resources": pipeline.resources.over(ROUTER_RESOURCES).to_kubernetes(),
        "readinessProbe": {
            "httpGet": {"path": READINESS_PATH, "port": ROUTER_PORT},
            "periodSeconds": 5,
            "failureThreshold": 3,
            "timeoutSeconds": 5,
        },
        # Not /readyz: it fails on purpose while the router drains, which must not restart it.
        "livenessProbe": {"tcpSocket": {"port": ROUTER_PORT}, "periodSeconds": 10, "failureThreshold": 3},
        "securityContext": CONTAINER_SECURITY,
        "imagePullPolicy": "Always",
    }
    return container


def deployment(args: PipelineArgs) -> dict[str, Any]:
    spec: dict[str, Any] = {}
    if not args.pipeline.autoscaling.enabled:
        spec["replicas"] = args.pipeline.fixed_replicas
    pod = {
        "serviceAccountName": args.name,
        "automountServiceAccountToken": False,
        "enableServiceLinks": False,
        "securityContext": {
            "runAsNonRoot": True,
            "runAsUser": ROUTER_USER,
            "seccompProfile": {"type": "RuntimeDefault"},
        },
        "terminationGracePeriodSeconds": ROUTER_DRAIN_SECONDS + int(duration_seconds(args.pipeline.timeout)) + 5,
        "topologySpreadConstraints": [
            {
                "maxSkew": 1,
                "topologyKey": "kubernetes.io/hostname",
                "whenUnsatisfiable": "ScheduleAnyway",
                "labelSelector": {"matchLabels": selector_labels(args)},
            }
        ],
        "containers": [_router(args)],
    }
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": _metadata(args),
        "spec": spec
        | {
            "revisionHistoryLimit": 5,
            "selector": {"matchLabels": selector_labels(args)},
            "strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 1, "maxUnavailable": 0}},
            # No scrape annotations: Istio's injector adds them, pointing at the sidecar's merged
            # metrics (the router serves none of its own; Envoy's carry its request rates).
            "template": {"metadata": {"labels": _metadata(args)["labels"]}, "spec": pod},
        },
    }


def service(args: PipelineArgs) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": _metadata(args),
        "spec": {
            "type": "ClusterIP",
            "selector": selector_labels(args),
            "ports": [{"name": "http", "port": SERVICE_PORT, "targetPort": "http", "protocol": "TCP"}],
        },
    }


def destination_rule(args: PipelineArgs) -> dict[str, Any]:
    return {
        "apiVersion": "networking.istio.io/v1",
        "kind": "DestinationRule",
        "metadata": _metadata(args),
        "spec": {
            "host": args.service_fqdn,
            "trafficPolicy": args.pipeline.protection.circuit_breaker.traffic_policy(),
        },
    }


def virtual_service(args: PipelineArgs) -> dict[str, Any]:
    """`<pipeline>.<domain>` at the root and `<domain>/pipelines/<pipeline>/`, as models are served."""
    body: dict[str, Any] = {
        "route": [{"destination": {"host": args.service_fqdn, "port": {"number": SERVICE_PORT}}}],
        "timeout": args.pipeline.timeout,
        "retries": args.pipeline.retries.to_istio(args.pipeline.timeout),
    }
    return {
        "apiVersion": "networking.istio.io/v1",
        "kind": "VirtualService",
        "metadata": _metadata(args),
        "spec": {
            "hosts": [args.host, args.domain],
            "gateways": [args.gateway.qualified_name],
            "http": entry_routes(args.host, args.path_prefix, body),
        },
    }


def disruption_budget(args: PipelineArgs) -> dict[str, Any] | None:
    autoscaling = args.pipeline.autoscaling
    most = autoscaling.max_replicas if autoscaling.enabled else args.pipeline.fixed_replicas
    if most < 2:
        return None
    return {
        "apiVersion": "policy/v1",
        "kind": "PodDisruptionBudget",
        "metadata": _metadata(args),
        "spec": {"maxUnavailable": 1, "selector": {"matchLabels": selector_labels(args)}},
    }


def protection_manifests(args: PipelineArgs) -> list[dict[str, Any]]:
    """The same protection a model has, and access to exactly the models the graph names."""
    protection = args.pipeline.protection
    objects = gateway_policies(
        args.name,
        protection,
        gateway=(args.gateway.namespace, args.gateway.selector),
        hosts=(args.host, args.domain, args.path_prefix),
        private_paths=[],
    )
    if protection.rate_limit is not None:
        objects.append(
            rate_limit_filter(f"{args.name}-rate-limit", args.namespace, selector_labels(args), protection.rate_limit)
        )
    access = Access(
        workload=args.workload(),
        gateway_namespace=args.gateway.namespace,
        gateway_account=GATEWAY_RELEASE,
        metrics_ports=(),
        scraper=args.metrics_scraper,
        callees=args.callees,
    )
    objects.append(authorization_policy(access, _metadata(args, f"{args.name}-access")))
    objects.append(network_policy(access, _metadata(args)))
    return objects


def pipeline_manifests(args: PipelineArgs) -> list[dict[str, Any]]:
    """Every object of the pipeline, in a stable order."""
    objects = [service_account(_metadata(args)), deployment(args), service(args)]
    spec = args.pipeline.autoscaling
    if spec.enabled and args.keda is not None:
        triggers = target_triggers(spec, args.keda, args.namespace, selector_labels(args))
        objects.append(scaled_object(_metadata(args), spec, triggers))
    elif spec.enabled:
        objects.append(horizontal_pod_autoscaler(_metadata(args), spec))
    budget = disruption_budget(args)
    if budget is not None:
        objects.append(budget)
    objects += [destination_rule(args), virtual_service(args)]
    return objects + protection_manifests(args)
