"""The library as another team gets it: a wheel built from this checkout, installed into a fresh
virtual environment with nothing else of the checkout, and a program outside the repository (the
Python example) that composes IngressGateway, Prometheus and InferenceService, rendered under the
SDK's mocks with the installed library's own offline render."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import venv
from pathlib import Path

import pytest

from tests.conftest import ROOT

pytestmark = pytest.mark.slow

CONSUMER = '''
"""Runs ./program/__main__.py under the installed library's recording mocks; prints what registered."""
import json, runpy, sys
import inference_platform
from inference_platform.cli.render import record

result = record(lambda: runpy.run_path("program", run_name="__main__"), "dev")
print(json.dumps({
    "library": inference_platform.__file__,
    "registered": sorted([r.type, r.name, r.inputs.get("kind")] for r in result.registrations),
    "outputs": result.outputs,
}))
'''


def documented_install() -> tuple[str, list[str]]:
    """docs/library.md's two lines: the shell command that writes the pins as constraints, and the
    pip install of the wheel with them (its arguments after `pip`)."""
    text = (ROOT / "docs" / "library.md").read_text(encoding="utf-8")
    (pins,) = [line for line in text.splitlines() if line.startswith("grep ") and "requirements.txt" in line]
    (install,) = [line for line in text.splitlines() if line.startswith("pip install ") and " -c " in line]
    return pins, install.split()[1:]


def run(*command: str | Path, cwd: Path, env: dict[str, str] | None = None) -> str:
    done = subprocess.run([str(c) for c in command], cwd=cwd, env=env, capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return done.stdout


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A fresh venv's python, with the wheel (and its dependencies at the program's pins) installed."""
    root = tmp_path_factory.mktemp("wheel")
    source = root / "source"
    # Only what the wheel is built from: a clean copy, so no stray file of the checkout can leak in.
    shutil.copytree(ROOT / "src", source / "src", ignore=shutil.ignore_patterns("__pycache__"))
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, source / name)
    run(sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "--wheel-dir", root / "dist", source, cwd=root)
    (wheel,) = (root / "dist").glob("inference_platform-*.whl")
    venv.create(root / "venv", with_pip=True)
    python = root / "venv" / "bin" / "python"
    # As docs/library.md says: the pins, less the install of this checkout, as constraints.
    pins, install = documented_install()
    shutil.copy(ROOT / "requirements.txt", root / "requirements.txt")
    run("bash", "-c", pins, cwd=root)
    assert install[1] == wheel.name
    run(python, "-m", "pip", *install[:1], "--quiet", wheel, *install[2:], cwd=root)
    return python


def test_the_wheel_holds_the_library_typed_and_its_command(installed: Path) -> None:
    where = "import inference_platform, os; print(os.path.dirname(inference_platform.__file__))"
    site = Path(run(installed, "-c", where, cwd=installed.parent).strip())
    assert (site / "py.typed").is_file()
    assert not site.is_relative_to(ROOT)
    usage = run(installed.parent / "inference-platform", "--help", cwd=installed.parent)
    commands = set(usage.split("{", 1)[1].split("}", 1)[0].split(","))
    assert commands == {
        "render",
        "diff",
        "promote",
        "analyze",
        "rollout",
        "capacity",
        "rehearse",
        "stacks",
        "schema",
        "completion",
    }


def test_a_program_outside_the_repository_composes_the_components(installed: Path, tmp_path: Path) -> None:
    consumer = tmp_path / "consumer"
    (consumer / "program").mkdir(parents=True)
    shutil.copy(ROOT / "examples" / "python" / "__main__.py", consumer / "program" / "__main__.py")
    (consumer / "consumer.py").write_text(CONSUMER, encoding="utf-8")
    environment = {key: value for key, value in os.environ.items() if key not in ("PYTHONPATH", "VIRTUAL_ENV")}
    report = json.loads(run(installed, "consumer.py", cwd=consumer, env=environment))
    assert Path(report["library"]).is_relative_to(installed.parent.parent), "the library came from the checkout"
    registered = {(kind or type_, name) for type_, name, kind in report["registered"]}
    assert {
        ("inference-platform:platform:IngressGateway", "ingress"),
        ("inference-platform:platform:Prometheus", "prometheus"),
        ("inference-platform:serving:ModelNamespace", "service"),
        ("inference-platform:serving:InferenceService", "iris"),
        ("Deployment", "iris-v1"),
        ("Deployment", "iris-v2"),
        ("VirtualService", "iris"),
        ("NetworkPolicy", "iris"),
        ("kubernetes:helm.sh/v4:Chart", "istiod"),
    } <= registered
    assert report["outputs"]["irisUrls"] == [
        "http://iris.models.example.com/",
        "http://models.example.com/models/iris/",
    ]
