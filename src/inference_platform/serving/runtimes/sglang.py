"""SGLang's OpenAI-compatible server for large language models.

`python3 -m sglang.launch_server`, serving the model under the model's name. Readiness and the
startup budget wait on /ready, which answers 503 until the server has loaded the weights and
warmed up; liveness is /health, which (SGLANG_ENABLE_HEALTH_ENDPOINT_GENERATION, on by default)
runs one token through the engine unless requests are already flowing, and waits up to
SGLANG_HEALTH_CHECK_TIMEOUT (20 s) for it: the probe's timeout is longer than that. Metrics only
with --enable-metrics, on the serving port.

A version's LoRA adapters load at start (--enable-lora, --lora-paths name=path). SGLang's OpenAI
routes pick an adapter from the `model` field written <served model>:<adapter> (a bare adapter name
there is taken for the base model: serving_base.py, _parse_model_parameter), so that is the name a
client sends. Its memory pool keeps a slot for the base model's requests beside the adapters'
(lora/mem_pool.py, prepare_lora_batch: the base, uid None, takes a buffer slot), so
--max-loras-per-batch is maxLoras plus one.
"""

from __future__ import annotations

from typing import ClassVar, Literal

from pydantic import Field

from inference_platform import pins
from inference_platform.platform.gpu_nodes import GpuNodes
from inference_platform.serving.inference_pool import PickerEngine
from inference_platform.serving.model_spec import ModelVersion
from inference_platform.serving.runtimes.base import Probes, http_probe
from inference_platform.serving.runtimes.llm_engine import MODEL_DIR, LLMEngineModel
from inference_platform.serving.server_plan import ServerPlan

PORT = 30000
# /health waits up to 20 s for its one token (sglang/srt/entrypoints/http_server.py).
HEALTH_TIMEOUT_SECONDS = 30


class SGLangModel(LLMEngineModel):
    SERVER_PORTS: ClassVar[dict[str, int]] = {"http": PORT}
    ENGINE: ClassVar[str] = "SGLang"
    # SGLang's gauge of requests waiting in the scheduler's queue (sglang/srt/observability/metrics_collector.py).
    QUEUE_METRIC: ClassVar[str | None] = "sglang:num_queue_reqs"
    PICKER_ENGINE: ClassVar[PickerEngine | None] = "sglang"
    # Its tokenizer's histograms of time to first token and of each request's time per output token,
    # in seconds, labelled model_name, engine_type and is_streaming (same file).
    TTFT_HISTOGRAM: ClassVar[str | None] = "sglang:time_to_first_token_seconds"
    TPOT_HISTOGRAM: ClassVar[str | None] = "sglang:request_time_per_output_token_seconds"
    SUPPORTS_LORA: ClassVar[bool] = True
    LORA_FLAGS: ClassVar[tuple[str, ...]] = (
        "--enable-lora",
        "--lora-paths",
        "--max-loras-per-batch",
        "--max-lora-rank",
    )
    BASE_MODEL_LORA_SLOTS: ClassVar[int] = 1

    runtime: Literal["sglang"] = Field(
        description="SGLang: a Hugging Face model directory; HTTP 30000 (OpenAI API, and metrics). Needs a GPU."
    )

    def server_args(self, gpu_nodes: GpuNodes) -> list[str]:
        args = [
            f"--model-path={MODEL_DIR}",
            f"--served-model-name={self.name}",
            "--host=0.0.0.0",
            f"--port={PORT}",
            f"--tp-size={self.tensor_parallel_size}",
            f"--dtype={self.dtype}",
            "--enable-metrics",
        ]
        if self.max_model_len is not None:
            args.append(f"--context-length={self.max_model_len}")
        share = self.memory_utilization(gpu_nodes)
        if share is not None:
            args.append(f"--mem-fraction-static={share}")
        return args

    def lora_args(self, version: ModelVersion) -> list[str]:
        """The version's adapters, loaded at start, and the model's LoRA limits (the rank, unless set,
        read by SGLang from the adapters)."""
        if not version.adapters:
            return []
        args = ["--enable-lora", "--lora-paths", *(f"{a.name}={a.path}" for a in version.adapters)]
        args.append(f"--max-loras-per-batch={self.lora_batch + self.BASE_MODEL_LORA_SLOTS}")
        if self.max_lora_rank is not None:
            args.append(f"--max-lora-rank={self.max_lora_rank}")
        return args

    def adapter_model(self, adapter: str) -> str:
        return f"{self.name}:{adapter}"

    def plan(self, version: ModelVersion, gpu_nodes: GpuNodes) -> ServerPlan:
        return self.engine_plan(
            version,
            image=pins.SGLANG_IMAGE,
            command=["python3", "-m", "sglang.launch_server"],
            args=[*self.server_args(gpu_nodes), *self.lora_args(version)],
            env={},
            # Loading weights, capturing CUDA graphs and the warm-up request take minutes: half an hour.
            probes=Probes.ready_after_start(
                http_probe("/ready", PORT, period=10, failures=3),
                http_probe("/health", PORT, period=30, failures=3, timeout=HEALTH_TIMEOUT_SECONDS),
                startup_failures=180,
            ),
        )
