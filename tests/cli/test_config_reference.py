"""The generated stack config reference (docs/config-reference.md): every setting of the config
models, with its description, and the committed page current.

The models are walked here on their own (pydantic's fields and typing's arguments), not by the
generator's walk, so a setting the generator skipped is missed by the page and found here.
"""

from __future__ import annotations

import html
import re
import typing
from collections.abc import Iterator

from pydantic import BaseModel
from pydantic.fields import FieldInfo

from inference_platform.cli.config_reference import PAGE, reference_markdown
from inference_platform.stack.config import StackConfig
from tests.conftest import ROOT

# A table cell boundary: a pipe not escaped as `\|`.
CELL = re.compile(r"(?<!\\)\|")


def nested_models(annotation: object, suffix: str = "") -> Iterator[tuple[type[BaseModel], str]]:
    """Every config model inside a type, with what a path adds to reach it: [] for a list's item,
    .<name> for a map's value."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        yield annotation, suffix
        return
    origin = typing.get_origin(annotation)
    arguments = typing.get_args(annotation)
    if origin is list:
        suffix += "[]"
    elif origin is dict:
        arguments = arguments[1:]
        suffix += ".<name>"
    for argument in arguments:
        yield from nested_models(argument, suffix)


def settings(
    model: type[BaseModel], path: str = "", inside: frozenset[type] = frozenset()
) -> Iterator[tuple[str, str, FieldInfo]]:
    """(path, model.field, field) for every field reachable from a model, each variant of a union included."""
    for name, info in model.model_fields.items():
        key = info.alias or name
        field_path = f"{path}.{key}" if path else key
        yield field_path, f"{model.__name__}.{name}", info
        for sub, suffix in nested_models(info.annotation):
            if sub not in inside:
                yield from settings(sub, field_path + suffix, inside | {model, sub})


def documented_rows(page: str) -> set[tuple[str, str]]:
    """(path, description) of every row of the page's tables, as a reader sees them."""
    rows = set()
    for line in page.splitlines():
        if line.startswith("| `"):
            cells = [cell.strip() for cell in CELL.split(line)[1:-1]]
            description = html.unescape(cells[-1].replace("\\|", "|"))
            rows.add((cells[0].strip("`"), description))
    return rows


def test_every_setting_has_a_description() -> None:
    undescribed = sorted({where for _, where, info in settings(StackConfig) if not (info.description or "").strip()})
    assert undescribed == []


def test_the_reference_lists_every_setting_with_its_description() -> None:
    expected = {(path, " ".join((info.description or "").split())) for path, _, info in settings(StackConfig)}
    # The walk reaches the places the README's tables describe, variants of the unions included.
    paths = {path for path, _ in expected}
    assert {
        "domain",
        "models[].versions[].weight",
        "models[].tensorParallelSize",
        "models[].readiness.path",
        "models[].gpu.memoryPercent",
        "models[].protection.jwt.issuer",
        "pipelines[].nodes.<name>.steps[].model",
        "platform.ingress.gateway.selector",
        "platform.hami.kubeSchedulerImage.registry",
        "storage.s3.secretAccessKey",
    } <= paths
    missing = sorted(expected - documented_rows(reference_markdown()))
    assert missing == []


def test_the_committed_reference_is_current() -> None:
    committed = (ROOT / PAGE).read_text()
    assert committed == reference_markdown(), "run `make docs-reference` to regenerate docs/config-reference.md"


def test_rows_are_read_as_a_reader_sees_them() -> None:
    """The escaping the generator needs in a table (pipes, angle brackets) is undone when reading rows."""
    page = "| `a.b` | string | `1` | At &lt;model&gt;.&lt;domain&gt;, `x \\| y`. |\n"
    assert documented_rows(page) == {("a.b", "At <model>.<domain>, `x | y`.")}
