"""The platform's shared Istio ingress gateway, which every model's VirtualService binds to."""

from __future__ import annotations

from components.config_base import ConfigModel, DNS1123Label

DEFAULT_GATEWAY_NAMESPACE = "istio-ingress"
DEFAULT_GATEWAY_NAME = "inference-gateway"


class GatewayRef(ConfigModel):
    """Where the Istio Gateway object lives; VirtualServices name it as `<namespace>/<name>`."""

    namespace: DNS1123Label = DEFAULT_GATEWAY_NAMESPACE
    name: DNS1123Label = DEFAULT_GATEWAY_NAME

    @property
    def qualified_name(self) -> str:
        return f"{self.namespace}/{self.name}"
