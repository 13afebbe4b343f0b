"""Exit codes: one table for every command, and a reader that stops reading (`| head`) ends the
command quietly with 141, whichever command and whichever way it prints (print, rich, write)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from inference_platform.cli.exit_codes import ExitCode
from inference_platform.cli.main import main
from tests.conftest import base_config, write_stack_file

ROOT = Path(__file__).resolve().parents[2]
INFRA = [sys.executable, "-m", "infra"]


def closed_before_writing(*args: str) -> tuple[int, str]:
    """Run the command with a stdout whose reader is already gone: its first write meets a closed pipe."""
    read, write = os.pipe()
    os.close(read)
    try:
        process = subprocess.Popen([*INFRA, *args], cwd=ROOT, stdout=write, stderr=subprocess.PIPE, text=True)
    finally:
        os.close(write)
    _, stderr = process.communicate(timeout=120)
    return process.returncode, stderr


@pytest.fixture(scope="module")
def stack_path(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_stack_file(tmp_path_factory.mktemp("stack") / "Pulumi.test.yaml", base_config())


def test_schema_piped_into_head_ends_quietly() -> None:
    """The schema is larger than a pipe holds: it is still being written when the reader leaves."""
    process = subprocess.Popen([*INFRA, "schema"], cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert process.stdout is not None
    assert process.stderr is not None
    assert process.stdout.readline() == "{\n"
    process.stdout.close()
    stderr = process.stderr.read()
    assert (process.wait(timeout=60), stderr) == (ExitCode.CLOSED_PIPE, "")


@pytest.mark.parametrize(
    "args",
    [
        pytest.param(["schema"], id="schema"),
        pytest.param(["stacks", "--all"], id="stacks"),
        pytest.param(["capacity", "--format", "json"], id="capacity-json"),
        pytest.param(["capacity"], id="capacity-table"),  # a rich Console, with its own broken-pipe handling
        # On a stack of churn alone: nothing to compare, so no query (its Prometheus is nowhere), an empty report.
        pytest.param(["analyze", "--prometheus", "http://127.0.0.1:9"], id="analyze-table"),
        pytest.param(["analyze", "--prometheus", "http://127.0.0.1:9", "--format", "markdown"], id="analyze-markdown"),
    ],
)
def test_a_closed_pipe_ends_every_command_quietly(stack_path: Path, tmp_path: Path, args: list[str]) -> None:
    if args[0] == "analyze":
        config = base_config()
        config["inference-platform:models"] = [m for m in config["inference-platform:models"] if m["name"] == "churn"]
        stack_path = write_stack_file(tmp_path / "Pulumi.test.yaml", config)
    if args[0] not in ("schema", "stacks"):  # stacks reads the repository's stack files
        args = [*args, "--stack", "test", "--config", str(stack_path)]
    assert closed_before_writing(*args) == (ExitCode.CLOSED_PIPE, "")


def test_render_and_diff_into_a_closed_pipe_end_quietly(stack_path: Path, tmp_path: Path) -> None:
    """render writes its files before its summary: they are all there, only the summary is lost."""
    out = tmp_path / "render"
    render = ["render", "--stack", "test", "--config", str(stack_path), "--out", str(out), "--no-charts"]
    assert closed_before_writing(*render) == (ExitCode.CLOSED_PIPE, "")
    assert (out / "outputs.yaml").is_file()
    assert closed_before_writing("diff", str(out), str(out)) == (ExitCode.CLOSED_PIPE, "")


def documented_exit_codes() -> dict[int, str]:
    """The `## Exit codes` table of docs/workflow.md: code -> name."""
    text = (ROOT / "docs" / "workflow.md").read_text(encoding="utf-8")
    section = text.split("\n## Exit codes\n", 1)[1].split("\n## ", 1)[0]
    rows = [line.split("|")[1:3] for line in section.splitlines() if line.startswith("| ") and "`" in line]
    return {int(code): name.strip().strip("`") for code, name in rows}


def test_the_documented_table_is_the_enum() -> None:
    assert documented_exit_codes() == {int(code): code.name for code in ExitCode}


def test_analyze_help_states_its_codes_from_the_enum(capsys: pytest.CaptureFixture[str]) -> None:
    """`analyze --help` names a failing candidate's code, not the one of a program that failed."""
    with pytest.raises(SystemExit) as exited:
        main(["analyze", "--help"])
    assert exited.value.code == ExitCode.OK
    helped = " ".join(capsys.readouterr().out.split())
    assert f"{ExitCode.CANDIDATE_FAILED:d}: one fails" in helped
    assert f"{ExitCode.PROGRAM_ERROR:d}: analyze itself failed" in helped
