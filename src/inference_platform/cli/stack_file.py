"""Reading a Pulumi.<stack>.yaml the way the Pulumi CLI hands it to a program, without the CLI.

The CLI passes every config value to the program as a string (objects and lists JSON-encoded)
and decrypts `secure:` values. Offline there is no key to decrypt with, so a secure value
becomes a placeholder that the program treats as a secret like any other.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from inference_platform.cli import unique_keys
from inference_platform.cli.positions import in_file, parser_stop
from inference_platform.config.errors import ConfigError, Problem, problem_order
from inference_platform.config.limits import MAX_NESTING, nesting_problem
from inference_platform.config.secrets import SecretPath, plain_secret_problems
from inference_platform.stack.config import PROJECT, StackConfig, decode_value, parse_stack_config, project_values

MAX_FILE_BYTES = 1024 * 1024
SECRET_PLACEHOLDER = "[secret]"


@dataclass(frozen=True)
class StackFile:
    path: Path
    config: dict[str, str]
    """Every `namespace:key` in the file, valued as the CLI passes it to the program."""
    secret_keys: list[str]
    """The keys that hold a secure value, as the CLI tells the program."""
    sealed: frozenset[tuple[int | str, ...]] = frozenset()
    """Where each secure value is: its key and the keys and indexes within it."""

    def is_sealed(self, path: SecretPath) -> bool:
        """Whether a project setting (or a value that holds it) is a secure value in the file."""
        full = (f"{PROJECT}:{path[0]}", *path[1:])
        return any(full[:length] in self.sealed for length in range(1, len(full) + 1))


def _fail(path: Path, message: str) -> ConfigError:
    return ConfigError([Problem("", f"{path}: {message}")])


def read_stack_text(path: Path) -> str:
    """A stack file's text, refused when it is unreadable or too large to be a stack file."""
    try:
        size = path.stat().st_size
        if size > MAX_FILE_BYTES:
            raise _fail(path, f"is {size} bytes; a stack file may be at most {MAX_FILE_BYTES} bytes")
        return path.read_text(encoding="utf-8")
    except OSError as error:
        raise _fail(path, f"cannot read the stack file ({error.strerror})") from None
    except UnicodeDecodeError as error:
        raise _fail(path, f"is not UTF-8 text: {error}") from None


# libyaml's composer recurses in C: flow collections nested some 20,000 deep crash the process
# where the pure-Python parser raises RecursionError. Nesting is bounded by the opening brackets.
LIBYAML_MAX_OPENINGS = 10_000


def _fast(text: str) -> bool:
    """libyaml's parser, several times faster on a fleet's stack file, with the same safe
    constructors; the pure-Python one for text that could nest deep enough to crash it."""
    return text.count("[") + text.count("{") < LIBYAML_MAX_OPENINGS


def refuse_repeated_keys(text: str, path: Path) -> None:
    """Refuse (ConfigError) a stack file's text where a mapping gives a key twice, every such key
    at both places: for a command that reads the file otherwise (promote's round trip) and would
    refuse it in other words. Text that is not YAML is left to that command's reader."""
    try:
        repeated = unique_keys.repeated_keys(text, path, _fast(text))
    except (yaml.YAMLError, RecursionError):
        return
    if repeated:
        raise ConfigError(repeated)


def _load_yaml(text: str, path: Path) -> Any:
    """The document of a stack file's text; refused (ConfigError) when it is not YAML, or when a
    mapping gives a key twice (every such key, at both places)."""
    fast = _fast(text)
    try:
        document, shorter = unique_keys.load(text, fast)
        repeated = unique_keys.repeated_keys(text, path, fast) if shorter else []
    except yaml.MarkedYAMLError as error:
        position, reason = parser_stop(path, error)
        raise ConfigError([Problem("", f"not valid YAML: {reason}", position=position)]) from None
    except yaml.YAMLError as error:
        raise _fail(path, f"is not valid YAML: {error}") from None
    except RecursionError:
        raise _fail(path, f"nests values more than {MAX_NESTING} levels deep; refusing to read it") from None
    if repeated:
        raise ConfigError(repeated)
    return document


