"""The render directory, byte-identical for the same config: manifests.yaml (the program's objects),
charts.yaml (the charts it installs, with their values, and the pinned manifest files it applies),
charts/<release>.yaml (each chart's objects as Helm expands them, and each manifest file's) and
outputs.yaml (the stack outputs)."""

from __future__ import annotations

import functools
import re
import shutil
import tempfile
from collections.abc import Collection, Iterable, Mapping
from pathlib import Path
from typing import Any

import yaml

from inference_platform.cli.render import RenderResult

MANIFESTS = "manifests.yaml"
CHARTS = "charts.yaml"
CHART_OBJECTS = "charts"
CONFIG_FILE_KIND = "yaml.v2.ConfigFile"
OUTPUTS = "outputs.yaml"

# Dependencies first, roughly the order Helm installs kinds in; other kinds follow alphabetically.
KIND_ORDER = [
    "Namespace",
    "CustomResourceDefinition",
    "ServiceAccount",
    "Secret",
    "ConfigMap",
    "PersistentVolumeClaim",
    "ClusterRole",
    "ClusterRoleBinding",
    "Role",
    "RoleBinding",
    "Service",
    "Deployment",
    "StatefulSet",
    "DaemonSet",
    "Job",
    "HorizontalPodAutoscaler",
    "PodDisruptionBudget",
    "NetworkPolicy",
    "Gateway",
    "DestinationRule",
    "VirtualService",
]
_TOP_KEYS = ["apiVersion", "kind", "metadata", "spec", "data", "stringData"]


def object_key(manifest: Mapping[str, Any]) -> tuple[str, str, str, str]:
    """Identity of an object: apiVersion, kind, namespace, name."""
    metadata = manifest.get("metadata", {})
    return manifest["apiVersion"], manifest["kind"], metadata.get("namespace", ""), metadata.get("name", "")


OBJECT_KEY_FIELDS = ("apiVersion", "kind", "metadata.namespace", "metadata.name")
"""The fields `object_key` reads, as `identity_fields` names them."""


def _sort_key(manifest: Mapping[str, Any]) -> tuple[int, str, str, str, str]:
    api_version, kind, namespace, name = object_key(manifest)
    rank = KIND_ORDER.index(kind) if kind in KIND_ORDER else len(KIND_ORDER)
    return rank, kind, namespace, name, api_version


def _sorted_mapping(value: Any) -> Any:
    if isinstance(value, Mapping):
        return {key: _sorted_mapping(value[key]) for key in sorted(value)}
    if isinstance(value, list):
        return [_sorted_mapping(item) for item in value]
    return value


def _ordered_object(manifest: Mapping[str, Any]) -> dict[str, Any]:
    """apiVersion, kind, metadata, spec first (as a reader expects), the rest sorted."""
    first = [key for key in _TOP_KEYS if key in manifest]
    rest = sorted(key for key in manifest if key not in _TOP_KEYS)
    return {key: _sorted_mapping(manifest[key]) for key in first + rest}


class _Dumper(yaml.CSafeDumper):
    """Block style, multi-line strings (generated config files) as literal blocks."""


def _represent_str(dumper: yaml.CSafeDumper, value: str) -> yaml.ScalarNode:
    style = "|" if "\n" in value else None
    return dumper.represent_scalar("tag:yaml.org,2002:str", value, style=style)


_Dumper.add_representer(str, _represent_str)


def dump_documents(documents: Iterable[Any], width: int = 120) -> str:
    """The render's YAML, lines folded at `width` (the diff's value blocks pass a huge one: no folding)."""
    return yaml.dump_all(
        documents, Dumper=_Dumper, sort_keys=False, default_flow_style=False, allow_unicode=True, width=width
    )


def manifest_documents(result: RenderResult) -> list[dict[str, Any]]:
    manifests = [r.inputs for r in result.manifests]
    return [_ordered_object(m) for m in sorted(manifests, key=_sort_key)]


