"""The node-local model cache's agent as a platform component (docs/model-cache.md): its namespace of
its own, Pod Security `privileged` (the agent mounts the cache path by hostPath), and the objects
serving/cache_agent.py builds from the cached versions (ConfigMaps, the credentials, a DaemonSet per
kind of cache node), registered in it."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import pulumi

from inference_platform.kube import register
from inference_platform.platform import pod_security
from inference_platform.platform.helm import dependencies, own_namespace

NAMESPACE = "model-cache"
SECURITY = pod_security.PRIVILEGED


@dataclass(frozen=True)
class ModelCacheAgentArgs:
    objects: Sequence[dict[str, Any]]
    """The agent's objects, all in NAMESPACE (serving/cache_agent.py's manifests)."""


class ModelCacheAgent(pulumi.ComponentResource):
    TYPE = "inference-platform:platform:ModelCacheAgent"

    def __init__(self, name: str, args: ModelCacheAgentArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__(self.TYPE, name, None, opts)
        waits = own_namespace(NAMESPACE, self, SECURITY)
        child = pulumi.ResourceOptions(parent=self, depends_on=[*dependencies(opts), *waits])
        for manifest in args.objects:
            register(manifest, child)
        self.register_outputs({})
