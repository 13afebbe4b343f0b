"""A component's inputs as the wire delivers them, turned into its config model, or refused.

The wire carries every number as a double, secrets as marked values, and values another resource
has yet to produce as outputs or unknowns. A component's inputs decide which objects it makes, so
they must be known when it is constructed: plain values (secret ones included) are read, integral
numbers back as integers (as a stack file writes them); anything else is refused with its path.
"""

from __future__ import annotations

from collections.abc import Mapping
from enum import Enum
from typing import Any, TypeVar

import pulumi
from pulumi.runtime import rpc
from pydantic import BaseModel, ValidationError

from inference_platform.config.errors import ConfigError, Problem, join_path
from inference_platform.config.limits import nesting_problem
from inference_platform.stack.config import every_problem

Config = TypeVar("Config", bound=BaseModel)


NOT_KNOWN = (
    "must be a plain value, known before the deployment runs: the component's objects depend on it (an "
    "output of another resource, or a value marked secret as a whole, is neither; mark the secret values "
    "inside it instead)"
)


def plain_inputs(inputs: Any) -> Any:
    """Wire values as plain data; ConfigError naming every value not known yet (an output, an unknown)."""
    unknown: list[Problem] = []

    def plain(value: Any, path: str) -> Any:
        if rpc.is_rpc_secret(value):
            return plain(rpc.unwrap_rpc_secret(value), path)
        if isinstance(value, pulumi.Output) or value == rpc.UNKNOWN:
            unknown.append(Problem(path, NOT_KNOWN))
            return None
        if isinstance(value, Enum):
            return value.value
        if isinstance(value, Mapping):
            return {key: plain(item, join_path(path, str(key))) for key, item in value.items()}
        if isinstance(value, (list, tuple)):
            return [plain(item, f"{path}[{index}]") for index, item in enumerate(value)]
        if isinstance(value, float) and value.is_integer():
            return int(value)
        return value

    result = plain(inputs, "")
    if unknown:
        raise ConfigError(unknown)
    return result


def validated(model: type[Config], inputs: Mapping[str, Any]) -> Config:
    """A component's inputs (snake_case or camelCase keys) as its config model; ConfigError
    otherwise, with every problem's path as a stack file's report gives it."""
    problem = nesting_problem(inputs)
    if problem is not None:
        raise ConfigError([Problem("", problem)])
    values = plain_inputs(inputs)
    try:
        return model.model_validate(values)
    except ValidationError as error:
        raise every_problem(model, values, error) from None
