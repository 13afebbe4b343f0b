"""A sharded environment as one cluster: the all-features stack split into a platform stack and
three shards (tests/stack/test_fleet.py), rendered with every chart expanded, its renders taken
together, passes the whole-cluster checks the one stack passes."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import yaml

from inference_platform.cli.environment import read_environment
from inference_platform.cli.main import main
from inference_platform.cli.render_files import CHART_OBJECTS, CHARTS, MANIFESTS, OUTPUTS, dump_documents, read_render
from inference_platform.stack.config import StackConfig
from inference_platform.stack.platform_components import platform_edges
from tests.cluster import Cluster
from tests.conftest import charts_dir, full_config, manifests_dir
from tests.pod_security import check_cluster
from tests.stack.test_fleet import PLATFORM, SHARDS, split, write
from tests.stacks import cluster_checks as checks
from tests.stacks.test_cluster import SEAMS
from tests.stacks.test_reachability import declared_edges, reachability

pytestmark = pytest.mark.slow


def merged(renders: Path, stacks: tuple[str, ...], out: Path) -> Path:
    """The stacks' renders as one render directory: every stack's objects, charts and model outputs."""
    (out / CHART_OBJECTS).mkdir(parents=True)
    manifests: list[dict[str, object]] = []
    charts: list[dict[str, object]] = []
    models: dict[str, object] = {}
    for stack in stacks:
        objects, values, outputs = read_render(renders / stack)
        manifests += objects
        charts += values
        models |= outputs.get("models") or {}
        for path in (renders / stack / CHART_OBJECTS).glob("*.yaml"):
            shutil.copy(path, out / CHART_OBJECTS / path.name)
    (out / MANIFESTS).write_text(dump_documents(manifests), encoding="utf-8")
    (out / CHARTS).write_text(dump_documents(charts), encoding="utf-8")
    (out / OUTPUTS).write_text(yaml.safe_dump({"models": models}), encoding="utf-8")
    return out


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Cluster:
    root = tmp_path_factory.mktemp("fleet-cluster")
    paths = write(root / "stacks", split(full_config()))
    command = ["render", "--stack", PLATFORM, "--config", str(paths[PLATFORM]), "--out", str(root / "out")]
    command += ["--shards", "--charts-dir", str(charts_dir()), "--manifests-dir", str(manifests_dir())]
    assert main(command) == 0
    return Cluster.read(merged(root / "out", (PLATFORM, *SHARDS), root / "merged"))


@pytest.mark.parametrize("check", SEAMS.values(), ids=SEAMS.keys())
def test_the_seams_hold_across_the_stacks(cluster: Cluster, check: checks.Check) -> None:
    assert check(cluster) == []


def test_every_pod_meets_its_namespace_pod_security_level(cluster: Cluster) -> None:
    result = check_cluster(cluster)
    assert result.checked == len(list(cluster.pods())) > 0
    assert result.violations == []


def test_every_object_passes_its_schema_and_its_crds_rules(cluster: Cluster) -> None:
    assert checks.kubernetes_schema_problems(cluster.objects, "1.30.4") == []
    assert checks.custom_resource_problems(cluster) == []
    assert checks.cel_problems(cluster) == []


@pytest.fixture(scope="module")
def environment(cluster: Cluster, tmp_path_factory: pytest.TempPathFactory) -> StackConfig:
    """The environment's config as its platform stack reads it (its shards' files beside it)."""
    root = tmp_path_factory.mktemp("fleet-config")
    paths = write(root, split(full_config()))
    return read_environment(paths[PLATFORM], PLATFORM)[1]


def test_the_platform_network_is_the_edge_table_of_the_whole_environment(
    cluster: Cluster, environment: StackConfig
) -> None:
    assert checks.edge_table_problems(cluster, platform_edges(environment), environment.namespace) == []


def test_calls_across_shards_are_open_exactly_as_declared(cluster: Cluster) -> None:
    """bert (one shard) calls embed (another), pipelines (the last) call models of every shard: each
    declared pair is open in the network and the mesh, and no other."""
    declared = declared_edges(full_config())
    files = split(full_config())
    holder = {m["name"]: shard for shard in SHARDS for m in files[shard]["inference-platform:models"]}
    assert ("bert", "embed") in declared
    assert holder["bert"] != holder["embed"]  # a call across shards
    network, mesh = reachability(cluster)
    assert network == declared
    assert mesh == declared
