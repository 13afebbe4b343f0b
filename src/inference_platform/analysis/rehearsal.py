"""What a rehearsal decides, without a cluster (docs/rehearsal.md): the fake nodes a stack's
declarations make, how the scheduler's placement compares with the capacity plan, the outcome,
and the report a person reads in a pull request (Markdown) and CI reads (JSON).

The command (cli/rehearsal/) reads the cluster and runs the engine; everything it decides from
what it read is here, as pure functions of data."""

from __future__ import annotations

import base64
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from enum import Enum
from typing import Any

from pydantic_core import PydanticCustomError

from inference_platform.analysis.capacity import Plan
from inference_platform.config.base import quantity_value
from inference_platform.platform.ascend import CHIPS
from inference_platform.platform.gpu_nodes import GPU_RESOURCE, GpuNodes, Toleration
from inference_platform.platform.hami import (
    GPU_CORES_RESOURCE,
    GPU_MEMORY_PERCENT_RESOURCE,
    GPU_MEMORY_RESOURCE,
    HAMI_NODE_LABEL,
)
from inference_platform.platform.npu_nodes import NpuNodes

ASSUMED_DEVICES_PER_NODE = 8
"""GPUs (or NPUs) on each node, where the stack declares none (gpusPerNode, a pool's npusPerNode)."""
CPU_NODES = 3
NODE_CPU = "64"
NODE_MEMORY = "512Gi"
NODE_EPHEMERAL_STORAGE = "2Ti"
NODE_PODS = "250"
FAKE_NODE_ANNOTATION = "kwok.x-k8s.io/node"
ZONE_LABEL = "topology.kubernetes.io/zone"
SLICE_RESOURCES = frozenset({GPU_MEMORY_RESOURCE, GPU_MEMORY_PERCENT_RESOURCE, GPU_CORES_RESOURCE})
"""What a pod asks HAMi's scheduler for (with Ascend's -memory and -core): no default scheduler places it."""
MODEL_LABEL = "app.kubernetes.io/name"
"""A model's name on its pods (and its LeaderWorkerSets), with PREDICTOR as their component."""
PREDICTOR = {"app.kubernetes.io/component": "predictor", "app.kubernetes.io/part-of": "inference-platform"}

CANNOT_SHOW = (
    "kubelets: no container runs, no image is pulled, no probe is called; KWOK marks every bound pod Running and Ready",
    "GPUs and NPUs: a fake node's nvidia.com/gpu and Ascend resources are numbers the scheduler counts, nothing more",
    "the charts' controllers and webhooks (Istio's, KEDA's, LeaderWorkerSet's, prometheus-adapter's, HAMi's): their "
    "pods are placed but never run, so no sidecar is injected, no HPA is made from a ScaledObject, no "
    "LeaderWorkerSet makes its pods; the API server's webhook admission plugins are off, as if every webhook failed "
    "open before its server runs",
    "HAMi's scheduler: a pod asking for vGPU or vNPU slices (nvidia.com/gpumem, gpucores, Ascend's -memory and "
    "-core) is left to it, Pending here; the capacity plan's packing of slices is not checked",
    "the network: NetworkPolicies are stored, never enforced; aggregated APIs (metrics) never answer",
)


class Outcome(Enum):
    PASSED = "passed"
    FAILED = "failed"
    """A step failed: preview, up, the second up (changes), destroy (something left)."""
    PODS_PENDING = "pods pending"
    """Every step passed; the scheduler left pods Pending, as the capacity plan says it must."""
    PLACEMENT_DISAGREES = "placement disagrees"
    """The scheduler and the capacity plan disagree: a pod the plan fits is Pending, or the reverse."""
    INTERRUPTED = "interrupted"


