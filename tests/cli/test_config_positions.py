"""Config errors point at the stack file: `Pulumi.<stack>.yaml:line:column:` of the offending key
or item, then the path with each named list item's name beside its index.

Each bad file is written out here in full, so its line numbers can be counted on the page; the
expected report is every line of it, word for word. `{file}` stands for the stack file's path.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from inference_platform.cli.main import main
from inference_platform.cli.positions import PositionIndex, named_path
from inference_platform.config.errors import INCOMPLETE, ConfigError
from inference_platform.stack.config import parse_stack_config

# Lines 1 to 14, the start of every file below; each case adds what it breaks after it.
HEAD = """\
config:
  inference-platform:domain: models.example.com
  inference-platform:models:
    - name: iris
      runtime: mlserver
      versions:
        - name: v1
          modelUri: pvc://models/iris/v1
          weight: 90
        - name: v2
          modelUri: pvc://models/iris/v2
          weight: 10
    - name: fraud
      runtime: mlserver
"""
FRAUD_VERSIONS = """\
      versions:
        - name: v9
          modelUri: pvc://models/fraud/v9
          weight: 100
"""

CASES = [
    (
        "unknown-key",
        HEAD + FRAUD_VERSIONS + "      colour: blue\n",
        ["{file}:19:7: models[1] (fraud).colour: 'colour' is not a setting of the mlserver runtime"],
    ),
    (
        "wrong-type",
        HEAD
        + """\
      versions:
        - name: v9
          modelUri: pvc://models/fraud/v9
          weight: lots
""",
        [
            "{file}:18:11: models[1] (fraud).versions[0] (v9).weight: must be a whole number, not the string 'lots'",
            # fraud's weights cannot be added up without this one.
            INCOMPLETE,
        ],
    ),
    (
        "weights-off-by-one",
        HEAD.replace("weight: 10\n", "weight: 9\n"),
        [
            "{file}:6:7: models[0] (iris).versions: live weights add up to 99 (v1=90, v2=9); "
            "they must add up to exactly 100",
            # A model with no versions at all: the key that is missing, at the mapping that should hold it.
            "{file}:13:7: models[1] (fraud).versions: required, but not set",
            INCOMPLETE,
        ],
    ),
    (
        "model-cross-field",
        HEAD
        + FRAUD_VERSIONS
        + """\
      timeout: 10s
      retries:
        attempts: 2
        perTryTimeout: 30s
""",
        ["{file}:22:9: models[1] (fraud).retries.perTryTimeout: 30s is longer than the model's timeout (10s)"],
    ),
    (
        "missing-required-key",
        HEAD
        + """\
      versions:
        - name: v9
          weight: 100
""",
        # No modelUri: the version that should hold it.
        ["{file}:16:11: models[1] (fraud).versions[0] (v9).modelUri: required, but not set"],
    ),
    (
        "missing-top-level-key",
        HEAD.replace("  inference-platform:domain: models.example.com\n", "") + FRAUD_VERSIONS,
        # No domain: the config section that should hold it.
        ["{file}:1:1: domain: required, but not set", INCOMPLETE],
    ),
    (
        "conflict-with-a-default",
        HEAD
        + FRAUD_VERSIONS
        + """\
  inference-platform:platform:
    hami:
      enabled: true
""",
        # kubernetesVersion is not in the file: its nearest ancestor there, platform.
        [
            "{file}:19:3: platform.kubernetesVersion: HAMi runs a kube-scheduler of the cluster's version: "
            "set it (1.30.4)"
        ],
    ),
    (
        "inside-a-pipeline",
        HEAD
        + FRAUD_VERSIONS
        + """\
  inference-platform:pipelines:
    - name: scoring
      nodes:
        root:
          routerType: Sequence
          steps:
            - name: first
              model: iris
            - name: second
              model: nope
