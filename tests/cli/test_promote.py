"""`python -m infra promote`: every move, every refusal, and files edited line by line."""

from __future__ import annotations

import difflib
import re
import shutil
from pathlib import Path
from typing import Any

import pytest
import yaml

from inference_platform.cli.diff import FieldChange, ObjectDiff, RenderDiff, diff_renders, markdown_report
from inference_platform.cli.main import main
from inference_platform.cli.promote import Promotion, PromotionError, _check_comments, _mapping_indent, edit
from inference_platform.cli.render import run_program
from inference_platform.cli.render_files import CHARTS, MANIFESTS, OUTPUTS, render_texts, write_render
from inference_platform.cli.stack_file import read_stack_file
from inference_platform.config.errors import INCOMPLETE
from tests.conftest import ROOT, RUNTIME_MINIMUMS, write_stack_file


@pytest.fixture
def dev(tmp_path: Path) -> Path:
    path = tmp_path / "Pulumi.dev.yaml"
    shutil.copy(ROOT / "Pulumi.dev.yaml", path)
    return path


@pytest.fixture
def prod(tmp_path: Path) -> Path:
    path = tmp_path / "Pulumi.prod.yaml"
    shutil.copy(ROOT / "Pulumi.prod.yaml", path)
    return path


def run(path: Path, *args: str) -> int:
    stack = path.name.split(".")[1]
    return main(["promote", "--stack", stack, "--config", str(path), *args])


def changed_lines(before: str, after: str) -> list[str]:
    return [
        line
        for line in difflib.unified_diff(before.splitlines(), after.splitlines(), lineterm="", n=0)
        if line[:1] in "+-" and not line.startswith(("+++", "---"))
    ]


def versions(path: Path, model: str) -> list[dict[str, Any]]:
    config = yaml.safe_load(path.read_text())["config"]
    found: list[dict[str, Any]] = next(m for m in config["inference-platform:models"] if m["name"] == model)["versions"]
    return found


