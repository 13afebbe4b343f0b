"""Environments past one stack: a platform stack and the model stacks (shards) that read it.

An environment is one stack (`Pulumi.<env>.yaml` with the platform and every model, as it always
was), or a platform stack and its shards:

- the platform stack (`Pulumi.<env>.yaml`) holds the platform's settings and names its shards,
  `inference-platform:shards: [<stack>, ...]`; it installs the cluster platform;
- each shard (`Pulumi.<shard>.yaml`) holds some of the environment's models and pipelines, and names
  the platform stack it runs on, `inference-platform:platformStack: <org>/<project>/<stack>` (a
  pulumi.StackReference); its platform stack's file is `Pulumi.<last part of that name>.yaml`.

This module is the one place that knows the two keys and tells the kinds apart.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal

SHARDS_KEY = "shards"
"""A platform stack's key (under the project's namespace): the stack names of its shards."""
PLATFORM_STACK_KEY = "platformStack"
"""A shard's key: the platform stack it reads, as a StackReference names it (<org>/<project>/<stack>)."""

StackKind = Literal["single", "platform", "shard"]


def stack_kind(values: Mapping[str, Any]) -> StackKind:
    """What a stack's config (the project's keys, without the `inference-platform:` prefix) makes it."""
    if PLATFORM_STACK_KEY in values:
        return "shard"
    if SHARDS_KEY in values:
        return "platform"
    return "single"


def platform_stack_name(reference: str) -> str:
    """The stack name of a StackReference's fully qualified name (<org>/<project>/<stack>, or a
    bare stack name): its platform stack's file is Pulumi.<that>.yaml."""
    return reference.rsplit("/", 1)[-1]
