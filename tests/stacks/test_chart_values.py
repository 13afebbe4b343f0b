"""Every values key the program sets on a pinned chart is one the chart's templates read.

The values come from the program's own chart releases, as the render registers them
(`chart_documents`, what charts.yaml lists) for every stack tests/render_stacks.py renders (dev,
prod, the all-features stack, the same with KEDA): a key added to any component's values is
covered without editing this test. The templates are the pinned tarballs' (../shared/charts),
with their subcharts.

How a set path is matched against the templates (`reads` below):

- Each set value is flattened to its leaf paths: mappings are walked key by key, and a list, a
  scalar or an empty mapping is a leaf (`devicePlugin.tolerations`, `testFramework.enabled`).
- A template reads a path where it names it: `.Values.a.b`, `$.Values.a.b`, `$root.Values.a.b`
  (any variable's `.Values`), and `index .Values "a" "b"` (also `index .Values.a "b"`).
- A path the template names covers the set paths under it (`toYaml .Values.a`, `range ...
  .Values.a`, `with .Values.a`, `include "x" .Values.a`, `tpl (.Values.a) .` hand `a`'s children
  on), except where it is only tested: a reference inside `{{ if }}`, `{{ else if }}` or
  `{{ unless }}` reads that one value, not its children (`{{ if .Values.devices }}` does not read
  `devices.ascend.nodeSelector`). A set path that is a prefix of a read one is read too (an empty
  mapping or a list set where the template reaches into it).
- A subchart's templates read under its key in the parent: its alias, else its name
  (`kube-state-metrics.x` for the prometheus chart's `.Values.x` in charts/kube-state-metrics/);
  `.Values.global.x` is `global.x` at every depth. Subcharts come unpacked or as tarballs.
- Helm itself reads the dependencies' `condition` paths and `tags.<tag>`, from Chart.yaml.
- Templates are every file under a chart's templates/ (helpers included) and its values.yaml
  (strings there that the chart passes through `tpl` may name values).
- A chart that hands its whole `.Values` to its workload (istiod writes them into the injector's
  ConfigMap, which the injector's own templates read) reads every key: such charts are listed in
  WHOLE_VALUES with why, and a test holds the list to exactly the charts that do it.

A false pass stays possible where a template passes a mapping to a helper that reads some of its
children only (`include "x" .Values.a`, `with .Values.a`): the whole subtree counts as read.
"""

from __future__ import annotations

import io
import re
import tarfile
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

import pytest
import yaml

from inference_platform.cli.render import run_program
from inference_platform.cli.render_files import chart_documents
from inference_platform.cli.stack_file import read_stack_file
from tests.conftest import SHARED_CHARTS_DIR
from tests.render_stacks import STACKS, stack_path

Path_ = tuple[str, ...]

# Charts whose templates hand `.Values` whole to something that reads it at run time.
WHOLE_VALUES = {
    "istiod": "configmap-values.yaml writes .Values whole into the `values` ConfigMap that istiod's "
    "sidecar injector renders its injection templates (files/*.yaml) with",
}

KEY = r"\.[A-Za-z_][A-Za-z0-9_]*"
VALUES = r"\(?\s*(?:\$\w*)?\.Values\s*\)?"
STRINGS = r"((?:\s+\"[^\"]*\")+)"
# `<anything>.Values` followed by its dotted keys (`($.Values).a` too); a key is what Go templates
# allow after a dot.
DOTTED = re.compile(rf"(?<![\w.])\(?(?:\$\w*)?\.Values\)?((?:{KEY})*)")
# `index .Values.a "b" "c"`, `get .Values "a"`, `hasKey .Values.a "b"`: the keys given as strings.
INDEX = re.compile(rf"\b(?:index|get|hasKey)\s+\(?\s*(?:\$\w*)?\.Values((?:{KEY})*)\s*\)?{STRINGS}")
# `dig "a" "b" default .Values`: the keys before the default.
DIG = re.compile(rf"\bdig((?:\s+\"[^\"]*\")+)\s+\S+\s+{VALUES}")
# `.Values` whole, serialized: every key reaches whoever reads the text.
SERIALIZED = re.compile(
    rf"(?:to(?:Yaml|Json|PrettyJson|Toml)\s+{VALUES}(?![\w.]))|(?:{VALUES}\s*\|\s*to(?:Yaml|Json|PrettyJson|Toml))"
)
ACTION = re.compile(r"\{\{-?(.*?)-?\}\}", re.DOTALL)
CONDITION = re.compile(r"^\s*(?:if|else\s+if|unless)\b")
ALL: Path_ = ()
"""The path `references` gives for `.Values` read whole."""


