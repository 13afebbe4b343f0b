"""How requests reach one model's versions: its Services, DestinationRule and VirtualService."""

from __future__ import annotations

from decimal import Decimal
from fractions import Fraction
from typing import Any

from inference_platform.serving.inference_pool import POOL_GROUP
from inference_platform.serving.inference_service.args import (
    InferenceServiceArgs,
    object_metadata,
    selector_labels,
    version_fqdn,
    version_name,
)
from inference_platform.serving.inference_service.groups import WORKER_INDEX_LABEL
from inference_platform.serving.model_spec import ModelVersion
from inference_platform.serving.waking import through_interceptor

# Clients reach every model on the same port, whatever its runtime listens on.
MODEL_SERVICE_PORT = 80
# Permanent, and unlike 301 it keeps the method and body.
PERMANENT_REDIRECT = 308


def serving_selector(args: InferenceServiceArgs, version: ModelVersion | None = None) -> dict[str, str]:
    """The pods that serve: all of a version's, or of a multi-node group only the leaders."""
    leaders = {WORKER_INDEX_LABEL: "0"} if args.model.group_size > 1 else {}
    return selector_labels(args, version) | leaders


def version_service(args: InferenceServiceArgs, version: ModelVersion, pod: dict[str, Any]) -> dict[str, Any]:
    """Names one version's ports: `kubectl port-forward` to debug a shadow (in the mesh only the
    gateway is admitted, by the model's access policy).

    It carries no scrape annotations: Prometheus scrapes the pods, where Istio serves the app's
    metrics with Envoy's on the sidecar (plain text, so it works under STRICT mTLS); scraping the
    Service's endpoints too would duplicate every series.
    """
    metadata = object_metadata(args, version_name(args, version), version)
    ports = [
        {"name": port["name"], "port": port["containerPort"], "targetPort": port["name"], "protocol": "TCP"}
        for container in pod["containers"]
        for port in container["ports"]
    ]
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": metadata,
        "spec": {"type": "ClusterIP", "selector": serving_selector(args, version), "ports": ports},
    }


def model_service(args: InferenceServiceArgs) -> dict[str, Any]:
    """The host Istio routes to; DestinationRule subsets pick the version by its label."""
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": object_metadata(args, args.model.name),
        "spec": {
            "type": "ClusterIP",
            "selector": serving_selector(args),
            "ports": [{"name": "http", "port": MODEL_SERVICE_PORT, "targetPort": "http", "protocol": "TCP"}],
        },
    }


def destination_rule(args: InferenceServiceArgs) -> dict[str, Any]:
    return {
        "apiVersion": "networking.istio.io/v1",
        "kind": "DestinationRule",
        "metadata": object_metadata(args, args.model.name),
        "spec": {
            "host": args.service_fqdn,
            "trafficPolicy": args.model.protection.circuit_breaker.traffic_policy(),
            "subsets": [{"name": v.name, "labels": {"version": v.name}} for v in args.model.versions],
        },
    }


def _destination(args: InferenceServiceArgs, version_name: str) -> dict[str, Any]:
    return {"host": args.service_fqdn, "subset": version_name, "port": {"number": MODEL_SERVICE_PORT}}


def _live_route(args: InferenceServiceArgs, version: ModelVersion) -> dict[str, Any]:
    """A live version's share: straight to its subset, or, for a model that sleeps at zero,
    through the interceptor that wakes it (waking.py)."""
    add_on = args.wakes_through
    if add_on is None:
        return {"destination": _destination(args, version.name), "weight": version.weight}
    return through_interceptor(add_on, version_fqdn(args, version)) | {"weight": version.weight}


def _route_body(args: InferenceServiceArgs) -> dict[str, Any]:
    model = args.model
    body: dict[str, Any] = {"route": [_live_route(args, version) for version in model.versions if version.is_live]}
    if model.mirrors:
        body["mirrors"] = [
            {"destination": _destination(args, name), "percentage": {"value": percent}}
            for name, percent in model.mirrors.items()
        ]
    body["timeout"] = model.timeout
    body["retries"] = model.retries.to_istio(model.timeout)
    return body


def entry_routes(host: str, path_prefix: str, body: dict[str, Any]) -> list[dict[str, Any]]:
    """The gateway's two ways in: `host` at the root, and `path_prefix` on the shared host
    (rewritten to `/`). Istio merges every VirtualService of the shared host on the gateway, so the
    by-host route must match on the authority or it would swallow other paths.

    The prefix without its trailing slash (`/models/<name>`) matches neither: it is redirected to
    the prefix, with 308 so that a POST stays a POST with its body. It comes after the by-host
    route, where every path is the server's own."""
    return [
        {"name": "by-path", "match": [{"uri": {"prefix": path_prefix}}], "rewrite": {"uri": "/"}} | body,
        {"name": "by-host", "match": [{"authority": {"prefix": host}}]} | body,
        {
            "name": "add-slash",
            "match": [{"uri": {"exact": path_prefix.removesuffix("/")}}],
            "redirect": {"uri": path_prefix, "redirectCode": PERMANENT_REDIRECT},
        },
    ]


