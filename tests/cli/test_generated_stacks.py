"""Generated valid stacks (the strategy of tests/cli/test_hostile_config.py): each renders and
passes the schemas, Istio's types and the policy pack's rules, and checkov finds nothing in any.
A module of its own, so pytest-xdist (--dist loadfile) runs it beside the broken configs."""

from __future__ import annotations

import itertools
from pathlib import Path

import pytest
from hypothesis import given, settings

from inference_platform.cli.render_files import CHARTS, OUTPUTS
from tests.cli.test_hostile_config import SETTINGS, Config, check, stack_configs
from tests.stacks.test_checkov import scan

VALID_EXAMPLES = 60


@pytest.fixture(scope="module")
def valid_renders(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Renders of generated valid stacks, each checked by the schemas, Istio's types and the
    policy pack's rules as it is made; kept for one checkov scan over all of them."""
    root = tmp_path_factory.mktemp("valid")
    counter = itertools.count()

    @settings(max_examples=VALID_EXAMPLES, **SETTINGS)  # type: ignore[arg-type]
    @given(stack_configs())
    def render_valid(config: Config) -> None:
        out = root / f"stack-{next(counter)}"
        assert check(config, out) == 0
        (out / CHARTS).unlink()  # Helm values and outputs, not Kubernetes objects
        (out / OUTPUTS).unlink()

    render_valid()
    return root


def test_generated_valid_configs_render_and_pass_every_validator(valid_renders: Path) -> None:
    assert len(list(valid_renders.iterdir())) == VALID_EXAMPLES


@pytest.mark.slow
def test_checkov_finds_nothing_in_the_generated_stacks(valid_renders: Path) -> None:
    report = scan(valid_renders)
    assert [(f["check_id"], f["resource"]) for f in report["results"]["failed_checks"]] == []
    assert report["summary"]["parsing_errors"] == 0
    assert report["summary"]["passed"] > 100 * VALID_EXAMPLES