def chart_documents(result: RenderResult) -> list[dict[str, Any]]:
    """What the stack installs from upstream: each chart with its values, and each pinned manifest
    file (a yaml.v2.ConfigFile) by its URL."""
    charts: list[dict[str, Any]] = []
    for registration in result.charts:
        inputs = registration.inputs
        charts.append(
            {
                "name": inputs.get("name", registration.name),
                "kind": "helm.v4.Chart" if "v4" in registration.type else "helm.v3.Release",
                "chart": inputs.get("chart"),
                "version": inputs.get("version"),
                "repository": (inputs.get("repositoryOpts") or {}).get("repo"),
                "namespace": inputs.get("namespace"),
                "values": _sorted_mapping(inputs.get("values") or {}),
            }
        )
    charts += [
        {"name": name, "kind": CONFIG_FILE_KIND, "file": url, "namespace": None}
        for name, url in result.config_files.items()
    ]
    return sorted(charts, key=lambda c: (c["namespace"] or "", c["name"]))


def is_chart(document: Mapping[str, Any]) -> bool:
    """A charts.yaml document of a Helm chart (not a manifest file)."""
    return bool(document["kind"] != CONFIG_FILE_KIND)


def chart_objects_file(release: str) -> str:
    return f"{CHART_OBJECTS}/{release}.yaml"


def render_texts(
    result: RenderResult, chart_objects: Mapping[str, list[dict[str, Any]]] | None = None
) -> dict[str, str]:
    """The render directory's files and their contents; `chart_objects` are the expanded charts,
    by release, each kept in Helm's order."""
    texts = {
        MANIFESTS: dump_documents(manifest_documents(result)),
        CHARTS: dump_documents(chart_documents(result)),
        OUTPUTS: dump_documents([_sorted_mapping(result.outputs)]),
    }
    for release, objects in sorted((chart_objects or {}).items()):
        texts[chart_objects_file(release)] = dump_documents(objects)
    return texts


def write_render(texts: Mapping[str, str], out_dir: Path) -> None:
    """Replace `out_dir` with the new files all at once: never a half-written render."""
    out_dir.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{out_dir.name}-", dir=out_dir.parent))
    staging.chmod(0o755)
    try:
        for name, text in texts.items():
            path = staging / name
            path.parent.mkdir(exist_ok=True)
            path.write_text(text, encoding="utf-8")
        if out_dir.exists():
            retired = Path(tempfile.mkdtemp(prefix=f".{out_dir.name}-old-", dir=out_dir.parent))
            out_dir.rename(retired / out_dir.name)
            staging.rename(out_dir)
            shutil.rmtree(retired)
        else:
            staging.rename(out_dir)
    finally:
        if staging.exists():
            shutil.rmtree(staging)


def load_documents(text: str) -> list[Any]:
    """Every document of a render file's text, parsed (empty documents left out)."""
    # libyaml both ways: the files are written with its dumper, and read ten times faster than in Python.
    return [doc for doc in yaml.load_all(text, Loader=yaml.CSafeLoader) if doc is not None]


def read_text(path: Path) -> str:
    """A render file's text; empty when the render has no such file."""
    return path.read_text(encoding="utf-8") if path.exists() else ""


def _load(path: Path) -> list[Any]:
    return load_documents(read_text(path))


_SEPARATOR = "\n---\n"
_NOT_SPLIT_HERE = re.compile(r"\n(?:%|---[^\n])")
"""A directive, or a document that starts on its `---` line (a scalar, a tag): parse the file whole."""


def document_texts(text: str) -> list[str] | None:
    """Each document's own text, as `dump_documents` writes them: a line `---` between documents.
    Equal objects are written as equal texts, so equal texts need no parsing to be known equal.
    None for a text in another shape (the caller parses it whole)."""
    if _NOT_SPLIT_HERE.search("\n" + text[:4]) or _NOT_SPLIT_HERE.search(text):
        return None
    body = text.removeprefix("---\n")
    if not body:
        return []
    parts = body.split(_SEPARATOR)
    return [part + "\n" for part in parts[:-1]] + [parts[-1]]


_KEY_OR_LINE = r"(?:(?P<key>[A-Za-z0-9_][A-Za-z0-9_./-]*):(?: (?P<value>[^\n]*))?$|(?P<other>[^ \n][^\n]*))"
_LINES_AT = {indent: re.compile(r"\n" + " " * indent + _KEY_OR_LINE, re.MULTILINE) for indent in (0, 2)}
"""Every line at a column, after its line break: a plain key (and the rest of its line), or another line."""
_PLAIN_WORD = re.compile(r"[A-Za-z0-9][A-Za-z0-9_./:-]*(?<!:)")
"""One word YAML may leave unquoted: `VirtualService`, `apps/v1`, `system:auth-delegator`, `oci://host/chart`."""


