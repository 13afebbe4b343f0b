"""The argument types' generator, rule by rule, on small config models."""

from __future__ import annotations

import sys
import types
import typing
from typing import Annotated, Any, Literal, NotRequired

import pytest
from pydantic import BaseModel, ConfigDict, Field

from inference_platform.config.base import ConfigModel, Quantity
from inference_platform.provider import codegen


class Tire(ConfigModel):
    """A tire."""

    pressure: float = Field(default=2.2, description="In bar.")


class Engine(ConfigModel):
    kind: Literal["engine"] = "engine"
    cylinders: int = 4


class Battery(ConfigModel):
    kind: Literal["battery"] = "battery"
    kwh: int = Field(description="Capacity.")
    cylinders: int = 0


Drive = Annotated[Engine | Battery, Field(discriminator="kind")]


class Car(ConfigModel):
    """A car, as config."""

    name: str = Field(description="Its name.")
    color: Literal["red", "blue"] = "red"
    size: Quantity = "2"
    mode: bool | Literal["auto"] = "auto"
    seats: tuple[int, ...] = (1, 2)
    labels: dict[str, str] = Field(default_factory=dict)
    tires: list[Tire] = Field(default_factory=list)
    spare: Tire | None = None
    drive: Drive = Field(description="What moves it.")
    extra: dict[str, Any] = Field(default_factory=dict)


@pytest.fixture(autouse=True)
def drive_union(monkeypatch: pytest.MonkeyPatch) -> None:
    """The test models' union on `kind` is called Drive."""
    monkeypatch.setitem(codegen.UNION_NAMES, "kind", "Drive")


@pytest.fixture
def generated() -> types.ModuleType:
    module = types.ModuleType("generated_args")
    sys.modules[module.__name__] = module
    # dont_inherit: this module's `from __future__ import annotations` would make the annotations strings.
    code = compile(codegen.generate({"CarArgs": Car}), "generated_args.py", "exec", dont_inherit=True)
    exec(code, module.__dict__)
    return module


def test_a_model_becomes_a_typed_dict_whose_defaulted_fields_are_not_required(generated: types.ModuleType) -> None:
    car = generated.CarArgs
    assert car.__required_keys__ == {"name", "drive"}
    assert car.__doc__ == "A car, as config."
    hints = typing.get_type_hints(car, include_extras=True)
    assert hints["name"] is str
    assert typing.get_args(hints["tires"]) == (list[generated.Tire],)  # type: ignore[name-defined]
    assert typing.get_args(hints["spare"]) == (generated.Tire,)
    assert hints["labels"] == NotRequired[dict[str, str]]
    assert hints["extra"] == NotRequired[dict[str, Any]]


def test_literals_become_enums_tuples_lists_quantities_strings_and_other_unions_any(
    generated: types.ModuleType,
) -> None:
    hints = typing.get_type_hints(generated.CarArgs, include_extras=True)
    assert [member.value for member in generated.CarColor] == ["red", "blue"]
    assert hints["color"] == NotRequired[generated.CarColor]
    assert hints["seats"] == NotRequired[list[int]]
    assert hints["size"] == NotRequired[str]
    assert hints["mode"] == NotRequired[Any]


def test_a_discriminated_union_is_one_type_with_every_variants_fields(generated: types.ModuleType) -> None:
    drive = generated.Drive
    assert [member.value for member in generated.DriveKind] == ["engine", "battery"]
    assert drive.__required_keys__ == {"kind"}
    assert drive.__optional_keys__ == {"cylinders", "kwh"}
    assert typing.get_type_hints(drive, include_extras=True)["kwh"] == NotRequired[int]


def test_descriptions_say_defaults_and_which_variants_have_a_field() -> None:
    source = codegen.generate({"CarArgs": Car})
    assert '    pressure: NotRequired[float]\n    """In bar. Default: 2.2."""\n' in source
    assert '    kwh: NotRequired[int]\n    """Capacity. Only with kind battery."""\n' in source
    # the variants' defaults differ (4 and 0): no docstring claims one
    assert "    cylinders: NotRequired[int]\n    kwh: NotRequired[int]\n" in source


def test_each_type_comes_after_the_types_its_fields_name() -> None:
    source = codegen.generate({"CarArgs": Car})
    order = [line.split()[1].split("(")[0] for line in source.splitlines() if line.startswith("class ")]
    assert order.index("Tire") < order.index("CarArgs")
    assert order.index("Drive") < order.index("CarArgs")
    assert order.index("DriveKind") < order.index("Drive")


def test_a_field_the_wire_would_name_otherwise_is_refused() -> None:
    class Odd(BaseModel):
        model_config = ConfigDict(populate_by_name=True)
        max_qps: int = Field(alias="maxQPS")

    with pytest.raises(ValueError, match=r"Odd\.max_qps: the wire calls it 'maxQps', the config model 'maxQPS'"):
        codegen.generate({"OddArgs": Odd})


def test_two_different_types_of_one_name_are_refused() -> None:
    first = type("Tire", (ConfigModel,), {"__annotations__": {"width": int}})
    holder = type("Holder", (ConfigModel,), {"__annotations__": {"a": Tire, "b": first}})
    with pytest.raises(ValueError, match="two different types would be named Tire"):
        codegen.generate({"HolderArgs": holder})


def test_a_field_whose_type_differs_between_variants_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    class Small(ConfigModel):
        kind: Literal["small"] = "small"
        size: int = 1

    class Large(ConfigModel):
        kind: Literal["large"] = "large"
        size: str = "xl"

    holder = type(
        "Box", (ConfigModel,), {"__annotations__": {"item": Annotated[Small | Large, Field(discriminator="kind")]}}
    )
    monkeypatch.setitem(codegen.UNION_NAMES, "kind", "Item")
    with pytest.raises(ValueError, match=r"Item.size has different types in different variants: \['int', 'str'\]"):
        codegen.generate({"BoxArgs": holder})