""",
        [
            "{file}:28:15: pipelines[0] (scoring).nodes.root.steps[1] (second).model: "
            "'nope' is not a model of this stack"
        ],
    ),
    (
        "several-at-once",
        HEAD.replace("weight: 90\n", "weight: high\n") + FRAUD_VERSIONS.replace("name: v9", "name: V9"),
        [
            "{file}:9:11: models[0] (iris).versions[0] (v1).weight: must be a whole number, not the string 'high'",
            "{file}:16:11: models[1] (fraud).versions[0] (V9).name: 'V9' is not a valid name: use at most 63 "
            "lowercase letters, digits and '-', starting and ending with a letter or digit",
            INCOMPLETE,
        ],
    ),
    (
        "lora-adapters",
        HEAD
        + FRAUD_VERSIONS
        + """\
          adapters:
            - name: sql
              uri: pvc://adapters/sql
    - name: llama
      runtime: vllm
      gpu: exclusive
      maxLoras: 1
      versions:
        - name: v1
          modelUri: pvc://models/llama
          weight: 100
          adapters:
            - name: sql
              uri: pvc://adapters/sql
            - name: llama
              uri: pvc://adapters/llama
            - name: sql
              uri: hf://acme/sql
""",
        # An adapter's name problems at that name, a runtime without LoRA at the version's list, maxLoras
        # at its key; each with the model's, the version's and the adapter's names.
        [
            "{file}:19:11: models[1] (fraud).versions[0] (v9).adapters: mlserver does not serve LoRA adapters: "
            "drop them, or serve the model with an engine that does (runtime vllm or sglang)",
            "{file}:25:7: models[2] (llama).maxLoras: 1 is fewer than the 3 adapters versions[0] (v1) lists: set 3 "
            "or more (or leave it unset), so one batch can serve all of them",
            "{file}:33:15: models[2] (llama).versions[0] (v1).adapters[1] (llama).name: 'llama' is the model's own "
            "name, which the base model is served under: name the adapter apart from it",
            "{file}:35:15: models[2] (llama).versions[0] (v1).adapters[2] (sql).name: adapter 'sql' is defined twice "
            "(also versions[0].adapters[0].name)",
        ],
    ),
    (
        "key-without-namespace",
        HEAD + FRAUD_VERSIONS + "  domain: other.example.com\n",
        # This key, not inference-platform:domain on line 2.
        ["{file}:19:3: domain: config keys are namespaced: write inference-platform:<key>"],
    ),
    (
        "value-as-a-json-string",
        """\
config:
  inference-platform:domain: models.example.com
  inference-platform:models: '[{"name": "iris", "runtime": "mlserver", "versions": []}]'
