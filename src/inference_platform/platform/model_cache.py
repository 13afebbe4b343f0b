"""The node-local model cache: model files kept on the local disk of the GPU (or NPU) nodes, so that a
version that wakes from zero or lands on a new node reads them locally instead of downloading them
(docs/model-cache.md). KServe's LocalModelCache does the same.

Here: what the platform team sets (`platform.modelCache`), and which nodes cache. Which versions are
cached is each model's `cache` (serving/model_spec.py).
"""

from __future__ import annotations

import posixpath
import re
from typing import Annotated, Final, Literal

from pydantic import AfterValidator, Field, model_validator
from pydantic_core import PydanticCustomError

from inference_platform.config.base import ConfigModel, Quantity, SchemaRule, config_problems, ecma_pattern

CacheNodes = Literal["gpu", "npu", "both"]
NodeKind = Literal["gpu", "npu"]
NODE_KINDS: Final[dict[CacheNodes, tuple[NodeKind, ...]]] = {"gpu": ("gpu",), "npu": ("npu",), "both": ("gpu", "npu")}
DEFAULT_PATH: Final = "/var/lib/inference-models"
# An absolute path of plain segments: no '.', '..', empty segments or a trailing '/'.
_CACHE_PATH = re.compile(r"^(/[A-Za-z0-9._-]+)+$")
# The node's own directories, and the kubelet's, the container runtimes' and the CNI's: the cache path
# may be none of them nor under one (the agent's init container chowns the path, the agent writes
# under it). `/lib*` is every directory whose name starts with lib (lib, lib32, lib64, libx32).
SYSTEM_PATHS: Final = (
    "/etc", "/usr", "/bin", "/sbin", "/lib*", "/boot", "/dev", "/proc", "/sys", "/run", "/var/run",
    "/var/lib/kubelet", "/var/lib/containerd", "/var/lib/docker", "/var/log", "/root", "/home",
    "/opt/cni", "/etc/cni",
)  # fmt: skip


def system_path(value: str) -> str | None:
    """The system directory (one of SYSTEM_PATHS) that `value`, an absolute path in its plain form, is or is
    under; None where it is none of them."""
    segments = value.split("/")[1:]
    for system in SYSTEM_PATHS:
        parts = system.split("/")[1:]
        if len(segments) < len(parts):
            continue
        head, last = segments[: len(parts) - 1], segments[len(parts) - 1]
        if head == parts[:-1] and (last.startswith(parts[-1][:-1]) if parts[-1].endswith("*") else last == parts[-1]):
            return "/" + "/".join(segments[: len(parts)])
    return None


def check_cache_path(value: str) -> str:
    """An absolute path other than `/`, as written (no '.' or '..' segment, no trailing '/')."""
    problem = None
    if value == "/":
        problem = "'/' is the node's whole disk: name a directory of the cache's own (e.g. {example})"
    elif not value.startswith("/"):
        problem = "'{value}' is not absolute: write the path from / (e.g. {example})"
    elif posixpath.normpath(value) != value and _CACHE_PATH.match(posixpath.normpath(value)):
        problem = "'{value}' is not in its plain form (no '.' or '..' segment, '//' or trailing '/'): write '{normal}'"
    elif not _CACHE_PATH.match(value):
        problem = "'{value}' is not a path of plain segments (letters, digits, '.', '_' and '-' between single '/')"
    elif (system := system_path(value)) is not None:
        problem = (
            "'{value}' is "
            + ("" if system == value else "under ")
            + f"{system}, a directory of the node's own: the cache agent writes under its path, so name a "
            "directory of the cache's own (e.g. {example})"
        )
    if problem is not None:
        raise PydanticCustomError(
            "cache_path", problem, {"value": value, "example": DEFAULT_PATH, "normal": posixpath.normpath(value)}
        )
    return value


CACHE_PATH_RULE = SchemaRule(pattern=ecma_pattern(_CACHE_PATH))
CachePath = Annotated[str, AfterValidator(check_cache_path), CACHE_PATH_RULE]


class ModelCacheConfig(ConfigModel):
    """Model files kept on the cache nodes' local disk, read by the pods of cached versions instead of a download."""

    enabled: bool = Field(
        default=False,
        description="Run the cache agent on the cache nodes and let models set `cache` (docs/model-cache.md).",
    )
    path: CachePath = Field(
        default=DEFAULT_PATH,
        description="Where the files live on each cache node's local disk: <path>/<namespace>/<model>/<version>/.",
    )
    size: Quantity | None = Field(
        default=None,
        description="What each cache node can hold (e.g. 800Gi): the cached versions' downloadSize must fit in it.",
    )
    nodes: CacheNodes = Field(
        default="gpu",
        description="Which nodes cache: the GPU nodes (platform.gpuNodes), the NPU nodes (platform.npuNodes), or both.",
    )

    @model_validator(mode="after")
    def _sized(self) -> ModelCacheConfig:
        if self.enabled and self.size is None:
            raise config_problems([("size", "set what each cache node can hold (e.g. 800Gi)")])
        return self

    @property
    def kinds(self) -> tuple[NodeKind, ...]:
        """The kinds of node that cache: gpu, npu, or both."""
        return NODE_KINDS[self.nodes]
