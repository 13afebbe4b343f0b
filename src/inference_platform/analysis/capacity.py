"""How many GPUs a stack holds, from its typed config alone: at every version's minimum replicas
(a version asleep at zero holds none), awake (one pod of every version that sleeps, the minimum of
the others) and at its peak (the autoscaler's maximum), against the GPUs the cluster declares.

- `exclusive`: each pod holds `count` whole GPUs; a multi-node replica (vLLM's `nodes`) is that
  many pods, each on a node of its own.
- `vgpu`: each pod holds `count` slices, each with a memory share of one GPU (`memoryMib` of
  `platform.gpuNodes.memoryMib`, or `memoryPercent`; uncapped: the whole GPU's memory, HAMi's
  default) and a core share (`cores` percent; uncapped: none reserved, HAMi's default).
- `shared`: listed, but holds no share anyone accounts for (the scheduler does not know of it).

vGPU slices are packed onto physical GPUs first-fit decreasing, the way HAMi's scheduler can place
them: memory within one GPU's (times `deviceMemoryScaling`), cores within 100 % (times
`deviceCoreScaling`), at most `deviceSplitCount` slices a GPU, and the slices of one pod on
distinct GPUs. That is an estimate, not a schedule: a real scheduler may pack tighter, or fail
through fragmentation across nodes.

Ascend NPUs (`npu`) are counted apart, per chip type, against `platform.npuNodes.pools`:
- `exclusive`: `count` whole cards a pod (a multi-node replica: per pod of the group).
- `vnpu` with template (hard) slicing: what HAMi gives, not what was asked: the memory request
  rounded up to the first template that holds it (`platform/ascend.py`), a whole card when none
  does or none is asked; packed by the template's memory, AI cores and AI CPUs.
- `vnpu` with soft slicing: the exact memory (of the card's allocatable memory) and `cores` percent.

LoRA adapters (vLLM, SGLang) hold no devices of their own: each pod of a version with adapters
reserves `slots` adapter slots inside the engine's memory share, which its KV cache loses. The plan
says how many, per pod; their size follows the base model's architecture, which no config holds, so
it is not counted (a note says so).

The node-local model cache (`platform.modelCache`, docs/model-cache.md) is a plan of bytes, not of
devices: what each kind of cache node holds (every cached version of its kind's models, with their
downloaded adapters, at their `downloadSize`) against `size`. Nothing is planned when the cache is off.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any, Literal

from inference_platform.config.base import quantity_sum, quantity_value
from inference_platform.platform.ascend import CHIPS
from inference_platform.platform.gpu_nodes import GpuNodes
from inference_platform.platform.hami import Sharing
from inference_platform.platform.model_cache import ModelCacheConfig, NodeKind
from inference_platform.platform.npu_nodes import NpuNodes
from inference_platform.serving.cached_files import cache_contents
from inference_platform.serving.gpu import ExclusiveGpu, GpuSpec, NoGpu, SharedGpu, VirtualGpu
from inference_platform.serving.lora import LoraLimits
from inference_platform.serving.model_spec import ModelSpecBase
from inference_platform.serving.npu import NpuSpec

Mode = Literal["none", "exclusive", "vgpu", "shared", "vnpu"]


@dataclass(frozen=True)
class Slice:
    memory: Fraction
    """Share of one GPU's memory."""
    cores: Fraction
    """Share of one GPU's cores."""
    cpus: Fraction = Fraction(0)
    """Share of one NPU's AI CPUs (a hard vNPU template's); GPUs have none."""


@dataclass
class Gpu:
    memory: Fraction = Fraction(0)
    cores: Fraction = Fraction(0)
    cpus: Fraction = Fraction(0)
    pods: list[int] = field(default_factory=list)
    whole: bool = False
    """Held whole by one pod (`exclusive`): nothing else goes on it."""

    def fits(self, piece: Slice, pod: int, sharing: Sharing) -> bool:
        return (
            not self.whole
            and pod not in self.pods
            and len(self.pods) < sharing.split_count
            and self.memory + piece.memory <= sharing.memory_scaling
            and self.cores + piece.cores <= sharing.core_scaling
            and self.cpus + piece.cpus <= 1
        )

    def take(self, piece: Slice, pod: int) -> None:
        self.memory += piece.memory
        self.cores += piece.cores
        self.cpus += piece.cpus
        self.pods.append(pod)

    @property
    def load(self) -> tuple[Fraction, Fraction, int]:
        """What HAMi's spread policy ranks a GPU by, least first: its memory, cores and slices in use."""
        return self.memory, self.cores, len(self.pods)