# --- Fake nodes ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class NodeGroup:
    """Nodes of one shape: `count` of them, each with `resources` besides CPU and memory."""

    role: str
    """gpu, npu-<chip> or cpu: the nodes' names start with it."""
    count: int
    labels: Mapping[str, str]
    taints: tuple[Mapping[str, str], ...] = ()
    resources: Mapping[str, str] = field(default_factory=dict)
    declared: int | None = None
    """The count the stack declares (None: assumed, a note says so)."""

    @property
    def devices(self) -> int:
        return sum(int(v) for k, v in self.resources.items() if k == GPU_RESOURCE or k.startswith("huawei.com/"))


def taints(tolerations: Sequence[Toleration]) -> tuple[dict[str, str], ...]:
    """The taints a node group has for its pods' tolerations: one each, with its key (an Exists
    toleration without a key tolerates anything: no taint), Equal's value, its effect (NoSchedule
    where it names none)."""
    out = []
    for toleration in tolerations:
        if toleration.key is None:
            continue
        taint = {"key": toleration.key, "effect": toleration.effect or "NoSchedule"}
        if toleration.operator == "Equal" and toleration.value is not None:
            taint["value"] = toleration.value
        out.append(taint)
    return tuple(out)


@dataclass(frozen=True)
class NodeRequest:
    """What to rehearse with: the declared nodes, or fewer (as when a node is lost)."""

    gpu_nodes: int | None = None
    npu_nodes: Mapping[str, int] = field(default_factory=dict)
    cpu_nodes: int = CPU_NODES


def node_groups(
    plan: Plan, gpu: GpuNodes, npu: NpuNodes | None, hami: bool, request: NodeRequest
) -> tuple[list[NodeGroup], list[str]]:
    """The fake node groups for a stack, and a note for each count assumed (not declared) or
    overridden. GPU nodes exist where the stack declares them or a model uses GPUs."""
    notes: list[str] = []
    groups = [NodeGroup("cpu", request.cpu_nodes, {})]
    gpu_models = [m for m in plan.models.values() if m.device is None and m.mode in {"exclusive", "vgpu", "shared"}]
    if gpu.count is not None or gpu_models or request.gpu_nodes is not None:
        per_node = gpu.gpus_per_node or ASSUMED_DEVICES_PER_NODE
        count = gpu.count
        if count is None:
            count = max(1, math.ceil(plan.gpus_min / per_node))
            notes.append(
                f"platform.gpuNodes declares no count: rehearsed with {count} GPU node(s) of {per_node} GPUs, "
                f"enough for the plan's {plan.gpus_min} at minimum replicas"
            )
        if request.gpu_nodes is not None:
            notes.append(
                f"--gpu-nodes {request.gpu_nodes}: {request.gpu_nodes} GPU node(s) where the stack has {count}"
            )
        labels = dict(gpu.node_selector) | (HAMI_NODE_LABEL if hami else {})
        groups.append(
            NodeGroup(
                "gpu",
                count if request.gpu_nodes is None else request.gpu_nodes,
                labels,
                taints(gpu.tolerations),
                {GPU_RESOURCE: str(per_node)},
                declared=gpu.count,
            )
        )
    groups += _npu_groups(plan, npu, request, notes)
    unknown = set(request.npu_nodes) - {g.role.removeprefix("npu-") for g in groups}
    notes += [f"--npu-nodes {chip}: the stack has no {chip} nodes; ignored" for chip in sorted(unknown)]
    return groups, notes


