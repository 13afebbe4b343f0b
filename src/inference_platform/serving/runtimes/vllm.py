"""vLLM's OpenAI-compatible server for large language models.

The served model name is the model's name, so clients call /v1/completions with
{"model": "<name>"}. Readiness waits on /v1/models: /health answers as soon as the engine
process lives, long before the weights are loaded.

A model too large for one node sets `nodes`: each replica is then a group of that many pods (a
LeaderWorkerSet group), run in vLLM's own multi-node mode without Ray. The leader (node rank 0)
serves the API; the workers run `--headless` with their rank from LWS_WORKER_INDEX and reach the
leader at LWS_LEADER_ADDRESS, both set in every pod by the LWS controller (the kubelet expands
$(VAR) in arguments from the container's environment).

With `npu` the model runs on Ascend NPUs in vllm-project/vllm-ascend's image: vLLM with its Ascend
plugin, which takes vLLM's own arguments, so the flags are the same. The image is the one built for
the chip's family. Its entrypoint (CANN's: it sources the toolkit's and NNAL's environment, then
runs its arguments) stays, so `vllm serve` is the container's args. The device plugin sets
ASCEND_RT_VISIBLE_DEVICES; nothing NVIDIA's is set. Multi-node groups run the same way as on GPUs
(vllm-ascend documents vLLM's multiprocessing mode across nodes without Ray), on whole NPUs.
"""

from __future__ import annotations

import dataclasses
from typing import Annotated, ClassVar, Literal

from pydantic import Field, model_validator

from inference_platform import pins
from inference_platform.config.base import config_problems
from inference_platform.platform.gpu_nodes import GpuNodes
from inference_platform.serving.inference_pool import PickerEngine
from inference_platform.serving.model_spec import ModelVersion
from inference_platform.serving.runtimes.base import Probes, http_probe
from inference_platform.serving.runtimes.llm_engine import MODEL_DIR, LLMEngineModel
from inference_platform.serving.server_plan import ServerPlan, WorkerPlan

PORT = 8000
# The flags that make a replica one engine across its group: set by the platform, never by `args`
# (vLLM's parser takes the last of a repeated flag, and a node rank or backend it lets through,
# e.g. --distributed-executor-backend=ray, would split the group).
GROUP_FLAGS = (
    "--nnodes",
    "--node-rank",
    "--master-addr",
    "--master-port",
    "--distributed-executor-backend",
    "--headless",
    "--tensor-parallel-size",
    "--pipeline-parallel-size",
    "-tp",
    "-pp",
    "-n",
    "-r",
)
# torch.distributed's rendezvous on the leader (vLLM's default, named so it is declared).
MASTER_PORT = 29501
LEADER_ADDRESS = "$(LWS_LEADER_ADDRESS)"
# vllm-ascend publishes one image per chip family (its image workflow's suffixes): the plain tag
# for Atlas A2 (910B), -a3 for Atlas A3 (910C), -310p for Atlas 300I Duo (310P). It has none
# for the 910A of the older Atlas 800 training servers.
ASCEND_IMAGE_SUFFIX = {
    "Ascend910B2": "",
    "Ascend910B3": "",
    "Ascend910B4": "",
    "Ascend910B4-1": "",
    "Ascend910C": "-a3",
    "Ascend310P": "-310p",
}
SERVE = ("vllm", "serve", MODEL_DIR)
# The ranks vLLM's --max-lora-rank takes (vllm/config/lora.py, MaxLoRARanks).
LORA_RANKS = (1, 8, 16, 32, 64, 128, 256, 320, 512)
WORKER_INDEX = "$(LWS_WORKER_INDEX)"


