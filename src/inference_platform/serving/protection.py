"""Per-model protection: who may call a model, how fast, and how failures are contained.

- At the gateway: allow and deny lists by client address, required headers, a JWT requirement.
  All are DENY AuthorizationPolicies scoped to the model's hosts and paths: an ALLOW policy on
  the shared gateway would shut out every other model.
- At the model's pods: Envoy's local rate limit (a token bucket in each sidecar). Who may reach
  the pods at all is access.py's.
- Between them: connection limits and outlier detection in the DestinationRule.
"""

from __future__ import annotations

import ipaddress
from typing import Annotated, Any

from pydantic import AfterValidator, Field, model_validator

from inference_platform.config.base import ConfigModel, Duration, Matches, config_problems
from inference_platform.platform.network import CIDR_RULE
from inference_platform.serving.envoy_filter import HTTP_CONNECTION_MANAGER, inbound_http_filter

# Envoy's local rate limit, configured through Istio's untyped wrapper.
LOCAL_RATE_LIMIT_TYPE = "type.googleapis.com/envoy.extensions.filters.http.local_ratelimit.v3.LocalRateLimit"
TYPED_STRUCT = "type.googleapis.com/udpa.type.v1.TypedStruct"


def _cidr(value: str) -> str:
    try:
        return str(ipaddress.ip_network(value, strict=False))
    except ValueError:
        raise ValueError(f"{value!r} is not an IP address or CIDR block (10.0.0.0/8, 2001:db8::/32)") from None


Cidr = Annotated[str, AfterValidator(_cidr), CIDR_RULE]
HeaderName = Annotated[
    str, Field(max_length=256), Matches(r"^[a-z0-9!#$%&'*+.^_`|~-]+$", "an HTTP header's name in lowercase")
]


class RateLimit(ConfigModel):
    requests_per_second: Annotated[int, Field(ge=1, le=1_000_000)] = Field(
        description="Sustained requests per second each pod accepts; past it, 429."
    )
    burst: Annotated[int, Field(ge=1, le=10_000_000)] | None = Field(
        default=None, description="Requests a pod accepts at once after a quiet spell (the bucket's size)."
    )

    @property
    def bucket(self) -> int:
        return self.burst or self.requests_per_second


class ClientAccess(ConfigModel):
    allow_cidrs: list[Cidr] = Field(default_factory=list, description="Only these client addresses (empty: any).")
    deny_cidrs: list[Cidr] = Field(default_factory=list, description="Never these client addresses.")


class HeaderRequirement(ConfigModel):
    name: HeaderName = Field(description="Lowercase header name.")
    values: Annotated[list[str], Field(min_length=1)] = Field(
        description="The values accepted; any other (or none) is refused."
    )


class JwtRequirement(ConfigModel):
    issuer: Annotated[str, Field(min_length=1)] = Field(description="The tokens' issuer (iss).")
    jwks_uri: Annotated[str, Matches(r"^https://\S+$", "an https:// URL")] = Field(
        description="Where the issuer's signing keys are published (https)."
    )
    audiences: list[str] = Field(default_factory=list, description="Accepted audiences (aud); none: any.")


class CircuitBreaker(ConfigModel):
    """Defaults eject a failing pod for a while, and never more than half of a version's pods."""

    max_connections: Annotated[int, Field(ge=1, le=1_000_000)] = Field(
        default=1024, description="TCP connections to a version at most (maxConnections)."
    )
    max_pending_requests: Annotated[int, Field(ge=1, le=1_000_000)] = Field(
        default=1024, description="Requests waiting for a connection at most (http1MaxPendingRequests)."
    )
    max_requests: Annotated[int, Field(ge=1, le=1_000_000)] = Field(
        default=1024, description="Requests in flight to a version at most (http2MaxRequests)."
    )
    connect_timeout: Duration = Field(default="5s", description="TCP connect timeout.")
    consecutive_errors: Annotated[int, Field(ge=1, le=1000)] = Field(
        default=5, description="5xx responses in a row that eject a pod."
    )
    interval: Duration = Field(default="10s", description="How often pods are checked for ejection.")
    base_ejection_time: Duration = Field(
        default="30s", description="How long an ejected pod stays out (longer each time it is ejected again)."
    )
    max_ejection_percent: Annotated[int, Field(ge=0, le=100)] = Field(
        default=50, description="The largest share of a version's pods ejected at once."
    )

    def traffic_policy(self) -> dict[str, Any]:
        return {
            "connectionPool": {
                "tcp": {"maxConnections": self.max_connections, "connectTimeout": self.connect_timeout},
                "http": {"http1MaxPendingRequests": self.max_pending_requests, "http2MaxRequests": self.max_requests},
            },
            "outlierDetection": {
                "consecutive5xxErrors": self.consecutive_errors,
                "interval": self.interval,
                "baseEjectionTime": self.base_ejection_time,
                "maxEjectionPercent": self.max_ejection_percent,
            },
        }


