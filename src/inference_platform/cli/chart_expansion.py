"""A render's charts and manifest files expanded into their objects, as `infra render` and
`infra promote` both do it (one place): from the directories given (`--charts-dir`,
`--manifests-dir` or their variables), else from the caches, pulled when missing; skipped with
`--no-charts` or $INFRA_NO_CHARTS. The objects go into the render's chart objects files, which
`infra diff`'s chart objects section compares (cli/diff.py)."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from inference_platform.cli.charts import (
    CHARTS_DIR_ENV,
    DEFAULT_KUBERNETES_VERSION,
    MANIFESTS_DIR_ENV,
    NO_CHARTS_ENV,
    ChartRelease,
    ChartSource,
    ChartsUnavailableError,
    ManifestSource,
    default_cache,
    default_manifest_cache,
    expand,
    expand_manifests,
)
from inference_platform.cli.render import RenderResult
from inference_platform.cli.render_files import chart_documents, is_chart

ChartObjects = dict[str, list[dict[str, object]]]


@dataclass(frozen=True)
class Expansion:
    """Where a render's charts and manifest files come from, or why they are not expanded."""

    charts_dir: str | None = None
    manifests_dir: str | None = None
    skipped: str | None = None

    @classmethod
    def of(cls, charts_dir: str | None, manifests_dir: str | None, no_charts: bool) -> Expansion:
        """The command's options, and the variables where an option is not given."""
        skipped = None
        if no_charts or (os.environ.get(NO_CHARTS_ENV) and not charts_dir):
            skipped = "skipped (--no-charts)" if no_charts else f"skipped (${NO_CHARTS_ENV} is set)"
        return cls(
            charts_dir or os.environ.get(CHARTS_DIR_ENV) or None,
            manifests_dir or os.environ.get(MANIFESTS_DIR_ENV) or None,
            skipped,
        )

    @property
    def given(self) -> bool:
        """A directory was given: a chart or file it cannot serve is an error, not a skip."""
        return self.charts_dir is not None or self.manifests_dir is not None


def expand_render(
    result: RenderResult, kubernetes_version: str | None, how: Expansion
) -> tuple[ChartObjects, str | None]:
    """Every registered chart's and manifest file's objects, and why there are none where they
    were not expanded. ChartsUnavailableError where a directory was given and cannot serve them."""
    if how.skipped is not None:
        return {}, how.skipped
    try:
        objects = _expand_charts(result, kubernetes_version, how.charts_dir)
        objects |= _expand_manifests(result, how.manifests_dir)
    except ChartsUnavailableError as error:
        if how.given:
            raise
        return {}, f"not expanded: {error}"
    return objects, None


def _expand_charts(result: RenderResult, kubernetes_version: str | None, charts_dir: str | None) -> ChartObjects:
    """Each registered chart's objects; from `charts_dir` only when given, else from the cache
    (pulled from the pinned repositories when missing)."""
    releases = [ChartRelease.from_document(d) for d in chart_documents(result) if is_chart(d)]
    if not releases:
        return {}
    source = ChartSource(Path(charts_dir), pull=False) if charts_dir else ChartSource(default_cache(), pull=True)
    transforms = {chart.inputs.get("name", chart.name): chart.transforms for chart in result.charts}
    return expand(releases, source, kubernetes_version or DEFAULT_KUBERNETES_VERSION, transforms)


def _expand_manifests(result: RenderResult, manifests_dir: str | None) -> ChartObjects:
    """Each registered manifest file's objects; from `manifests_dir` only when given, else from the
    cache (fetched from the pinned URLs when missing)."""
    if not result.config_files:
        return {}
    if manifests_dir:
        source = ManifestSource(Path(manifests_dir), fetch=False)
    else:
        source = ManifestSource(default_manifest_cache(), fetch=True)
    return dict(expand_manifests(result.config_files, source))