def slice_of(spec: VirtualGpu, nodes: GpuNodes) -> Slice:
    if spec.memory_percent is not None:
        memory = Fraction(spec.memory_percent, 100)
    elif spec.memory_mib is not None and nodes.memory_mib:
        memory = Fraction(spec.memory_mib, nodes.memory_mib)
    elif spec.memory_mib is not None:
        memory = Fraction(1)  # the GPU's size unknown: count the slice as a whole GPU (an upper bound)
    else:
        memory = Fraction(1)
    return Slice(memory=min(memory, Fraction(1)), cores=Fraction(spec.cores or 0, 100))


def npu_slice(spec: NpuSpec) -> Slice | None:
    """The share of one card a vNPU holds; None for whole cards."""
    chip = spec.chip
    if spec.mode != "vnpu":
        return None
    if spec.slicing == "soft":
        memory = Fraction(spec.memory_mib, chip.memory_allocatable_mib) if spec.memory_mib else Fraction(1)
        return Slice(memory=min(memory, Fraction(1)), cores=Fraction(spec.cores or 0, 100))
    template = spec.template
    if template is None:
        return None  # no memory asked, or more than every template holds: a whole card
    # A template holds AI CPUs too where the chip has them (910B2: 6, vir03_1c_8g takes 1).
    cpus = Fraction(template.ai_cpu or 0, chip.ai_cpu) if chip.ai_cpu else Fraction(0)
    return Slice(
        memory=Fraction(template.memory_mib, chip.memory_capacity_mib),
        cores=Fraction(template.ai_core, chip.ai_core),
        cpus=cpus,
    )


def _decreasing(pods: Sequence[tuple[int, Slice]]) -> list[int]:
    return sorted(range(len(pods)), key=lambda i: (pods[i][1].memory, pods[i][1].cores, pods[i][0]), reverse=True)


def layout(pods: Sequence[tuple[int, Slice]], sharing: Sharing) -> list[Gpu]:
    """Physical GPUs for vGPU pods, each given as (slice count, slice), packed tightly: first-fit
    decreasing (HAMi's binpack policy, with no node boundaries)."""
    gpus: list[Gpu] = []
    for pod in _decreasing(pods):
        count, piece = pods[pod]
        for _ in range(count):
            target = next((gpu for gpu in gpus if gpu.fits(piece, pod, sharing)), None)
            if target is None:
                target = Gpu()
                gpus.append(target)
            target.take(piece, pod)
    return gpus


def pack(pods: Sequence[tuple[int, Slice]], sharing: Sharing) -> int:
    """How many physical GPUs (or cards) `layout` uses."""
    return len(layout(pods, sharing))


def spread_layout(
    whole: Sequence[int], pods: Sequence[tuple[int, Slice]], sharing: Sharing, per_node: int
) -> tuple[list[list[Gpu]], list[Gpu]]:
    """GPU pods placed the way HAMi 2.10's scheduler places them by default (its chart's
    `defaultSchedulerPolicy`: nodes `binpack`, GPUs `spread`), on nodes of `per_node` GPUs: each
    pod, largest first (pods of whole GPUs, then slices by size), on the fullest node where all
    of it fits, each of its slices on the least-loaded GPU of that node that holds it, a pod's
    slices on distinct GPUs. Returns the nodes, and the GPUs holding slices."""
    order = _decreasing(pods)
    demands: list[tuple[int, Slice, bool]] = [(count, Slice(Fraction(1), Fraction(1)), True) for count in whole]
    demands += [(pods[i][0], pods[i][1], False) for i in order]
    nodes: list[list[Gpu]] = []
    for pod, (count, piece, exclusive) in enumerate(demands):
        fullest = sorted(nodes, key=lambda node: sum(gpu.memory for gpu in node), reverse=True)
        chosen = next((c for node in fullest if (c := _spread_onto(node, count, piece, pod, sharing, exclusive))), None)
        if chosen is None:
            nodes.append([Gpu() for _ in range(max(per_node, count))])
            chosen = _spread_onto(nodes[-1], count, piece, pod, sharing, exclusive) or []
        for gpu in chosen:
            gpu.take(piece, pod)
            gpu.whole = exclusive
    sliced = [gpu for node in nodes for gpu in node if gpu.pods and not gpu.whole]
    for gpu in sliced:  # back to the caller's pod numbers
        gpu.pods = [order[pod - len(whole)] for pod in gpu.pods]
    return nodes, sliced