class Protection(ConfigModel):
    rate_limit: RateLimit | None = Field(default=None, description="Envoy's local rate limit at each pod.")
    clients: ClientAccess = Field(
        default_factory=ClientAccess, description="Client address lists, enforced at the gateway."
    )
    require_headers: list[HeaderRequirement] = Field(
        default_factory=list, description="Headers a request must carry, enforced at the gateway."
    )
    jwt: JwtRequirement | None = Field(default=None, description="Callers must present a valid JWT from this issuer.")
    circuit_breaker: CircuitBreaker = Field(
        default_factory=CircuitBreaker, description="Connection limits and outlier ejection in the DestinationRule."
    )

    @model_validator(mode="after")
    def _overlap(self) -> Protection:
        allowed = {ipaddress.ip_network(c) for c in self.clients.allow_cidrs}
        both = [c for c in self.clients.deny_cidrs if ipaddress.ip_network(c) in allowed]
        if both:
            raise config_problems([("clients", f"{', '.join(both)} both allowed and denied")])
        return self

    @property
    def at_gateway(self) -> bool:
        clients = self.clients
        return bool(clients.allow_cidrs or clients.deny_cidrs or self.require_headers or self.jwt)


def rate_limit_filter(name: str, namespace: str, selector: dict[str, str], limit: RateLimit) -> dict[str, Any]:
    """An EnvoyFilter inserting the local rate limit into the model pods' inbound HTTP chain."""
    always = {"numerator": 100, "denominator": "HUNDRED"}
    rate_limit = {
        "stat_prefix": "http_local_rate_limiter",
        "token_bucket": {
            "max_tokens": limit.bucket,
            "tokens_per_fill": limit.requests_per_second,
            "fill_interval": "1s",
        },
        "filter_enabled": {"runtime_key": "local_rate_limit_enabled", "default_value": always},
        "filter_enforced": {"runtime_key": "local_rate_limit_enforced", "default_value": always},
        "response_headers_to_add": [
            {"append_action": "OVERWRITE_IF_EXISTS_OR_ADD", "header": {"key": "x-local-rate-limit", "value": "true"}}
        ],
    }
    listener = {"filterChain": {"filter": {"name": HTTP_CONNECTION_MANAGER}}}
    http_filter = {
        "name": "envoy.filters.http.local_ratelimit",
        "typed_config": {"@type": TYPED_STRUCT, "type_url": LOCAL_RATE_LIMIT_TYPE, "value": rate_limit},
    }
    return inbound_http_filter({"name": name, "namespace": namespace}, selector, listener, http_filter)


def _operations(host: str, shared_host: str, path_prefix: str) -> list[dict[str, Any]]:
    """The requests that reach one model through the gateway (hosts with or without a port)."""
    return [
        {"operation": {"hosts": [host, f"{host}:*"]}},
        {"operation": {"hosts": [shared_host, f"{shared_host}:*"], "paths": [f"{path_prefix}*"]}},
    ]


def gateway_policies(
    name: str,
    protection: Protection,
    *,
    gateway: tuple[str, dict[str, str]],
    hosts: tuple[str, str, str],
    private_paths: list[str],
) -> list[dict[str, Any]]:
    """The model's DENY AuthorizationPolicy (and JWT RequestAuthentication) on the gateway.

    `gateway` is (namespace, pod selector); `hosts` is (model host, shared host, path prefix);
    `private_paths` are the server's paths nobody outside the cluster may call (its metrics).
    """
    if not protection.at_gateway and not private_paths:
        return []
    gateway_namespace, gateway_selector = gateway
    to = _operations(*hosts)
    host, shared_host, path_prefix = hosts
    rules: list[dict[str, Any]] = []
    if private_paths:
        rules.append(
            {
                "to": [
                    {"operation": {"hosts": [host, f"{host}:*"], "paths": private_paths}},
                    {
                        "operation": {
                            "hosts": [shared_host, f"{shared_host}:*"],
                            "paths": [path_prefix + path.removeprefix("/") for path in private_paths],
                        }
                    },
                ]
            }
        )
    clients = protection.clients
    if clients.deny_cidrs:
        rules.append({"from": [{"source": {"remoteIpBlocks": clients.deny_cidrs}}], "to": to})
    if clients.allow_cidrs:
        rules.append({"from": [{"source": {"notRemoteIpBlocks": clients.allow_cidrs}}], "to": to})
    rules += [
        {"to": to, "when": [{"key": f"request.headers[{header.name}]", "notValues": header.values}]}
        for header in protection.require_headers
    ]
    objects: list[dict[str, Any]] = []
    if protection.jwt is not None:
        jwt = protection.jwt
        rules.append({"from": [{"source": {"notRequestPrincipals": [f"{jwt.issuer}/*"]}}], "to": to})
        jwt_rule: dict[str, Any] = {"issuer": jwt.issuer, "jwksUri": jwt.jwks_uri, "forwardOriginalToken": True}
        if jwt.audiences:
            jwt_rule["audiences"] = jwt.audiences
        objects.append(
            {
                "apiVersion": "security.istio.io/v1",
                "kind": "RequestAuthentication",
                "metadata": {"name": f"{name}-jwt", "namespace": gateway_namespace},
                "spec": {"selector": {"matchLabels": gateway_selector}, "jwtRules": [jwt_rule]},
            }
        )
    objects.append(
        {
            "apiVersion": "security.istio.io/v1",
            "kind": "AuthorizationPolicy",
            "metadata": {"name": f"{name}-gateway", "namespace": gateway_namespace},
            "spec": {"selector": {"matchLabels": gateway_selector}, "action": "DENY", "rules": rules},
        }
    )
    return objects
