"""Capturing what a model's primary and shadows answer, for the payload comparator.

Envoy's ext_proc filter runs on the inbound sidecar of exactly the primary's and the shadows'
pods of a model that compares payloads, in observability mode: Envoy streams each request and
response, headers and bodies, to the comparator over gRPC and never waits for it. The filter
fails open: a comparator that is down, slow or gone costs a primary's request nothing. The
gRPC stream's initial metadata names the namespace, model and version, so the comparator knows
whose exchange it holds; the mirrored copy of a request carries the primary's `x-request-id`,
which is what pairs them.

The sidecar reaches the comparator through Istio's own outbound cluster for its Service, so the
stream runs under the mesh's mTLS with the model's identity.
"""

from __future__ import annotations

from typing import Any

from pydantic import Field

from inference_platform.config.base import ConfigModel, DNS1123Label
from inference_platform.serving.access import Workload, egress_policy, principal
from inference_platform.serving.envoy_filter import HTTP_CONNECTION_MANAGER, inbound_http_filter
from inference_platform.serving.model_spec import ModelSpecBase, ModelVersion

COMPARATOR = "inference-comparator"
COMPARATOR_GRPC_PORT = 9001
COMPARATOR_METRICS_PORT = 9090
EXT_PROC = "envoy.filters.http.ext_proc"
EXT_PROC_TYPE = "type.googleapis.com/envoy.extensions.filters.http.ext_proc.v3.ExternalProcessor"
# What the comparator reads from the stream's metadata: whose exchange this is.
METADATA = ("x-inference-namespace", "x-inference-model", "x-inference-version")
STAT_PREFIX = "inference_payloads"


class ComparatorRef(ConfigModel):
    """Where the payload comparator runs: what the capture filters and access policies name."""

    namespace: DNS1123Label = Field(description="The comparator's namespace (the model namespace).")

    @property
    def host(self) -> str:
        return f"{COMPARATOR}.{self.namespace}.svc.cluster.local"

    @property
    def cluster(self) -> str:
        """Istio's outbound cluster for the comparator's gRPC port, in every sidecar of the mesh."""
        return f"outbound|{COMPARATOR_GRPC_PORT}||{self.host}"

    @property
    def selector(self) -> dict[str, str]:
        return {"app": COMPARATOR}

    @property
    def principal(self) -> str:
        return principal(self.namespace, COMPARATOR)

    def workload(self) -> Workload:
        return Workload(
            name=COMPARATOR, namespace=self.namespace, service_account=COMPARATOR, ports=(COMPARATOR_GRPC_PORT,)
        )


def captured_versions(model: ModelSpecBase) -> list[ModelVersion]:
    """The versions whose exchanges the comparator pairs: the primary and every shadow; none while
    the model has no shadow (a rollout's candidate before or after its shadow phase)."""
    if not model.analysis.payloads.enabled or not model.mirrors:
        return []
    return [v for v in model.versions if v is model.primary or v.mirror_percent]


def ext_proc(comparator: ComparatorRef, namespace: str, model: str, version: str) -> dict[str, Any]:
    """The ext_proc filter's config (Envoy's ExternalProcessor, as JSON): headers and bodies of
    both directions, streamed, never waited for, failing open."""
    identity = (namespace, model, version)
    return {
        "@type": EXT_PROC_TYPE,
        "grpc_service": {
            "envoy_grpc": {"cluster_name": comparator.cluster},
            "initial_metadata": [{"key": key, "value": value} for key, value in zip(METADATA, identity, strict=True)],
        },
        "failure_mode_allow": True,
        "observability_mode": True,
        "processing_mode": {
            "request_header_mode": "SEND",
            "response_header_mode": "SEND",
            # Observability mode streams bodies; it supports no other body mode.
            "request_body_mode": "STREAMED",
            "response_body_mode": "STREAMED",
            "request_trailer_mode": "SKIP",
            "response_trailer_mode": "SKIP",
        },
        "stat_prefix": STAT_PREFIX,
    }


def capture_filter(
    metadata: dict[str, Any], selector: dict[str, str], port: int, filter_config: dict[str, Any]
) -> dict[str, Any]:
    """An EnvoyFilter putting the ext_proc filter on the inbound HTTP chain of the pods `selector`
    picks, on their HTTP port, just before the router: after Istio's own authentication,
    authorisation and the rate limit, so it sees what the model answered."""
    before_router = {"name": HTTP_CONNECTION_MANAGER, "subFilter": {"name": "envoy.filters.http.router"}}
    listener = {"portNumber": port, "filterChain": {"filter": before_router}}
    return inbound_http_filter(metadata, selector, listener, {"name": EXT_PROC, "typed_config": filter_config})


def capture_egress_policy(
    metadata: dict[str, Any], selector: dict[str, str], comparator: ComparatorRef
) -> dict[str, Any]:
    """The captured pods' way out to the comparator's gRPC port, and no one else's."""
    return egress_policy(
        metadata, selector, [{"podSelector": {"matchLabels": comparator.selector}}], [COMPARATOR_GRPC_PORT]
    )
