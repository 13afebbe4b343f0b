"""An Istio EnvoyFilter that inserts one HTTP filter into the inbound chain of the pods a selector
picks: what the rate limit (protection.py) and the payload capture (payload_capture.py) write."""

from __future__ import annotations

from typing import Any

HTTP_CONNECTION_MANAGER = "envoy.filters.network.http_connection_manager"


def inbound_http_filter(
    metadata: dict[str, Any], selector: dict[str, str], listener: dict[str, Any], http_filter: dict[str, Any]
) -> dict[str, Any]:
    """`http_filter` ({name, typed_config}) inserted before the filter `listener` matches (Istio's
    listener match: a filter chain's filter, optionally a subFilter and a portNumber)."""
    return {
        "apiVersion": "networking.istio.io/v1alpha3",
        "kind": "EnvoyFilter",
        "metadata": metadata,
        "spec": {
            "workloadSelector": {"labels": selector},
            "configPatches": [
                {
                    "applyTo": "HTTP_FILTER",
                    "match": {"context": "SIDECAR_INBOUND", "listener": listener},
                    "patch": {"operation": "INSERT_BEFORE", "value": http_filter},
                }
            ],
        },
    }
