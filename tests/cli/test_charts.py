"""`python -m infra render` expanding the charts with real Helm: where charts and Helm come from,
what is written, how failures read, and how a pin bump or a values change shows in `infra diff`."""

from __future__ import annotations

import contextlib
import hashlib
import io
import json
import re
import shutil
import subprocess
import tarfile
from pathlib import Path
from typing import Any

import pytest
import yaml

from inference_platform import pins
from inference_platform.cli.charts import CACHE_DIR_ENV, CHARTS_DIR_ENV, NO_CHARTS_ENV
from inference_platform.cli.diff import TRUNCATION_NOTE, diff_renders, markdown_report, truncated
from inference_platform.cli.helm import (
    HELM_SHA256,
    HELM_VERSION,
    INSTALL_COMMAND,
    HelmNotFoundError,
    find_helm,
    pinned_helm,
)
from inference_platform.cli.main import main
from inference_platform.cli.render_files import read_chart_objects, read_render
from tests import conftest
from tests.conftest import ROOT, charts_dir

DEV = ROOT / "Pulumi.dev.yaml"


def render(out: Path, *extra: str, stack_file: Path = DEV) -> int:
    return main(["render", "--stack", "dev", "--config", str(stack_file), "--out", str(out), *extra])


def files(directory: Path) -> dict[str, bytes]:
    return {str(p.relative_to(directory)): p.read_bytes() for p in sorted(directory.rglob("*")) if p.is_file()}


@pytest.fixture
def charts() -> Path:
    return charts_dir()


