"""`python -m infra diff`: a Markdown report a reviewer can read in a pull request."""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from inference_platform.cli import diff as diff_module
from inference_platform.cli.diff import (
    ABSENT,
    TRUNCATION_NOTE,
    RenderDiff,
    capacity_change,
    chart_label,
    diff_objects,
    diff_renders,
    field_changes,
    markdown_report,
    npu_capacity_change,
    object_label,
    truncated,
)
from inference_platform.cli.main import main
from inference_platform.cli.render_files import (
    CHARTS,
    MANIFESTS,
    OUTPUTS,
    chart_objects_file,
    document_texts,
    dump_documents,
    load_documents,
    read_chart_objects,
    read_render,
)
from tests.conftest import base_config
from tests.stacks.conftest import shared_render

Config = dict[str, Any]
RenderDir = Callable[[Config], Path]


def iris(config: Config) -> dict[str, Any]:
    model: dict[str, Any] = config["inference-platform:models"][0]
    return model


def report(render_dir: RenderDir, mutate: Callable[[Config], Any]) -> str:
    config = base_config()
    old = render_dir(config)
    mutate(config)
    return markdown_report(diff_renders(old, render_dir(config)))


def test_identical_renders_report_no_changes(render_dir: RenderDir) -> None:
    assert "No changes: both renders are identical." in report(render_dir, lambda c: None)


def test_a_weight_change_is_reported_field_by_field(render_dir: RenderDir) -> None:
    def shift(config: Config) -> None:
        iris(config)["versions"][0]["weight"] = 80
        iris(config)["versions"][1]["weight"] = 20

    text = report(render_dir, shift)

    assert "Kubernetes objects: 0 added, 0 removed, 2 changed." in text
    assert "**Changed: `VirtualService service/iris-mesh (networking.istio.io/v1)`**" in text
    assert "**Changed: `VirtualService service/iris (networking.istio.io/v1)`**" in text
    assert "| `spec.http[by-path].route[0].weight` | `90` | `80` |" in text
    assert "| `spec.http[by-host].route[1].weight` | `10` | `20` |" in text
    assert "| `models.iris.weights.v1` | `90` | `80` |" in text  # the stack outputs section


def test_an_added_version_shows_its_objects_in_full(render_dir: RenderDir) -> None:
    new = {"name": "v4", "modelUri": "pvc://models/iris/v4", "weight": 0}
    text = report(render_dir, lambda c: iris(c)["versions"].append(new))

    assert "Kubernetes objects: 3 added, 0 removed, 3 changed." in text
    assert "<details><summary>Added: <code>Deployment service/iris-v4 (apps/v1)</code></summary>" in text
    block = text.split("Added: <code>Deployment service/iris-v4 (apps/v1)</code>")[1].split("</details>")[0]
    assert "```yaml\nkind: Deployment\n" in block.replace("apiVersion: apps/v1\n", "")
    assert "subPath: iris/v4" in block


def test_a_new_pipeline_shows_its_objects_the_access_it_opens_and_its_outputs(render_dir: RenderDir) -> None:
    pipeline = {"name": "flow", "nodes": {"root": {"routerType": "Sequence", "steps": [{"model": "iris"}]}}}

    text = report(render_dir, lambda c: c.update({"inference-platform:pipelines": [pipeline]}))

    assert "<details><summary>Added: <code>Deployment service/flow (apps/v1)</code></summary>" in text
    assert "**Changed: `AuthorizationPolicy service/iris-access (security.istio.io/v1)`**" in text
    assert "**Changed: `NetworkPolicy service/iris (networking.k8s.io/v1)`**" in text
    # Too long for its cell: whole, as YAML below the table.
    assert "| `pipelines` | — | (see below) |" in text
    assert "`pipelines` (added):\n```yaml\nflow:\n  curl: 'curl -sS http://flow.models.example.com/" in text


def test_a_config_file_change_is_shown_as_a_text_diff(render_dir: RenderDir) -> None:
    text = report(render_dir, lambda c: iris(c).update(parallelWorkers=4))

    assert '-  "parallel_workers": 1' in text
    assert '+  "parallel_workers": 4' in text
    assert "```diff" in text


