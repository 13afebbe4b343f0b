"""`python -m infra diff OLD NEW`: what a change does to the rendered objects, as Markdown for a PR."""

from __future__ import annotations

import difflib
import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NamedTuple

from inference_platform.cli.render_files import dump_documents, object_key, read_chart_objects, read_render
from inference_platform.config.errors import format_path

_REPORTS = (
    "values_changed",
    "type_changes",
    "dictionary_item_added",
    "dictionary_item_removed",
    "iterable_item_added",
    "iterable_item_removed",
)
_MAX_CELL = 120


@dataclass(frozen=True, order=True)
class FieldChange:
    path: str
    before: Any
    after: Any


@dataclass(frozen=True)
class ObjectDiff:
    added: dict[str, Any]
    removed: dict[str, Any]
    changed: dict[str, list[FieldChange]]

    @property
    def empty(self) -> bool:
        return not (self.added or self.removed or self.changed)


_ABSENT = object()


def field_changes(before: Any, after: Any) -> list[FieldChange]:
    # Imported here: deepdiff loads pandas, most of a second every command would pay otherwise.
    from deepdiff import DeepDiff  # noqa: PLC0415
    from deepdiff.helper import notpresent  # noqa: PLC0415

    tree = DeepDiff(before, after, view="tree", verbose_level=2)
    changes = []
    for report in _REPORTS:
        for level in tree.get(report, []):
            path = format_path(level.path(output_format="list")) or "(whole value)"
            old = _ABSENT if level.t1 is notpresent else level.t1
            new = _ABSENT if level.t2 is notpresent else level.t2
            changes.append(FieldChange(path, old, new))
    return sorted(changes, key=lambda c: c.path)


def _label(key: tuple[str, ...]) -> str:
    api_version, kind, namespace, name = key
    where = f"{namespace}/{name}" if namespace else name
    return f"{kind} {where} ({api_version})"


def _diff_keyed(old: Mapping[str, Any], new: Mapping[str, Any]) -> ObjectDiff:
    return ObjectDiff(
        added={key: new[key] for key in sorted(new.keys() - old.keys())},
        removed={key: old[key] for key in sorted(old.keys() - new.keys())},
        changed={
            key: changes for key in sorted(old.keys() & new.keys()) if (changes := field_changes(old[key], new[key]))
        },
    )


def diff_objects(old: list[dict[str, Any]], new: list[dict[str, Any]]) -> ObjectDiff:
    """Kubernetes objects added, removed and changed, keyed by `Kind namespace/name (apiVersion)`."""
    return _diff_keyed({_label(object_key(m)): m for m in old}, {_label(object_key(m)): m for m in new})


class RenderDiff(NamedTuple):
    objects: ObjectDiff
    """The program's own objects."""
    charts: ObjectDiff
    """The charts it installs: chart, version and values."""
    outputs: list[FieldChange]
    chart_objects: dict[str, ObjectDiff]
    """Each expanded chart's objects, by release, for the charts whose objects changed."""
    whole_charts: frozenset[str] = frozenset()
    """Releases expanded on one side only: all their objects are new, or all gone."""
    capacity: str | None = None
    """How the GPU plan changed, in a sentence; None when it did not."""


def capacity_change(old: Mapping[str, Any], new: Mapping[str, Any]) -> str | None:
    """'min GPUs 3 -> 1, awake GPUs 3, peak GPUs 6 -> 8 of 8 declared' from two renders' `capacity`
    outputs (a render from before versions could sleep has no `awake`: its minimum was it)."""
    before, after = old.get("capacity") or {}, new.get("capacity") or {}
    if before == after:
        return None
    parts = []
    was_gpus, now_gpus = before.get("gpus") or {}, after.get("gpus") or {}
    for key in ("min", "awake", "peak"):
        was = was_gpus.get(key, was_gpus.get("min", 0) if key == "awake" else 0)
        now = now_gpus.get(key, now_gpus.get("min", 0) if key == "awake" else 0)
        parts.append(f"{key} GPUs {was} -> {now}" if was != now else f"{key} GPUs {now}")
    declared = after.get("declared")
    text = ", ".join(parts) + (f" of {declared} declared" if declared is not None else "")
    if before.get("declared") != declared:
        text += f" (declared {before.get('declared')} -> {declared})"
    if (after.get("fits") or {}).get("peak") is False:
        text += ": the peak does not fit"
    return text


def diff_renders(old_dir: Path, new_dir: Path) -> RenderDiff:
    """What changed between two render directories."""
    old_manifests, old_charts, old_outputs = read_render(old_dir)
    new_manifests, new_charts, new_outputs = read_render(new_dir)
    objects = diff_objects(old_manifests, new_manifests)

    def chart_label(chart: Mapping[str, Any]) -> str:
        return f"{chart['kind']} {chart.get('namespace') or ''}/{chart['name']} ({chart['chart']})"

    charts = _diff_keyed({chart_label(c): c for c in old_charts}, {chart_label(c): c for c in new_charts})
    old_expanded, new_expanded = read_chart_objects(old_dir), read_chart_objects(new_dir)
    chart_objects = {
        release: diff
        for release in sorted(old_expanded.keys() | new_expanded.keys())
        if not (diff := diff_objects(old_expanded.get(release, []), new_expanded.get(release, []))).empty
    }
    whole = frozenset(old_expanded.keys() ^ new_expanded.keys())
    return RenderDiff(
        objects,
        charts,
        field_changes(old_outputs, new_outputs),
        chart_objects,
        whole,
        capacity_change(old_outputs, new_outputs),
    )


