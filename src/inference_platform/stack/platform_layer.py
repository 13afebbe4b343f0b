"""The cluster platform layer: ingress, metrics, GPU monitoring and sharing, each switchable, each
installed from its entry in platform_components.py, then the network that closes their namespaces."""

from __future__ import annotations

from dataclasses import dataclass, field

import pulumi

from inference_platform.platform.network import PlatformNetwork, PlatformNetworkArgs
from inference_platform.stack.config import StackConfig
from inference_platform.stack.platform_components import ComponentType, Deployed, installed, platform_edges


@dataclass
class Platform:
    ready: list[pulumi.Resource] = field(default_factory=list)
    """What model resources wait for: istiod, whose webhook checks every Istio object, and HAMi."""
    outputs: dict[str, pulumi.Input[str]] = field(default_factory=dict)
    """The platform's endpoints: the gateway, Prometheus, Grafana, the resource metrics API."""


def deploy_platform(config: StackConfig, parent: pulumi.Resource | None = None) -> Platform:
    result = Platform()
    deployed: dict[ComponentType, Deployed] = {}
    for entry in installed(config):
        found = entry.deploy(entry.name, config, deployed, pulumi.ResourceOptions(parent=parent))
        deployed[entry.component] = found
        result.ready += found.ready
        result.outputs |= found.outputs
    if config.platform.network.closed:
        # After the components, whose children are the namespaces the policies go into.
        PlatformNetwork(
            "platform-network",
            PlatformNetworkArgs(tuple(platform_edges(config)), config.namespace),
            pulumi.ResourceOptions(parent=parent, depends_on=[d.component for d in deployed.values()]),
        )
    return result