def test_the_reverse_change_reports_the_reverse_diff(render_dir: RenderDir) -> None:
    config = base_config()
    old = render_dir(config)
    iris(config)["versions"].append({"name": "v4", "modelUri": "pvc://models/iris/v4", "weight": 0})
    iris(config)["versions"][0]["weight"] = 80
    iris(config)["versions"][3]["weight"] = 10
    new = render_dir(config)

    forward_objects, _, forward_outputs, *_ = diff_renders(old, new)
    back_objects, _, back_outputs, *_ = diff_renders(new, old)

    assert forward_objects.added == back_objects.removed
    assert forward_objects.removed == back_objects.added
    assert forward_objects.changed.keys() == back_objects.changed.keys()
    for label, changes in forward_objects.changed.items():
        reversed_changes = {(c.path, repr(c.after), repr(c.before)) for c in changes}
        assert reversed_changes == {(c.path, repr(c.before), repr(c.after)) for c in back_objects.changed[label]}
    assert {(c.path, repr(c.after), repr(c.before)) for c in forward_outputs} == {
        (c.path, repr(c.before), repr(c.after)) for c in back_outputs
    }


def test_diff_command_prints_markdown_and_refuses_missing_directories(
    render_dir: RenderDir, tmp_path: Path, capsys: Any
) -> None:
    out = render_dir(base_config())
    capsys.readouterr()

    assert main(["diff", str(out), str(out)]) == 0
    assert capsys.readouterr().out.startswith("## inference-platform render diff")
    assert main(["diff", str(out), str(tmp_path / "nope")]) == 2
    assert "not a render directory" in capsys.readouterr().err


def test_a_long_report_is_cut_at_a_whole_line_for_a_comment(render_dir: RenderDir, tmp_path: Path, capsys: Any) -> None:
    config = base_config()
    old = render_dir(config)
    extra = [{"name": f"v{n}", "modelUri": f"pvc://models/iris/v{n}", "weight": 0} for n in range(4, 12)]
    iris(config)["versions"] += extra
    new = render_dir(config)
    capsys.readouterr()
    full = markdown_report(diff_renders(old, new))
    assert len(full) > 8000

    assert main(["diff", "--max-chars", "8000", str(old), str(new)]) == 0
    cut = capsys.readouterr().out

    assert len(cut) <= 8000
    assert cut.endswith(TRUNCATION_NOTE)
    lines = cut.removesuffix(TRUNCATION_NOTE).splitlines()
    same = next((i for i, (a, b) in enumerate(zip(lines, full.splitlines(), strict=False)) if a != b), len(lines))
    assert same > 50  # whole lines of the report, then at most the closers of what they left open
    assert lines[same:] in ([], ["```"], ["</details>"], ["```", "</details>"])
    assert sum(line.startswith("```") for line in lines) % 2 == 0  # every code block closed
    assert sum(line.startswith("<details>") for line in lines) == lines.count("</details>")
    assert truncated(full, len(full)) == full


def test_a_value_whose_type_changes_is_reported(render_dir: RenderDir) -> None:
    """A mirror of 50 is written as the integer 50; 12.5 is a float: a type change, never "no changes"."""
    text = report(render_dir, lambda c: iris(c)["versions"][2].update(mirrorPercent=12.5))

    assert "No changes" not in text
    assert "**Changed: `VirtualService service/iris (networking.istio.io/v1)`**" in text
    assert "| `spec.http[by-path].mirrors[0].percentage.value` | `50` | `12.5` |" in text
    assert "| `models.iris.mirrors.v3` | `50` | `12.5` |" in text


def config_map(value: Any) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "m", "namespace": "service"}, "data": value}


