"""`python -m infra diff OLD NEW`: what a change does to the rendered objects, as Markdown for a PR."""

from __future__ import annotations

import difflib
import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from deepdiff import DeepDiff
from deepdiff.helper import notpresent

from infra.errors import format_path
from infra.render_files import dump_documents, object_key, read_render

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


def diff_renders(old_dir: Path, new_dir: Path) -> tuple[ObjectDiff, ObjectDiff, list[FieldChange]]:
    """(object changes, chart changes, stack output changes) between two render directories."""
    old_manifests, old_charts, old_outputs = read_render(old_dir)
    new_manifests, new_charts, new_outputs = read_render(new_dir)
    objects = diff_objects(old_manifests, new_manifests)

    def chart_label(chart: Mapping[str, Any]) -> str:
        return f"{chart['kind']} {chart.get('namespace') or ''}/{chart['name']} ({chart['chart']})"

    charts = _diff_keyed({chart_label(c): c for c in old_charts}, {chart_label(c): c for c in new_charts})
    return objects, charts, field_changes(old_outputs, new_outputs)


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
    if lines:
        lines = [f"### {title}", "", *lines]
    return lines


def markdown_report(objects: ObjectDiff, charts: ObjectDiff, outputs: list[FieldChange]) -> str:
    counts = f"{len(objects.added)} added, {len(objects.removed)} removed, {len(objects.changed)} changed"
    lines = ["## inference-platform render diff", ""]
    if objects.empty and charts.empty and not outputs:
        lines.append("No changes: both renders are identical.")
        return "\n".join(lines) + "\n"
    lines += [
        f"Kubernetes objects: {counts}. Helm charts: {len(charts.added)} added, "
        f"{len(charts.removed)} removed, {len(charts.changed)} changed.",
        "",
    ]
    lines += _section("Kubernetes objects", objects)
    lines += _section("Helm charts", charts)
    if outputs:
        lines += ["### Stack outputs", "", *_changes_markdown(outputs), ""]
    return "\n".join(lines).rstrip("\n") + "\n"


TRUNCATION_NOTE = "\n*The diff stops here to fit a comment; the job summary has all of it.*\n"
_CLOSERS = "\n```\n</details>"


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
    if sum(line.startswith("<details>") for line in kept) > sum(line == "</details>" for line in kept):
        kept.append("</details>")
    return "\n".join(kept) + "\n" + TRUNCATION_NOTE
