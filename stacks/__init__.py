"""Composes a whole stack from its typed config: the cluster platform, then the models on it."""

from __future__ import annotations

import pulumi

from infra.config import StackConfig
from stacks.platform import deploy_platform
from stacks.serving import deploy_models


def deploy(config: StackConfig) -> None:
    platform = deploy_platform(config)
    deploy_models(config, platform.ready)
    # What the models hold in GPUs, at minimum replicas and at peak, against the declared GPUs.
    pulumi.export("capacity", config.capacity().as_json())
