"""The JSON schema refuses what the render refuses, field by field.

A corpus of single-field mistakes is built from the config models themselves: every field of every
model a stack can hold (walked from StackConfig through the all-features stack, whose data shows
which variant of a union each object is) whose type carries a rule (a SchemaRule: names, URIs,
quantities, durations, labels, images, CIDR blocks; a bound; a choice) gets each of its type's
mistakes, one stack file each. A new field of a constrained type is covered without editing this
file. Each mistake must be refused by the render (exit 2) and by the schema; each of the type's
valid controls must be taken by both (the render's validation of the stack file; the program is not
run for them).

What only the render checks (a rule JSON Schema cannot say) is listed in RENDER_ONLY with its
reason: those values must still be refused by the render and accepted by the schema, so an entry
that the schema comes to refuse fails here, to be moved to the mistakes.
"""

from __future__ import annotations

import copy
import types
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, Literal, Union, get_args, get_origin

import annotated_types
import jsonschema
import pytest
from pydantic import BaseModel
from pydantic.fields import FieldInfo

from inference_platform.cli.main import main
from inference_platform.cli.schema import stack_file_schema
from inference_platform.cli.stack_file import read_stack_config
from inference_platform.config.base import (
    DNS1035_LABEL_RULE,
    DNS1123_LABEL_RULE,
    DNS1123_SUBDOMAIN_RULE,
    DURATION_RULE,
    LABELS_RULE,
    PINNED_IMAGE_RULE,
    QUANTITY_RULE,
    SchemaRule,
)
from inference_platform.config.errors import ConfigError
from inference_platform.platform.model_cache import CACHE_PATH_RULE
from inference_platform.platform.network import CIDR_RULE
from inference_platform.serving.lora import MAX_NAME_LENGTH
from inference_platform.serving.model_storage import MODEL_URI_RULE, S3_MAX_KEY_BYTES
from inference_platform.serving.rollout_spec import TIMESTAMP_RULE
from inference_platform.serving.runtimes import ModelSpec
from inference_platform.stack.config import PROJECT, StackConfig
from tests.conftest import full_config, write_stack_file

Config = dict[str, Any]
DIGEST = "sha256:" + "a" * 64


@dataclass(frozen=True)
class Cases:
    mistakes: Sequence[Any]
    controls: Sequence[Any] = ()


