"""Writes the component package's argument types (args.py) from the pydantic config models.

Pulumi's component analyzer (pulumi.provider.experimental) reads a component's inputs from the
TypedDict its constructor's `args` is annotated with, and accepts only what every Pulumi
language can express: no unions but Optional, no Literal, no tuple, no string annotations. The
config models use all of those, so the TypedDicts are generated from them rather than written
twice:

- a model becomes a TypedDict of the same name; a field with a default is NotRequired;
- a discriminated union of models (a model's `runtime`, a GPU's `mode`) becomes one TypedDict
  with the discriminator as an enum and every variant's fields, each saying which variants have it;
- a Literal becomes an Enum; a tuple a list; a union of scalars with str (a quantity) a str; any
  other union Any;
- the fields' descriptions become the docstrings the analyzer puts into the schema.

Validation stays with the config models: the provider validates every input through them
(provider/host.py), so the generated types only shape the schema and the SDKs.

`python -m inference_platform.provider.codegen` rewrites args.py; a test fails when it is stale.
"""

from __future__ import annotations

import json
import keyword
import re
import sys
import types
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any, Literal, Union, get_args, get_origin

from pulumi.provider.experimental.util import camel_case
from pydantic import BaseModel
from pydantic.fields import FieldInfo

from inference_platform.serving import InferenceServiceArgs, ModelNamespaceArgs, PayloadComparatorArgs, PipelineArgs
from inference_platform.stack import StackConfig

ARGS_FILE = Path(__file__).with_name("args.py")
# Each exposed component's args TypedDict and the config model it mirrors (components.py pairs them).
ARGUMENTS: dict[str, type[BaseModel]] = {
    "InferencePlatformArgs": StackConfig,
    "ModelNamespaceArgs": ModelNamespaceArgs,
    "InferenceServiceArgs": InferenceServiceArgs,
    "PipelineArgs": PipelineArgs,
    "PayloadComparatorArgs": PayloadComparatorArgs,
}
# What a flattened discriminated union is called, by its discriminator.
UNION_NAMES = {"runtime": "Model", "mode": "Gpu"}
_SCALARS = {str: "str", int: "int", float: "float", bool: "bool"}
_STEM_SUFFIXES = ("Config", "Spec", "Args", "Settings")


@dataclass
class Field:
    name: str
    type: str
    required: bool
    description: str | None


@dataclass
class Declaration:
    name: str
    doc: str | None
    fields: list[Field] = field(default_factory=list)
    enum: list[str] | None = None
    """For an Enum: its values."""


def _unwrap(annotation: Any) -> tuple[Any, list[Any]]:
    """An annotation without its Annotated layers, and their metadata."""
    metadata: list[Any] = []
    while get_origin(annotation) is Annotated:
        annotation, *extra = get_args(annotation)
        metadata += extra
    return annotation, metadata


def _is_union(annotation: Any) -> bool:
    return get_origin(annotation) in (Union, types.UnionType)


def _discriminator(metadata: Sequence[Any], info: FieldInfo | None) -> str | None:
    """A union's discriminator: in its Annotated metadata (a list's items), or its field's."""
    for item in metadata:
        if isinstance(item, FieldInfo) and isinstance(item.discriminator, str):
            return item.discriminator
    if info is not None and isinstance(info.discriminator, str):
        return info.discriminator
    return None


def _pascal(text: str) -> str:
    return "".join(part[:1].upper() + part[1:] for part in re.findall(r"[A-Za-z0-9]+", text))


def _stem(owner: str) -> str:
    for suffix in _STEM_SUFFIXES:
        if owner.endswith(suffix) and owner != suffix:
            return owner[: -len(suffix)]
    return owner


