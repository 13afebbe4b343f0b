"""The Pulumi project the tools run in: the nearest Pulumi.yaml at or above the working directory,
where the Pulumi CLI looks too. Its program is what the offline render runs, its name the
namespace of its config keys; its tools/ is where `python -m inference_platform.cli.helm` (`make
helm`) puts the pinned Helm."""

from __future__ import annotations

from pathlib import Path
from typing import Any

PROJECT_FILE = "Pulumi.yaml"


class ProgramNotFoundError(Exception):
    """No Pulumi project around the working directory, or one whose `main` is missing."""


def project_dir(start: Path | None = None) -> Path | None:
    """The directory of the nearest Pulumi.yaml at or above `start` (the working directory)."""
    here = (start or Path.cwd()).resolve()
    return next((directory for directory in (here, *here.parents) if (directory / PROJECT_FILE).is_file()), None)


def project_name(start: Path | None = None) -> str | None:
    """The `name` of the nearest Pulumi.yaml (the namespace of its stack files' config keys);
    None without one."""
    directory = project_dir(start)
    if directory is None:
        return None
    settings = _settings(directory)
    name = settings.get("name") if isinstance(settings, dict) else None
    return str(name) if name else None


def project_program(start: Path | None = None) -> Path:
    """The program `pulumi up` runs: the project's `main` (the project's directory by default)."""
    directory = project_dir(start)
    if directory is None:
        here = (start or Path.cwd()).resolve()
        raise ProgramNotFoundError(f"no {PROJECT_FILE} in {here} or above it: run from the Pulumi project's directory")
    settings = _settings(directory)
    main = directory / str(settings.get("main") or ".")
    if not main.exists():
        raise ProgramNotFoundError(
            f"{directory / PROJECT_FILE} names main: {settings.get('main')}, which does not exist"
        )
    return main


def _settings(directory: Path) -> Any:
    """The project file's YAML (PyYAML imported here: `--help` reads no project and imports none)."""
    import yaml  # noqa: PLC0415

    return yaml.safe_load((directory / PROJECT_FILE).read_text(encoding="utf-8")) or {}