def virtual_service(args: InferenceServiceArgs) -> dict[str, Any]:
    """Weighted routes to live versions and mirrors to shadows, at `<model>.<domain>` and at
    `<domain>/models/<model>/` (see entry_routes)."""
    body = _route_body(args)
    return {
        "apiVersion": "networking.istio.io/v1",
        "kind": "VirtualService",
        "metadata": object_metadata(args, args.model.name),
        "spec": {
            "hosts": [args.host, args.shared_host],
            "gateways": [args.gateway.qualified_name],
            "http": entry_routes(args.host, args.path_prefix, body),
        },
    }


def mesh_virtual_service(args: InferenceServiceArgs) -> dict[str, Any]:
    """The same weights, mirrors, timeout and retries for calls from inside the mesh (declared
    `calls` and pipelines): without it a caller's sidecar would spread requests over every pod
    behind the model's Service, shadows and idle versions included."""
    return {
        "apiVersion": "networking.istio.io/v1",
        "kind": "VirtualService",
        "metadata": object_metadata(args, mesh_route_name(args.model.name)),
        "spec": {
            "hosts": [args.service_fqdn],
            "gateways": ["mesh"],
            "http": [{"name": "in-mesh"} | _route_body(args)],
        },
    }


def mesh_route_name(model: str) -> str:
    return f"{model}-mesh"


# --- Inference pools (routing: inference-pool) -------------------------------------------------

GATEWAY_API = "gateway.networking.k8s.io"


def pool_name(args: InferenceServiceArgs, version: ModelVersion) -> str:
    """A version's InferencePool (the chart's release, so its picker is <pool>-epp)."""
    return version_name(args, version)


def serves_by_path(args: InferenceServiceArgs) -> bool:
    """Whether a pool-routed model is also served at <domain>/models/<model>/: over plain HTTP only.
    Over TLS the shared host's server name is the Istio Gateway's, whose routes cannot reach a pool."""
    return not args.model.routed_by_pool or args.url_scheme == "http"


def _mirror_share(percent: float) -> dict[str, Any]:
    """A RequestMirror's share: `percent` when whole, else the exact `fraction` of requests."""
    if float(percent).is_integer():
        return {"percent": int(percent)}
    share = Fraction(Decimal(str(percent))) / 100
    return {"fraction": {"numerator": share.numerator, "denominator": share.denominator}}


def _pool_rule(args: InferenceServiceArgs, filters: list[dict[str, Any]]) -> dict[str, Any]:
    """Live versions as weighted pools, each shadow a mirror to its version's Service (a mirror aimed
    at a pool gets no picker in Istio 1.30), under the model's timeout."""
    model = args.model
    mirrors = [
        {
            "type": "RequestMirror",
            "requestMirror": {
                "backendRef": {"name": version_name(args, version), "port": model.http_port},
                **_mirror_share(percent),
            },
        }
        for version in model.versions
        if (percent := version.mirror_percent) is not None
    ]
    rule: dict[str, Any] = {
        "backendRefs": [
            {"group": POOL_GROUP, "kind": "InferencePool", "name": pool_name(args, version), "weight": version.weight}
            for version in model.versions
            if version.is_live
        ],
        "timeouts": {"request": model.timeout},
    }
    if filters or mirrors:
        rule["filters"] = [*filters, *mirrors]
    return rule


def _http_route(args: InferenceServiceArgs, name: str, host: str, rules: list[dict[str, Any]]) -> dict[str, Any]:
    gateway = args.gateway
    parent = {"group": GATEWAY_API, "kind": "Gateway", "namespace": gateway.namespace, "name": gateway.pools_name}
    return {
        "apiVersion": f"{GATEWAY_API}/v1",
        "kind": "HTTPRoute",
        "metadata": object_metadata(args, name),
        "spec": {"parentRefs": [parent], "hostnames": [host], "rules": rules},
    }


def http_routes(args: InferenceServiceArgs) -> list[dict[str, Any]]:
    """A pool-routed model's ways in, as its VirtualService's are: `<model>.<domain>` (every path),
    and `<domain>/models/<model>/` rewritten to `/` with the bare prefix redirected (308) to it. Two
    routes, as a route's hostnames hold for all its rules: one route with both would take every path
    of the shared host."""
    prefix = args.path_prefix
    routes = [
        _http_route(
            args,
            args.model.name,
            args.host,
            [{"name": "by-host", "matches": [{"path": {"type": "PathPrefix", "value": "/"}}]} | _pool_rule(args, [])],
        )
    ]
    if serves_by_path(args):
        rewrite = {
            "type": "URLRewrite",
            "urlRewrite": {"path": {"type": "ReplacePrefixMatch", "replacePrefixMatch": "/"}},
        }
        redirect = {
            "type": "RequestRedirect",
            "requestRedirect": {
                "path": {"type": "ReplaceFullPath", "replaceFullPath": prefix},
                "statusCode": PERMANENT_REDIRECT,
            },
        }
        rules = [
            {"name": "by-path", "matches": [{"path": {"type": "PathPrefix", "value": prefix}}]}
            | _pool_rule(args, [rewrite]),
            {
                "name": "add-slash",
                "matches": [{"path": {"type": "Exact", "value": prefix.removesuffix("/")}}],
                "filters": [redirect],
            },
        ]
        routes.append(_http_route(args, by_path_route_name(args.model.name), args.shared_host, rules))
    return routes


def by_path_route_name(model: str) -> str:
    return f"{model}-by-path"
