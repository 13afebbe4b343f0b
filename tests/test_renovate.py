"""renovate.json finds every pin: each image, chart and manifest pin in pins.py is matched by
exactly one of its regex managers, with the datasource, package and version the pin is; every
requirements file is the pip_requirements manager's, every workflow the github-actions manager's.

Renovate itself does not run here (it is a Node.js service that reads the registries): the
managers' `matchStrings` are applied with Python's `re` after turning their named groups
`(?<name>...)` into Python's `(?P<name>...)`, and `managerFilePatterns` (`/regex/`) likewise to
the repository's files. The pins are read from pins.py itself (its module-level assignments), so
a pin added there without a manager fails here.
"""

from __future__ import annotations

import ast
import json
import re
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import pytest

from inference_platform import pins

ROOT = Path(__file__).resolve().parents[1]
PINS = ROOT / "src" / "inference_platform" / "pins.py"
PINS_RELATIVE = PINS.relative_to(ROOT).as_posix()
CONFIG: dict[str, Any] = json.loads((ROOT / "renovate.json").read_text(encoding="utf-8"))
VERSION = re.compile(r"v?[0-9]+(\.[0-9]+)+")
FIELDS = ("datasource", "depName", "currentValue", "registryUrl")
# Pins that are not an upstream's release, each with why.
NOT_UPSTREAM = {
    "POD_SECURITY_VERSION": "the Pod Security Standards' version: the default Kubernetes minor the render assumes",
}


@dataclass(frozen=True)
class Pin:
    name: str
    line: int
    """The line of the version's literal."""
    datasource: str
    depName: str  # noqa: N815 (Renovate's field name)
    currentValue: str  # noqa: N815
    registryUrl: str | None = None  # noqa: N815
    charts: tuple[str, ...] = ()
    """The charts a helm pin's version is for (several where they share it)."""

    def agrees(self, fields: dict[str, str | None]) -> bool:
        mine = {f: getattr(self, f) for f in FIELDS}
        if self.charts and fields.get("depName") in self.charts:
            mine["depName"] = fields["depName"]
        return mine == fields


def python_regex(pattern: str) -> re.Pattern[str]:
    """A Renovate pattern (ECMAScript, RE2) for Python's `re`: named groups are spelled differently."""
    return re.compile(pattern.replace("(?<", "(?P<").replace("(?P<=", "(?<=").replace("(?P<!", "(?<!"))


def file_pattern(pattern: str) -> re.Pattern[str]:
    assert pattern.startswith("/"), f"{pattern}: not a /regex/ pattern"
    assert pattern.endswith("/"), f"{pattern}: not a /regex/ pattern"
    return python_regex(pattern[1:-1])


def _assignments() -> Iterator[tuple[str, ast.expr, int]]:
    for node in ast.parse(PINS.read_text(encoding="utf-8")).body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            yield node.targets[0].id, node.value, node.lineno


def expected_pins() -> list[Pin]:
    """Each version pins.py pins, and what Renovate must know to look it up."""
    lines = {name: line for name, _, line in _assignments()}
    # Versions several charts share (ISTIO_VERSION): pinned once, where they are assigned.
    shared = {
        v.args[2].id
        for _, v, _ in _assignments()
        if isinstance(v, ast.Call) and len(v.args) == 3 and isinstance(v.args[2], ast.Name)
    }
    found: dict[int, Pin] = {}
    unknown = []
    for name, value, line in _assignments():
        pinned = getattr(pins, name)
        if isinstance(pinned, str) and name.endswith("_IMAGE"):
            image, tag = pinned.rsplit(":", 1)
            found[line] = Pin(name, line, "docker", image, tag)
        elif isinstance(pinned, pins.ChartPin):
            assert isinstance(value, ast.Call)
            version = value.args[2]
            at = lines[version.id] if isinstance(version, ast.Name) else line
            if pinned.is_oci:
                found.setdefault(at, Pin(name, at, "docker", pinned.reference.removeprefix("oci://"), pinned.version))
            elif at in found:
                # A version several charts share: any of them names it to Renovate.
                found[at] = replace(found[at], charts=(*found[at].charts, pinned.chart))
            else:
                found[at] = Pin(name, at, "helm", pinned.chart, pinned.version, pinned.repository, (pinned.chart,))
        elif isinstance(pinned, pins.ManifestPin):
            match = re.fullmatch(r"https://github\.com/([^/]+/[^/]+)/releases/download/([^/]+)/.+", pinned.url)
            assert match, f"{name}: {pinned.url} is no GitHub release's file; teach this test and renovate.json"
            found[line] = Pin(name, line, "github-releases", match[1], match[2])
        elif isinstance(pinned, str) and VERSION.fullmatch(pinned) and name not in {*NOT_UPSTREAM, *shared}:
            unknown.append(name)
    assert not unknown, f"version pins this test does not know how Renovate looks up: {unknown}"
    return sorted(found.values(), key=lambda pin: pin.line)


