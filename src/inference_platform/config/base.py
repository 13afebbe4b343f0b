"""The base every config model derives from, and the value types Kubernetes imposes on them.

Config is written by people in YAML, so models use camelCase keys (as Kubernetes does),
refuse unknown keys (a typo must not be silently ignored) and are immutable once parsed.
"""

from __future__ import annotations

import math
import os
import re
import sys
from collections.abc import Mapping
from decimal import Decimal
from fractions import Fraction
from pathlib import Path
from types import FrameType, TracebackType
from typing import Annotated, Any, ClassVar, Self

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    GetCoreSchemaHandler,
    GetJsonSchemaHandler,
    ValidationError,
)
from pydantic.alias_generators import to_camel
from pydantic_core import CoreSchema, PydanticCustomError, core_schema

from inference_platform.config.errors import (
    ConfigError,
    Discriminated,
    Problem,
    format_path,
    named_in,
    problems_from_validation,
)

_LIBRARY = Path(__file__).resolve().parent.parent


class ConfigModel(BaseModel):
    # strict: a value is of the type the model says, never converted: a boolean is not a number
    # (`weight: true` is not 1) nor a string, a string not a number. A stack file's values keep their
    # YAML types (the Pulumi CLI JSON-encodes each top-level object, and no top-level setting is a
    # bare number or boolean); floats take whole numbers; fields whose values arrive as lists from
    # outputs (tuples) say strict=False.
    model_config = ConfigDict(
        extra="forbid",
        alias_generator=to_camel,
        populate_by_name=True,
        frozen=True,
        str_strip_whitespace=False,
        strict=True,
    )

    REPORTED_UNIONS: ClassVar[tuple[Discriminated, ...]] = ()
    """The discriminated unions the model holds, which reports of its problems name (config/errors.py)."""

    @classmethod
    def parse(cls, data: Mapping[str, Any]) -> Self:
        """`data` (a stack file's camelCase keys or Python's snake_case names) validated into the
        model, or ConfigError with every problem, reported as a stack file's are: one line each,
        at the caller's file and line (`python -m inference_platform render` prints it, exit 2)."""
        try:
            return cls.model_validate(data)
        except ValidationError as error:
            position = _caller()
            found = problems_from_validation(error, cls.REPORTED_UNIONS, model=cls)
            problems = [_named(p, data, position) for p in found]
            raise ConfigError(problems, subject=cls.__name__) from None


def _named(problem: Problem, data: Any, position: str) -> Problem:
    """A problem of data a program validated, at the program's line, its items named by their `name`."""
    keys = problem.keys
    path = named_in(keys, data) if format_path(keys) == problem.path else problem.path
    return Problem(path, problem.message, keys, position)


def _caller() -> str:
    """`file:line` of the nearest frame outside the library (the program's call)."""
    frame: FrameType | None = sys._getframe(1)
    while frame is not None and _in(Path(frame.f_code.co_filename), _LIBRARY):
        frame = frame.f_back
    return _where(frame.f_code.co_filename, frame.f_lineno) if frame is not None else ""


def _in(path: Path, *directories: Path) -> bool:
    resolved = path.resolve()
    return any(resolved.is_relative_to(directory) for directory in directories)


def _where(filename: str, line: int) -> str:
    """`file:line`, the file relative to the working directory when below it."""
    path = Path(filename)
    shown = os.path.relpath(path.resolve(), Path.cwd().resolve()) if path.is_absolute() else filename
    return f"{filename if shown.startswith('..') else shown}:{line}"


def validation_config_error(
    error: ValidationError, unions: tuple[Discriminated, ...] = (), traceback: TracebackType | None = None
) -> ConfigError:
    """A config model's failed validation that escaped a program (its own `model_validate` or
    constructor call) as a ConfigError, each problem at the program's line that validated."""
    position = ""
    frames = []
    while traceback is not None:
        frames.append(traceback)
        traceback = traceback.tb_next
    pydantic_dir = Path(sys.modules[BaseModel.__module__].__file__ or ".").resolve().parent
    for frame in reversed(frames):
        if not _in(Path(frame.tb_frame.f_code.co_filename), _LIBRARY, pydantic_dir):
            position = _where(frame.tb_frame.f_code.co_filename, frame.tb_lineno)
            break
    data, model = _validated(frames, pydantic_dir)
    problems = [_named(p, data, position) for p in problems_from_validation(error, unions, model=model)]
    return ConfigError(problems, subject=error.title)