def _npu_groups(plan: Plan, npu: NpuNodes | None, request: NodeRequest, notes: list[str]) -> list[NodeGroup]:
    if npu is None:
        return []
    pools: dict[str, tuple[int, int]] = {str(pool.type): (pool.count, pool.npus_per_node) for pool in npu.pools}
    for device, needed in plan.npus.items():
        if device not in pools:
            count = max(1, math.ceil(needed.min / ASSUMED_DEVICES_PER_NODE))
            pools[device] = (count, ASSUMED_DEVICES_PER_NODE)
            notes.append(
                f"platform.npuNodes.pools declares no {device} nodes: rehearsed with {count} node(s) of "
                f"{ASSUMED_DEVICES_PER_NODE} NPUs, enough for the plan's {needed.min} at minimum replicas"
            )
    declared: dict[str, int] = {str(pool.type): pool.count for pool in npu.pools}
    groups = []
    for device, (count, per_node) in sorted(pools.items()):
        chosen = request.npu_nodes.get(device, count)
        if device in request.npu_nodes:
            notes.append(f"--npu-nodes {device}={chosen}: {chosen} {device} node(s) where the stack has {count}")
        resource = CHIPS[device].resource if device in CHIPS else f"huawei.com/{device}"
        groups.append(
            NodeGroup(
                f"npu-{device.lower()}",
                chosen,
                dict(npu.node_selector),
                taints(npu.tolerations),
                {resource: str(per_node)},
                declared=declared.get(device),
            )
        )
    return groups


def node_manifests(groups: Sequence[NodeGroup]) -> list[dict[str, Any]]:
    """KWOK's fake Node objects for the groups: each in a zone of its own (a multi-node group's
    exclusive topology), Ready once KWOK takes it."""
    nodes = []
    for group in groups:
        for index in range(group.count):
            name = f"{group.role}-{index}"
            capacity = {
                "cpu": NODE_CPU,
                "memory": NODE_MEMORY,
                "ephemeral-storage": NODE_EPHEMERAL_STORAGE,
                "pods": NODE_PODS,
                **group.resources,
            }
            labels = {
                "kubernetes.io/hostname": name,
                "kubernetes.io/os": "linux",
                "kubernetes.io/arch": "amd64",
                "type": "kwok",
                ZONE_LABEL: f"rehearsal-{name}",
                **group.labels,
            }
            spec: dict[str, Any] = {"taints": [dict(t) for t in group.taints]} if group.taints else {}
            nodes.append(
                {
                    "apiVersion": "v1",
                    "kind": "Node",
                    "metadata": {"name": name, "labels": labels, "annotations": {FAKE_NODE_ANNOTATION: "fake"}},
                    "spec": spec,
                    "status": {"capacity": capacity, "allocatable": capacity},
                }
            )
    return nodes


# --- Placement -------------------------------------------------------------------------------------


@dataclass(frozen=True)
class PodPlacement:
    namespace: str
    name: str
    owner: str
    """The pod's controller, as kind/name."""
    node: str | None
    reason: str | None
    """Why the scheduler left it Pending: its own message (None while placed)."""
    gpus: int = 0
    npus: Mapping[str, int] = field(default_factory=dict)
    slices: bool = False
    """It asks for vGPU or vNPU slices: left to HAMi's scheduler, which does not run here."""
    model: str | None = None

    def as_json(self) -> dict[str, Any]:
        return {
            "namespace": self.namespace,
            "name": self.name,
            "owner": self.owner,
            "node": self.node,
            "reason": self.reason,
            "gpus": self.gpus,
            "npus": dict(self.npus),
            "slices": self.slices,
            "model": self.model,
        }


def _quantity(value: Any) -> int:
    try:
        return int(str(value))
    except ValueError:
        return 0


def pod_placement(pod: Mapping[str, Any]) -> PodPlacement:
    """One stored pod: where the scheduler put it, or why not; the devices it asks for."""
    metadata = pod.get("metadata", {})
    spec = pod.get("spec", {})
    limits: dict[str, int] = {}
    for container in spec.get("containers", []):
        resources = container.get("resources", {})
        for name, value in {**resources.get("requests", {}), **resources.get("limits", {})}.items():
            limits[name] = limits.get(name, 0) + _quantity(value)
    owners = [o for o in metadata.get("ownerReferences", []) if o.get("controller")]
    owner = f"{owners[0]['kind']}/{owners[0]['name']}" if owners else "Pod/" + str(metadata.get("name"))
    reason = None
    node = spec.get("nodeName")
    if node is None:
        conditions = pod.get("status", {}).get("conditions", [])
        scheduled = next((c for c in conditions if c.get("type") == "PodScheduled"), None)
        reason = (scheduled or {}).get("message") or "not yet scheduled"
    npus = {name: count for name, count in limits.items() if name.startswith("huawei.com/") and _is_npu_count(name)}
    slices = any(is_slice_resource(name) for name in limits)
    return PodPlacement(
        namespace=str(metadata.get("namespace")),
        name=str(metadata.get("name")),
        owner=owner,
        node=node,
        reason=reason,
        gpus=limits.get(GPU_RESOURCE, 0),
        npus=npus,
        slices=slices,
        model=model_of(metadata),
    )