class Generator:
    def __init__(self) -> None:
        self.declarations: dict[str, Declaration] = {}
        self.sources: dict[str, object] = {}
        """What each declared name was made from, to refuse two different things of one name."""
        self.order: list[str] = []
        """Each type after every type its fields name: class bodies evaluate annotations at once."""

    def _declare(self, declaration: Declaration, source: object) -> str:
        known = self.sources.get(declaration.name)
        if known is not None and known != source:
            raise ValueError(f"two different types would be named {declaration.name}: rename one")
        self.sources[declaration.name] = source
        self.declarations.setdefault(declaration.name, declaration)
        return declaration.name

    def enum(self, name: str, values: Sequence[Any]) -> str:
        if name not in self.declarations:
            self.order.append(name)
        return self._declare(Declaration(name, None, enum=[str(v) for v in values]), tuple(values))

    def type_of(self, annotation: Any, owner: str, field_name: str, info: FieldInfo | None = None) -> str:
        """The TypedDict annotation (without NotRequired) for a config annotation."""
        annotation, metadata = _unwrap(annotation)
        if annotation in _SCALARS:
            return _SCALARS[annotation]
        if annotation is Any:
            return "Any"
        origin = get_origin(annotation)
        if origin is Literal:
            return self.enum(f"{_stem(owner)}{_pascal(field_name)}", get_args(annotation))
        if origin in (list, Sequence, tuple):
            (item, *rest) = get_args(annotation)
            if origin is tuple and rest not in ([], [Ellipsis]):
                raise ValueError(f"{owner}.{field_name}: fixed-length tuples have no Pulumi type")
            return f"list[{self.type_of(item, owner, field_name)}]"
        if origin in (dict, Mapping):
            _, value = get_args(annotation)
            return f"dict[str, {self.type_of(value, owner, field_name)}]"
        if isinstance(annotation, type) and issubclass(annotation, BaseModel):
            return self.model(annotation)
        if _is_union(annotation):
            members = [m for m in get_args(annotation) if m is not type(None)]
            if len(members) == 1:
                return self.type_of(members[0], owner, field_name)
            plain = [_unwrap(m)[0] for m in members]
            discriminator = _discriminator(metadata, info)
            if discriminator is not None:
                return self.flattened(discriminator, plain)
            if str in plain and all(m in _SCALARS for m in plain):
                return "str"  # a Kubernetes quantity: 2, 1.5 or 512Mi
            return "Any"
        raise ValueError(f"{owner}.{field_name}: no Pulumi type for {annotation!r}")

    def model(self, model: type[BaseModel], name: str | None = None) -> str:
        declared = name or model.__name__
        if declared in self.declarations:
            return self._declare(self.declarations[declared], model)
        declaration = Declaration(declared, (model.__doc__ or "").strip() or None)
        self._declare(declaration, model)
        for field_name, info in model.model_fields.items():
            _check_wire_name(model.__name__, field_name, info)
            declaration.fields.append(
                Field(
                    field_name,
                    self.type_of(info.annotation, model.__name__, field_name, info),
                    info.is_required(),
                    _description(info.description, [info]),
                )
            )
        self.order.append(declared)
        return declared

    def flattened(self, discriminator: str, variants: Sequence[type[BaseModel]]) -> str:
        """One TypedDict for a discriminated union: the tag as an enum, every variant's fields."""
        name = UNION_NAMES.get(discriminator)
        if name is None:
            raise ValueError(f"the union on {discriminator!r} needs a name in UNION_NAMES")
        if name in self.declarations:
            return self._declare(self.declarations[name], tuple(variants))
        tags = [get_args(_unwrap(v.model_fields[discriminator].annotation)[0])[0] for v in variants]
        declaration = Declaration(name, f"One of: {', '.join(tags)}, chosen by `{discriminator}`.")
        self._declare(declaration, tuple(variants))
        owners: dict[str, list[str]] = {}
        infos: dict[str, list[FieldInfo]] = {}
        for tag, variant in zip(tags, variants, strict=True):
            for field_name, info in variant.model_fields.items():
                _check_wire_name(variant.__name__, field_name, info)
                owners.setdefault(field_name, []).append(tag)
                infos.setdefault(field_name, []).append(info)
        for field_name, tags_with in owners.items():
            found = infos[field_name]
            if field_name == discriminator:
                type_name = self.enum(f"{name}{_pascal(field_name)}", tags)
            else:
                type_name = self._merged_type(name, field_name, found)
            description = _description(found[0].description, found)
            if field_name != discriminator and len(tags_with) < len(tags):
                only = f"Only with {discriminator} {_either(tags_with)}."
                description = f"{description} {only}" if description else only
            everywhere = len(tags_with) == len(tags) and all(info.is_required() for info in found)
            required = field_name == discriminator or everywhere
            declaration.fields.append(Field(field_name, type_name, required, description))
        self.order.append(name)
        return name

    def _merged_type(self, union: str, field_name: str, infos: Sequence[FieldInfo]) -> str:
        """A field several variants have: one type, or one enum of every variant's values."""
        literals = [_unwrap(_strip_none(i.annotation))[0] for i in infos]
        if all(get_origin(a) is Literal for a in literals) and len({get_args(a) for a in literals}) > 1:
            values = list(dict.fromkeys(v for a in literals for v in get_args(a)))
            return self.enum(f"{union}{_pascal(field_name)}", values)
        found = {self.type_of(i.annotation, union, field_name, i) for i in infos}
        if len(found) > 1:
            raise ValueError(f"{union}.{field_name} has different types in different variants: {sorted(found)}")
        return found.pop()


