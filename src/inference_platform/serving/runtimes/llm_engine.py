"""What the LLM engines (vLLM, SGLang) share: GPUs (or, for an engine that runs on them, Ascend
NPUs) are required, tensor parallelism spans a pod's devices, the engine's share of device memory is
sized to a vGPU's or vNPU's memory cap, and the workers of tensor-parallel inference talk through
shared memory, and a version's LoRA adapters are loaded at start under their own names, within
limits set once for the model. Each engine's own module maps these settings to its flags and names
its image, command and probes.

LoRA memory: both engines reserve their adapter slots (`maxLoras` of them, each for an adapter of
rank up to `maxLoraRank`; SGLang one more, for the base model) in GPU memory inside the share
this module sizes, before they size their KV cache from what is left of it: vLLM allocates the
slots while it loads the model, which it counts as weights (vllm/v1/worker/gpu_model_runner.py,
load_model: load_lora_model inside the DeviceMemoryProfiler), and estimates the CUDA graphs it
captures with and without LoRA inside the share too (VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS, on by
default); SGLang builds its LoRA memory pool in ModelRunner.initialize, before the KV cache is
budgeted as free memory less the non-static remainder (sglang/srt/mem_cache/kv_cache_configurator.py,
_profile_available_bytes). Adapters take from the KV cache, not from the room outside the share,
so the share under a memory cap stays as it is. The slots' size follows the base model's
architecture (layers, hidden and projection sizes), which no config here holds.
"""

from __future__ import annotations

import math
from abc import abstractmethod
from typing import Annotated, Any, ClassVar, Literal

from pydantic import Field, GetJsonSchemaHandler, model_validator
from pydantic_core import CoreSchema

from inference_platform.config.base import Matches, config_problems
from inference_platform.platform.gpu_nodes import GpuNodes
from inference_platform.serving.analysis_spec import PayloadProtocol
from inference_platform.serving.gpu import VirtualGpu
from inference_platform.serving.lora import LoraLimits
from inference_platform.serving.model_spec import ModelSpecBase, ModelVersion
from inference_platform.serving.resources import ResourceList, Resources
from inference_platform.serving.runtimes.base import SCRATCH_PATH, Probes, ServerContainer, model_server_container
from inference_platform.serving.server_plan import ExampleRequest, MetricsEndpoint, ServerPlan

MODEL_DIR = "/mnt/models"
METRICS_PATH = "/metrics"
SHM_VOLUME = "shm"
# The images run as root; the engines need no privileges once their caches are writable.
RUN_AS_USER = 1000
# Under HAMi, CUDA reports the vGPU's memory cap as the device's total (HAMi-core hooks
# cuMemGetInfo), so the engine's memory share is a share of the cap. HAMi does not count CUDA
# context and NCCL buffers against the cap, so keep this much of the cap out of the engine's share.
CAP_RESERVE_MIB = 2048
# The share when the cap's size is unknown (a percentage of a GPU of unknown size).
CAP_SHARE_DEFAULT = 0.85
MIN_CAP_SHARE = 0.5
DEFAULT_RESOURCES = Resources(
    requests=ResourceList(cpu="2", memory="16Gi"),
    limits=ResourceList(cpu="8", memory="32Gi"),
)
# Caches (Hugging Face, torch.compile, Triton and FlashInfer kernels) go to the writable scratch volume.
CACHE_ENV = {"HOME": SCRATCH_PATH, "HF_HOME": f"{SCRATCH_PATH}/hf", "HF_HUB_OFFLINE": "1"}