def test_set_weights_changes_only_those_lines_and_prints_the_render_diff(
    dev: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    before = dev.read_text()

    assert run(dev, "--model", "iris", "--weights", "v1=50,v2=50") == 0

    assert changed_lines(before, dev.read_text()) == [
        "-          weight: 90",
        "+          weight: 50",
        "-          weight: 10",
        "+          weight: 50",
    ]
    out = capsys.readouterr().out
    # Both renders are of this stack: the alert rules (which name it) do not change.
    assert "Kubernetes objects: 0 added, 0 removed, 2 changed. Helm charts: 0 added, 0 removed, 0 changed." in out
    assert "**Changed: `VirtualService service/iris (networking.istio.io/v1)`**" in out
    assert "**Changed: `VirtualService service/iris-mesh (networking.istio.io/v1)`**" in out
    assert "| `spec.http[by-path].route[0].weight` | `90` | `50` |" in out


def test_a_shadow_given_a_weight_goes_live(dev: Path) -> None:
    assert run(dev, "--model", "iris", "--weights", "v1=80,v2=10,v3=10") == 0
    assert versions(dev, "iris")[2] == {"name": "v3", "modelUri": "pvc://models/iris/v3", "weight": 10}


def test_start_and_stop_a_shadow(dev: Path) -> None:
    assert run(dev, "--model", "iris", "--mirror", "v3=20") == 0
    assert versions(dev, "iris")[2]["mirrorPercent"] == 20

    assert run(dev, "--model", "iris", "--mirror", "v3=0") == 0
    assert versions(dev, "iris")[2] == {"name": "v3", "modelUri": "pvc://models/iris/v3", "weight": 0}


def test_add_a_version_idle_or_straight_into_a_shadow(dev: Path) -> None:
    before = dev.read_text()

    assert run(dev, "--model", "iris", "--add-version", "v4", "--model-uri", "pvc://models/iris/v4") == 0

    assert changed_lines(before, dev.read_text()) == [
        "+        - name: v4",
        "+          modelUri: pvc://models/iris/v4",
        "+          weight: 0",
    ]
    assert run(dev, "--model", "churn", "--add-version", "v2", "--model-uri", "gs://m/churn/2", "--mirror", "v2=5") == 0
    assert versions(dev, "churn")[1] == {"name": "v2", "modelUri": "gs://m/churn/2", "mirrorPercent": 5}


def test_retire_a_version(dev: Path) -> None:
    assert run(dev, "--model", "iris", "--retire", "v3") == 0
    assert [v["name"] for v in versions(dev, "iris")] == ["v1", "v2"]

    assert run(dev, "--model", "iris", "--retire", "v1", "--weights", "v2=100") == 0
    assert versions(dev, "iris") == [{"name": "v2", "modelUri": "pvc://models/iris/v2", "weight": 100}]


def test_comments_order_and_encrypted_secrets_survive(prod: Path) -> None:
    before = prod.read_text()

    assert run(prod, "--model", "fraud", "--weights", "v7=50,v8=50") == 0

    after = prod.read_text()
    assert changed_lines(before, after) == [
        "-          weight: 90",
        "+          weight: 50",
        "-          weight: 10",
        "+          weight: 50",
    ]
    for line in before.splitlines():
        if "secure:" in line or line.lstrip().startswith("#") or "encryptionsalt" in line:
            assert line in after.splitlines()


# Each refusal's whole report, word for word: the message is the interface. A problem of the
# config points at its line in the file as the move would leave it ({file}: the stack file's path).
INVALID_MOVE = "invalid stack config (1 problem):\n  the move would leave the stack invalid; nothing was written\n  "
REFUSALS = [
    (
        ["--model", "iris", "--weights", "v1=80"],
        INVALID_MOVE + "{file}:26:7: models[0] (iris).versions: live weights add up to 90 (v1=80, v2=10); "
        "they must add up to exactly 100\n",
    ),
    (
        ["--model", "iris", "--retire", "v1"],
        INVALID_MOVE + "{file}:26:7: models[0] (iris).versions: live weights add up to 10 (v2=10); "
        "they must add up to exactly 100\n",
    ),
    (
        ["--model", "nope", "--weights", "v1=100"],
        "promote: no model named 'nope' in the stack (models: iris, churn); nothing was written\n",
    ),
    (
        ["--model", "iris", "--weights", "v9=100"],
        "promote: model 'iris' has no version 'v9' (versions: v1, v2, v3); nothing was written\n",
    ),
    (
        ["--model", "iris", "--add-version", "v1", "--model-uri", "pvc://m/x"],
        "promote: model 'iris' already has a version 'v1'; nothing was written\n",
    ),
    (
        ["--model", "iris", "--add-version", "v4"],
        "promote: --add-version needs --model-uri: where the new version's files are; nothing was written\n",
    ),
    (
        ["--model", "iris", "--model-uri", "pvc://m/x"],
        "promote: --model-uri goes with --add-version; nothing was written\n",
    ),
    (
        ["--model", "iris", "--mirror", "v1=0"],
        "promote: --mirror v1=0: version 'v1' is not a shadow; nothing was written\n",
    ),
    (
        ["--model", "iris", "--mirror", "v3=150"],
        INVALID_MOVE + "{file}:35:11: models[0] (iris).versions[2] (v3).mirrorPercent: "
        "must be at most 100 (got 150)\n"
        f"  {INCOMPLETE}\n",  # iris's shares wait for v3's
    ),
    (
        ["--model", "iris", "--weights", "v1:100"],
        "promote: --weights: write <version>=<number>, not 'v1:100'; nothing was written\n",
    ),
    (
        ["--model", "iris", "--weights", "v1=5=0"],
        "promote: --weights: '5=0' is not a number (in 'v1=5=0'); nothing was written\n",
    ),
    (
        ["--model", "iris", "--weights", "v1=most"],
        "promote: --weights: 'most' is not a number (in 'v1=most'); nothing was written\n",
    ),
    (
        ["--model", "iris", "--add-version", "V4", "--model-uri", "pvc://m/x"],
        INVALID_MOVE
        + "{file}:36:11: models[0] (iris).versions[3] (V4).name: 'V4' is not a valid name: use at most 63 lowercase "
        "letters, digits and '-', starting and ending with a letter or digit\n"
        f"  {INCOMPLETE}\n",  # the names of the stack's objects wait for it
    ),
    (
        ["--model", "iris", "--add-version", "v4", "--model-uri", "ftp://m/x"],
        INVALID_MOVE
        + "{file}:37:11: models[0] (iris).versions[3] (v4).modelUri: 'ftp://m/x' has an unsupported scheme: "
        "use one of pvc://, s3://, gs://, http://, https://, hf://\n",
    ),
    (
        ["--model", "iris"],
        "promote: nothing to do: give --weights, --mirror, --add-version or --retire; nothing was written\n",
    ),
    (
        ["--model", "iris", "--retire", "v9"],
        "promote: model 'iris' has no version 'v9' (versions: v1, v2, v3); nothing was written\n",
    ),
    (
        ["--model", "iris", "--weights", ","],
        "promote: --weights: name at least one version; nothing was written\n",
    ),
    (
        ["--model", "iris", "--mirror", "v9=5"],
        "promote: model 'iris' has no version 'v9' (versions: v1, v2, v3); nothing was written\n",
    ),
]


@pytest.mark.parametrize(("args", "message"), REFUSALS, ids=[" ".join(a[2:]) or "nothing" for a, _ in REFUSALS])
def test_refusals_exit_2_and_leave_the_file_alone(
    dev: Path, capsys: pytest.CaptureFixture[str], args: list[str], message: str
) -> None:
    before = dev.read_bytes()

    assert run(dev, *args) == 2

    assert capsys.readouterr().err == message.replace("{file}", str(dev))
    assert dev.read_bytes() == before
    assert sorted(p.name for p in dev.parent.iterdir()) == ["Pulumi.dev.yaml"]


def test_a_missing_stack_file_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert run(tmp_path / "Pulumi.gone.yaml", "--model", "iris", "--weights", "v1=100") == 2
    assert "cannot read" in capsys.readouterr().err


BROKEN_FILES = {
    "not-a-mapping": ("- a\n- list\n", "promote: the stack file is not a mapping;"),
    "no-models": (
        "config:\n  inference-platform:domain: models.example.com\n",
        "promote: the stack file has no inference-platform:models list;",
    ),
    "models-not-a-list": (
        "config:\n  inference-platform:models: iris\n",
        "promote: the stack file has no inference-platform:models list;",
    ),
    "no-models-at-all": (
        "config:\n  inference-platform:models: []\n",
        "promote: no model named 'iris' in the stack (models: none)",
    ),
    "versions-not-a-list": (
        "config:\n  inference-platform:models:\n    - name: iris\n      versions: v1\n",
        "promote: model 'iris' has no versions list",
    ),
    "not-yaml": (
        "config: [unclosed\n",
        "promote: {file}:2:1: the stack file is not valid YAML: while parsing a flow sequence from line 1, column 9; "
        "expected ',' or ']', but got '<stream end>'; nothing was written",
    ),
    "nested-flow": (
        "config: {x: " + "[" * 5000 + "]" * 5000 + "}\n",
        "promote: the stack file nests values too deeply to edit;",
    ),
    "nested-block": (
        "config:\n  x:\n" + "".join("    " + "  " * d + "- \n" for d in range(60)),
        "promote: the stack file nests values more than 32 levels deep; refusing to read it;",
    ),
    "huge": ("config:\n  x:y: " + "a" * (2 * 1024 * 1024) + "\n", "invalid stack config (1 problem):"),
}


@pytest.mark.parametrize("name", sorted(BROKEN_FILES))
def test_broken_and_hostile_stack_files_are_refused_untouched(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], name: str
) -> None:
    text, words = BROKEN_FILES[name]
    path = tmp_path / "Pulumi.broken.yaml"
    path.write_text(text)

    assert run(path, "--model", "iris", "--weights", "v1=100") == 2

    err = capsys.readouterr().err
    assert err.startswith(words.replace("{file}", str(path)))
    assert "Traceback" not in err
    assert path.read_text() == text