def model_of(metadata: Mapping[str, Any]) -> str | None:
    """The model a pod (or a LeaderWorkerSet) serves, from its labels; None for the platform's own."""
    labels = metadata.get("labels") or {}
    return labels.get(MODEL_LABEL) if all(labels.get(k) == v for k, v in PREDICTOR.items()) else None


def _is_npu_slice(resource: str) -> bool:
    return resource.startswith("huawei.com/") and resource.endswith(("-memory", "-core"))


def is_slice_resource(resource: str) -> bool:
    """Whether a container's resource is a vGPU or vNPU slice's (HAMi's scheduler places it)."""
    return resource in SLICE_RESOURCES or _is_npu_slice(resource)


def _is_npu_count(resource: str) -> bool:
    return not _is_npu_slice(resource)


@dataclass(frozen=True)
class Placement:
    pods: tuple[PodPlacement, ...]
    gpus_planned: int
    """Whole GPUs the plan gives exclusive models at minimum replicas."""
    gpus_placed: int
    """Whole GPUs of the pods the scheduler bound (slices aside)."""
    gpus_rehearsed: int
    npus_planned: Mapping[str, int]
    npus_placed: Mapping[str, int]
    npus_rehearsed: Mapping[str, int]
    findings: tuple[str, ...]
    outcome: Outcome
    unmade: Mapping[str, str] = field(default_factory=dict)
    """Models whose pods no controller makes here, with why: left out of the comparison."""

    @property
    def pending(self) -> tuple[PodPlacement, ...]:
        return tuple(p for p in self.pods if p.node is None and not p.slices)

    @property
    def left_to_hami(self) -> tuple[PodPlacement, ...]:
        return tuple(p for p in self.pods if p.slices)

    def as_json(self) -> dict[str, Any]:
        return {
            "outcome": self.outcome.value,
            "gpusPlanned": self.gpus_planned,
            "gpusPlaced": self.gpus_placed,
            "gpusRehearsed": self.gpus_rehearsed,
            "npusPlanned": dict(self.npus_planned),
            "npusPlaced": dict(self.npus_placed),
            "npusRehearsed": dict(self.npus_rehearsed),
            "pending": [p.as_json() for p in self.pending],
            "leftToHami": [p.as_json() for p in self.left_to_hami],
            "findings": list(self.findings),
            "unmade": dict(self.unmade),
            "pods": [p.as_json() for p in self.pods],
        }


def exclusive_gpus(plan: Plan) -> int:
    return sum(math.ceil(m.min) for m in plan.models.values() if m.mode == "exclusive" and m.device is None)


def exclusive_npus(plan: Plan, exclude: Iterable[str] = ()) -> dict[str, int]:
    """Whole NPUs of each type the plan gives exclusive models at minimum replicas (but `exclude`'s)."""
    out: dict[str, int] = {}
    left_out = set(exclude)
    for name, m in plan.models.items():
        if m.mode == "exclusive" and m.device is not None and name not in left_out:
            out[m.device] = out.get(m.device, 0) + math.ceil(m.min)
    return out


def _npus_of_groups(groups: Sequence[NodeGroup]) -> dict[str, int]:
    out: dict[str, int] = {}
    for group in groups:
        for resource, each in group.resources.items():
            if resource.startswith("huawei.com/"):
                out[resource] = out.get(resource, 0) + group.count * int(each)
    return out


