"""NVIDIA dcgm-exporter: per-GPU metrics from every GPU node, labelled with the pod using each GPU."""

from __future__ import annotations

from typing import Any

import pulumi
from pydantic import Field

from inference_platform import pins
from inference_platform.config.base import ConfigModel, DNS1123Label
from inference_platform.platform import pod_security
from inference_platform.platform.gpu_nodes import GpuNodes
from inference_platform.platform.helm import chart, merge_values, own_namespace

RELEASE = "dcgm-exporter"
PORT = 9400
POD_LABELS = {"app.kubernetes.io/name": "dcgm-exporter", "app.kubernetes.io/instance": RELEASE}


class DcgmExporterConfig(ConfigModel):
    enabled: bool = Field(default=False, description="Install dcgm-exporter on the GPU nodes.")
    namespace: DNS1123Label = Field(default="gpu-monitoring", description="dcgm-exporter's namespace.")
    values: dict[str, Any] = Field(default_factory=dict, description="Raw chart values laid over the generated ones.")


class DcgmExporterArgs(ConfigModel):
    config: DcgmExporterConfig
    nodes: GpuNodes = Field(description="The GPU nodes the exporter runs on.")


def dcgm_values(nodes: GpuNodes) -> dict[str, Any]:
    # The chart always runs the exporter in Kubernetes mode (DCGM_EXPORTER_KUBERNETES=true), which
    # labels each GPU's series with the pod, namespace and container that hold the GPU.
    return {
        # The ServiceMonitor needs the Prometheus Operator's CRDs; Prometheus here follows annotations.
        "serviceMonitor": {"enabled": False},
        "service": {
            "enable": True,
            "port": PORT,
            "annotations": {
                "prometheus.io/scrape": "true",
                "prometheus.io/port": str(PORT),
                "prometheus.io/path": "/metrics",
            },
        },
        "nodeSelector": dict(sorted(nodes.node_selector.items())),
        "tolerations": [t.to_kubernetes() for t in nodes.tolerations],
    }


class DcgmExporter(pulumi.ComponentResource):
    def __init__(self, name: str, args: DcgmExporterArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("inference-platform:platform:DcgmExporter", name, None, opts)
        config = args.config
        waits = own_namespace(config.namespace, self, pod_security.PRIVILEGED)
        values = merge_values(dcgm_values(args.nodes), config.values)
        opts = pulumi.ResourceOptions(parent=self, depends_on=waits)
        chart(RELEASE, pins.DCGM_EXPORTER, config.namespace, values, opts)
        self.register_outputs({})
