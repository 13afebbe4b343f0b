"""How a model's pods get Ascend NPUs through HAMi: whole cards, or virtual NPUs (a hard template
of a card, or HAMi's soft slicing with exact memory and a share of AI cores).

HAMi's scheduler places the pods (its webhook gives them its scheduler); HAMi's Ascend device
plugin on the NPU nodes allocates the devices and sets ASCEND_RT_VISIBLE_DEVICES in the container,
and Ascend Docker Runtime (the `ascend` RuntimeClass) mounts them and the driver.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BeforeValidator, Field, model_validator

from inference_platform.config.base import ConfigModel, config_problems
from inference_platform.platform import ascend
from inference_platform.platform.ascend import AscendType, Chip
from inference_platform.platform.npu_nodes import NpuNodes
from inference_platform.serving.gpu import GpuPlacement


class NpuSpec(ConfigModel):
    """Ascend NPUs for each pod, of one chip type."""

    type: AscendType = Field(
        description="The chip, as HAMi names it: Ascend910A, Ascend910B2, Ascend910B3, Ascend910B4, "
        "Ascend910B4-1, Ascend310P or Ascend910C; pods ask for huawei.com/<type>."
    )
    mode: Literal["exclusive", "vnpu"] = Field(
        default="exclusive",
        description="exclusive: whole NPUs; vnpu: virtual NPUs, a share of a card's memory (and AI cores).",
    )
    count: Annotated[int, Field(ge=1, le=16)] = Field(default=1, description="NPUs (or vNPUs) per pod.")
    memory_mib: Annotated[int, Field(ge=1)] | None = Field(
        default=None,
        description="Device memory per vNPU in MiB (huawei.com/<type>-memory); hard slicing rounds it up to "
        "the first template that holds it. Unset: a whole card. Only with mode vnpu.",
    )
    cores: Annotated[int, Field(ge=1, le=100)] | None = Field(
        default=None,
        description="Share of a card's AI cores in percent (huawei.com/<type>-core). Only with slicing soft.",
    )
    slicing: Literal["template", "soft"] = Field(
        default="template",
        description="How vNPUs are cut: template (HAMi's hard templates) or soft (hami-vnpu-core: exact memory, "
        "a share of cores; needs platform.npuNodes.softSlicing or the node's hami-vnpu-core annotation). "
        "Only with mode vnpu.",
    )

    @model_validator(mode="after")
    def _settings_of_the_mode(self) -> NpuSpec:
        problems = []
        if self.mode == "exclusive":
            problems += [
                (key, "only with mode vnpu")
                for key, field in (("memoryMib", "memory_mib"), ("cores", "cores"), ("slicing", "slicing"))
                if field in self.model_fields_set
            ]
        elif self.cores is not None and self.slicing == "template":
            problems.append(
                ("cores", "hard slicing gives each vNPU its template's AI cores: drop this, or set slicing: soft")
            )
        chip = self.chip
        if self.memory_mib is not None and self.memory_mib > chip.memory_capacity_mib:
            problems.append(
                (
                    "memoryMib",
                    f"{self.memory_mib} MiB is more than an {chip.common_word} holds ({chip.memory_capacity_mib} MiB)",
                )
            )
        if chip.super_pod and self.count > 1 and self.count % 2:
            problems.append(("count", f"{chip.common_word} cards are requested one at a time or in pairs: 1 or even"))
        if problems:
            raise config_problems(problems)
        return self

    @property
    def chip(self) -> Chip:
        return ascend.CHIPS[self.type]

    @property
    def template(self) -> ascend.Template | None:
        """The hard template each vNPU gets; None for whole cards and soft slicing."""
        if self.mode != "vnpu" or self.slicing != "template":
            return None
        return self.chip.template_for(self.memory_mib)

    def placement(self, nodes: NpuNodes) -> GpuPlacement:
        chip = self.chip
        limits = {chip.resource: str(self.count)}
        annotations: dict[str, str] = {}
        if self.mode == "vnpu":
            if self.memory_mib is not None:
                limits[chip.memory_resource] = str(self.memory_mib)
            if self.cores is not None:
                limits[chip.core_resource] = str(self.cores)
            if self.slicing == "soft":
                annotations[ascend.VNPU_MODE_ANNOTATION] = ascend.SOFT_SLICING
        return GpuPlacement(
            limits=limits, nodes=nodes, runtime_class_name=nodes.runtime_class_name, annotations=annotations
        )


def _short_form(value: Any) -> Any:
    """`npu: Ascend910B3` is short for `npu: {type: Ascend910B3}` (one whole NPU)."""
    return {"type": value} if isinstance(value, str) else value


NpuField = Annotated[NpuSpec | None, BeforeValidator(_short_form, json_schema_input_type=AscendType | NpuSpec | None)]