def _npus_of_pods(pods: Iterable[PodPlacement]) -> dict[str, int]:
    out: dict[str, int] = {}
    for pod in pods:
        for resource, held in pod.npus.items():
            out[resource] = out.get(resource, 0) + held
    return out


def compare_placement(
    pods: Sequence[PodPlacement], plan: Plan, groups: Sequence[NodeGroup], unmade: Mapping[str, str]
) -> Placement:
    """The scheduler's placement against the capacity plan at minimum replicas, on the rehearsed
    nodes. `unmade`: models whose pods no controller here makes (a LeaderWorkerSet's), with why;
    they are left out of the comparison. A pod the plan fits that stayed Pending, every pod placed
    where the plan says they do not fit, or other than the plan's devices held, is a finding that
    the two disagree."""
    rehearsed = sum(g.count * int(g.resources.get(GPU_RESOURCE, "0")) for g in groups)
    planned = exclusive_gpus(plan) - sum(
        math.ceil(plan.models[m].min) for m in unmade if m in plan.models and plan.models[m].device is None
    )
    placed_pods = [p for p in pods if p.node is not None and not p.slices]
    placed = sum(p.gpus for p in placed_pods)
    npus_rehearsed = _npus_of_groups(groups)
    npus_planned = {
        CHIPS[device].resource if device in CHIPS else device: count
        for device, count in exclusive_npus(plan, exclude=unmade).items()
    }
    npus_placed = _npus_of_pods(placed_pods)
    pending = [p for p in pods if p.node is None and not p.slices]
    fits = planned <= rehearsed and all(n <= npus_rehearsed.get(r, 0) for r, n in npus_planned.items())
    findings = [
        f"{p.namespace}/{p.name} ({p.owner}) is Pending though the plan fits the rehearsed nodes: {p.reason}"
        for p in pending
        if fits
    ]
    if not pending and not fits:
        findings.append(
            f"the plan says {planned} GPUs (and NPUs {npus_planned}) do not fit in the rehearsed {rehearsed} "
            f"(NPUs {npus_rehearsed}), yet the scheduler placed every pod"
        )
    if not pending and placed != planned:
        findings.append(f"the scheduler placed pods holding {placed} GPUs; the plan gives exclusive models {planned}")
    if not pending:
        findings += [
            f"the scheduler placed pods holding {npus_placed.get(r, 0)} {r}; the plan gives {n}"
            for r, n in sorted(npus_planned.items())
            if npus_placed.get(r, 0) != n
        ]
    outcome = Outcome.PLACEMENT_DISAGREES if findings else Outcome.PODS_PENDING if pending else Outcome.PASSED
    return Placement(
        tuple(pods),
        planned,
        placed,
        rehearsed,
        npus_planned,
        npus_placed,
        npus_rehearsed,
        tuple(findings),
        outcome,
        dict(unmade),
    )


# --- What the API server stores, against the render ----------------------------------------------

SERVER_SET_METADATA = frozenset(
    {"uid", "resourceVersion", "generation", "creationTimestamp", "managedFields", "selfLink", "deletionTimestamp"}
)


def _empty(value: Any) -> bool:
    """What the API server does not store (Go's omitempty): null, {}, [], "", false, 0."""
    return value is None or (not isinstance(value, float) and value in ({}, [], "", False, 0))


def _same_quantity(rendered: Any, stored: Any) -> bool:
    """2000m and 2, 1024Mi and 1Gi, 0.5 and 500m: the API server stores a quantity in its canonical form."""
    numbers = (str, int, float)
    if not isinstance(rendered, numbers) or not isinstance(stored, numbers) or isinstance(rendered, bool):
        return False
    try:
        return quantity_value(rendered) == quantity_value(stored)
    except (ValueError, TypeError, PydanticCustomError):
        return False


