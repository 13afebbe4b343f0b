"""The command line itself: `--help` answers without importing what the commands run, every option
says what it does, the completion scripts come from the parser, and no list option swallows the
paths after it."""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from inference_platform.cli.completion import STACKS_FUNCTION
from inference_platform.cli.main import COMMAND, main, parser

ROOT = Path(__file__).resolve().parents[2]
# What the commands run, and what `--help` must not import: the Pulumi SDK, the config models, the
# tables, the HTTP client, the YAML readers, the render diff.
HEAVY = ("pulumi", "pulumi_kubernetes", "pydantic", "rich", "requests", "yaml", "ruamel", "deepdiff", "grpc")
SHOW_MODULES = """
import runpy, sys
sys.argv = ["infra", *sys.argv[1:]]
try:
    runpy.run_module("infra", run_name="__main__")
except SystemExit:
    pass
print(" ".join(sorted(sys.modules)), file=sys.stderr)
"""


def commands() -> dict[str, argparse.ArgumentParser]:
    (subparsers,) = (a for a in parser()._actions if isinstance(a, argparse._SubParsersAction))
    return dict(subparsers.choices)


def actions() -> Iterator[tuple[str, argparse.Action]]:
    """Every argument of the command and of each subcommand but argparse's own --help."""
    for name, command in [("", parser()), *commands().items()]:
        for action in command._actions:
            if not isinstance(action, argparse._HelpAction | argparse._SubParsersAction):
                yield f"{name} {action.dest}".strip(), action


@pytest.mark.parametrize("command", [[], *([name] for name in commands())], ids=lambda c: " ".join(c) or "infra")
def test_help_imports_nothing_the_commands_run(command: list[str]) -> None:
    """`python -m infra [command] --help` (the entry point pulumi runs too) loads none of the heavy modules."""
    done = subprocess.run(
        [sys.executable, "-c", SHOW_MODULES, *command, "--help"], cwd=ROOT, capture_output=True, text=True, check=False
    )
    assert "usage: python -m infra" in done.stdout
    loaded = {module.split(".")[0] for module in done.stderr.split()}
    assert "inference_platform" in loaded
    assert loaded.isdisjoint(HEAVY), sorted(loaded.intersection(HEAVY))


def test_every_command_and_option_says_what_it_does() -> None:
    undocumented = [name for name, action in actions() if not (action.help and action.help.strip())]
    assert not undocumented
    (subparsers,) = (a for a in parser()._actions if isinstance(a, argparse._SubParsersAction))
    listed = {choice.dest: choice.help for choice in subparsers._choices_actions}
    assert listed.keys() == commands().keys()
    assert all(help_ and help_.strip() for help_ in listed.values())


def test_a_list_option_leaves_the_paths_after_it(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """`--environments` is one word (a comma list): a path after it is a changed path, not an environment."""
    (tmp_path / "Pulumi.yaml").write_text("name: inference-platform\nruntime: python\n")
    for stack in ("dev", "prod"):
        (tmp_path / f"Pulumi.{stack}.yaml").write_text("config: {}\n")
    code = main(["stacks", "--root", str(tmp_path), "--environments", "dev,prod", "Pulumi.prod.yaml"])
    assert (code, json.loads(capsys.readouterr().out)["stacks"]) == (0, ["prod"])


@pytest.mark.parametrize("given", ["dev,,prod", ",", ""])
def test_an_empty_environment_name_is_a_usage_error(given: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_:
        main(["stacks", "--all", "--environments", given])
    assert exit_.value.code == 2
    assert "not a comma list of environments" in capsys.readouterr().err


@pytest.mark.parametrize("shell", ["bash", "zsh", "fish"])
def test_completion_scripts_name_every_command(shell: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["completion", shell]) == 0
    script = capsys.readouterr().out
    assert COMMAND in script
    assert all(name in script for name in commands())


def test_bash_completes_commands_and_options(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The bash script, sourced into a real bash, completes what the parser accepts."""
    bash = shutil.which("bash")
    if bash is None:
        pytest.skip("bash is not installed: the completion script is run by bash itself")
    main(["completion", "bash"])
    (tmp_path / "complete.bash").write_text(capsys.readouterr().out)
    function = "_shtab_inference_platform"
    script = f"""source {tmp_path / "complete.bash"}
complete_words() {{ COMP_WORDS=("$@"); COMP_CWORD=$(($# - 1)); {function}; echo "${{COMPREPLY[*]}}"; }}
complete_words {COMMAND} ren
complete_words {COMMAND} analyze --for
complete_words {COMMAND} analyze --format ma
"""
    done = subprocess.run([bash, "-c", script], capture_output=True, text=True, check=True)
    assert done.stdout.splitlines() == ["render", "--format", "markdown"]


def test_bash_completes_stack_names_from_the_stack_files_here(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """--stack completes the stacks whose files are in the working directory, for every command
    that takes one; Pulumi.yaml (the project's) and a directory of a stack file's name are none."""
    bash = shutil.which("bash")
    if bash is None:
        pytest.skip("bash is not installed: the completion script is run by bash itself")
    main(["completion", "bash"])
    (tmp_path / "complete.bash").write_text(capsys.readouterr().out)
    project = tmp_path / "project"
    project.mkdir()
    for name in ("Pulumi.yaml", "Pulumi.dev.yaml", "Pulumi.prod.yaml", "Pulumi.prod-search.yaml", "notes.yaml"):
        (project / name).write_text("config: {}\n")
    (project / "Pulumi.old.yaml").mkdir()
    function = "_shtab_inference_platform"
    script = f"""source {tmp_path / "complete.bash"}
complete_words() {{ COMP_WORDS=("$@"); COMP_CWORD=$(($# - 1)); {function}; echo "${{COMPREPLY[*]}}"; }}
complete_words {COMMAND} render --stack ""
complete_words {COMMAND} capacity --stack pro
complete_words {COMMAND} analyze --stack prod-
complete_words {COMMAND} promote --stack x
"""
    done = subprocess.run([bash, "-c", script], capture_output=True, text=True, check=True, cwd=project)
    # In the order the locale sorts the files (the shell's glob): compared as sets.
    found = [sorted(line.split()) for line in done.stdout.splitlines()]
    assert found == [["dev", "prod", "prod-search"], ["prod", "prod-search"], ["prod-search"], []]


@pytest.mark.parametrize("shell", ["zsh", "fish"])
def test_zsh_and_fish_complete_stack_names_with_the_same_function(
    shell: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """No zsh or fish here to run: each script defines the function and gives it to every --stack."""
    assert main(["completion", shell]) == 0
    script = capsys.readouterr().out
    definition = {"zsh": f"{STACKS_FUNCTION}() {{", "fish": f"function {STACKS_FUNCTION}"}[shell]
    assert script.count(definition) == 1
    # Each command's --stack: zsh's _arguments spec ends in the function; fish's `complete -a` runs it.
    use = {"zsh": f':stack:{STACKS_FUNCTION}"', "fish": f'-l stack -xka "({STACKS_FUNCTION})"'}[shell]
    assert len([line for line in script.splitlines() if line.endswith(use) or use + " " in line]) == len(
        ["render", "promote", "analyze", "rollout", "capacity", "rehearse"]
    )
