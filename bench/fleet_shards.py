"""A fleet past one stack: 10,000 models in 25 shards on one platform stack (stack/fleet.py).

The environment is generated into a scratch directory: a platform stack (`shards: [...]`) and its
shards (`platformStack: ...`), each model with three versions (a 90/10 canary split and a 5%
shadow) on runtimes that need no GPU (MLServer, Triton on CPU, TF Serving, TorchServe, a custom
server), some autoscaled on CPU, some calling a neighbour, some with their shadows' answers
compared. The reference is a 400-model single stack from the same generator (the very models of
the first shard when shards hold 400) on the same platform settings: what one stack renders today.

Every render is `infra render --no-charts` (the charts are the platform's, the same at any fleet
size) in a fresh process. "command s" is that process's wall time as a person or CI job waits for
it (interpreter and imports included); "work s" is the command itself after the imports; "peak
MiB" is the process's peak resident set (getrusage), and for the whole environment also the
largest of its shard processes'. Measured, in this order:

- the 400-model single stack (the reference), then the platform stack alone;
- each shard alone, on the platform stack's render (`--platform-render`), one after another;
- the whole environment: `render --stack <platform> --shards`, the platform then its shards in
  as many parallel processes as there are cores, timed as one command; its render directories
  are checked byte-identical to the shard-by-shard ones;
- a one-model weight change (v1 90 -> 80, v2 10 -> 20, made by promote's own editor): the stack
  files that changed (by content), each changed shard rendered alone on the platform stack's
  render, and `infra diff` of its render before and after, timed from the files to the report.
  Untimed, the platform stack is rendered again from the changed files and checked identical to
  its render before, so no other stack has anything to re-render; and the shard is rendered as
  the pull request's render-diff job renders it, with no platform render beside it (its
  platform stack's outputs rendered first, in the same process).

Targets (issue 31), each printed with its figure: the one-model change in at most 1.2x the
reference's time; each shard's peak memory at most the reference's; the whole environment in at
most (models / 400) x the reference's time / cores x 1.3. Run from the repository root:

    python -m bench.fleet_shards                          # 10,000 models, 25 shards (a long while on 2 cores)
    python -m bench.fleet_shards --models 1000 --shards 5 # a quick run
    python -m bench.fleet_shards --profile /tmp/prof      # cProfile of each render (slower; figures inflated)
"""

from __future__ import annotations

import argparse
import contextlib
import cProfile
import hashlib
import io
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from inference_platform.cli.diff import diff_renders
from inference_platform.cli.environment import environment_of, holder
from inference_platform.cli.main import main as infra
from inference_platform.cli.promote import Promotion, edit
from inference_platform.cli.render_files import MANIFESTS
from inference_platform.stack import fleet

ROOT = Path(__file__).resolve().parent.parent
PREFIX = "inference-platform:"
PROJECT_ORG = "acme/inference-platform"
PLATFORM = "fleet"
REFERENCE = "single"
REFERENCE_MODELS = 400
SHARD_OVERRUN = 1.2  # the one-model change against the reference's render
PARALLEL_OVERRUN = 1.3  # the whole environment against a perfect split of the reference's time

# Runtimes that need no GPU, dealt in turn; TF Serving and Triton number versions (v1, v2, v3 do).
RUNTIMES: dict[str, dict[str, Any]] = {
    "mlserver": {"runtime": "mlserver", "format": "sklearn"},
    "triton": {
        "runtime": "triton",
        "format": "onnx",
        "maxBatchSize": 8,
        "inputs": [{"name": "input", "dataType": "FP32", "dims": [4]}],
        "outputs": [{"name": "output", "dataType": "FP32", "dims": [2]}],
    },
    "tfserving": {"runtime": "tfserving"},
    "torchserve": {"runtime": "torchserve"},
    "custom": {
        "runtime": "custom",
        "image": "registry.example.com/scorer:1.4.2",
        "port": 8080,
        "readiness": {"path": "/ready"},
        "nonRootImage": True,
    },
}
# A `secure:` value as `pulumi config set --secret` writes it; offline it is a placeholder.
PLATFORM_SETTINGS: dict[str, Any] = {"grafana": {"enabled": True, "adminPassword": {"secure": "v1:bench:grafana"}}}
"""The platform's defaults (Istio, Prometheus and its adapter), and Grafana: a dashboard per compared model."""
CHANGE = {"v1": 80, "v2": 20}


# --- the environment --------------------------------------------------------------------------


