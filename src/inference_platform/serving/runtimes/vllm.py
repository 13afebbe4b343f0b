"""vLLM's OpenAI-compatible server for large language models.

The served model name is the model's name, so clients call /v1/completions with
{"model": "<name>"}. Readiness waits on /v1/models: /health answers as soon as the engine
process lives, long before the weights are loaded.
"""

from __future__ import annotations

import math
from typing import Annotated, ClassVar, Literal

from pydantic import Field, model_validator

from inference_platform import pins
from inference_platform.config.base import config_problems
from inference_platform.platform.gpu_nodes import GpuNodes
from inference_platform.serving.analysis_spec import PayloadProtocol
from inference_platform.serving.gpu import VirtualGpu
from inference_platform.serving.model_spec import ModelSpecBase, ModelVersion, ResourceList, Resources
from inference_platform.serving.runtimes.base import (
    SCRATCH_PATH,
    http_probe,
    model_server_container,
)
from inference_platform.serving.server_plan import ExampleRequest, ServerPlan

PORT = 8000
METRICS_PATH = "/metrics"
MODEL_DIR = "/mnt/models"
SHM_VOLUME = "shm"
# The image runs as root; the server needs no privileges once its caches are writable.
RUN_AS_USER = 1000
# Under HAMi, CUDA reports the vGPU's memory cap as the device's total (HAMi-core hooks
# cuMemGetInfo), so --gpu-memory-utilization is a share of the cap. HAMi does not count CUDA
# context and NCCL buffers against the cap, so keep this much of the cap out of vLLM's share.
CAP_RESERVE_MIB = 2048
# The share when the cap's size is unknown (a percentage of a GPU of unknown size).
CAP_SHARE_DEFAULT = 0.85
MIN_CAP_SHARE = 0.5

DEFAULT_RESOURCES = Resources(
    requests=ResourceList(cpu="2", memory="16Gi"),
    limits=ResourceList(cpu="8", memory="32Gi"),
)


class VLLMModel(ModelSpecBase):
    SERVER_PORTS: ClassVar[dict[str, int]] = {"http": PORT}
    INFERENCE_PATH: ClassVar[str] = "/v1/completions"  # OpenAI completions API
    PAYLOAD_PROTOCOL: ClassVar[PayloadProtocol] = "openai"
    # vLLM's gauge of requests waiting for the scheduler (vllm/v1/metrics/loggers.py).
    QUEUE_METRIC: ClassVar[str | None] = "vllm:num_requests_waiting"

    runtime: Literal["vllm"]
    tensor_parallel_size: Annotated[int, Field(ge=1, le=16)] = Field(
        default=1, description="GPUs one replica spreads the model over; must match the GPU count."
    )
    max_model_len: Annotated[int, Field(ge=1)] | None = Field(
        default=None, description="Longest context (prompt and output) in tokens; the model's own when unset."
    )
    dtype: Literal["auto", "half", "float16", "bfloat16", "float", "float32"] = "auto"
    gpu_memory_utilization: Annotated[float, Field(gt=0, le=1)] | None = Field(
        default=None, description="Share of the device the engine takes; derived from a vGPU memory cap when unset."
    )
    shm_size: Annotated[str, Field(pattern=r"^[0-9]+(Mi|Gi)$")] = Field(
        default="2Gi", description="Shared memory for the workers of tensor-parallel inference."
    )

    @model_validator(mode="after")
    def _needs_gpus(self) -> VLLMModel:
        problems = []
        if self.gpu.mode == "none":
            problems.append(("gpu", "vLLM serves on GPUs: set gpu to exclusive, vgpu or shared"))
        elif self.gpu.mode == "shared" and self.gpu_memory_utilization is None:
            problems.append(
                (
                    "gpuMemoryUtilization",
                    "with a shared GPU vLLM would take 90 % of the device from its neighbours: set this model's share",
                )
            )
        elif self.gpu.device_count is not None and self.gpu.device_count != self.tensor_parallel_size:
            problems.append(
                (
                    "tensorParallelSize",
                    f"is {self.tensor_parallel_size} but each pod gets {self.gpu.device_count} GPU(s): make them equal",
                )
            )
        if problems:
            raise config_problems(problems)
        return self

    def memory_utilization(self, gpu_nodes: GpuNodes) -> float | None:
        """--gpu-memory-utilization: as set, or sized to a vGPU memory cap so the engine stays inside it."""
        if self.gpu_memory_utilization is not None:
            return self.gpu_memory_utilization
        if not isinstance(self.gpu, VirtualGpu) or not self.gpu.memory_capped:
            return None  # whole devices: vLLM's own default
        cap = self.gpu.memory_cap_mib(gpu_nodes)
        if cap is None:
            return CAP_SHARE_DEFAULT
        share = math.floor((cap - CAP_RESERVE_MIB) / cap * 100) / 100
        return max(MIN_CAP_SHARE, share)

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
        container = model_server_container(
            self,
            version,
            default_image=pins.VLLM_IMAGE,
            default_resources=DEFAULT_RESOURCES,
            # `vllm serve <model dir>`: the image's entrypoint; the older api_server module is deprecated.
            command=["vllm", "serve", MODEL_DIR],
            args=self.server_args(gpu_nodes),
            env={
                # Caches (Hugging Face, torch.compile, Triton kernels) go to the writable scratch volume.
                "HOME": SCRATCH_PATH,
                "HF_HOME": f"{SCRATCH_PATH}/hf",
                "HF_HUB_OFFLINE": "1",
                "VLLM_NO_USAGE_STATS": "1",
                "DO_NOT_TRACK": "1",
            },
            extra_mounts=[{"name": SHM_VOLUME, "mountPath": "/dev/shm"}],
            model_mount_path=MODEL_DIR,
            # Loading weights and capturing CUDA graphs takes minutes: allow half an hour.
            startup_probe=http_probe("/v1/models", PORT, period=10, failures=180),
            readiness_probe=http_probe("/v1/models", PORT, period=10, failures=3),
            liveness_probe=http_probe("/health", PORT, period=10, failures=3),
        )
        return ServerPlan(
            container=container,
            config_files={},
            http_port=PORT,
            metrics_port=PORT,
            metrics_path=METRICS_PATH,
            run_as_user=RUN_AS_USER,
            volumes=({"name": SHM_VOLUME, "emptyDir": {"medium": "Memory", "sizeLimit": self.shm_size}},),
        )

    def example_request(self) -> ExampleRequest:
        return ExampleRequest(
            path=self.inference_path, body={"model": self.name, "prompt": "The capital of France is", "max_tokens": 16}
        )