def _differences(path: str, rendered: Any, stored: Any, out: list[str], masked: str | None) -> None:
    """Where `rendered` is not within `stored`: the server may add fields (defaults, status) and
    drop empty ones, never change one the render sets. A rendered `masked` value (the render's
    stand-in for a secret) stands for any stored one."""
    if masked is not None and rendered == masked:
        return
    if isinstance(rendered, Mapping):
        if not isinstance(stored, Mapping):
            if not (_empty(rendered) and stored is None):
                out.append(f"{path}: rendered a mapping, stored {stored!r}")
            return
        for key, value in rendered.items():
            if key not in stored:
                if not _empty(value):
                    out.append(f"{path}.{key}: rendered {value!r}, not stored")
                continue
            _differences(f"{path}.{key}", value, stored[key], out, masked)
    elif isinstance(rendered, list):
        if not isinstance(stored, list) or len(stored) != len(rendered):
            if not (_empty(rendered) and _empty(stored)):
                out.append(f"{path}: rendered {len(rendered)} items, stored {stored!r:.200}")
            return
        for index, (item, kept) in enumerate(zip(rendered, stored, strict=True)):
            _differences(f"{path}[{index}]", item, kept, out, masked)
    elif rendered != stored and str(rendered) != str(stored) and not _same_quantity(rendered, stored):
        out.append(f"{path}: rendered {rendered!r}, stored {stored!r}")


def _comparable(rendered: Mapping[str, Any], masked: str | None) -> dict[str, Any]:
    """A rendered object as the API server stores it: a Secret's stringData is its data, base64
    (a masked value stays masked)."""
    out = dict(rendered)
    if out.get("kind") == "Secret" and "stringData" in out:
        data = dict(out.get("data") or {})
        for key, value in (out.pop("stringData") or {}).items():
            data[key] = value if value == masked else base64.b64encode(str(value).encode()).decode()
        out["data"] = data
    return out


def object_identity(obj: Mapping[str, Any]) -> tuple[str, str, str, str]:
    """An object's group (without its version), kind, namespace and name."""
    group = str(obj.get("apiVersion", "")).rpartition("/")[0]
    metadata = obj.get("metadata", {})
    return group, str(obj.get("kind")), str(metadata.get("namespace") or ""), str(metadata.get("name"))


def stored_differences(
    rendered: Iterable[Mapping[str, Any]],
    stored: Iterable[Mapping[str, Any]],
    default_namespace: str = "default",
    masked: str | None = None,
) -> list[str]:
    """Each rendered object the API server does not store as rendered: missing, or a field the
    render sets that the server changed (server-set fields and defaults aside). `masked`: the
    render's stand-in for a secret's value, which the rehearsal sets from its placeholders."""
    by_identity = {object_identity(obj): obj for obj in stored}
    out: list[str] = []
    for obj in rendered:
        group, kind, namespace, name = object_identity(obj)
        found = by_identity.get((group, kind, namespace, name)) or by_identity.get(
            (group, kind, default_namespace, name)
        )
        label = f"{kind} {namespace + '/' if namespace else ''}{name}"
        if found is None:
            out.append(f"{label}: not stored")
            continue
        comparable = _comparable(obj, masked)
        comparable.pop("status", None)  # the API server's to set (a published CRD file carries an empty one)
        metadata = {k: v for k, v in comparable.get("metadata", {}).items() if k not in SERVER_SET_METADATA}
        if found.get("metadata", {}).get("namespace") and not metadata.get("namespace"):
            metadata["namespace"] = found["metadata"]["namespace"]
        problems: list[str] = []
        _differences(
            "",
            {**comparable, "metadata": metadata, "apiVersion": None},
            {**found, "apiVersion": None},
            problems,
            masked,
        )
        out += [f"{label}: {problem.lstrip('.')}" for problem in problems]
    return out


# --- The report ------------------------------------------------------------------------------------