def model(index: int, position: int) -> dict[str, Any]:
    """The index-th model of the fleet, the position-th of its stack (a call stays in its stack)."""
    runtime = list(RUNTIMES)[index % len(RUNTIMES)]
    name = f"model-{index:05d}"
    spec: dict[str, Any] = {"name": name, **RUNTIMES[runtime]}
    spec["versions"] = [
        {"name": "v1", "modelUri": f"pvc://models/{name}/1", "weight": 90},
        {"name": "v2", "modelUri": f"pvc://models/{name}/2", "weight": 10},
        {"name": "v3", "modelUri": f"pvc://models/{name}/3", "mirrorPercent": 5},
    ]
    if position % 4 == 1:
        spec["autoscaling"] = {"minReplicas": 1, "maxReplicas": 4, "cpuUtilization": 70}
    if position % 50 == 1:
        spec["calls"] = [f"model-{index - 1:05d}"]
    if runtime == "mlserver" and position % 20 == 0:
        spec["analysis"] = {"payloads": {"enabled": True, "sample": 0.1}}
    return spec


def platform_values() -> dict[str, Any]:
    return {f"{PREFIX}domain": "models.example.com", f"{PREFIX}platform": PLATFORM_SETTINGS}


def shard_names(shards: int) -> list[str]:
    return [f"{PLATFORM}-{index:02d}" for index in range(shards)]


def environment_files(models: int, shards: int) -> dict[str, dict[str, Any]]:
    """The platform stack's config and each shard's (models dealt in contiguous blocks), and the
    reference single stack's, by stack name."""
    names = shard_names(shards)
    files: dict[str, dict[str, Any]] = {PLATFORM: platform_values() | {f"{PREFIX}{fleet.SHARDS_KEY}": names}}
    start = 0
    for number, name in enumerate(names):
        end = models * (number + 1) // shards
        files[name] = {
            f"{PREFIX}{fleet.PLATFORM_STACK_KEY}": f"{PROJECT_ORG}/{PLATFORM}",
            f"{PREFIX}models": [model(index, index - start) for index in range(start, end)],
        }
        start = end
    files[REFERENCE] = platform_values() | {f"{PREFIX}models": [model(i, i) for i in range(REFERENCE_MODELS)]}
    return files


def write_environment(directory: Path, files: dict[str, dict[str, Any]]) -> None:
    directory.mkdir(parents=True)
    for stack, config in files.items():
        text = yaml.dump({"config": config}, Dumper=yaml.CSafeDumper, sort_keys=False)
        (directory / f"Pulumi.{stack}.yaml").write_text(text, encoding="utf-8")


# --- measuring in fresh processes --------------------------------------------------------------


@dataclass(frozen=True)
class Run:
    wall: float
    """The command as a fresh process: interpreter, imports and all."""
    seconds: float
    """The command's own work, after the imports."""
    cpu: float
    """CPU seconds of the process and the processes it started (less than wall when others share the cores)."""
    peak_mib: float
    children_peak_mib: float
    """The largest peak among the processes it started (the shards of `--shards`), else 0."""


def one(argv: list[str], profile: Path | None, stdout_to: Path | None) -> dict[str, Any]:
    """The command in this process (a fresh one), its output kept aside: time and peak memory."""
    output = io.StringIO()
    profiler = cProfile.Profile() if profile is not None else None
    start = time.perf_counter()
    with contextlib.redirect_stdout(output):
        if profiler is not None:
            profiler.enable()
        code = infra(argv)
        if profiler is not None:
            profiler.disable()
    seconds = time.perf_counter() - start
    if profiler is not None and profile is not None:
        profiler.dump_stats(profile)
    if stdout_to is not None:
        stdout_to.write_text(output.getvalue(), encoding="utf-8")
    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return {
        "code": code,
        "seconds": seconds,
        "cpu": own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime,
        "peak_mib": own.ru_maxrss / 1024,
        "children_peak_mib": children.ru_maxrss / 1024,
    }


def run(argv: list[str], profile: Path | None = None, stdout_to: Path | None = None) -> Run:
    line = [sys.executable, "-m", "bench.fleet_shards", "--one", json.dumps(argv)]
    line += ["--profile-to", str(profile)] if profile is not None else []
    line += ["--stdout-to", str(stdout_to)] if stdout_to is not None else []
    start = time.perf_counter()
    done = subprocess.run(line, cwd=ROOT, capture_output=True, text=True, check=False)
    wall = time.perf_counter() - start
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(argv)} failed ({done.returncode}):\n{done.stdout[-4000:]}\n{done.stderr[-4000:]}")
    result = json.loads(done.stdout.splitlines()[-1])
    if result["code"] != 0:
        raise SystemExit(f"{' '.join(argv)} exited {result['code']}:\n{done.stderr[-4000:]}")
    return Run(wall, result["seconds"], result["cpu"], result["peak_mib"], result["children_peak_mib"])


