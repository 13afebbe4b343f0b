"""A key given twice in one mapping of a stack file is refused by every command that reads the
file, at both places, with the item's name, every such key at once, and nothing else said of the
same mistake (cli/unique_keys.py). YAML's loaders would keep the last and drop the first.

Each bad file is written out in full, so its line numbers can be counted on the page.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from inference_platform.cli.main import main
from inference_platform.cli.stack_file import LIBYAML_MAX_OPENINGS, read_stack_file
from inference_platform.config.errors import ConfigError
from inference_platform.stack import fleet
from tests.conftest import write_stack_file

PREFIX = "inference-platform:"
TWICE = (
    "is given twice in one mapping (first at {first}); YAML would keep the last and drop the first "
    "without a word: keep one"
)

# A second modelUri in iris' v1, a second versions list in fraud (whose first list's weights
# alone add up to 90: only the repeat is reported), and a second models block (whose models
# would replace iris and fraud).
REPEATS = """\
config:
  inference-platform:domain: models.example.com
  inference-platform:models:
    - name: iris
      runtime: mlserver
      versions:
        - name: v1
          modelUri: pvc://models/iris/v1
          "modelUri": pvc://models/iris/v2
          weight: 100
    - name: fraud
      runtime: mlserver
      versions:
        - name: v9
          modelUri: pvc://models/fraud/v9
          weight: 90
      versions:
        - name: v9
          modelUri: pvc://models/fraud/v9
          weight: 100
  inference-platform:models:
    - name: chat
      runtime: mlserver
      versions:
        - name: v1
          modelUri: pvc://models/chat/v1
          weight: 100