""",
        # The file has no lines inside a string, and no name of it: the key holding it.
        ["{file}:3:3: models[0].versions: must not be empty", INCOMPLETE],
    ),
    (
        "not-yaml",
        HEAD + "      versions: [{name: v9, weight: 100}\n",
        [
            # Where the parser stopped (the file's end), and where what it was reading began.
            "{file}:16:1: not valid YAML: while parsing a flow sequence from line 15, column 17; "
            "did not find expected ',' or ']'"
        ],
    ),
]


def report(command: list[str], path: Path, capsys: pytest.CaptureFixture[str]) -> list[str]:
    """The problem lines a command prints for the stack file at `path` (it must exit 2)."""
    assert main([*command, "--config", str(path)]) == 2
    lines = capsys.readouterr().err.splitlines()
    count = len(lines) - 1 - (lines[-1] == f"  {INCOMPLETE}")  # the count is of problems only
    assert lines[0] == f"invalid stack config ({count} problem{'s' if count != 1 else ''}):"
    return [line.removeprefix("  ") for line in lines[1:]]


@pytest.mark.parametrize(("text", "expected"), [case[1:] for case in CASES], ids=[case[0] for case in CASES])
def test_each_problem_points_at_its_line_and_names_its_items(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], text: str, expected: list[str]
) -> None:
    path = tmp_path / "Pulumi.bad.yaml"
    path.write_text(text, encoding="utf-8")

    lines = report(["capacity", "--stack", "bad"], path, capsys)

    assert lines == [line.replace("{file}", str(path)) for line in expected]


@pytest.mark.parametrize(
    "command",
    [
        ["render", "--stack", "bad", "--no-charts"],
        ["capacity", "--stack", "bad"],
        ["analyze", "--stack", "bad", "--prometheus", "http://127.0.0.1:9"],
    ],
    ids=["render", "capacity", "analyze"],
)
def test_every_command_that_reads_a_stack_file_points_at_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], command: list[str]
) -> None:
    name, text, expected = next(case for case in CASES if case[0] == "weights-off-by-one")
    path = tmp_path / f"Pulumi.{name}.yaml"
    path.write_text(text, encoding="utf-8")
    out = ["--out", str(tmp_path / "out")] if command[0] == "render" else []

    lines = report([*command, *out], path, capsys)

    assert lines == [line.replace("{file}", str(path)) for line in expected]
    assert not (tmp_path / "out").exists()


def test_a_relative_path_is_printed_as_given(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """`--stack prod` reads Pulumi.prod.yaml in the working directory, and says so."""
    monkeypatch.chdir(tmp_path)
    Path("Pulumi.prod.yaml").write_text(HEAD + FRAUD_VERSIONS + "      colour: blue\n", encoding="utf-8")

    assert main(["capacity", "--stack", "prod"]) == 2

    assert capsys.readouterr().err.splitlines()[1:] == [
        "  Pulumi.prod.yaml:19:7: models[1] (fraud).colour: 'colour' is not a setting of the mlserver runtime"
    ]


def test_without_a_file_the_problems_read_as_before() -> None:
    """What `pulumi up` reports: the engine hands over config, not a file, so no line and no names."""
    with pytest.raises(ConfigError) as raised:
        parse_stack_config({"domain": "models.example.com", "models": '[{"name": "iris", "runtime": "mlserver"}]'})

    assert (
        str(raised.value)
        == f"invalid stack config (1 problem):\n  models[0].versions: required, but not set\n  {INCOMPLETE}"
    )


def test_a_path_through_an_item_without_a_name_shows_the_index_alone() -> None:
    index = PositionIndex.from_text(
        "config:\n  inference-platform:models:\n    - runtime: mlserver\n      calls: [a, b]\n"
    )
    assert index is not None

    where = index.locate(("models", 0, "calls", 1))

    assert (where.line, where.column) == (3, 17)  # 0-based, as the parser counts: b at 4:18
    assert named_path(("models", 0, "calls", 1), where.names) == "models[0].calls[1]"


# Six mistakes, two in each model: pydantic alone stops at the first of each model, and reported three.
SIX_MISTAKES = """\
config:
  inference-platform:domain: models.example.com
  inference-platform:models:
    - name: iris
      runtime: mlserver
      colour: blue
      versions:
        - name: v1
          modelUri: pvc://models/iris/v1
          weight: 85
        - name: v2
          modelUri: pvc://models/iris/v2
          weight: 10
    - name: chat
      runtime: vllm
      replicas: many
      versions:
        - name: v1
          modelUri: hf://Qwen/Qwen2.5-7B-Instruct
          weight: 100
    - name: fraud
      runtime: mlserver
      versions:
        - name: v1
          modelUri: pvc://models/fraud/v1
          weight: 100
        - name: v2
          modelUri: pvc://models/fraud/v2
          weight: 0
          mirrorPercent: 10
        - name: v1
          modelUri: pvc://models/fraud/v3
          weight: 0
"""


def test_every_independent_problem_of_a_model_is_reported_in_one_run(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "Pulumi.bad.yaml"
    path.write_text(SIX_MISTAKES, encoding="utf-8")

    lines = report(["capacity", "--stack", "bad"], path, capsys)

    assert lines == [
        f"{path}:6:7: models[0] (iris).colour: 'colour' is not a setting of the mlserver runtime",
        # An unknown key hides nothing: iris's weights are still added up.
        f"{path}:7:7: models[0] (iris).versions: live weights add up to 95 (v1=85, v2=10); "
        "they must add up to exactly 100",
        # chat's checks that do not read replicas run.
        f"{path}:14:7: models[1] (chat).gpu: vLLM serves on GPUs: set gpu to exclusive, vgpu or shared",
        f"{path}:16:7: models[1] (chat).replicas: must be a whole number, not the string 'many'",
        # A version that fails its own check still counts among fraud's versions.
        f"{path}:27:11: models[2] (fraud).versions[1] (v2): a version is either live (weight) or a shadow "
        "(mirrorPercent), not both",
        f"{path}:31:11: models[2] (fraud).versions[2] (v1).name: version 'v1' is defined twice (also versions[0].name)",
        # The stack's GPU plan reads chat's replicas: it waits for them.
        INCOMPLETE,
    ]


def test_no_line_of_more_to_come_when_every_check_ran(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "Pulumi.bad.yaml"
    path.write_text(SIX_MISTAKES.replace("replicas: many", "replicas: 2"), encoding="utf-8")

    lines = report(["capacity", "--stack", "bad"], path, capsys)

    assert len(lines) == 5
    assert INCOMPLETE not in lines