def fastest(runs: list[Run]) -> Run:
    return min(runs, key=lambda r: r.wall)


def objects(render: Path) -> int:
    """The objects of a render directory: documents start with a top-level apiVersion (render_files
    writes it first, and nothing nested starts at the first column)."""
    text = (render / MANIFESTS).read_text(encoding="utf-8")
    return sum(1 for line in text.splitlines() if line.startswith("apiVersion: "))


def same_trees(left: Path, right: Path) -> bool:
    """Two render directories with the same files, byte for byte."""
    files = sorted(p.relative_to(left) for p in left.rglob("*") if p.is_file())
    if files != sorted(p.relative_to(right) for p in right.rglob("*") if p.is_file()):
        return False
    return all((left / f).read_bytes() == (right / f).read_bytes() for f in files)


def digests(directory: Path) -> dict[str, str]:
    """Each stack file's content hash, by stack name."""
    return {
        path.name.removeprefix("Pulumi.").removesuffix(".yaml"): hashlib.sha256(path.read_bytes()).hexdigest()
        for path in sorted(directory.glob("Pulumi.*.yaml"))
    }


# --- the benchmark ------------------------------------------------------------------------------


@dataclass
class Bench:
    root: Path
    profiles: Path | None
    repeat: int

    @property
    def stacks(self) -> Path:
        return self.root / "stacks"

    def stack_file(self, stack: str, stacks: Path | None = None) -> str:
        return str((stacks or self.stacks) / f"Pulumi.{stack}.yaml")

    def profile(self, name: str) -> Path | None:
        return self.profiles / f"{name}.prof" if self.profiles is not None else None

    def render(self, stack: str, out: Path, *extra: str, stacks: Path | None = None, profile: bool = True) -> Run:
        argv = ["render", "--stack", stack, "--config", self.stack_file(stack, stacks), "--out", str(out)]
        return run([*argv, "--no-charts", *extra], self.profile(stack) if profile else None)


def report_row(label: str, models: int, count: int | str, measured: Run) -> str:
    return (
        f"{label:<22} {models:>6} {count:>7} {measured.wall:>9.1f} {measured.seconds:>7.1f} {measured.cpu:>6.1f} "
        f"{measured.peak_mib:>8.0f} {os.getloadavg()[0]:>5.1f}"
    )


def verdict(holds: bool, figure: float, bound: float) -> str:
    if holds:
        return f"holds ({figure / bound:.0%} of the bound)"
    return f"MISSED by {figure / bound - 1:.0%}"


def commit() -> str:
    done = subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True, check=False
    )
    return done.stdout.strip() or "unknown"


@dataclass(frozen=True)
class Change:
    model: str
    stacks: list[str]
    """The stack files that changed."""
    found: float
    render: float
    diff: float
    total: float
    cpu: float
    """CPU seconds of the shard renders and diffs."""
    objects: list[str]
    """What the diff reports changed."""
    platform_again: Run
    platform_unchanged: bool
    as_pull_request: Run
    """The shard rendered as the pull request's render-diff job renders it: no platform render
    beside it, so its platform stack's outputs are rendered first, in the same process."""


