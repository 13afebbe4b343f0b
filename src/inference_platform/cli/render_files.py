"""The render directory, byte-identical for the same config: manifests.yaml (the program's objects),
charts.yaml (the charts it installs, with their values, and the pinned manifest files it applies),
charts/<release>.yaml (each chart's objects as Helm expands them, and each manifest file's) and
outputs.yaml (the stack outputs)."""

from __future__ import annotations

import re
import shutil
import tempfile
from collections.abc import Iterable, Mapping
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


def read_outputs(directory: Path) -> dict[str, Any]:
    """The stack outputs of a render directory (empty when it has none)."""
    outputs = _load(directory / OUTPUTS)
    return outputs[0] if outputs else {}


def read_render(directory: Path) -> tuple[list[dict[str, Any]], list[dict[str, Any]], dict[str, Any]]:
    """(manifests, charts, outputs) of a render directory."""
    return _load(directory / MANIFESTS), _load(directory / CHARTS), read_outputs(directory)


def chart_object_releases(directory: Path) -> list[str]:
    """The releases whose expanded objects a render holds, in their files' order; none when it did not expand charts."""
    return [path.stem for path in sorted((directory / CHART_OBJECTS).glob("*.yaml"))]


def read_chart_objects(directory: Path) -> dict[str, list[dict[str, Any]]]:
    """Each expanded chart's objects, by release; empty when the render did not expand charts."""
    return {release: _load(directory / chart_objects_file(release)) for release in chart_object_releases(directory)}