def _is_secure(value: Any) -> bool:
    return isinstance(value, Mapping) and set(value) == {"secure"}


def unseal(value: Any, at: tuple[int | str, ...]) -> tuple[Any, list[tuple[int | str, ...]]]:
    """Replace `secure:` values by the placeholder; say where they were (`at`: the value's path)."""
    if _is_secure(value):
        return SECRET_PLACEHOLDER, [at]
    if isinstance(value, Mapping):
        pairs = [(key, unseal(item, (*at, key))) for key, item in value.items()]
        return {key: item for key, (item, _) in pairs}, [found for _, (_, where) in pairs for found in where]
    if isinstance(value, list):
        items = [unseal(item, (*at, index)) for index, item in enumerate(value)]
        return [item for item, _ in items], [found for _, where in items for found in where]
    return value, []


def wire_value(value: Any) -> str:
    """How the Pulumi CLI passes one config value to a program."""
    if isinstance(value, str):
        return value
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (Mapping, list)):
        return json.dumps(value, separators=(",", ":"), default=str)
    if value is None:
        return ""
    return str(value)


def read_stack_file(path: Path) -> StackFile:
    """Load and decode a stack file; raises ConfigError with a clear reason when it cannot, each
    problem at its line in the file."""
    return _stack_file(read_stack_text(path), path)


def read_stack_config(path: Path) -> tuple[StackFile, StackConfig]:
    """A stack file and its validated config; raises ConfigError with every problem at its line in the file."""
    text = read_stack_text(path)
    stack_file = _stack_file(text, path)
    try:
        return stack_file, parse_stack_config(project_values(stack_file.config), sealed=stack_file.is_sealed)
    except ConfigError as error:
        raise in_file(error, path, text) from None


def plain_secrets(stack_file: StackFile) -> list[Problem]:
    """The stack file's secret settings written in plain text (config/secrets.py): the file says
    which values are secure, so each one is checked, not its whole top-level key."""
    values = {key: decode_value(value) for key, value in project_values(stack_file.config).items()}
    return plain_secret_problems(StackConfig, values, stack_file.is_sealed)


def refusing_plain_secrets(error: ConfigError | None, stack_file: StackFile) -> ConfigError | None:
    """`error` (a config's problems, or None) with the stack file's plain secrets added."""
    plain = plain_secrets(stack_file)
    if error is None:
        return ConfigError(plain) if plain else None
    return error.with_problems(sorted({*error.problems, *plain}, key=problem_order))


def _stack_file(text: str, path: Path) -> StackFile:
    try:
        return stack_file_from_document(_load_yaml(text, path), path)
    except ConfigError as error:
        raise in_file(error, path, text, namespace=None) from None


def stack_file_from_document(document: Any, path: Path) -> StackFile:
    """Decode a loaded stack file document (plain data, or ruamel's round-trip containers)."""
    problem = nesting_problem(document)
    if problem is not None:
        raise _fail(path, problem)
    if document is None:
        document = {}
    if not isinstance(document, Mapping):
        raise _fail(path, "must be a mapping with a `config:` section")
    raw_config = document.get("config") or {}
    if not isinstance(raw_config, Mapping):
        raise _fail(path, "its `config:` section must be a mapping of `namespace:key: value`")
    config: dict[str, str] = {}
    secret_keys: list[str] = []
    sealed: list[tuple[int | str, ...]] = []
    problems = []
    for key, value in raw_config.items():
        if not isinstance(key, str) or ":" not in key:
            problems.append(Problem(str(key), "config keys are namespaced: write inference-platform:<key>", (key,)))
            continue
        unsealed, where = unseal(value, (key,))
        config[key] = wire_value(unsealed)
        if where:
            secret_keys.append(key)
            sealed += where
    if problems:
        raise ConfigError(problems)
    return StackFile(path=path, config=config, secret_keys=secret_keys, sealed=frozenset(sealed))
