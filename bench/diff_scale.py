"""How `infra diff` scales: its time on two renders of 100 and 400 models (two live versions each,
50/50, the platform's charts expanded) that differ by nothing, by one model's weights, or by one
model's new shadow.

Each size is rendered three times with `infra render` (charts from the pinned copies beside the
checkout when they are there, else none): the stack, the same with model-7's weights at 60/40, and
the same with a shadow version added to model-7 (three new objects, its routes, and its rules in
Prometheus' values and rule file). The stack is then diffed against a copy of itself ("nothing"),
against the weights ("one weight") and against the shadow ("one shadow"). "command s" is
`python -m infra diff OLD NEW` in a fresh process, as a person or a CI job runs it (the interpreter
and the CLI's imports included: see "start-up s", `infra diff --help`); "in-process s" is
`diff_renders` and `markdown_report` in a fresh process after its imports: reading, comparing and
writing the report. Each is given in wall seconds and in CPU seconds (user and system), which a
machine shared with other work inflates less.

`--before` measures another tree's diff beside this one's, on the same renders, and checks both
wrote the very same report (e.g. `git archive 18afbd4 src | tar -x -C /tmp/before`):

    python -m bench.diff_scale                           # this tree (from the repository root)
    python -m bench.diff_scale --before /tmp/before/src  # the other tree's figures beside it
    python -m bench.diff_scale --profile                 # and cProfile's top entries, one weight, largest size
    python -m bench.diff_scale --renders /tmp/renders    # keep the renders there (reused when present)
"""

from __future__ import annotations

import argparse
import cProfile
import json
import os
import pstats
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import yaml

from bench.render_scale import model_specs
from inference_platform.cli.diff import diff_renders, markdown_report  # from whichever tree PYTHONPATH names first

ROOT = Path(__file__).resolve().parent.parent
SIZES = (100, 400)
CHARTS = ROOT.parent / "shared" / "charts"
MANIFESTS = CHARTS.parent / "crds"
CHANGED_MODEL = 7
CHANGES = ("nothing", "one weight", "one shadow")


def stack_config(models: int, change: str) -> dict[str, Any]:
    """The stack file's config: `models` models of two live versions, the default platform."""
    specs = model_specs(models)
    versions = specs[CHANGED_MODEL]["versions"]
    if change == "one weight":
        versions[0]["weight"], versions[1]["weight"] = 60, 40
    elif change == "one shadow":
        versions.append({"name": "v3", "modelUri": f"pvc://models/m{CHANGED_MODEL}/v3", "mirrorPercent": 20})
    return {
        "inference-platform:domain": "models.example.com",
        "inference-platform:namespace": "service",
        "inference-platform:models": specs,
    }


def render(models: int, change: str, renders: Path) -> tuple[Path, float | None]:
    """The render directory of a size and change, rendered unless already there, and how long
    `infra render` took (None when reused)."""
    directory = renders / f"{models}-{change.replace(' ', '-')}"
    out = directory / "out"
    if out.is_dir():  # written whole or not at all
        return out, None
    directory.mkdir(parents=True, exist_ok=True)
    stack_file = directory / "Pulumi.bench.yaml"
    stack_file.write_text(yaml.safe_dump({"config": stack_config(models, change)}, sort_keys=False))
    arguments = ["render", "--stack", "bench", "--config", str(stack_file), "--out", str(out)]
    if CHARTS.is_dir():
        arguments += ["--charts-dir", str(CHARTS), "--manifests-dir", str(MANIFESTS)]
    else:
        arguments += ["--no-charts"]
    started = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-m", "infra", *arguments],
        cwd=ROOT,
        env=os.environ | {"PYTHONPATH": f"{ROOT / 'src'}{os.pathsep}{ROOT}"},
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        raise SystemExit(f"render of {models} models ({change}) failed:\n{done.stderr}")
    return out, time.perf_counter() - started


def run_child(old: Path, new: Path, report: Path, profile: Path | None) -> dict[str, Any]:
    """`diff_renders` and `markdown_report` in this process, timed; the report written to `report`."""
    profiler = cProfile.Profile() if profile else None
    start, cpu = time.perf_counter(), time.process_time()
    if profiler:
        profiler.enable()
    text = markdown_report(diff_renders(old, new))
    if profiler:
        profiler.disable()
    seconds, cpu_seconds = time.perf_counter() - start, time.process_time() - cpu
    if profiler and profile:
        profiler.dump_stats(profile)
    report.write_text(text)
    return {"seconds": seconds, "cpu_seconds": cpu_seconds}


