"""`python -m infra diff OLD NEW`: what a change does to the rendered objects, as Markdown for a PR."""

from __future__ import annotations

import difflib
import itertools
import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NamedTuple

from inference_platform.cli.render_files import (
    CHARTS,
    MANIFESTS,
    OUTPUTS,
    chart_object_releases,
    chart_objects_file,
    document_texts,
    dump_documents,
    load_documents,
    object_key,
    read_text,
)
from inference_platform.stack.fleet import FACTS_OUTPUT

_MAX_CELL = 160
"""Values longer than this (or with a line break) go below the table, whole."""


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


ABSENT: Any = object()
"""A FieldChange's `before` for what was added, its `after` for what was removed."""

_IDENTITIES = ("alert", "record", "name")
"""What names an item of a list: a Prometheus rule's alert or record, else its `name`."""
_MAX_TELLING = 3
_NO_FOLDING = 1 << 30


def field_changes(before: Any, after: Any) -> list[FieldChange]:
    """Every field that differs, sorted by path. Lists of named things are matched by name (rules by
    alert or record, with the labels that tell apart several of one name), other lists by position."""
    changes: list[FieldChange] = []
    _walk("", before, after, changes)
    return sorted(changes, key=lambda c: c.path)


def _same(before: Any, after: Any) -> bool:
    """Equal and of the same types throughout: 1 and True, or 50 and 50.0, differ to Kubernetes."""
    if type(before) is not type(after):
        return False
    if isinstance(before, dict):
        return before.keys() == after.keys() and all(_same(before[k], after[k]) for k in before)
    if isinstance(before, list):
        return len(before) == len(after) and all(_same(b, a) for b, a in zip(before, after, strict=True))
    return bool(before == after)


def _join(path: str, key: str) -> str:
    return f"{path}.{key}" if path else key


def _walk(path: str, before: Any, after: Any, out: list[FieldChange]) -> None:
    if isinstance(before, dict) and isinstance(after, dict):
        for key in [*before, *(k for k in after if k not in before)]:
            _walk(_join(path, str(key)), before.get(key, ABSENT), after.get(key, ABSENT), out)
    elif isinstance(before, list) and isinstance(after, list):
        keys = _list_keys(before, after)
        if keys is None:
            _walk_positions(path, before, after, out)
        else:
            _walk_keyed(path, dict(zip(keys[0], before, strict=True)), dict(zip(keys[1], after, strict=True)), out)
    elif before is ABSENT and after is ABSENT:
        return
    elif not _same(before, after):
        out.append(FieldChange(path or "(whole value)", before, after))


def _walk_keyed(path: str, before: dict[str, Any], after: dict[str, Any], out: list[FieldChange]) -> None:
    for key in [*before, *(k for k in after if k not in before)]:
        _walk(f"{path}[{key}]", before.get(key, ABSENT), after.get(key, ABSENT), out)
    # The order of named things can matter (an Istio route's first match wins): say when it changed.
    kept_before = [k for k in before if k in after]
    kept_after = [k for k in after if k in before]
    if kept_before != kept_after:
        out.append(FieldChange(f"{path} (order)", kept_before, kept_after))


def _walk_positions(path: str, before: list[Any], after: list[Any], out: list[FieldChange]) -> None:
    if len(before) == len(after):
        for index, (old, new) in enumerate(zip(before, after, strict=True)):
            _walk(f"{path}[{index}]", old, new, out)
        return
    # Lengths differ: find what was inserted and deleted, and compare the rest item by item.
    matcher = difflib.SequenceMatcher(None, [_canonical(v) for v in before], [_canonical(v) for v in after], False)
    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        if tag == "equal":
            continue
        paired = min(i2 - i1, j2 - j1)
        for k in range(paired):
            _walk(f"{path}[{j1 + k}]", before[i1 + k], after[j1 + k], out)
        for i in range(i1 + paired, i2):
            out.append(FieldChange(f"{path}[{i}]", before[i], ABSENT))
        for j in range(j1 + paired, j2):
            out.append(FieldChange(f"{path}[{j}]", ABSENT, after[j]))


def _canonical(value: Any) -> str:
    return json.dumps(value, sort_keys=True, default=repr)


def _identity(item: Any) -> str | None:
    if isinstance(item, dict):
        for field in _IDENTITIES:
            if isinstance(value := item.get(field), str) and value:
                return value
    return None


