"""Composes a whole stack from its typed config: the cluster platform, then the models on it."""

from __future__ import annotations

from infra.config import StackConfig
from stacks.serving import deploy_models


def deploy(config: StackConfig) -> None:
    deploy_models(config)
