"""Huawei Ascend NPUs as HAMi knows them: the chips, their resource names and vNPU templates, and
the names the device plugin, the scheduler and Ascend's container runtime agree on.

The facts are HAMi's (chart 2.10.0, `templates/scheduler/device-configmap.yaml`, the `vnpus:`
section; `pkg/device/ascend/device.go`) and Project-HAMi/ascend-device-plugin's (v1.4.0). A test
renders the pinned chart and reads the plugin's published files, and fails when this table
disagrees with them (tests/platform/test_ascend_chips.py).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

RESOURCE_PREFIX = "huawei.com/"
# The label HAMi's install guide puts on NPU nodes: the plugin DaemonSet's and HAMi's
# `devices.ascend.nodeSelector` default.
NODE_LABEL = {"ascend": "on"}
# The RuntimeClass of Ascend Docker Runtime, which mounts the driver and the chosen devices.
RUNTIME_CLASS = "ascend"
# A pod annotation that selects HAMi's soft slicing (hami-vnpu-core): exact memory, a share of
# AI cores, instead of the hard templates.
VNPU_MODE_ANNOTATION = "huawei.com/vnpu-mode"
SOFT_SLICING = "hami-core"
# Set in the container by the device plugin (the devices it allocated); a pod must not set it.
VISIBLE_DEVICES_ENV = ("ASCEND_RT_VISIBLE_DEVICES", "ASCEND_VISIBLE_DEVICES")

AscendType = Literal[
    "Ascend910A", "Ascend910B2", "Ascend910B3", "Ascend910B4-1", "Ascend910B4", "Ascend310P", "Ascend910C"
]
"""The chips HAMi schedules, by their `commonWord` (what resource names are made of), in HAMi's order."""


@dataclass(frozen=True)
class Template:
    """A hard vNPU: a fixed share of one card's memory and AI cores."""

    name: str
    memory_mib: int
    ai_core: int
    ai_cpu: int | None = None


@dataclass(frozen=True)
class Chip:
    common_word: str
    chip_name: str
    memory_allocatable_mib: int
    memory_capacity_mib: int
    ai_core: int
    ai_cpu: int | None
    templates: tuple[Template, ...]
    super_pod: bool = False
    """Ascend910C: a request must be one card or an even number (the cards of a SuperPod pair)."""

    @property
    def resource(self) -> str:
        """The count of NPUs (or vNPUs) a container asks for."""
        return f"{RESOURCE_PREFIX}{self.common_word}"

    @property
    def memory_resource(self) -> str:
        """Device memory in MiB per vNPU."""
        return f"{self.resource}-memory"

    @property
    def core_resource(self) -> str:
        """A share of AI cores in percent (soft slicing only)."""
        return f"{self.resource}-core"

    def template_for(self, memory_mib: int | None) -> Template | None:
        """What hard slicing gives for a memory request: the first template (in HAMi's order) that
        holds it; None for a whole card (no request, or more than every template holds)."""
        if memory_mib is None:
            return None
        return next((t for t in self.templates if memory_mib <= t.memory_mib), None)


CHIPS: dict[str, Chip] = {
    chip.common_word: chip
    for chip in (
        Chip(
            "Ascend910A",
            "910A",
            32768,
            32768,
            30,
            None,
            (
                Template("vir02", 2184, 2),
                Template("vir04", 4369, 4),
                Template("vir08", 8738, 8),
                Template("vir16", 17476, 16),
            ),
        ),
        Chip(
            "Ascend910B2",
            "910B2",
            65536,
            65536,
            24,
            6,
            (
                Template("vir03_1c_8g", 8192, 3, 1),
                Template("vir06_1c_16g", 16384, 6, 1),
                Template("vir12_3c_32g", 32768, 12, 3),
            ),
        ),
        Chip(
            "Ascend910B3",
            "910B3",
            65536,
            65536,
            20,
            7,
            (Template("vir05_1c_16g", 16384, 5, 1), Template("vir10_3c_32g", 32768, 10, 3)),
        ),
        Chip(
            "Ascend910B4-1",
            "910B4-1",
            65536,
            65536,
            20,
            7,
            (Template("vir05_1c_16g", 16384, 5, 1), Template("vir10_3c_32g", 32768, 10, 3)),
        ),
        Chip(
            "Ascend910B4",
            "910B4",
            32768,
            32768,
            20,
            7,
            (Template("vir05_1c_8g", 8192, 5, 1), Template("vir10_3c_16g", 16384, 10, 3)),
        ),
        Chip(
            "Ascend310P",
            "310P3",
            21527,
            24576,
            8,
            7,
            (Template("vir01", 3072, 1, 1), Template("vir02", 6144, 2, 2), Template("vir04", 12288, 4, 4)),
        ),
        Chip(
            "Ascend910C",
            "Ascend910",
            65536,
            65536,
            20,
            7,
            (Template("vir05_1c_16g", 16384, 5, 1), Template("vir10_3c_32g", 32768, 10, 3)),
            super_pod=True,
        ),
    )
}
