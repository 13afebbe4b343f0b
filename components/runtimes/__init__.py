"""The model servers a model can run on, chosen by its `runtime` key; one module each."""

from __future__ import annotations

from typing import Annotated

from pydantic import Field

from components.runtimes.mlserver import MLServerModel
from components.runtimes.tfserving import TFServingModel
from components.runtimes.torchserve import TorchServeModel
from components.runtimes.triton import TritonModel
from components.runtimes.vllm import VLLMModel

ModelSpec = Annotated[
    TFServingModel | TorchServeModel | TritonModel | MLServerModel | VLLMModel,
    Field(discriminator="runtime"),
]
"""One model's spec; the `runtime` key selects the runtime's own settings model."""

RUNTIMES = ("tfserving", "torchserve", "triton", "mlserver", "vllm")
