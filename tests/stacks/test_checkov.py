"""checkov scans every stack's rendered manifests: no failed check outside the documented skip list."""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path
from typing import Any

import pytest

from inference_platform.cli.main import main
from tests.conftest import EXAMPLE_STACKS, ROOT, STACKS
from tests.stacks.conftest import GENERATED_STACKS, stack_config_path

pytestmark = pytest.mark.slow

CHECKOV = ROOT / ".venv-checkov" / "bin" / "checkov"
CONFIG = ROOT / ".checkov.yaml"


def scan(directory: Path) -> dict[str, Any]:
    assert CHECKOV.exists(), "checkov lives in .venv-checkov: run `make test`, which builds it"
    done = subprocess.run(
        [
            str(CHECKOV),
            "--config-file",
            str(CONFIG),
            "-d",
            str(directory),
            "--quiet",
            "--compact",
            "-o",
            "json",
            "--skip-download",
        ],
        capture_output=True,
        text=True,
        check=False,
        # A guard against a hung scan, not a budget: 60 generated stacks take a minute or two alone,
        # several times that beside the rest of the suite on two busy cores.
        timeout=900,
    )
    report = json.loads(done.stdout)
    result: dict[str, Any] = report if isinstance(report, dict) else report[0]
    return result


def render(name: str, config_path: Path, out: Path) -> Path:
    assert main(["render", "--stack", name, "--config", str(config_path), "--out", str(out)]) == 0
    (out / "charts.yaml").unlink()  # Helm values, not Kubernetes objects
    (out / "outputs.yaml").unlink()
    return out


@pytest.mark.parametrize("stack", [*STACKS, *GENERATED_STACKS, *EXAMPLE_STACKS])
def test_no_failed_checks(stack: str, tmp_path: Path) -> None:
    report = scan(render(stack, stack_config_path(stack, tmp_path), tmp_path / "out"))

    failed = [(f["check_id"], f["resource"]) for f in report["results"]["failed_checks"]]
    assert failed == []
    assert report["summary"]["passed"] > 50  # a stack of one model passes about 90
    assert report["summary"]["parsing_errors"] == 0


def test_every_skipped_check_has_a_reason() -> None:
    lines = CONFIG.read_text().splitlines()
    skipped = [(i, line.strip()[2:]) for i, line in enumerate(lines) if re.fullmatch(r"\s*- CKV\w+", line)]
    assert skipped, "the skip list is where it is expected"
    for index, check in skipped:
        assert lines[index - 1].strip().startswith(f"# {check} ("), f"{check} has no reason on the line above"


def test_checkov_would_catch_a_weakened_pod(tmp_path: Path) -> None:
    out = render("dev", ROOT / "Pulumi.dev.yaml", tmp_path / "out")
    text = (out / "manifests.yaml").read_text()
    (out / "manifests.yaml").write_text(
        text.replace("allowPrivilegeEscalation: false", "allowPrivilegeEscalation: true")
    )
    failed = {f["check_id"] for f in scan(out)["results"]["failed_checks"]}
    assert "CKV_K8S_20" in failed
