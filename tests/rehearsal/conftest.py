"""The rehearsals' tools and charts: tools/bin/rehearsal (`make rehearsal-tools`), the pinned charts
and manifests beside the checkout (../shared, as in CI). Collected only with INFRA_REHEARSAL=1
(`make rehearsal`; tests/conftest.py)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from inference_platform.cli.rehearsal.control_plane import TOOLS, ControlPlaneError, find_tools
from tests.conftest import ROOT, SHARED_CHARTS_DIR, SHARED_MANIFESTS_DIR

TOOLS_DIR = ROOT / "tools" / "bin" / "rehearsal"
REHEARSAL_SECONDS = 900


@pytest.fixture(scope="session")
def tools_dir() -> Path:
    try:
        find_tools(TOOLS_DIR, TOOLS)
    except ControlPlaneError as error:
        pytest.fail(f"the rehearsal's tools are not built: {error}")
    return TOOLS_DIR


@pytest.fixture(scope="session")
def charts_dir() -> Path:
    if not SHARED_CHARTS_DIR.is_dir():
        pytest.skip(
            f"the pinned chart tarballs are not at {SHARED_CHARTS_DIR} (../shared/charts beside the checkout, as in "
            "CI): a rehearsal installs every chart from them, never from the network"
        )
    return SHARED_CHARTS_DIR


@dataclass
class Rehearsal:
    code: int
    report: dict[str, Any]
    markdown: str
    stderr: str
    stored: list[dict[str, Any]] | None

    def step(self, name: str) -> dict[str, Any]:
        return next(step for step in self.report["steps"] if step["name"] == name)


def rehearse(
    tmp: Path,
    tools: Path,
    charts: Path,
    stack: str,
    config: Path,
    *extra: str,
    stored: bool = False,
    passphrase: str | None = None,
) -> Rehearsal:
    """`python -m infra rehearse` as a user runs it, its reports written to `tmp`; with the stack's
    `passphrase` in $PULUMI_CONFIG_PASSPHRASE, or without one."""
    report, text, objects = tmp / "report.json", tmp / "report.md", tmp / "stored.json"
    command = [
        sys.executable, "-m", "infra", "rehearse", "--stack", stack, "--config", str(config),
        "--tools-dir", str(tools), "--charts-dir", str(charts), "--manifests-dir", str(SHARED_MANIFESTS_DIR),
        "--json", str(report), "--markdown", str(text), *(["--stored", str(objects)] if stored else []), *extra,
    ]  # fmt: skip
    env = {key: value for key, value in os.environ.items() if key != "PULUMI_CONFIG_PASSPHRASE"}
    if passphrase is not None:
        env["PULUMI_CONFIG_PASSPHRASE"] = passphrase
    done = subprocess.run(
        command, cwd=ROOT, capture_output=True, text=True, timeout=REHEARSAL_SECONDS, env=env, check=False
    )
    if not report.is_file():
        pytest.fail(f"rehearse wrote no report (exit {done.returncode}):\n{done.stderr[-4000:]}")
    return Rehearsal(
        done.returncode,
        json.loads(report.read_text()),
        text.read_text(),
        done.stderr,
        json.loads(objects.read_text()) if stored and objects.is_file() else None,
    )
