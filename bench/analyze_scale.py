"""How `infra analyze` scales: the Prometheus queries it sends and its wall time for 10, 100 and
400 models, each with a primary, a canary and a shadow whose answers are compared (payloads).

The real Prometheus (the `prometheus` and `promtool` binaries on PATH) is backfilled once with the
largest fleet (tests/platform/fleet_series.py), then `analyze --format json` runs against it for
the first 10, 100 and 400 models. Queries are counted by Prometheus itself:
`prometheus_http_requests_total{handler="/api/v1/query"}`, read from /metrics before and after
each run. "command s" is `python -m infra analyze --format json` in a fresh process, as a person
or a CI job runs it (the interpreter and ~1.6 s of imports included); "in-process s" is the same
command run again in-process after the imports: reading the stack file, the queries, the verdicts
and the output.

`--before` measures another tree's `analyze` beside this one's, on the same data, and checks both
wrote the very same report (e.g. `git archive ee6892a src | tar -x -C /tmp/before`):

    python -m bench.analyze_scale                          # this tree (from the repository root)
    python -m bench.analyze_scale --before /tmp/before/src # the other tree's figures beside it
    python -m bench.analyze_scale --profile                # and cProfile's top entries at the largest size
"""

from __future__ import annotations

import argparse
import contextlib
import cProfile
import io
import json
import os
import pstats
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from inference_platform.cli.main import main as infra  # from whichever tree PYTHONPATH names first
from tests.platform import fleet_series
from tests.platform.prometheus_harness import RunningPrometheus, prometheus

ROOT = Path(__file__).resolve().parent.parent
SIZES = (10, 100, 400)
MINUTES = 12  # the models' 10-minute window, ending a minute before the last sample


def run_child(stack_file: Path, url: str, at: int, report: Path, profile: Path | None) -> dict[str, Any]:
    """`analyze` in this process, timed; its report written to `report`."""
    argv = ["analyze", "--stack", "bench", "--config", str(stack_file), "--prometheus", url, "--at", str(at)]
    output = io.StringIO()
    profiler = cProfile.Profile() if profile else None
    start = time.perf_counter()
    with contextlib.redirect_stdout(output):
        if profiler:
            profiler.enable()
        code = infra([*argv, "--format", "json"])
        if profiler:
            profiler.disable()
    seconds = time.perf_counter() - start
    if profiler and profile:
        profiler.dump_stats(profile)
    report.write_text(output.getvalue())
    return {"seconds": seconds, "exit": code}


def measure(
    tree: Path, running: RunningPrometheus, *, stack_file: Path, at: int, report: Path, profile: Path | None
) -> dict[str, Any]:
    """The command as a person runs it, in a fresh process (its queries counted, its report kept),
    then once more in-process, timed without the imports (and profiled where asked)."""
    analyze = ["analyze", "--stack", "bench", "--config", str(stack_file), "--prometheus", running.url]
    env = os.environ | {"PYTHONPATH": f"{tree}{os.pathsep}{ROOT}"}
    before = running.instant_queries_answered()
    started = time.perf_counter()
    command = subprocess.run(
        [sys.executable, "-m", "infra", *analyze, "--at", str(at), "--format", "json"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    command_seconds = time.perf_counter() - started
    queries = running.instant_queries_answered() - before
    # Pass, some short of data, some fail: 5 (ExitCode.CANDIDATE_FAILED), or 1 in a tree before
    # cli/exit_codes.py, where 1 meant both a failing candidate and a crash (json.loads below tells).
    if command.returncode not in {0, 1, 3, 5}:
        raise SystemExit(f"analyze from {tree} failed ({command.returncode}):\n{command.stderr}")
    report.write_text(command.stdout)

    before = running.instant_queries_answered()
    child = [str(stack_file), running.url, str(at), str(report.with_suffix(".child.json"))]
    timed = subprocess.run(
        [sys.executable, "-m", "bench.analyze_scale", "--child", *child, *([str(profile)] if profile else [])],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    assert running.instant_queries_answered() - before == queries, "the two runs sent different queries"
    verdicts = [c["verdict"] for m in json.loads(command.stdout)["models"] for c in m["candidates"]]
    return {
        "queries": queries,
        "exit": command.returncode,
        "command_seconds": command_seconds,
        "seconds": json.loads(timed.stdout.splitlines()[-1])["seconds"],
        "verdicts": {v: verdicts.count(v) for v in sorted(set(verdicts))},
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--before", type=Path, help="another tree's src directory, measured beside this one's")
    parser.add_argument("--sizes", type=int, nargs="+", default=list(SIZES), help="models per run")
    parser.add_argument("--repeat", type=int, default=1, help="runs per measurement; the fastest counts")
    parser.add_argument(
        "--profile",
        action="store_true",
        help="print cProfile's top entries for the in-process run at the largest size (timed with the profiler on)",
    )
    parser.add_argument("--child", nargs="+", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        stack_file, url, at, report, *profile = args.child
        print(
            json.dumps(run_child(Path(stack_file), url, int(at), Path(report), Path(profile[0]) if profile else None))
        )
        return

    trees = {"after": ROOT / "src", **({"before": args.before.resolve()} if args.before else {})}
    with tempfile.TemporaryDirectory(prefix="bench-analyze-") as scratch:
        directory = Path(scratch)
        start = int(time.time()) // 3600 * 3600 - 3 * 3600
        at = start + (MINUTES - 1) * 60
        began = time.perf_counter()
        config = fleet_series.backfill(directory, max(args.sizes), start, MINUTES)
        print(f"backfilled {max(args.sizes)} models x 3 versions in {time.perf_counter() - began:.1f} s", flush=True)
        with prometheus(directory, config) as running:
            running.query("count(istio_requests_total) + count(inference_payload_pairs_total)")  # blocks read once
            print(
                f"{'models':>6} {'tree':>6} {'queries':>7} {'command s':>9} {'in-process s':>12} {'exit':>4}  verdicts",
                flush=True,
            )
            for models in sorted(args.sizes):
                stack_file = fleet_series.write_stack_file(directory / f"Pulumi.{models}.yaml", models)
                reports = {}
                for name, tree in sorted(trees.items(), reverse=len(trees) > 1):  # before, then after
                    reports[name] = directory / f"{name}-{models}.json"
                    profile = directory / f"{name}.prof" if args.profile and models == max(args.sizes) else None
                    runs = [
                        measure(tree, running, stack_file=stack_file, at=at, report=reports[name], profile=profile)
                        for _ in range(args.repeat)
                    ]
                    best = min(runs, key=lambda r: r["command_seconds"])
                    verdicts = ", ".join(f"{count} {verdict}" for verdict, count in best["verdicts"].items())
                    print(
                        f"{models:>6} {name:>6} {best['queries']:>7} {best['command_seconds']:>9.2f} "
                        f"{min(r['seconds'] for r in runs):>12.2f} {best['exit']:>4}  {verdicts}",
                        flush=True,
                    )
                if len(reports) > 1:
                    same = reports["before"].read_bytes() == reports["after"].read_bytes()
                    print(f"{'':>6} {'':>6} the two reports are {'the same' if same else 'DIFFERENT'}", flush=True)
            if args.profile:
                for name in sorted(trees, reverse=True):
                    print(f"\n--- cProfile, {name}, {max(args.sizes)} models: top entries by cumulative time")
                    stats = pstats.Stats(str(directory / f"{name}.prof"), stream=sys.stdout)
                    stats.sort_stats("cumulative").print_stats(18)


if __name__ == "__main__":
    main()