def _strings(text: str) -> Path_:
    return tuple(re.findall(r"\"([^\"]*)\"", text))


def _keys(text: str) -> Path_:
    return tuple(k for k in text.split(".") if k)


def references(text: str) -> Iterator[tuple[Path_, bool]]:
    """Each values path a template's actions name, and whether only as a condition; ALL where an
    action serializes `.Values` whole. A bare `.Values` handed on otherwise (to `set`, `unset`,
    `deepCopy`, a merge, `dict "Values" .Values` for a helper whose own `.Values.x` are read here
    too) reads nothing by itself."""
    for action in ACTION.finditer(text):
        body = action.group(1)
        condition = bool(CONDITION.match(body))
        taken: list[tuple[int, int]] = []
        for match in INDEX.finditer(body):
            taken.append(match.span())
            yield _keys(match.group(1)) + _strings(match.group(2)), condition
        for match in DIG.finditer(body):
            taken.append(match.span())
            yield _strings(match.group(1)), condition
        if SERIALIZED.search(body):
            yield ALL, condition
        for match in DOTTED.finditer(body):
            if match.group(1) and not any(start <= match.start() < end for start, end in taken):
                yield _keys(match.group(1)), condition


@dataclass
class Reads:
    """What one chart's templates read, as paths in the chart's own values."""

    whole: set[Path_] = field(default_factory=set)
    """Paths read with their children."""
    tested: set[Path_] = field(default_factory=set)
    """Paths only tested for truth: themselves, not their children."""
    all_values: bool = False
    """Some template hands `.Values` whole on."""

    def covers(self, path: Path_) -> bool:
        if self.all_values:
            return True
        if any(path[: len(read)] == read for read in self.whole):
            return True
        return any(read[: len(path)] == path for read in self.whole | self.tested)


def _add(reads: Reads, path: Path_, condition: bool, prefix: Path_) -> None:
    if path == ALL:
        reads.all_values = reads.all_values or not condition
        return
    full = path if path[0] == "global" else prefix + path
    (reads.tested if condition else reads.whole).add(full)


@dataclass
class ChartFiles:
    """A chart's files by path under its root directory."""

    files: dict[str, bytes]

    @classmethod
    def from_tarball(cls, data: bytes) -> ChartFiles:
        with tarfile.open(fileobj=io.BytesIO(data), mode="r:gz") as tar:
            members = [m for m in tar.getmembers() if m.isfile()]
            raw = {m.name: tar.extractfile(m).read() for m in members}  # type: ignore[union-attr]
        root = next(iter(raw)).split("/", 1)[0]
        return cls({name.split("/", 1)[1]: data for name, data in raw.items() if name.startswith(root + "/")})

    def below(self, directory: str) -> ChartFiles:
        return ChartFiles({k.removeprefix(directory): v for k, v in self.files.items() if k.startswith(directory)})

    def metadata(self) -> dict[str, Any]:
        return yaml.safe_load(self.files["Chart.yaml"]) or {}


def _subcharts(chart: ChartFiles) -> Iterator[tuple[str, ChartFiles]]:
    """Each subchart under charts/ by its key in the parent's values (alias, else name)."""
    keys = {d["name"]: d.get("alias") or d["name"] for d in chart.metadata().get("dependencies") or []}
    directories = {k.split("/")[1] for k in chart.files if k.startswith("charts/") and k.count("/") >= 2}
    for directory in sorted(directories):
        sub = chart.below(f"charts/{directory}/")
        yield keys.get(sub.metadata()["name"], sub.metadata()["name"]), sub
    for name, data in sorted(chart.files.items()):
        if name.startswith("charts/") and name.endswith(".tgz") and name.count("/") == 1:
            sub = ChartFiles.from_tarball(data)
            yield keys.get(sub.metadata()["name"], sub.metadata()["name"]), sub


def _tree(chart: ChartFiles, prefix: Path_ = ()) -> Iterator[tuple[Path_, ChartFiles]]:
    """A chart and its subcharts, each with the key its values sit under in the top chart's."""
    yield prefix, chart
    for key, sub in _subcharts(chart):
        yield from _tree(sub, (*prefix, key))


def _texts(chart: ChartFiles) -> dict[str, str]:
    return {
        name: data.decode("utf-8", "replace")
        for name, data in chart.files.items()
        if name.startswith("templates/") or name == "values.yaml"
    }


