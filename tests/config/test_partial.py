"""config/partial.py: the checks pydantic skips after a model's first problem, run on what parsed."""

from __future__ import annotations

from typing import Annotated

import pytest
from pydantic import Field, ValidationError, model_validator

from inference_platform.config.base import ConfigModel, config_problems
from inference_platform.config.errors import problems_from_errors, problems_from_validation
from inference_platform.config.partial import validate_partially


class Part(ConfigModel):
    name: str
    size: int = 1

    @model_validator(mode="after")
    def _small(self) -> Part:
        if self.size > 10:
            raise config_problems([("size", "too big")])
        return self


class Whole(ConfigModel):
    parts: Annotated[list[Part], Field(min_length=1)]
    limit: int = 100

    @model_validator(mode="after")
    def _unique(self) -> Whole:
        names = [part.name for part in self.parts]
        if len(set(names)) != len(names):
            raise config_problems([("parts", "names repeat")])
        return self

    @model_validator(mode="after")
    def _within_limit(self) -> Whole:
        if sum(part.size for part in self.parts) > self.limit:
            raise config_problems([("limit", "the parts exceed it")])
        return self


def paths_and_messages(data: object) -> tuple[list[str], list[str], bool]:
    with pytest.raises(ValidationError) as raised:
        Whole.model_validate(data)
    partial = validate_partially(Whole, data)
    return (
        [f"{p.path}: {p.message}" for p in problems_from_validation(raised.value)],
        [f"{p.path}: {p.message}" for p in problems_from_errors(partial.errors)],
        partial.incomplete,
    )


def test_a_failed_item_check_does_not_hide_the_checks_of_its_list() -> None:
    first, every, incomplete = paths_and_messages({"parts": [{"name": "a", "size": 11}, {"name": "a"}]})

    assert first == ["parts[0].size: too big"]
    assert every == ["parts: names repeat", "parts[0].size: too big"]
    assert not incomplete


def test_an_unknown_key_hides_no_check() -> None:
    first, every, incomplete = paths_and_messages({"parts": [{"name": "a"}, {"name": "a"}], "colour": "blue"})

    assert first == ["colour: unknown setting 'colour': check its spelling"]
    assert every == [*first, "parts: names repeat"]
    assert not incomplete


def test_a_check_that_reads_what_did_not_parse_waits_and_says_so() -> None:
    # limit did not parse: the sum cannot be checked, the names can.
    first, every, incomplete = paths_and_messages({"parts": [{"name": "a"}, {"name": "a"}], "limit": "lots"})

    assert first == ["limit: must be a whole number, not the string 'lots'"]
    assert every == [*first, "parts: names repeat"]
    assert incomplete


def test_a_missing_required_field_is_reported_once_and_its_readers_wait() -> None:
    first, every, incomplete = paths_and_messages({"parts": [{"size": 2}]})

    assert first == every == ["parts[0].name: required, but not set"]
    assert incomplete  # the names cannot be compared without it