@functools.lru_cache(maxsize=4096)
def _plain_string(value: str) -> bool:
    """A plain scalar with no space that YAML reads as this very string (not a number, a bool or null)."""
    if _PLAIN_WORD.fullmatch(value) is None:
        return False
    # The loader's own resolver: `true`, `null`, `1.5` or `2024-01-01` read as what they are.
    tag = yaml.resolver.Resolver().resolve(yaml.ScalarNode, value, (True, False))  # type: ignore[no-untyped-call]
    return bool(tag == "tag:yaml.org,2002:str")


def _mapping_lines(text: str, indent: int) -> list[re.Match[str]] | None:
    """The lines at `indent` of `text` (which starts with a line break): each a key of one block
    mapping, or a `- ` item of a list under the key above it (`...` ends a document). None when
    the text does not start with a key there, or any other line is there (a quoted key, a
    complex key): not a mapping of plain keys."""
    lines = list(_LINES_AT[indent].finditer(text))
    if not lines or lines[0].start() != 0 or lines[0]["key"] is None:
        return None
    for line in lines:
        other = line["other"]
        if other is not None and not (other.startswith("- ") or other in ("-", "...")):
            return None
    return lines


def identity_fields(text: str, fields: Collection[str]) -> dict[str, Any] | None:
    """`fields` of one document's text as `dump_documents` writes it (top-level keys, or one level
    down as `metadata.name`), read without parsing the rest: a dict holding those of them the
    document has, with the values a parser gives. Only plain one-word strings are read so; None
    when any of them is written otherwise (quoted, null, a number), or the text is not a block
    mapping of plain keys: then the caller parses the document."""
    nested: dict[str, set[str]] = {}
    for field in fields:
        parent, _, child = field.partition(".")
        if child:
            nested.setdefault(parent, set()).add(child)
    text = "\n" + text
    top = _mapping_lines(text, 0)
    if top is None:
        return None
    found: dict[str, Any] = {}
    for index, line in enumerate(top):
        key, value = line["key"], line["value"]
        if key in nested:
            if value is not None:  # on the key's line: not a block mapping
                return None
            # A block mapping one level in: the lines up to the next one at column 0.
            block = text[line.end() : top[index + 1].start() if index + 1 < len(top) else len(text)]
            if (inner := _mapping_lines(block, 2)) is None:
                return None
            found[key] = {}
            for entry in inner:
                if entry["key"] in nested[key]:
                    if not _one_line_string(block, entry, entry["value"], 2):
                        return None
                    found[key][entry["key"]] = entry["value"]
        elif key in fields:
            if not _one_line_string(text, line, value, 0):
                return None
            found[key] = value
    return found


def _one_line_string(text: str, line: re.Match[str], value: str | None, indent: int) -> bool:
    """The value on a key's line is all of it, and a plain string: the next line is no deeper than
    the key (a long plain value folds onto deeper lines)."""
    following = text[line.end() + 1 : line.end() + 2 + indent]
    ends = following == "" or (not following.startswith("\n") and following != " " * (indent + 1))
    return value is not None and ends and _plain_string(value)


def read_render(directory: Path) -> tuple[list[dict[str, Any]], list[dict[str, Any]], dict[str, Any]]:
    """(manifests, charts, outputs) of a render directory."""
    outputs = _load(directory / OUTPUTS)
    return _load(directory / MANIFESTS), _load(directory / CHARTS), outputs[0] if outputs else {}


def chart_object_releases(directory: Path) -> list[str]:
    """The releases whose expanded objects a render holds, in their files' order; none when it did not expand charts."""
    return [path.stem for path in sorted((directory / CHART_OBJECTS).glob("*.yaml"))]


def read_chart_objects(directory: Path) -> dict[str, list[dict[str, Any]]]:
    """Each expanded chart's objects, by release; empty when the render did not expand charts."""
    return {release: _load(directory / chart_objects_file(release)) for release in chart_object_releases(directory)}
