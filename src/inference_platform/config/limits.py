"""How much config a program will read: a stack file, or a component's inputs, is refused when
aliases expand it past reason or it nests past any real config, before anything looks inside."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

# Aliases share nodes, so a small file can expand into billions of them ("billion laughs").
MAX_EXPANDED_NODES = 200_000
# Stack config nests a handful of levels; chart values a few more. Deeper is an attack or an accident.
MAX_NESTING = 32


def nesting_problem(document: Any) -> str | None:
    """Why a loaded document is too big to handle (aliases expanding it, or deep nesting), if it is."""
    budget = MAX_EXPANDED_NODES
    stack = [(document, 0)]
    while stack:
        node, depth = stack.pop()
        budget -= 1
        if budget < 0:
            return f"expands to more than {MAX_EXPANDED_NODES} values (YAML aliases?); refusing to read it"
        if depth > MAX_NESTING:
            return f"nests values more than {MAX_NESTING} levels deep; refusing to read it"
        if isinstance(node, Mapping):
            stack.extend((child, depth + 1) for child in node.values())
        elif isinstance(node, list):
            stack.extend((child, depth + 1) for child in node)
    return None