# Each rule's mistakes and valid controls: what a user writes by mistake, and the edge cases of
# what is valid (the forms the docs promise).
RULE_CASES: dict[SchemaRule, Cases] = {
    DNS1123_LABEL_RULE: Cases(["Upper", "ünïcode", "a" * 64, "-a", "a-", "a_b", "a.b", ""]),
    DNS1035_LABEL_RULE: Cases(["Upper", "ünïcode", "a" * 64, "1a", "a-", "a_b", ""]),
    DNS1123_SUBDOMAIN_RULE: Cases(
        ["https://example.com", "Example.com", "exämple.com", "example.com/", "a" * 64 + ".com", "a." * 127 + "ab", ""],
        ["example.com", "a.b-c.d", "localhost"],
    ),
    QUANTITY_RULE: Cases(["20GB", "1.5 Gi", "-1", -1, "Gi", "1e", "", "1Gib"], ["2", 2, 1.5, "512Mi", "500m", "1e3"]),
    DURATION_RULE: Cases(["30", "30 s", "1d", "-1s", "s", "", "1m30"], ["30s", "1m", "250ms", "45.5s", "1m0s"]),
    LABELS_RULE: Cases(
        [{"Bad Key": "v"}, {"a": "bad value"}, {"a": "x" * 64}, {"Ex.com/a": "v"}, {"a/b/c": "v"}, {"-a": "v"}],
        [{"gpu": "on"}, {"example.com/Tier_1.a": "A-1"}, {"a": ""}],
    ),
    PINNED_IMAGE_RULE: Cases(
        ["nginx", "nginx:latest", "Registry/Nginx:1.0", "nginx:", "nginx:1.0 ", f"nginx@{DIGEST[:20]}", "reg:5000/x"],
        ["nginx:1.27", "registry.example.com:5000/team/server:v1.2.3", f"nginx@{DIGEST}", f"nginx:latest@{DIGEST}"],
    ),
    MODEL_URI_RULE: Cases(
        [
            "s3:/x",
            "ftp://host/model.bin",
            "pvc://Models/x",
            "pvc://models",
            "pvc://models/",
            "pvc://models/x?y=1",
            "https://example.com",
            "hf://owner",
            "s3://bucket/a/../b",
            "models/x",
            "",
            "s3://bucket/" + "k" * (S3_MAX_KEY_BYTES + 1),
        ],
        [
            "pvc://models/x",
            "s3://bucket",
            "gs://bucket/a/b",
            "https://example.com/m.tar.gz?v=1",
            "hf://org/model:main",
            "s3://bucket/" + "k" * S3_MAX_KEY_BYTES,
        ],
    ),
    CIDR_RULE: Cases(
        ["10.0.0.0/33", "300.0.0.0/8", "10.0.0/8", "example.com", "", "10.0.0.0/8/8"],
        ["192.0.2.0/24", "2001:db8::/32", "192.0.2.1"],
    ),
    CACHE_PATH_RULE: Cases(
        ["/", "var/lib/models", "/var/lib/models/", "/var//models", "/var/lib models", ""],
        ["/var/lib/inference-models", "/mnt/nvme0/models", "/m"],
    ),
    TIMESTAMP_RULE: Cases(
        ["yesterday", "2026-12-06T10:15:00", "2026-12-06", "10:15:00Z", ""],
        ["2026-12-06T10:15:00Z", "2026-12-06T10:15:00.5+02:00"],
    ),
}
# Adapter names: a DNS label short enough to name its volume (serving/lora.py).
ADAPTER_NAME = Cases(["Upper", "a" * (MAX_NAME_LENGTH + 1), "-a"], ["a" * MAX_NAME_LENGTH])
# Values the render refuses that the schema cannot (a rule over the value's meaning, not its form),
# by rule: each is refused by the render and accepted by the schema (docs/config-errors.md names them).
RENDER_ONLY: dict[SchemaRule, dict[str, Any]] = {
    DURATION_RULE: {"longer than a day": "25h"},
    CIDR_RULE: {"an IPv6 block that does not parse": "1:2:3"},
    LABELS_RULE: {},
    PINNED_IMAGE_RULE: {"an image name over 255 characters": "r/" + "a" * 254 + ":1"},
    MODEL_URI_RULE: {
        "a Hugging Face path with more than owner and model": "hf://owner/model/extra",
        # JSON Schema counts characters: 1,024 of them, two bytes each in UTF-8.
        "an S3 key of 1,024 characters past 1,024 bytes": "s3://bucket/" + "é" * S3_MAX_KEY_BYTES,
    },
    TIMESTAMP_RULE: {"a date that is not in the calendar": "2026-13-45T10:15:00Z"},
    CACHE_PATH_RULE: {"a path with a '..' segment": "/var/lib/../models"},
}


@dataclass(frozen=True)
class Site:
    """A field of a model at one place in the stack file's data."""

    path: tuple[str | int, ...]
    """The model's object in the config (its keys and indexes)."""
    model: type[BaseModel]
    field: str
    alias: str
    info: FieldInfo
    present: bool
    """The stack sets the field here (a valid value in its context: where controls go)."""


def _unwrap(annotation: Any) -> tuple[Any, list[Any]]:
    metadata: list[Any] = []
    while get_origin(annotation) is Annotated:
        annotation, *extra = get_args(annotation)
        metadata += extra
    return annotation, metadata


def _members(annotation: Any) -> list[Any]:
    if get_origin(annotation) in (Union, types.UnionType):
        return [m for m in get_args(annotation) if m is not type(None)]
    return [annotation]


def _model_of(annotation: Any, data: Any) -> type[BaseModel] | None:
    """The model a value of this annotation validates as (a union's variant by its tag)."""
    if not isinstance(data, Mapping):
        return None
    for member in (_unwrap(m)[0] for m in _members(_unwrap(annotation)[0])):
        if isinstance(member, type) and issubclass(member, BaseModel):
            tags = [
                (alias, get_args(_unwrap(info.annotation)[0]))
                for name, info in member.model_fields.items()
                if get_origin(_unwrap(info.annotation)[0]) is Literal
                for alias in [info.alias or name]
                if alias in data and len(get_args(_unwrap(info.annotation)[0])) == 1
            ]
            if all(data[alias] in values for alias, values in tags):
                return member
    return None


