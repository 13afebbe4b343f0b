"""Config problems as people read them: one line each, `path: plain sentence`."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from pydantic import ValidationError

from components.gpu import GPU_MODES
from components.runtimes import RUNTIMES

# Discriminated unions: the key that selects the variant, its values, and what it is called.
# Pydantic puts the selected value into error paths; reports take it out again.
UNIONS = {"runtime": (RUNTIMES, "runtime"), "mode": (GPU_MODES, "GPU mode")}
TAGS = {tag for tags, _ in UNIONS.values() for tag in tags}


def printable(text: str) -> str:
    """Text with control and other unprintable characters escaped (\\x1e), so that a key or value
    from the config can never break a report into misleading lines."""
    return "".join(c if c.isprintable() else c.encode("unicode_escape").decode("ascii") for c in text)


@dataclass(frozen=True, order=True)
class Problem:
    path: str
    message: str

    def __str__(self) -> str:
        text = f"{self.path}: {self.message}" if self.path else self.message
        return printable(text)


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


def _strip_tags(loc: Sequence[int | str]) -> tuple[list[int | str], str | None, int]:
    """Take the discriminators' values out of a path.

    Returns the path, the runtime named in it (if any), and the path's length at the model
    that runtime selected.
    """
    out: list[int | str] = []
    runtime, depth = None, -1
    for index, part in enumerate(loc):
        after_union = index > 0 and (isinstance(loc[index - 1], int) or loc[index - 1] == "gpu")
        if isinstance(part, str) and part in TAGS and after_union:
            if part in RUNTIMES:
                runtime, depth = part, len(out)
            continue
        out.append(part)
    return out, runtime, depth


def _shown(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _message(item: Any, loc: list[int | str], runtime: str | None, model_depth: int) -> tuple[str, str]:
    """(extra path, sentence) for one pydantic error."""
    kind = item["type"]
    ctx = item.get("ctx") or {}
    if kind in ("union_tag_invalid", "union_tag_not_found"):
        discriminator = str(ctx["discriminator"]).strip("'")
        tags, what = UNIONS[discriminator]
        if kind == "union_tag_invalid":
            return discriminator, f"unknown {what} {ctx['tag']!r}: use one of {', '.join(tags)}"
        return discriminator, f"required: set {discriminator} to one of {', '.join(tags)}"
    if kind == "extra_forbidden":
        if runtime and len(loc) == model_depth + 1:
            return "", f"{loc[-1]!r} is not a setting of the {runtime} runtime"
        return "", f"unknown setting {loc[-1]!r}: check its spelling"
    if kind == "missing":
        return "", "required, but not set"
    if kind == "too_short" and ctx.get("min_length") == 1:
        return "", "must not be empty"
    if kind in ("dict_type", "model_type", "model_attributes_type"):
        return "", f"must be a mapping of settings, not {_shown(item['input'])}"
    message = str(item["msg"])
    if not kind.startswith(("dns", "quantity", "duration", "model_uri")):
        message += f" (got {_shown(item['input'])})"
    return "", message


def problems_from_validation(error: ValidationError, prefix: Sequence[int | str] = ()) -> list[Problem]:
    problems: list[Problem] = []
    for item in error.errors(include_url=False):
        loc, runtime, model_depth = _strip_tags([*prefix, *item["loc"]])
        path = format_path(loc)
        if item["type"] == "config_problem":
            problems += [Problem(join_path(path, rel), message) for rel, message in item["ctx"]["problems"]]
            continue
        extra, message = _message(item, loc, runtime, model_depth)
        problems.append(Problem(join_path(path, extra), message))
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
