"""The stack files of an environment of several stacks, read the way the CLI reads a stack's.

A platform stack's program reads its shards' files (Pulumi.<shard>.yaml), beside its own: in the
Pulumi project's directory under `pulumi up` (the language host runs the program there), or where
the offline render found the platform stack's file ($INFRA_STACK_DIR).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from inference_platform.cli.positions import in_file
from inference_platform.cli.render import STACK_DIR_ENV, run_program
from inference_platform.cli.stack_file import StackFile, read_stack_file, read_stack_text, refusing_plain_secrets
from inference_platform.config.errors import ConfigError, Problem
from inference_platform.stack import fleet
from inference_platform.stack.config import PROJECT, StackConfig, decode_value, project_values


def stack_path(stack: str, directory: Path | None = None) -> Path:
    """Where a stack's file is: in `directory`, else $INFRA_STACK_DIR, else the working directory."""
    return (directory or Path(os.environ.get(STACK_DIR_ENV) or ".")) / f"Pulumi.{stack}.yaml"


def read_project_stack(stack: str) -> dict[str, Any]:
    """A stack's project keys (without the `inference-platform:` prefix), as the CLI passes them."""
    return project_values(read_stack_file(stack_path(stack)).config)


def in_files(error: ConfigError, files: Mapping[str, tuple[Path, str]], own: str) -> ConfigError:
    """Each problem at its line in the file of the stack it names (`Problem.stack`; the stack `own`
    when it names none). `files`: each stack's file and its text."""
    by_stack: dict[str, list[int]] = {}
    for index, problem in enumerate(error.problems):
        by_stack.setdefault(problem.stack or own, []).append(index)
    located = list(error.problems)
    for stack, indexes in by_stack.items():
        if stack not in files:
            continue
        path, text = files[stack]
        part = in_file(ConfigError([error.problems[i] for i in indexes]), path, text)
        for index, problem in zip(indexes, part.problems, strict=True):
            # A problem of a whole file (of another stack's than the one given) names the file.
            located[index] = problem if problem.position or not problem.stack else replace(problem, position=str(path))
    return error.with_problems(located)


def read_environment(path: Path, stack: str) -> tuple[StackFile, StackConfig, dict[str, StackConfig]]:
    """A platform stack's file, its whole environment's config (its shards' files beside it) and
    each shard's own part; raises ConfigError with every problem at its line in the file that holds it."""
    text = read_stack_text(path)
    stack_file = read_stack_file(path)
    values = project_values(stack_file.config)
    names = decode_value(values.get(fleet.SHARDS_KEY))
    files = {stack: (path, text)}
    shards: dict[str, dict[str, Any]] = {}
    missing = []
    unreadable: list[Problem] = []
    """Every shard file's own problems (not YAML, a key given twice...), all of them at once."""
    listed = names if isinstance(names, list) else []
    for index, name in enumerate(listed):
        if fleet.repeated_shard(listed, index) is not None:
            continue  # fleet.environment reports it
        shard_path = path.parent / f"Pulumi.{name}.yaml"
        if not isinstance(name, str) or not shard_path.is_file():
            missing.append(
                Problem(
                    f"{fleet.SHARDS_KEY}[{index}]",
                    f"the shard {name!r} has no stack file beside this one ({shard_path.name})",
                    (fleet.SHARDS_KEY, index),
                )
            )
            continue
        try:
            shard_file = read_stack_file(shard_path)
        except ConfigError as error:
            unreadable += error.problems
            continue
        files[name] = (shard_path, read_stack_text(shard_path))
        shards[name] = project_values(shard_file.config)
    try:
        if missing or unreadable:
            raise ConfigError([*fleet.repeated_shards(stack, values), *missing, *unreadable])
        config, views = fleet.environment(stack, values, shards)
    except ConfigError as error:
        raise in_files(refusing_plain_secrets(error, stack_file) or error, files, stack) from None
    plain = refusing_plain_secrets(None, stack_file)
    if plain is not None:
        raise in_files(plain, files, stack)
    return stack_file, config, views


def read_shard(path: Path, stack: str, platform_outputs: Mapping[str, Any]) -> tuple[StackFile, StackConfig]:
    """A shard's file and its config on the platform its platform stack's outputs describe; raises
    ConfigError with every problem at its line in the shard's file."""
    text = read_stack_text(path)
    stack_file = read_stack_file(path)
    values = project_values(stack_file.config)
    reference = str(decode_value(values.get(fleet.PLATFORM_STACK_KEY)))
    try:
        # The offline render runs a shard in this project only (its keys are this project's).
        facts = fleet.read_facts(stack, platform_outputs, reference, PROJECT)
        config = fleet.shard_config(stack, values, facts)
    except ConfigError as error:
        raise in_file(refusing_plain_secrets(error, stack_file) or error, path, text) from None
    plain = refusing_plain_secrets(None, stack_file)
    if plain is not None:
        raise in_file(plain, path, text)
    return stack_file, config


@dataclass(frozen=True)
class Environment:
    """The stack files of an environment of several stacks: its platform stack's and its shards'."""

    platform: str
    directory: Path
    shards: tuple[str, ...]

    def path(self, stack: str) -> Path:
        return self.directory / f"Pulumi.{stack}.yaml"


def environment_of(stack: str, path: Path) -> Environment | None:
    """The environment a stack's file belongs to (its own, for a platform stack; its platform
    stack's, for a shard), or None for a stack that is a whole environment."""
    values = project_values(read_stack_file(path).config)
    kind = fleet.stack_kind(values)
    if kind == "single":
        return None
    platform = (
        stack if kind == "platform" else fleet.platform_stack_name(str(decode_value(values[fleet.PLATFORM_STACK_KEY])))
    )
    platform_path = path.parent / f"Pulumi.{platform}.yaml"
    names = decode_value(project_values(read_stack_file(platform_path).config).get(fleet.SHARDS_KEY)) or []
    return Environment(platform, path.parent, tuple(str(name) for name in names))


def holder(environment: Environment, model: str) -> str | None:
    """The shard whose file holds a model (or pipeline), read from the files as they are."""
    for shard in environment.shards:
        values = project_values(read_stack_file(environment.path(shard)).config)
        items = [*(decode_value(values.get("models")) or []), *(decode_value(values.get("pipelines")) or [])]
        if any(isinstance(item, Mapping) and item.get("name") == model for item in items):
            return shard
    return None


def platform_render_outputs(environment: Environment) -> dict[str, Any]:
    """The platform stack's outputs, from a render of it (no charts) in this process: what its
    shards' StackReferences read, for a tool that renders a shard alone."""
    read_environment(environment.path(environment.platform), environment.platform)
    result = run_program(environment.platform, read_stack_file(environment.path(environment.platform)))
    return dict(result.outputs)
