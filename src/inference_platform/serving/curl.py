"""The ready-to-run curl line of a model's or a pipeline's stack outputs: one function, so every
printed line is quoted the same way and runs as printed.

A small body goes inline (`-d '<json>'`, shell-quoted). A large one (a Triton image input of
1,228,800 zeros is 2.4 MB of JSON) is generated instead: a `python3 -c` one-liner writes it to
curl's standard input, with each long run of one value written as `[v]*n`:

    python3 -c 'import json; print(json.dumps({"inputs": [{... "data": [0]*150528}]}))' \
      | curl -sS https://... -H 'Content-Type: application/json' --data-binary @-
"""

from __future__ import annotations

import json
import shlex
from collections.abc import Mapping
from typing import Any

MAX_INLINE_BODY = 2048
"""Bodies up to this many characters of JSON go inline."""
MIN_RUN = 8
"""Lists of at least this many equal values are generated as `[v]*n`."""

_HEADER = "-H 'Content-Type: application/json'"


def curl_line(url: str, body: Mapping[str, Any]) -> str:
    """A shell command line that POSTs `body` as JSON to `url`."""
    curl = f"curl -sS {shlex.quote(url)} {_HEADER}"
    if _leaves(body, MAX_INLINE_BODY) <= MAX_INLINE_BODY:
        text = json.dumps(body, separators=(",", ":"))
        if len(text) <= MAX_INLINE_BODY:
            return f"{curl} -d {shlex.quote(text)}"
    # json.dumps, not json.dump: dump writes chunk by chunk, seconds for a million values.
    generator = f"import json; print(json.dumps({python_source(body)}))"
    return f"python3 -c {shlex.quote(generator)} | {curl} --data-binary @-"


def _leaves(value: Any, budget: int) -> int:
    """How many scalars `value` holds, counted no further than past `budget` (a big body is not walked)."""
    if isinstance(value, Mapping):
        items: Any = value.values()
    elif isinstance(value, list):
        items = value
    else:
        return 1
    count = 0
    for item in items:
        count += _leaves(item, budget - count)
        if count > budget:
            break
    return count


def python_source(value: Any) -> str:
    """`value` (JSON data) as a Python expression, each list of MIN_RUN or more equal scalars as `[v]*n`."""
    if isinstance(value, Mapping):
        return "{" + ", ".join(f"{json.dumps(str(k))}: {python_source(v)}" for k, v in value.items()) + "}"
    if isinstance(value, list):
        if len(value) >= MIN_RUN and _one_scalar(value):
            return f"[{python_source(value[0])}]*{len(value)}"
        return "[" + ", ".join(python_source(item) for item in value) + "]"
    if isinstance(value, str):
        return json.dumps(value)  # a JSON string is a Python string literal with the same value
    if value is None or isinstance(value, (bool, int, float)):
        return repr(value)
    raise TypeError(f"not JSON data: {type(value).__name__}")


def _one_scalar(values: list[Any]) -> bool:
    """Whether every item is the same scalar, of the same type (0, 0.0 and False are equal in Python)."""
    first = values[0]
    if isinstance(first, (Mapping, list)) or values.count(first) != len(values):
        return False
    return len(set(map(type, values))) == 1
