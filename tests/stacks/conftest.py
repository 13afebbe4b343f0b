"""Stacks rendered whole: the program's objects with every chart expanded by real Helm."""

from __future__ import annotations

import os
import shutil
from dataclasses import dataclass
from pathlib import Path

import pytest
from filelock import FileLock

from inference_platform.cli.charts import DEFAULT_KUBERNETES_VERSION
from inference_platform.cli.main import main
from inference_platform.cli.stack_file import read_stack_file
from inference_platform.stack.config import StackConfig, parse_stack_config, project_values
from tests.cluster import Cluster
from tests.conftest import (
    EXAMPLE_STACKS,
    STACKS,
    charts_dir,
    full_config,
    keda_config,
    manifests_dir,
    model_cache_config,
    stack_file,
    write_stack_file,
)

GENERATED_STACKS = {"all-features": full_config, "keda": keda_config, "model-cache": model_cache_config}
CLUSTER_STACKS = [*STACKS, *GENERATED_STACKS, *EXAMPLE_STACKS]


def stack_config_path(stack: str, root: Path) -> Path:
    """The stack's file: written under `root` for a generated stack, the repository's otherwise."""
    if stack in GENERATED_STACKS:
        return write_stack_file(root / f"Pulumi.{stack}.yaml", GENERATED_STACKS[stack]())
    return stack_file(stack)


@dataclass
class Rendered:
    stack: str
    directory: Path
    cluster: Cluster
    config: StackConfig

    @property
    def kubernetes_version(self) -> str:
        return self.config.platform.kubernetes_version or DEFAULT_KUBERNETES_VERSION


def render_cluster(stack: str, config_path: Path, out: Path) -> Rendered:
    arguments = ["render", "--stack", stack, "--config", str(config_path), "--out", str(out)]
    assert main([*arguments, "--charts-dir", str(charts_dir()), "--manifests-dir", str(manifests_dir())]) == 0
    config = parse_stack_config(project_values(read_stack_file(config_path).config))
    return Rendered(stack, out, Cluster.read(out), config)


def shared_render(stack: str, tmp_path_factory: pytest.TempPathFactory) -> Rendered:
    """A stack of CLUSTER_STACKS rendered with its charts once per test run, whichever worker asks
    first (under a file lock in the directory pytest-xdist's workers share); every caller gets
    its own objects read from that render, free to change them. The render directory itself is
    read-only by convention: a test that edits files copies it first."""
    base = tmp_path_factory.getbasetemp()
    if os.environ.get("PYTEST_XDIST_WORKER"):
        base = base.parent  # popen-gwN/..: the same for every worker of this run
    root = base / "shared-renders" / stack
    root.parent.mkdir(exist_ok=True)
    with FileLock(str(root) + ".lock"):
        complete = root / "complete"
        if not complete.exists():
            shutil.rmtree(root, ignore_errors=True)
            root.mkdir()
            render_cluster(stack, stack_config_path(stack, root), root / "render")
            complete.touch()
    # A generated stack's file was written beside its render; the others are the repository's.
    config_path = root / f"Pulumi.{stack}.yaml" if stack in GENERATED_STACKS else stack_file(stack)
    config = parse_stack_config(project_values(read_stack_file(config_path).config))
    return Rendered(stack, root / "render", Cluster.read(root / "render"), config)


@pytest.fixture(scope="session", params=CLUSTER_STACKS)
def rendered(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Rendered:
    """Each stack file, the all-features stack and the same with KEDA, and the example stacks,
    rendered with their charts expanded (once per run: `shared_render`)."""
    return shared_render(request.param, tmp_path_factory)
