"""How fast the command line answers: `python -m infra --help` and each subcommand's `--help`, and
`capacity` and `diff` on the dev stack, each in a fresh process as a user runs it, beside
`python -c pass` (the interpreter's own start). Each figure is the fastest of several runs: the
least the machine's other work added.

    python -m bench.cli_latency              # the table (from the repository root)
    python -m bench.cli_latency --repeat 10  # fastest of ten runs each
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from inference_platform.cli.main import parser

ROOT = Path(__file__).resolve().parent.parent


def fastest(command: list[str], repeat: int) -> float:
    """The fastest of `repeat` runs of `command` from the repository root, in seconds; it must succeed."""
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        subprocess.run(command, cwd=ROOT, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        times.append(time.perf_counter() - start)
    return min(times)


def subcommands() -> list[str]:
    (action,) = (a for a in parser()._actions if isinstance(a, argparse._SubParsersAction))
    return list(action.choices)


def commands(renders: Path) -> list[tuple[str, list[str]]]:
    """What is timed: the interpreter alone, every --help, then capacity and diff on the dev stack
    (diff of its render against itself: the reading and comparing, no change to report)."""
    infra = [sys.executable, "-m", "infra"]
    timed = [("python -c pass", [sys.executable, "-c", "pass"]), ("--help", [*infra, "--help"])]
    timed += [(f"{name} --help", [*infra, name, "--help"]) for name in subcommands()]
    timed.append(("capacity --stack dev", [*infra, "capacity", "--stack", "dev"]))
    timed.append(("diff (dev against itself)", [*infra, "diff", str(renders), str(renders)]))
    return timed


def main() -> None:
    arguments = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    arguments.add_argument("--repeat", type=int, default=5, help="runs per command; the fastest is reported")
    repeat = arguments.parse_args().repeat
    with tempfile.TemporaryDirectory(prefix="bench-cli-") as scratch:
        renders = Path(scratch) / "dev"
        render = [sys.executable, "-m", "infra", "render", "--stack", "dev", "--no-charts", "--out", str(renders)]
        subprocess.run(render, cwd=ROOT, check=True, stdout=subprocess.DEVNULL)
        print(f"| command | seconds (fastest of {repeat}) |")
        print("|---|---|")
        for name, command in commands(renders):
            print(f"| `{name}` | {fastest(command, repeat):.3f} |", flush=True)


if __name__ == "__main__":
    main()