@dataclass
class Step:
    name: str
    ok: bool
    seconds: float
    summary: Mapping[str, int] = field(default_factory=dict)
    """The engine's counts of operations (create, same, update, delete...)."""
    failures: list[tuple[str, str]] = field(default_factory=list)
    """(resource, the engine's or the API server's words) for each failure."""
    detail: str = ""
    slowest: list[tuple[str, int]] = field(default_factory=list)
    """The resources whose steps took longest, with their seconds (the engine's timestamps)."""

    def as_json(self) -> dict[str, Any]:
        return {
            "slowest": [{"resource": r, "seconds": s} for r, s in self.slowest],
            "name": self.name,
            "ok": self.ok,
            "seconds": round(self.seconds, 1),
            "summary": dict(self.summary),
            "failures": [{"resource": r, "message": m} for r, m in self.failures],
            "detail": self.detail,
        }


@dataclass
class Report:
    stack: str
    config: str
    steps: list[Step] = field(default_factory=list)
    nodes: list[NodeGroup] = field(default_factory=list)
    placement: Placement | None = None
    notes: list[str] = field(default_factory=list)
    changes: list[tuple[str, str]] = field(default_factory=list)
    """--diff-from: (operation, resource) of each change the engine's preview shows."""
    left_behind: list[str] = field(default_factory=list)
    kept: list[str] = field(default_factory=list)
    """Objects destroy leaves on purpose (retainOnDelete: a chart's helm.sh/resource-policy: keep)."""
    interrupted: bool = False
    seconds: float = 0.0

    @property
    def outcome(self) -> Outcome:
        if self.interrupted:
            return Outcome.INTERRUPTED
        if not self.steps or not all(step.ok for step in self.steps) or self.left_behind:
            return Outcome.FAILED
        return self.placement.outcome if self.placement is not None else Outcome.PASSED

    def as_json(self) -> dict[str, Any]:
        return {
            "stack": self.stack,
            "config": self.config,
            "outcome": self.outcome.value,
            "seconds": round(self.seconds, 1),
            "steps": [step.as_json() for step in self.steps],
            "nodes": [
                {
                    "role": g.role,
                    "count": g.count,
                    "declared": g.declared,
                    "labels": dict(g.labels),
                    "taints": [dict(t) for t in g.taints],
                    "resources": dict(g.resources),
                }
                for g in self.nodes
            ],
            "placement": None if self.placement is None else self.placement.as_json(),
            "changes": [{"op": op, "resource": resource} for op, resource in self.changes],
            "leftBehind": self.left_behind,
            "kept": self.kept,
            "notes": self.notes,
            "cannotShow": list(CANNOT_SHOW),
        }


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def _short(message: str, limit: int = 600) -> str:
    """A failure's words for the Markdown report (the JSON has them whole)."""
    return message if len(message) <= limit else message[:limit] + " ..."


def _counts(summary: Mapping[str, int]) -> str:
    return ", ".join(f"{count} {op}" for op, count in sorted(summary.items())) or "nothing"