def _validated(frames: list[TracebackType], pydantic_dir: Path) -> tuple[Any, type[BaseModel] | None]:
    """What the program gave pydantic to validate (its constructor's keyword arguments or
    model_validate's object) and the model, from the first of pydantic's frames; None where not there."""
    for frame in frames:
        if _in(Path(frame.tb_frame.f_code.co_filename), pydantic_dir):
            names = frame.tb_frame.f_locals
            if frame.tb_frame.f_code.co_name == "__init__" and isinstance(names.get("data"), Mapping):
                return names["data"], type(names["self"]) if "self" in names else None
            if frame.tb_frame.f_code.co_name == "model_validate":
                return names.get("obj"), names.get("cls")
    return None, None


def config_problems(problems: list[tuple[str, str]]) -> PydanticCustomError:
    """An error for problems found by a model validator, each with a path relative to the model.

    Pydantic reports a model validator's error at the model's own location. Cross-field
    checks (weights that must add up, names that must be unique) know better which field is
    wrong, so they raise this error carrying (relative path, message) pairs; config/errors.py
    turns each pair into its own line with the full path.
    """
    summary = "; ".join(f"{path}: {message}" if path else message for path, message in problems)
    return PydanticCustomError("config_problem", "{summary}", {"summary": summary, "problems": problems})


class SchemaRule:
    """JSON Schema keywords a constrained type's schema carries beside what pydantic generates
    (`python -m infra schema`, for editors): the validator's own rule, where JSON Schema can say
    it. Patterns are written once, as the validator's regex constant (`ecma_pattern`)."""

    def __init__(self, **keywords: Any) -> None:
        self.keywords = keywords

    def __get_pydantic_json_schema__(self, core_schema: Any, handler: Any) -> dict[str, Any]:
        return {**handler(core_schema), **self.keywords}


class Matches:
    """A string setting's form: the pattern a value must match (searched, as pydantic's `pattern`
    is), and what such a value looks like in words, which a value that does not match is told
    ("must be an https:// URL (got 'http://x')"), never the regex. The JSON schema shows the pattern."""

    def __init__(self, pattern: str, looks_like: str) -> None:
        self.pattern = pattern
        self.looks_like = looks_like
        self._regex = re.compile(pattern)

    def __repr__(self) -> str:
        return f"Matches({self.pattern!r}, {self.looks_like!r})"

    def __get_pydantic_core_schema__(self, source: Any, handler: GetCoreSchemaHandler) -> CoreSchema:
        return core_schema.no_info_after_validator_function(self._check, handler(source))

    def __get_pydantic_json_schema__(self, schema: CoreSchema, handler: GetJsonSchemaHandler) -> dict[str, Any]:
        return {**handler(schema), "pattern": self.pattern}

    def _check(self, value: str) -> str:
        if self._regex.search(value) is None:
            raise PydanticCustomError("pattern", "must be {looks_like}", {"looks_like": self.looks_like})
        return value


def ecma_pattern(pattern: re.Pattern[str] | str) -> str:
    """A regex constant as a JSON Schema pattern (ECMA-262): named groups become plain groups."""
    text = pattern.pattern if isinstance(pattern, re.Pattern) else pattern
    text = text.replace(r"\A", "^").replace(r"\Z", "$")
    return re.sub(r"\(\?P<[A-Za-z_][A-Za-z0-9_]*>", "(?:", text)


def _inner(pattern: re.Pattern[str]) -> str:
    """A full-match pattern without its anchors, to compose into another."""
    return ecma_pattern(pattern).removeprefix("^").removesuffix("$")


