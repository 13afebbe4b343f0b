"""Which stacks a change touches: what a pull request previews and in what order a merge deploys
(`python -m infra stacks`; docs/workflow.md, "Sharded environments in CI").

The stacks are the `Pulumi.<stack>.yaml` files beside `Pulumi.yaml` (the repository root; not
`examples/`), each read as the Pulumi CLI would and told apart by `stack.fleet.stack_kind`: a
one-stack environment ("single"), a platform stack that names its shards, or a shard that names its
platform stack. A stack's environment is its own name, or for a shard its platform stack's.

A changed path (relative to the root, as `git diff --name-only` prints it) selects:

- a shard's stack file: that shard and its platform stack, which reads every shard's file (its
  directory of the environment's models, the capacity plan, what it installs for them): a change
  the platform does not see, such as a weight, previews as no change there;
- a platform stack's file: the platform and every shard it lists (each reads its outputs);
- a one-stack environment's file: that stack;
- the program or anything it runs with (`src/`, `infra/`, `policies/`, `Pulumi.yaml`,
  `requirements*.txt`, `pyproject.toml`): every stack;
- anything else (docs, tests, bench, the README, examples, the workflows themselves): nothing.

With `--rollouts`, only the selected stacks whose own file has a model with a rollout in progress
are kept (its `rollout.status` absent, shadow or canary): what the rollout workflow runs
`python -m infra rollout` on (docs/workflow.md, "Rollouts in CI"). A shard's rollout selects the
shard alone: its platform stack only when the platform's own file has models in rollout.

A stack file the change deletes selects no stack (there is none left to preview or deploy) and is
listed as removed, so that the render diff still shows everything it held going away.

The stack files must agree with each other, whatever changed, or nothing is selected: a shard's
platform stack must have a stack file, be a platform stack and list the shard; every stack a
platform lists must have a stack file and name that platform. Given the environments the deploy
workflow deploys, every environment must be one of them and each of them must have its stack file,
so that no stack is left out of the deploys without a word.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from fnmatch import fnmatch
from pathlib import Path, PurePosixPath
from typing import Any

from pydantic import ValidationError

from inference_platform.cli.names import PROGRAM_DIRECTORIES, PROGRAM_FILES
from inference_platform.cli.positions import in_file
from inference_platform.cli.project import PROJECT_FILE, ProgramNotFoundError, project_dir
from inference_platform.cli.stack_file import read_stack_file, read_stack_text
from inference_platform.config.errors import ConfigError, Problem, format_path, problem_order
from inference_platform.serving.rollout_spec import RolloutSpec
from inference_platform.stack.config import PROJECT, decode_value, every_problem, project_values
from inference_platform.stack.fleet import (
    PLATFORM_STACK_KEY,
    SHARDS_KEY,
    StackKind,
    foreign_project,
    platform_stack_name,
    repeated_shard,
    stack_kind,
)

STACK_FILE = re.compile(r"^Pulumi\.(?P<stack>[A-Za-z0-9_.-]+)\.yaml$")
"""A stack's settings file at the root (Pulumi's stack names: letters, digits, `_`, `.`, `-`)."""

SUBJECT = "stack files"


def stack_file_name(stack: str) -> str:
    return f"Pulumi.{stack}.yaml"


@dataclass(frozen=True)
class Stack:
    name: str
    path: Path
    kind: StackKind
    platform: str | None = None
    """A shard's platform stack (the last part of its `platformStack`); None for the others."""
    shards: tuple[str, ...] = ()
    """The shards a platform stack lists, in its order."""

    @property
    def environment(self) -> str:
        """The environment the stack belongs to: its platform stack's name for a shard, else its own."""
        return self.platform if self.platform is not None else self.name


@dataclass(frozen=True)
class Stacks:
    """Every stack file at the root, checked to agree with each other."""

    root: Path
    by_name: Mapping[str, Stack]

    def environments(self) -> list[str]:
        return sorted({stack.environment for stack in self.by_name.values()})


@dataclass(frozen=True)
class Selection:
    stacks: frozenset[str]
    """Stacks to preview (or deploy): their files are there."""
    removed: frozenset[str] = frozenset()
    """Stacks whose files the change deletes: only their render diff is left to show."""


