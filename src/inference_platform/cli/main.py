"""`python -m infra`: render a stack offline, diff two renders, print the config schema."""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

# Only what the parser shows is imported here, so that `--help` answers at once: each command
# imports what it runs (pulumi, pydantic's models, rich) in its own functions, below.
from inference_platform.analysis.prometheus_client import TOKEN_ENV
from inference_platform.cli.exit_codes import ExitCode
from inference_platform.cli.names import (
    ALLOW_STALE_PLATFORM,
    CHARTS_DIR_ENV,
    MANIFESTS_DIR_ENV,
    PROGRAM_DIRECTORIES,
    PROGRAM_FILES,
)
from inference_platform.config.project import PROJECT

COMMAND = "inference-platform"
"""The command the package installs (pyproject.toml's [project.scripts])."""

if TYPE_CHECKING:
    from rich.console import Console

    from inference_platform.analysis.capacity import Plan
    from inference_platform.cli import platform_record
    from inference_platform.cli.render import RenderResult
    from inference_platform.cli.stack_file import StackFile
    from inference_platform.stack import fleet
    from inference_platform.stack.config import StackConfig


def _console(piped_width: int) -> Console:
    """A terminal's own width; piped output (CI logs) gets one that fits the table, not 80 columns."""
    from inference_platform.cli.console import console

    return console(piped_width)


def _render(args: argparse.Namespace) -> ExitCode:
    import pulumi
    from pydantic import ValidationError

    from inference_platform.cli.chart_expansion import Expansion, expand_render
    from inference_platform.cli.charts import ChartsUnavailableError
    from inference_platform.cli.project import ProgramNotFoundError, project_name
    from inference_platform.cli.registered import registered_capacity
    from inference_platform.cli.render import run_program
    from inference_platform.cli.render_files import render_texts, write_render
    from inference_platform.cli.stack_file import read_stack_file
    from inference_platform.config.base import validation_config_error
    from inference_platform.config.errors import ConfigError
    from inference_platform.stack.config import UNIONS

    config_path = Path(args.config or f"Pulumi.{args.stack}.yaml")
    config: StackConfig | None = None
    stack_outputs: dict[str, dict[str, Any]] = {}
    records: dict[str, str] = {}
    kind: fleet.StackKind = "single"
    try:
        project = project_name() or PROJECT
        if project == PROJECT:
            stack_file: StackFile | None
            kind, stack_file, config = _stack_of_kind(args, config_path, stack_outputs, records)
        else:
            # Another project's program composing the library: its stack file, when it has one, is
            # its own config (under its own namespace), not this program's; none is needed.
            stack_file = read_stack_file(config_path) if args.config or config_path.is_file() else None
        result = run_program(args.stack, stack_file, project=project, stack_outputs=stack_outputs)
    except ConfigError as error:
        print(error.report(), file=sys.stderr)
        return ExitCode.CONFIG_ERROR
    except ValidationError as error:
        # A config model the program validated itself (`model_validate`, a constructor): the same report.
        print(validation_config_error(error, UNIONS, error.__traceback__).report(), file=sys.stderr)
        return ExitCode.CONFIG_ERROR
    except ProgramNotFoundError as error:
        print(f"render: {error}", file=sys.stderr)
        return ExitCode.CONFIG_ERROR
    except pulumi.RunError as error:
        print(f"the program failed: {error}", file=sys.stderr)
        return ExitCode.PROGRAM_ERROR
    out_dir = render_directory(args, kind)
    expansion = Expansion.of(args.charts_dir, args.manifests_dir, args.no_charts)
    kubernetes_version = config.platform.kubernetes_version if config is not None else None
    try:
        chart_objects, why_not = expand_render(result, kubernetes_version, expansion)
    except ChartsUnavailableError as error:
        print(f"charts: {error}", file=sys.stderr)
        return ExitCode.CONFIG_ERROR
    write_render(render_texts(result, chart_objects) | records, out_dir)
    _print_summary(result, chart_objects, args.stack, out_dir, args.verbose)
    # The plan of what the program registered (its InferenceServices), whatever composed them; a
    # platform stack's is its whole environment's, whose models its shards register.
    plan = config.capacity() if kind == "platform" and config is not None else registered_capacity(result)
    _print_capacity(dataclasses.replace(plan, cache=config.cache_plan()) if config is not None else plan)
    if why_not is not None and (result.charts or result.config_files):
        print(f"Charts {why_not}")
    if kind == "platform" and args.shards and config is not None:
        return _render_shards(args, config_path, out_dir, config.shards or [])
    return ExitCode.OK


def render_directory(args: argparse.Namespace, kind: fleet.StackKind) -> Path:
    """Where a stack's render goes: --out, by default build/<stack>; for a platform stack rendered
    with --shards, --out is the environment's directory, each stack's render inside it (<out>/<stack>)."""
    stack: str = args.stack
    if args.out is None:
        return Path("build") / stack
    return Path(args.out) / stack if kind == "platform" and args.shards else Path(args.out)


