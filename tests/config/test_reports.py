"""One problem per mistake, in the words of the stack file (config/errors.py): a union's error names
the setting and its allowed values, never pydantic's internal names; unknown keys, runtimes and
values get "did you mean" when one is close."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from inference_platform.cli.main import main
from inference_platform.config.errors import INCOMPLETE
from inference_platform.stack.config import UNIONS
from tests.conftest import base_config, write_stack_file

# What pydantic names a union's variants in its paths: class names, validators, types.
INTERNAL = re.compile(r"\.[A-Z][A-Za-z]+\b|function-|\.(str|int|float)\b|\[[a-z-]+\[")


def problems(tmp_path: Path, capsys: pytest.CaptureFixture[str], model: dict[str, Any]) -> list[str]:
    """The problems a render of the base stack with `model` added reports (exit 2), positions left out."""
    config = base_config()
    config["inference-platform:models"].append(model)
    path = write_stack_file(tmp_path / "Pulumi.s.yaml", config)
    assert main(["render", "--stack", "s", "--config", str(path), "--out", str(tmp_path / "out")]) == 2
    lines = [line for line in capsys.readouterr().err.splitlines()[1:] if line != f"  {INCOMPLETE}"]
    assert all(line.startswith(f"  {path}:") for line in lines), lines
    found = [line.split(": ", 1)[1] for line in lines]
    assert not [line for line in found if INTERNAL.search(line.split(": ", 1)[0])], found
    return found


def llm(**settings: Any) -> dict[str, Any]:
    versions = [{"name": "v1", "modelUri": "hf://Qwen/Qwen3-8B", "weight": 100}]
    return {"name": "llm", "runtime": "vllm", "gpu": "exclusive", "versions": versions} | settings


@pytest.mark.parametrize("gpu", [{"mode": "exclusiv", "count": 1}, "exclusiv"])
def test_a_typo_in_gpu_mode_is_one_problem_with_the_modes(
    gpu: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert problems(tmp_path, capsys, llm(gpu=gpu)) == [
        "models[2] (llm).gpu.mode: unknown GPU mode 'exclusiv': did you mean 'exclusive'? "
        "(one of none, exclusive, vgpu, shared)"
    ]


@pytest.mark.parametrize("union", UNIONS, ids=lambda union: union.key)
def test_every_tag_of_every_union_mistyped_is_one_problem_naming_it(
    union: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    for tag in union.tags:
        typo = tag[:-1] + "x"
        model = llm(runtime=typo) if union.key == "runtime" else llm(gpu={"mode": typo})
        found = problems(tmp_path, capsys, model)
        assert len(found) == 1, found
        assert f"unknown {union.what} {typo!r}" in found[0]
        assert f"did you mean {tag!r}?" in found[0], found


def test_unknown_keys_get_the_setting_they_were_meant_to_be(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    model = llm(
        replicaz=2, versions=[{"name": "v1", "modelUri": "hf://Qwen/Qwen3-8B", "weight": 100, "mirorPercent": 5}]
    )
    assert problems(tmp_path, capsys, model) == [
        "models[2] (llm).replicaz: 'replicaz' is not a setting of the vllm runtime: did you mean 'replicas'?",
        "models[2] (llm).versions[0] (v1).mirorPercent: unknown setting 'mirorPercent': did you mean 'mirrorPercent'?",
    ]


def test_an_unknown_key_like_no_setting_says_to_check_its_spelling(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    model = llm(versions=[{"name": "v1", "modelUri": "hf://Qwen/Qwen3-8B", "weight": 100, "zzz": 1}])
    assert problems(tmp_path, capsys, model) == [
        "models[2] (llm).versions[0] (v1).zzz: unknown setting 'zzz': check its spelling"
    ]


def test_enum_values_get_did_you_mean(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert problems(tmp_path, capsys, llm(routing="virtual-servce")) == [
        "models[2] (llm).routing: unknown value 'virtual-servce': did you mean 'virtual-service'? "
        "(one of virtual-service, inference-pool)"
    ]


def test_a_value_no_variant_of_a_union_takes_is_one_problem(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    model = llm(resources={"requests": {"cpu": True}})
    assert problems(tmp_path, capsys, model) == [
        "models[2] (llm).resources.requests.cpu: must be a string, a whole number or a number, not true"
    ]