def _problem_at(key: str, index: int | None, message: str) -> Problem:
    """A problem at a project key of a stack file (or one item of it), placed at its line later."""
    loc: tuple[str | int, ...] = (key,) if index is None else (key, index)
    return Problem(key if index is None else f"{key}[{index}]", message, loc)


def _read_stack(root: Path, name: str) -> tuple[Stack, list[Problem]]:
    path = root / stack_file_name(name)
    values = project_values(read_stack_file(path).config)
    kind = stack_kind(values)
    problems: list[Problem] = []
    if kind == "shard":
        reference = decode_value(values[PLATFORM_STACK_KEY])
        if not isinstance(reference, str) or not platform_stack_name(reference):
            message = "must name the platform stack as a StackReference does: <organization>/<project>/<stack>"
            problems.append(_problem_at(PLATFORM_STACK_KEY, None, message))
            return Stack(name, path, kind), problems
        foreign = foreign_project(reference, PROJECT)
        if foreign is not None:
            problems.append(_problem_at(PLATFORM_STACK_KEY, None, foreign))
            return Stack(name, path, kind), problems
        return Stack(name, path, kind, platform=platform_stack_name(reference)), problems
    if kind == "platform":
        shards = decode_value(values[SHARDS_KEY])
        if not isinstance(shards, list) or not all(isinstance(shard, str) and shard for shard in shards):
            problems.append(_problem_at(SHARDS_KEY, None, "must be a list of the shards' stack names"))
            return Stack(name, path, kind), problems
        return Stack(name, path, kind, shards=tuple(shards)), problems
    return Stack(name, path, kind), problems


def _platform_problem(shard: Stack, name: str, stacks: Mapping[str, Stack]) -> str | None:
    """What is wrong with the platform stack `name` a shard names, if anything."""
    platform = stacks.get(name)
    named = f"names the platform stack {name!r}"
    if platform is None:
        return f"{named}, which has no stack file {stack_file_name(name)}"
    if platform.kind != "platform":
        return f"{named}, which is not a platform stack: {platform.path.name} has no {PROJECT}:{SHARDS_KEY}"
    if shard.name not in platform.shards:
        return f"{named}, whose {PROJECT}:{SHARDS_KEY} does not list {shard.name!r}"
    return None


def _listing_problem(platform: Stack, index: int, stacks: Mapping[str, Stack]) -> str | None:
    """What is wrong with the stack a platform lists at `index`, if anything."""
    name = platform.shards[index]
    shard = stacks.get(name)
    repeated = repeated_shard(platform.shards, index)
    if repeated is not None:
        return repeated
    if shard is None:
        return f"{name!r} has no stack file {stack_file_name(name)}"
    if shard.platform is None:
        return f"{name!r} is not a shard: {shard.path.name} has no {PROJECT}:{PLATFORM_STACK_KEY}"
    if shard.platform != platform.name:
        return f"{name!r} is a shard of {shard.platform!r}, not of this platform stack"
    return None


def _disagreements(stacks: Mapping[str, Stack], unknown: set[str]) -> dict[str, list[Problem]]:
    """What each stack file says that the others contradict, by stack name; stacks whose files (or
    whose `shards` or `platformStack`) could not be read are `unknown`: nothing is said of them."""
    found: dict[str, list[Problem]] = {}
    for stack in stacks.values():
        if stack.platform is not None and stack.platform not in unknown:
            message = _platform_problem(stack, stack.platform, stacks)
            if message is not None:
                found.setdefault(stack.name, []).append(_problem_at(PLATFORM_STACK_KEY, None, message))
        for index, name in enumerate(stack.shards):
            message = _listing_problem(stack, index, stacks) if name not in unknown else None
            if message is not None:
                found.setdefault(stack.name, []).append(_problem_at(SHARDS_KEY, index, message))
    return found