def reverse(diff: ObjectDiff) -> ObjectDiff:
    """The diff that undoes `diff`."""
    return ObjectDiff(
        added=diff.removed,
        removed=diff.added,
        changed={
            label: [FieldChange(c.path, c.after, c.before) for c in fields] for label, fields in diff.changed.items()
        },
    )


ROLLBACKS = {
    "shift weights": ["--model", "iris", "--weights", "v1=50,v2=50"],
    "start a shadow": ["--model", "iris", "--add-version", "v4", "--model-uri", "pvc://m/4", "--mirror", "v4=10"],
    "retire a shadow": ["--model", "iris", "--retire", "v3"],
}


@pytest.mark.parametrize("move", ROLLBACKS.values(), ids=ROLLBACKS.keys())
def test_rolling_back_the_config_commit_reverses_the_diff(dev: Path, tmp_path: Path, move: list[str]) -> None:
    """Revert the commit and the render diff, objects, charts, outputs and the Markdown a reviewer
    reads, is the exact reverse of the promotion's."""

    def render(name: str) -> Path:
        out = tmp_path / name
        write_render(render_texts(run_program("dev", read_stack_file(dev))), out)
        return out

    original = dev.read_text()
    before = render("before")
    assert run(dev, *move) == 0
    after = render("after")
    dev.write_text(original)  # git revert of the config commit
    rolled_back = render("rolled-back")

    forward = diff_renders(before, after)
    backward = diff_renders(after, rolled_back)
    objects, charts, outputs, *_ = forward
    assert not objects.empty
    assert backward[0] == reverse(objects)
    assert backward[1] == reverse(charts)
    assert backward[2] == [FieldChange(c.path, c.after, c.before) for c in outputs]
    assert markdown_report(backward) == markdown_report(RenderDiff(reverse(objects), reverse(charts), backward[2], {}))
    assert markdown_report(diff_renders(before, rolled_back)).endswith("No changes: both renders are identical.\n")
    for name in (MANIFESTS, CHARTS, OUTPUTS):
        assert (rolled_back / name).read_bytes() == (before / name).read_bytes()


