"""vLLM's OpenAI-compatible server for large language models.

The served model name is the model's name, so clients call /v1/completions with
{"model": "<name>"}. Readiness waits on /v1/models: /health answers as soon as the engine
process lives, long before the weights are loaded.
"""

from __future__ import annotations

from typing import ClassVar, Literal

from inference_platform import pins
from inference_platform.platform.gpu_nodes import GpuNodes
from inference_platform.serving.model_spec import ModelVersion
from inference_platform.serving.runtimes.base import http_probe
from inference_platform.serving.runtimes.llm_engine import MODEL_DIR, LLMEngineModel
from inference_platform.serving.server_plan import ServerPlan

PORT = 8000


class VLLMModel(LLMEngineModel):
    SERVER_PORTS: ClassVar[dict[str, int]] = {"http": PORT}
    ENGINE: ClassVar[str] = "vLLM"
    # vLLM's gauge of requests waiting for the scheduler (vllm/v1/metrics/loggers.py).
    QUEUE_METRIC: ClassVar[str | None] = "vllm:num_requests_waiting"

    runtime: Literal["vllm"]

    def server_args(self, gpu_nodes: GpuNodes) -> list[str]:
        args = [
            f"--served-model-name={self.name}",
            "--host=0.0.0.0",
            f"--port={PORT}",
            f"--tensor-parallel-size={self.tensor_parallel_size}",
            f"--dtype={self.dtype}",
        ]
        if self.max_model_len is not None:
            args.append(f"--max-model-len={self.max_model_len}")
        utilization = self.memory_utilization(gpu_nodes)
        if utilization is not None:
            args.append(f"--gpu-memory-utilization={utilization}")
        return args

    def plan(self, version: ModelVersion, gpu_nodes: GpuNodes) -> ServerPlan:
        return self.engine_plan(
            version,
            image=pins.VLLM_IMAGE,
            # `vllm serve <model dir>`: the image's entrypoint; the older api_server module is deprecated.
            command=["vllm", "serve", MODEL_DIR],
            args=self.server_args(gpu_nodes),
            env={"VLLM_NO_USAGE_STATS": "1", "DO_NOT_TRACK": "1"},
            port=PORT,
            # Loading weights and capturing CUDA graphs takes minutes: allow half an hour.
            startup_probe=http_probe("/v1/models", PORT, period=10, failures=180),
            readiness_probe=http_probe("/v1/models", PORT, period=10, failures=3),
            liveness_probe=http_probe("/health", PORT, period=10, failures=3),
        )