def _stack_of_kind(
    args: argparse.Namespace,
    config_path: Path,
    stack_outputs: dict[str, dict[str, Any]],
    records: dict[str, str],
) -> tuple[fleet.StackKind, StackFile, StackConfig]:
    """The stack's kind, file and validated config: a whole environment's for a platform stack (its
    shards' files beside it), a shard's on its platform stack's render (whose outputs it adds to
    `stack_outputs`, for its StackReference). A platform stack's and a shard's render hold a record
    of the stack files they rendered from (cli/platform_record.py): its file and text, in `records`."""
    from inference_platform.cli.environment import read_environment, read_shard
    from inference_platform.cli.platform_record import PLATFORM_RENDER, STACK_FILES, record_of
    from inference_platform.cli.render_files import dump_documents
    from inference_platform.cli.stack_file import read_stack_config, read_stack_file
    from inference_platform.stack import fleet
    from inference_platform.stack.config import project_values

    values = project_values(read_stack_file(config_path).config)
    kind = fleet.stack_kind(values)
    if kind == "platform":
        stack_file, config, _ = read_environment(config_path, args.stack)
        records[STACK_FILES] = dump_documents([record_of(args.stack, config_path).as_json()])
        return kind, stack_file, config
    if kind == "shard":
        platform, outputs, record = _platform_outputs(args, config_path, values, render_directory(args, kind))
        stack_outputs[platform] = outputs
        read = read_shard(config_path, args.stack, outputs)
        if record is not None:
            records[PLATFORM_RENDER] = dump_documents([record.as_json()])
        return kind, *read
    return kind, *read_stack_config(config_path)


def _platform_outputs(
    args: argparse.Namespace, config_path: Path, values: Mapping[str, Any], out_dir: Path
) -> tuple[str, dict[str, Any], platform_record.Record | None]:
    """A shard's platform stack's name and outputs (the shard's project keys: `values`), and the
    record of the stack files they were rendered from: from that stack's render
    (`--platform-render`, by default the render directory's sibling named after the platform
    stack), refused where its stack files changed since; where the sibling holds none, from the
    platform stack's file beside the shard's, rendered in this process."""
    from inference_platform.cli.environment import environment_of, platform_render_outputs
    from inference_platform.cli.platform_record import record_of
    from inference_platform.cli.render_files import OUTPUTS, read_outputs
    from inference_platform.config.errors import ConfigError, Problem
    from inference_platform.stack import fleet
    from inference_platform.stack.config import decode_value

    platform = fleet.platform_stack_name(str(decode_value(values.get(fleet.PLATFORM_STACK_KEY))))
    directory = Path(args.platform_render) if args.platform_render else out_dir.parent / platform
    platform_path = config_path.parent / f"Pulumi.{platform}.yaml"
    if (directory / OUTPUTS).is_file():
        outputs = read_outputs(directory)
        return platform, outputs, _current_record(args, directory, outputs, record_of(platform, platform_path))
    if args.platform_render:
        message = (
            f"{config_path}: --platform-render {directory} holds no render of {platform} "
            f"(infra render --stack {platform})"
        )
        raise ConfigError([Problem("", message)])
    environment = environment_of(args.stack, config_path)
    assert environment is not None  # a shard's file
    print(
        f"note: no render of {platform} at {directory}: its outputs read from {environment.path(platform)}, "
        "rendered here (no charts)",
        file=sys.stderr,
    )
    outputs = platform_render_outputs(environment)
    return platform, outputs, record_of(platform, platform_path)


def _current_record(
    args: argparse.Namespace, render: Path, outputs: Mapping[str, Any], current: platform_record.Record
) -> platform_record.Record | None:
    """The record of the stack files the platform render at `render` read, refused (ConfigError)
    where they changed since (`current`: what they are now), or with --allow-stale-platform
    warned of (None where it holds no record). A render of no platform stack, or of another one
    than the shard's, is left to the shard's reading of its outputs to refuse (fleet.read_facts).
    `current` was read beside the shard's file, where the problems name the files that changed."""
    from inference_platform.cli.platform_record import STACK_FILES, Record, stale_problems
    from inference_platform.cli.render_files import load_documents, read_text
    from inference_platform.config.errors import ConfigError
    from inference_platform.stack import fleet

    documents = load_documents(read_text(render / STACK_FILES))
    recorded = Record.from_json(documents[0]) if documents else None
    if (recorded is None and fleet.FACTS_OUTPUT not in outputs) or (
        recorded is not None and recorded.platform != current.platform
    ):
        return recorded
    directory = Path(args.config or f"Pulumi.{args.stack}.yaml").parent
    problems = stale_problems(recorded, current, args.stack, render, directory)
    if problems and not args.allow_stale_platform:
        raise ConfigError(problems)
    for problem in problems:
        print(f"warning: {problem}", file=sys.stderr)
    return recorded


def _render_shards(args: argparse.Namespace, config_path: Path, out_dir: Path, shards: list[str]) -> ExitCode:
    """Each shard of a platform stack rendered beside its render, in parallel processes (as many as
    there are cores), each reading the platform's render for its StackReference."""
    from concurrent.futures import ThreadPoolExecutor

    def command(shard: str) -> list[str]:
        line = [sys.executable, "-m", "inference_platform", "render", "--stack", shard]
        line += ["--config", str(config_path.parent / f"Pulumi.{shard}.yaml"), "--out", str(out_dir.parent / shard)]
        line += ["--platform-render", str(out_dir)]
        if args.no_charts:
            line.append("--no-charts")
        if args.charts_dir:
            line += ["--charts-dir", args.charts_dir]
        if args.manifests_dir:
            line += ["--manifests-dir", args.manifests_dir]
        return line

    with ThreadPoolExecutor(max_workers=os.cpu_count() or 1) as pool:
        done = list(pool.map(lambda shard: subprocess.run(command(shard), check=False), shards))
    failed = [shard for shard, run in zip(shards, done, strict=True) if run.returncode != 0]
    if failed:
        print(f"render: shards failed: {', '.join(failed)}", file=sys.stderr)
        return ExitCode(max(run.returncode for run in done))
    return ExitCode.OK