def _attributes(item: dict[str, Any]) -> dict[str, str]:
    """What can tell apart items of one name: a rule's labels, any other item's plain fields."""
    if "alert" in item or "record" in item:
        fields = item.get("labels") or {}
    else:
        fields = {k: v for k, v in item.items() if k != "name"}
    return {
        str(k): v if isinstance(v, str) else json.dumps(v)
        for k, v in fields.items()
        if v is None or isinstance(v, str | int | float | bool)
    }


def _names(before: list[Any], after: list[Any]) -> tuple[list[str], list[str]] | None:
    """Each side's items' names; None when both are empty or either holds anything unnamed."""
    names: tuple[list[str], list[str]] = ([], [])
    for side, items in enumerate((before, after)):
        for item in items:
            if (name := _identity(item)) is None:
                return None
            names[side].append(name)
    return names if before or after else None


def _list_keys(before: list[Any], after: list[Any]) -> tuple[list[str], list[str]] | None:
    """Each item's key on both sides when every item is named, else None (compared by position).
    Where one side holds several items of a name, their key adds the labels (or fields) that tell
    them apart, chosen once for both sides: `InferenceShadowGetsNoMirror version=v4`."""
    names = _names(before, after)
    if names is None:
        return None
    attributes = ([_attributes(i) for i in before], [_attributes(i) for i in after])
    # Each label's values over the whole list, both sides: the more it has, the better it tells apart.
    spread: dict[str, set[str]] = {}
    for items in attributes:
        for fields in items:
            for label, value in fields.items():
                spread.setdefault(label, set()).add(value)
    keys: tuple[list[str], list[str]] = ([], [])
    telling: dict[str, tuple[str, ...] | None] = {}
    for name in dict.fromkeys(names[0] + names[1]):
        groups = [[fields for n, fields in zip(names[s], attributes[s], strict=True) if n == name] for s in (0, 1)]
        if max(len(group) for group in groups) > 1:
            telling[name] = _telling_labels(groups, spread)
    for side in (0, 1):
        seen: dict[str, int] = {}
        for name, fields in zip(names[side], attributes[side], strict=True):
            key = name
            labels = telling.get(name, ())
            if labels is None:  # nothing tells them apart: their place among those of that name
                seen[key] = seen.get(key, 0) + 1
                key += f" #{seen[key]}"
            elif labels:
                key += " " + " ".join(f"{label}={fields.get(label, '')}" for label in labels)
            keys[side].append(key)
    return keys


def _telling_labels(groups: list[list[dict[str, str]]], spread: Mapping[str, set[str]]) -> tuple[str, ...] | None:
    """The fewest labels whose values are unique within each side's items of one name; None if none do."""
    varying = {label for group in groups for fields in group for label in fields}
    candidates = sorted(
        (label for label in varying if len({fields.get(label) for g in groups for fields in g}) > 1),
        key=lambda label: (-len(spread.get(label, ())), label),
    )
    for size in range(1, min(len(candidates), _MAX_TELLING) + 1):
        for labels in itertools.combinations(candidates, size):
            values = [[tuple(fields.get(label) for label in labels) for fields in group] for group in groups]
            if all(len(set(side)) == len(side) for side in values):
                return labels
    return None


def object_label(manifest: Mapping[str, Any]) -> str:
    """A Kubernetes object as the report names it: `Kind namespace/name (apiVersion)`."""
    api_version, kind, namespace, name = object_key(manifest)
    where = f"{namespace}/{name}" if namespace else name
    return f"{kind} {where} ({api_version})"


def chart_label(chart: Mapping[str, Any]) -> str:
    """A charts.yaml entry as the report names it: `helm.v4.Chart namespace/release (chart)`, or a
    manifest file's `yaml.v2.ConfigFile /name (url)`."""
    return f"{chart['kind']} {chart.get('namespace') or ''}/{chart['name']} ({chart.get('chart') or chart['file']})"


def _diff_keyed(old: Mapping[str, Any], new: Mapping[str, Any]) -> ObjectDiff:
    return ObjectDiff(
        added={key: new[key] for key in sorted(new.keys() - old.keys())},
        removed={key: old[key] for key in sorted(old.keys() - new.keys())},
        changed={
            key: changes for key in sorted(old.keys() & new.keys()) if (changes := field_changes(old[key], new[key]))
        },
    )