def _spread_onto(  # noqa: PLR0917 (the one pod's fields)
    node: list[Gpu], count: int, piece: Slice, pod: int, sharing: Sharing, exclusive: bool
) -> list[Gpu] | None:
    """The GPUs of `node` a pod's `count` slices go to, least loaded first; None where they do not fit."""
    free = [gpu for gpu in node if (not gpu.pods if exclusive else gpu.fits(piece, pod, sharing))]
    if len(free) < count:
        return None
    return sorted(free, key=lambda gpu: gpu.load)[:count]


STAGES = ("min", "awake", "peak")


@dataclass(frozen=True)
class ModelPlan:
    mode: Mode
    min: float
    """Whole-GPU equivalents at the minimum replicas (vGPU: memory shares of one GPU); 0 while asleep."""
    awake: float
    """With one pod of every version that sleeps at zero awake (the others at their minimum)."""
    peak: float
    device: str | None = None
    """The NPU type of an Ascend model (its mode is then exclusive or vnpu); None for GPUs."""
    lora: LoraLimits | None = None
    """What its LoRA adapters take in each pod that serves them; None without adapters."""

    def as_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"mode": self.mode, "min": self.min, "awake": self.awake, "peak": self.peak}
        if self.device is not None:
            out["device"] = self.device
        if self.lora is not None:
            out["lora"] = {
                "adapters": self.lora.adapters,
                "maxLoras": self.lora.batch,
                "slotsPerPod": self.lora.slots,
                "maxLoraRank": self.lora.max_rank,
            }
        return out


@dataclass(frozen=True)
class DevicePlan:
    """The NPUs of one type the models hold, against those the cluster declares."""

    min: int
    awake: int
    peak: int
    declared: int | None

    def fits(self, stage: str) -> bool | None:
        return None if self.declared is None else int(getattr(self, stage)) <= self.declared

    def as_json(self) -> dict[str, Any]:
        return {
            "min": self.min,
            "awake": self.awake,
            "peak": self.peak,
            "declared": self.declared,
            "fits": {stage: self.fits(stage) for stage in STAGES},
        }

    def headline(self, device: str) -> str:
        of = f" of {self.declared} declared" if self.declared is not None else " (none declared)"
        return f"NPUs {device}: {self.min} at minimum replicas, {self.awake} awake, {self.peak} at peak{of}"


@dataclass(frozen=True)
class CacheNodePlan:
    """What each cache node of one kind holds (platform.modelCache): every cached version of its
    kind's models and their downloaded adapters, at their downloadSize, against `size`."""

    kind: NodeKind
    size: str
    held: tuple[tuple[str, str], ...] = ()
    """(model/version, or its adapter, downloadSize), in the stack's order."""

    @property
    def total(self) -> str:
        """The held sizes added up, as a quantity (0 when nothing is cached)."""
        return quantity_sum([size for _, size in self.held]) if self.held else "0"

    @property
    def bytes(self) -> int:
        return math.ceil(sum((quantity_value(size) for _, size in self.held), start=Fraction(0)))

    @property
    def size_bytes(self) -> int:
        return math.ceil(quantity_value(self.size))

    @property
    def fits(self) -> bool:
        return self.bytes <= self.size_bytes

    def as_json(self) -> dict[str, Any]:
        return {
            "bytes": self.bytes,
            "sizeBytes": self.size_bytes,
            "held": self.total,
            "size": self.size,
            "fits": self.fits,
            "versions": [{"name": name, "downloadSize": size} for name, size in self.held],
        }

    def headline(self) -> str:
        percent = f" ({100 * self.bytes / self.size_bytes:.0f}%)" if self.size_bytes else ""
        return f"Model cache: each {self.kind.upper()} cache node holds {self.total} of {self.size}{percent}"


def cache_plan(models: Sequence[ModelSpecBase], cache: ModelCacheConfig) -> tuple[CacheNodePlan, ...]:
    """Each kind of cache node's bytes against the cache's size; none when the cache is off."""
    if not cache.enabled or cache.size is None:
        return ()
    contents = cache_contents(models)
    return tuple(CacheNodePlan(kind, str(cache.size), tuple(contents.get(kind, []))) for kind in cache.kinds)