def children_cpu() -> float:
    """User and system seconds of every child process waited for so far."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def measure(tree: Path, old: Path, new: Path, report: Path, profile: Path | None) -> dict[str, Any]:
    """The command as a person runs it, in a fresh process (its report kept), then the diff alone
    in another fresh process after its imports (profiled where asked)."""
    env = os.environ | {"PYTHONPATH": f"{tree}{os.pathsep}{ROOT}"}
    started, cpu = time.perf_counter(), children_cpu()
    command = subprocess.run(
        [sys.executable, "-m", "infra", "diff", str(old), str(new)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    command_seconds, command_cpu = time.perf_counter() - started, children_cpu() - cpu
    if command.returncode != 0:
        raise SystemExit(f"diff from {tree} failed ({command.returncode}):\n{command.stderr}")
    report.write_text(command.stdout)
    child = [str(old), str(new), str(report.with_suffix(".child.md")), *([str(profile)] if profile else [])]
    timed = subprocess.run(
        [sys.executable, "-m", "bench.diff_scale", "--child", *child],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    assert report.with_suffix(".child.md").read_text() == command.stdout, "the two runs wrote different reports"
    child_figures: dict[str, float] = json.loads(timed.stdout.splitlines()[-1])
    return {"command_seconds": command_seconds, "command_cpu": command_cpu, **child_figures}


def start_up(tree: Path) -> tuple[float, float]:
    """`python -m infra diff --help`: the interpreter and the CLI's imports, nothing diffed (wall
    and CPU seconds)."""
    started, cpu = time.perf_counter(), children_cpu()
    subprocess.run(
        [sys.executable, "-m", "infra", "diff", "--help"],
        cwd=ROOT,
        env=os.environ | {"PYTHONPATH": f"{tree}{os.pathsep}{ROOT}"},
        capture_output=True,
        check=True,
    )
    return time.perf_counter() - started, children_cpu() - cpu


def size_of(directory: Path) -> str:
    files = [p for p in directory.rglob("*.yaml") if p.is_file()]
    documents = sum(p.read_text(encoding="utf-8").count("\n---\n") + 1 for p in files)
    return f"{sum(p.stat().st_size for p in files) / 2**20:.1f} MiB in {len(files)} files, {documents} documents"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--before", type=Path, help="another tree's src directory, measured beside this one's")
    parser.add_argument("--sizes", type=int, nargs="+", default=list(SIZES), help="models per render")
    parser.add_argument("--repeat", type=int, default=1, help="runs per measurement; the fastest counts")
    parser.add_argument("--renders", type=Path, help="where the renders are kept (reused when there)")
    parser.add_argument(
        "--profile",
        action="store_true",
        help="print cProfile's top entries for the one-weight diff at the largest size (timed with the profiler on)",
    )
    parser.add_argument("--child", nargs="+", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        old, new, report, *profile = args.child
        print(json.dumps(run_child(Path(old), Path(new), Path(report), Path(profile[0]) if profile else None)))
        return

    trees = {"after": ROOT / "src", **({"before": args.before.resolve()} if args.before else {})}
    with tempfile.TemporaryDirectory(prefix="bench-diff-") as scratch:
        directory = Path(scratch)
        renders = args.renders.resolve() if args.renders else directory / "renders"
        print(f"charts: {'expanded from ' + str(CHARTS) if CHARTS.is_dir() else 'not expanded (no pinned copies)'}")
        for name, tree in sorted(trees.items(), reverse=True):
            wall, cpu = min(start_up(tree) for _ in range(args.repeat))
            print(f"start-up ({name}): {wall:.2f} s, {cpu:.2f} s CPU")
        print(
            f"{'models':>6} {'change':<10} {'tree':>6} {'command s':>9} {'CPU s':>6} {'in-process s':>12} {'CPU s':>6}",
            flush=True,
        )
        for models in sorted(args.sizes):
            base, seconds = render(models, "nothing", renders)
            took = f"in {seconds:.1f} s" if seconds is not None else "(kept from before)"
            print(f"{models:>6} rendered {took}: {size_of(base)}", flush=True)
            copy = directory / f"{models}-copy"
            shutil.copytree(base, copy)
            for change in CHANGES:
                new = copy if change == "nothing" else render(models, change, renders)[0]
                reports = {}
                for name, tree in sorted(trees.items(), reverse=True):  # before, then after
                    reports[name] = directory / f"{name}-{models}-{change.replace(' ', '-')}.md"
                    profiled = args.profile and models == max(args.sizes) and change == "one weight"
                    profile = directory / f"{name}.prof" if profiled else None
                    runs = [measure(tree, base, new, reports[name], profile) for _ in range(args.repeat)]
                    best = {key: min(r[key] for r in runs) for key in runs[0]}
                    print(
                        f"{models:>6} {change:<10} {name:>6} {best['command_seconds']:>9.2f} "
                        f"{best['command_cpu']:>6.2f} {best['seconds']:>12.2f} {best['cpu_seconds']:>6.2f}",
                        flush=True,
                    )
                summary = reports["after"].read_text().splitlines()[2]
                if len(reports) > 1:
                    same = reports["before"].read_bytes() == reports["after"].read_bytes()
                    summary += f" The two reports are {'the same' if same else 'DIFFERENT'}."
                print(f"{'':>6} {'':<10} {summary}", flush=True)
            shutil.rmtree(copy)
        if args.profile:
            for name in sorted(trees, reverse=True):
                print(f"\n--- cProfile, {name}, {max(args.sizes)} models, one weight: top entries by cumulative time")
                stats = pstats.Stats(str(directory / f"{name}.prof"), stream=sys.stdout)
                stats.sort_stats("cumulative").print_stats(14)


if __name__ == "__main__":
    main()