_DNS1123_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
_DNS1035_LABEL = re.compile(r"^[a-z]([-a-z0-9]*[a-z0-9])?$")
_DNS1123_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
# Kubernetes resource.Quantity: a signed decimal with an optional binary or decimal suffix.
_QUANTITY = re.compile(r"^[+]?([0-9]+(\.[0-9]*)?|\.[0-9]+)([eE][-+]?[0-9]+|Ki|Mi|Gi|Ti|Pi|Ei|n|u|m|k|M|G|T|P|E)?$")
# The name part of a label key, and a label value.
_LABEL_NAME = re.compile(r"^[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$")
# Durations as Istio and Kubernetes write them: 1h, 30s, 250ms, 1m30s.
_DURATION = re.compile(r"^([0-9]+(\.[0-9]+)?(h|m|s|ms|us|µs|ns))+$")
# An image reference as the container runtime parses it (distribution/reference's grammar):
# [registry[:port]/]path[:tag][@digest].
_REGISTRY = r"(?:[a-zA-Z0-9](?:[a-zA-Z0-9-]*[a-zA-Z0-9])?(?:\.[a-zA-Z0-9](?:[a-zA-Z0-9-]*[a-zA-Z0-9])?)*(?::[0-9]+)?/)"
_PATH = r"[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*(?:/[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*)*"
_IMAGE = re.compile(
    rf"^(?P<name>{_REGISTRY}?{_PATH})(?::(?P<tag>[\w][\w.-]{{0,127}}))?"
    r"(?:@(?P<digest>[A-Za-z][A-Za-z0-9]*(?:[-_+.][A-Za-z][A-Za-z0-9]*)*:[0-9a-fA-F]{32,}))?$"
)

# What the validators check, as JSON Schema says it (SchemaRule). Not said: a duration's day
# limit, a label key's 63-character name part, an image name's 255 characters.
DNS1123_LABEL_RULE = SchemaRule(pattern=ecma_pattern(_DNS1123_LABEL), maxLength=63)
DNS1035_LABEL_RULE = SchemaRule(pattern=ecma_pattern(_DNS1035_LABEL), maxLength=63)
DNS1123_SUBDOMAIN_RULE = SchemaRule(
    pattern=ecma_pattern(_DNS1123_SUBDOMAIN), maxLength=253, **{"not": {"pattern": "[^.]{64}"}}
)
QUANTITY_RULE = SchemaRule(
    anyOf=[
        {"type": "string", "pattern": ecma_pattern(_QUANTITY)},
        {"type": "integer", "minimum": 0},
        {"type": "number", "minimum": 0},
    ]
)
LABELS_RULE = SchemaRule(
    propertyNames={
        "pattern": f"^({_inner(_DNS1123_SUBDOMAIN)}/)?{_inner(_LABEL_NAME)}$",
        # A name (after the prefix's '/') of at most 63 characters, a prefix of at most 253.
        "not": {"anyOf": [{"pattern": "[^/]{64}$"}, {"pattern": "^[^/]{254,}/"}]},
    },
    additionalProperties={"type": "string", "maxLength": 63, "pattern": f"^({_inner(_LABEL_NAME)})?$"},
)
DURATION_RULE = SchemaRule(pattern=ecma_pattern(_DURATION))
PINNED_IMAGE_RULE = SchemaRule(
    pattern=ecma_pattern(_IMAGE),
    # Pinned: a digest, or a tag (after the last '/') other than latest.
    anyOf=[{"pattern": "@"}, {"pattern": ":[^/:@]+$", "not": {"pattern": ":latest$"}}],
)


def check_dns1123_label(value: str) -> str:
    if len(value) > 63 or not _DNS1123_LABEL.match(value):
        raise PydanticCustomError(
            "dns1123_label",
            "'{value}' is not a valid name: use at most 63 lowercase letters, digits and '-', "
            "starting and ending with a letter or digit",
            {"value": value},
        )
    return value


def check_dns1035_label(value: str) -> str:
    if len(value) > 63 or not _DNS1035_LABEL.match(value):
        raise PydanticCustomError(
            "dns1035_label",
            "'{value}' is not a valid name: use at most 63 lowercase letters, digits and '-', "
            "starting with a letter and ending with a letter or digit",
            {"value": value},
        )
    return value


def check_dns1123_subdomain(value: str) -> str:
    if len(value) > 253 or not _DNS1123_SUBDOMAIN.match(value) or any(len(p) > 63 for p in value.split(".")):
        raise PydanticCustomError(
            "dns1123_subdomain",
            "'{value}' is not a valid DNS name: lowercase labels of letters, digits and '-' "
            "separated by dots, each label at most 63 characters",
            {"value": value},
        )
    return value


