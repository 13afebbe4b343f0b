"""Where a config problem is in the stack file: `Pulumi.prod.yaml:42:11: models[3] (fraud).weight: ...`.

The problems come from validating the config (config/errors.py), which knows paths, not files.
This module finds each path in ruamel's round-trip document of the file, which keeps the line and
column of every key and list item, and names each list item on the way by its own `name` key, so
the names are there even when the config failed to validate. A path that leaves the file (a key
that is missing, a default that conflicts) points at the nearest enclosing key or item that is in
it: for a missing key, the mapping that should hold it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from ruamel.yaml import YAML
from ruamel.yaml.comments import CommentedBase, CommentedMap, CommentedSeq
from ruamel.yaml.error import YAMLError

from inference_platform.config.errors import ConfigError, Loc, Problem, item_name
from inference_platform.stack.config import PROJECT


def file_position(path: Path, line: int, column: int) -> str:
    """`Pulumi.prod.yaml:42:11` from ruamel's (or PyYAML's) 0-based line and column."""
    return f"{path}:{line + 1}:{column + 1}"


def parser_stop(path: Path, error: Any) -> tuple[str, str]:
    """Where a YAML parser gave up on a file, and why, from its MarkedYAMLError (ruamel's and
    PyYAML's carry the same marks): `(Pulumi.prod.yaml:16:1, while parsing a flow sequence from
    line 15, column 17; expected ',' or ']', but got '<stream end>')`."""
    problem_mark, context_mark = error.problem_mark, error.context_mark
    mark = problem_mark or context_mark
    position = file_position(path, mark.line, mark.column) if mark is not None else str(path)
    context = error.context
    if context and context_mark is not None and problem_mark is not None:
        context += f" from line {context_mark.line + 1}, column {context_mark.column + 1}"
    return position, "; ".join(filter(None, (context, error.problem)))


@dataclass(frozen=True)
class Location:
    line: int
    column: int
    """0-based, as the parser counts."""
    names: dict[int, str]
    """The `name` of each list item on the path that has one, by the item's index in the path."""


def _recorded(node: CommentedBase, key: int | str) -> bool:
    """Whether ruamel recorded where `key` (or item) is: not for keys an alias merged in."""
    return key in (node.lc.data or {})


def _start(node: Any) -> tuple[int, int]:
    if isinstance(node, CommentedBase) and node.lc.line is not None:
        return node.lc.line, node.lc.col
    return 0, 0


class PositionIndex:
    """A stack file's round-trip document, asked where a config path is."""

    def __init__(self, document: Any, aliases: Mapping[tuple[int | str, ...], tuple[int, int]] | None = None) -> None:
        self._document = document
        self._aliases = aliases or {}
        """Where each alias (`*v1`) is, by its path in the document: ruamel records an aliased node's
        positions at its anchor only."""

    @classmethod
    def from_text(cls, text: str) -> PositionIndex | None:
        """The index of a stack file's text; None when ruamel cannot read what the config loader could."""
        yaml = YAML(typ="rt")
        yaml.allow_duplicate_keys = True
        try:
            return cls(yaml.load(text), _alias_positions(yaml.parse(text)))
        except (YAMLError, RecursionError):
            return None

    def locate(self, keys: Loc, namespace: str | None = PROJECT) -> Location:
        """Where `keys` is: a path under `namespace`'s config keys (`models`, 0, ... for
        `inference-platform:models`), or with no namespace, under whole `namespace:key` keys."""
        config = self._document.get("config") if isinstance(self._document, CommentedMap) else None
        if not isinstance(config, CommentedMap):
            return Location(*_start(self._document), {})
        line, column = self._document.lc.key("config")
        if not keys:
            return Location(line, column, {})
        first = f"{namespace}:{keys[0]}" if namespace is not None else keys[0]
        if not _recorded(config, first):
            return Location(line, column, {})
        line, column = config.lc.key(first)
        node = config[first]
        names: dict[int, str] = {}
        for depth, key in enumerate(keys[1:], start=1):
            if isinstance(node, CommentedMap) and isinstance(key, str) and _recorded(node, key):
                line, column = node.lc.key(key)
            elif isinstance(node, CommentedSeq) and isinstance(key, int) and _recorded(node, key):
                line, column = node.lc.item(key)
            else:
                break
            node = node[key]
            if isinstance(key, int) and (name := item_name(node)) is not None:
                names[depth] = name
            alias = self._aliases.get(("config", first, *keys[1 : depth + 1]))
            if alias is not None:
                # Inside an alias: what it repeats is written at its anchor; the mistake is the alias.
                line, column = alias
                break
        return Location(line, column, names)


def _alias_positions(events: Iterable[Any]) -> dict[tuple[int | str, ...], tuple[int, int]]:
    """The path of each alias in a YAML document (its keys and indexes) with its line and column
    (from 0, as ruamel's), read from the parser's events."""
    found: dict[tuple[int | str, ...], tuple[int, int]] = {}
    # Each open collection: its path, and the next item's index (a sequence) or None and the key
    # read (a mapping: a key is awaited while `key` is the sentinel).
    stack: list[list[Any]] = []
    awaited = object()

    def place() -> tuple[int | str, ...] | None:
        """The path of the node an event starts; None for a mapping's key."""
        if not stack:
            return ()
        path, index, key = stack[-1]
        if index is not None:
            stack[-1][1] += 1
            return (*path, index)
        if key is awaited:
            return None
        stack[-1][2] = awaited
        return (*path, key)

    for event in events:
        kind = type(event).__name__
        if kind in ("ScalarEvent", "AliasEvent", "SequenceStartEvent", "MappingStartEvent"):
            at = place()
            if at is None:  # a mapping's key
                stack[-1][2] = event.value if kind == "ScalarEvent" else object()
                if kind in ("SequenceStartEvent", "MappingStartEvent"):
                    stack.append([(), None, awaited])  # a complex key: read past, never a path
                continue
            if kind == "AliasEvent":
                found[at] = (event.start_mark.line, event.start_mark.column)
            elif kind == "SequenceStartEvent":
                stack.append([at, 0, None])
            elif kind == "MappingStartEvent":
                stack.append([at, None, awaited])
        elif kind in ("SequenceEndEvent", "MappingEndEvent"):
            stack.pop()
    return found


def named_path(keys: Loc, names: Mapping[int, str]) -> str:
    """models[3] (fraud).versions[1] (v9).weight: a path with its items' names beside their indexes."""
    out = ""
    for depth, part in enumerate(keys):
        if isinstance(part, int):
            out += f"[{part}]" + (f" ({names[depth]})" if depth in names else "")
        else:
            out += f".{part}" if out else part
    return out


def in_file(
    error: ConfigError, path: Path, source: str | PositionIndex, namespace: str | None = PROJECT
) -> ConfigError:
    """The same problems, each that has a path starting with where it is in the stack file at
    `path`; `source` is the file's text or its index, `namespace` that of the config keys the
    paths start under (None: the paths start with whole `namespace:key` keys). Problems of the
    whole file are left as they are."""
    if not any(_needs_position(problem) for problem in error.problems):
        return error
    index = PositionIndex.from_text(source) if isinstance(source, str) else source
    return error.with_problems(
        _located(problem, path, index, namespace) if _needs_position(problem) else problem for problem in error.problems
    )


def _needs_position(problem: Problem) -> bool:
    return bool(problem.path) and not problem.position


def _located(problem: Problem, path: Path, index: PositionIndex | None, namespace: str | None) -> Problem:
    if index is None:
        return replace(problem, position=str(path))
    keys = problem.keys
    where = index.locate(keys, namespace)
    # Names only where the keys spell the problem's own path (they always should).
    shown = named_path(keys, where.names) if named_path(keys, {}) == problem.path else problem.path
    return replace(problem, path=shown, position=file_position(path, where.line, where.column))
