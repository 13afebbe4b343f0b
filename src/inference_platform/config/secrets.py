"""Settings that are secrets: marked once, in the field's definition, and refused in plain text.

A stack file is committed; a storage key or a password written in it as a plain value is
published with it. A field whose annotation carries `SECRET` (`Annotated[str, SECRET]`) is a
secret: every check reads the mark (`secret_paths`), nothing lists the secret settings by hand.
`plain_secret_problems` reports each one set in plain text, with the command that stores it as a
Pulumi secret instead. Whether a value was a secret is the caller's to say (`sealed`): the stack
file read offline knows each value's (`secure:`), the Pulumi CLI tells the program only which
top-level keys hold one.
"""

from __future__ import annotations

import types
import typing
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Union

from pydantic import BaseModel

from inference_platform.config.errors import Problem, format_path

SecretPath = tuple[str, ...]
"""A secret setting as the stack file's keys: ('storage', 's3', 'secretAccessKey')."""


@dataclass(frozen=True)
class SecretMark:
    """The mark of a setting that is a secret (a key, a token, a password)."""


SECRET = SecretMark()


def _models(annotation: Any) -> list[type[BaseModel]]:
    """The config models a field's annotation holds directly or as an optional value."""
    if typing.get_origin(annotation) in (Union, types.UnionType):
        return [model for arg in typing.get_args(annotation) for model in _models(arg)]
    return [annotation] if isinstance(annotation, type) and issubclass(annotation, BaseModel) else []


def secret_paths(model: type[BaseModel]) -> list[SecretPath]:
    """Every setting marked SECRET in a model and the models its fields hold, by its keys."""
    paths: list[SecretPath] = []
    for name, info in model.model_fields.items():
        key = info.alias or name
        if any(isinstance(item, SecretMark) for item in info.metadata):
            paths.append((key,))
            continue
        for inner in _models(info.annotation):
            paths += [(key, *path) for path in secret_paths(inner)]
    return paths


def secret_fields(model: type[BaseModel]) -> set[tuple[type[BaseModel], str]]:
    """Each model (of `model` and those its fields hold) with the key of each of its fields marked
    SECRET: where a stack file may write `{secure: <ciphertext>}` (the JSON schema's SecureValue)."""
    fields: set[tuple[type[BaseModel], str]] = set()
    for name, info in model.model_fields.items():
        if any(isinstance(item, SecretMark) for item in info.metadata):
            fields.add((model, info.alias or name))
            continue
        for inner in _models(info.annotation):
            fields |= secret_fields(inner)
    return fields


def secret_command(path: SecretPath) -> str:
    """The command that stores a secret setting as a Pulumi secret."""
    return f"pulumi config set --secret --path '{format_path(path)}' <value>"


def _value_at(values: Mapping[str, Any], path: SecretPath) -> Any:
    value: Any = values
    for key in path:
        if not isinstance(value, Mapping):
            return None
        value = value.get(key)
    return value


def plain_secret_problems(
    model: type[BaseModel], values: Mapping[str, Any], sealed: Callable[[SecretPath], bool]
) -> list[Problem]:
    """A problem for each secret setting of `model` that `values` (decoded, by the stack file's
    keys) hold in plain text: set, and not `sealed` (a Pulumi secret)."""
    return [
        Problem(
            format_path(path),
            f"a secret written in plain text, for anyone who reads the stack file: remove it and run "
            f"`{secret_command(path)}`",
            path,
        )
        for path in secret_paths(model)
        if _value_at(values, path) is not None and not sealed(path)
    ]
