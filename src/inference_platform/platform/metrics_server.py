"""metrics-server: the resource metrics API (metrics.k8s.io) that HPAs on CPU and memory read.

Managed clusters often ship their own; kind and kubeadm clusters do not, and an HPA on
`cpuUtilization` then never scales (its metrics stay `<unknown>`).
"""

from __future__ import annotations

from typing import Any, Literal

import pulumi
from pydantic import Field

from inference_platform import pins
from inference_platform.config.base import ConfigModel, DNS1123Label
from inference_platform.platform import pod_security
from inference_platform.platform.helm import chart, merge_values, own_namespace

RELEASE = "metrics-server"
API_GROUP = "metrics.k8s.io"
POD_LABELS = {"app.kubernetes.io/name": "metrics-server", "app.kubernetes.io/instance": RELEASE}
# The resource metrics API the API server aggregates.
API_PORT = 10250


class MetricsServerConfig(ConfigModel):
    enabled: bool | Literal["auto"] = Field(
        default="auto",
        description="auto: installed when any model scales on CPU or memory; false on clusters that ship their own.",
    )
    namespace: DNS1123Label = Field(
        default="metrics-server",
        description="metrics-server's own namespace, closed like the platform's others; kube-system for clusters "
        "that must keep it there (its pods then get a policy of their own, and kube-system no default deny).",
    )
    kubelet_insecure_tls: bool = Field(
        default=False,
        description="Skip verifying kubelets' serving certificates: only for clusters whose kubelets "
        "serve self-signed ones (kind).",
    )
    values: dict[str, Any] = Field(default_factory=dict, description="Raw chart values laid over the generated ones.")

    def installed(self, needed: bool) -> bool:
        return needed if self.enabled == "auto" else self.enabled


class MetricsServerArgs(ConfigModel):
    config: MetricsServerConfig = Field(default_factory=MetricsServerConfig)


def metrics_server_values(config: MetricsServerConfig) -> dict[str, Any]:
    return {
        # The chart sets requests only; the policy pack wants limits on every container.
        "resources": {"requests": {"cpu": "100m", "memory": "200Mi"}, "limits": {"cpu": "1", "memory": "500Mi"}},
        "args": ["--kubelet-insecure-tls"] if config.kubelet_insecure_tls else [],
    }


class MetricsServer(pulumi.ComponentResource):
    api_group: pulumi.Output[str]

    def __init__(self, name: str, args: MetricsServerArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("inference-platform:platform:MetricsServer", name, None, opts)
        config = args.config
        values = merge_values(metrics_server_values(config), config.values)
        waits = own_namespace(config.namespace, self, pod_security.BASELINE)
        chart(
            RELEASE,
            pins.METRICS_SERVER,
            config.namespace,
            values,
            pulumi.ResourceOptions(parent=self, depends_on=waits),
        )
        self.api_group = pulumi.Output.from_input(API_GROUP)
        self.register_outputs({"apiGroup": self.api_group})
