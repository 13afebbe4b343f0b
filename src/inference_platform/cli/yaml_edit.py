"""Edits of a round-trip (ruamel.yaml) document that keep every comment where it was.

ruamel.yaml hangs the comment lines that follow a value on that value's entry: the lines between
a model's last version and the next model belong, in its tree, to the last key of that version
(`mirrorPercent: 20`, then `# Image classification ...`). Plain dict and list operations on such a
key drop those lines with it (deleting it, or replacing it by another key) or leave them behind
(appending after it). These operations carry them along: a replaced key hands its comments to its
replacement, an appended key or item takes over the lines that followed the one before it, and a
removed item leaves its comments where it was.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from typing import Any

from ruamel.yaml.comments import CommentedMap, CommentedSeq
from ruamel.yaml.error import CommentMark
from ruamel.yaml.scalarstring import FoldedScalarString, LiteralScalarString
from ruamel.yaml.tokens import CommentToken

Container = CommentedMap | CommentedSeq
Slot = tuple[Container, Any]
"""A container and one of its keys (or indexes): where the comment after that entry's value hangs."""


def _post(container: Container) -> int:
    """The index, in an entry's comment list, of the comment that follows its value."""
    return 2 if isinstance(container, CommentedMap) else 0


def _block(value: Any) -> bool:
    """A block-style mapping or sequence with items: its comments hang inside it."""
    return isinstance(value, CommentedMap | CommentedSeq) and len(value) > 0 and not value.fa.flow_style()


def tail(node: Any) -> Slot | None:
    """The entry whose comment holds the lines after `node`: its last scalar (or flow) value's, depth first."""
    while _block(node):
        key = list(node)[-1] if isinstance(node, CommentedMap) else len(node) - 1
        value = node[key]
        if not _block(value):
            return node, key
        node = value
    return None


def _comment(slot: Slot) -> CommentToken | None:
    container, key = slot
    entry = container.ca.items.get(key)
    index = _post(container)
    token = entry[index] if entry is not None and len(entry) > index else None
    return token if isinstance(token, CommentToken) else None


def _set_comment(slot: Slot, token: CommentToken | None) -> None:
    container, key = slot
    entry = container.ca.items.setdefault(key, [None, None, None, None])
    entry[_post(container)] = token


def _block_scalar(slot: Slot) -> bool:
    """A `|` or `>` string: nothing follows it on its line, and its comment starts on a line of its own."""
    container, key = slot
    return isinstance(container[key], LiteralScalarString | FoldedScalarString)


def _split(token: CommentToken | None, slot: Slot) -> tuple[str, str]:
    """A value's comment as (the comment on its own line, the lines after it), each with its newline."""
    if token is None:
        return "", ""
    if _block_scalar(slot):
        return "", " " * token.column + token.value
    eol, _, rest = token.value.partition("\n")
    return eol, rest


def _append_lines(slot: Slot, lines: str) -> None:
    """Add comment lines (each with its indentation and newline) after the entry's value and its comments."""
    if not lines:
        return
    token = _comment(slot)
    if token is None:
        _set_comment(slot, CommentToken("\n" + lines, CommentMark(0)))
        return
    value = token.value
    token.value = (value if value.endswith("\n") else value + "\n") + lines


def _outside(line: str, outside: int) -> bool:
    return bool(line.strip()) and len(line) - len(line.lstrip(" ")) < outside


def _take_following(slot: Slot | None, outside: int = 0) -> str:
    """Detach the comment lines that follow an entry, from the first one indented less than
    `outside` on (with the blank lines before it): the lines that belong to what comes after the
    entry's container, not to the container itself. The end-of-line comment always stays."""
    if slot is None:
        return ""
    token = _comment(slot)
    eol, rest = _split(token, slot)
    lines = rest.splitlines(keepends=True)
    start = next((i for i, line in enumerate(lines) if _outside(line, outside)), None)
    if token is None or start is None:
        return ""
    while start > 0 and not lines[start - 1].strip():
        start -= 1
    kept = "".join(lines[:start])
    if _block_scalar(slot) and kept:
        token.value = kept.lstrip(" ")  # the first kept line is the token's own, at its column
    elif eol or kept:
        token.value = eol + "\n" + kept
    else:
        _set_comment(slot, None)
    return "".join(lines[start:])


def _rightmost(node: Any) -> list[Container]:
    """The block containers from `node` down to its last value, outermost first."""
    path: list[Container] = []
    while _block(node):
        path.append(node)
        node = node[list(node)[-1] if isinstance(node, CommentedMap) else len(node) - 1]
    return path


def _take_ends(container: Container, outside: int) -> str:
    """Detach the comment lines a container holds after its last entry (ruamel keeps them there
    when its last value is empty), from the first one indented less than `outside` on."""
    tokens = [token for token in container.ca.end or [] if isinstance(token, CommentToken)]
    start = next((i for i, token in enumerate(tokens) if token.column < outside and token.value.strip()), None)
    if start is None:
        return ""
    while start > 0 and not tokens[start - 1].value.strip():  # blank lines of their own before it
        start -= 1
    blank = ""
    if start > 0:  # the blank lines before the first line taken that end the token before it
        before = tokens[start - 1]
        kept = before.value.rstrip("\n") + "\n"
        blank, before.value = before.value[len(kept) :], kept
    container.ca.end = tokens[:start]
    return blank + "".join(" " * token.column + token.value for token in tokens[start:])