def _check_wire_name(owner: str, field_name: str, info: FieldInfo) -> None:
    """The wire names a property as the analyzer camel-cases it; the config model must read the
    same name (its alias), or a wire input would be an unknown setting."""
    wire, alias = camel_case(field_name), info.alias or field_name
    if wire != alias:
        raise ValueError(f"{owner}.{field_name}: the wire calls it {wire!r}, the config model {alias!r}")


def _strip_none(annotation: Any) -> Any:
    if _is_union(annotation):
        members = [m for m in get_args(annotation) if m is not type(None)]
        if len(members) == 1:
            return members[0]
    return annotation


def _either(tags: Sequence[str]) -> str:
    return tags[0] if len(tags) == 1 else f"{', '.join(tags[:-1])} or {tags[-1]}"


def _description(text: str | None, infos: Sequence[FieldInfo]) -> str | None:
    """A field's description, with its default when it is a plain value the same in every variant."""
    described = (text or "").strip()
    found = [None if info.is_required() else info.get_default(call_default_factory=True) for info in infos]
    plain = [default for default in found if isinstance(default, (str, int, float, bool))]
    defaults = {json.dumps(default) for default in plain}
    if len(plain) == len(found) and len(defaults) == 1:
        shown = f"Default: {defaults.pop()}."
        described = f"{described} {shown}" if described else shown
    return described or None


HEADER = '''"""The component package's argument types, generated from the config models: do not edit.

`python -m inference_platform.provider.codegen` (`make provider`) writes this file from the
pydantic models (provider/codegen.py says how); a test fails when it is stale. Pulumi's component
analyzer reads these annotations as types, hence no `from __future__ import annotations`.
"""

from enum import Enum
from typing import Any, NotRequired, TypedDict
'''


def _docstring(text: str, indent: str) -> str:
    escaped = text.replace("\\", "\\\\").replace('"', '\\"')
    return f'{indent}"""{escaped}"""\n'


def render(declarations: Mapping[str, Declaration], order: Sequence[str]) -> str:
    """args.py's text: the enums, then each TypedDict after the types its fields name."""
    enums = [n for n in order if declarations[n].enum is not None]
    out = [HEADER]
    for name in enums:
        out.append(f"\n\nclass {name}(str, Enum):\n")
        for value in declarations[name].enum or []:
            out.append(f"    {_member(value)} = {json.dumps(value)}\n")
    for name in (n for n in order if declarations[n].enum is None):
        declaration = declarations[name]
        out.append(f"\n\nclass {name}(TypedDict):\n")
        if declaration.doc:
            out.append(_docstring(" ".join(declaration.doc.split()), "    "))
            out.append("\n")
        for item in declaration.fields:
            annotation = item.type if item.required else f"NotRequired[{item.type}]"
            out.append(f"    {item.name}: {annotation}\n")
            if item.description:
                out.append(_docstring(item.description, "    "))
    return "".join(out)


def _member(value: str) -> str:
    """An enum member's name for a value: PascalCase, `_` after a Python keyword (None_)."""
    name = _pascal(value) or "Empty"
    if name[0].isdigit():
        name = f"V{name}"
    return f"{name}_" if keyword.iskeyword(name) else name


def generate(components: Mapping[str, type[BaseModel]]) -> str:
    """args.py for components' arguments: {TypedDict name: the config model it mirrors}."""
    generator = Generator()
    for name, model in components.items():
        generator.model(model, name)
    return render(generator.declarations, generator.order)


def main(argv: list[str] | None = None) -> int:
    text = generate(ARGUMENTS)
    if argv and argv[0] == "--check":
        if ARGS_FILE.read_text(encoding="utf-8") != text:
            print(f"{ARGS_FILE} is stale: run `make provider`", file=sys.stderr)
            return 1
        return 0
    ARGS_FILE.write_text(text, encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