@dataclass(frozen=True)
class Plan:
    gpus_min: int
    gpus_awake: int
    gpus_peak: int
    declared: int | None
    models: dict[str, ModelPlan]
    notes: tuple[str, ...] = ()
    npus: dict[str, DevicePlan] = field(default_factory=dict)
    """Ascend NPUs by type, apart from GPUs; empty when no model uses them."""
    rows: tuple[Row, ...] = ()
    """Each version's whole devices or slices: with the packings, what adds up to the headlines."""
    packings: tuple[Packing, ...] = ()
    """How the slices of each kind of device pack onto devices (GPUs first, then each NPU type)."""
    cache: tuple[CacheNodePlan, ...] = ()
    """Each kind of cache node's bytes (platform.modelCache); empty when the cache is off."""

    @property
    def fits_min(self) -> bool | None:
        return None if self.declared is None else self.gpus_min <= self.declared

    @property
    def fits_awake(self) -> bool | None:
        return None if self.declared is None else self.gpus_awake <= self.declared

    @property
    def fits_peak(self) -> bool | None:
        return None if self.declared is None else self.gpus_peak <= self.declared

    def as_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "gpus": {"min": self.gpus_min, "awake": self.gpus_awake, "peak": self.gpus_peak},
            "declared": self.declared,
            "fits": {"min": self.fits_min, "awake": self.fits_awake, "peak": self.fits_peak},
            "models": {name: plan.as_json() for name, plan in self.models.items()},
        }
        if self.npus:
            out["npus"] = {device: npus.as_json() for device, npus in self.npus.items()}
        if self.cache:
            out["modelCache"] = {nodes.kind: nodes.as_json() for nodes in self.cache}
        return out

    def report_json(self) -> dict[str, Any]:
        """as_json (the stack output `capacity`), with each version's row and each packing: per unit
        and stage, the rows' devices and the packings' add up to the headline's."""
        return self.as_json() | {
            "rows": [row.as_json() for row in self.rows],
            "packings": [packing.as_json() for packing in self.packings],
        }

    def headline(self) -> str:
        of = f" of {self.declared} declared" if self.declared is not None else " (no GPUs declared)"
        lines = [f"GPUs: {self.gpus_min} at minimum replicas, {self.gpus_awake} awake, {self.gpus_peak} at peak{of}"]
        lines += [npus.headline(device) for device, npus in self.npus.items()]
        lines += [nodes.headline() for nodes in self.cache]
        return "\n".join(lines)


def replicas(model: ModelSpecBase, version: Any) -> tuple[int, int, int]:
    """(minimum, awake, peak) pods of a version: the autoscaler's bounds (awake: one pod, for a
    version that sleeps at zero), or its fixed replicas."""
    scaling = model.version_autoscaling(version)
    if scaling.enabled:
        return scaling.min_replicas, max(scaling.min_replicas, 1), scaling.max_replicas
    fixed = model.fixed_replicas(version)
    return fixed, fixed, fixed


@dataclass(frozen=True)
class Row:
    """One version's devices at each stage: whole ones, or slices (counted where they are packed)."""

    model: str
    version: str
    mode: Mode
    unit: str
    """GPU, CPU (a model on no accelerator), or the NPU type."""
    whole: tuple[int, int, int]
    """Whole devices at minimum, awake and peak."""
    slices: tuple[int, int, int] = (0, 0, 0)
    """Slices at minimum, awake and peak, each `share` of a device."""
    share: Slice | None = None

    def as_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "model": self.model,
            "version": self.version,
            "mode": self.mode,
            "unit": self.unit,
            "devices": dict(zip(STAGES, self.whole, strict=True)),
        }
        if self.share is not None:
            out["slices"] = dict(zip(STAGES, self.slices, strict=True))
            out["slice"] = {"memoryPercent": _percent(self.share.memory), "coresPercent": _percent(self.share.cores)}
        return out

    @property
    def slice_label(self) -> str:
        """'50% memory, 30% cores' of one slice; '' for whole devices."""
        if self.share is None:
            return ""
        return f"{_percent(self.share.memory):g}% memory, {_percent(self.share.cores):g}% cores"


def _percent(share: Fraction) -> float:
    return round(float(share * 100), 2)


