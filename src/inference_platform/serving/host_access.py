"""Which models need the node's files, and why: the one decision behind a model namespace's Pod
Security level (serving/model_namespace.py). A model needs them when some version's server plan
mounts a hostPath volume (MindIE across nodes mounts the node's hccn_tool and /etc/hccn.conf);
`restricted`, and `baseline` too, refuse any hostPath, so only `privileged` admits its pods."""

from __future__ import annotations

from collections.abc import Iterable

from inference_platform.platform.gpu_nodes import GpuNodes
from inference_platform.serving.model_spec import ModelSpecBase
from inference_platform.serving.server_plan import ServerPlan


def host_paths(plan: ServerPlan) -> list[str]:
    """The plan's hostPath volumes, as `<volume> (hostPath <path>)`."""
    return [f"{v['name']} (hostPath {v['hostPath']['path']})" for v in plan.volumes if "hostPath" in v]


def host_access(models: Iterable[ModelSpecBase], gpu_nodes: GpuNodes) -> list[str]:
    """Per model that mounts the node's files, one line naming the model and its volumes, in the
    models' order: empty when every model runs without them."""
    reasons: list[str] = []
    for model in models:
        paths = dict.fromkeys(p for version in model.versions for p in host_paths(model.plan(version, gpu_nodes)))
        if paths:
            reasons.append(f"model {model.name} mounts the node's files: {', '.join(paths)}")
    return reasons
