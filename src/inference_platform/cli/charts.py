"""Expanding the charts the program registers into the objects they create, with real Helm.

Under the SDK's mocks a helm.v4.Chart or helm.v3.Release is one registration carrying its release
name, chart, version, namespace and values; `helm template` with exactly those turns it into the
objects the Kubernetes provider would create (helm.v4.Chart's own semantics are `helm template`'s).
A real cluster also tells Helm its version and the API groups it serves; offline we say them. The
engine runs a chart's transforms (ResourceOptions.transforms) on each object it creates; the
render runs the same functions on what Helm renders.

Charts come from a directory of pinned tarballs (`<chart>-<version>.tgz`: `--charts-dir` or
$INFRA_CHARTS_DIR, e.g. an air-gapped mirror), or else from a cache that `helm pull` fills from
the pinned repositories when there is network.

A yaml.v2.ConfigFile (a release's published manifest, pinned by its URL: the Gateway API's CRDs) is
expanded the same way, from a directory of pinned copies (`--manifests-dir` or
$INFRA_MANIFESTS_DIR, each named as its pin says), or else from a cache filled from the URL.
"""

from __future__ import annotations

import asyncio
import inspect
import json
import os
import subprocess
import tarfile
import tempfile
import urllib.error
import urllib.request
from collections.abc import Awaitable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pulumi
import yaml

from inference_platform import pins
from inference_platform.cli.helm import HelmNotFoundError, find_helm
from inference_platform.cli.names import CHARTS_DIR_ENV as CHARTS_DIR_ENV  # noqa: PLC0414 (re-exported)
from inference_platform.cli.names import MANIFESTS_DIR_ENV as MANIFESTS_DIR_ENV  # noqa: PLC0414 (re-exported)
from inference_platform.cli.names import NO_CHARTS_ENV as NO_CHARTS_ENV  # noqa: PLC0414 (re-exported)
from inference_platform.pins import ChartPin

CACHE_DIR_ENV = "INFRA_CHARTS_CACHE"
# What Helm is told the cluster runs when the stack does not say (platform.kubernetesVersion).
DEFAULT_KUBERNETES_VERSION = "1.33.0"
# API groups a real cluster serves beyond the built-in ones Helm assumes for --kube-version:
# without it prometheus-adapter renders its APIService as v1beta1, which Kubernetes removed.
CLUSTER_API_VERSIONS = ("apiregistration.k8s.io/v1",)
HELM_TIMEOUT_SECONDS = 120
# Kinds without a namespace. Helm leaves metadata.namespace to each template; the Kubernetes
# provider puts the release's namespace on every other object that lacks one, and so do we.
CLUSTER_SCOPED_KINDS = frozenset(
    {
        "APIService",
        "ClusterRole",
        "ClusterRoleBinding",
        "CustomResourceDefinition",
        "IngressClass",
        "MutatingWebhookConfiguration",
        "Namespace",
        "PersistentVolume",
        "PriorityClass",
        "RuntimeClass",
        "StorageClass",
        "ValidatingAdmissionPolicy",
        "ValidatingAdmissionPolicyBinding",
        "ValidatingWebhookConfiguration",
    }
)


class ChartsUnavailableError(Exception):
    """Helm or a chart cannot be had; the message says which and why, in one line."""


@dataclass(frozen=True)
class ChartRelease:
    """A chart as the program registered it (a charts.yaml document)."""

    release: str
    chart: str
    version: str
    repository: str
    namespace: str
    values: Mapping[str, Any]

    @classmethod
    def from_document(cls, document: Mapping[str, Any]) -> ChartRelease:
        chart, repository = document["chart"], document["repository"]
        if chart.startswith("oci://"):  # oci://<registry path>/<chart>, no repository
            repository, chart = chart.rsplit("/", 1)
        return cls(
            release=document["name"],
            chart=chart,
            version=document["version"],
            repository=repository,
            namespace=document["namespace"],
            values=document.get("values") or {},
        )

    @property
    def pin(self) -> ChartPin:
        return ChartPin(self.repository, self.chart, self.version)

    @property
    def tarball_name(self) -> str:
        return f"{self.chart}-{self.version}.tgz"


