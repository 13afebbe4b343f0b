"""What a program registered, read back for the render's summary: the models its InferenceServices
serve and the GPUs they hold. Whatever composed them (this repository's stack, InferencePlatform,
or a library program of another project), the render plans from the components themselves, not
from a stack file the program may never read.

Each InferenceService registers, beside the outputs a user reads, its model and its GPU nodes as
written (serving/inference_service/component.py); HAMi's sharing settings are its release's values.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from fractions import Fraction
from typing import Any

from pydantic import TypeAdapter

from inference_platform import pins
from inference_platform.analysis.capacity import Plan, plan
from inference_platform.cli.render import RenderResult
from inference_platform.platform import hami
from inference_platform.platform.gpu_nodes import GpuNodes
from inference_platform.platform.npu_nodes import NpuNodes
from inference_platform.serving.inference_service.component import GPU_NODES_OUTPUT, MODEL_OUTPUT, NPU_NODES_OUTPUT
from inference_platform.serving.runtimes import ModelSpec

COMPONENT = "InferenceService"
"""The last part of the type token of the native component and of the package's."""
PIPELINE = "Pipeline"

_MODEL: TypeAdapter[ModelSpec] = TypeAdapter(ModelSpec)


def registered_services(result: RenderResult) -> list[tuple[ModelSpec, GpuNodes]]:
    """The model and GPU nodes of every InferenceService the program registered, in order."""
    return [(model, gpu_nodes) for model, gpu_nodes, _ in _registered(result)]


def _registered(result: RenderResult) -> list[tuple[ModelSpec, GpuNodes, NpuNodes | None]]:
    """The model, GPU nodes and (an Ascend model's) NPU nodes of every InferenceService registered,
    by the model's name: components finish registering in an order that follows what each waits on
    (the same program can register them in another order), so the order is set here."""
    services = []
    for registration in result.registrations:
        outputs = result.component_outputs.get(registration.urn) or {}
        if registration.custom or registration.type.rsplit(":", 1)[-1] != COMPONENT or MODEL_OUTPUT not in outputs:
            continue
        npu_nodes = outputs.get(NPU_NODES_OUTPUT)
        services.append(
            (
                _MODEL.validate_python(outputs[MODEL_OUTPUT]),
                GpuNodes.model_validate(outputs.get(GPU_NODES_OUTPUT, {})),
                None if npu_nodes is None else NpuNodes.model_validate(npu_nodes),
            )
        )
    return sorted(services, key=lambda service: service[0].name)


def registered_urls(result: RenderResult, component: str) -> dict[str, list[str]]:
    """The URLs of every `component` (InferenceService, Pipeline) the program registered, by the
    model's or the pipeline's name."""
    urls: dict[str, list[str]] = {}
    for registration in result.registrations:
        outputs = result.component_outputs.get(registration.urn) or {}
        if registration.custom or registration.type.rsplit(":", 1)[-1] != component or "urls" not in outputs:
            continue
        model = outputs.get(MODEL_OUTPUT)
        urls[model["name"] if isinstance(model, Mapping) else registration.name] = list(outputs["urls"])
    return urls


def registered_sharing(result: RenderResult) -> hami.Sharing:
    """How far HAMi stretches one GPU, from its release's values; its defaults without HAMi."""
    for chart in result.charts:
        if chart.inputs.get("chart") == pins.HAMI.chart:
            device_plugin: Mapping[str, Any] = (chart.inputs.get("values") or {}).get("devicePlugin") or {}
            default = hami.Sharing()
            return hami.Sharing(
                memory_scaling=Fraction(str(device_plugin.get("deviceMemoryScaling", default.memory_scaling))),
                core_scaling=Fraction(str(device_plugin.get("deviceCoreScaling", default.core_scaling))),
                split_count=int(device_plugin.get("deviceSplitCount", default.split_count)),
            )
    return hami.Sharing()


def registered_capacity(result: RenderResult) -> Plan:
    """The GPU plan (analysis/capacity.py) of the models the program registered, against the GPUs
    their GPU nodes declare."""
    services = _registered(result)
    nodes = services[0][1] if services else GpuNodes()
    npu_nodes = next((npus for _, _, npus in services if npus is not None), NpuNodes())
    found = plan([model for model, _, _ in services], nodes, registered_sharing(result), nodes.declared, npu_nodes)
    notes = list(found.notes)
    if any(other != nodes for _, other, _ in services):
        notes.append("the models' InferenceServices declare different gpuNodes: planned with the first's")
    if any(npus not in (None, npu_nodes) for _, _, npus in services):
        notes.append("the models' InferenceServices declare different npuNodes: planned with the first's")
    return dataclasses.replace(found, notes=tuple(notes))
