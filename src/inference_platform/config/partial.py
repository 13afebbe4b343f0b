"""Every independent problem of a config at once, where pydantic stops at the first of each model.

Pydantic runs a model's validators (the checks across its fields: weights that add up, names
that are unique, vLLM's GPU) only when every field parsed and no key is unknown, and runs the
next validator only when the one before passed; a model whose validator failed fails its parent's
field, so the parent's checks do not run either. A config with two mistakes in one model
reported the first alone.

`validate_partially` validates again, field by field, after pydantic refused a config: fields
that parse become a model (built without validation, the fields that did not parse left out of
it), unknown keys are reported and set aside, and each validator of each model then runs on what
parsed, independently of the others. A validator that reads a field that did not parse (or that
stumbles over a value its own model's checks refused) cannot run: its checks are counted as not
run, and the report says more problems may follow (`Partial.incomplete`).

Only fields that hold config models (or lists of them, or the discriminated union of runtimes)
are parsed piece by piece; every other field, and models with validators of other kinds (before,
wrap, field validators), are validated whole by pydantic, their errors as pydantic reports them.
"""

from __future__ import annotations

import inspect
import types
import typing
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Annotated, Any, Union

from pydantic import BaseModel, ConfigDict, TypeAdapter, ValidationError
from pydantic.fields import FieldInfo
from pydantic_core import PydanticCustomError

Loc = tuple[int | str, ...]


@dataclass
class Partial:
    """What validating piece by piece found: pydantic's error items (locations from the root),
    and whether some check could not run because what it reads did not parse."""

    errors: list[dict[str, Any]] = field(default_factory=list)
    incomplete: bool = False


def parsed(instance: BaseModel, name: str) -> bool:
    """Whether a field of a model holds a value. Always, after pydantic's validation; in the
    partial pass a field that did not parse is left out, and a check that reads it cannot run.
    A check over many items (every version's URI) skips such an item with this, and still runs on
    the others: that item's own problem is reported already."""
    return name in instance.__dict__


def validate_partially(model: type[BaseModel], data: Any) -> Partial:
    found = Partial()
    _Walk(found, strict=model.model_config.get("strict")).model(model, data, ())
    return found


_NOT_PARSED = object()


def _variants(annotation: Any) -> tuple[list[type[BaseModel]], str] | None:
    """The model classes of a discriminated union of models and its discriminator, else None."""
    if typing.get_origin(annotation) is not Annotated:
        return None
    annotation, *metadata = typing.get_args(annotation)
    discriminator = next((m.discriminator for m in metadata if isinstance(m, FieldInfo) and m.discriminator), None)
    if len(metadata) != 1 or not isinstance(discriminator, str):
        return None
    if typing.get_origin(annotation) not in (Union, types.UnionType):
        return None
    variants = [v for v in typing.get_args(annotation) if isinstance(v, type) and issubclass(v, BaseModel)]
    if len(variants) != len(typing.get_args(annotation)):
        return None
    return variants, discriminator


def _tag(variant: type[BaseModel], discriminator: str) -> tuple[Any, ...]:
    info = variant.model_fields.get(discriminator)
    return typing.get_args(info.annotation) if info is not None else ()


def _plain(model: type[BaseModel]) -> bool:
    """A model whose only validators are after-validators (and its fields'): one to parse piece by piece."""
    decorators = model.__pydantic_decorators__
    return not (
        decorators.field_validators
        or decorators.validators
        or decorators.root_validators
        or any(d.info.mode != "after" for d in decorators.model_validators.values())
    )


