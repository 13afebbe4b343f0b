"""Which files the node-local model cache holds (platform.modelCache; docs/model-cache.md): every
cached version of every model, with its adapters, on each cache node of the kind its model runs on.
The one list the config's size check, the capacity plan, the cache agent and the volumes read."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from inference_platform.platform.model_cache import NodeKind
from inference_platform.serving.model_spec import ModelSpecBase
from inference_platform.serving.model_storage import is_downloaded


@dataclass(frozen=True)
class CachedAdapter:
    name: str
    uri: str
    download_size: str


@dataclass(frozen=True)
class CachedVersion:
    """One cached version: where its files come from, and what they take on a cache node."""

    model: str
    version: str
    uri: str
    download_size: str
    kind: NodeKind
    """The cache nodes that hold it: its model's."""
    adapters: tuple[CachedAdapter, ...] = ()
    """Its downloaded adapters, cached beside it (an adapter on a claim is mounted from the claim)."""

    @property
    def label(self) -> str:
        return f"{self.model}/{self.version}"

    @property
    def sizes(self) -> list[str]:
        """Its files' downloadSize and each adapter's."""
        return [self.download_size, *(adapter.download_size for adapter in self.adapters)]


def cached_versions(models: Sequence[ModelSpecBase]) -> list[CachedVersion]:
    """Every cached version of these models, in the stack's order (a model on no GPU or NPU has none:
    the config refuses caching it)."""
    found = []
    for model in models:
        kind = model.accelerator_kind
        if kind is None:
            continue
        for version in model.versions:
            if model.is_cached(version):
                adapters = tuple(
                    CachedAdapter(a.name, a.uri, str(a.download_size)) for a in version.adapters if is_downloaded(a.uri)
                )
                found.append(
                    CachedVersion(model.name, version.name, version.model_uri, str(model.download_size), kind, adapters)
                )
    return found


def cache_contents(models: Sequence[ModelSpecBase]) -> dict[NodeKind, list[tuple[str, str]]]:
    """What each kind of cache node holds: (model/version or its adapter, size), in the stack's order."""
    held: dict[NodeKind, list[tuple[str, str]]] = {}
    for cached in cached_versions(models):
        held.setdefault(cached.kind, []).append((cached.label, cached.download_size))
        held[cached.kind] += [(f"{cached.label} adapter {a.name}", a.download_size) for a in cached.adapters]
    return held


# --- Where the files live on a cache node (the agent writes them, the versions' pods read them) ------

MODEL_DIR = "model"
"""<path>/<namespace>/<model>/<version>/model/: the model's files, as a download puts them in /mnt/models."""
ADAPTERS_DIR = "adapters"
"""<path>/<namespace>/<model>/<version>/adapters/<name>/: each downloaded adapter's files."""
MARKER = ".complete"
"""<path>/<namespace>/<model>/<version>/.complete: written last, atomically, by the cache agent once every
file is in place: JSON {"uri", "adapters": {name: uri}, "digest", "bytes", "completedAt"}. A pod reads the
copy only when the marker is there and names the version's URI (and its adapters')."""


def node_dir(path: str, namespace: str, model: str, version: str) -> str:
    """A cached version's directory on a cache node."""
    return f"{path}/{namespace}/{model}/{version}"