def default_cache() -> Path:
    configured = os.environ.get(CACHE_DIR_ENV)
    if configured:
        return Path(configured)
    base = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return base / "inference-platform" / "charts"


@dataclass(frozen=True)
class ChartSource:
    """Where the pinned tarballs are; `pull` fills missing ones from their repositories."""

    directory: Path
    pull: bool

    def tarball(self, helm: Path, release: ChartRelease) -> Path:
        path = self.directory / release.tarball_name
        if not path.is_file() and self.pull:
            self.directory.mkdir(parents=True, exist_ok=True)
            pin = release.pin
            source = [pin.reference] if pin.is_oci else [pin.chart, "--repo", pin.repository]
            _run(
                [str(helm), "pull", *source, "--version", release.version],
                f"helm pull {release.chart} {release.version} from {release.repository}",
                cwd=self.directory,
            )
        if not path.is_file():
            raise ChartsUnavailableError(f"chart {release.tarball_name} is not in {self.directory}")
        _check_version(path, release)
        return path


def _check_version(path: Path, release: ChartRelease) -> None:
    """Helm ignores --version for a local tarball: make sure the file is the pinned version."""
    with tarfile.open(path) as archive:
        member = archive.extractfile(f"{release.chart}/Chart.yaml")
        metadata = yaml.safe_load(member.read()) if member is not None else None
    version = metadata.get("version") if isinstance(metadata, dict) else None
    if version != release.version:
        raise ChartsUnavailableError(
            f"{path} holds {release.chart} version {version}, not the pinned {release.version}"
        )


def _run(command: Sequence[str], what: str, cwd: Path | None = None) -> str:
    try:
        done = subprocess.run(
            command, capture_output=True, text=True, check=False, cwd=cwd, timeout=HELM_TIMEOUT_SECONDS
        )
    except subprocess.TimeoutExpired:
        raise ChartsUnavailableError(f"{what}: no answer in {HELM_TIMEOUT_SECONDS} s") from None
    except OSError as error:  # e.g. a Helm built for another machine
        raise ChartsUnavailableError(f"{what}: {error.strerror or error}") from None
    if done.returncode != 0:
        message = " ".join(done.stderr.split()) or f"exit {done.returncode}"
        raise ChartsUnavailableError(f"{what}: {message}")
    return done.stdout


def template(helm: Path, tarball: Path, release: ChartRelease, kubernetes_version: str) -> list[dict[str, Any]]:
    """The release's objects in Helm's order (its install order), CRDs included and tests left out,
    as the Kubernetes provider's helm.v4.Chart renders them."""
    with tempfile.NamedTemporaryFile("w", suffix=".json", encoding="utf-8") as values:
        json.dump(release.values, values)  # JSON is YAML: no YAML is written by hand
        values.flush()
        command = [
            str(helm),
            "template",
            release.release,
            str(tarball),
            "--namespace",
            release.namespace,
            "--values",
            values.name,
            "--kube-version",
            kubernetes_version,
            "--include-crds",
            "--skip-tests",
        ]
        for api_version in CLUSTER_API_VERSIONS:
            command += ["--api-versions", api_version]
        text = _run(command, f"helm template {release.release} ({release.tarball_name})")
    return [
        _in_namespace(document, release.namespace)
        for document in yaml.load_all(text, Loader=yaml.CSafeLoader)
        if document
    ]


def _in_namespace(document: dict[str, Any], namespace: str) -> dict[str, Any]:
    metadata = document.get("metadata") or {}
    if document.get("kind") in CLUSTER_SCOPED_KINDS or metadata.get("namespace"):
        return document
    return document | {"metadata": metadata | {"namespace": namespace}}


def resource_type(obj: Mapping[str, Any]) -> str:
    """The Pulumi type of a Kubernetes object (kubernetes:apps/v1:Deployment, kubernetes:core/v1:Service)."""
    api_version = obj["apiVersion"] if "/" in obj["apiVersion"] else f"core/{obj['apiVersion']}"
    return f"kubernetes:{api_version}:{obj['kind']}"


