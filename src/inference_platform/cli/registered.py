"""What a program registered, read back for the render's summary: the models its InferenceServices
serve and the GPUs they hold. Whatever composed them (this repository's stack, InferencePlatform,
or a library program of another project), the render plans from the components themselves, not
from a stack file the program may never read.

Each InferenceService registers, beside the outputs a user reads, its model and its GPU nodes as
written (serving/inference_service/component.py); HAMi's sharing settings are its release's values.
"""

from __future__ import annotations

from collections.abc import Mapping
from fractions import Fraction
from typing import Any

from pydantic import TypeAdapter

from inference_platform import pins
from inference_platform.analysis.capacity import Plan, plan
from inference_platform.cli.render import RenderResult
from inference_platform.platform import hami
from inference_platform.platform.gpu_nodes import GpuNodes
from inference_platform.serving.inference_service.component import GPU_NODES_OUTPUT, MODEL_OUTPUT
from inference_platform.serving.runtimes import ModelSpec

COMPONENT = "InferenceService"
"""The last part of the type token of the native component and of the package's."""
PIPELINE = "Pipeline"

_MODEL: TypeAdapter[ModelSpec] = TypeAdapter(ModelSpec)


def registered_services(result: RenderResult) -> list[tuple[ModelSpec, GpuNodes]]:
    """The model and GPU nodes of every InferenceService the program registered, in order."""
    services = []
    for registration in result.registrations:
        outputs = result.component_outputs.get(registration.urn) or {}
        if registration.custom or registration.type.rsplit(":", 1)[-1] != COMPONENT or MODEL_OUTPUT not in outputs:
            continue
        services.append(
            (_MODEL.validate_python(outputs[MODEL_OUTPUT]), GpuNodes.model_validate(outputs.get(GPU_NODES_OUTPUT, {})))
        )
    return services


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
    services = registered_services(result)
    nodes = services[0][1] if services else GpuNodes()
    found = plan([model for model, _ in services], nodes, registered_sharing(result), nodes.declared)
    if any(other != nodes for _, other in services):
        notes = (*found.notes, "the models' InferenceServices declare different gpuNodes: planned with the first's")
        return Plan(found.gpus_min, found.gpus_awake, found.gpus_peak, found.declared, found.models, notes)
    return found
