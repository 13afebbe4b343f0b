"""LeaderWorkerSet: the controller that runs a model across several nodes, each replica a group of
a leader and its workers created, restarted and scaled together (serving/inference_service/groups.py).
Installed from its pinned chart only when some model spans more than one node.
"""

from __future__ import annotations

from typing import Any

import pulumi
from pydantic import Field

from inference_platform import pins
from inference_platform.config.base import ConfigModel
from inference_platform.platform import pod_security
from inference_platform.platform.helm import chart, merge_values, own_namespace

RELEASE = "lws"
# The chart's CRDs name their conversion webhook's Service in this namespace (lws-webhook-service
# in lws-system), whatever the release's namespace: the controller must run there.
NAMESPACE = "lws-system"
POD_LABELS = {"app.kubernetes.io/name": "lws", "control-plane": "controller-manager"}
# The controller's webhooks (validation, defaults, the CRD's conversion).
WEBHOOK_PORT = 9443


class LeaderWorkerSetConfig(ConfigModel):
    values: dict[str, Any] = Field(default_factory=dict, description="Raw chart values laid over the generated ones.")


class LeaderWorkerSetArgs(ConfigModel):
    config: LeaderWorkerSetConfig = Field(default_factory=LeaderWorkerSetConfig)


def lws_values() -> dict[str, Any]:
    return {
        # The chart requests a whole CPU and a GiB with no limits; the policy pack wants limits.
        "resources": {"requests": {"cpu": "100m", "memory": "256Mi"}, "limits": {"cpu": "1", "memory": "1Gi"}},
        "podSecurityContext": {"runAsNonRoot": True, "seccompProfile": {"type": "RuntimeDefault"}},
        # Pinned to the chart's own tag; the pod pulls it as every pod of the platform does.
        "image": {"manager": {"pullPolicy": "Always"}},
    }


class LeaderWorkerSetController(pulumi.ComponentResource):
    """The lws chart's controller and webhooks, in their namespace."""

    ready: pulumi.Resource
    """What LeaderWorkerSets wait for: the chart that brings their CRD and webhooks."""

    def __init__(self, name: str, args: LeaderWorkerSetArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("inference-platform:platform:LeaderWorkerSetController", name, None, opts)
        self.ready = chart(
            RELEASE,
            pins.LWS,
            NAMESPACE,
            merge_values(lws_values(), args.config.values),
            pulumi.ResourceOptions(parent=self, depends_on=own_namespace(NAMESPACE, self, pod_security.BASELINE)),
        )
        self.namespace = pulumi.Output.from_input(NAMESPACE)
        self.register_outputs({"namespace": self.namespace})