def markdown(report: Report) -> str:
    """The report a person reads in a pull request."""
    lines = [
        f"### Rehearsal of `{report.stack}`: {report.outcome.value}",
        "",
        f"The real `pulumi` engine and Kubernetes provider against a throwaway control plane with KWOK nodes "
        f"({report.seconds:.0f} s in all; `{report.config}`).",
        "",
        "| Step | Result | Time | Operations |",
        "|---|---|---|---|",
    ]
    lines += [
        f"| {step.name} | {'ok' if step.ok else '**failed**'} | {step.seconds:.0f} s | {_counts(step.summary)} |"
        for step in report.steps
    ]
    failures = [(step.name, r, m) for step in report.steps for r, m in step.failures]
    details = [(step.name, step.detail) for step in report.steps if step.detail and not step.ok]
    if failures or details:
        lines += ["", "#### Failures", ""]
        lines += [f"- {name}: `{resource}`: {_cell(_short(message))}" for name, resource, message in failures]
        lines += [f"- {name}: {_cell(detail)}" for name, detail in details if not any(f[0] == name for f in failures)]
    if report.changes:
        lines += ["", "#### The engine's diff (`pulumi preview --diff` of the change)", ""]
        lines += [f"- {op} `{resource}`" for op, resource in report.changes]
    if report.nodes:
        lines += ["", "#### Nodes", "", "| Nodes | Count | Devices each | Labels | Taints |", "|---|---|---|---|---|"]
        for g in report.nodes:
            devices = ", ".join(f"{k}: {v}" for k, v in g.resources.items()) or "none"
            label_text = ", ".join(f"{k}={v}" for k, v in g.labels.items()) or "none"
            taint_text = ", ".join(f"{t['key']}:{t['effect']}" for t in g.taints) or "none"
            declared = "" if g.declared is None or g.declared == g.count else f" (declared {g.declared})"
            lines.append(f"| {g.role} | {g.count}{declared} | {devices} | {label_text} | {taint_text} |")
    if report.placement is not None:
        lines += _placement_lines(report.placement)
    if report.left_behind:
        lines += ["", "#### Left behind by destroy", ""] + [f"- {item}" for item in report.left_behind]
    if report.kept:
        lines += ["", f"Kept by destroy on purpose (retainOnDelete): {len(report.kept)} objects "
                  f"({', '.join(report.kept[:5])}{', ...' if len(report.kept) > 5 else ''})."]  # fmt: skip
    if report.notes:
        lines += ["", "#### Notes", ""] + [f"- {_cell(note)}" for note in report.notes]
    lines += ["", "<details><summary>What a rehearsal cannot show</summary>", ""]
    lines += [f"- {item}" for item in CANNOT_SHOW]
    lines += ["", "</details>", ""]
    return "\n".join(lines)


def _placement_lines(placement: Placement) -> list[str]:
    lines = [
        "",
        "#### Placement at minimum replicas",
        "",
        f"GPUs: the plan gives exclusive models {placement.gpus_planned}, the scheduler placed "
        f"{placement.gpus_placed}, on {placement.gpus_rehearsed} rehearsed.",
    ]
    for resource, planned in sorted(placement.npus_planned.items()):
        lines.append(
            f"{resource}: the plan gives {planned}, the scheduler placed {placement.npus_placed.get(resource, 0)}, "
            f"on {placement.npus_rehearsed.get(resource, 0)} rehearsed."
        )
    devices = [p for p in placement.pods if p.node is not None and (p.gpus or p.npus)]
    if devices:
        lines += ["", "| Node | Pod | Devices |", "|---|---|---|"]
        for pod in sorted(devices, key=lambda p: (p.node or "", p.namespace, p.name)):
            held = ", ".join([f"{pod.gpus} GPU"] * bool(pod.gpus) + [f"{n} {r}" for r, n in pod.npus.items()])
            lines.append(f"| {pod.node} | {pod.namespace}/{pod.name} | {held} |")
    if placement.pending:
        lines += ["", "Pending (the scheduler's words):", ""]
        lines += [f"- {p.namespace}/{p.name} ({p.owner}): {_cell(p.reason or '')}" for p in placement.pending]
    if placement.left_to_hami:
        owners = sorted({f"{p.namespace}/{p.owner}" for p in placement.left_to_hami})
        lines += ["", f"Left to HAMi's scheduler (vGPU/vNPU slices, not run here): {len(placement.left_to_hami)} "
                  f"pods of {', '.join(owners)}."]  # fmt: skip
    if placement.unmade:
        lines += ["", "Not compared (no controller makes their pods here): "
                  + "; ".join(f"{m}: {why}" for m, why in sorted(placement.unmade.items())) + "."]  # fmt: skip
    if placement.findings:
        lines += ["", "**The scheduler and `infra capacity` disagree:**", ""]
        lines += [f"- {_cell(f)}" for f in placement.findings]
    return lines