@pytest.fixture(scope="module")
def dev_render(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    """The dev stack rendered with its charts once for the tests that only read it: (directory, stdout)."""
    out = tmp_path_factory.mktemp("dev-charts") / "out"
    stdout = io.StringIO()
    with contextlib.redirect_stdout(stdout):
        assert render(out, "--charts-dir", str(charts_dir())) == 0
    return out, stdout.getvalue()


def test_each_chart_is_written_in_helms_own_order(charts: Path, dev_render: tuple[Path, str], tmp_path: Path) -> None:
    out, _ = dev_render
    _, registered, _ = read_render(out)
    expanded = read_chart_objects(out)
    assert sorted(expanded) == sorted(c["name"] for c in registered)
    # The same release through Helm directly: the same objects in the same order.
    (prometheus,) = [c for c in registered if c["name"] == "prometheus"]
    values = tmp_path / "values.json"
    values.write_text(json.dumps(prometheus["values"]))
    helm_output = subprocess.run(
        [
            str(find_helm()),
            "template",
            "prometheus",
            str(charts / "prometheus-29.27.0.tgz"),
            "--namespace",
            "monitoring",
            "--values",
            str(values),
            "--kube-version",
            "1.33.0",
            "--api-versions",
            "apiregistration.k8s.io/v1",
        ],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    direct = [d for d in yaml.safe_load_all(helm_output) if d]
    assert [(o["kind"], o["metadata"]["name"]) for o in expanded["prometheus"]] == [
        (o["kind"], o["metadata"]["name"]) for o in direct
    ]
    assert expanded["prometheus"] == direct


def test_the_same_config_renders_byte_identical_charts(
    charts: Path, dev_render: tuple[Path, str], tmp_path: Path
) -> None:
    assert render(tmp_path / "again", "--charts-dir", str(charts)) == 0
    first = files(dev_render[0])
    assert any(name.startswith("charts/") for name in first)
    assert first == files(tmp_path / "again")


def test_the_summary_counts_chart_objects_per_component(dev_render: tuple[Path, str]) -> None:
    directory, out = dev_render
    expanded = read_chart_objects(directory)
    total = sum(len(objects) for objects in expanded.values())
    assert f"6 Helm charts ({total} chart objects)" in out
    istio = sum(len(expanded[r]) for r in ("istio-base", "istiod", "istio-cni", "istio-ingressgateway"))
    (row,) = [line for line in out.splitlines() if "IngressGateway::ingress" in line]
    assert [cell.strip() for cell in row.strip("│ ").split("│")][1:] == ["3", "4", str(istio)]


def test_a_missing_chart_is_one_error_naming_it(tmp_path: Path, charts: Path, capsys: Any) -> None:
    partial = tmp_path / "charts"
    shutil.copytree(charts, partial)
    (partial / "istiod-1.30.3.tgz").unlink()
    assert render(tmp_path / "out", "--charts-dir", str(partial)) == 2
    err = capsys.readouterr().err
    assert err == f"charts: chart istiod-1.30.3.tgz is not in {partial}\n"
    assert not (tmp_path / "out").exists()


def test_the_charts_directory_can_come_from_the_environment(
    tmp_path: Path, charts: Path, monkeypatch: pytest.MonkeyPatch, capsys: Any
) -> None:
    monkeypatch.delenv(NO_CHARTS_ENV)
    monkeypatch.setenv(CHARTS_DIR_ENV, str(tmp_path / "nowhere"))
    assert render(tmp_path / "out") == 2
    assert "chart gateway-1.30.3.tgz is not in" in capsys.readouterr().err
    monkeypatch.setenv(CHARTS_DIR_ENV, str(charts))
    assert render(tmp_path / "out") == 0
    assert (tmp_path / "out" / "charts" / "istiod.yaml").is_file()


def test_a_missing_helm_is_one_error_with_a_charts_directory(
    tmp_path: Path, charts: Path, monkeypatch: pytest.MonkeyPatch, capsys: Any
) -> None:
    monkeypatch.setenv("HELM", str(tmp_path / "no-helm"))
    assert render(tmp_path / "out", "--charts-dir", str(charts)) == 2
    assert capsys.readouterr().err == f"charts: $HELM is {tmp_path / 'no-helm'}, which is not an executable file\n"


def test_without_a_directory_the_cache_is_used_and_a_failure_is_one_line(
    tmp_path: Path, charts: Path, monkeypatch: pytest.MonkeyPatch, capsys: Any
) -> None:
    monkeypatch.delenv(NO_CHARTS_ENV)
    cache = tmp_path / "cache"
    shutil.copytree(charts, cache)  # what `helm pull` would have filled
    monkeypatch.setenv(CACHE_DIR_ENV, str(cache))
    assert render(tmp_path / "cached") == 0
    assert (tmp_path / "cached" / "charts" / "prometheus.yaml").is_file()

    monkeypatch.setenv("HELM", str(tmp_path / "no-helm"))
    capsys.readouterr()
    assert render(tmp_path / "plain") == 0
    out = capsys.readouterr().out
    assert (
        out.splitlines()[-1] == f"Charts not expanded: $HELM is {tmp_path / 'no-helm'}, which is not an executable file"
    )
    assert not (tmp_path / "plain" / "charts").exists()
    assert (tmp_path / "plain" / "manifests.yaml").is_file()


def test_no_charts_skips_expansion(tmp_path: Path, charts: Path, capsys: Any) -> None:
    assert render(tmp_path / "out", "--no-charts") == 0
    assert capsys.readouterr().out.splitlines()[-1] == "Charts skipped (--no-charts)"
    assert not (tmp_path / "out" / "charts").exists()
    with pytest.raises(SystemExit):
        render(tmp_path / "out", "--no-charts", "--charts-dir", str(charts))


def repacked(source: Path, target: Path, chart: str, version: str) -> Path:
    """A chart tarball whose Chart.yaml says another version: a pin bump, offline."""
    out = target / f"{chart}-{version}.tgz"
    with tarfile.open(source) as original, tarfile.open(out, "w:gz") as bumped:
        for member in original.getmembers():
            data = original.extractfile(member).read() if member.isfile() else None  # type: ignore[union-attr]
            if member.name == f"{chart}/Chart.yaml":
                metadata = yaml.safe_load(data or b"")
                metadata["version"] = version
                data = yaml.safe_dump(metadata, sort_keys=False).encode()
                member.size = len(data)
            bumped.addfile(member, io.BytesIO(data) if data is not None else None)
    return out


def test_a_pin_bump_shows_which_chart_objects_change(
    tmp_path: Path, charts: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    mirror = tmp_path / "mirror"
    shutil.copytree(charts, mirror)
    repacked(charts / "prometheus-29.27.0.tgz", mirror, "prometheus", "29.28.0")
    assert render(tmp_path / "old", "--charts-dir", str(mirror)) == 0
    monkeypatch.setattr(pins, "PROMETHEUS", pins.ChartPin(pins.PROMETHEUS_COMMUNITY, "prometheus", "29.28.0"))
    assert render(tmp_path / "new", "--charts-dir", str(mirror)) == 0

    diff = diff_renders(tmp_path / "old", tmp_path / "new")
    assert diff.objects.empty
    assert list(diff.charts.changed) == ["helm.v4.Chart monitoring/prometheus (prometheus)"]
    assert list(diff.chart_objects) == ["prometheus"]
    prometheus = diff.chart_objects["prometheus"]
    old_objects = read_chart_objects(tmp_path / "old")["prometheus"]
    # Every object carries the chart's version in its helm.sh/chart label, and nothing else moved.
    assert (prometheus.added, prometheus.removed) == ({}, {})
    assert len(prometheus.changed) == len(old_objects)
    for changes in prometheus.changed.values():
        assert {(c.before, c.after) for c in changes} == {("prometheus-29.27.0", "prometheus-29.28.0")}
    report = markdown_report(diff)
    assert "<details><summary>Chart <code>prometheus</code>: 0 added, 0 removed, 7 changed</summary>" in report
    assert "| `metadata.labels.helm.sh/chart` | `prometheus-29.27.0` | `prometheus-29.28.0` |" in report
    # Cut inside the chart's block for a comment, the block is still closed.
    cut = truncated(report, report.index("ClusterRoleBinding") + 200)
    assert cut.endswith(TRUNCATION_NOTE)
    assert cut.count("<details>") == cut.count("</details>") == 1


def test_a_tarball_that_is_not_the_pinned_version_is_refused(
    tmp_path: Path, charts: Path, monkeypatch: pytest.MonkeyPatch, capsys: Any
) -> None:
    mirror = tmp_path / "mirror"
    shutil.copytree(charts, mirror)
    shutil.copy(charts / "prometheus-29.27.0.tgz", mirror / "prometheus-29.28.0.tgz")
    monkeypatch.setattr(pins, "PROMETHEUS", pins.ChartPin(pins.PROMETHEUS_COMMUNITY, "prometheus", "29.28.0"))
    assert render(tmp_path / "out", "--charts-dir", str(mirror)) == 2
    err = capsys.readouterr().err
    assert (
        err == f"charts: {mirror / 'prometheus-29.28.0.tgz'} holds prometheus version 29.27.0, not the pinned 29.28.0\n"
    )


def test_a_values_change_shows_as_the_objects_it_changes(
    tmp_path: Path, charts: Path, dev_render: tuple[Path, str]
) -> None:
    edited = tmp_path / "Pulumi.dev.yaml"
    edited.write_text(DEV.read_text().replace("retention: 2d", "retention: 3d"))
    assert render(tmp_path / "new", "--charts-dir", str(charts), stack_file=edited) == 0
    diff = diff_renders(dev_render[0], tmp_path / "new")
    (changes,) = diff.chart_objects["prometheus"].changed.values()
    assert [(c.path, c.before, c.after) for c in changes] == [
        (
            "spec.template.spec.containers[prometheus-server].args[0]",
            "--storage.tsdb.retention.time=2d",
            "--storage.tsdb.retention.time=3d",
        )
    ]
    assert list(diff.chart_objects) == ["prometheus"]


def test_helm_comes_from_helm_then_path_then_the_pinned_build(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    fake = tmp_path / "bin" / "helm"
    fake.parent.mkdir()
    fake.write_text("#!/bin/sh\n")
    fake.chmod(0o755)
    monkeypatch.setenv("HELM", str(fake))
    assert find_helm() == fake
    monkeypatch.delenv("HELM")
    monkeypatch.setenv("PATH", str(fake.parent))
    assert find_helm() == fake
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    if pinned_helm().is_file():
        assert find_helm() == pinned_helm()
    else:
        with pytest.raises(HelmNotFoundError, match=re.escape(INSTALL_COMMAND)):
            find_helm()


def test_the_pinned_helm_is_the_checked_official_build() -> None:
    if not pinned_helm().is_file():
        pytest.skip(f"{pinned_helm()} is not installed: `make helm` installs it (make test does)")
    assert hashlib.sha256(pinned_helm().read_bytes()).hexdigest() == HELM_SHA256
    version = subprocess.run([str(pinned_helm()), "version", "--short"], capture_output=True, text=True, check=True)
    assert version.stdout.startswith(HELM_VERSION)


def test_a_helm_that_cannot_run_is_one_error(
    tmp_path: Path, charts: Path, monkeypatch: pytest.MonkeyPatch, capsys: Any
) -> None:
    broken = tmp_path / "helm"
    broken.write_bytes(b"\x7fELF but not a program for this machine")
    broken.chmod(0o755)
    monkeypatch.setenv("HELM", str(broken))
    assert render(tmp_path / "out", "--charts-dir", str(charts)) == 2
    (line,) = capsys.readouterr().err.splitlines()
    assert line.startswith("charts: helm template ")
    assert line.endswith("Exec format error")


# --- Where the chart tests take their charts from: the render's own sources -------------------


def test_chart_tests_skip_only_saying_why_the_render_could_not_expand_charts(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setattr(conftest, "GIVEN_CHARTS_DIR", str(tmp_path / "empty"))
    (tmp_path / "empty").mkdir()
    reason = conftest._pinned_charts.__wrapped__()
    assert isinstance(reason, str)
    assert reason.startswith(f"the render cannot expand charts from the directory given ({tmp_path / 'empty'}): ")
    assert reason.endswith(f"is not in {tmp_path / 'empty'}")


def test_without_a_directory_chart_tests_use_the_renders_pull_cache(
    charts: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """No directory given and none beside the checkout: the pull cache the render fills (here
    already holding every pinned chart, so nothing is pulled), and the render expands from it."""
    cache = tmp_path / "cache"
    shutil.copytree(charts, cache)
    monkeypatch.setattr(conftest, "GIVEN_CHARTS_DIR", None)
    monkeypatch.setattr(conftest, "SHARED_CHARTS_DIR", tmp_path / "no-shared")
    monkeypatch.setenv(CACHE_DIR_ENV, str(cache))
    source, what = conftest.chart_source()
    assert (source.directory, source.pull, what) == (cache, True, "the render's pull cache")
    assert conftest._pinned_charts.__wrapped__() == cache
    monkeypatch.delenv(NO_CHARTS_ENV)
    assert render(tmp_path / "out") == 0  # no --charts-dir: the render pulls into, and reads, the same cache
    assert sorted(read_chart_objects(tmp_path / "out")) == sorted(c["name"] for c in read_render(tmp_path / "out")[1])