def transformed(
    release: str, objects: list[dict[str, Any]], transforms: Sequence[pulumi.ResourceTransform]
) -> list[dict[str, Any]]:
    """A chart's objects as the program's transforms leave them: the engine runs a chart's
    transforms on each of its children, with the child's type, name and properties."""
    if not transforms:
        return objects
    out = []
    for rendered in objects:
        current = rendered
        metadata = current.get("metadata") or {}
        for transform in transforms:
            args = pulumi.ResourceTransformArgs(
                custom=True,
                type_=resource_type(current),
                name=f"{release}:{metadata.get('namespace', '')}/{metadata.get('name', '')}",
                props=current,
                opts=pulumi.ResourceOptions(),
            )
            result = transform(args)
            if inspect.isawaitable(result):
                result = asyncio.run(_awaited(result))
            if result is not None:
                current = dict(result.props)
        out.append(current)
    return out


async def _awaited(result: Awaitable[pulumi.ResourceTransformResult | None]) -> pulumi.ResourceTransformResult | None:
    return await result


def expand(
    releases: Sequence[ChartRelease],
    source: ChartSource,
    kubernetes_version: str,
    transforms: Mapping[str, Sequence[pulumi.ResourceTransform]] | None = None,
) -> dict[str, list[dict[str, Any]]]:
    """Every release's objects, by release name, with the program's transforms of each chart
    applied. Raises ChartsUnavailableError for a missing Helm or chart."""
    try:
        binary = find_helm()
    except HelmNotFoundError as error:
        raise ChartsUnavailableError(str(error)) from None
    # Pull one at a time (the cache is shared), then render side by side: each is its own process.
    tarballs = [source.tarball(binary, release) for release in releases]
    with ThreadPoolExecutor(max_workers=max(1, min(len(releases), os.cpu_count() or 1))) as pool:
        rendered = pool.map(
            lambda release, tarball: template(binary, tarball, release, kubernetes_version), releases, tarballs
        )
        return {
            release.release: transformed(release.release, objects, (transforms or {}).get(release.release, ()))
            for release, objects in zip(releases, rendered, strict=True)
        }


def pinned_tarball(pin: ChartPin, source: ChartSource) -> Path:
    """One pinned chart's tarball from `source`, pulled into it first where it may pull: what the
    render would use for that chart. Raises ChartsUnavailableError as the render would."""
    try:
        binary = find_helm()
    except HelmNotFoundError as error:
        raise ChartsUnavailableError(str(error)) from None
    release = ChartRelease(pin.chart, pin.chart, pin.version, pin.repository, "default", {})
    return source.tarball(binary, release)


# --- Pinned manifest files (yaml.v2.ConfigFile) --------------------------------------------------

MANIFEST_PINS = {pin.url: pin for pin in vars(pins).values() if isinstance(pin, pins.ManifestPin)}
FETCH_TIMEOUT_SECONDS = 60


def manifest_file_name(url: str) -> str:
    """The name of a manifest's pinned copy: its pin's, or the URL's last part."""
    pin = MANIFEST_PINS.get(url)
    return pin.file if pin is not None else url.rstrip("/").rpartition("/")[2]


def default_manifest_cache() -> Path:
    return default_cache().parent / "manifests"


@dataclass(frozen=True)
class ManifestSource:
    """Where pinned manifest files are; `fetch` fills missing ones from their URLs."""

    directory: Path
    fetch: bool

    def path(self, url: str) -> Path:
        path = self.directory / manifest_file_name(url)
        if not path.is_file() and self.fetch:
            self.directory.mkdir(parents=True, exist_ok=True)
            try:
                with urllib.request.urlopen(url, timeout=FETCH_TIMEOUT_SECONDS) as response:
                    body = response.read()
            except (urllib.error.URLError, OSError) as error:
                raise ChartsUnavailableError(f"fetching {url}: {getattr(error, 'reason', error)}") from None
            staged = path.with_suffix(".part")
            staged.write_bytes(body)
            staged.rename(path)
        if not path.is_file():
            raise ChartsUnavailableError(f"manifest {path.name} ({url}) is not in {self.directory}")
        return path


def expand_manifests(files: Mapping[str, str], source: ManifestSource) -> dict[str, list[dict[str, Any]]]:
    """Each ConfigFile's objects (by its resource name, from its URL), in the file's order."""
    return {
        name: [
            document
            for document in yaml.load_all(source.path(url).read_text(encoding="utf-8"), Loader=yaml.CSafeLoader)
            if document
        ]
        for name, url in files.items()
    }
