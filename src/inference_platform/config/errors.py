"""Config problems as people read them: one line each, `path: plain sentence`.

Read from a stack file, a problem also says where in the file it is (`Pulumi.prod.yaml:42:11:
path: sentence`); the CLI adds that (cli/positions.py), from each problem's path as keys and indexes.
"""

from __future__ import annotations

import difflib
import re
import types
import typing
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Annotated, Any, Union

from pydantic import BaseModel, ValidationError
from pydantic.alias_generators import to_snake

Loc = tuple[int | str, ...]
"""A path as keys and list indexes: ('models', 0, 'versions', 1, 'weight')."""


@dataclass(frozen=True)
class Discriminated:
    """A discriminated union in a config tree: the key that selects the variant, its values, what
    reports call it, and the fields (besides list items) that hold one. Pydantic puts the selected
    value into error paths; reports take it out again."""

    key: str
    tags: tuple[str, ...]
    what: str
    fields: frozenset[str] = frozenset()


def printable(text: str) -> str:
    """Text with control and other unprintable characters escaped (\\x1e), so that a key or value
    from the config can never break a report into misleading lines."""
    return "".join(c if c.isprintable() else c.encode("unicode_escape").decode("ascii") for c in text)


@dataclass(frozen=True, order=True)
class Problem:
    path: str
    message: str
    loc: Loc | None = field(default=None, compare=False)
    """The path as keys and indexes, where it is known exactly (pydantic's); else parsed from `path`."""
    position: str = field(default="", compare=False)
    """Where in the stack file the problem is (`Pulumi.prod.yaml:42:11`), when it came from one."""
    stack: str = field(default="", compare=False)
    """The stack whose file holds it, in an environment of several stacks (empty: the stack's own)."""

    @property
    def keys(self) -> Loc:
        return self.loc if self.loc is not None else parse_path(self.path)

    def __str__(self) -> str:
        text = f"{self.path}: {self.message}" if self.path else self.message
        where = self.position or (f"stack {self.stack}" if self.stack else "")
        return printable(f"{where}: {text}" if where else text)


INCOMPLETE = "more problems may follow once these are fixed: some checks need settings that did not parse"


class ConfigError(Exception):
    """The stack config (or a config model a program validates, `subject`) is invalid; carries
    every problem found, not just the first.

    `incomplete`: some checks could not run because what they read did not parse, so fixing
    these problems may reveal others. `preface`: a line of context before the problems (not one
    of them, and not counted)."""

    def __init__(
        self,
        problems: Iterable[Problem],
        *,
        incomplete: bool = False,
        preface: str = "",
        subject: str = "stack config",
    ) -> None:
        self.problems = list(problems)
        self.incomplete = incomplete
        self.preface = preface
        self.subject = subject
        super().__init__(self.report())

    def report(self) -> str:
        count = len(self.problems)
        lines = [f"invalid {self.subject} ({count} problem{'s' if count != 1 else ''}):"]
        lines += [f"  {printable(self.preface)}"] if self.preface else []
        lines += [f"  {problem}" for problem in self.problems]
        lines += [f"  {INCOMPLETE}"] if self.incomplete else []
        return "\n".join(lines)

    def with_problems(self, problems: Iterable[Problem]) -> ConfigError:
        """The same error (its preface, whether it is complete) with these problems instead."""
        return ConfigError(problems, incomplete=self.incomplete, preface=self.preface, subject=self.subject)


def format_path(loc: Sequence[int | str]) -> str:
    """('models', 0, 'versions', 1, 'weight') -> models[0].versions[1].weight"""
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += f".{part}" if out else part
    return out


MAX_SHOWN_NAME = 63
"""A name longer than any Kubernetes name is not a name to show in full."""


def item_name(item: Any) -> str | None:
    """An item's own `name`, as reports show it beside the item's index."""
    name = item.get("name") if isinstance(item, Mapping) else None
    if not isinstance(name, str):
        return None
    return name if len(name) <= MAX_SHOWN_NAME else name[: MAX_SHOWN_NAME - 3] + "..."


def _child(node: Any, key: int | str) -> Any:
    if isinstance(node, Mapping) and isinstance(key, str):
        return node.get(key, node.get(to_snake(key)))
    if isinstance(node, Sequence) and not isinstance(node, str) and isinstance(key, int) and 0 <= key < len(node):
        return node[key]
    return None


def named_in(keys: Sequence[int | str], data: Any) -> str:
    """A path in data a program validated, each mapping on the way that has a `name` named beside its
    key or index: model (llama).versions[1] (v2).wieght, as a stack file's report names its items."""
    out = ""
    node = data
    for part in keys:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else part)
        node = _child(node, part)
        name = item_name(node)
        if name is not None:
            out += f" ({name})"
    return out


