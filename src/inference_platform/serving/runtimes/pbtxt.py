"""Protocol-buffer text format, written from plain data (what TF Serving and Triton read as config).

A serializer like json.dumps, not a template: mappings become messages, lists become repeated
fields, `Enum("TYPE_FP32")` is written bare. The tests parse every file it writes with the
servers' own protobuf messages.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Enum:
    """An enum value, written without quotes."""

    name: str


def _scalar(value: Any) -> str:
    if isinstance(value, Enum):
        return value.name
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return repr(value)
    if isinstance(value, str):
        # JSON string escapes are valid protobuf text escapes for the characters JSON escapes.
        return json.dumps(value, ensure_ascii=False)
    raise TypeError(f"cannot write {value!r} in protobuf text format")


def _field(name: str, value: Any, indent: int) -> list[str]:
    pad = "  " * indent
    if isinstance(value, Mapping):
        return [f"{pad}{name} {{", *_message(value, indent + 1), f"{pad}}}"]
    if isinstance(value, list):
        return [line for item in value for line in _field(name, item, indent)]
    return [f"{pad}{name}: {_scalar(value)}"]


def _message(fields: Mapping[str, Any], indent: int) -> list[str]:
    return [line for name, value in fields.items() for line in _field(name, value, indent)]


def dumps(message: Mapping[str, Any]) -> str:
    """The text format of a message given as {field: value}; None values are left out."""
    return "\n".join(_message(_without_none(message), 0)) + "\n"


def _without_none(value: Any) -> Any:
    if isinstance(value, Mapping):
        return {key: _without_none(item) for key, item in value.items() if item is not None}
    if isinstance(value, list):
        return [_without_none(item) for item in value]
    return value
