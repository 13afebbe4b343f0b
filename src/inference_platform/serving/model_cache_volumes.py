"""A cached version's copy as its pods see it (docs/model-cache.md), as KServe's LocalModelCache
does it: a `local` PersistentVolume over the version's directory on the cache nodes (node affinity to
exactly the nodes of its model's kind) and a claim bound to it in the model namespace, both read-only
many. The pods mount the claim read-only where a download would have put the files, so the model
namespace stays under Pod Security `restricted` (no hostPath); the cache agent, in a namespace of its
own, fills the directory and writes its completion marker last.

Before the server starts, an init container (cache_wait_script.py, in the pinned storage-initializer
image) waits for that marker, bounded by `WAIT_SECONDS`, and fails the pod's startup clearly when the
copy on its node is missing or is another version's.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Final

from pydantic import Field

from inference_platform import pins
from inference_platform.config.base import ConfigModel, quantity_sum
from inference_platform.platform.model_cache import CachePath
from inference_platform.serving import cache_wait_script
from inference_platform.serving.cached_files import ADAPTERS_DIR, MODEL_DIR, CachedVersion, node_dir
from inference_platform.serving.lora import VOLUME_PREFIX
from inference_platform.serving.model_storage import CacheClaim

ACCESS_MODES: Final = ["ReadOnlyMany"]
WAIT_CONTAINER = "wait-for-model-cache"
WAIT_MOUNT = "/mnt/model-cache"
WAIT_SECONDS: Final = 15 * 60
"""How long a pod waits for its node's copy: the rollout's allowance for pulling images and
downloading files (pods.ROLLOUT_ALLOWANCE_SECONDS), which a cached version no longer spends on a
download. Past it the init container fails and the kubelet runs it again, with its back-off."""
WAIT_RESOURCES: Final = {
    "requests": {"cpu": "10m", "memory": "32Mi"},
    "limits": {"cpu": "100m", "memory": "64Mi"},
}


class ModelCacheRef(ConfigModel):
    """The node-local model cache, as a model's cached versions see it (platform.modelCache)."""

    path: CachePath = Field(
        description="Where the files live on each cache node's local disk: <path>/<namespace>/<model>/<version>/."
    )


def volume_name(namespace: str, cached: CachedVersion) -> str:
    """The version's PersistentVolume (cluster-scoped, so it names the namespace)."""
    return f"model-cache-{namespace}-{cached.model}-{cached.version}"


def claim_name(cached: CachedVersion) -> str:
    """The version's PersistentVolumeClaim in the model namespace."""
    return f"{cached.model}-{cached.version}-cache"


def cache_claim(cached: CachedVersion, volume: str) -> CacheClaim:
    """How the version's pods mount the claim: the model's files (in the pod's `volume`) and each
    downloaded adapter's (its volume named as lora.py names it), read-only."""
    paths = {volume: MODEL_DIR} | {VOLUME_PREFIX + a.name: f"{ADAPTERS_DIR}/{a.name}" for a in cached.adapters}
    return CacheClaim(claim=claim_name(cached), sub_paths=paths)


def node_affinity(node_selector: dict[str, str]) -> dict[str, Any]:
    """Exactly the nodes a kind's nodeSelector selects, as a PersistentVolume's required node affinity."""
    expressions = [{"key": key, "operator": "In", "values": [value]} for key, value in sorted(node_selector.items())]
    return {"required": {"nodeSelectorTerms": [{"matchExpressions": expressions}]}}


def persistent_volume(
    cached: CachedVersion, namespace: str, path: str, node_selector: dict[str, str], labels: dict[str, str]
) -> dict[str, Any]:
    """The version's directory on every cache node of its kind, bound to its claim only."""
    return {
        "apiVersion": "v1",
        "kind": "PersistentVolume",
        "metadata": {"name": volume_name(namespace, cached), "labels": labels},
        "spec": {
            "capacity": {"storage": quantity_sum(cached.sizes)},
            "accessModes": ACCESS_MODES,
            "volumeMode": "Filesystem",
            "persistentVolumeReclaimPolicy": "Retain",
            "storageClassName": "",
            "claimRef": {
                "apiVersion": "v1",
                "kind": "PersistentVolumeClaim",
                "namespace": namespace,
                "name": claim_name(cached),
            },
            "local": {"path": node_dir(path, namespace, cached.model, cached.version)},
            "nodeAffinity": node_affinity(node_selector),
        },
    }


def persistent_volume_claim(
    cached: CachedVersion, namespace: str, volume: str, labels: dict[str, str]
) -> dict[str, Any]:
    """The claim the version's pods mount, bound to its PersistentVolume by name."""
    return {
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "metadata": {"name": claim_name(cached), "namespace": namespace, "labels": labels},
        "spec": {
            "accessModes": ACCESS_MODES,
            "storageClassName": "",
            "volumeName": volume,
            "volumeMode": "Filesystem",
            "resources": {"requests": {"storage": quantity_sum(cached.sizes)}},
        },
    }


def wait_script() -> str:
    """cache_wait_script.py's source, run with `python -c` (a file of the package, never templated)."""
    return Path(cache_wait_script.__file__).read_text()


def wait_container(cached: CachedVersion, volume: str, security_context: dict[str, Any]) -> dict[str, Any]:
    """The init container that waits for the node's copy of the version (mounted whole from `volume`)."""
    adapters = [f"{a.name}={a.uri}" for a in cached.adapters]
    return {
        "name": WAIT_CONTAINER,
        "image": pins.STORAGE_INITIALIZER_IMAGE,
        "command": ["python", "-c", wait_script()],
        "args": [WAIT_MOUNT, str(WAIT_SECONDS), cached.uri, *adapters],
        "resources": WAIT_RESOURCES,
        "securityContext": security_context,
        "volumeMounts": [{"name": volume, "mountPath": WAIT_MOUNT, "readOnly": True}],
    }