def _unknown_environments(
    stacks: Mapping[str, Stack], root: Path, environments: Sequence[str], unknown: set[str]
) -> list[Problem]:
    """Environments the deploy workflow would leave out, and those it deploys that have no stack."""
    deployed = ", ".join(environments)
    problems = [
        Problem(
            "",
            f"the environment {stack.name!r} is not one the deploy workflow deploys ({deployed})",
            position=str(stack.path),
        )
        for stack in stacks.values()
        if stack.kind != "shard" and stack.name not in environments
    ]
    for environment in environments:
        stack = stacks.get(environment)
        if environment in unknown:
            continue
        if stack is None:
            message = f"the deploy workflow deploys the environment {environment!r}, which has no stack file"
            problems.append(Problem("", message, position=str(root / stack_file_name(environment))))
        elif stack.kind == "shard":
            message = f"the deploy workflow deploys {environment!r} as an environment, but it is a shard"
            problems.append(Problem("", message, position=str(stack.path)))
    return problems


def stack_names(root: Path) -> list[str]:
    """The stacks whose files are at `root`, by name."""
    names = (STACK_FILE.match(path.name) for path in root.iterdir() if path.is_file())
    return sorted(match["stack"] for match in names if match is not None)


def read_stacks(root: Path, environments: Sequence[str] | None = None) -> Stacks:
    """Every stack file at `root`, read and checked against each other (and, when given, against the
    environments the deploy workflow deploys); raises ConfigError with every problem, each at its line."""
    stacks: dict[str, Stack] = {}
    problems: dict[str, list[Problem]] = {}
    unreadable: list[Problem] = []
    unknown: set[str] = set()
    for name in stack_names(root):
        try:
            stack, found = _read_stack(root, name)
        except ConfigError as error:
            unreadable += error.problems
            unknown.add(name)
            continue
        stacks[name] = stack
        if found:
            problems[name] = found
            unknown.add(name)
    for name, found in _disagreements(stacks, unknown).items():
        problems.setdefault(name, []).extend(found)
    located: list[Problem] = list(unreadable)
    for name, found in sorted(problems.items()):
        path = stacks[name].path
        located += in_file(ConfigError(sorted(found, key=problem_order)), path, read_stack_text(path)).problems
    if environments is not None:
        located += _unknown_environments(stacks, root, environments, unknown)
    if located:
        # What the unread files say of the others is checked once they can be read.
        raise ConfigError(located, subject=SUBJECT, incomplete=bool(unknown))
    return Stacks(root, stacks)


def changed_stack(path: str) -> str | None:
    """The stack whose file `path` is (a root-level Pulumi.<stack>.yaml), if it is one."""
    parts = PurePosixPath(path).parts
    match = STACK_FILE.match(parts[0]) if len(parts) == 1 else None
    return match["stack"] if match is not None else None


def changes_the_program(path: str) -> bool:
    """Whether every stack runs `path`: the program, the library, the policies, their pins."""
    parts = PurePosixPath(path).parts
    if len(parts) > 1:
        return parts[0] in PROGRAM_DIRECTORIES
    return len(parts) == 1 and any(fnmatch(parts[0], pattern) for pattern in PROGRAM_FILES)


def select(stacks: Stacks, changed: Iterable[str]) -> Selection:
    """The stacks a change of these paths touches (the module's rules)."""
    paths = list(changed)
    named = [name for name in map(changed_stack, paths) if name is not None]
    removed = frozenset(name for name in named if name not in stacks.by_name)
    if any(map(changes_the_program, paths)):
        return Selection(frozenset(stacks.by_name), removed)
    selected: set[str] = set()
    for stack in (stacks.by_name[name] for name in named if name in stacks.by_name):
        selected.add(stack.name)
        selected.update(stack.shards)
        if stack.platform is not None:
            selected.add(stack.platform)
    return Selection(frozenset(selected), removed)


def every_stack(stacks: Stacks) -> Selection:
    """Every stack (a deploy: each `pulumi up` is a no-op where nothing changed)."""
    return Selection(frozenset(stacks.by_name))