def diff_objects(
    old: list[dict[str, Any]], new: list[dict[str, Any]], label: Callable[[Mapping[str, Any]], str] = object_label
) -> ObjectDiff:
    """Objects added, removed and changed, each compared field by field, keyed by `label` (for
    Kubernetes objects `Kind namespace/name (apiVersion)`)."""
    return _diff_keyed({label(m): m for m in old}, {label(m): m for m in new})


def _diff_file(old: Path, new: Path, label: Callable[[Mapping[str, Any]], str]) -> ObjectDiff:
    """What changed between two versions of a render file. The render writes an object as the same
    text every time, so an object whose text is in both files is unchanged: only the documents
    written differently (an object changed, added or removed) are parsed and compared field by
    field. A file in another shape than the render writes is parsed whole."""
    old_text, new_text = read_text(old), read_text(new)
    if old_text == new_text:
        return ObjectDiff({}, {}, {})
    old_texts, new_texts = document_texts(old_text), document_texts(new_text)
    if old_texts is None or new_texts is None:
        return diff_objects(load_documents(old_text), load_documents(new_text), label)
    same = set(old_texts) & set(new_texts)
    return diff_objects(
        [value for text in old_texts if text not in same for value in load_documents(text)],
        [value for text in new_texts if text not in same for value in load_documents(text)],
        label,
    )


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
    npu_capacity: tuple[str, ...] = ()
    """How the NPUs of each Ascend type changed, a sentence each (only the types whose plan changed)."""


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


def npu_capacity_change(old: Mapping[str, Any], new: Mapping[str, Any]) -> tuple[str, ...]:
    """'Ascend910B3: min 2 -> 4, awake 4, peak 4 of 8 declared' for each NPU type whose plan changed
    between two renders' `capacity` outputs (a render without NPUs has no `npus`)."""
    before = (old.get("capacity") or {}).get("npus") or {}
    after = (new.get("capacity") or {}).get("npus") or {}
    sentences = []
    for device in sorted(set(before) | set(after)):
        was, now = before.get(device) or {}, after.get(device) or {}
        if was == now:
            continue
        parts = [
            f"{key} {was.get(key, 0)} -> {now.get(key, 0)}"
            if was.get(key, 0) != now.get(key, 0)
            else f"{key} {now[key]}"
            for key in ("min", "awake", "peak")
        ]
        declared = now.get("declared")
        text = f"{device}: " + ", ".join(parts) + (f" of {declared} declared" if declared is not None else "")
        if (now.get("fits") or {}).get("peak") is False:
            text += ": the peak does not fit"
        sentences.append(text)
    return tuple(sentences)


def diff_renders(old_dir: Path, new_dir: Path) -> RenderDiff:
    """What changed between two render directories. Objects written as the same text on both sides
    (and files that are the same on both sides) are neither parsed nor compared, so the work
    follows the change, not the size of the stack."""
    objects = _diff_file(old_dir / MANIFESTS, new_dir / MANIFESTS, object_label)
    charts = _diff_file(old_dir / CHARTS, new_dir / CHARTS, chart_label)
    old_releases, new_releases = set(chart_object_releases(old_dir)), set(chart_object_releases(new_dir))
    chart_objects = {
        release: diff
        for release in sorted(old_releases | new_releases)
        if not (
            diff := _diff_file(
                old_dir / chart_objects_file(release),
                new_dir / chart_objects_file(release),
                object_label,
            )
        ).empty
    }
    whole = frozenset(old_releases ^ new_releases)
    old_outputs_text, new_outputs_text = read_text(old_dir / OUTPUTS), read_text(new_dir / OUTPUTS)
    if old_outputs_text == new_outputs_text:
        return RenderDiff(objects, charts, [], chart_objects, whole)
    old_outputs = _outputs_compared(next(iter(load_documents(old_outputs_text)), {}))
    new_outputs = _outputs_compared(next(iter(load_documents(new_outputs_text)), {}))
    return RenderDiff(
        objects,
        charts,
        field_changes(old_outputs, new_outputs),
        chart_objects,
        whole,
        capacity_change(old_outputs, new_outputs),
        npu_capacity_change(old_outputs, new_outputs),
    )


def _outputs_compared(outputs: dict[str, Any]) -> dict[str, Any]:
    """Stack outputs as the diff compares them: a platform stack's facts, exported as one JSON
    document, compared field by field (a new model is a new directory entry, not a changed string)."""
    facts = outputs.get(FACTS_OUTPUT)
    if isinstance(facts, str):
        try:
            return outputs | {FACTS_OUTPUT: json.loads(facts)}
        except json.JSONDecodeError:
            return outputs
    return outputs