@dataclass(frozen=True)
class Packing:
    """Slices of one kind of device packed onto physical devices: at each stage, each device's
    slices by the version that holds them (`model/version`)."""

    unit: str
    policy: str
    devices: dict[str, tuple[tuple[str, ...], ...]]

    def count(self, stage: str) -> int:
        return len(self.devices[stage])

    def as_json(self) -> dict[str, Any]:
        return {
            "unit": self.unit,
            "policy": self.policy,
            "devices": {stage: self.count(stage) for stage in STAGES},
            "layout": {stage: [list(device) for device in self.devices[stage]] for stage in STAGES},
        }


def _occupants(gpus: Sequence[Gpu], labels: Sequence[str]) -> tuple[tuple[str, ...], ...]:
    return tuple(tuple(labels[pod] for pod in gpu.pods) for gpu in gpus)


def npu_plan(
    models: Sequence[ModelSpecBase], nodes: NpuNodes
) -> tuple[dict[str, DevicePlan], dict[str, ModelPlan], list[Row], list[Packing]]:
    """The NPUs of each type the Ascend models hold, each model's share, each version's row, and
    how each type's vNPUs pack onto cards."""
    whole: dict[str, dict[str, int]] = {}
    virtual: dict[str, dict[str, list[tuple[int, Slice]]]] = {}
    labels: dict[str, dict[str, list[str]]] = {}
    per_model: dict[str, ModelPlan] = {}
    rows: list[Row] = []
    for model in models:
        spec = model.npu
        if spec is None:
            continue
        kind = whole.setdefault(spec.type, dict.fromkeys(STAGES, 0))
        slices = virtual.setdefault(spec.type, {stage: [] for stage in STAGES})
        names = labels.setdefault(spec.type, {stage: [] for stage in STAGES})
        piece = npu_slice(spec)
        mode: Mode = "vnpu" if spec.mode == "vnpu" else "exclusive"
        totals = dict.fromkeys(STAGES, Fraction(0))
        for version in model.versions:
            counts = [groups * model.group_size for groups in replicas(model, version)]
            for key, pods in zip(STAGES, counts, strict=True):
                if piece is None:
                    kind[key] += pods * spec.count
                    totals[key] += pods * spec.count
                else:
                    slices[key] += [(spec.count, piece)] * pods
                    names[key] += [f"{model.name}/{version.name}"] * pods
                    totals[key] += pods * spec.count * max(piece.memory, piece.cores)
            if piece is None:
                rows.append(Row(model.name, version.name, mode, spec.type, _triple(c * spec.count for c in counts)))
            else:
                sliced = _triple(c * spec.count for c in counts)
                rows.append(Row(model.name, version.name, mode, spec.type, (0, 0, 0), sliced, piece))
        low, awake, peak = (round(float(totals[stage]), 2) for stage in STAGES)
        per_model[model.name] = ModelPlan(mode, low, awake, peak, device=spec.type, lora=model.lora_limits())
    devices = {}
    packings = []
    for device in sorted(whole):
        # At most one vNPU per AI core on a card: the smallest template takes at least one.
        chip_sharing = Sharing(split_count=CHIPS[device].ai_core)
        cards = {stage: layout(virtual[device][stage], chip_sharing) for stage in STAGES}
        low, awake, peak = (whole[device][stage] + len(cards[stage]) for stage in STAGES)
        pool = nodes.pool(device)
        devices[device] = DevicePlan(low, awake, peak, declared=None if pool is None else pool.declared)
        if any(virtual[device][stage] for stage in STAGES):
            packings.append(
                Packing(
                    device,
                    "binpack",
                    {stage: _occupants(cards[stage], labels[device][stage]) for stage in STAGES},
                )
            )
    return devices, per_model, rows, packings


def _triple(values: Any) -> tuple[int, int, int]:
    low, awake, peak = values
    return int(low), int(awake), int(peak)


GPU = "GPU"
CPU = "CPU"
"""A row's unit for a model that asks for no accelerator (gpu.mode none): it holds none to count."""


def device_unit(spec: GpuSpec) -> str:
    """The kind of device a GPU model's row is in: a GPU, or the CPU for one that asks for none."""
    return CPU if isinstance(spec, NoGpu) else GPU