def test_promoting_a_model_a_pipeline_calls_touches_no_pipeline_object(dev: Path, tmp_path: Path) -> None:
    stack = yaml.safe_load(dev.read_text())
    stack["config"]["inference-platform:pipelines"] = [
        {"name": "iris-flow", "nodes": {"root": {"routerType": "Sequence", "steps": [{"model": "iris"}]}}}
    ]
    dev.write_text(yaml.safe_dump(stack, sort_keys=False))
    before = tmp_path / "before"
    assert main(["render", "--stack", "dev", "--config", str(dev), "--out", str(before), "--no-charts"]) == 0

    assert run(dev, "--model", "iris", "--weights", "v1=50,v2=50") == 0

    after = tmp_path / "after"
    assert main(["render", "--stack", "dev", "--config", str(dev), "--out", str(after), "--no-charts"]) == 0
    diff = diff_renders(before, after).objects
    assert diff.changed, "the promotion changed nothing"
    assert not diff.added
    assert not diff.removed
    assert not [label for label in diff.changed if "iris-flow" in label]
    assert {label.split()[0] for label in diff.changed} == {"VirtualService"}


def test_a_fractional_mirror_share_is_written_as_it_was_given(dev: Path) -> None:
    assert run(dev, "--model", "iris", "--mirror", "v3=12.5") == 0
    assert versions(dev, "iris")[2]["mirrorPercent"] == 12.5

    assert run(dev, "--model", "iris", "--mirror", "v3=20.0") == 0
    assert versions(dev, "iris")[2]["mirrorPercent"] == 20
    assert "mirrorPercent: 20\n" in dev.read_text()