class VLLMModel(LLMEngineModel):
    SERVER_PORTS: ClassVar[dict[str, int]] = {"http": PORT}
    ENGINE: ClassVar[str] = "vLLM"
    # vLLM's gauge of requests waiting for the scheduler (vllm/v1/metrics/loggers.py).
    QUEUE_METRIC: ClassVar[str | None] = "vllm:num_requests_waiting"
    # Its histograms of time to first token and of each request's time per output token (the decode
    # time over the tokens after the first), in seconds, labelled model_name and engine (same file).
    TTFT_HISTOGRAM: ClassVar[str | None] = "vllm:time_to_first_token_seconds"
    TPOT_HISTOGRAM: ClassVar[str | None] = "vllm:request_time_per_output_token_seconds"
    # On Ascend NPUs through vllm-ascend's image.
    USES_NPUS: ClassVar[bool] = True
    PICKER_ENGINE: ClassVar[PickerEngine | None] = "vllm"
    # Adapters load at start (--enable-lora, --lora-modules name=path): on GPUs, and on Ascend NPUs too,
    # where vllm-ascend takes vLLM's LoRA flags and runs the adapters on its own punica kernels (AscendC
    # bgmv/sgmv, its LoRA guide; on the 310P, LoRA in graph mode waits on an upstream fix: add
    # --enforce-eager there). Requests name an adapter alone in the `model` field. With LoRA on,
    # vLLM exports vllm:lora_requests_info (vllm/v1/metrics/loggers.py), which the inference pool's
    # picker reads for its LoRA affinity.
    SUPPORTS_LORA: ClassVar[bool] = True
    LORA_FLAGS: ClassVar[tuple[str, ...]] = (
        "--enable-lora",
        "--no-enable-lora",
        "--lora-modules",
        "--max-loras",
        "--max-lora-rank",
    )
    LORA_RANKS: ClassVar[tuple[int, ...] | None] = LORA_RANKS

    runtime: Literal["vllm"] = Field(
        description="vLLM: a Hugging Face model directory; HTTP 8000 (OpenAI API and metrics). Needs a GPU, or "
        "an Ascend NPU (npu: vllm-ascend's image)."
    )
    nodes: Annotated[int, Field(ge=1, le=16)] = Field(
        default=1,
        description="Nodes one replica spans: a group of this many pods (a leader and workers), each with "
        "gpu.count GPUs (or npu.count NPUs), so the engine spans nodes x gpu.count GPUs.",
    )
    pipeline_parallel_size: Annotated[int, Field(ge=1, le=16)] | None = Field(
        default=None,
        description="Pipeline stages; `nodes` by default. tensorParallelSize x pipelineParallelSize must equal "
        "nodes x gpu.count (or npu.count).",
    )

    @model_validator(mode="after")
    def _ascend_image(self) -> VLLMModel:
        if self.npu is not None and self.npu.type not in ASCEND_IMAGE_SUFFIX:
            raise config_problems(
                [
                    (
                        "npu.type",
                        f"vllm-ascend has no image for {self.npu.type}: it runs on Atlas A2 (Ascend910B2, "
                        "Ascend910B3, Ascend910B4, Ascend910B4-1), A3 (Ascend910C) and 300I Duo (Ascend310P)",
                    )
                ]
            )
        return self

    @model_validator(mode="after")
    def _groups(self) -> VLLMModel:
        if self.nodes == 1:
            return self
        problems = self.group_problems()
        given = [("args", i, a) for i, a in enumerate(self.args)]
        given += [
            (f"versions[{v}].args", i, a) for v, version in enumerate(self.versions) for i, a in enumerate(version.args)
        ]
        problems += [
            (f"{where}[{index}]", f"{arg.split('=')[0]} is set by the platform for a multi-node group")
            for where, index, arg in given
            if arg.split("=")[0] in GROUP_FLAGS
        ]
        if problems:
            raise config_problems(problems)
        return self

    @property
    def group_size(self) -> int:
        return self.nodes

    @property
    def pipeline_stages(self) -> int:
        return self.pipeline_parallel_size if self.pipeline_parallel_size is not None else self.nodes

    def _parallel_problems(self) -> list[tuple[str, str]]:
        if self.nodes == 1 and self.pipeline_parallel_size is None:
            return super()._parallel_problems()
        devices = self.accelerator_count
        if devices is None:
            return []
        tensor, stages = self.tensor_parallel_size, self.pipeline_stages
        if tensor * stages != self.nodes * devices:
            return [
                (
                    "tensorParallelSize",
                    f"tensorParallelSize x pipelineParallelSize is {tensor} x {stages} = {tensor * stages}, but a "
                    f"replica has {self.nodes} node(s) x {devices} {self.device_noun}(s) = {self.nodes * devices}: "
                    "make them equal",
                )
            ]
        return []

    def server_args(self, gpu_nodes: GpuNodes) -> list[str]:
        args = [
            f"--served-model-name={self.name}",
            "--host=0.0.0.0",
            f"--port={PORT}",
            f"--tensor-parallel-size={self.tensor_parallel_size}",
            f"--dtype={self.dtype}",
        ]
        if self.pipeline_stages > 1:
            args.append(f"--pipeline-parallel-size={self.pipeline_stages}")
        if self.max_model_len is not None:
            args.append(f"--max-model-len={self.max_model_len}")
        utilization = self.memory_utilization(gpu_nodes)
        if utilization is not None:
            args.append(f"--gpu-memory-utilization={utilization}")
        if self.nodes > 1:
            args += [
                f"--nnodes={self.nodes}",
                f"--master-addr={LEADER_ADDRESS}",
                f"--master-port={MASTER_PORT}",
                "--distributed-executor-backend=mp",
            ]
        return args

    def lora_args(self, version: ModelVersion) -> list[str]:
        """The version's adapters, loaded at start, and the model's LoRA limits. A multi-node group's
        workers get them too: each builds the same LoRA layers (and reads the adapters' files, which
        its pod has as the leader's does)."""
        if not version.adapters:
            return []
        args = ["--enable-lora", "--lora-modules", *(f"{a.name}={a.path}" for a in version.adapters)]
        args.append(f"--max-loras={self.lora_batch}")
        if self.max_lora_rank is not None:
            args.append(f"--max-lora-rank={self.max_lora_rank}")
        return args

    def leader_args(self, gpu_nodes: GpuNodes) -> list[str]:
        return [*self.server_args(gpu_nodes), "--node-rank=0"] if self.nodes > 1 else self.server_args(gpu_nodes)

    def worker_args(self, gpu_nodes: GpuNodes) -> list[str]:
        return [*self.server_args(gpu_nodes), f"--node-rank={WORKER_INDEX}", "--headless"]

    @property
    def engine_image(self) -> str:
        """vLLM's image, or on Ascend NPUs vllm-ascend's for the chip's family."""
        if self.npu is None:
            return pins.VLLM_IMAGE
        return pins.VLLM_ASCEND_IMAGE + ASCEND_IMAGE_SUFFIX[self.npu.type]

    def plan(self, version: ModelVersion, gpu_nodes: GpuNodes) -> ServerPlan:
        # `vllm serve <model dir>` (the older api_server module is deprecated): the container's
        # command, or on Ascend its args, so CANN's entrypoint sets up the toolkit's environment first.
        on_npus = self.npu is not None
        serve = list(SERVE) if on_npus else []
        plan = self.engine_plan(
            version,
            image=self.engine_image,
            command=[] if on_npus else list(SERVE),
            args=[*serve, *self.leader_args(gpu_nodes), *self.lora_args(version)],
            env={"VLLM_NO_USAGE_STATS": "1", "DO_NOT_TRACK": "1"},
            # Loading weights and capturing CUDA graphs takes minutes: allow half an hour.
            probes=Probes.ready_after_start(
                http_probe("/v1/models", PORT, period=10, failures=3),
                http_probe("/health", PORT, period=10, failures=3),
                startup_failures=180,
            ),
        )
        if self.nodes == 1:
            return plan
        # The engine's process is the container's: when a worker's exits, its group is recreated.
        lora = self.lora_args(version)
        workers = WorkerPlan(self.nodes, (*serve, *self.worker_args(gpu_nodes), *lora, *self.args, *version.args))
        return dataclasses.replace(plan, workers=workers)