DEFINE = re.compile(r"\{\{-?\s*define\s+\"([^\"]+)\"")
# `include "name" .` or `$` (the chart's root context, whose .Values are the includer's).
INCLUDE_ROOT = re.compile(r"\b(?:include|template)\s+\"([^\"]+)\"\s+(?:\.|\$)\s*(?:-?\}\}|\))")


def _defines(texts: dict[str, str]) -> dict[str, str]:
    """Named templates by name: each runs from its `define` to the next (or the file's end)."""
    found: dict[str, str] = {}
    for text in texts.values():
        starts = list(DEFINE.finditer(text))
        if not starts:
            continue
        for match, following in zip(starts, [*starts[1:], None], strict=True):
            found[match.group(1)] = text[match.start() : following.start() if following else len(text)]
    return found


def chart_reads(chart: ChartFiles) -> Reads:
    """What a chart and its subcharts read, as paths in the chart's values. A subchart's own
    templates read under its key; a named template that a chart includes with its root context
    (`include "x" .`), wherever it is defined (the inference pool chart's come from its
    inference-extension subchart), reads under the includer's key."""
    reads = Reads()
    tree = [(prefix, _texts(sub), sub) for prefix, sub in _tree(chart)]
    defines = {name: body for _, texts, _ in tree for name, body in _defines(texts).items()}
    for prefix, texts, sub in tree:
        pending = list(texts.values())
        seen: set[str] = set()
        while pending:
            text = pending.pop()
            for path, condition in references(text):
                _add(reads, path, condition, prefix)
            for name in INCLUDE_ROOT.findall(text):
                if name in defines and name not in seen:
                    seen.add(name)
                    pending.append(defines[name])
        for dependency in sub.metadata().get("dependencies") or []:
            for enabled in str(dependency.get("condition") or "").split(","):
                if enabled.strip():
                    reads.tested.add(prefix + tuple(enabled.strip().split(".")))
            for tag in dependency.get("tags") or []:
                reads.tested.add(("tags", tag))
    return reads


def leaves(values: Mapping[str, Any], prefix: Path_ = ()) -> Iterator[Path_]:
    for key, value in values.items():
        if isinstance(value, Mapping) and value:
            yield from leaves(value, (*prefix, key))
        else:
            yield (*prefix, key)


def pinned_chart(chart: str, version: str) -> ChartFiles:
    tarball = SHARED_CHARTS_DIR / f"{chart}-{version}.tgz"
    if not tarball.is_file():
        pytest.skip(f"{tarball} is absent: the pinned charts whose templates this test reads are in ../shared/charts")
    return ChartFiles.from_tarball(tarball.read_bytes())


@pytest.fixture(scope="module")
def releases(tmp_path_factory: pytest.TempPathFactory) -> dict[str, list[dict[str, Any]]]:
    """Each stack's chart releases with their values, as the render registers them."""
    out = tmp_path_factory.mktemp("chart-values")
    found: dict[str, list[dict[str, Any]]] = {}
    for stack in STACKS:
        result = run_program(stack, read_stack_file(stack_path(stack, out)))
        found[stack] = [c for c in chart_documents(result) if c["kind"] in ("helm.v4.Chart", "helm.v3.Release")]
    return found


@pytest.mark.parametrize("stack", STACKS)
def test_every_value_set_on_a_chart_is_read_by_its_templates(
    releases: dict[str, list[dict[str, Any]]], stack: str
) -> None:
    assert releases[stack], f"{stack}: no chart release"
    unread = {}
    for release in releases[stack]:
        # An OCI chart goes by its full reference (oci://.../lws); its tarball by its name.
        reads = chart_reads(pinned_chart(release["chart"].rsplit("/", 1)[-1], release["version"]))
        missing = [".".join(p) for p in leaves(release["values"]) if not reads.covers(p)]
        if missing:
            unread[f"{release['name']} ({release['chart']} {release['version']})"] = missing
    assert not unread, f"{stack}: values no template of the pinned chart reads: {unread}"


def test_the_charts_that_read_their_values_whole_are_the_listed_ones() -> None:
    """Such a chart passes every key: the list must not grow unnoticed."""
    tarballs = sorted(SHARED_CHARTS_DIR.glob("*.tgz")) if SHARED_CHARTS_DIR.is_dir() else []
    if not tarballs:
        pytest.skip(f"{SHARED_CHARTS_DIR} is absent: the pinned charts are in ../shared/charts")
    whole = set()
    for tarball in tarballs:
        chart = ChartFiles.from_tarball(tarball.read_bytes())
        if chart_reads(chart).all_values:
            whole.add(chart.metadata()["name"])
    assert whole == set(WHOLE_VALUES)