def _walk(model: type[BaseModel], data: Mapping[str, Any], path: tuple[str | int, ...]) -> Iterator[Site]:
    for name, info in model.model_fields.items():
        alias = info.alias or name
        value = data.get(alias)
        yield Site(path, model, name, alias, info, value is not None)
        inner = _unwrap(info.annotation)[0]
        if value is None:
            # An object the stack leaves out: its fields, in an object of their own.
            found = _model_of(inner, {}) if len(_members(inner)) == 1 else None
            if found is not None and model is not found and not _required(found):
                yield from _walk(found, {}, (*path, alias))
            continue
        for member in (_unwrap(m)[0] for m in _members(inner)):
            origin = get_origin(member)
            if origin in (list, Sequence, tuple) and isinstance(value, list):
                (item_type, *_) = get_args(member)
                for index, item in enumerate(value):
                    found = _model_of(item_type, item)
                    if found is not None:
                        yield from _walk(found, item, (*path, alias, index))
                break
            if origin in (dict, Mapping) and isinstance(value, Mapping):
                _, item_type = get_args(member)
                for key, item in value.items():
                    found = _model_of(item_type, item)
                    if found is not None:
                        yield from _walk(found, item, (*path, alias, key))
                break
        else:
            found = _model_of(inner, value)
            if found is not None:
                yield from _walk(found, value, (*path, alias))


def _required(model: type[BaseModel]) -> bool:
    return any(info.is_required() for info in model.model_fields.values())


def _sites(config: Config) -> list[Site]:
    """Every field of every model object of the config, once: at the first place the stack sets it
    (where a valid value fits its context), else at its first place. A field that runtimes share
    (the same name and type, from their common base) is one field."""
    prefix = f"{PROJECT}:"
    data = {key.removeprefix(prefix): value for key, value in config.items() if key.startswith(prefix)}
    chosen: dict[tuple[str, str, str], Site] = {}
    for site in _walk(StackConfig, data, ()):
        key = (site.field, repr(site.info.annotation), repr(site.info.metadata))
        if key not in chosen or (site.present and not chosen[key].present):
            chosen[key] = site
    return sorted(chosen.values(), key=lambda site: not site.present)


def _shape(info: FieldInfo) -> tuple[str, list[Any]]:
    """Where a field's rules are (the value itself, a list's items, a mapping's values), and its
    metadata there (pydantic keeps a field's own Annotated metadata apart from its annotation)."""
    outer, metadata = _unwrap(info.annotation)
    metadata = [*info.metadata, *metadata]
    members = _members(outer)
    if len(members) == 1:
        inner, more = _unwrap(members[0])
        metadata += more
        origin = get_origin(inner)
        if origin in (list, Sequence, tuple):
            return "item", metadata + _unwrap(get_args(inner)[0])[1]
        if origin in (dict, Mapping) and not any(isinstance(m, SchemaRule) for m in metadata):
            return "value", metadata + _unwrap(get_args(inner)[1])[1]
        if get_origin(inner) is Literal:
            metadata.append(inner)
    return "self", metadata


def _cases(site: Site) -> tuple[str, Cases, dict[str, Any]] | None:
    """The mistakes and controls of a field's type, and the values only the render refuses."""
    shape, metadata = _shape(site.info)
    for item in metadata:
        if isinstance(item, SchemaRule):
            if site.model.__name__ == "LoraAdapter" and site.field == "name":
                return shape, ADAPTER_NAME, {}
            return shape, RULE_CASES[item], RENDER_ONLY.get(item, {})
    bounds = _bound_cases(metadata)
    if bounds is not None:
        return shape, bounds, {}
    literal = next((m for m in metadata if get_origin(m) is Literal), None)
    if literal is not None and len(get_args(literal)) > 1:
        return shape, Cases(["not-a-choice"]), {}
    return None


def _number(bound: object) -> float:
    assert isinstance(bound, int | float)
    return bound


def _bound_cases(metadata: Sequence[Any]) -> Cases | None:
    mistakes: list[Any] = []
    for item in metadata:
        if isinstance(item, annotated_types.Ge):
            mistakes.append(_number(item.ge) - 1)
        elif isinstance(item, annotated_types.Gt):
            mistakes.append(item.gt)
        elif isinstance(item, annotated_types.Le):
            mistakes.append(_number(item.le) + 1)
        elif isinstance(item, annotated_types.Lt):
            mistakes.append(item.lt)
    return Cases(mistakes) if mistakes else None