@pytest.mark.parametrize(
    ("before", "after", "row"),
    [
        (50, 12.5, "| `data` | `50` | `12.5` |"),
        # Equal in Python, different to Kubernetes and YAML: still a change.
        (50, 50.0, "| `data` | `50` | `50.0` |"),
        (1, True, "| `data` | `1` | `true` |"),
        ("50", 50, "| `data` | `50` | `50` |"),
        ({"value": 50}, [50], '| `data` | `{"value": 50}` | `[50]` |'),
        (None, 0, "| `data` | `null` | `0` |"),
    ],
)
def test_a_type_change_is_a_change_even_between_equal_values(before: Any, after: Any, row: str) -> None:
    objects = diff_objects([config_map(before)], [config_map(after)])

    (change,) = objects.changed["ConfigMap service/m (v1)"]
    assert (change.path, change.before, change.after) == ("data", before, after)
    assert (type(change.before), type(change.after)) == (type(before), type(after))
    text = markdown_report(RenderDiff(objects, diff_objects([], []), [], {}))
    assert "No changes" not in text
    assert "Kubernetes objects: 0 added, 0 removed, 1 changed." in text
    assert row in text


def changed_rows(text: str, label: str) -> list[str]:
    """The table rows under `**Changed: `label`**`."""
    section = text.split(f"**Changed: `{label}`**\n\n", 1)[1]
    return section.split("\n\n", 1)[0].splitlines()[2:]


PROMETHEUS = "helm.v4.Chart monitoring/prometheus (prometheus)"
IRIS_RULES = "values.serverFiles.alerting_rules.yml.groups[inference-service-iris].rules"


def add_shadow(config: Config) -> None:
    iris(config)["versions"].append({"name": "v4", "modelUri": "pvc://models/iris/v4", "mirrorPercent": 5})


def test_a_new_mirror_is_shown_whole_with_its_percentage(render_dir: RenderDir) -> None:
    text = report(render_dir, add_shadow)

    mirror = (
        '{"destination": {"host": "iris.service.svc.cluster.local", "port": {"number": 80}, "subset": "v4"}, '
        '"percentage": {"value": 5}}'
    )
    assert f"| `spec.http[by-path].mirrors[1]` | — | `{mirror}` |" in text
    assert f"| `spec.http[in-mesh].mirrors[1]` | — | `{mirror}` |" in text
    assert "…" not in text  # nothing is cut


def test_adding_a_shadow_adds_its_rules_keyed_by_alert_and_renames_none(render_dir: RenderDir) -> None:
    config = base_config()
    old = render_dir(config)
    add_shadow(config)
    diff = diff_renders(old, render_dir(config))

    changes = diff.charts.changed[PROMETHEUS]
    assert [(c.path, c.before) for c in changes] == [
        (f"{IRIS_RULES}[{alert} version=v4]", ABSENT)
        for alert in (
            "InferenceShadowGetsNoMirror",
            "InferenceVersionErrorRatioAbovePrimary",
            "InferenceVersionSlowerThanPrimary",
        )
    ]
    text = markdown_report(diff)
    assert f"| `{IRIS_RULES}[InferenceShadowGetsNoMirror version=v4]` | — | (see below) |" in text
    # A long added value is shown whole, as YAML below the table.
    (rule,) = (c.after for c in changes if c.path.endswith("[InferenceShadowGetsNoMirror version=v4]"))
    assert f"`{IRIS_RULES}[InferenceShadowGetsNoMirror version=v4]` (added):\n```yaml\nalert: Inference" in text
    assert rule["expr"].split("\n")[0] in text
    assert rule["annotations"]["action"] in text


def test_a_container_changed_inside_a_list_is_addressed_by_name(render_dir: RenderDir) -> None:
    text = report(render_dir, lambda c: iris(c).update(resources={"limits": {"memory": "3Gi"}}))

    rows = changed_rows(text, "Deployment service/iris-v1 (apps/v1)")
    assert "| `spec.template.spec.containers[predictor].resources.limits.memory` | `2Gi` | `3Gi` |" in rows, rows


def rule(alert: str, **labels: str) -> dict[str, Any]:
    return {"alert": alert, "expr": "up == 0", "labels": labels}


def rule_changes(before: list[Any], after: list[Any]) -> list[tuple[str, Any, Any]]:
    objects = diff_objects([config_map({"rules": before})], [config_map({"rules": after})])
    return [(c.path, c.before, c.after) for c in objects.changed.get("ConfigMap service/m (v1)", [])]