_PATH_PART = re.compile(r"\[(\d+)\]|([^.\[\]]+)")


def parse_path(path: str) -> Loc:
    """models[0].versions[1].weight -> ('models', 0, 'versions', 1, 'weight'): format_path undone,
    for the paths model validators write (their keys hold no dots or brackets)."""
    return tuple(int(index) if index else key for index, key in _PATH_PART.findall(path))


def join_path(base: str, relative: str) -> str:
    if not relative:
        return base
    if not base or relative.startswith("["):
        return base + relative
    return f"{base}.{relative}"


@dataclass(frozen=True)
class _Selected:
    """A variant a path went through: its union, the tag that chose it, the path's length there."""

    union: Discriminated
    tag: str
    depth: int


def _strip_tags(loc: Sequence[int | str], unions: Sequence[Discriminated]) -> tuple[list[int | str], _Selected | None]:
    """Take the discriminators' values out of a path; returns it, and the innermost variant it went through."""
    out: list[int | str] = []
    selected = None
    for index, part in enumerate(loc):
        previous = loc[index - 1] if index > 0 else None
        holder = next(
            (u for u in unions if part in u.tags and (isinstance(previous, int) or previous in u.fields)), None
        )
        if isinstance(part, str) and index > 0 and holder is not None:
            selected = _Selected(holder, part, len(out))
            continue
        out.append(part)
    return out, selected


# Pydantic's (strict) type errors, in the words of a stack file.
_SCALAR_TYPES = {
    "int_type": "a whole number",
    "float_type": "a number",
    "string_type": "a string",
    "bool_type": "true or false",
    "list_type": "a list",
}