def _template(manager: dict[str, Any], groups: dict[str, str | None], field: str) -> str | None:
    if groups.get(field):
        return groups[field]
    template = manager.get(f"{field}Template")
    return None if template is None else str(template)


@dataclass(frozen=True)
class Match:
    manager: str
    first_line: int
    last_line: int
    fields: dict[str, str | None]


def manager_matches(text: str, path: str) -> list[Match]:
    """What every regex manager whose files include `path` extracts from `text`."""
    found = []
    for manager in CONFIG.get("customManagers", []):
        assert manager["customType"] == "regex"
        if not any(file_pattern(p).search(path) for p in manager["managerFilePatterns"]):
            continue
        for pattern in manager["matchStrings"]:
            for match in python_regex(pattern).finditer(text):
                start = match.start() + len(match.group(0)) - len(match.group(0).lstrip("\n"))
                first = text.count("\n", 0, start) + 1
                last = text.count("\n", 0, match.end() - 1) + 1
                fields = {f: _template(manager, match.groupdict(), f) for f in FIELDS}
                found.append(Match(manager.get("description", pattern), first, last, fields))
    return found


def test_every_pin_in_pins_py_is_found_once_as_what_it_is() -> None:
    text = PINS.read_text(encoding="utf-8")
    matches = manager_matches(text, PINS_RELATIVE)
    expected = expected_pins()
    assert len(expected) >= 20, "pins.py's pins were not found"
    problems = []
    for pin in expected:
        mine = [m for m in matches if m.first_line <= pin.line <= m.last_line]
        want = {f: getattr(pin, f) for f in FIELDS}
        if len(mine) != 1:
            problems.append(f"{pin.name} (line {pin.line}): {len(mine)} managers match it, not 1")
        elif not pin.agrees(mine[0].fields):
            problems.append(f"{pin.name}: {mine[0].manager} reads {mine[0].fields}, the pin is {want}")
    matched_lines = {pin.line for pin in expected}
    for match in matches:
        if not any(match.first_line <= line <= match.last_line for line in matched_lines):
            problems.append(f"{match.manager} matches lines {match.first_line}-{match.last_line}, no pin")
    assert not problems, "\n".join(problems)


def test_a_pin_added_without_a_manager_is_caught() -> None:
    """The check above on pins.py with a pin no manager's pattern knows (a chart named by variables
    without its `# renovate:` line): it is matched by no manager."""
    text = (
        PINS.read_text(encoding="utf-8")
        + '\nNEW_REPOSITORY = "https://example.com/charts"\nNEW = ChartPin(NEW_REPOSITORY, "new", "1.0.0")\n'
    )
    line = text.count("\n")
    assert not [m for m in manager_matches(text, PINS_RELATIVE) if m.first_line <= line <= m.last_line]
    image = PINS.read_text(encoding="utf-8") + '\nNEW_IMAGE = "docker.io/example/new:1.0.0"\n'
    found = [m for m in manager_matches(image, PINS_RELATIVE) if m.first_line <= image.count("\n") <= m.last_line]
    assert [m.fields for m in found] == [
        {"datasource": "docker", "depName": "docker.io/example/new", "currentValue": "1.0.0", "registryUrl": None}
    ]


def _tracked(pattern: str) -> list[str]:
    try:
        listed = subprocess.run(["git", "ls-files", pattern], cwd=ROOT, capture_output=True, text=True, check=True)
    except (OSError, subprocess.CalledProcessError) as error:
        pytest.skip(f"git cannot list the checkout's files here: {error}")
    return listed.stdout.split()


@pytest.mark.parametrize(
    ("manager", "files"),
    [("pip_requirements", "*requirements*.txt"), ("github-actions", ".github/workflows/*")],
)
def test_every_requirements_file_and_workflow_has_its_manager(manager: str, files: str) -> None:
    tracked = _tracked(files)
    assert tracked
    assert manager in CONFIG["enabledManagers"]
    patterns = [file_pattern(p) for p in CONFIG[manager]["managerFilePatterns"]]
    assert [f for f in tracked if not any(p.search(f) for p in patterns)] == []


def test_the_regex_managers_are_enabled() -> None:
    assert "custom.regex" in CONFIG["enabledManagers"]