def test_rules_of_one_alert_are_told_apart_by_the_labels_that_differ_on_both_sides() -> None:
    v1, v2 = rule("Down", role="primary", version="v1"), rule("Down", role="canary", version="v2")
    v3 = rule("Down", role="canary", version="v3")
    # `role` tells v1 from v2 before, but not v2 from v3 after: `version` is chosen for both sides.
    assert rule_changes([v1, v2], [v1, v2, v3]) == [("data.rules[Down version=v3]", ABSENT, v3)]
    assert rule_changes([v1, v2, v3], [v1, v3]) == [("data.rules[Down version=v2]", v2, ABSENT)]
    # One rule of a name on each side: the same rule, changed field by field.
    assert rule_changes([v1], [v2]) == [
        ("data.rules[Down].labels.role", "primary", "canary"),
        ("data.rules[Down].labels.version", "v1", "v2"),
    ]
    # Nothing tells them apart: their place among the rules of that name.
    assert rule_changes([v1, v1], [v1, v1, v1]) == [("data.rules[Down #3]", ABSENT, v1)]


def test_named_items_that_change_places_are_reported_as_an_order_change() -> None:
    """An Istio route's first match wins: a reorder is a change even when every route is the same."""
    by_path, by_host = {"name": "by-path", "match": [{"uri": "/a"}]}, {"name": "by-host", "match": [{"uri": "/b"}]}
    objects = diff_objects([config_map({"http": [by_path, by_host]})], [config_map({"http": [by_host, by_path]})])

    (change,) = objects.changed["ConfigMap service/m (v1)"]
    assert (change.path, change.before, change.after) == (
        "data.http (order)",
        ["by-path", "by-host"],
        ["by-host", "by-path"],
    )


def test_a_long_changed_value_is_shown_whole_as_a_diff_below_the_table() -> None:
    before, after = "sum(rate(x[5m])) > " + "1" * 200, "sum(rate(x[5m])) > " + "2" * 200
    objects = diff_objects([config_map({"expr": before})], [config_map({"expr": after})])
    text = markdown_report(RenderDiff(objects, diff_objects([], []), [], {}))

    assert "| `data.expr` | (see below) | (see below) |" in text
    assert f"`data.expr`:\n```diff\n--- before\n+++ after\n@@ -1 +1 @@\n-{before}\n+{after}\n```" in text


def full_diff(old_dir: Path, new_dir: Path) -> RenderDiff:
    """The straightforward diff of two renders: every object of both parsed and compared field by
    field, as `diff_renders` did before it compared objects by their text first."""
    old_manifests, old_charts, old_outputs = read_render(old_dir)
    new_manifests, new_charts, new_outputs = read_render(new_dir)
    old_expanded, new_expanded = read_chart_objects(old_dir), read_chart_objects(new_dir)
    return RenderDiff(
        diff_objects(old_manifests, new_manifests),
        diff_objects(old_charts, new_charts, chart_label),
        field_changes(old_outputs, new_outputs),
        {
            release: diff
            for release in sorted(old_expanded.keys() | new_expanded.keys())
            if not (diff := diff_objects(old_expanded.get(release, []), new_expanded.get(release, []))).empty
        },
        frozenset(old_expanded.keys() ^ new_expanded.keys()),
        capacity_change(old_outputs, new_outputs),
        npu_capacity_change(old_outputs, new_outputs),
    )


