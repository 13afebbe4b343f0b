"""The layers of the library hold: import-linter's contracts (pyproject.toml) pass on the source,
and each one fails on a deliberate break of it in a copy (an upward import, a circle inside a
layer, the library reaching for the program), imports under TYPE_CHECKING and inside functions
included."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import ROOT

LINT_IMPORTS = Path(sys.executable).with_name("lint-imports")
LAYERS = "Layers: each imports only those below it"
CIRCLES = "No circles between sibling modules, at any depth"
PROGRAM = "The library knows nothing of the program that runs it"


@pytest.fixture
def copy(tmp_path: Path) -> Path:
    """The library, the program and the contracts, copied where a change cannot touch the checkout."""
    shutil.copytree(ROOT / "src" / "inference_platform", tmp_path / "inference_platform")
    shutil.copytree(ROOT / "infra", tmp_path / "infra")
    shutil.copy(ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    return tmp_path


def lint(root: Path) -> dict[str, str]:
    """Each contract's verdict (KEPT or BROKEN) for the packages under `root`."""
    done = subprocess.run(
        [str(LINT_IMPORTS), "--config", str(root / "pyproject.toml"), "--no-cache"],
        cwd=root,
        env={"PYTHONPATH": str(root), "PATH": str(LINT_IMPORTS.parent), "NO_COLOR": "1"},
        capture_output=True,
        text=True,
        check=False,
    )
    verdicts: dict[str, str] = {}
    for line in done.stdout.splitlines():
        for contract in (LAYERS, CIRCLES, PROGRAM):
            verdict = line.removeprefix(contract).strip()
            if line.startswith(contract) and verdict in ("KEPT", "BROKEN"):
                verdicts.setdefault(contract, verdict)
    assert len(verdicts) == 3, done.stdout + done.stderr
    assert (done.returncode == 0) == all(v == "KEPT" for v in verdicts.values())
    return verdicts


def add(path: Path, code: str) -> None:
    text = path.read_text(encoding="utf-8")
    # after the module's docstring and future import, before anything else
    marker = "from __future__ import annotations\n"
    path.write_text(text.replace(marker, marker + code, 1) if marker in text else code + text, encoding="utf-8")


def test_the_source_keeps_every_contract(copy: Path) -> None:
    assert lint(copy) == {LAYERS: "KEPT", CIRCLES: "KEPT", PROGRAM: "KEPT"}


def test_an_upward_import_breaks_the_layers(copy: Path) -> None:
    """serving importing the stack layer: the layers break, and so does acyclicity (stack imports serving)."""
    add(copy / "inference_platform" / "serving" / "gpu.py", "from inference_platform.stack import config as _\n")
    assert lint(copy) == {LAYERS: "BROKEN", CIRCLES: "BROKEN", PROGRAM: "KEPT"}


def test_an_upward_import_inside_a_function_breaks_the_layers(copy: Path) -> None:
    add(
        copy / "inference_platform" / "platform" / "prometheus.py",
        "def _rules():\n    from inference_platform.analysis import comparison\n    return comparison\n",
    )
    assert lint(copy) == {LAYERS: "BROKEN", CIRCLES: "BROKEN", PROGRAM: "KEPT"}


def test_an_import_between_independent_siblings_breaks_the_layers_alone(copy: Path) -> None:
    """kube, pins and config share the lowest layer and know nothing of each other; no circle here."""
    add(copy / "inference_platform" / "kube.py", "from inference_platform import pins as _\n")
    assert lint(copy) == {LAYERS: "BROKEN", CIRCLES: "KEPT", PROGRAM: "KEPT"}


def test_a_circle_inside_a_layer_breaks_the_acyclic_contract_even_under_type_checking(copy: Path) -> None:
    # The circle the library started from: model_spec -> runtimes/base -> model_spec.
    add(
        copy / "inference_platform" / "serving" / "model_spec.py",
        "from typing import TYPE_CHECKING\n"
        "if TYPE_CHECKING:\n    from inference_platform.serving.runtimes import base\n",
    )
    assert lint(copy) == {LAYERS: "KEPT", CIRCLES: "BROKEN", PROGRAM: "KEPT"}


def test_the_library_reaching_for_the_program_breaks_its_contract(copy: Path) -> None:
    add(copy / "inference_platform" / "stack" / "deploy.py", "def _entry():\n    import infra\n    return infra\n")
    assert lint(copy) == {LAYERS: "KEPT", CIRCLES: "KEPT", PROGRAM: "BROKEN"}


def test_a_package_outside_the_layers_breaks_them(copy: Path) -> None:
    """`exhaustive`: a new top-level package must be given its place."""
    (copy / "inference_platform" / "extras").mkdir()
    (copy / "inference_platform" / "extras" / "__init__.py").write_text('"""Somewhere new."""\n', encoding="utf-8")
    assert lint(copy)[LAYERS] == "BROKEN"