def _cell(value: Any) -> str:
    if value is _ABSENT:
        return "—"
    text = json.dumps(value, sort_keys=True, ensure_ascii=False) if not isinstance(value, str) else value
    if len(text) > _MAX_CELL:
        text = text[: _MAX_CELL - 1] + "…"
    return "`" + text.replace("|", "\\|").replace("`", "'").replace("\n", "⏎") + "`"


def _changes_markdown(changes: list[FieldChange]) -> list[str]:
    lines = ["| field | before | after |", "|---|---|---|"]
    texts = []
    for change in changes:
        if isinstance(change.before, str) and isinstance(change.after, str) and "\n" in change.before + change.after:
            texts.append(change)
            lines.append(f"| `{change.path}` | (text, see below) | (text, see below) |")
        else:
            lines.append(f"| `{change.path}` | {_cell(change.before)} | {_cell(change.after)} |")
    for change in texts:
        diff = difflib.unified_diff(
            change.before.splitlines(), change.after.splitlines(), "before", "after", lineterm=""
        )
        lines += ["", f"`{change.path}`:", "```diff", *diff, "```"]
    return lines


def _section(title: str, diff: ObjectDiff) -> list[str]:
    lines = _object_lines(diff)
    if lines:
        lines = [f"### {title}", "", *lines]
    return lines


def _object_lines(diff: ObjectDiff) -> list[str]:
    lines: list[str] = []
    for heading, items in (("Added", diff.added), ("Removed", diff.removed)):
        for label, document in items.items():
            lines += [
                f"<details><summary>{heading}: <code>{label}</code></summary>",
                "",
                "```yaml",
                dump_documents([document]).rstrip("\n"),
                "```",
                "</details>",
                "",
            ]
    for label, changes in diff.changed.items():
        lines += [f"**Changed: `{label}`**", "", *_changes_markdown(changes), ""]
    return lines


def _counts(diff: ObjectDiff) -> str:
    return f"{len(diff.added)} added, {len(diff.removed)} removed, {len(diff.changed)} changed"


def _chart_objects_section(chart_objects: Mapping[str, ObjectDiff], whole_charts: frozenset[str]) -> list[str]:
    """One folded block per chart, as `pulumi preview` lists a helm.v4.Chart's children. A chart
    new (or gone) as a whole lists its objects by name: their text is the chart's own."""
    lines: list[str] = []
    for release, diff in chart_objects.items():
        if release in whole_charts:
            heading = "Added" if diff.added else "Removed"
            body = [f"- {heading}: `{label}`" for label in diff.added or diff.removed]
        else:
            body = _object_lines(diff)
        lines += [
            f"<details><summary>Chart <code>{release}</code>: {_counts(diff)}</summary>",
            "",
            *body,
            "",
            "</details>",
            "",
        ]
    if lines:
        lines = ["### Chart objects (expanded by Helm)", "", *lines]
    return lines


def markdown_report(diff: RenderDiff) -> str:
    objects, charts, outputs, chart_objects, whole_charts, capacity = diff
    lines = ["## inference-platform render diff", ""]
    if objects.empty and charts.empty and not outputs and not chart_objects:
        lines.append("No changes: both renders are identical.")
        return "\n".join(lines) + "\n"
    summary = f"Kubernetes objects: {_counts(objects)}. Helm charts: {_counts(charts)}."
    if chart_objects:
        changed = list(chart_objects.values())
        summary += (
            f" Chart objects in {len(changed)} chart{'s' if len(changed) != 1 else ''}: "
            f"{sum(len(d.added) for d in changed)} added, {sum(len(d.removed) for d in changed)} removed, "
            f"{sum(len(d.changed) for d in changed)} changed."
        )
    lines += [summary, ""]
    if capacity is not None:
        lines += [f"GPU capacity: {capacity}.", ""]
    lines += _section("Kubernetes objects", objects)
    lines += _section("Helm charts", charts)
    lines += _chart_objects_section(chart_objects, whole_charts)
    if outputs:
        lines += ["### Stack outputs", "", *_changes_markdown(outputs), ""]
    return "\n".join(lines).rstrip("\n") + "\n"


TRUNCATION_NOTE = "\n*The diff stops here to fit a comment; the job summary has all of it.*\n"
_CLOSERS = "\n```\n</details>\n</details>"


def truncated(report: str, limit: int) -> str:
    """The report cut at a whole line to fit `limit` characters, with an open code block and
    <details> closed, so a pull-request comment still renders."""
    if len(report) <= limit:
        return report
    budget = limit - len(TRUNCATION_NOTE) - len(_CLOSERS)
    kept: list[str] = []
    used = 0
    for line in report.splitlines():
        used += len(line) + 1
        if used > budget:
            break
        kept.append(line)
    if sum(line.startswith("```") for line in kept) % 2:
        kept.append("```")
    # Chart blocks hold object blocks: close every <details> still open.
    kept += ["</details>"] * (sum(line.startswith("<details>") for line in kept) - kept.count("</details>"))
    return "\n".join(kept) + "\n" + TRUNCATION_NOTE