def check_quantity(value: str | int | float) -> str:
    text = str(value)
    if not _QUANTITY.match(text):
        raise PydanticCustomError(
            "quantity",
            "'{value}' is not a Kubernetes quantity (examples: 500m, 2, 1.5, 512Mi, 4Gi)",
            {"value": text},
        )
    return text


def _label_problem(key: str, value: str) -> str | None:
    prefix, _, name = key.rpartition("/")
    if prefix and (len(prefix) > 253 or not _DNS1123_SUBDOMAIN.match(prefix)):
        return f"label key '{key}' has a prefix that is not a DNS name"
    if len(name) > 63 or not _LABEL_NAME.match(name):
        return f"label key '{key}' is not a valid name (at most 63 letters, digits, '-', '_' and '.')"
    if value and (len(value) > 63 or not _LABEL_NAME.match(value)):
        return f"label value '{value}' of '{key}' is not valid (at most 63 letters, digits, '-', '_' and '.')"
    return None


def check_labels(value: dict[str, str]) -> dict[str, str]:
    for key, label_value in value.items():
        problem = _label_problem(key, label_value)
        if problem is not None:
            raise PydanticCustomError("labels", "{problem}", {"problem": problem})
    return value


_UNIT_SECONDS = {"h": 3600, "m": 60, "s": 1, "ms": 1e-3, "us": 1e-6, "µs": 1e-6, "ns": 1e-9}
_DURATION_PART = re.compile(r"([0-9]+(?:\.[0-9]+)?)(h|ms|m|s|us|µs|ns)")
MAX_DURATION_SECONDS = 24 * 3600


def duration_seconds(value: str) -> float:
    return sum(float(number) * _UNIT_SECONDS[unit] for number, unit in _DURATION_PART.findall(value))


_UNIT_NANOSECONDS = {"h": 3600 * 10**9, "m": 60 * 10**9, "s": 10**9, "ms": 10**6, "us": 10**3, "µs": 10**3, "ns": 1}


def duration_nanoseconds(value: str) -> Fraction:
    """A duration exactly, in nanoseconds: for comparing two durations (float seconds are not
    exact: 102ms comes out as 0.10200000000000001 s, longer than 0.102s)."""
    return sum(
        (Fraction(number) * _UNIT_NANOSECONDS[unit] for number, unit in _DURATION_PART.findall(value)), Fraction(0)
    )


def check_not_bare_number(value: Any) -> Any:
    """A duration written as a bare number (`timeout: 60`) refused with the form to write instead."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        raise PydanticCustomError(
            "duration_number",
            "{value} is a bare number: write a duration with its unit ({value}s, {value}ms, {value}m)",
            {"value": value},
        )
    return value


def check_duration(value: str) -> str:
    if not _DURATION.match(value):
        raise PydanticCustomError(
            "duration", "'{value}' is not a duration (examples: 30s, 1m30s, 250ms)", {"value": value}
        )
    if duration_seconds(value) > MAX_DURATION_SECONDS:
        raise PydanticCustomError("duration", "'{value}' is longer than a day", {"value": value})
    return value


def check_pinned_image(value: str) -> str:
    """An image reference the runtime can pull, pinned: a tag other than latest, or a digest."""
    found = _IMAGE.match(value)
    if found is None or len(found["name"]) > 255:
        raise PydanticCustomError(
            "image_reference",
            "'{value}' is not an image reference: write [registry/]repository:tag or repository@sha256:<digest>",
            {"value": value},
        )
    if not found["digest"] and found["tag"] in (None, "latest"):
        raise PydanticCustomError(
            "image_not_pinned",
            "'{value}' is not pinned: give it a tag other than latest, or an @sha256: digest",
            {"value": value},
        )
    return value


_QUANTITY_FACTORS: dict[str, Fraction] = {
    "": Fraction(1),
    "n": Fraction(1, 10**9),
    "u": Fraction(1, 10**6),
    "m": Fraction(1, 10**3),
    "k": Fraction(10**3),
    "M": Fraction(10**6),
    "G": Fraction(10**9),
    "T": Fraction(10**12),
    "P": Fraction(10**15),
    "E": Fraction(10**18),
} | {suffix: Fraction(2 ** (10 * power)) for power, suffix in enumerate(("Ki", "Mi", "Gi", "Ti", "Pi", "Ei"), 1)}
_BINARY_SUFFIXES = ("Ei", "Pi", "Ti", "Gi", "Mi", "Ki")


def quantity_value(value: str | int | float) -> Fraction:
    """A Kubernetes quantity's value, exactly: 512Mi is 536870912, 1.5k is 1500, 2e3 is 2000."""
    found = _QUANTITY.match(check_quantity(value))
    assert found is not None
    number, suffix = Fraction(Decimal(found.group(1))), found.group(3) or ""
    if suffix in _QUANTITY_FACTORS:
        return number * _QUANTITY_FACTORS[suffix]
    return number * Fraction(10) ** int(suffix[1:])  # a decimal exponent: e3, E-2