def as_matrix(stacks: Stacks, selection: Selection, environments: Sequence[str] | None = None) -> dict[str, Any]:
    """The selection as a CI matrix reads it: the flat lists, and per environment what runs first (its
    platform stack, or its one stack) and what runs after it in parallel (its shards)."""
    chosen = [stacks.by_name[name] for name in sorted(selection.stacks)]

    def of_kind(kind: StackKind) -> list[str]:
        return [stack.name for stack in chosen if stack.kind == kind]

    order = list(environments) if environments is not None else stacks.environments()
    return {
        "stacks": [stack.name for stack in chosen],
        "diff": sorted(selection.stacks | selection.removed),
        "removed": sorted(selection.removed),
        "platforms": of_kind("platform"),
        "shards": of_kind("shard"),
        "single": of_kind("single"),
        "environments": {
            environment: {
                "first": [stack.name for stack in chosen if stack.kind != "shard" and stack.name == environment],
                "shards": [stack.name for stack in chosen if stack.kind == "shard" and stack.platform == environment],
            }
            for environment in order
        },
    }


def compact(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"))


GITHUB_LISTS = ("stacks", "diff", "removed", "platforms", "shards", "single")


def github_outputs(matrix: Mapping[str, Any]) -> str:
    """`name=value` lines for $GITHUB_OUTPUT, each value a JSON list: the flat lists, and each
    environment's `<environment>-first` and `<environment>-shards`."""
    lines = [f"{key}={compact(matrix[key])}" for key in GITHUB_LISTS]
    for environment, groups in matrix["environments"].items():
        lines += [f"{environment}-{group}={compact(names)}" for group, names in groups.items()]
    return "".join(f"{line}\n" for line in lines)


def default_root() -> Path:
    """The project's directory (the nearest Pulumi.yaml), relative to the working directory, so that
    problems name `Pulumi.prod.yaml:3:1` rather than a long absolute path."""
    found = project_dir()
    if found is None:
        raise ProgramNotFoundError(f"no {PROJECT_FILE} in {Path.cwd()} or above it: run from the Pulumi project")
    return Path(os.path.relpath(found))


def split_paths(text: str, null_separated: bool) -> list[str]:
    """The paths of a `git diff --name-only` listing (`-z`: NUL-separated, nothing quoted)."""
    return [path for path in text.split("\0" if null_separated else "\n") if path]


MODELS_KEY = "models"


def _rollout_problems(index: int, raw: Any) -> tuple[bool, list[Problem]]:
    """Whether a model's `rollout` (as its stack file holds it) is in progress, and what makes it
    unreadable: a rollout whose status is absent (the next run starts it), shadow or canary is in
    progress; promoted or rolled-back, finished (RolloutSpec.finished decides)."""
    try:
        spec = RolloutSpec.model_validate(raw)
    except ValidationError as error:
        at: tuple[str | int, ...] = (MODELS_KEY, index, "rollout")
        found = every_problem(RolloutSpec, raw, error).problems
        return False, [Problem(format_path((*at, *p.keys)), p.message, (*at, *p.keys)) for p in found]
    return not spec.finished, []


def _in_rollout(stack: Stack) -> tuple[bool, list[Problem]]:
    """Whether the stack's own file has a model with a rollout in progress (a platform stack's
    shards' models are theirs, not its own), and the problems of the rollouts that do not parse."""
    values = project_values(read_stack_file(stack.path).config)
    models = decode_value(values.get(MODELS_KEY))
    if not isinstance(models, list):
        return False, []  # none, or not a list: the render says what is wrong, at its line
    found = [
        _rollout_problems(index, model["rollout"])
        for index, model in enumerate(models)
        if isinstance(model, dict) and model.get("rollout") is not None
    ]
    return any(in_progress for in_progress, _ in found), [problem for _, problems in found for problem in problems]


def with_rollouts(stacks: Stacks, selection: Selection) -> Selection:
    """Of the selected stacks, those whose own stack file has a model with a rollout in progress:
    what the rollout workflow runs `python -m infra rollout` on. Raises ConfigError with every
    rollout that does not parse, each at its line (nothing is selected then)."""
    chosen: set[str] = set()
    located: list[Problem] = []
    for name in sorted(selection.stacks):
        stack = stacks.by_name[name]
        in_progress, problems = _in_rollout(stack)
        if in_progress:
            chosen.add(name)
        if problems:
            error = ConfigError(sorted(problems, key=problem_order))
            located += in_file(error, stack.path, read_stack_text(stack.path)).problems
    if located:
        raise ConfigError(located, subject=SUBJECT)
    return Selection(frozenset(chosen))
