"""Waking a version that sleeps at zero replicas: the HTTP add-on's interceptor sits in the path of
a scale-to-zero model's live versions, counts their requests (its signal wakes them: the
ScaledObject's external-push trigger) and holds a request until a pod is ready, or answers it at
once with 503 and Retry-After while the version wakes.

The routes keep their weights: each live destination becomes the interceptor's proxy with the
Host set to that version's Service (routing.py). The interceptor proxies to the Host's Service
through a sidecar of its own (the only way in under STRICT mTLS), which routes by that Host too.
Mirrors go straight to the shadows: a shadow wakes with its model's live traffic instead.
"""

from __future__ import annotations

from typing import Any

from inference_platform.platform.keda import INTERCEPTOR_PROXY_PORT, HttpAddOnRef
from inference_platform.serving.autoscaling import AutoscalingSpec

API_VERSION = "http.keda.sh/v1beta1"
# What one replica is asked to carry of the interceptor's signal, the add-on's own default: the
# model's own triggers size it as they would an awake version; this one mostly wakes it.
WAKE_TARGET = 100
# A sleeping version's cold start runs from seconds to minutes, and the interceptor cannot tell how
# far along it is: `respond` asks clients back every half minute.
RETRY_AFTER_SECONDS = 30


def interceptor_route(
    metadata: dict[str, Any], host: str, port: int, spec: AutoscalingSpec, timeout: str
) -> dict[str, Any]:
    """The add-on's route for one version: requests with that version's Service as their Host go
    to that Service's HTTP port, within the model's timeout."""
    name = metadata["name"]
    body: dict[str, Any] = {
        "target": {"service": name, "port": port},
        "rules": [{"hosts": [host]}],
        "timeouts": {"request": timeout, "responseHeader": timeout},
    }
    if spec.wake == "respond":
        # The interceptor counts a request before a placeholder answers it, but an answered
        # request is no longer pending: the rate is what wakes the version here.
        body["scalingMetric"] = {"requestRate": {"targetValue": WAKE_TARGET, "window": "1m"}}
        message = f'{{"error": "{name} is waking up: retry after {RETRY_AFTER_SECONDS} seconds"}}'
        body["coldStart"] = {
            "placeholder": {
                "response": {
                    "statusCode": 503,
                    "headers": {"Retry-After": str(RETRY_AFTER_SECONDS), "Content-Type": "application/json"},
                    "body": message,
                }
            }
        }
    else:
        body["scalingMetric"] = {"concurrency": {"targetValue": WAKE_TARGET}}
    return {"apiVersion": API_VERSION, "kind": "InterceptorRoute", "metadata": metadata, "spec": body}


def through_interceptor(add_on: HttpAddOnRef, host: str) -> dict[str, Any]:
    """The fields of a route entry that reaches the version whose Service is `host` through the
    interceptor: its proxy as the destination, the version's Service as the Host it routes by."""
    return {
        "destination": {"host": add_on.proxy_host, "port": {"number": INTERCEPTOR_PROXY_PORT}},
        "headers": {"request": {"set": {"Host": host}}},
    }