def plan(
    models: Sequence[ModelSpecBase],
    nodes: GpuNodes,
    sharing: Sharing,
    declared: int | None,
    npu_nodes: NpuNodes | None = None,
    *,
    model_cache: ModelCacheConfig | None = None,
) -> Plan:
    whole: dict[str, list[int]] = {stage: [] for stage in STAGES}
    """Each pod's whole GPUs, per stage."""
    virtual: dict[str, list[tuple[int, Slice]]] = {stage: [] for stage in STAGES}
    labels: dict[str, list[str]] = {stage: [] for stage in STAGES}
    per_model: dict[str, ModelPlan] = {}
    rows: list[Row] = []
    notes: list[str] = []
    npus, npu_models, npu_rows, packings = npu_plan(models, npu_nodes or NpuNodes())
    for model in models:
        if model.npu is not None:
            per_model[model.name] = npu_models[model.name]
            continue
        spec = model.gpu
        totals = dict.fromkeys(STAGES, Fraction(0))
        for version in model.versions:
            # A multi-node replica is a group of pods, each on its node.
            counts = [groups * model.group_size for groups in replicas(model, version)]
            for key, pods in zip(STAGES, counts, strict=True):
                if isinstance(spec, ExclusiveGpu):
                    whole[key] += [spec.count] * pods
                    totals[key] += pods * spec.count
                elif isinstance(spec, VirtualGpu):
                    piece = slice_of(spec, nodes)
                    virtual[key] += [(spec.count, piece)] * pods
                    labels[key] += [f"{model.name}/{version.name}"] * pods
                    totals[key] += pods * spec.count * piece.memory
            if isinstance(spec, VirtualGpu):
                sliced = _triple(c * spec.count for c in counts)
                rows.append(Row(model.name, version.name, spec.mode, GPU, (0, 0, 0), sliced, slice_of(spec, nodes)))
            else:
                held = _triple(c * spec.count for c in counts) if isinstance(spec, ExclusiveGpu) else (0, 0, 0)
                rows.append(Row(model.name, version.name, spec.mode, device_unit(spec), held))
        if isinstance(spec, SharedGpu):
            notes.append(f"{model.name} shares GPUs outside the scheduler (gpu: shared): not counted")
        if isinstance(spec, VirtualGpu) and spec.memory_mib is not None and not nodes.memory_mib:
            notes.append(f"{model.name}: GPU memory unknown (platform.gpuNodes.memoryMib), each vGPU counted whole")
        low, awake, peak = (round(float(totals[stage]), 2) for stage in STAGES)
        per_model[model.name] = ModelPlan(spec.mode, low, awake, peak, lora=model.lora_limits())
    notes += [lora_note(name, plan.lora) for name, plan in per_model.items() if plan.lora is not None]
    sliced_gpus = {stage: _sliced_gpus(whole[stage], virtual[stage], sharing, nodes.gpus_per_node) for stage in STAGES}
    if any(virtual.values()):
        policy = "binpack" if nodes.gpus_per_node is None else f"spread on nodes of {nodes.gpus_per_node}"
        packings.insert(0, Packing(GPU, policy, {s: _occupants(sliced_gpus[s], labels[s]) for s in STAGES}))
        if nodes.gpus_per_node is None:
            notes.append(
                "vGPU slices packed as tightly as they fit, a lower bound: HAMi's default policy spreads a node's "
                "slices over its GPUs, which takes more of them; set platform.gpuNodes.gpusPerNode to count that"
            )
    gpus = {stage: sum(whole[stage]) + len(sliced_gpus[stage]) for stage in STAGES}
    return Plan(
        gpus_min=gpus["min"],
        gpus_awake=gpus["awake"],
        gpus_peak=gpus["peak"],
        declared=declared,
        models=per_model,
        notes=tuple(notes),
        npus=npus,
        rows=tuple(rows + npu_rows),
        packings=tuple(packings),
        cache=cache_plan(models, model_cache) if model_cache is not None else (),
    )


def _sliced_gpus(
    whole: Sequence[int], pods: Sequence[tuple[int, Slice]], sharing: Sharing, per_node: int | None
) -> list[Gpu]:
    """The GPUs that hold vGPU slices: packed tightly without node sizes, else as HAMi places them."""
    if not pods:
        return []
    if per_node is None:
        return layout(pods, sharing)
    return spread_layout(whole, pods, sharing, per_node)[1]


def lora_note(model: str, lora: LoraLimits) -> str:
    """What a model's adapters add to each of its pods, and what the plan cannot count."""
    rank = f"of rank up to {lora.max_rank}" if lora.max_rank is not None else "of the engine's rank (maxLoraRank unset)"
    return (
        f"{model}: {lora.slots} LoRA adapter slot(s) per pod {rank}, for up to {lora.batch} adapter(s) a batch, "
        "reserved inside the engine's GPU memory share (its KV cache is that much smaller); their size follows the "
        "model's architecture: not counted"
    )
