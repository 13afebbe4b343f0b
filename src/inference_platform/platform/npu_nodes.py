"""The cluster's Ascend NPU nodes: where NPU pods (and HAMi's Ascend device plugin) run, the
taints they tolerate, the container runtime they need, and how many NPUs of each type the cluster
has, for the capacity plan."""

from __future__ import annotations

from typing import Annotated

from pydantic import Field, model_validator

from inference_platform.config.base import (
    ConfigModel,
    DNS1123Label,
    Labels,
    Matches,
    config_problems,
    duplicate_problems,
)
from inference_platform.platform import ascend
from inference_platform.platform.ascend import AscendType
from inference_platform.platform.gpu_nodes import Toleration


class NpuPool(ConfigModel):
    """Nodes of one NPU type, for the capacity plan."""

    type: AscendType = Field(description="The chip, as HAMi names it (Ascend910B3, Ascend310P, ...).")
    count: Annotated[int, Field(ge=0, le=100_000)] = Field(description="Nodes with this chip.")
    npus_per_node: Annotated[int, Field(ge=1, le=64)] = Field(description="NPUs on each of them.")

    @property
    def declared(self) -> int:
        return self.count * self.npus_per_node


class NpuNodes(ConfigModel):
    """Where Ascend NPU pods run: the node labels to select, the taints to tolerate, the runtime
    class that mounts the devices."""

    node_selector: Labels = Field(
        default_factory=lambda: dict(ascend.NODE_LABEL),
        description="Node labels NPU pods (and the Ascend device plugin) select; ascend=on is HAMi's.",
    )
    tolerations: list[Toleration] = Field(
        default_factory=list, description="Taints of the NPU nodes that NPU pods and the device plugin tolerate."
    )
    runtime_class_name: DNS1123Label = Field(
        default=ascend.RUNTIME_CLASS,
        description="The RuntimeClass of Ascend Docker Runtime (installed with the device plugin) NPU pods run with.",
    )
    soft_slicing: bool = Field(
        default=False,
        description="HAMi's hami-vnpu-core on every NPU node (devices.ascend.hamiVnpuCore): lets vNPU models use "
        "slicing: soft; a node's hami-vnpu-core annotation overrides it.",
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
        description="The node label a multi-node group stays within (one group per domain); null places groups "
        "anywhere.",
    )
    pools: list[NpuPool] = Field(
        default_factory=list,
        description="The cluster's NPU nodes by chip, for the capacity plan: [{type, count, npusPerNode}].",
    )

    @model_validator(mode="after")
    def _one_pool_per_type(self) -> NpuNodes:
        problems = duplicate_problems([p.type for p in self.pools], "pools[{}].type", "NPU type")
        if problems:
            raise config_problems(problems)
        return self

    def pool(self, chip: str) -> NpuPool | None:
        return next((p for p in self.pools if p.type == chip), None)