def test_a_file_indented_by_four_keeps_its_indentation(dev: Path) -> None:
    config = yaml.safe_load(dev.read_text())
    dev.write_text(yaml.safe_dump(config, indent=4, sort_keys=False))
    before = dev.read_text()

    assert run(dev, "--model", "iris", "--weights", "v1=50,v2=50") == 0

    assert changed_lines(before, dev.read_text()) == [
        "-            weight: 90",
        "+            weight: 50",
        "-            weight: 10",
        "+            weight: 50",
    ]


def test_long_lines_are_never_rewrapped(dev: Path) -> None:
    config = yaml.safe_load(dev.read_text())
    long_value = " ".join(["word"] * 2000)  # 9999 characters with spaces to wrap at
    config["config"]["inference-platform:models"][0]["env"] = [{"name": "NOTE", "value": long_value}]
    dev.write_text(yaml.dump(config, width=1_000_000, sort_keys=False))
    before = dev.read_text()

    assert run(dev, "--model", "iris", "--weights", "v1=50,v2=50") == 0

    assert len(changed_lines(before, dev.read_text())) == 4


@pytest.mark.parametrize(
    ("text", "indent"),
    [
        ("config:\n  inference-platform:domain: x\n", 2),
        ("config:\n    inference-platform:domain: x\n", 4),
        ("config:\n# a comment first\n\n    key: x\n", 4),
        ("a:\nb:\n  c: 1\n", 2),
        ("a:\n    - x\nb:\n   c: 1\n", 3),
        ("list:\n- a\n  key:\n      sub: 1\n", 4),
        ("a: >\n    folded text\nb:\n  c: 1\n", 2),
        ("just: scalars\n", 2),
        ("list:\n- item:\n    leaf: 1\n", 2),
    ],
    ids=[
        "two",
        "four",
        "comment-and-blank",
        "empty-key",
        "sequence-first",
        "nested-in-sequence",
        "folded",
        "flat",
        "sequence-item-key",
    ],
)
def test_the_mapping_indent_is_read_from_the_first_nested_mapping(text: str, indent: int) -> None:
    assert _mapping_indent(text) == indent


# Comments in every place promote edits near: before the first version, at the ends of the lines
# it changes, between versions, inside the last version and after it (the next model's heading).
ANNOTATED_FRAUD = """\
      versions:
        # The primary.
        - name: v7
          modelUri: s3://ml-models-prod/fraud/v7   # retrained in May
          weight: 90                               # most of the traffic
        # The canary, since June.
        - name: v8
          modelUri: s3://ml-models-prod/fraud/v8
          weight: 10  # a tenth

        # The shadow.
        - name: v9
          modelUri: s3://ml-models-prod/fraud/v9
          mirrorPercent: 20  # a fifth
          # (it answers nobody)
"""
PROD_FRAUD = """\
      versions:
        - name: v7
          modelUri: s3://ml-models-prod/fraud/v7
          weight: 90
        - name: v8
          modelUri: s3://ml-models-prod/fraud/v8
          weight: 10
        - name: v9
          modelUri: s3://ml-models-prod/fraud/v9
          mirrorPercent: 20
"""


def stack_texts() -> dict[str, str]:
    prod = (ROOT / "Pulumi.prod.yaml").read_text()
    assert PROD_FRAUD in prod
    return {"prod": prod, "annotated": prod.replace(PROD_FRAUD, ANNOTATED_FRAUD)}


