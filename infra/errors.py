"""Config problems as people read them: one line each, `path: plain sentence`."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from pydantic import ValidationError

from components.runtimes import RUNTIMES


@dataclass(frozen=True, order=True)
class Problem:
    path: str
    message: str

    def __str__(self) -> str:
        return f"{self.path}: {self.message}" if self.path else self.message


class ConfigError(Exception):
    """The stack config is invalid; carries every problem found, not just the first."""

    def __init__(self, problems: Iterable[Problem]) -> None:
        self.problems = list(problems)
        super().__init__(self.report())

    def report(self) -> str:
        count = len(self.problems)
        lines = [f"invalid stack config ({count} problem{'s' if count != 1 else ''}):"]
        lines += [f"  {problem}" for problem in self.problems]
        return "\n".join(lines)


def format_path(loc: Sequence[int | str]) -> str:
    """('models', 0, 'versions', 1, 'weight') -> models[0].versions[1].weight"""
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += f".{part}" if out else part
    return out


def join_path(base: str, relative: str) -> str:
    if not relative:
        return base
    if not base or relative.startswith("["):
        return base + relative
    return f"{base}.{relative}"


def _strip_runtime_tags(loc: Sequence[int | str]) -> tuple[list[int | str], str | None, int]:
    """Pydantic puts the discriminator's value (the runtime name) into the path; take it out.

    Returns the path, the runtime named in it, and the path's length at the model the tag selected.
    """
    out: list[int | str] = []
    runtime, depth = None, -1
    for index, part in enumerate(loc):
        if isinstance(part, str) and part in RUNTIMES and index > 0 and isinstance(loc[index - 1], int):
            runtime, depth = part, len(out)
            continue
        out.append(part)
    return out, runtime, depth


def _shown(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def problems_from_validation(error: ValidationError, prefix: Sequence[int | str] = ()) -> list[Problem]:
    problems: list[Problem] = []
    for item in error.errors(include_url=False):
        loc, runtime, model_depth = _strip_runtime_tags([*prefix, *item["loc"]])
        path = format_path(loc)
        kind = item["type"]
        ctx = item.get("ctx") or {}
        if kind == "config_problem":
            problems += [Problem(join_path(path, rel), message) for rel, message in ctx["problems"]]
            continue
        if kind == "union_tag_invalid":
            message = f"unknown runtime {ctx['tag']!r}: use one of {', '.join(RUNTIMES)}"
            path = join_path(path, "runtime")
        elif kind == "union_tag_not_found":
            message = f"required: set runtime to one of {', '.join(RUNTIMES)}"
            path = join_path(path, "runtime")
        elif kind == "extra_forbidden":
            key = loc[-1] if loc else ""
            if runtime and len(loc) == model_depth + 1:
                message = f"{key!r} is not a setting of the {runtime} runtime"
            else:
                message = f"unknown setting {key!r}: check its spelling"
        elif kind == "missing":
            message = "required, but not set"
        elif kind == "too_short" and ctx.get("min_length") == 1:
            message = "must not be empty"
        elif kind in ("dict_type", "model_type", "model_attributes_type"):
            message = f"must be a mapping of settings, not {_shown(item['input'])}"
        else:
            message = item["msg"]
            if not kind.startswith(("dns", "quantity", "duration", "model_uri")):
                message += f" (got {_shown(item['input'])})"
        problems.append(Problem(path, message))
    return sorted(set(problems), key=lambda p: (_path_sort_key(p.path), p.message))


def _path_sort_key(path: str) -> list[tuple[int, int | str]]:
    """Sort models[2] before models[10]: split paths into names and numbers."""
    key: list[tuple[int, int | str]] = []
    for token in path.replace("[", ".[").split("."):
        if token.startswith("[") and token.endswith("]") and token[1:-1].isdigit():
            key.append((0, int(token[1:-1])))
        elif token:
            key.append((1, token))
    return key