class LLMEngineModel(ModelSpecBase):
    """An OpenAI-compatible LLM engine serving the model under the model's name."""

    INFERENCE_PATH: ClassVar[str] = "/v1/completions"  # OpenAI completions API
    PAYLOAD_PROTOCOL: ClassVar[PayloadProtocol] = "openai"
    ENGINE: ClassVar[str]
    """The engine's name in messages."""
    LORA_FLAGS: ClassVar[tuple[str, ...]]
    """The flags the platform sets from the versions' adapters and the model's LoRA limits."""
    LORA_RANKS: ClassVar[tuple[int, ...] | None] = None
    """The adapter ranks the engine accepts as its largest (None: any)."""
    BASE_MODEL_LORA_SLOTS: ClassVar[int] = 0
    """Adapter slots the engine keeps for the base model beside the adapters of a batch."""

    tensor_parallel_size: Annotated[int, Field(ge=1, le=16)] = Field(
        default=1,
        description="GPUs (or NPUs) one replica spreads the model over; must match the GPU (or NPU) count.",
    )
    max_model_len: Annotated[int, Field(ge=1)] | None = Field(
        default=None, description="Longest context (prompt and output) in tokens; the model's own when unset."
    )
    dtype: Literal["auto", "half", "float16", "bfloat16", "float", "float32"] = Field(
        default="auto", description="The weights' and activations' data type (--dtype)."
    )
    gpu_memory_utilization: Annotated[float, Field(gt=0, le=1)] | None = Field(
        default=None,
        description="Share of the device the engine takes (weights and KV cache); derived from a vGPU or vNPU "
        "memory cap when unset.",
    )
    shm_size: Annotated[str, Matches(r"^[0-9]+(Mi|Gi)$", "a whole number of Mi or Gi, such as 2Gi")] = Field(
        default="2Gi", description="Shared memory for the workers of tensor-parallel inference."
    )
    max_loras: Annotated[int, Field(ge=1)] | None = Field(
        default=None,
        description="LoRA adapters one batch serves at once, each a slot of GPU memory the engine reserves inside "
        "its share (vLLM --max-loras; SGLang --max-loras-per-batch, one more for the base model); at least the "
        "adapters of every version, which is the default.",
    )
    max_lora_rank: Annotated[int, Field(ge=1)] | None = Field(
        default=None,
        description="The largest rank of the adapters, which sizes every slot (--max-lora-rank); vLLM takes some ranks "
        "only (a config error lists them) and defaults to 16, where a larger adapter fails the start; SGLang "
        "reads it from the adapters when unset.",
    )

    @classmethod
    def __get_pydantic_json_schema__(cls, core_schema: CoreSchema, handler: GetJsonSchemaHandler) -> dict[str, Any]:
        """The JSON schema takes for maxLoraRank only the ranks the engine takes (LORA_RANKS), as
        lora_problems does."""
        schema = handler(core_schema)
        if cls.LORA_RANKS is not None:
            rank = handler.resolve_ref_schema(schema)["properties"]["maxLoraRank"]
            for branch in rank.get("anyOf", [rank]):
                if branch.get("type") == "integer":
                    branch["enum"] = list(cls.LORA_RANKS)
        return schema

    @model_validator(mode="after")
    def _needs_gpus(self) -> LLMEngineModel:
        problems = []
        if self.npu is not None:
            # An engine that cannot use NPUs is refused by ModelSpecBase (`npu`).
            if self.USES_NPUS:
                problems += self._parallel_problems() + self._npu_share_problems()
        elif self.gpu.mode == "none":
            problems.append(("gpu", f"{self.ENGINE} serves on GPUs: set gpu to exclusive, vgpu or shared"))
        elif self.gpu.mode == "shared" and self.gpu_memory_utilization is None:
            problems.append(
                (
                    "gpuMemoryUtilization",
                    f"with a shared GPU {self.ENGINE} would take most of the device from its neighbours: "
                    "set this model's share",
                )
            )
        else:
            problems += self._parallel_problems()
        if problems:
            raise config_problems(problems)
        return self

    def lora_problems(self) -> list[tuple[str, str]]:
        """The LoRA limits against the versions' adapters, and the flags they make the platform's."""
        most = self.most_adapters
        limits = {"maxLoras": self.max_loras, "maxLoraRank": self.max_lora_rank}
        if not most:
            return [
                (key, "no version lists adapters: drop this, or give a version adapters")
                for key, value in limits.items()
                if value is not None
            ]
        problems = []
        if self.max_loras is not None and self.max_loras < most:
            j, version = next((j, v) for j, v in enumerate(self.versions) if len(v.adapters) == most)
            problems.append(
                (
                    "maxLoras",
                    f"{self.max_loras} is fewer than the {most} adapters versions[{j}] ({version.name}) lists: "
                    f"set {most} or more (or leave it unset), so one batch can serve all of them",
                )
            )
        if self.LORA_RANKS is not None and self.max_lora_rank is not None and self.max_lora_rank not in self.LORA_RANKS:
            ranks = ", ".join(str(rank) for rank in self.LORA_RANKS)
            problems.append(
                (
                    "maxLoraRank",
                    f"{self.ENGINE} takes one of {ranks}: set the smallest of them at or above the adapters' "
                    "largest rank",
                )
            )
        given = [("args", i, a) for i, a in enumerate(self.args)]
        given += [
            (f"versions[{v}].args", i, a) for v, version in enumerate(self.versions) for i, a in enumerate(version.args)
        ]
        problems += [
            (
                f"{where}[{index}]",
                f"{arg.split('=')[0]} is set by the platform from the versions' adapters, maxLoras and "
                "maxLoraRank: set those instead",
            )
            for where, index, arg in given
            if arg.split("=")[0] in self.LORA_FLAGS
        ]
        return problems

    def lora_limits(self) -> LoraLimits | None:
        most = self.most_adapters
        if not most:
            return None
        batch = self.max_loras if self.max_loras is not None else most
        return LoraLimits(
            adapters=most, batch=batch, slots=batch + self.BASE_MODEL_LORA_SLOTS, max_rank=self.max_lora_rank
        )

    @property
    def lora_batch(self) -> int:
        """Adapters one batch serves at once: maxLoras, or the most any version lists."""
        return self.max_loras if self.max_loras is not None else self.most_adapters

    @abstractmethod
    def lora_args(self, version: ModelVersion) -> list[str]:
        """The engine's flags that load the version's adapters at start; none without adapters."""

    def adapter_model(self, adapter: str) -> str:
        """What a request puts in the OpenAI `model` field to be served by `adapter`."""
        return adapter

    @property
    def device_noun(self) -> str:
        """What a pod's devices are called in messages."""
        return "NPU" if self.npu is not None else "GPU"

    def _parallel_problems(self) -> list[tuple[str, str]]:
        """Tensor parallelism spans the pod's GPUs (or NPUs)."""
        count = self.accelerator_count
        if count is not None and count != self.tensor_parallel_size:
            return [
                (
                    "tensorParallelSize",
                    f"is {self.tensor_parallel_size} but each pod gets {count} {self.device_noun}(s): make them equal",
                )
            ]
        return []

    def _npu_share_problems(self) -> list[tuple[str, str]]:
        """Under soft slicing a share set by hand must stay inside the vNPU's memory."""
        ceiling = self._soft_vnpu_ceiling()
        if ceiling is None or self.gpu_memory_utilization is None or self.gpu_memory_utilization <= ceiling:
            return []
        assert self.npu is not None
        return [
            (
                "gpuMemoryUtilization",
                f"{self.gpu_memory_utilization} is more than the vNPU's share of its card: under soft slicing the "
                f"card reports all its {self.npu.chip.memory_capacity_mib} MiB, and the vNPU holds "
                f"{self.npu.memory_mib} MiB ({ceiling:.4f}): set {ceiling:.2f} or less, or leave it unset",
            )
        ]

    def _soft_vnpu_ceiling(self) -> float | None:
        """A soft-sliced vNPU's memory over its card's: the most the engine may take."""
        npu = self.npu
        if npu is None or npu.mode != "vnpu" or npu.slicing != "soft" or npu.memory_mib is None:
            return None
        return npu.memory_mib / npu.chip.memory_capacity_mib

    def memory_utilization(self, gpu_nodes: GpuNodes) -> float | None:
        """The engine's memory share: as set, or sized to a vGPU's or vNPU's memory cap so the
        engine stays inside it."""
        if self.gpu_memory_utilization is not None:
            return self.gpu_memory_utilization
        if self.npu is not None:
            return self._npu_memory_utilization()
        if not isinstance(self.gpu, VirtualGpu) or not self.gpu.memory_capped:
            return None  # whole devices: the engine's own default
        cap = self.gpu.memory_cap_mib(gpu_nodes)
        if cap is None:
            return CAP_SHARE_DEFAULT
        return _share_of_cap(cap)

    def _npu_memory_utilization(self) -> float | None:
        """A template vNPU is a card of the template's memory to the engine, as a vGPU is one of its
        cap: the same share. A soft-sliced vNPU shows the whole card: the vNPU's memory, less the
        reserve (or half the vNPU when that is less), over the card's: never more than the vNPU's
        memory over the card's (ascend-device-plugin docs/hami.md). Whole NPUs: the engine's own
        default."""
        npu = self.npu
        assert npu is not None
        template = npu.template
        if template is not None:
            return _share_of_cap(template.memory_mib)
        ceiling = self._soft_vnpu_ceiling()
        if ceiling is None or npu.memory_mib is None:
            return None
        usable = max(npu.memory_mib - CAP_RESERVE_MIB, npu.memory_mib * MIN_CAP_SHARE)
        return max(0.01, math.floor(usable / npu.chip.memory_capacity_mib * 100) / 100)

    def engine_plan(
        self,
        version: ModelVersion,
        *,
        image: str,
        command: list[str],
        args: list[str],
        env: dict[str, str],
        probes: Probes,
    ) -> ServerPlan:
        """The engine's pod: its container with the model mounted, caches in scratch, shared memory;
        it serves its API and metrics on its one port, `http`."""
        server = ServerContainer(
            image=image,
            resources=DEFAULT_RESOURCES,
            model_dir=MODEL_DIR,
            probes=probes,
            command=command,
            args=args,
            env=CACHE_ENV | env,
            mounts=[{"name": SHM_VOLUME, "mountPath": "/dev/shm"}],
        )
        port = self.SERVER_PORTS["http"]
        return ServerPlan(
            container=model_server_container(self, version, server),
            config_files={},
            http_port=port,
            metrics=MetricsEndpoint(port, METRICS_PATH),
            run_as_user=RUN_AS_USER,
            volumes=({"name": SHM_VOLUME, "emptyDir": {"medium": "Memory", "sizeLimit": self.shm_size}},),
        )

    def example_request(self) -> ExampleRequest:
        return self._completion(self.name)

    def adapter_request(self, adapter: str) -> ExampleRequest:
        return self._completion(self.adapter_model(adapter))

    def _completion(self, model: str) -> ExampleRequest:
        return ExampleRequest(
            path=self.inference_path, body={"model": model, "prompt": "The capital of France is", "max_tokens": 16}
        )


def _share_of_cap(cap_mib: int) -> float:
    """The share of a device whose whole memory is the cap, keeping the reserve out of it."""
    share = math.floor((cap_mib - CAP_RESERVE_MIB) / cap_mib * 100) / 100
    return max(MIN_CAP_SHARE, share)