def _placed(config: Config, site: Site, shape: str, value: Any) -> Config:
    """The config with the field set to the value (as a list's one item, or a mapping's one value)."""
    placed = copy.deepcopy(config)
    (first, *rest) = (*site.path, site.alias)
    node: Any = placed
    key: Any = f"{PROJECT}:{first}"
    for part in rest:
        node = node[key] if isinstance(node, list) else node.setdefault(key, {})
        key = part
    node[key] = [value] if shape == "item" else {"x": value} if shape == "value" else value
    return placed


@dataclass(frozen=True)
class Case:
    id: str
    config: Config
    field: str
    """The field's key, which the render's report names."""
    refused: bool
    """The render refuses it (a mistake); the schema must too, unless it is one only the render checks."""
    schema_refuses: bool


def corpus_base() -> Config:
    """The all-features stack, with the objects it leaves out that have required fields or are lists
    (so that every constrained field has a place): valid, as a test checks."""
    config = full_config()
    platform = config[f"{PROJECT}:platform"]
    platform["network"] = {"apiServer": {"cidrs": ["10.0.0.0/8"], "ports": [443, 6443]}}
    platform["gpuNodes"]["tolerations"] = [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}]
    platform["npuNodes"] = {"pools": [{"type": "Ascend910B3", "count": 100, "npusPerNode": 16}]}
    triton = next(m for m in config[f"{PROJECT}:models"] if m["runtime"] == "triton")
    triton["instanceGroups"] = [{"count": 1, "kind": "cpu"}]
    # The node-local model cache (no stack the renders compare holds it), caching nothing: any valid size fits.
    platform["modelCache"] = {"enabled": True, "size": "1Ti", "nodes": "gpu"}
    # A rollout's durations are at least its model's analysis.window: a short window, so that every
    # valid duration is a valid interval there.
    for model in config[f"{PROJECT}:models"]:
        if "rollout" in model:
            model.setdefault("analysis", {})["window"] = "200ms"
    return config


def corpus() -> list[Case]:
    base = corpus_base()
    cases: list[Case] = []
    seen: set[int] = set()
    for site in _sites(base):
        found = _cases(site)
        if found is None:
            continue
        shape, rule_cases, render_only = found
        where = ".".join(str(p) for p in (*site.path, site.alias))
        # A type's whole list at its first field, its first mistake at every other field.
        mistakes = rule_cases.mistakes if id(rule_cases) not in seen or len(rule_cases.mistakes) < 3 else []
        mistakes = mistakes or rule_cases.mistakes[:1]
        seen.add(id(rule_cases))
        for value in mistakes:
            cases.append(Case(f"{where}={value!r}"[:120], _placed(base, site, shape, value), site.alias, True, True))
        # Controls where the stack sets the field: elsewhere a valid value may not fit its context.
        controls = rule_cases.controls if mistakes is rule_cases.mistakes else rule_cases.controls[:1]
        for value in controls if site.present else ():
            cases.append(
                Case(f"{where}={value!r} (valid)"[:120], _placed(base, site, shape, value), site.alias, False, False)
            )
        for reason, value in render_only.items() if mistakes is rule_cases.mistakes else ():
            cases.append(Case(f"{where}: {reason}"[:120], _placed(base, site, shape, value), site.alias, True, False))
    return cases


def lora_rank_cases(base: Config) -> list[Case]:
    """maxLoraRank of an engine that takes some ranks only (LORA_RANKS, vLLM's MaxLoRARanks): each
    number just past one of its ranks, and 24 (between 16 and 32), refused; each rank taken. Set on
    the first model of such an engine that lists adapters (where the rank is checked against them)."""
    variants = {get_args(v.model_fields["runtime"].annotation)[0]: v for v in get_args(get_args(ModelSpec)[0])}
    cases: list[Case] = []
    for index, model in enumerate(base[f"{PROJECT}:models"]):
        ranks: tuple[int, ...] | None = getattr(variants[model["runtime"]], "LORA_RANKS", None)
        if ranks is None or "maxLoraRank" not in model or cases:
            continue
        mistakes = sorted({24, *(rank + 1 for rank in ranks)} - set(ranks))
        for value, refused in [(value, True) for value in mistakes] + [(rank, False) for rank in ranks]:
            placed = copy.deepcopy(base)
            placed[f"{PROJECT}:models"][index]["maxLoraRank"] = value
            label = f"models.{index}.maxLoraRank={value}" + ("" if refused else " (valid)")
            cases.append(Case(label, placed, "maxLoraRank", refused, refused))
    return cases