COMMENT_MOVES = {
    "shadow goes live": Promotion("fraud", weights={"v7": 80, "v8": 10, "v9": 10}),
    "shift live weights": Promotion("fraud", weights={"v7": 50, "v8": 50}),
    "resize the shadow": Promotion("fraud", mirrors={"v9": 30}),
    "stop the shadow": Promotion("fraud", mirrors={"v9": 0}),
    "live becomes a shadow": Promotion("fraud", weights={"v7": 100}, mirrors={"v8": 5}),
    "retire the last": Promotion("fraud", retire=("v9",)),
    "retire the middle": Promotion("fraud", weights={"v7": 100}, retire=("v8",)),
    "retire the first": Promotion("fraud", weights={"v8": 100}, retire=("v7",)),
    "add a shadow": Promotion("fraud", add_version="v10", model_uri="s3://m/fraud/v10", mirrors={"v10": 10}),
    "add to a one-version model": Promotion("resnet", add_version="v4", model_uri="s3://m/resnet/4"),
    "add to the last model": Promotion("assistant", add_version="v2", model_uri="hf://Qwen/Qwen2.5-14B-Instruct"),
}


def comments(text: str) -> list[str]:
    """Every comment of a stack file in order, whole lines and ends of lines (these files have no '#' in values)."""
    return [found.group(1).strip() for line in text.splitlines() if (found := re.search(r"(?:^|\s)(#.*)$", line))]


def is_comment(line: str) -> bool:
    return line[1:].lstrip().startswith("#")


def headings(text: str) -> list[tuple[str, str]]:
    """Each whole-line comment with the line of YAML after it that it heads (starting in its column)."""
    lines = [line for line in text.splitlines() if line.strip()]

    def column(line: str) -> int:
        return len(line) - len(line.lstrip())

    pairs = [
        (line, next((after for after in lines[i:] if not after.lstrip().startswith("#")), ""))
        for i, line in enumerate(lines)
        if line.lstrip().startswith("#")
    ]
    return [(comment, line) for comment, line in pairs if column(comment) == column(line)]


@pytest.mark.parametrize("stack", ["prod", "annotated"])
@pytest.mark.parametrize("move", COMMENT_MOVES.values(), ids=COMMENT_MOVES.keys())
def test_every_move_keeps_every_comment_in_its_place(stack: str, move: Promotion) -> None:
    before = stack_texts()[stack]

    after = edit(before, move, Path(f"Pulumi.{stack}.yaml"))

    assert comments(after) == comments(before)
    changed = changed_lines(before, after)
    # No comment line is removed or moved; the only new ones are the ends of a retired version's
    # lines, left where the version was.
    assert not [line for line in changed if line.startswith("-") and is_comment(line)]
    added = [line[1:].strip() for line in changed if line.startswith("+") and is_comment(line)]
    retired_ends = [c for c in comments("\n".join(line for line in changed if line.startswith("-"))) if c in added]
    assert added == (retired_ends if move.retire else [])
    if not move.retire:  # each comment still heads the line it headed (a new version goes above the next heading)
        assert headings(after) == headings(before)