def quantity_sum(values: list[str]) -> str:
    """Quantities added up, written in the largest binary unit that holds the sum whole (20Gi and
    512Mi make 20992Mi), else in whole units rounded up."""
    total = sum((quantity_value(value) for value in values), Fraction(0))
    for suffix in _BINARY_SUFFIXES:
        whole = total / _QUANTITY_FACTORS[suffix]
        if whole.denominator == 1 and whole >= 1:
            return f"{whole.numerator}{suffix}"
    return str(math.ceil(total))


DNS1123Label = Annotated[str, AfterValidator(check_dns1123_label), DNS1123_LABEL_RULE]
"""Names of most Kubernetes objects and label values: lowercase alphanumerics and '-'."""

DNS1035Label = Annotated[str, AfterValidator(check_dns1035_label), DNS1035_LABEL_RULE]
"""Service names: a DNS-1123 label that starts with a letter."""

DNSSubdomain = Annotated[str, AfterValidator(check_dns1123_subdomain), DNS1123_SUBDOMAIN_RULE]

Quantity = Annotated[str | int | float, AfterValidator(check_quantity), QUANTITY_RULE]
"""A Kubernetes resource quantity, kept as the string the API server will see."""

Duration = Annotated[str, BeforeValidator(check_not_bare_number), AfterValidator(check_duration), DURATION_RULE]

Labels = Annotated[dict[str, str], AfterValidator(check_labels), LABELS_RULE]
"""Kubernetes labels (or a label selector's matchLabels)."""

PinnedImage = Annotated[str, AfterValidator(check_pinned_image), PINNED_IMAGE_RULE]
"""A container image by tag (not latest) or digest: what runs must be what was reviewed."""

Percent = Annotated[float, Field(gt=0, le=100)]


def duplicate_problems(names: list[str], path: str, what: str) -> list[tuple[str, str]]:
    """One problem for each repeat of a name; `path` is formatted with the index of the repeat."""
    first_seen: dict[str, int] = {}
    problems = []
    for index, name in enumerate(names):
        if name in first_seen:
            also = path.format(first_seen[name])
            problems.append((path.format(index), f"{what} '{name}' is defined twice (also {also})"))
        first_seen.setdefault(name, index)
    return problems


def drop_none(mapping: dict[str, Any]) -> dict[str, Any]:
    """A copy of a mapping without its None values, for optional fields of Kubernetes objects."""
    return {key: value for key, value in mapping.items() if value is not None}


def find_cycles(edges: Mapping[str, list[str]]) -> list[list[str]]:
    """Each circle in a graph (calls between models, a pipeline's nodes) once, as the path that
    closes it (a -> b -> a), found depth-first from each start in order (iteratively: a long
    chain must not recurse)."""
    cycles: list[list[str]] = []
    done: set[str] = set()
    for start in edges:
        if start in done:
            continue
        path = [start]
        pending = [iter(edges.get(start, []))]
        while pending:
            target = next(pending[-1], None)
            if target is None:
                done.add(path.pop())
                pending.pop()
            elif target in path:
                cycles.append([*path[path.index(target) :], target])
            elif target not in done:
                path.append(target)
                pending.append(iter(edges.get(target, [])))
    return cycles