def _print_capacity(plan: Plan) -> None:
    print(plan.headline())
    _print_capacity_notes(plan)


def _print_capacity_notes(plan: Plan) -> None:
    if plan.fits_peak is False:
        print(f"warning: at peak the models need {plan.gpus_peak} GPUs, more than the {plan.declared} declared")
    for device, npus in plan.npus.items():
        if npus.fits("peak") is False:
            print(f"warning: at peak the models need {npus.peak} {device} NPUs, more than the {npus.declared} declared")
    for note in plan.notes:
        print(f"note: {note}")


def _stack_config(args: argparse.Namespace) -> StackConfig | None:
    """The validated config of `--config`, or of Pulumi.<stack>.yaml; None after printing the
    problems. A platform stack's is its whole environment's; a shard's is its own models' (the
    environment read from its platform stack's and its neighbours' files)."""
    from inference_platform.cli.environment import environment_of, read_environment
    from inference_platform.cli.stack_file import read_stack_config
    from inference_platform.config.errors import ConfigError, Problem

    path = Path(args.config or f"Pulumi.{args.stack}.yaml")
    try:
        environment = environment_of(args.stack, path)
        if environment is None:
            _, config = read_stack_config(path)
            return config
        _, config, views = read_environment(environment.path(environment.platform), environment.platform)
        if args.stack != environment.platform and args.stack not in views:
            message = f"{path}: the platform stack {environment.platform} does not list {args.stack} in its shards"
            raise ConfigError([Problem("", message)])
        return config if args.stack == environment.platform else views[args.stack]
    except ConfigError as error:
        print(error.report(), file=sys.stderr)
        return None


def _capacity(args: argparse.Namespace) -> ExitCode:
    from inference_platform.cli.capacity_table import cache_table, capacity_table, packing_lines

    config = _stack_config(args)
    if config is None:
        return ExitCode.CONFIG_ERROR
    plan = config.capacity()
    if args.format == "json":
        print(json.dumps(plan.report_json(), indent=2))
        return ExitCode.OK
    _console(200).print(capacity_table(plan))
    if plan.cache:
        _console(200).print(cache_table(plan))
    for line in packing_lines(plan):
        print(line)
    _print_capacity(plan)
    return ExitCode.OK


def _rehearse(args: argparse.Namespace) -> ExitCode:
    from inference_platform.analysis.rehearsal import NodeRequest
    from inference_platform.cli.charts import default_cache, default_manifest_cache
    from inference_platform.cli.rehearsal.command import Options, main

    charts = args.charts_dir or os.environ.get(CHARTS_DIR_ENV) or str(default_cache())
    manifests = args.manifests_dir or os.environ.get(MANIFESTS_DIR_ENV) or str(default_manifest_cache())
    options = Options(
        stack=args.stack,
        config=Path(args.config or f"Pulumi.{args.stack}.yaml"),
        charts_dir=Path(charts).resolve(),
        manifests_dir=Path(manifests).resolve() if Path(manifests).is_dir() else None,
        tools_dir=Path(args.tools_dir).resolve() if args.tools_dir else _default_tools_dir(),
        nodes=NodeRequest(gpu_nodes=args.gpu_nodes, npu_nodes=dict(args.npu_nodes or []), cpu_nodes=args.cpu_nodes),
        diff_from=args.diff_from,
        markdown=Path(args.markdown) if args.markdown else None,
        json=Path(args.json) if args.json else None,
        stored=Path(args.stored) if args.stored else None,
        keep=args.keep,
    )
    if not options.charts_dir.is_dir():
        print(
            f"rehearse: no chart tarballs at {options.charts_dir}: give --charts-dir (or ${CHARTS_DIR_ENV}), "
            "or run `infra render` once with network to fill the cache",
            file=sys.stderr,
        )
        return ExitCode.CONFIG_ERROR
    return main(options)


def _default_tools_dir() -> Path | None:
    """tools/bin/rehearsal of this checkout, where `make rehearsal-tools` builds them; else PATH."""
    built = Path(__file__).resolve().parents[3] / "tools" / "bin" / "rehearsal"
    return built if built.is_dir() else None


def _npu_nodes(text: str) -> tuple[str, int]:
    chip, _, count = text.partition("=")
    if not chip or not count.isdigit():
        raise argparse.ArgumentTypeError(f"{text!r}: expected TYPE=N, e.g. Ascend910B3=1")
    return chip, int(count)