# The matcher itself, on templates written as the pinned charts write them.
@pytest.mark.parametrize(
    ("template", "path", "read"),
    [
        ("{{ .Values.a.b }}", ("a", "b"), True),
        ("{{ .Values.a.b }}", ("a", "c"), False),
        ("{{ .Values.a.b }}", ("a",), True),  # an empty mapping or a list set at a
        ("{{- toYaml .Values.a | nindent 2 }}", ("a", "b", "c"), True),
        ("{{- with .Values.a }}{{ toYaml . }}{{ end }}", ("a", "b"), True),
        ("{{- if .Values.a }}x{{ end }}", ("a", "b"), False),
        ("{{- if .Values.a }}x{{ end }}", ("a",), True),
        ("{{- else if .Values.a.enabled }}", ("a", "enabled"), True),
        ("{{- if and .Values.a .Values.b.c }}", ("b", "d"), False),
        ('{{ index .Values "a" "b-c" }}', ("a", "b-c"), True),
        ('{{ index .Values.a "b" }}', ("a", "c"), False),
        ("{{ $.Values.a.b }}", ("a", "b"), True),
        ("{{ $root.Values.a.b }}", ("a", "b"), True),
        ("{{ .Values.global.hub }}", ("global", "hub"), True),
        ("{{ .Release.Name }}", ("a",), False),
        ('{{- if and (hasKey .Values "a") (ne .Values.a nil) }}', ("a",), True),
        ('{{ (get .Values "grafana.ini").paths.data }}', ("grafana.ini", "x"), True),
        ('{{- if (dig "global" "enableReaderRBAC" true .Values) }}', ("global", "enableReaderRBAC"), True),
        ('{{- if (dig "global" "enableReaderRBAC" true .Values) }}', ("global", "other"), False),
        ("{{- with (coalesce ($.Values).profile ($.Values.global).profile) }}", ("profile",), True),
        ('{{- $x := set $.Values "_original" (deepCopy $.Values) }}', ("a",), False),
        ('{{- include "x.secrets" (dict "Values" .Values "s" .Values.b) }}', ("a",), False),
        ("{{ .Values | toPrettyJson | indent 4 }}", ("a", "b"), True),
        ("{{ toYaml $.Values }}", ("a", "b"), True),
    ],
)
def test_how_a_template_reads_a_path(template: str, path: Path_, read: bool) -> None:
    reads = Reads()
    for found, condition in references(template):
        _add(reads, found, condition, ())
    assert reads.covers(path) is read


def _tarball(files: dict[str, str]) -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as tar:
        for name, text in files.items():
            data = text.encode()
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return buffer.getvalue()


def test_a_subchart_reads_under_its_alias_and_globals_at_the_top() -> None:
    sub = _tarball({"sub/Chart.yaml": "name: sub\n", "sub/templates/a.yaml": "{{ .Values.x }}{{ .Values.global.y }}"})
    parent = ChartFiles.from_tarball(
        _tarball(
            {
                "top/Chart.yaml": "name: top\ndependencies:\n- name: sub\n  alias: s\n  condition: s.enabled\n",
                "top/templates/b.yaml": "{{ .Values.z }}",
            }
        )
    )
    parent.files["charts/sub-1.0.0.tgz"] = sub
    reads = chart_reads(parent)
    assert [reads.covers(p) for p in [("s", "x"), ("global", "y"), ("z",), ("s", "enabled"), ("sub", "x"), ("x",)]] == [
        True,
        True,
        True,
        True,
        False,
        False,
    ]


def test_what_the_pinned_charts_never_read_is_found() -> None:
    """The keys issue 39 found set but dead (Grafana's testFramework.enabled, HAMi's
    devices.ascend.nodeSelector and .tolerations), on the charts as pinned: the matcher finds them
    unread, so the stacks' test above failed on them before the program stopped setting them."""
    grafana = chart_reads(pinned_chart("grafana", "12.11.1"))
    hami = chart_reads(pinned_chart("hami", "2.10.0"))
    assert not grafana.covers(("testFramework", "enabled"))
    assert not hami.covers(("devices", "ascend", "nodeSelector"))
    assert not hami.covers(("devices", "ascend", "tolerations"))
    assert hami.covers(("devices", "ascend", "enabled"))
