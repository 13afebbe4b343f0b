"""A stack file's keys are unique: a key given twice in one mapping is refused, at both places.

YAML's loaders keep the last of two equal keys and drop the first without a word: two
`inference-platform:models:` blocks would leave the first block's models out of the stack (and
`pulumi up` would delete them), a second `modelUri` would replace the first. The Pulumi CLI refuses
such a file, and so does every command here, in the same words, through `read_stack_file`.

The check costs nothing on the fast path: the loader counts each mapping's keys as it builds it
(one comparison per mapping, in the constructor libyaml's parser feeds), and only a file where a
mapping came out shorter than it was written is walked again, node by node, to say where.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import yaml
from yaml.constructor import ConstructorError, SafeConstructor
from yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode

from inference_platform.cli.positions import file_position, named_path
from inference_platform.config.errors import MAX_SHOWN_NAME, Loc, Problem
from inference_platform.stack.config import PROJECT

MERGE_TAG = "tag:yaml.org,2002:merge"


class CountingConstructor(SafeConstructor):
    """The safe constructor, noting when a mapping holds fewer keys than the file wrote: a key
    given twice, or a merge (`<<: *base`) whose key the mapping sets again (which is allowed)."""

    shorter_mapping = False

    def construct_mapping(self, node: MappingNode, deep: bool = False) -> dict[Any, Any]:
        mapping: dict[Any, Any] = super().construct_mapping(node, deep=deep)
        if len(mapping) < len(node.value):
            self.shorter_mapping = True
        return mapping


class FastLoader(CountingConstructor, yaml.CSafeLoader):
    """libyaml's parser, the counting safe constructor."""


class PureLoader(CountingConstructor, yaml.SafeLoader):
    """PyYAML's own parser (for text libyaml could not nest deep enough for), the counting constructor."""


def load(text: str, fast: bool) -> tuple[Any, bool]:
    """The document of a YAML text, and whether some mapping of it may have a key given twice."""
    loader = (FastLoader if fast else PureLoader)(text)
    try:
        return loader.get_single_data(), loader.shorter_mapping
    finally:
        loader.dispose()


def _key(constructor: SafeConstructor, node: Node) -> object:
    """A key as the loader compares it (`a` and `"a"` are one key, `1` and `"1"` two); the node
    itself for one that is no value a mapping could hold (the loader refuses those anyway)."""
    if not isinstance(node, ScalarNode):
        return node
    try:
        key: object = constructor.construct_object(node, deep=True)
        hash(key)
    except (ConstructorError, TypeError, ValueError):
        return node
    return key


def _item_name(node: Node) -> str | None:
    if not isinstance(node, MappingNode):
        return None
    for key, value in node.value:
        if isinstance(key, ScalarNode) and key.value == "name" and isinstance(value, ScalarNode):
            name = str(value.value)
            return name if len(name) <= MAX_SHOWN_NAME else name[: MAX_SHOWN_NAME - 3] + "..."
    return None


Found = tuple[Loc, dict[int, str], Node, Node]
"""A key given again: its path (keys and indexes), the names of the items on it, the first key and the repeat."""


def _repeats(
    node: Node, loc: Loc, names: dict[int, str], seen: set[int], constructor: SafeConstructor
) -> Iterator[Found]:
    if id(node) in seen:  # an alias: its node was walked where its anchor is
        return
    seen.add(id(node))
    if isinstance(node, SequenceNode):
        for index, item in enumerate(node.value):
            name = _item_name(item)
            inner = names | ({len(loc): name} if name is not None else {})
            yield from _repeats(item, (*loc, index), inner, seen, constructor)
    elif isinstance(node, MappingNode):
        first: dict[object, Node] = {}
        for key_node, value in node.value:
            if key_node.tag == MERGE_TAG:
                continue
            key = _key(constructor, key_node)
            part = key if isinstance(key, (str, int)) else str(key_node.value)
            if key in first:
                yield (*loc, part), names, first[key], key_node
            else:
                first[key] = key_node
                yield from _repeats(value, (*loc, part), names, seen, constructor)


def _shown(loc: Loc, names: dict[int, str]) -> str:
    """The path as a config problem shows it: a project key's without the `inference-platform:`
    prefix, another namespace's key whole, a key outside `config:` as it is."""
    if len(loc) >= 2 and loc[0] == "config":
        key = str(loc[1])
        inner = {depth - 1: name for depth, name in names.items()}
        if key.startswith(f"{PROJECT}:"):
            return named_path((key.removeprefix(f"{PROJECT}:"), *loc[2:]), inner)
        return named_path((key, *loc[2:]), inner)
    return named_path(loc, names)


def repeated_keys(text: str, path: Path, fast: bool) -> list[Problem]:
    """A problem for each key of the text given again in its mapping, at the repeat, naming where
    the key was first given (merged keys a mapping sets again are not repeats)."""
    composed = yaml.compose(text, Loader=yaml.CSafeLoader if fast else yaml.SafeLoader)
    if composed is None:
        return []
    constructor = SafeConstructor()
    problems = []
    for loc, names, first, repeat in _repeats(composed, (), {}, set(), constructor):
        where = file_position(path, first.start_mark.line, first.start_mark.column)
        message = (
            f"is given twice in one mapping (first at {where}); YAML would keep the last and drop "
            "the first without a word: keep one"
        )
        position = file_position(path, repeat.start_mark.line, repeat.start_mark.column)
        problems.append(Problem(_shown(loc, names), message, loc, position=position))
    return problems
