"""Runs the policy pack's tests in the pack's own environment (.venv-policy, built by `make test`)."""

from __future__ import annotations

import subprocess
from pathlib import Path

from tests.conftest import ROOT

POLICY_PYTHON = ROOT / ".venv-policy" / "bin" / "python"


def test_policy_pack_unit_tests_pass_in_the_packs_environment() -> None:
    assert POLICY_PYTHON.exists(), "the policy pack has its own venv: run `make test`, which builds it"
    done = subprocess.run(
        [
            str(POLICY_PYTHON),
            "-m",
            "pytest",
            "-q",
            "--noconftest",
            "-p",
            "no:cacheprovider",
            str(Path(__file__).with_name("test_policies.py")),
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
        timeout=600,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert " passed" in done.stdout