CORPUS = corpus() + lora_rank_cases(corpus_base())


@pytest.fixture(scope="module")
def validator() -> jsonschema.Draft202012Validator:
    schema = stack_file_schema()
    jsonschema.Draft202012Validator.check_schema(schema)
    return jsonschema.Draft202012Validator(schema)


def _schema_problems(validator: jsonschema.Draft202012Validator, config: Config) -> list[str]:
    return [f"{'.'.join(map(str, e.absolute_path))}: {e.message}" for e in validator.iter_errors({"config": config})]


@pytest.mark.parametrize("case", [c for c in CORPUS if c.refused], ids=lambda c: c.id)
def test_the_schema_refuses_what_the_render_refuses(
    case: Case, validator: jsonschema.Draft202012Validator, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = write_stack_file(tmp_path / "Pulumi.test.yaml", case.config)
    code = main(["render", "--stack", "test", "--config", str(path), "--out", str(tmp_path / "out"), "--no-charts"])
    assert code == 2, f"the render took the mistake: {case.id}"
    report = capsys.readouterr().err
    assert "invalid stack config" in report
    assert case.field in report, f"refused for another reason than {case.field}:\n{report}"
    refused_by_schema = bool(_schema_problems(validator, case.config))
    if case.schema_refuses:
        assert refused_by_schema, f"the render refuses {case.id}, the schema accepts it"
    else:
        assert not refused_by_schema, f"the schema now refuses {case.id}: move it from RENDER_ONLY to the mistakes"


@pytest.mark.parametrize("case", [c for c in CORPUS if not c.refused], ids=lambda c: c.id)
def test_the_schema_takes_what_the_render_takes(
    case: Case, validator: jsonschema.Draft202012Validator, tmp_path: Path
) -> None:
    path = write_stack_file(tmp_path / "Pulumi.test.yaml", case.config)
    try:
        read_stack_config(path)
    except ConfigError as error:
        pytest.fail(f"the render refuses the control {case.id}:\n{error.report()}")
    assert _schema_problems(validator, case.config) == []


def _models(model: type[BaseModel], found: set[type[BaseModel]]) -> set[type[BaseModel]]:
    """Every model a stack's config can hold, by the models' types."""
    if model not in found:
        found.add(model)
        for info in model.model_fields.values():
            pending = [info.annotation]
            while pending:
                annotation = _unwrap(pending.pop())[0]
                if isinstance(annotation, type) and issubclass(annotation, BaseModel):
                    _models(annotation, found)
                pending.extend(get_args(annotation))
    return found


def test_the_corpus_covers_every_constrained_field() -> None:
    """Every field of every model whose type carries a rule has its mistakes in the corpus (a new
    model must appear in the all-features stack or in corpus_base), and every rule is used."""
    placed = {(s.field, repr(s.info.annotation), repr(s.info.metadata)) for s in _sites(corpus_base())}
    missing = [
        f"{model.__name__}.{name}"
        for model in _models(StackConfig, set())
        for name, info in model.model_fields.items()
        if _cases(Site((), model, name, name, info, False)) is not None
        and (name, repr(info.annotation), repr(info.metadata)) not in placed
    ]
    assert missing == []
    used = {id(found[1]) for site in _sites(corpus_base()) if (found := _cases(site)) is not None}
    assert {id(cases) for cases in RULE_CASES.values()} <= used
    assert sum(case.refused for case in CORPUS) >= 100
    assert any(case.field == "maxLoraRank" and case.id.endswith("=24") for case in CORPUS)


def test_the_corpus_base_is_valid(tmp_path: Path) -> None:
    read_stack_config(write_stack_file(tmp_path / "Pulumi.test.yaml", corpus_base()))


def _strings(value: Any) -> Iterator[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, Mapping):
        for key, item in value.items():
            yield from _strings(key)
            yield from _strings(item)


CORPUS_STRINGS = {
    text
    for cases in [*RULE_CASES.values(), ADAPTER_NAME]
    for value in [*cases.mistakes, *cases.controls]
    for text in _strings(value)
} | {text for values in RENDER_ONLY.values() for value in values.values() for text in _strings(value)}
"""Every string value of the corpus, to compare how Python and JavaScript read the schema's patterns."""
