"""How a model's pods get GPUs: none, whole devices, HAMi virtual GPUs, or a shared device.

Each mode is a config model that knows what it does to a pod; the InferenceService applies it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Annotated, Any, Literal

from pydantic import BeforeValidator, Field, model_validator

from inference_platform.config.base import ConfigModel, Matches, config_problems
from inference_platform.config.errors import Discriminated
from inference_platform.platform.gpu_nodes import GPU_RESOURCE, GpuNodes
from inference_platform.platform.hami import GPU_CORES_RESOURCE, GPU_MEMORY_PERCENT_RESOURCE, GPU_MEMORY_RESOURCE
from inference_platform.platform.npu_nodes import NpuNodes

VISIBLE_DEVICES = "NVIDIA_VISIBLE_DEVICES"


@dataclass(frozen=True)
class GpuPlacement:
    """What an accelerator mode (GPU or NPU) adds to a pod: resource limits, environment, node
    selection, the container runtime, pod annotations."""

    limits: dict[str, str] = field(default_factory=dict)
    env: dict[str, str] = field(default_factory=dict)
    nodes: GpuNodes | NpuNodes | None = None
    runtime_class_name: str | None = None
    annotations: dict[str, str] = field(default_factory=dict)

    def pod_fields(self) -> dict[str, Any]:
        fields: dict[str, Any] = {}
        if self.runtime_class_name is not None:
            fields["runtimeClassName"] = self.runtime_class_name
        if self.nodes is not None and self.nodes.node_selector:
            fields["nodeSelector"] = dict(sorted(self.nodes.node_selector.items()))
        if self.nodes is not None and self.nodes.tolerations:
            fields["tolerations"] = [t.to_kubernetes() for t in self.nodes.tolerations]
        return fields


class NoGpu(ConfigModel):
    mode: Literal["none"] = Field(
        default="none",
        description="No GPU resources, and NVIDIA_VISIBLE_DEVICES=none so a CPU pod on a GPU node cannot touch a GPU.",
    )

    @property
    def device_count(self) -> int | None:
        return 0

    def placement(self, nodes: GpuNodes) -> GpuPlacement:
        # On a GPU node the NVIDIA runtime would otherwise expose every device to a CPU pod.
        return GpuPlacement(env={VISIBLE_DEVICES: "none"})


class ExclusiveGpu(ConfigModel):
    """Whole GPUs from the device plugin; the scheduler counts them."""

    mode: Literal["exclusive"] = Field(
        default="exclusive", description="Whole GPUs: nvidia.com/gpu with the GPU nodes' selector and tolerations."
    )
    count: Annotated[int, Field(ge=1, le=16)] = Field(default=1, description="Whole GPUs per pod.")

    @property
    def device_count(self) -> int | None:
        return self.count

    def placement(self, nodes: GpuNodes) -> GpuPlacement:
        return GpuPlacement(limits={GPU_RESOURCE: str(self.count)}, nodes=nodes)


class VirtualGpu(ConfigModel):
    """Slices of GPUs through HAMi: memory and compute caps enforced inside the container."""

    mode: Literal["vgpu"] = Field(
        default="vgpu",
        description="HAMi virtual GPUs (needs platform.hami.enabled): slices of memory and cores, "
        "placed by HAMi's scheduler.",
    )
    count: Annotated[int, Field(ge=1, le=16)] = Field(default=1, description="Number of vGPUs.")
    memory_mib: Annotated[int, Field(ge=1)] | None = Field(default=None, description="Memory cap per vGPU in MiB.")
    memory_percent: Annotated[int, Field(ge=1, le=100)] | None = Field(
        default=None, description="Memory cap per vGPU as a percentage of the device."
    )
    cores: Annotated[int, Field(ge=1, le=100)] | None = Field(
        default=None, description="Share of the device's compute (SMs) in percent."
    )

    @model_validator(mode="after")
    def _one_memory_cap(self) -> VirtualGpu:
        if self.memory_mib is not None and self.memory_percent is not None:
            raise config_problems([("", "set memoryMib or memoryPercent, not both")])
        return self

    @property
    def device_count(self) -> int | None:
        return self.count

    @property
    def memory_capped(self) -> bool:
        return self.memory_mib is not None or self.memory_percent is not None

    def memory_cap_mib(self, nodes: GpuNodes) -> int | None:
        """The memory cap per vGPU in MiB, when it can be known."""
        if self.memory_mib is not None:
            return self.memory_mib
        if self.memory_percent is not None and nodes.memory_mib:
            return nodes.memory_mib * self.memory_percent // 100
        return None

    def placement(self, nodes: GpuNodes) -> GpuPlacement:
        limits = {GPU_RESOURCE: str(self.count)}
        if self.memory_mib is not None:
            limits[GPU_MEMORY_RESOURCE] = str(self.memory_mib)
        if self.memory_percent is not None:
            limits[GPU_MEMORY_PERCENT_RESOURCE] = str(self.memory_percent)
        if self.cores is not None:
            limits[GPU_CORES_RESOURCE] = str(self.cores)
        # HAMi's scheduler picks the device; the pod still selects the GPU nodes, where HAMi's
        # device plugin runs, and tolerates their taints.
        return GpuPlacement(limits=limits, nodes=nodes)


class SharedGpu(ConfigModel):
    """The seeds' pattern: see devices through NVIDIA_VISIBLE_DEVICES, request none.

    The scheduler does not know the pod uses a GPU: nothing stops two such pods from
    exhausting one device's memory. Prefer vgpu where HAMi runs.
    """

    mode: Literal["shared"] = Field(
        default="shared", description="NVIDIA_VISIBLE_DEVICES only, on GPU nodes; the scheduler does not see this use."
    )
    visible_devices: Annotated[
        str,
        Matches(
            r"^(all|[0-9]+(,[0-9]+)*|GPU-[0-9a-f-]+(,GPU-[0-9a-f-]+)*)$",
            "all, GPU indexes (0,1) or GPU UUIDs (GPU-...), separated by commas",
        ),
    ] = Field(default="all", description="'all', device indices (0,1) or GPU UUIDs.")

    @property
    def device_count(self) -> int | None:
        """None when 'all': the pod sees whatever the node has."""
        return None if self.visible_devices == "all" else len(self.visible_devices.split(","))

    def placement(self, nodes: GpuNodes) -> GpuPlacement:
        return GpuPlacement(env={VISIBLE_DEVICES: self.visible_devices}, nodes=nodes)


def _short_form(value: Any) -> Any:
    """`gpu: exclusive` is short for `gpu: {mode: exclusive}`."""
    return {"mode": value} if isinstance(value, str) else value


GPU_MODES = ("none", "exclusive", "vgpu", "shared")
GPU_MODE_UNION = Discriminated("mode", GPU_MODES, "GPU mode", fields=frozenset({"gpu"}))
_GpuModels = Annotated[NoGpu | ExclusiveGpu | VirtualGpu | SharedGpu, Field(discriminator="mode")]
GpuSpec = Annotated[
    _GpuModels,
    # The schema editors see: a mode name (the short form) or one of the settings objects.
    BeforeValidator(_short_form, json_schema_input_type=Literal["none", "exclusive", "vgpu", "shared"] | _GpuModels),
]
