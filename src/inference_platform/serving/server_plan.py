"""What a runtime hands the InferenceService for one version: its container, its config files and
its endpoints (the runtimes build these in runtimes/; the model spec promises one per version)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class MetricsEndpoint:
    """Where Prometheus scrapes the server's own metrics."""

    port: int
    path: str


@dataclass(frozen=True)
class ServerPlan:
    """One version's model server: the container, its generated config files and its endpoints."""

    container: dict[str, Any]
    config_files: dict[str, str]
    http_port: int
    metrics: MetricsEndpoint | None
    """None for a server that publishes no metrics (a custom runtime may not)."""
    run_as_user: int | None = None
    """The numeric user to run as when the image's own user is root or a name, which the kubelet
    cannot check against runAsNonRoot."""
    volumes: tuple[dict[str, Any], ...] = field(default_factory=tuple)
    """Volumes the container mounts beyond the config, model and scratch volumes."""
    workers: WorkerPlan | None = None
    """For a model served by a group of pods across nodes: the group's other pods (workers)."""


@dataclass(frozen=True)
class WorkerPlan:
    """The pods of a multi-node group beside its leader, which alone serves: `size` pods in all
    (the leader included), each worker running the leader's container with `args` (and without
    ports or probes: it serves nothing)."""

    size: int
    args: tuple[str, ...]


@dataclass(frozen=True)
class ExampleRequest:
    """A request that shows how to call the model (used for the stack's ready-to-run curl line)."""

    path: str
    body: dict[str, Any]