@pytest.fixture(scope="module")
def big_render(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The prod stack rendered with its charts (the render tests/stacks/ share): 116 objects of
    the program's, 8 charts and their objects as Helm expands them."""
    return shared_render("prod", tmp_path_factory).directory


Edit = Callable[[list[dict[str, Any]]], list[dict[str, Any]]]


def edited(render: Path, out: Path, edits: dict[str, Edit]) -> Path:
    """A copy of `render` with files' objects edited (render file name -> its objects, edited),
    written back as the render writes them: the objects left alone keep their very text."""
    if not out.exists():
        shutil.copytree(render, out)
    for name, edit in edits.items():
        path = out / name
        text = path.read_text(encoding="utf-8")
        assert dump_documents(load_documents(text)) == text  # written back, an object is its old text
        path.write_text(dump_documents(edit(load_documents(text))), encoding="utf-8")
    return out


def split_route(objects: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The first route to one destination of a VirtualService's first HTTP route moved 90/10 onto a new
    subset: one object changed in two fields."""
    for document in objects:
        route = document.get("spec", {}).get("http", [{}])[0].get("route", [])
        if document["kind"] == "VirtualService" and len(route) == 1:
            canary = {"destination": route[0]["destination"] | {"subset": "canary"}, "weight": 10}
            route[0]["weight"] = 90
            route.append(canary)
            return objects
    raise AssertionError("no VirtualService with a single route")


def test_a_large_render_pair_reports_what_a_full_diff_reports(big_render: Path, tmp_path: Path) -> None:
    """Objects compared by their text first, then field by field only where it differs: the very
    report of parsing and comparing everything, whatever changed (an object's field, an object
    added or removed, a chart's values and its objects, a chart gone, the outputs)."""

    def manifests(objects: list[dict[str, Any]]) -> list[dict[str, Any]]:
        split_route(objects)
        added = next(o for o in objects if o["kind"] == "ConfigMap")
        removed = next(o for o in objects if o["kind"] == "Service")
        return [*(o for o in objects if o is not removed), added | {"metadata": added["metadata"] | {"name": "new"}}]

    def charts(objects: list[dict[str, Any]]) -> list[dict[str, Any]]:
        prometheus = next(c for c in objects if c["name"] == "prometheus")
        prometheus["values"]["server"]["retention"] = "9d"
        return [c for c in objects if c["name"] != "metrics-server"]

    def prometheus(objects: list[dict[str, Any]]) -> list[dict[str, Any]]:
        objects[0]["metadata"]["labels"]["edited"] = "yes"
        return objects

    def outputs(objects: list[dict[str, Any]]) -> list[dict[str, Any]]:
        objects[0]["capacity"]["gpus"]["peak"] += 1
        return objects

    new = edited(
        big_render,
        tmp_path / "new",
        {MANIFESTS: manifests, CHARTS: charts, chart_objects_file("prometheus"): prometheus, OUTPUTS: outputs},
    )
    (new / chart_objects_file("metrics-server")).unlink()

    diff = diff_renders(big_render, new)

    full = full_diff(big_render, new)
    assert diff == full
    assert markdown_report(diff) == markdown_report(full)
    assert (len(diff.objects.added), len(diff.objects.removed), len(diff.objects.changed)) == (1, 1, 1)
    assert list(diff.charts.changed) == ["helm.v4.Chart monitoring/prometheus (prometheus)"]
    assert list(diff.charts.removed) == ["helm.v4.Chart metrics-server/metrics-server (metrics-server)"]
    assert list(diff.chart_objects) == ["metrics-server", "prometheus"]
    assert diff.whole_charts == {"metrics-server"}
    assert diff.capacity is not None


def test_objects_written_alike_are_neither_parsed_nor_compared(
    big_render: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """One object changed: it is the only one parsed (its text on both sides) and the only one
    compared field by field."""
    new = edited(big_render, tmp_path / "new", {MANIFESTS: split_route})
    parsed: list[str] = []
    compared: list[tuple[str, str]] = []

    def parse(text: str) -> list[Any]:
        parsed.append(text)
        return load_documents(text)

    def compare(before: Any, after: Any) -> Any:
        compared.append((object_label(before), object_label(after)))
        return field_changes(before, after)

    monkeypatch.setattr(diff_module, "load_documents", parse)
    monkeypatch.setattr(diff_module, "field_changes", compare)

    diff = diff_renders(big_render, new)

    ((label, changes),) = diff.objects.changed.items()
    assert label.startswith("VirtualService ")
    assert [c.path.partition("].route")[2] for c in changes] == ["[0].weight", "[1]"]
    assert compared == [(label, label)]
    before, after = (document_texts((side / MANIFESTS).read_text(encoding="utf-8")) or [] for side in (big_render, new))
    changed = [t for t in before if t not in after] + [t for t in after if t not in before]
    assert len(changed) == 2
    assert sorted(parsed) == sorted(changed)
    assert diff.charts.empty
    assert not diff.chart_objects
    assert not diff.outputs
