"""Render the stacks a refactor must leave byte-identical, for `diff -r` before and after.

    .venv/bin/python -m tests.render_stacks OUT [--no-charts] [--stack NAME ...]

writes OUT/<stack>/ (the render directory `infra render` writes) and OUT/<stack>/urns.txt (every
URN the program registers, sorted) for dev, prod, the all-features stack, the same with KEDA, and the model-cache stack.
Charts are expanded from the pinned copies beside the checkout when they are there; --no-charts
leaves them out (faster; the program's objects and URNs only).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from inference_platform.cli.main import main as infra_main
from inference_platform.cli.render import run_program
from inference_platform.cli.stack_file import read_stack_file
from tests.conftest import full_config, keda_config, model_cache_config, secured, stack_file, write_stack_file

GENERATED = {"all-features": full_config, "keda": keda_config, "model-cache": model_cache_config}
STACKS = ["dev", "prod", *GENERATED]
CHARTS = Path(__file__).resolve().parents[1].parent / "shared" / "charts"
MANIFESTS = CHARTS.parent / "crds"


def stack_path(stack: str, out: Path) -> Path:
    if stack in GENERATED:
        return write_stack_file(out / f"Pulumi.{stack}.yaml", secured(GENERATED[stack]()))
    return stack_file(stack)


def render(stack: str, out: Path, charts: bool) -> None:
    directory = out / stack
    config = stack_path(stack, out)
    arguments = ["render", "--stack", stack, "--config", str(config), "--out", str(directory)]
    if charts and CHARTS.is_dir():
        arguments += ["--charts-dir", str(CHARTS), "--manifests-dir", str(MANIFESTS)]
    else:
        arguments += ["--no-charts"]
    if infra_main(arguments) != 0:
        raise SystemExit(f"{stack}: the render failed")
    urns = sorted(r.urn for r in run_program(stack, read_stack_file(config)).registrations)
    (directory / "urns.txt").write_text("".join(f"{urn}\n" for urn in urns), encoding="utf-8")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("out", type=Path)
    parser.add_argument("--no-charts", action="store_true")
    parser.add_argument("--stack", action="append", choices=STACKS)
    args = parser.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    for stack in args.stack or STACKS:
        render(stack, args.out, not args.no_charts)
    return 0


if __name__ == "__main__":
    sys.exit(main())
