"""What the README and the docs tell a reader to run exists once the Makefile's targets have run:
the environments they name are ones `make` builds (read from make's own dry run, not retyped), the
commands after `make render` name only what it builds, and the machine's requirements name what
the targets run (npm for the pinned Helm, the tools `.ci/run` installs for the tests)."""

from __future__ import annotations

import re
import subprocess
from functools import cache
from pathlib import Path

import pytest

from inference_platform.cli import helm
from tests.conftest import ROOT

ENVIRONMENT = re.compile(r"(\.venv[\w.-]*)/bin/")
"""An environment a command runs from: `.venv-render/bin/python`."""
DOCS = sorted((ROOT / "docs").glob("*.md"))


@cache
def built_by(target: str) -> frozenset[str]:
    """The environments `make <target>` builds: the `-m venv DIR` of its dry run, every step made."""
    done = subprocess.run(
        ["make", "--no-print-directory", "-n", "-B", target], cwd=ROOT, capture_output=True, text=True, check=True
    )
    return frozenset(re.findall(r"-m venv (\S+)", done.stdout))


def named(text: str) -> set[str]:
    return set(ENVIRONMENT.findall(text))


def paragraphs(text: str) -> list[str]:
    return [part for part in re.split(r"\n\s*\n", text) if part.strip()]


@pytest.mark.parametrize("path", [ROOT / "README.md", *DOCS], ids=lambda path: path.name)
def test_the_docs_run_commands_from_environments_the_makefile_builds(path: Path) -> None:
    built = built_by("render") | built_by("setup")
    assert {".venv", ".venv-render"} <= built
    assert named(path.read_text(encoding="utf-8")) <= built


def test_what_a_reader_runs_after_make_render_is_what_it_built() -> None:
    """The README's paragraphs that name `make render`, and the render page's opening commands, name
    only `make render`'s environment (`.venv` is `make test`'s, not there after `make render`)."""
    readme = [part for part in paragraphs((ROOT / "README.md").read_text(encoding="utf-8")) if "make render" in part]
    assert any(named(part) for part in readme)  # step 2 names the command it stands for
    for part in readme:
        assert named(part) <= built_by("render"), part
    render_page = (ROOT / "docs" / "render.md").read_text(encoding="utf-8")
    opening = render_page.split("```sh\n", 1)[1].split("```", 1)[0]
    assert named(opening) == built_by("render"), opening


def fresh_machine(path: Path) -> str:
    """The page's sentence of what a fresh machine needs for the two commands."""
    found = re.search(r"On a fresh machine with (.+?):\n", path.read_text(encoding="utf-8"), re.DOTALL)
    assert found is not None, path
    return found[1]


def test_make_render_needs_npm_and_the_docs_say_so(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The pinned Helm's installer (what `make render` runs before rendering) runs npm: on a machine
    without it, it fails at npm; the README and the setup page name npm among the requirements."""
    assert "inference_platform.cli.helm" in "\n".join(
        line
        for line in subprocess.run(
            ["make", "--no-print-directory", "-n", "-B", "render"], cwd=ROOT, capture_output=True, text=True, check=True
        ).stdout.splitlines()
    )
    monkeypatch.setenv("PATH", str(tmp_path))  # nothing on it
    with pytest.raises(FileNotFoundError) as missing:
        helm.install(tmp_path / "helm")
    assert missing.value.filename == "npm"
    for path in (ROOT / "README.md", ROOT / "docs" / "setup.md"):
        sentence = fresh_machine(path)
        assert all(word in sentence for word in ("Python 3.11", "`make`", "npm")), sentence


def test_the_readme_names_every_tool_ci_installs_for_the_tests() -> None:
    """`.ci/run` installs what the tests need beside the environments (`command -v TOOL || ...`):
    the README's sentence of what the tests also need names each."""
    tools = re.findall(r"command -v (\w+)", (ROOT / ".ci" / "run").read_text(encoding="utf-8"))
    assert tools
    readme = " ".join((ROOT / "README.md").read_text(encoding="utf-8").split())
    sentence = readme.split("the tests also need", 1)[1].split(".ci/run", 1)[0]
    assert all(tool.lower() in sentence.lower() for tool in tools), (tools, sentence)