def test_turning_the_last_shadow_live_keeps_the_next_models_heading(
    prod: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The move of issue 28: the comment after fraud's last version heads resnet, and stays."""
    before = prod.read_text()

    assert run(prod, "--model", "fraud", "--weights", "v7=80,v8=10,v9=10") == 0

    after = prod.read_text()
    assert changed_lines(before, after) == [
        "-          weight: 90",
        "+          weight: 80",
        "-          mirrorPercent: 20",
        "+          weight: 10",
    ]
    assert "          weight: 10\n    # Image classification on a quarter of a GPU each" in after
    capsys.readouterr()


def test_a_result_that_lost_a_comment_is_refused() -> None:
    """The safety net under the edits: a comment lost or reordered is never written."""
    with pytest.raises(PromotionError, match="lose the comment '# one'"):
        _check_comments("a: 1  # one\nb: 2\n", "a: 1\nb: 2\n", Path("Pulumi.x.yaml"))
    with pytest.raises(PromotionError, match="move comments out of their order"):
        _check_comments("# one\na: 1\n# two\n", "# two\na: 1\n# one\n", Path("Pulumi.x.yaml"))
    _check_comments("a: 1  # one\n", "a: 2  # one\n", Path("Pulumi.x.yaml"))


def test_a_canary_without_the_models_adapter_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """promote validates its result with the stack's config models: giving traffic to a version that
    lacks an adapter the model serves is refused the way a stack file is, naming the version."""
    llama = RUNTIME_MINIMUMS["vllm"] | {
        "name": "llama",
        "versions": [
            {
                "name": "v2",
                "modelUri": "hf://meta-llama/Llama-3.1-8B-Instruct",
                "weight": 100,
                "adapters": [{"name": "support", "uri": "pvc://adapters/support"}],
            }
        ],
    }
    path = write_stack_file(
        tmp_path / "Pulumi.t.yaml",
        {"inference-platform:domain": "models.example.com", "inference-platform:models": [llama]},
    )
    # Added at weight 0, the new version takes no request yet: it may lack the adapter.
    assert run(path, "--model", "llama", "--add-version", "v3", "--model-uri", "hf://acme/llama-next") == 0
    capsys.readouterr()
    before = path.read_bytes()

    assert run(path, "--model", "llama", "--weights", "v2=90,v3=10") == 2

    err = capsys.readouterr().err
    assert err.startswith(INVALID_MOVE), err
    assert f"{path}:" in err
    assert "models[0] (llama).versions[1] (v3).name: v3 lacks adapter(s) 'support' (served by v2)" in err
    assert path.read_bytes() == before


# What a model's last version may end in: where ruamel hangs the lines after it differs with each
# (on the last scalar's entry, on a `|` string's own line, at the end of a list whose last value is
# empty), and the next model's heading must stay above the next model whatever it is.
LAST_VERSION_ENDS = {
    "adapters": "          adapters:\n            - name: support\n              uri: hf://acme/support\n",
    "adapters, flow": "          adapters: [{name: support, uri: hf://acme/support}]\n",
    "env with nested mappings": (
        "          env:\n            - name: TOKEN\n              valueFrom:\n"
        "                secretKeyRef: {name: s, key: k}\n"
    ),
    "nested mapping": "          resources:\n            limits:\n              cpu: 1\n",
    "a | string in a list": "          args:\n            - |\n              --x\n",
    "an empty last value": "          adapters:\n            - name: support\n              uri:\n",
    "its own comment inside": (
        "          adapters:\n            - name: support\n              uri: hf://acme/support\n"
        "            # more adapters soon\n"
    ),
}
LAST_VERSION_HEAD = """\
config:
  inference-platform:domain: models.example.com
  inference-platform:models:
    - name: chat
      runtime: vllm
      versions:
        - name: v1
          modelUri: hf://Qwen/Qwen3-8B
          weight: 90
        - name: v2
          modelUri: hf://Qwen/Qwen3-8B
          mirrorPercent: 10
"""
NEXT_MODEL = """\

    # The next model's heading.
    - name: iris
      runtime: mlserver
      versions:
        - {name: v1, modelUri: "pvc://m/iris", weight: 100}
"""
LAST_VERSION_MOVES = {
    "add a version": Promotion("chat", add_version="v3", model_uri="hf://Qwen/Qwen3-8B"),
    "the shadow goes live": Promotion("chat", weights={"v1": 90, "v2": 10}),
    "retire the shadow": Promotion("chat", retire=("v2",)),
}


@pytest.mark.parametrize("end", LAST_VERSION_ENDS.values(), ids=LAST_VERSION_ENDS.keys())
@pytest.mark.parametrize("last", [False, True], ids=["a model follows", "the file's last model"])
@pytest.mark.parametrize("move", LAST_VERSION_MOVES.values(), ids=LAST_VERSION_MOVES.keys())
def test_the_comments_after_the_last_version_stay_with_what_follows(end: str, last: bool, move: Promotion) -> None:
    before = LAST_VERSION_HEAD + end + ("    # The end of the models.\n" if last else NEXT_MODEL)

    after = edit(before, move, Path("Pulumi.x.yaml"))

    assert comments(after) == comments(before)
    if last:
        assert after.endswith("\n    # The end of the models.\n")
    else:
        assert "\n\n    # The next model's heading.\n    - name: iris\n" in after
    if move.add_version:  # the new version right after the last, its own lines before the heading
        assert "          weight: 0\n" + ("    # The end" if last else "\n    # The next") in after


def test_a_move_of_a_model_whose_rollout_is_running_warns_what_the_next_run_does(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """promote is a hand move, the documented way to stop a rollout where it is: it is made, and a
    warning says what the next `infra rollout` does with it and how to stop the rollout instead."""
    from tests.cli.test_rollout import START, stack
    from tests.cli.test_rollout import run as rollout

    path = stack(tmp_path)
    assert (
        run(path, "--model", "iris", "--weights", "v1=80,v2=20") == 0
    )  # not started: the rollout starts from these weights
    assert "warning" not in capsys.readouterr().err
    assert rollout(path, START) == 0  # started at the first step at or above 20: v2 at 25
    capsys.readouterr()
    where = "model 'iris' has a rollout of v2 in progress (canary, step 2)"
    stop = "remove `rollout:` from the model to stop it first (the weights stay as they are)"

    assert run(path, "--model", "iris", "--weights", "v1=70,v2=30") == 0
    assert capsys.readouterr().err == (
        f"promote: warning: {where}: v2 has weight 30 in the file, and the rollout wrote weight 25, so the next "
        f"`python -m infra rollout` pauses it; {stop}\n"
    )
    assert [v.get("weight") for v in versions(path, "iris")] == [70, 30, None]

    assert (
        run(path, "--model", "iris", "--weights", "v1=75,v2=25") == 0
    )  # back where the rollout left it: nothing to warn of
    assert capsys.readouterr().err == ""
    assert (
        run(path, "--model", "iris", "--mirror", "v3=20") == 0
    )  # a version the rollout does not move: its mirror kept
    assert capsys.readouterr().err == ""
    assert (
        run(path, "--model", "iris", "--weights", "v1=74,v3=1") == 0
    )  # the candidate's share as written; the others moved
    assert (
        capsys.readouterr().err
        == f"promote: warning: {where}: its next step writes its own weights over this move; {stop}\n"
    )


def test_the_diff_has_the_chart_objects_section_infra_diff_shows(
    dev: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """With the render's chart options, promote's renders expand the charts: retiring iris's shadow
    v3 drops its alerting rules from the Prometheus chart's ConfigMap, and promote prints the very
    report `infra diff` gives for renders of the file before and after (cli/diff.py's, one place)."""
    from tests.conftest import charts_dir, manifests_dir

    charts = ["--charts-dir", str(charts_dir()), "--manifests-dir", str(manifests_dir())]
    before = tmp_path / "before"
    assert main(["render", "--stack", "dev", "--config", str(dev), "--out", str(before), *charts]) == 0
    capsys.readouterr()

    assert run(dev, "--model", "iris", "--retire", "v3", *charts) == 0
    out = capsys.readouterr().out

    after = tmp_path / "after"
    assert main(["render", "--stack", "dev", "--config", str(dev), "--out", str(after), *charts]) == 0
    capsys.readouterr()
    assert out == markdown_report(diff_renders(before, after))
    assert "### Chart objects (expanded by Helm)" in out
    assert "<details><summary>Chart <code>prometheus</code>: 0 added, 0 removed, 1 changed</summary>" in out
    assert "-      summary: iris v3 (shadow) fails more often than v1" in out


def test_a_charts_directory_that_cannot_serve_a_chart_writes_nothing(
    dev: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """As for `infra render`: a directory given is where the charts must come from."""
    empty = tmp_path / "charts"
    empty.mkdir()
    before = dev.read_text()
    assert run(dev, "--model", "iris", "--retire", "v3", "--charts-dir", str(empty)) == 2
    err = capsys.readouterr().err
    assert err.startswith("promote: ")
    assert err.endswith("; nothing was written\n")
    assert str(empty) in err
    assert dev.read_text() == before
