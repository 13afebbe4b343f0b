"""Composes a whole stack from its typed config: the cluster platform, then the models on it."""

from __future__ import annotations

from typing import Any

import pulumi

from inference_platform.stack.config import StackConfig
from inference_platform.stack.platform_layer import deploy_platform
from inference_platform.stack.serving_layer import deploy_models


def deploy(config: StackConfig, parent: pulumi.Resource | None = None) -> dict[str, Any]:
    """Every resource of a stack, as children of `parent` (of the stack itself when None); returns
    the stack's outputs: the platform's endpoints, the models' and pipelines' URLs, and what the
    models hold in GPUs at minimum replicas and at peak, against the declared GPUs."""
    platform = deploy_platform(config, parent)
    outputs: dict[str, Any] = {"platform": platform.outputs}
    outputs |= deploy_models(config, platform.ready, parent)
    outputs["capacity"] = config.capacity().as_json()
    return outputs