def _yaml_shown(value: Any) -> str:
    """A value as the stack file wrote it: true, 60, 'text' (quoted: a string), [..]."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if value is None:
        return "null (an empty value)"
    if isinstance(value, str):
        return f"the string {_shown(value)}"
    return _shown(value)


def _shown(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


SUGGESTION_CUTOFF = 0.7
"""How like a choice a mistake must be to suggest it (difflib's ratio): typos score 0.8 and more, while
at difflib's default 0.6 unrelated words match (`colour` would be read as `rollout`)."""


def did_you_mean(given: Any, choices: Iterable[str]) -> str:
    """`: did you mean 'exclusive'?` where one of `choices` is close to `given` (difflib), else ''."""
    close = difflib.get_close_matches(str(given), list(choices), n=1, cutoff=SUGGESTION_CUTOFF)
    return f": did you mean {close[0]!r}?" if close else ""


def _unknown(what: str, given: Any, allowed: Sequence[str]) -> str:
    """A value that is none of `allowed`, with the one it was probably meant to be."""
    hint = did_you_mean(given, allowed)
    if hint:
        return f"unknown {what} {_shown(given)}{hint} (one of {', '.join(allowed)})"
    return f"unknown {what} {_shown(given)}: use one of {', '.join(allowed)}"


def _unwrap(annotation: Any) -> list[Any]:
    """The types a field's annotation holds a value of: Optional's, a union's, Annotated's type."""
    if typing.get_origin(annotation) is Annotated:
        return _unwrap(typing.get_args(annotation)[0])
    if typing.get_origin(annotation) in (Union, types.UnionType):
        return [inner for arg in typing.get_args(annotation) for inner in _unwrap(arg)]
    return [annotation]


def _field_types(model: type[BaseModel], key: int | str) -> list[Any]:
    info = next((i for n, i in model.model_fields.items() if key in (n, i.alias)), None)
    return _unwrap(info.annotation) if info is not None else []


def _settings_at(model: type[BaseModel] | None, loc: Sequence[int | str]) -> list[str]:
    """The settings (keys) of the config model at `loc` (a path with the discriminators' values
    in it, as pydantic gives it) below `model`; [] where the path leads to no model."""
    current: list[Any] = [model] if model is not None else []
    for part in loc:
        models = [t for t in current if isinstance(t, type) and issubclass(t, BaseModel)]
        tagged = [m for m in models if _tag_of(m) == part]
        if tagged:
            current = tagged
            continue
        following: list[Any] = []
        for option in current:
            origin, args = typing.get_origin(option), typing.get_args(option)
            if isinstance(part, int) and origin in (list, tuple) and args:
                following += _unwrap(args[0])
            elif isinstance(part, str) and origin is dict and len(args) == 2:
                following += _unwrap(args[1])
            elif isinstance(option, type) and issubclass(option, BaseModel):
                following += _field_types(option, part)
        current = following
    models = [t for t in current if isinstance(t, type) and issubclass(t, BaseModel)]
    return [info.alias or name for m in models[:1] for name, info in m.model_fields.items()]


def _tag_of(model: type[BaseModel]) -> str | None:
    """The value a variant of a discriminated union is chosen by (its Literal runtime or mode)."""
    for name in ("runtime", "mode"):
        info = model.model_fields.get(name)
        args = typing.get_args(info.annotation) if info is not None else ()
        if len(args) == 1 and isinstance(args[0], str):
            return args[0]
    return None


_QUOTED = re.compile(r"'([^']*)'")

# Pydantic's bounds and lengths, in the stack file's words: kind -> (context key, sentence).
_CONSTRAINTS = {
    "greater_than_equal": ("ge", "must be at least {}"),
    "greater_than": ("gt", "must be more than {}"),
    "less_than_equal": ("le", "must be at most {}"),
    "less_than": ("lt", "must be less than {}"),
    "multiple_of": ("multiple_of", "must be a multiple of {}"),
    "string_too_long": ("max_length", "must be at most {} characters"),
    "string_too_short": ("min_length", "must be at least {} characters"),
    "too_long": ("max_length", "must hold at most {} items"),
    "too_short": ("min_length", "must hold at least {} items"),
}


def _constraint(kind: str, ctx: Mapping[str, Any]) -> str:
    key, sentence = _CONSTRAINTS[kind]
    bound = ctx.get(key)
    if kind in ("string_too_long", "string_too_short", "too_long", "too_short") and bound == 1:
        sentence = sentence.replace("characters", "character").replace("items", "item")
    if isinstance(bound, float) and bound.is_integer():
        bound = int(bound)
    return sentence.format(_yaml_shown(bound) if not isinstance(bound, str) else bound)


_SHOW_THEIR_VALUE = ("dns", "quantity", "duration", "model_uri", "union_mismatch", "cache_path")
"""Error kinds whose messages say the value their own way: no `(got ...)` after them."""
_LIBRARY_PREFIXES = ("Value error, ", "Assertion failed, ")


def _own_words(error: Any, message: str) -> str:
    """A validator's own ValueError (or assert) as it said it, without pydantic's "Value error, ";
    any other of pydantic's sentences ("Input should be a valid ...") as "must be a valid ..."."""
    text = str(error) if error is not None else message
    for prefix in _LIBRARY_PREFIXES:
        text = text.removeprefix(prefix)
    if text.startswith("Input should be "):
        return "must be " + text.removeprefix("Input should be ")
    if text.startswith("String should match pattern"):
        return "does not have the form this setting takes (its description says it)"
    return text or "not a valid value"


def _message(
    item: Any,
    loc: list[int | str],
    unions: Sequence[Discriminated],
    selected: _Selected | None,
    settings: Sequence[str] = (),
) -> tuple[str, str]:
    """(extra path, sentence) for one pydantic error; `settings`: those of the model that holds the
    path's last key (for an unknown one's "did you mean")."""
    kind = item["type"]
    ctx = item.get("ctx") or {}
    if kind in ("union_tag_invalid", "union_tag_not_found"):
        discriminator = str(ctx["discriminator"]).strip("'")
        union = next(u for u in unions if u.key == discriminator)
        if kind == "union_tag_invalid":
            return discriminator, _unknown(union.what, ctx["tag"], union.tags)
        return discriminator, f"required: set {discriminator} to one of {', '.join(union.tags)}"
    if kind == "extra_forbidden":
        hint = did_you_mean(loc[-1], settings)
        if selected is not None and len(loc) == selected.depth + 1:
            return "", f"{loc[-1]!r} is not a setting of the {selected.tag} {selected.union.what}{hint}"
        return "", f"unknown setting {loc[-1]!r}{hint or ': check its spelling'}"
    if kind in ("literal_error", "enum") and isinstance(item["input"], str):
        return "", _unknown("value", item["input"], _QUOTED.findall(str(ctx.get("expected", ""))))
    if kind == "missing":
        return "", "required, but not set"
    if kind == "too_short" and ctx.get("min_length") == 1:
        return "", "must not be empty"
    if kind in ("dict_type", "model_type", "model_attributes_type"):
        return "", f"must be a mapping of settings, not {_shown(item['input'])}"
    if kind in _SCALAR_TYPES:
        return "", f"must be {_SCALAR_TYPES[kind]}, not {_yaml_shown(item['input'])}"
    if kind in _CONSTRAINTS:
        return "", f"{_constraint(kind, ctx)} (got {_shown(item['input'])})"
    message = _own_words(ctx.get("error") if kind in ("value_error", "assertion_error") else None, str(item["msg"]))
    shown = _shown(item["input"])
    if not kind.startswith(_SHOW_THEIR_VALUE) and shown not in message:
        message += f" (got {shown})"
    return "", message


def problems_from_validation(
    error: ValidationError,
    unions: Sequence[Discriminated] = (),
    prefix: Sequence[int | str] = (),
    model: type[BaseModel] | None = None,
) -> list[Problem]:
    """Every problem of a failed validation, sorted by path; `unions` are the discriminated unions
    the validated model holds, `model` the model (for "did you mean" an unknown key's setting)."""
    return problems_from_errors(error.errors(include_url=False), unions, prefix, model)


def problems_from_errors(
    errors: Iterable[Any],
    unions: Sequence[Discriminated] = (),
    prefix: Sequence[int | str] = (),
    model: type[BaseModel] | None = None,
) -> list[Problem]:
    """Every problem of pydantic's error items (a validation's, or config/partial.py's), sorted by path."""
    problems: list[Problem] = []
    for item in _misspelt_not_missing(_one_per_union(list(errors)), model):
        settings = _settings_at(model, item["loc"][:-1]) if item["type"] == "extra_forbidden" else []
        loc, selected = _strip_tags([*prefix, *item["loc"]], unions)
        path = format_path(loc)
        if item["type"] == "config_problem":
            problems += [
                Problem(join_path(path, rel), message, (*loc, *parse_path(rel)))
                for rel, message in item["ctx"]["problems"]
            ]
            continue
        extra, message = _message(item, loc, unions, selected, settings)
        problems.append(Problem(join_path(path, extra), message, (*loc, *parse_path(extra))))
    return sorted(set(problems), key=problem_order)


def _misspelt_not_missing(items: list[Any], model: type[BaseModel] | None) -> list[Any]:
    """A required setting written with a slip (`model\u00a0Uri`, a non-breaking space in it) is one
    mistake, the unknown key that says what it was meant to be: not also the setting as missing."""
    meant = set()
    for item in items:
        if item["type"] == "extra_forbidden":
            parent = tuple(item["loc"][:-1])
            close = difflib.get_close_matches(
                str(item["loc"][-1]), _settings_at(model, parent), n=1, cutoff=SUGGESTION_CUTOFF
            )
            meant |= {(*parent, close[0])} if close else set()
    return [item for item in items if not (item["type"] == "missing" and tuple(item["loc"]) in meant)]


# How pydantic labels the variant of a union (tried one after another) in an error's path: a type
# (str, int, list[...]), a model's class name, a validator (function-after[...]).
_VARIANT = re.compile(
    r"^(str|int|float|bool|bytes|none|decimal|(list|dict|tuple|set|literal|nullable|lax-or-strict|json-or-python|"
    r"function-(after|before|wrap|plain)|constrained-\w+|tagged-union|chain|is-instance)\[.*\]|[A-Z][A-Za-z0-9]*)$"
)


def _variant_at(loc: Sequence[int | str]) -> int | None:
    return next((i for i, part in enumerate(loc) if isinstance(part, str) and _VARIANT.match(part)), None)


def _one_per_union(items: list[Any]) -> list[Any]:
    """A value no variant of a (smart) union took is one mistake, not one per variant: the errors
    whose paths part at a union's variants, as one error at the union's own path."""
    groups: dict[tuple[int | str, ...], list[Any]] = {}
    for item in items:
        at = _variant_at(item["loc"])
        if at is not None:
            groups.setdefault(tuple(item["loc"][:at]), []).append(item)
    unions = {
        prefix: group for prefix, group in groups.items() if len({item["loc"][len(prefix)] for item in group}) > 1
    }
    kept = [item for item in items if not any(item in group for group in unions.values())]
    for prefix, group in unions.items():
        wanted = list(dict.fromkeys(_wanted(item) for item in group))
        value = next((item["input"] for item in group if len(item["loc"]) == len(prefix) + 1), group[0]["input"])
        either = " or ".join([", ".join(wanted[:-1]), wanted[-1]] if len(wanted) > 1 else wanted)
        message = f"must be {either}, not {_yaml_shown(value)}"
        kept.append({"type": "union_mismatch", "loc": prefix, "msg": message, "input": value})
    return kept


def _wanted(item: Any) -> str:
    """What a union's variant wanted, as a noun (a number, a mapping of settings)."""
    if item["type"] in _SCALAR_TYPES:
        return _SCALAR_TYPES[item["type"]]
    if item["type"] in ("dict_type", "model_type", "model_attributes_type"):
        return "a mapping of settings"
    return str(item["msg"]).removeprefix("Input should be ")


def problem_order(problem: Problem) -> tuple[list[tuple[int, int | str]], str]:
    """Problems in the order of their paths (models[2] before models[10]), then of their sentences."""
    return _path_sort_key(problem.path), problem.message


def _path_sort_key(path: str) -> list[tuple[int, int | str]]:
    """Sort models[2] before models[10]: split paths into names and numbers."""
    key: list[tuple[int, int | str]] = []
    for token in path.replace("[", ".[").split("."):
        if token.startswith("[") and token.endswith("]") and token[1:-1].isdigit():
            key.append((0, int(token[1:-1])))
        elif token:
            key.append((1, token))
    return key