def measure(models: int, shards: int, bench: Bench) -> None:
    cores = os.cpu_count() or 1
    names = shard_names(shards)
    files = environment_files(models, shards)
    write_environment(bench.stacks, files)
    out, whole = bench.root / "out", bench.root / "whole"
    print(
        f"{models:,} models ({', '.join(RUNTIMES)}; 3 versions each: a 90/10 canary split and a 5% shadow) "
        f"in {shards} shards; {cores} cores; --no-charts; tree {commit()}",
        flush=True,
    )
    print(
        f"{'stack':<22} {'models':>6} {'objects':>7} {'command s':>9} {'work s':>7} {'cpu s':>6} "
        f"{'peak MiB':>8} {'load':>5}",
        flush=True,
    )

    reference = fastest([bench.render(REFERENCE, out / REFERENCE, profile=i == 0) for i in range(bench.repeat)])
    print(report_row(f"{REFERENCE} (reference)", REFERENCE_MODELS, objects(out / REFERENCE), reference), flush=True)
    platform = bench.render(PLATFORM, out / PLATFORM)
    print(report_row(f"{PLATFORM} (platform)", models, objects(out / PLATFORM), platform), flush=True)
    shard_runs: dict[str, Run] = {}
    for name in names:
        extra = ("--platform-render", str(out / PLATFORM))
        shard_runs[name] = bench.render(name, out / name, *extra, profile=name == names[0])
        print(report_row(name, len(files[name][f"{PREFIX}models"]), objects(out / name), shard_runs[name]), flush=True)
    slowest = max(shard_runs.values(), key=lambda r: r.wall)
    largest = max(shard_runs.values(), key=lambda r: r.peak_mib)
    print(
        f"shards one by one: {sum(r.wall for r in shard_runs.values()):.1f} s in all (the platform's besides); "
        f"slowest {slowest.wall:.1f} s, largest peak {largest.peak_mib:.0f} MiB",
        flush=True,
    )

    environment = bench.render(PLATFORM, whole, "--shards", profile=False)  # each stack's render in whole/<stack>
    identical = all(same_trees(out / stack, whole / stack) for stack in (PLATFORM, *names))
    print(
        f"whole environment (--shards, {cores} processes): {environment.wall:.1f} s "
        f"(work {environment.seconds:.1f} s, cpu {environment.cpu:.1f} s); "
        f"peak {environment.peak_mib:.0f} MiB (platform), "
        f"{environment.children_peak_mib:.0f} MiB (largest shard process); "
        f"the same files as one by one: {'yes' if identical else 'NO'}",
        flush=True,
    )

    change = one_model_change(bench, f"model-{models // 2:05d}", out)
    print(
        f"one-model change ({change.model}: v1 90 -> 80, v2 10 -> 20): stack files changed: "
        f"{', '.join(change.stacks)}; objects changed: {', '.join(change.objects) or 'none'}",
        flush=True,
    )
    print(
        f"  files compared {change.found * 1000:.0f} ms, shard render {change.render:.1f} s, infra diff "
        f"{change.diff:.1f} s: {change.total:.1f} s to the report",
        flush=True,
    )
    print(
        f"  (untimed) the platform stack rendered again from the changed files ({change.platform_again.wall:.1f} s): "
        f"{'identical, so no other stack re-renders' if change.platform_unchanged else 'CHANGED'}",
        flush=True,
    )
    print(
        f"  (untimed) the shard as the pull request's render diff renders it, its platform's outputs rendered "
        f"first in the same process: {change.as_pull_request.wall:.1f} s, "
        f"peak {change.as_pull_request.peak_mib:.0f} MiB",
        flush=True,
    )
    print(f"load average now {' '.join(f'{load:.1f}' for load in os.getloadavg())} (1, 5, 15 minutes)")
    print_targets(models, cores, reference=reference, largest=largest, environment=environment, change=change)


def one_model_change(bench: Bench, changed_model: str, out: Path) -> Change:
    """The model's weights moved in its shard's file (promote's editor); from the files to the diff, timed."""
    after = bench.root / "after"
    environment = environment_of(PLATFORM, Path(bench.stack_file(PLATFORM)))
    assert environment is not None
    shard = holder(environment, changed_model)  # as promote finds it
    assert shard is not None
    path = environment.path(shard)
    before = digests(bench.stacks)
    edited = edit(path.read_text(encoding="utf-8"), Promotion(model=changed_model, weights=CHANGE), path)
    timings: list[tuple[float, float, float, float, float]] = []
    for attempt in range(bench.repeat):
        path.write_text(edited, encoding="utf-8")
        start = time.perf_counter()
        now = digests(bench.stacks)
        changed = [stack for stack in now if now[stack] != before[stack]]
        found = time.perf_counter() - start
        renders = [
            bench.render(stack, after / stack, "--platform-render", str(out / PLATFORM), profile=attempt == 0)
            for stack in changed
        ]
        diffs = [
            run(
                ["diff", str(out / stack), str(after / stack)],
                bench.profile("diff") if attempt == 0 else None,
                bench.root / f"diff-{stack}.md",
            )
            for stack in changed
        ]
        elapsed = time.perf_counter() - start
        cpu = sum(r.cpu for r in (*renders, *diffs))
        timings.append((elapsed, found, sum(r.wall for r in renders), sum(d.wall for d in diffs), cpu))
    total, found, render, diff, cpu = min(timings)
    differences = [diff_renders(out / stack, after / stack) for stack in changed]
    # Keys read `Kind namespace/name (apiVersion)`: the API version left out.
    changed_objects = sorted(key.rsplit(" (", 1)[0] for d in differences for key in d.objects.changed)
    changed_objects += [f"{len(d.objects.added)} added, {len(d.objects.removed)} removed" for d in differences]
    platform_again = bench.render(PLATFORM, after / PLATFORM, profile=False)
    as_pull_request = bench.render(changed[0], bench.root / "pull-request" / changed[0], profile=False)
    return Change(
        model=changed_model,
        stacks=changed,
        found=found,
        render=render,
        diff=diff,
        total=total,
        cpu=cpu,
        objects=changed_objects,
        platform_again=platform_again,
        platform_unchanged=same_trees(out / PLATFORM, after / PLATFORM),
        as_pull_request=as_pull_request,
    )


