"""The model servers a model can run on, chosen by its `runtime` key; one module each."""

from __future__ import annotations

from typing import Annotated, get_args

from pydantic import Field

from inference_platform.config.errors import Discriminated
from inference_platform.serving.runtimes.custom import CustomModel
from inference_platform.serving.runtimes.mindie import MindIEModel
from inference_platform.serving.runtimes.mlserver import MLServerModel
from inference_platform.serving.runtimes.sglang import SGLangModel
from inference_platform.serving.runtimes.tfserving import TFServingModel
from inference_platform.serving.runtimes.torchserve import TorchServeModel
from inference_platform.serving.runtimes.triton import TritonModel
from inference_platform.serving.runtimes.triton_llm import TritonLLMModel
from inference_platform.serving.runtimes.vllm import VLLMModel

ModelSpec = Annotated[
    TFServingModel
    | TorchServeModel
    | TritonModel
    | TritonLLMModel
    | MLServerModel
    | VLLMModel
    | SGLangModel
    | MindIEModel
    | CustomModel,
    Field(discriminator="runtime"),
]
"""One model's spec; the `runtime` key selects the runtime's own settings model."""

RUNTIMES: tuple[str, ...] = tuple(
    tag for variant in get_args(get_args(ModelSpec)[0]) for tag in get_args(variant.model_fields["runtime"].annotation)
)
"""The `runtime` tags, in the union's order, read from the union itself (each variant's Literal)."""
RUNTIME_UNION = Discriminated("runtime", RUNTIMES, "runtime", fields=frozenset({"model"}))
"""How config reports name a model's runtime: models[i] and an InferenceService's `model` hold one."""