def _add_rehearse(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    rehearse = commands.add_parser(
        "rehearse",
        help="the real pulumi preview, up, up again and destroy of a stack against a throwaway control plane "
        "with fake GPU nodes (docs/rehearsal.md)",
        description=f"Exit {ExitCode.OK:d}: every step passed and every pod was placed as the capacity plan "
        f"says; {ExitCode.REHEARSAL_FAILED:d}: a step failed; {ExitCode.PODS_PENDING:d}: pods Pending, as the "
        f"plan says on these nodes; {ExitCode.PLACEMENT_DISAGREES:d}: the scheduler and the plan disagree; "
        f"{ExitCode.CONFIG_ERROR:d}: bad usage, config or missing tools; {ExitCode.INTERRUPTED:d}: interrupted. "
        "Secure values decrypt with $PULUMI_CONFIG_PASSPHRASE; without it they are rehearsed as placeholders.",
    )
    _stack_option(rehearse, "stack name (reads Pulumi.<stack>.yaml)")
    rehearse.add_argument("--config", help="stack file to read instead of Pulumi.<stack>.yaml")
    rehearse.add_argument(
        "--tools-dir",
        metavar="DIR",
        help="the pulumi CLI, its Kubernetes provider, etcd, kube-apiserver, kube-controller-manager, "
        "kube-scheduler and kwok (default tools/bin/rehearsal, as `make rehearsal-tools` builds them; else PATH)",
    )
    rehearse.add_argument(
        "--charts-dir",
        metavar="DIR",
        help=f"the pinned chart tarballs (or ${CHARTS_DIR_ENV}; default the render's cache)",
    )
    rehearse.add_argument(
        "--manifests-dir", metavar="DIR", help=f"the pinned manifest files (or ${MANIFESTS_DIR_ENV}; default the cache)"
    )
    rehearse.add_argument(
        "--gpu-nodes", type=int, metavar="N", help="rehearse with N GPU nodes instead of the declared"
    )
    rehearse.add_argument(
        "--npu-nodes", type=_npu_nodes, action="append", metavar="TYPE=N", help="N nodes of an NPU type (repeatable)"
    )
    rehearse.add_argument("--cpu-nodes", type=int, default=3, metavar="N", help="CPU nodes for the rest (default 3)")
    rehearse.add_argument(
        "--diff-from",
        metavar="FILE|REF",
        help="bring up this stack file (or the stack file at this git ref) first, then preview --diff and up "
        "the new one",
    )
    rehearse.add_argument("--markdown", metavar="FILE", help="write the report a pull request shows to FILE")
    rehearse.add_argument("--json", metavar="FILE", help="write the report as JSON to FILE")
    rehearse.add_argument("--stored", metavar="FILE", help="write the objects the API server stored after up to FILE")
    rehearse.add_argument("--keep", action="store_true", help="keep the rehearsal's directory (logs, state)")
    rehearse.set_defaults(handler=_rehearse)


# Above this many components of one type (models), the summary shows the type, not each one.
LISTED_COMPONENTS = 20


def _spread(counts: list[int]) -> str:
    """min/median/max of a list of counts."""
    import statistics

    ordered = sorted(counts)
    return f"{ordered[0]}/{statistics.median(ordered):g}/{ordered[-1]}"


def _print_summary(
    result: RenderResult,
    chart_objects: dict[str, list[dict[str, object]]],
    stack: str,
    out_dir: Path,
    verbose: bool = False,
) -> None:
    from collections import Counter

    from rich.table import Table

    from inference_platform.cli.registered import COMPONENT, PIPELINE, registered_urls

    console = _console(140)
    manifests = result.manifests
    expanded = sum(len(objects) for objects in chart_objects.values())
    console.print(
        f"Rendered stack [bold]{stack}[/bold]: {len(manifests)} Kubernetes objects, "
        f"{len(result.charts)} Helm charts ({expanded} chart objects) -> {out_dir}/"
    )
    kinds = Table("kind", "objects", title="Objects per kind", title_justify="left")
    for kind, count in sorted(Counter(r.inputs["kind"] for r in manifests).items()):
        kinds.add_row(kind, str(count))
    console.print(kinds)
    owners = result.component_labels()
    objects = Counter(owners[r.urn] for r in manifests)
    charts = Counter(owners[r.urn] for r in result.charts)
    from_charts: Counter[str] = Counter()
    for chart in result.charts:
        from_charts[owners[chart.urn]] += len(chart_objects.get(chart.inputs.get("name", chart.name), []))
    by_type: dict[str, list[str]] = {}
    for component in sorted(objects.keys() | charts.keys()):
        by_type.setdefault(component.split("::")[0], []).append(component)
    components = Table("component", "objects", "charts", "chart objects", title="Per component", title_justify="left")
    for type_, members in by_type.items():
        if verbose or len(members) <= LISTED_COMPONENTS:
            for component in members:
                chart_count = str(from_charts[component]) if chart_objects and charts[component] else "-"
                components.add_row(component, str(objects[component]), str(charts[component]), chart_count)
        else:
            components.add_row(
                f"{type_} x {len(members)} (min/median/max)",
                _spread([objects[c] for c in members]),
                _spread([charts[c] for c in members]),
                _spread([from_charts[c] for c in members]) if chart_objects else "-",
            )
    console.print(components)
    # What the program registered, whatever composed it (the stack, or a library program).
    for kind, component in (("models", COMPONENT), ("pipelines", PIPELINE)):
        served = sorted(registered_urls(result, component).items())
        if verbose or len(served) <= LISTED_COMPONENTS:
            for name, urls in served:
                console.print(f"[bold]{name}[/bold] {' '.join(urls)}")
        else:
            console.print(f"{len(served)} {kind}: their URLs are in {out_dir}/outputs.yaml (--verbose lists them)")


def _diff(args: argparse.Namespace) -> ExitCode:
    from inference_platform.cli.diff import (
        diff_renders,
        environment_report,
        environment_stacks,
        markdown_report,
        truncated,
    )

    for directory in (args.old, args.new):
        if not Path(directory).is_dir():
            print(f"not a render directory: {directory}", file=sys.stderr)
            return ExitCode.CONFIG_ERROR
    old, new = Path(args.old), Path(args.new)
    kinds = [environment_stacks(directory) is not None for directory in (old, new)]
    if kinds[0] != kinds[1]:
        print(
            f"{old if kinds[0] else new} holds an environment's renders (one directory a stack), "
            f"{new if kinds[0] else old} one stack's: diff two of a kind",
            file=sys.stderr,
        )
        return ExitCode.CONFIG_ERROR
    report = environment_report(old, new) if kinds[0] else markdown_report(diff_renders(old, new))
    sys.stdout.write(truncated(report, args.max_chars) if args.max_chars else report)
    return ExitCode.OK


def _promote(args: argparse.Namespace) -> ExitCode:
    import pulumi

    from inference_platform.cli.chart_expansion import Expansion
    from inference_platform.cli.charts import ChartsUnavailableError
    from inference_platform.cli.project import ProgramNotFoundError
    from inference_platform.cli.promote import Promotion, PromotionError, parse_assignments, promote
    from inference_platform.config.errors import ConfigError

    try:
        promotion = Promotion(
            model=args.model,
            weights=parse_assignments(args.weights, "--weights", int) if args.weights else {},
            mirrors=parse_assignments(args.mirror, "--mirror", float) if args.mirror else {},
            add_version=args.add_version,
            model_uri=args.model_uri,
            retire=tuple(filter(None, (args.retire or "").split(","))),
        )
        expansion = Expansion.of(args.charts_dir, args.manifests_dir, args.no_charts)
        path = Path(args.config or f"Pulumi.{args.stack}.yaml")
        warning = promote(args.stack, path, promotion, sys.stdout, expansion)
    except PromotionError as error:
        print(f"promote: {error}; nothing was written", file=sys.stderr)
        return ExitCode.CONFIG_ERROR
    except ConfigError as error:
        print(error.report(), file=sys.stderr)
        return ExitCode.CONFIG_ERROR
    except (ProgramNotFoundError, ChartsUnavailableError) as error:
        print(f"promote: {error}; nothing was written", file=sys.stderr)
        return ExitCode.CONFIG_ERROR
    except pulumi.RunError as error:
        print(f"promote: the program failed: {error}; nothing was written", file=sys.stderr)
        return ExitCode.PROGRAM_ERROR
    if warning is not None:
        print(f"promote: warning: {warning}", file=sys.stderr)
    return ExitCode.OK


def _analyze(args: argparse.Namespace) -> ExitCode:
    from inference_platform.analysis.prometheus_client import Prometheus, PrometheusError
    from inference_platform.cli import analyze

    try:
        at = analyze.parse_time(args.at)
    except ValueError as error:
        print(f"analyze: --at: {error}", file=sys.stderr)
        return ExitCode.CONFIG_ERROR
    config = _stack_config(args)
    if config is None:
        return ExitCode.CONFIG_ERROR
    if args.model is not None and args.model not in {m.name for m in config.models}:
        print(f"analyze: --model: the stack has no model {args.model!r}", file=sys.stderr)
        return ExitCode.CONFIG_ERROR
    why = None if args.model is None else analyze.nothing_to_compare(config, args.model)
    if why is not None:
        print(f"analyze: {why}", file=sys.stderr)
        return ExitCode.INSUFFICIENT_DATA
    try:
        with Prometheus(args.prometheus, at) as prometheus:
            report = analyze.analyze(config, args.stack, prometheus, args.window, args.model)
    except PrometheusError as error:
        print(f"analyze: {error}", file=sys.stderr)
        return ExitCode.PROMETHEUS_UNAVAILABLE
    if args.format == "json":
        print(analyze.as_json(report))
    elif args.format == "markdown":
        sys.stdout.write(analyze.markdown(report))
    else:
        _console(200).print(analyze.table(report))
    return analyze.exit_code(report)


def _rollout(args: argparse.Namespace) -> ExitCode:
    from inference_platform.analysis.prometheus_client import PrometheusError
    from inference_platform.analysis.rollout_decisions import RolloutReport
    from inference_platform.cli import rollout
    from inference_platform.cli.analyze import parse_time
    from inference_platform.cli.environment import environment_of
    from inference_platform.cli.promote import PromotionError
    from inference_platform.cli.stack_file import read_stack_file
    from inference_platform.config.errors import ConfigError

    try:
        at = parse_time(args.at)
    except ValueError as error:
        print(f"rollout: --at: {error}", file=sys.stderr)
        return ExitCode.CONFIG_ERROR
    config = _stack_config(args)
    if config is None:
        return ExitCode.CONFIG_ERROR
    path = Path(args.config or f"Pulumi.{args.stack}.yaml")
    try:
        environment = environment_of(args.stack, path)
        models = rollout.in_rollout(config, rollout.own_models(read_stack_file(path)))
        chosen = rollout.decisions(config, models, at, args.prometheus)
        report = RolloutReport(args.stack, at, config.rollouts.auto_merge_rollbacks, chosen)
        rollout.write(path, environment, report)
    except PrometheusError as error:
        print(f"rollout: {error}; nothing was written", file=sys.stderr)
        return ExitCode.PROMETHEUS_UNAVAILABLE
    except PromotionError as error:
        print(f"rollout: {error}; nothing was written", file=sys.stderr)
        return ExitCode.CONFIG_ERROR
    except ConfigError as error:
        print(error.report(), file=sys.stderr)
        return ExitCode.CONFIG_ERROR
    if args.markdown_out:
        Path(args.markdown_out).write_text(rollout.markdown(report), encoding="utf-8")
    if args.format == "json":
        print(rollout.as_json(report))
    elif args.format == "markdown":
        sys.stdout.write(rollout.markdown(report))
    else:
        _console(200).print(rollout.table(report))
    return ExitCode.CANDIDATE_FAILED if report.rolled_back else ExitCode.OK


def _window(text: str) -> str:
    """A Prometheus duration, checked the way the stack config checks one."""
    from inference_platform.serving.analysis_spec import AnalysisSpec

    try:
        return AnalysisSpec(window=text).window
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a duration: {text!r} (e.g. 10m, 1h)") from None


def _prometheus_url(text: str) -> str:
    """An http(s) URL with a host: anything else is a usage mistake, not an unreachable Prometheus."""
    from urllib.parse import urlsplit

    parts = urlsplit(text)
    if parts.scheme not in {"http", "https"} or not parts.hostname:
        raise argparse.ArgumentTypeError(f"not an http(s) URL: {text!r} (e.g. http://127.0.0.1:9090)")
    return text


def _environments(text: str) -> list[str]:
    """A comma list of environment names: one word, so the changed paths after it stay paths."""
    names = text.split(",")
    if not all(names):
        raise argparse.ArgumentTypeError(f"not a comma list of environments: {text!r} (e.g. dev,prod)")
    return names


def _changed_paths(args: argparse.Namespace) -> list[str] | None:
    """The changed paths the command was given (arguments, or --from's listing); None after
    printing why the usage is wrong."""
    from inference_platform.cli.stack_selection import split_paths

    given = [bool(args.paths), args.changed_from is not None, args.all]
    if sum(given) != 1:
        print("stacks: give the changed paths, --from FILE or --all (one of them)", file=sys.stderr)
        return None
    if args.null and args.changed_from is None:
        print("stacks: -z reads --from's listing; give --from FILE", file=sys.stderr)
        return None
    if args.changed_from is None:
        return list(args.paths)  # none with --all
    try:
        text = sys.stdin.read() if args.changed_from == "-" else Path(args.changed_from).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as error:
        print(f"stacks: --from {args.changed_from}: {error}", file=sys.stderr)
        return None
    return split_paths(text, args.null)


def _stacks(args: argparse.Namespace) -> ExitCode:
    from inference_platform.cli.project import ProgramNotFoundError
    from inference_platform.cli.stack_selection import (
        as_matrix,
        compact,
        default_root,
        every_stack,
        github_outputs,
        read_stacks,
        select,
        with_rollouts,
    )
    from inference_platform.config.errors import ConfigError

    changed = _changed_paths(args)
    if changed is None:
        return ExitCode.CONFIG_ERROR
    try:
        stacks = read_stacks(Path(args.root) if args.root else default_root(), args.environments)
        selection = every_stack(stacks) if args.all else select(stacks, changed)
        selection = with_rollouts(stacks, selection) if args.rollouts else selection
    except ConfigError as error:
        print(error.report(), file=sys.stderr)
        return ExitCode.CONFIG_ERROR
    except ProgramNotFoundError as error:
        print(f"stacks: {error}", file=sys.stderr)
        return ExitCode.CONFIG_ERROR
    matrix = as_matrix(stacks, selection, args.environments)
    sys.stdout.write(github_outputs(matrix) if args.github_output else compact(matrix) + "\n")
    return ExitCode.OK


def _completion(args: argparse.Namespace) -> ExitCode:
    """The shell's completion script for the `inference-platform` command, made by shtab from
    this parser (shells complete commands, not `python -m` modules)."""
    import shtab

    completer = parser()
    completer.prog = COMMAND
    print(shtab.complete(completer, shell=args.shell))
    return ExitCode.OK


def _schema(_: argparse.Namespace) -> ExitCode:
    from inference_platform.cli.schema import stack_file_schema

    print(json.dumps(stack_file_schema(), indent=2, sort_keys=True))
    return ExitCode.OK


def _add_stacks(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """`stacks`: what CI previews and deploys."""
    stacks = commands.add_parser(
        "stacks",
        help="the stacks a change touches, as JSON for a CI matrix: platform stacks before their shards",
        description="A shard's stack file selects that shard and its platform stack (which reads every shard's "
        "file); a platform stack's file, the platform and its "
        "shards; a one-stack environment's file, that stack; the program "
        f"({', '.join([*(f'{directory}/' for directory in PROGRAM_DIRECTORIES), *PROGRAM_FILES])}), every stack; "
        "anything else, nothing. Prints one line of JSON: "
        "stacks (to preview), diff (to render and diff: those and the stack files the change deletes), removed, "
        "platforms, shards, single, and per environment what runs first and which shards after it "
        "(docs/workflow.md, Sharded environments in CI).",
    )
    stacks.add_argument("paths", nargs="*", metavar="PATH", help="a changed path, relative to the repository root")
    stacks.add_argument(
        "--from",
        dest="changed_from",
        metavar="FILE",
        help="read the changed paths from FILE, one a line as `git diff --name-only` prints them (- for stdin)",
    )
    stacks.add_argument("-z", dest="null", action="store_true", help="--from's paths are NUL-separated (git diff -z)")
    stacks.add_argument("--all", action="store_true", help="every stack (what a deploy runs)")
    stacks.add_argument(
        "--environments",
        type=_environments,
        metavar="ENV,...",
        help="the environments the deploy workflow deploys, in its order, e.g. dev,prod: a stack of another "
        "environment, or one of these without its stack file, is an error",
    )
    stacks.add_argument(
        "--rollouts",
        action="store_true",
        help="only those of the selected stacks whose own stack file has a model with a rollout in progress "
        "(not started yet, shadow or canary): what the rollout workflow runs `infra rollout` on",
    )
    stacks.add_argument(
        "--root", metavar="DIR", help="the directory of Pulumi.yaml and the stack files (default: the project's)"
    )
    stacks.add_argument(
        "--github-output",
        action="store_true",
        help="print name=JSON lines for $GITHUB_OUTPUT instead: the lists, and <env>-first and <env>-shards",
    )
    stacks.set_defaults(handler=_stacks)


def _stack_option(command: argparse.ArgumentParser, help_text: str) -> None:
    """--stack, which the shells' completion completes from the stack files in the working directory."""
    from inference_platform.cli.completion import STACKS

    option = command.add_argument("--stack", required=True, help=help_text)
    option.complete = STACKS  # type: ignore[attr-defined]  # shtab reads it


def _stack_and_prometheus(command: argparse.ArgumentParser, verb: str) -> None:
    """--stack, --config and --prometheus: a command that `verb`s a stack file and asks its Prometheus."""
    _stack_option(command, f"stack name ({verb}s Pulumi.<stack>.yaml)")
    command.add_argument("--config", help=f"stack file to {verb} instead of Pulumi.<stack>.yaml")
    command.add_argument(
        "--prometheus",
        required=True,
        type=_prometheus_url,
        metavar="URL",
        help="the platform Prometheus' base URL, e.g. http://127.0.0.1:9090",
    )


def _add_rollout(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """`rollout`: each model's rollout a step further, as a change to its stack file."""
    rollout = commands.add_parser(
        "rollout",
        help="take each model's rollout a step further in Pulumi.<stack>.yaml when analyze's verdict allows it",
        description="Decides, for every model whose rollout is not finished: advance, hold, rollback, paused or "
        "resume (docs/rollouts.md), and writes the stack file once (comments kept, validated first). "
        f"Exit {ExitCode.OK:d}: every decision made (the file may have changed); "
        f"{ExitCode.CANDIDATE_FAILED:d}: a rollback was written; "
        f"{ExitCode.PROMETHEUS_UNAVAILABLE:d}: Prometheus unreachable (nothing written); "
        f"{ExitCode.CONFIG_ERROR:d}: bad usage or config (nothing written). "
        f"A bearer token is read from ${TOKEN_ENV} when set.",
    )
    _stack_and_prometheus(rollout, "edit")
    rollout.add_argument("--at", metavar="TIME", help="decide as of TIME: RFC 3339 or Unix seconds (default now)")
    rollout.add_argument(
        "--format", choices=["table", "markdown", "json"], default="table", help="how to print the decisions"
    )
    rollout.add_argument(
        "--markdown-out", metavar="FILE", help="also write the Markdown report to FILE (a pull request's body)"
    )
    rollout.set_defaults(handler=_rollout)


def _chart_options(command: argparse.ArgumentParser) -> None:
    """How a command's renders expand their charts and manifest files (render, promote: one place)."""
    charts = command.add_mutually_exclusive_group()
    charts.add_argument(
        "--charts-dir",
        metavar="DIR",
        help=f"expand charts from the pinned tarballs <chart>-<version>.tgz in DIR (or ${CHARTS_DIR_ENV}); "
        "a missing chart or Helm is then an error",
    )
    charts.add_argument("--no-charts", action="store_true", help="do not expand the charts with Helm")
    command.add_argument(
        "--manifests-dir",
        metavar="DIR",
        help=f"expand pinned manifest files (the Gateway API's CRDs) from copies in DIR (or ${MANIFESTS_DIR_ENV}), "
        "named as src/inference_platform/pins.py says; a missing one is then an error",
    )


def parser() -> argparse.ArgumentParser:
    root = argparse.ArgumentParser(
        prog="python -m infra",
        description=f"Tools for the {PROJECT} Pulumi program.",
        epilog="Exit codes, the same for every command: "
        + ", ".join(f"{code:d} {code.name.lower().replace('_', ' ')}" for code in ExitCode)
        + " (docs/workflow.md, Exit codes).",
    )
    commands = root.add_subparsers(dest="command", required=True)

    render = commands.add_parser("render", help="render a stack offline through the Pulumi SDK's mocks")
    _stack_option(render, "stack name (reads Pulumi.<stack>.yaml)")
    render.add_argument("--config", help="stack file to read instead of Pulumi.<stack>.yaml")
    render.add_argument("--out", help="output directory (default build/<stack>)")
    _chart_options(render)
    render.add_argument(
        "--verbose", action="store_true", help=f"list every component and model, even above {LISTED_COMPONENTS}"
    )
    render.add_argument(
        "--platform-render",
        metavar="DIR",
        help="for a shard: its platform stack's render, whose outputs stand for the StackReference "
        "(default: the sibling of --out named after the platform stack, or where that holds none, the "
        "platform stack's file beside the shard's, rendered first without charts)",
    )
    render.add_argument(
        "--shards",
        action="store_true",
        help="for a platform stack: render its shards too, in parallel (the whole environment); --out is then "
        "the environment's directory, which holds each stack's render (<out>/<stack>; default build/)",
    )
    render.add_argument(
        ALLOW_STALE_PLATFORM,
        action="store_true",
        help="for a shard: render on a platform render whose stack files changed since it was written, with a "
        "warning, instead of refusing it (docs/fleets.md)",
    )
    render.set_defaults(handler=_render)

    diff = commands.add_parser(
        "diff",
        help="Markdown report of what changed between two render directories (of a stack, or of an "
        "environment: a directory holding its stacks' renders, as render --shards writes them)",
    )
    diff.add_argument("old", help="the render directory before the change (e.g. the base branch's)")
    diff.add_argument("new", help="the render directory after the change")
    diff.add_argument(
        "--max-chars",
        type=int,
        metavar="N",
        help="cut the report at a whole line to fit N characters (GitHub comments hold 65536)",
    )
    diff.set_defaults(handler=_diff)

    promote = commands.add_parser(
        "promote",
        help="move traffic between a model's versions in Pulumi.<stack>.yaml, then print the render diff",
        description="Moves run in this order: --add-version, --weights, --mirror, --retire; the result is "
        "validated before the file is written, comments and secrets untouched.",
    )
    _stack_option(promote, "stack name (edits Pulumi.<stack>.yaml)")
    promote.add_argument("--config", help="stack file to edit instead of Pulumi.<stack>.yaml")
    promote.add_argument("--model", required=True, help="the model whose versions move (its name in the stack file)")
    promote.add_argument("--weights", metavar="V=N,...", help="live weights, e.g. v1=50,v2=50 (a shadow goes live)")
    promote.add_argument("--mirror", metavar="V=P,...", help="mirror shares, e.g. v3=20; v3=0 stops the shadow")
    promote.add_argument("--add-version", metavar="V", help="a new version, idle until given a weight or mirror")
    promote.add_argument("--model-uri", metavar="URI", help="the new version's files (with --add-version)")
    promote.add_argument("--retire", metavar="V,...", help="versions to remove")
    _chart_options(promote)
    promote.set_defaults(handler=_promote)

    analysis = commands.add_parser(
        "analyze",
        help="judge every canary and shadow against its primary from Prometheus",
        description=f"Exit {ExitCode.OK:d}: every candidate passes (or there is none); "
        f"{ExitCode.CANDIDATE_FAILED:d}: one fails; {ExitCode.INSUFFICIENT_DATA:d}: none fails but some have too "
        f"few requests, or were asleep at zero replicas (idle), or --model has nothing to compare; "
        f"{ExitCode.CONFIG_ERROR:d}: bad usage or config; "
        f"{ExitCode.PROMETHEUS_UNAVAILABLE:d}: Prometheus unreachable or answering garbage; "
        f"{ExitCode.PROGRAM_ERROR:d}: analyze itself failed. "
        f"A bearer token is read from ${TOKEN_ENV} when set.",
    )
    _stack_and_prometheus(analysis, "read")
    analysis.add_argument("--model", help="only this model")
    analysis.add_argument("--window", type=_window, help="instead of each model's analysis.window (e.g. 10m)")
    analysis.add_argument("--at", metavar="TIME", help="end of the window: RFC 3339 or Unix seconds (default now)")
    analysis.add_argument(
        "--format", choices=["table", "markdown", "json"], default="table", help="how to print the report"
    )
    analysis.set_defaults(handler=_analyze)

    _add_rollout(commands)

    capacity = commands.add_parser(
        "capacity", help="the GPUs the stack's models hold at minimum replicas and at peak, from its config alone"
    )
    _stack_option(capacity, "stack name (reads Pulumi.<stack>.yaml)")
    capacity.add_argument("--config", help="stack file to read instead of Pulumi.<stack>.yaml")
    capacity.add_argument("--format", choices=["table", "json"], default="table", help="how to print the plan")
    capacity.set_defaults(handler=_capacity)

    _add_rehearse(commands)
    _add_stacks(commands)

    schema = commands.add_parser("schema", help="print the JSON Schema of a stack file")
    schema.set_defaults(handler=_schema)

    completion = commands.add_parser(
        "completion",
        help=f"print a shell completion script for the {COMMAND} command",
        description=f"e.g. `source <({COMMAND} completion bash)`; zsh and fish as their docs say (docs/setup.md).",
    )
    completion.add_argument("shell", choices=["bash", "zsh", "fish"], help="the shell to complete in")
    completion.set_defaults(handler=_completion)
    return root


def _quiet_stdout() -> None:
    """Point stdout at /dev/null, so that the interpreter's last flush of what is still buffered
    meets no closed pipe (it would print "Exception ignored ... BrokenPipeError" and exit 120)."""
    try:
        fileno = sys.stdout.fileno()
    except (AttributeError, OSError, ValueError):  # not a file descriptor (a test's capture): nothing to flush
        return
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, fileno)
    os.close(devnull)


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    try:
        code: ExitCode = args.handler(args)
        sys.stdout.flush()
    except BrokenPipeError:
        # The reader stopped reading (`| head`): what it wanted it has; end as a shell would.
        _quiet_stdout()
        return ExitCode.CLOSED_PIPE
    return code