def print_targets(models: int, cores: int, *, reference: Run, largest: Run, environment: Run, change: Change) -> None:
    print("targets (command wall times):")
    bound = SHARD_OVERRUN * reference.wall
    print(
        f"  one-model change <= {SHARD_OVERRUN} x reference ({bound:.1f} s): {change.total:.1f} s, "
        f"{verdict(change.total <= bound, change.total, bound)}"
    )
    print(
        f"  each shard's peak <= reference's ({reference.peak_mib:.0f} MiB): largest {largest.peak_mib:.0f} MiB, "
        f"{verdict(largest.peak_mib <= reference.peak_mib, largest.peak_mib, reference.peak_mib)}"
    )
    bound = models / REFERENCE_MODELS * reference.wall / cores * PARALLEL_OVERRUN
    print(
        f"  whole environment <= {models:,}/{REFERENCE_MODELS} x {reference.wall:.1f} s / {cores} cores x "
        f"{PARALLEL_OVERRUN} ({bound:.1f} s): {environment.wall:.1f} s, "
        f"{verdict(environment.wall <= bound, environment.wall, bound)}"
    )
    # The same by CPU seconds: the work, whatever share of the cores other processes took meanwhile.
    print("by CPU seconds (processes' own, whatever else ran on the machine):")
    bound = SHARD_OVERRUN * reference.cpu
    print(
        f"  one-model change <= {SHARD_OVERRUN} x reference ({bound:.1f} s): {change.cpu:.1f} s, "
        f"{verdict(change.cpu <= bound, change.cpu, bound)}"
    )
    bound = models / REFERENCE_MODELS * reference.cpu / cores * PARALLEL_OVERRUN
    spread = environment.cpu / cores
    print(
        f"  whole environment's CPU / {cores} cores (a perfect split) <= {models:,}/{REFERENCE_MODELS} x "
        f"{reference.cpu:.1f} s / {cores} x {PARALLEL_OVERRUN} ({bound:.1f} s): {spread:.1f} s, "
        f"{verdict(spread <= bound, spread, bound)}"
    )


@contextlib.contextmanager
def workdir(keep: str | None) -> Iterator[Path]:
    if keep is not None:
        Path(keep).mkdir(parents=True, exist_ok=False)
        yield Path(keep)
        return
    with tempfile.TemporaryDirectory(prefix="fleet-shards-") as scratch:
        yield Path(scratch)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--models", type=int, default=10_000, help="models in the fleet (default 10,000)")
    parser.add_argument("--shards", type=int, default=25, help="shards they are dealt into (default 25)")
    parser.add_argument(
        "--repeat", type=int, default=1, help="runs of the reference and of the change; the fastest counts"
    )
    parser.add_argument("--profile", metavar="DIR", help="cProfile each render and the diff into DIR/<stack>.prof")
    parser.add_argument("--keep", metavar="DIR", help="generate and render into DIR (new) and keep it")
    parser.add_argument("--one", help=argparse.SUPPRESS)
    parser.add_argument("--profile-to", help=argparse.SUPPRESS)
    parser.add_argument("--stdout-to", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.one:
        profile = Path(args.profile_to) if args.profile_to else None
        print(json.dumps(one(json.loads(args.one), profile, Path(args.stdout_to) if args.stdout_to else None)))
        return
    if args.models < args.shards or args.shards < 1:
        parser.error("give at least one model a shard")
    profiles = Path(args.profile).resolve() if args.profile else None
    if profiles is not None:
        profiles.mkdir(parents=True, exist_ok=True)
    with workdir(args.keep) as root:
        measure(args.models, args.shards, Bench(root.resolve(), profiles, max(1, args.repeat)))


if __name__ == "__main__":
    main()