"""
EXPECTED = [
    "{file}:9:11: models[0] (iris).versions[0] (v1).modelUri: " + TWICE.format(first="{file}:8:11"),
    "{file}:17:7: models[1] (fraud).versions: " + TWICE.format(first="{file}:13:7"),
    "{file}:21:3: models: " + TWICE.format(first="{file}:3:3"),
]


def expected(path: Path, lines: list[str] = EXPECTED) -> list[str]:
    return [line.replace("{file}", str(path)) for line in lines]


def reported(err: str) -> list[str]:
    lines = err.splitlines()
    count = len(lines) - 1
    assert lines[0] == f"invalid stack config ({count} problem{'s' if count != 1 else ''}):"
    return [line.removeprefix("  ") for line in lines[1:]]


@pytest.mark.parametrize(
    "command",
    [
        ["render", "--stack", "bad", "--no-charts", "--out", "{out}"],
        ["capacity", "--stack", "bad"],
        ["analyze", "--stack", "bad", "--prometheus", "http://127.0.0.1:9"],
        ["promote", "--stack", "bad", "--model", "iris", "--weights", "v1=100"],
    ],
    ids=["render", "capacity", "analyze", "promote"],
)
def test_every_command_refuses_a_key_given_twice_at_both_places(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], command: list[str]
) -> None:
    path = tmp_path / "Pulumi.bad.yaml"
    path.write_text(REPEATS, encoding="utf-8")
    out = tmp_path / "out"

    assert main([*(part.replace("{out}", str(out)) for part in command), "--config", str(path)]) == 2

    assert reported(capsys.readouterr().err) == expected(path)
    assert not out.exists()
    assert path.read_text(encoding="utf-8") == REPEATS
    assert sorted(p.name for p in tmp_path.iterdir()) == ["Pulumi.bad.yaml"]


def test_stacks_refuses_a_key_given_twice(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "Pulumi.yaml").write_text("name: inference-platform\nruntime: python\n", encoding="utf-8")
    path = tmp_path / "Pulumi.bad.yaml"
    path.write_text(REPEATS, encoding="utf-8")

    assert main(["stacks", "--root", str(tmp_path), "--all"]) == 2

    err = capsys.readouterr().err
    assert all(f"  {line}" in err.splitlines() for line in expected(path)), err


def test_a_key_given_three_times_is_reported_at_each_repeat(tmp_path: Path) -> None:
    path = tmp_path / "Pulumi.bad.yaml"
    path.write_text(
        "config:\n  inference-platform:domain: a.example.com\n"
        "  inference-platform:domain: b.example.com\n  inference-platform:domain: c.example.com\n",
        encoding="utf-8",
    )
    with pytest.raises(ConfigError) as raised:
        read_stack_file(path)
    assert [str(p) for p in raised.value.problems] == [
        f"{path}:3:3: domain: " + TWICE.format(first=f"{path}:2:3"),
        f"{path}:4:3: domain: " + TWICE.format(first=f"{path}:2:3"),
    ]


def test_keys_outside_the_project_and_outside_config_keep_their_whole_names(tmp_path: Path) -> None:
    path = tmp_path / "Pulumi.bad.yaml"
    path.write_text(
        "config:\n  kubernetes:context: kind\n  kubernetes:context: prod\n"
        "config:\n  inference-platform:domain: a.example.com\n",
        encoding="utf-8",
    )
    with pytest.raises(ConfigError) as raised:
        read_stack_file(path)
    assert [str(p) for p in raised.value.problems] == [
        f"{path}:3:3: kubernetes:context: " + TWICE.format(first=f"{path}:2:3"),
        f"{path}:4:1: config: " + TWICE.format(first=f"{path}:1:1"),
    ]


def test_a_merged_key_set_again_is_no_repeat(tmp_path: Path) -> None:
    """`<<: *base` then the same key: the mapping's own value wins, as YAML's merge key says."""
    path = tmp_path / "Pulumi.ok.yaml"
    path.write_text(
        "base: &base {runtime: mlserver, maxReplicas: 2}\n"
        "config:\n  inference-platform:x: {<<: *base, maxReplicas: 3}\n",
        encoding="utf-8",
    )
    assert read_stack_file(path).config == {f"{PREFIX}x": '{"runtime":"mlserver","maxReplicas":3}'}


def test_the_pure_python_reader_refuses_repeats_too(tmp_path: Path) -> None:
    """A file with many brackets is read by PyYAML's own parser (libyaml's could crash on deep
    nesting): it refuses the same repeat in the same words."""
    path = tmp_path / "Pulumi.bad.yaml"
    wide = "[" + ",".join(["[]"] * LIBYAML_MAX_OPENINGS) + "]"
    path.write_text(f"config:\n  a:b: {wide}\n  a:c: 1\n  a:c: 2\n", encoding="utf-8")
    with pytest.raises(ConfigError) as raised:
        read_stack_file(path)
    assert [str(p) for p in raised.value.problems] == [f"{path}:4:3: a:c: " + TWICE.format(first=f"{path}:3:3")]


def fleet_files() -> dict[str, dict[str, Any]]:
    def model(name: str) -> dict[str, Any]:
        return {
            "name": name,
            "runtime": "mlserver",
            "versions": [{"name": "v1", "modelUri": f"pvc://m/{name}", "weight": 100}],
        }

    return {
        "env": {f"{PREFIX}domain": "models.example.com", f"{PREFIX}{fleet.SHARDS_KEY}": ["env-a", "env-b"]},
        **{
            shard: {
                f"{PREFIX}{fleet.PLATFORM_STACK_KEY}": "acme/inference-platform/env",
                f"{PREFIX}models": [model(name)],
            }
            for shard, name in (("env-a", "iris"), ("env-b", "bert"))
        },
    }


def repeat_a_key(path: Path, key: str) -> int:
    """Give the file's `key` line (a top-level config key) again, after itself; the repeat's line number."""
    lines = path.read_text(encoding="utf-8").splitlines(keepends=True)
    index = next(i for i, line in enumerate(lines) if line.startswith(f"  {key}:"))
    starts = (i for i in range(index + 1, len(lines)) if lines[i].startswith("  ") and lines[i][2] != " ")
    end = next(starts, len(lines))
    path.write_text("".join([*lines[:end], *lines[index:end], *lines[end:]]), encoding="utf-8")
    return end + 1


def test_a_platform_stack_refuses_every_shard_file_that_gives_a_key_twice(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    paths = {stack: write_stack_file(tmp_path / f"Pulumi.{stack}.yaml", v) for stack, v in fleet_files().items()}
    lines = {shard: repeat_a_key(paths[shard], f"{PREFIX}models") for shard in ("env-a", "env-b")}
    out = tmp_path / "out"

    assert main(["render", "--stack", "env", "--config", str(paths["env"]), "--out", str(out), "--no-charts"]) == 2

    assert reported(capsys.readouterr().err) == [
        f"{paths[shard]}:{lines[shard]}:3: models: " + TWICE.format(first=f"{paths[shard]}:3:3")
        for shard in ("env-a", "env-b")
    ]
    assert not out.exists()


def test_a_shard_refuses_its_platform_stacks_file_that_gives_a_key_twice(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A shard rendered without its platform stack's render reads the platform stack's file."""
    paths = {stack: write_stack_file(tmp_path / f"Pulumi.{stack}.yaml", v) for stack, v in fleet_files().items()}
    line = repeat_a_key(paths["env"], f"{PREFIX}domain")
    out = tmp_path / "out"

    assert main(["render", "--stack", "env-a", "--config", str(paths["env-a"]), "--out", str(out / "env-a")]) == 2

    assert reported(capsys.readouterr().err) == [
        f"{paths['env']}:{line}:3: domain: " + TWICE.format(first=f"{paths['env']}:2:3")
    ]
    assert not out.exists()


def test_the_yaml_loaders_alone_would_drop_the_first_key() -> None:
    """What this guards against: PyYAML keeps the last of two equal keys without a word."""
    assert yaml.safe_load("a: 1\na: 2\n") == {"a": 2}
