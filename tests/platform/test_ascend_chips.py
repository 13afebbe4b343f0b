"""The Ascend chip table (platform/ascend.py) is HAMi's: the pinned chart's `vnpus:` device config,
the resource names it registers with its scheduler, and Project-HAMi/ascend-device-plugin's own
published files (../shared/ascend). Any disagreement fails here, so the table cannot drift from
what the scheduler and the device plugin really use."""

from __future__ import annotations

import json
import subprocess
from typing import Any, get_args

import pytest
import yaml

from inference_platform import pins
from inference_platform.cli.helm import find_helm
from inference_platform.platform import ascend
from inference_platform.platform.ascend import CHIPS, AscendType
from tests.conftest import charts_dir, shared_path


@pytest.fixture(scope="module")
def hami_ascend(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """HAMi's chart rendered with its Ascend side on: the scheduler's vnpus config and the
    extended resources it registers."""
    values = tmp_path_factory.mktemp("hami") / "values.json"
    values.write_text(json.dumps({"devices": {"ascend": {"enabled": True}}}))
    tarball = charts_dir() / f"{pins.HAMI.chart}-{pins.HAMI.version}.tgz"
    out = subprocess.run(
        [str(find_helm()), "template", "hami", str(tarball), "--values", str(values), "--kube-version", "1.30.4"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    objects = [o for o in yaml.safe_load_all(out) if o]
    (device_config,) = [
        o for o in objects if o["kind"] == "ConfigMap" and o["metadata"]["name"].endswith("-scheduler-device")
    ]
    return {"vnpus": yaml.safe_load(device_config["data"]["device-config.yaml"])["vnpus"], "objects": objects}


def _table(configs: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Each chip as the config states it, in the table's terms."""
    return {
        c["commonWord"]: {
            "chip_name": c["chipName"],
            "resource": c["resourceName"],
            "memory_resource": c["resourceMemoryName"],
            "memory_allocatable_mib": c["memoryAllocatable"],
            "memory_capacity_mib": c["memoryCapacity"],
            "ai_core": c["aiCore"],
            "ai_cpu": c.get("aiCPU"),
            "super_pod": bool(c.get("superPod", False)),
            "templates": [(t["name"], t["memory"], t["aiCore"], t.get("aiCPU")) for t in c["templates"]],
        }
        for c in configs
    }


def _ours() -> dict[str, dict[str, Any]]:
    return {
        word: {
            "chip_name": chip.chip_name,
            "resource": chip.resource,
            "memory_resource": chip.memory_resource,
            "memory_allocatable_mib": chip.memory_allocatable_mib,
            "memory_capacity_mib": chip.memory_capacity_mib,
            "ai_core": chip.ai_core,
            "ai_cpu": chip.ai_cpu,
            "super_pod": chip.super_pod,
            "templates": [(t.name, t.memory_mib, t.ai_core, t.ai_cpu) for t in chip.templates],
        }
        for word, chip in CHIPS.items()
    }


def test_the_chip_table_is_the_pinned_hami_charts(hami_ascend: dict[str, Any]) -> None:
    configs = hami_ascend["vnpus"]["configs"]
    assert _ours() == _table(configs)
    # In HAMi's order, which decides nothing but keeps the comparison readable.
    assert list(CHIPS) == [c["commonWord"] for c in configs]
    # Every chip of HAMi's chart has a -core resource (soft slicing's share of AI cores).
    assert {c["commonWord"]: c["resourceCoreName"] for c in configs} == {
        word: chip.core_resource for word, chip in CHIPS.items()
    }


def test_the_type_setting_offers_exactly_the_chips() -> None:
    assert get_args(AscendType) == tuple(CHIPS)


def test_the_resources_hami_registers_are_those_pods_ask_for(hami_ascend: dict[str, Any]) -> None:
    values = yaml.safe_load(
        subprocess.run(
            [
                str(find_helm()),
                "show",
                "values",
                str(charts_dir() / f"{pins.HAMI.chart}-{pins.HAMI.version}.tgz"),
            ],
            capture_output=True,
            text=True,
            check=True,
        ).stdout
    )
    ascend_values = values["devices"]["ascend"]
    ours = {name for chip in CHIPS.values() for name in (chip.resource, chip.memory_resource, chip.core_resource)}
    assert set(ascend_values["customresources"]) == ours
    assert ascend_values["nodeSelector"] == ascend.NODE_LABEL


def test_the_device_plugins_own_config_agrees_on_names_sizes_and_templates() -> None:
    """The plugin's published ConfigMap (for a plugin outside HAMi's namespace) lists the same chips;
    it names a -core resource only for some, which HAMi's own config (the one used here) has for all,
    and leaves out 910C's superPod flag (the scheduler's, from HAMi's config)."""
    published = yaml.safe_load(shared_path("ascend/ascend-device-configmap.yaml").read_text())
    configs = yaml.safe_load(published["data"]["device-config.yaml"])["vnpus"]["configs"]

    def without_super_pod(table: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
        return {word: {k: v for k, v in chip.items() if k != "super_pod"} for word, chip in table.items()}

    assert without_super_pod(_table(configs)) == without_super_pod(_ours())
    assert {c["resourceCoreName"] for c in configs if "resourceCoreName" in c} <= {
        chip.core_resource for chip in CHIPS.values()
    }


def test_node_label_runtime_class_and_soft_slicing_annotation_are_the_plugins() -> None:
    manifests = [d for d in yaml.safe_load_all(shared_path("ascend/ascend-device-plugin.yaml").read_text()) if d]
    (daemon_set,) = [d for d in manifests if d["kind"] == "DaemonSet"]
    assert daemon_set["spec"]["template"]["spec"]["nodeSelector"] == ascend.NODE_LABEL
    # The published RuntimeClass repeats `handler`; PyYAML keeps the last, which is the same value.
    runtime_class = yaml.safe_load(shared_path("ascend/ascend-runtimeclass.yaml").read_text())
    assert runtime_class["metadata"]["name"] == ascend.RUNTIME_CLASS == runtime_class["handler"]
    guide = shared_path("ascend/hami.md").read_text()
    assert f"{ascend.VNPU_MODE_ANNOTATION}: '{ascend.SOFT_SLICING}'" in guide


@pytest.mark.parametrize(
    ("chip", "asked", "given"),
    [
        ("Ascend910B3", 1, "vir05_1c_16g"),
        ("Ascend910B3", 16384, "vir05_1c_16g"),
        ("Ascend910B3", 16385, "vir10_3c_32g"),
        ("Ascend910B3", 40000, None),
        ("Ascend310P", 5000, "vir02"),
        ("Ascend910B3", None, None),
    ],
)
def test_hard_slicing_rounds_memory_up_to_the_first_template_that_holds_it(
    chip: str, asked: int | None, given: str | None
) -> None:
    """HAMi's trimMemory (pkg/device/ascend/device.go): the first template, in order, whose memory
    holds the request; none (a whole card) past the largest, or without a request."""
    template = CHIPS[chip].template_for(asked)
    assert (template.name if template else None) == given