def _text(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, sort_keys=True, ensure_ascii=False)


def _small(value: Any) -> bool:
    """Shown whole in a table cell: short, on one line."""
    if value is ABSENT:
        return True
    text = _text(value)
    return len(text) <= _MAX_CELL and "\n" not in text


def _cell(value: Any) -> str:
    if value is ABSENT:
        return "—"
    if not _small(value):
        return "(see below)"
    return "`" + _text(value).replace("|", "\\|").replace("`", "'") + "`"


def _value_block(value: Any) -> list[str]:
    if isinstance(value, str):
        return ["```text", *value.splitlines(), "```"]
    return ["```yaml", *_yaml_lines(value), "```"]


def _yaml_lines(value: Any) -> list[str]:
    return dump_documents([value], width=_NO_FOLDING).removesuffix("\n...\n").rstrip("\n").splitlines()


def _below(change: FieldChange) -> list[str]:
    """A value too long for its cell, whole: added or removed as a block, changed as a diff."""
    if change.before is ABSENT or change.after is ABSENT:
        what, value = ("added", change.after) if change.before is ABSENT else ("removed", change.before)
        return ["", f"`{change.path}` ({what}):", *_value_block(value)]
    if isinstance(change.before, str) and isinstance(change.after, str):
        old, new = change.before.splitlines(), change.after.splitlines()
    else:
        old, new = _yaml_lines(change.before), _yaml_lines(change.after)
    diff = difflib.unified_diff(old, new, "before", "after", lineterm="")
    return ["", f"`{change.path}`:", "```diff", *diff, "```"]


def _changes_markdown(changes: list[FieldChange]) -> list[str]:
    lines = ["| field | before | after |", "|---|---|---|"]
    below = []
    for change in changes:
        lines.append(f"| `{change.path}` | {_cell(change.before)} | {_cell(change.after)} |")
        if not (_small(change.before) and _small(change.after)):
            below += _below(change)
    return lines + below


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


_NO_CHANGES = "No changes: both renders are identical."


def markdown_report(diff: RenderDiff) -> str:
    objects, charts, outputs, chart_objects, whole_charts, capacity, npu_capacity = diff
    lines = ["## inference-platform render diff", ""]
    if objects.empty and charts.empty and not outputs and not chart_objects:
        lines.append(_NO_CHANGES)
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
    lines += [f"NPU capacity, {sentence}." for sentence in npu_capacity]
    if npu_capacity:
        lines.append("")
    lines += _section("Kubernetes objects", objects)
    lines += _section("Helm charts", charts)
    lines += _chart_objects_section(chart_objects, whole_charts)
    if outputs:
        lines += ["### Stack outputs", "", *_changes_markdown(outputs), ""]
    return "\n".join(lines).rstrip("\n") + "\n"


def environment_stacks(directory: Path) -> list[str] | None:
    """The stacks whose renders an environment's render directory holds (`infra render --shards`
    writes the platform stack's and each shard's side by side), or None for one stack's render (a
    directory with render files of its own, or none at all)."""
    if not directory.is_dir() or any((directory / name).exists() for name in (MANIFESTS, CHARTS, OUTPUTS)):
        return None
    stacks = sorted(path.name for path in directory.iterdir() if (path / MANIFESTS).is_file())
    return stacks or None


def environment_report(old_dir: Path, new_dir: Path) -> str:
    """Each stack's report, for two renders of an environment (a stack on one side only diffed
    against nothing); the stacks without a change named in one line."""
    old, new = environment_stacks(old_dir) or [], environment_stacks(new_dir) or []
    reports = {stack: markdown_report(diff_renders(old_dir / stack, new_dir / stack)) for stack in sorted({*old, *new})}
    changed = {stack: report for stack, report in reports.items() if not report.endswith(_NO_CHANGES + "\n")}
    lines = ["## inference-platform render diff: an environment", ""]
    same = [f"`{stack}`" for stack in reports if stack not in changed]
    lines += [
        f"{len(changed)} of {len(reports)} stacks changed." + (f" No changes: {', '.join(same)}." if same else ""),
        "",
    ]
    for stack, report in changed.items():
        title, body = report.split("\n", 1)
        lines += [f"{title}: stack `{stack}`", body]
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
