"""The cluster's GPU nodes: where GPU pods (and the GPU agents: dcgm-exporter, HAMi's device plugin)
run, the taints they tolerate, and how many GPUs the cluster has, for the capacity plan."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field, model_validator

from inference_platform.config.base import ConfigModel, Labels, Matches, config_problems

# The NVIDIA device plugin's resource (HAMi reuses it as the count of vGPUs); GPU nodes are tainted with it.
GPU_RESOURCE = "nvidia.com/gpu"


class Toleration(ConfigModel):
    key: str | None = Field(default=None, description="The taint's key; none with Exists: every taint.")
    operator: Literal["Exists", "Equal"] = Field(default="Exists", description="Exists (any value) or Equal (value).")
    value: str | None = Field(default=None, description="The taint's value, with Equal.")
    effect: Literal["NoSchedule", "PreferNoSchedule", "NoExecute"] | None = Field(
        default=None, description="The taint's effect; none: every effect."
    )

    def to_kubernetes(self) -> dict[str, str]:
        return self.model_dump(exclude_none=True)


class GpuNodes(ConfigModel):
    """Where GPU pods may run: the node labels to select and the taints to tolerate."""

    node_selector: Labels = Field(
        default_factory=lambda: {"nvidia.com/gpu.present": "true"}, description="Node labels GPU pods select."
    )
    tolerations: list[Toleration] = Field(
        default_factory=lambda: [Toleration(key=GPU_RESOURCE, operator="Exists", effect="NoSchedule")],
        description="Taints of the GPU nodes that GPU pods tolerate.",
    )
    memory_mib: Annotated[int, Field(gt=0)] | None = Field(
        default=None, description="Memory of one GPU in MiB; turns a vGPU memoryPercent cap into MiB."
    )
    count: Annotated[int, Field(ge=0, le=100_000)] | None = Field(
        default=None, description="GPU nodes in the cluster, for the capacity plan (with gpusPerNode)."
    )
    gpus_per_node: Annotated[int, Field(ge=1, le=64)] | None = Field(
        default=None, description="GPUs on each GPU node, for the capacity plan (with count)."
    )
    group_topology_key: (
        Annotated[
            str,
            Matches(
                r"^([a-z0-9.-]+/)?[A-Za-z0-9._-]+$",
                "a label key: an optional lowercase prefix and '/', then letters, digits, '.', '_' and '-'",
            ),
        ]
        | None
    ) = Field(
        default="topology.kubernetes.io/zone",
        description="The node label a multi-node group stays within (LeaderWorkerSet's exclusive topology: one "
        "group per domain, e.g. a rack's or an NVLink clique's label); null places groups anywhere.",
    )

    @model_validator(mode="after")
    def _both_or_neither(self) -> GpuNodes:
        if (self.count is None) != (self.gpus_per_node is None):
            missing = "gpusPerNode" if self.gpus_per_node is None else "count"
            raise config_problems([(missing, "set count and gpusPerNode together: they declare the cluster's GPUs")])
        return self

    @property
    def declared(self) -> int | None:
        """The cluster's GPUs, when declared."""
        return None if self.count is None or self.gpus_per_node is None else self.count * self.gpus_per_node
