"""docs/serving.md's list of the runtimes whose versions get a ConfigMap (their generated config),
against what the program registers for the all-features stack, which has a model of every runtime."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from inference_platform.cli.render import RenderResult, run_program
from inference_platform.cli.stack_file import read_stack_file
from inference_platform.serving.runtimes import RUNTIMES
from inference_platform.stack.config import parse_stack_config, project_values
from tests.conftest import full_config, write_stack_file

SERVING_DOC = Path(__file__).resolve().parents[2] / "docs" / "serving.md"
CONFIG_MAP = "kubernetes:core/v1:ConfigMap"


@pytest.fixture(scope="module")
def full(tmp_path_factory: pytest.TempPathFactory) -> tuple[RenderResult, dict[str, str]]:
    config = full_config()
    path = write_stack_file(tmp_path_factory.mktemp("config-maps") / "Pulumi.full.yaml", config)
    stack = parse_stack_config(project_values(full_config(decrypted=True)))
    versions: dict[str, str] = {f"{m.name}-{v.name}": m.runtime for m in stack.models for v in m.versions}
    return run_program("full", read_stack_file(path)), versions


def documented() -> set[str]:
    text = " ".join(SERVING_DOC.read_text(encoding="utf-8").split())
    match = re.search(r"\(runtimes with a ConfigMap: ([^;]+);", text)
    assert match, "docs/serving.md no longer lists the runtimes whose versions get a ConfigMap"
    return set(re.findall(r"`([a-z-]+)`", match[1]))


def test_the_runtimes_whose_versions_get_a_config_map_are_the_documented_ones(
    full: tuple[RenderResult, dict[str, str]],
) -> None:
    result, versions = full
    assert set(versions.values()) == set(RUNTIMES), "the all-features stack no longer has every runtime"
    config_maps = {r.name for r in result.registrations if r.type.endswith(CONFIG_MAP)}
    with_config_map = {runtime for name, runtime in versions.items() if name in config_maps}
    without = {runtime for name, runtime in versions.items() if name not in config_maps}
    assert not with_config_map & without, "a runtime gets a ConfigMap for some versions only"
    assert with_config_map == documented()
