"""`infra capacity`'s table: a row per model and version, the packed slices, and a total per kind of
device that is the headline's figure (analysis/capacity.py computes them; this lays them out)."""

from __future__ import annotations

from rich.table import Table

from inference_platform.analysis.capacity import GPU, STAGES, Packing, Plan, Row


def capacity_table(plan: Plan) -> Table:
    """Each version's whole devices (a slice-holding version's slices, in brackets: they count on
    the packing's row), each packing's devices, then each kind's total."""
    lora = {name: model.lora for name, model in plan.models.items() if model.lora is not None}
    table = Table(
        "model", "version", "mode", "device", "min", "awake", "peak", "slice", *(["LoRA slots a pod"] if lora else [])
    )
    units = list(dict.fromkeys([GPU, *(row.unit for row in plan.rows)]))
    for unit in units:
        for row in (row for row in plan.rows if row.unit == unit):
            slots = [str(lora[row.model].slots) if row.model in lora else ""] if lora else []
            table.add_row(row.model, row.version, row.mode, unit, *_cells(row), row.slice_label, *slots)
        for packing in (packing for packing in plan.packings if packing.unit == unit):
            stages = (str(packing.count(stage)) for stage in STAGES)
            filler = [""] if lora else []
            table.add_row("slices packed", "", packing.policy, unit, *stages, "", *filler, style="italic")
        totals = _totals(plan, unit)
        if totals is not None:
            filler = [""] if lora else []
            table.add_row("total", "", "", unit, *(str(t) for t in totals), "", *filler, style="bold", end_section=True)
    return table


def cache_table(plan: Plan) -> Table:
    """What each kind of cache node holds (platform.modelCache): each cached version and adapter, then the
    total against the cache's size."""
    table = Table("cache nodes", "version", "downloadSize", title="Model cache, on each node", title_justify="left")
    for nodes in plan.cache:
        for name, size in nodes.held:
            table.add_row(nodes.kind.upper(), name, size)
        table.add_row(nodes.kind.upper(), "total", f"{nodes.total} of {nodes.size}", style="bold", end_section=True)
    return table


def _cells(row: Row) -> list[str]:
    if row.share is None:
        return [str(n) for n in row.whole]
    return [f"({n} slices)" if n != 1 else "(1 slice)" for n in row.slices]


def _totals(plan: Plan, unit: str) -> tuple[int, int, int] | None:
    """The headline's figures for a kind of device: GPUs, or one NPU type's."""
    if unit == GPU:
        return plan.gpus_min, plan.gpus_awake, plan.gpus_peak
    npus = plan.npus.get(unit)
    return None if npus is None else (npus.min, npus.awake, npus.peak)


def packing_lines(plan: Plan) -> list[str]:
    """Where the slices go, device by device, at each stage: 'GPU packing at min (binpack): 1: a/v1 + b/v1; 2: a/v1'."""
    return [_packing_line(packing, stage) for packing in plan.packings for stage in STAGES if packing.count(stage)]


def _packing_line(packing: Packing, stage: str) -> str:
    devices = "; ".join(
        f"{number}: {' + '.join(device)}" for number, device in enumerate(packing.devices[stage], start=1)
    )
    return f"{packing.unit} packing at {stage} ({packing.policy}): {devices}"