def _take_after(node: Any, outside: int) -> str:
    """Detach the comment lines after a block node that belong to what follows it (indented less
    than `outside`), wherever ruamel hung them: on its last value's entry, or at the end of a
    container on the way to it (innermost first). Every line after the first such one goes with it."""
    taken = _take_following(tail(node), outside)
    for container in reversed(_rightmost(node)):
        taken += _take_all_ends(container) if taken else _take_ends(container, outside)
    return taken


def _take_all_ends(container: Container) -> str:
    tokens = [token for token in container.ca.end or [] if isinstance(token, CommentToken)]
    container.ca.end = []
    return "".join(" " * token.column + token.value for token in tokens)


def _column(node: Any) -> int:
    column = node.lc.col if isinstance(node, CommentedMap | CommentedSeq) else None
    return column if isinstance(column, int) else 0


def replace_key(mapping: CommentedMap, old: str, new: str, value: Any) -> None:
    """Put `new: value` where `old` was, with `old`'s comments (the one on its line and the lines after it)."""
    position = list(mapping).index(old)
    comments = mapping.ca.items.pop(old, None)
    del mapping[old]
    mapping.ca.items.pop(new, None)
    mapping.insert(position, new, value)
    if comments is not None:
        mapping.ca.items[new] = comments


def delete_key(mapping: CommentedMap, key: str) -> None:
    """Delete a key if it is there; its comments stay where it was."""
    if key not in mapping:
        return
    keys = list(mapping)
    position = keys.index(key)
    slot: Slot = (mapping, key)
    following = _take_after(mapping[key], sys.maxsize) if _block(mapping[key]) else _take_following(slot, sys.maxsize)
    column = _column(mapping)
    lines = "".join(" " * column + line + "\n" for line in comment_lines(mapping[key]))
    eol, _ = _split(_comment(slot), slot)
    lines = (" " * column + eol.strip() + "\n" if eol.strip() else "") + lines + following
    del mapping[key]
    mapping.ca.items.pop(key, None)
    if not lines:
        return
    if position > 0:
        before = tail(mapping) if position == len(keys) - 1 else _entry_tail(mapping, keys[position - 1])
        if before is not None:
            _append_lines(before, lines)
            return
    end = tail(mapping)
    if end is not None:
        _append_lines(end, lines)


def _entry_tail(mapping: CommentedMap, key: str) -> Slot:
    """Where the lines after one key's value hang: inside its block value, or on its entry."""
    value = mapping[key]
    found = tail(value) if _block(value) else None
    return found if found is not None else (mapping, key)


def set_key(mapping: CommentedMap, key: str, value: Any) -> None:
    """Set a key; a new one goes last, and the lines that followed the mapping still follow it."""
    if key in mapping:
        mapping[key] = value
        return
    following = _take_after(mapping, _column(mapping))
    mapping.ca.items.pop(key, None)  # a stale entry of a key deleted before
    mapping[key] = value
    new = tail(mapping)
    if new is not None:
        _append_lines(new, following)


def append_item(sequence: CommentedSeq, item: Any) -> None:
    """Append an item; the lines that followed the sequence's last item now follow the new one."""
    following = _take_after(sequence, _column(sequence) + 1)
    sequence.append(item)
    new = tail(sequence)
    if new is not None:
        _append_lines(new, following)


def _tokens(node: Any) -> Iterator[CommentToken]:
    """Every comment in a subtree, in the order of the file (repeats possible: ruamel shares some)."""

    def flat(value: Any) -> Iterator[CommentToken]:
        if isinstance(value, CommentToken):
            yield value
        elif isinstance(value, list):
            for part in value:
                yield from flat(part)

    if not isinstance(node, CommentedMap | CommentedSeq):
        return
    yield from flat(node.ca.comment)
    keys = list(node) if isinstance(node, CommentedMap) else range(len(node))
    for key in keys:
        entry = node.ca.items.get(key) or [None, None, None, None]
        post = _post(node)
        yield from flat([part for index, part in enumerate(entry) if index != post])
        yield from _tokens(node[key])
        if len(entry) > post:
            yield from flat(entry[post])
    yield from flat(node.ca.end)


def comment_lines(node: Any) -> list[str]:
    """The text of every comment in a subtree, in order, one line each (`# ...`, stripped)."""
    seen: set[int] = set()
    lines: list[str] = []
    for token in _tokens(node):
        if id(token) in seen:
            continue
        seen.add(id(token))
        lines += [line.strip() for line in token.value.splitlines() if line.strip().startswith("#")]
    return lines


def remove_item(sequence: CommentedSeq, index: int) -> None:
    """Remove an item; its comments, and the lines that followed it, stay where it was."""
    item = sequence[index]
    column = _column(sequence)
    following = _take_after(item, sys.maxsize)
    lines = "".join(" " * column + line + "\n" for line in comment_lines(item)) + following
    del sequence[index]
    if not lines:
        return
    if index > 0:
        before = tail(sequence[index - 1])
        if before is not None:
            _append_lines(before, lines)
            return
    _prepend(sequence, lines)


def _prepend(sequence: CommentedSeq, lines: str) -> None:
    """Comment lines before a sequence's first item."""
    if sequence.ca.comment is None:
        sequence.ca.comment = [None, []]
    while len(sequence.ca.comment) < 2:
        sequence.ca.comment.append(None)
    if sequence.ca.comment[1] is None:
        sequence.ca.comment[1] = []
    for line in lines.splitlines():
        text = line.lstrip(" ")
        mark = CommentMark(len(line) - len(text))
        sequence.ca.comment[1].append(CommentToken(text + "\n", mark))