class _Walk:
    def __init__(self, found: Partial, strict: bool | None = None) -> None:
        self.found = found
        self.strict = strict
        """The root model's strictness, which a value validated on its own (outside its model) keeps."""

    def errors(self, error: ValidationError, loc: Loc) -> None:
        for item in error.errors(include_url=False):
            self.found.errors.append({**item, "loc": (*loc, *item["loc"])})

    def adapter(self, annotation: Any) -> TypeAdapter[Any]:
        """A value validated outside its model, as strictly as the model (a field's own strict=False
        still holds); a model validates as its own config says."""
        if isinstance(annotation, type) and issubclass(annotation, BaseModel):
            return TypeAdapter(annotation)
        return TypeAdapter(annotation, config=ConfigDict(strict=bool(self.strict)))

    def whole(self, annotation: Any, raw: Any, loc: Loc) -> Any:
        """A value pydantic validates in one piece; _NOT_PARSED when it refuses it."""
        try:
            return self.adapter(annotation).validate_python(raw)
        except ValidationError as error:
            self.errors(error, loc)
            # Inside a model, an error other than its validators' means those did not run. (A value
            # refused whole is left out: the checks of the models above that read it cannot run.)
            if any(item["loc"] and item["type"] != "config_problem" for item in error.errors(include_url=False)):
                self.found.incomplete = True
            return _NOT_PARSED

    def value(self, annotation: Any, raw: Any, loc: Loc) -> Any:
        """A field's value: models, lists of models and the union of models piece by piece."""
        if isinstance(annotation, type) and issubclass(annotation, BaseModel) and _plain(annotation):
            return self.model(annotation, raw, loc)
        union = _variants(annotation)
        if union is not None and isinstance(raw, Mapping):
            variants, discriminator = union
            chosen = [v for v in variants if raw.get(discriminator) in _tag(v, discriminator) and _plain(v)]
            if len(chosen) == 1:
                return self.model(chosen[0], raw, (*loc, str(raw[discriminator])))
        origin, args = typing.get_origin(annotation), typing.get_args(annotation)
        if origin in (Union, types.UnionType) and type(None) in args and len(args) == 2:
            if raw is None:
                return None
            return self.value(next(a for a in args if a is not type(None)), raw, loc)
        if origin is list and len(args) == 1 and isinstance(raw, list):
            items = [self.value(args[0], item, (*loc, index)) for index, item in enumerate(raw)]
            return _NOT_PARSED if any(item is _NOT_PARSED for item in items) else items
        return self.whole(annotation, raw, loc)

    def model(self, model: type[BaseModel], raw: Any, loc: Loc) -> Any:
        if not isinstance(raw, Mapping) or not _plain(model):
            return self.whole(model, raw, loc)
        names: dict[str, str] = {}
        for name, info in model.model_fields.items():
            names[name] = name
            if info.alias is not None:
                names[info.alias] = name
        values: dict[str, Any] = {}
        not_parsed: set[str] = set()
        for key, raw_value in raw.items():
            found = names.get(key) if isinstance(key, str) else None
            if found is None:
                message = "Extra inputs are not permitted"
                self.found.errors.append(
                    {"type": "extra_forbidden", "loc": (*loc, key), "msg": message, "input": raw_value}
                )
                continue
            parsed = self.field(model.model_fields[found], raw_value, (*loc, key))
            if parsed is _NOT_PARSED:
                not_parsed.add(found)
            else:
                values[found] = parsed
        for name, info in model.model_fields.items():
            if name not in values and name not in not_parsed and info.is_required():
                alias = info.alias or name
                self.found.errors.append(
                    {"type": "missing", "loc": (*loc, alias), "msg": "Field required", "input": raw}
                )
                not_parsed.add(name)
        instance = model.model_construct(_fields_set=set(values) | not_parsed, **values)
        for name in not_parsed:
            instance.__dict__.pop(name, None)  # reading it fails: the checks that need it cannot run
        self.checks(model, instance, loc)
        return instance

    def field(self, info: FieldInfo, raw: Any, loc: Loc) -> Any:
        if isinstance(info.discriminator, str) and not info.metadata:
            # A field annotated with a discriminated union: pydantic keeps the discriminator on the
            # field, not in its annotation; put it back so the union is walked as one. (A field with
            # validators of its own, such as gpu's short form, is checked whole below.)
            return self.value(Annotated[info.annotation, FieldInfo(discriminator=info.discriminator)], raw, loc)
        if not info.metadata:
            return self.value(info.annotation, raw, loc)
        if isinstance(info.discriminator, str):
            # A discriminated union with validators of its own (gpu's short form): validated whole,
            # as the union it is (without its discriminator, pydantic would try every variant).
            discriminated = FieldInfo(discriminator=info.discriminator)
            return self.whole(Annotated[(info.annotation, discriminated, *info.metadata)], raw, loc)
        if typing.get_origin(info.annotation) is list:
            # Constraints on the list itself (min_length) are checked on it whole, then its items one by one.
            if self.whole(Annotated[(list[Any], *info.metadata)], raw, loc) is _NOT_PARSED:
                return _NOT_PARSED
            return self.value(info.annotation, raw, loc)
        return self.whole(Annotated[(info.annotation, *info.metadata)], raw, loc)

    def checks(self, model: type[BaseModel], instance: BaseModel, loc: Loc) -> None:
        """Run each after-validator on its own; a problem it raises is reported, a failure to run counted."""
        for decorator in model.__pydantic_decorators__.model_validators.values():
            function = decorator.func
            takes_info = len(inspect.signature(function).parameters) > 1
            try:
                function(instance, None) if takes_info else function(instance)
            except PydanticCustomError as error:
                self.found.errors.append(
                    {"type": error.type, "loc": loc, "msg": error.message(), "input": instance, "ctx": error.context}
                )
            except Exception:  # a check that reads what did not parse (or what its model refused) cannot run
                self.found.incomplete = True
