"""The real Pulumi engine over the real program: the CLI through the Automation API, the program
inline (in this process, the way `pulumi up` runs infra/__main__.py), a file backend and the
passphrase secrets provider in the rehearsal's own directory; nothing leaves the machine.

Two stack transforms ride along, the rehearsal's only changes to what the program registers:
- `local_sources`: a chart's `chart` and a manifest file's `file` point at their pinned local
  copies (the charts and manifests directories), so nothing is fetched;
- `AwaitSkipper`: `pulumi.com/skipAwait` on the objects whose await can never end here (the pods
  of HAMi's slices, a LoadBalancer's address; every object when fewer nodes than declared are
  rehearsed), each one named in the report's notes."""

from __future__ import annotations

import os
import sys
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pulumi
from pulumi import automation as auto

from inference_platform.analysis.rehearsal import Step, is_slice_resource
from inference_platform.cli.charts import manifest_file_name
from inference_platform.cli.rehearsal.control_plane import without_proxies

CHART_TYPES = ("kubernetes:helm.sh/v4:Chart", "kubernetes:helm.sh/v3:Release")
MANIFEST_TYPE = "kubernetes:yaml/v2:ConfigFile"
COMPONENT_TYPES = ("kubernetes:helm.sh/", "kubernetes:yaml/")
"""The provider's components: their time is their objects'."""
SKIP_AWAIT = "pulumi.com/skipAwait"
WORKLOADS = ("kubernetes:apps/v1:Deployment", "kubernetes:apps/v1:StatefulSet")
CRD_GAP_WORDS = ("no matches for kind", "failed to determine if the following GVK is namespaced")
"""A preview's words for an object whose CRD is not in the cluster yet (pulumi/pulumi-kubernetes#3176)."""


def _get(props: Any, *keys: str) -> Any:
    for key in keys:
        if isinstance(props, Mapping) and key in props:
            return props[key]
    return None


def local_sources(charts: Path, manifests: Path | None) -> pulumi.ResourceTransform:
    """Point each chart at its pinned tarball in `charts`, each manifest file at its copy in `manifests`."""

    def transform(args: pulumi.ResourceTransformArgs) -> pulumi.ResourceTransformResult | None:
        props = dict(args.props)
        if args.type_ in CHART_TYPES:
            chart = str(props.get("chart"))
            name = chart.rsplit("/", 1)[-1]
            props["chart"] = str(charts / f"{name}-{props.get('version')}.tgz")
            props.pop("repositoryOpts", None)
            props.pop("repository_opts", None)
            return pulumi.ResourceTransformResult(props, args.opts)
        if args.type_ == MANIFEST_TYPE and manifests is not None:
            file = props.get("file")
            if isinstance(file, str) and "://" in file:
                props["file"] = str(manifests / manifest_file_name(file))
                return pulumi.ResourceTransformResult(props, args.opts)
        return None

    return transform


def asks_for_slices(props: Mapping[str, Any]) -> bool:
    """Whether a workload's pods ask for vGPU or vNPU slices (HAMi's scheduler places those)."""
    spec = _get(_get(_get(props, "spec"), "template"), "spec")
    containers = _get(spec, "containers") or []
    for container in containers if isinstance(containers, list) else []:
        resources = _get(container, "resources") or {}
        for part in ("limits", "requests"):
            if any(is_slice_resource(str(name)) for name in _get(resources, part) or {}):
                return True
    return False


@dataclass(eq=False)  # the SDK keys its transforms by the callable: hashed by identity
class AwaitSkipper:
    """Adds pulumi.com/skipAwait where the provider's await cannot end in a rehearsal."""

    everything: bool
    """Fewer nodes than declared: pods may stay Pending anywhere, so no object is awaited."""
    skipped: set[str] = field(default_factory=set)
    """What it annotated and why (the transform runs again for every preview and up)."""
    lock: threading.Lock = field(default_factory=threading.Lock)

    def why(self, type_: str, props: Mapping[str, Any]) -> str | None:
        if self.everything:
            return "fewer nodes than declared"
        if type_ in WORKLOADS and asks_for_slices(props):
            return "its pods ask for slices HAMi's scheduler places"
        if type_ == "kubernetes:core/v1:Service" and _get(_get(props, "spec"), "type") == "LoadBalancer":
            return "no load balancer gives it an address"
        return None

    def __call__(self, args: pulumi.ResourceTransformArgs) -> pulumi.ResourceTransformResult | None:
        if not args.custom or not args.type_.startswith("kubernetes:") or args.type_.startswith(COMPONENT_TYPES):
            return None
        props = args.props
        why = self.why(args.type_, props) if isinstance(props, Mapping) else None
        if why is None:
            return None
        metadata = dict(_get(props, "metadata") or {})
        annotations = dict(_get(metadata, "annotations") or {})
        annotations[SKIP_AWAIT] = "true"
        metadata["annotations"] = annotations
        with self.lock:
            self.skipped.add(f"{args.type_.rsplit(':', 1)[-1]} {args.name}: {why}")
        return pulumi.ResourceTransformResult({**props, "metadata": metadata}, args.opts)


@dataclass
class Workspace:
    """A stack of the program in the rehearsal's own backend."""

    stack: auto.Stack


def engine_environment(directory: Path, tools: Mapping[str, Path], kubeconfig: Path, passphrase: str) -> dict[str, str]:
    """The CLI's environment: its home, backend and passphrase in `directory`, the provider from
    the tool directory (first on PATH), no update check, no plugin download, no proxy."""
    path = os.pathsep.join([str(tools["pulumi-resource-kubernetes"].parent), os.environ.get("PATH", "")])
    (directory / "state").mkdir(parents=True, exist_ok=True)
    (directory / "pulumi-home").mkdir(parents=True, exist_ok=True)
    return {
        "PULUMI_HOME": str(directory / "pulumi-home"),
        "PULUMI_BACKEND_URL": f"file://{directory / 'state'}",
        "PULUMI_CONFIG_PASSPHRASE": passphrase,
        "PULUMI_SKIP_UPDATE_CHECK": "1",
        "PULUMI_DISABLE_AUTOMATIC_PLUGIN_ACQUISITION": "1",
        "PULUMI_AUTOMATION_API_SKIP_VERSION_CHECK": "1",
        # The state is thrown away: the engine writes it once at the end of each run, not after
        # every step (each write serialises the whole state, CRDs' schemas and all).
        "PULUMI_SKIP_CHECKPOINTS": "true",
        "KUBECONFIG": str(kubeconfig),
        "PATH": path,
    }


def isolated_environ(env: Mapping[str, str]) -> Callable[[], None]:
    """Set the CLI's environment in this process (the Automation API passes os.environ on), proxies
    removed; returns what restores it."""
    saved = dict(os.environ)
    os.environ.clear()
    os.environ.update(without_proxies(saved) | dict(env))

    def restore() -> None:
        os.environ.clear()
        os.environ.update(saved)

    return restore


def open_stack(
    directory: Path,
    *,
    name: str,
    project: str,
    program: Callable[[], None],
    tools: Mapping[str, Path],
    env: Mapping[str, str],
    skipper: AwaitSkipper,
    sources: pulumi.ResourceTransform,
) -> Workspace:
    """The stack `name` of the program, in a work directory of its own (its settings file is written there)."""
    work = directory / "work" / name
    work.mkdir(parents=True, exist_ok=True)
    root = directory / "pulumi-root" / "bin"
    root.mkdir(parents=True, exist_ok=True)
    if not (root / "pulumi").exists():
        (root / "pulumi").symlink_to(tools["pulumi"])

    def rehearsed() -> None:
        pulumi.runtime.register_resource_transform(sources)
        pulumi.runtime.register_resource_transform(skipper)
        program()

    options = auto.LocalWorkspaceOptions(
        work_dir=str(work),
        pulumi_home=env["PULUMI_HOME"],
        env_vars=dict(env),
        project_settings=auto.ProjectSettings(name=project, runtime="python"),
        secrets_provider="passphrase",
        pulumi_command=auto.PulumiCommand(root=str(root.parent), skip_version_check=True),
    )
    stack = auto.create_or_select_stack(name, project_name=project, program=rehearsed, opts=options)
    return Workspace(stack)


@dataclass
class Events:
    """What one engine run said: each failure with its resource, each step's operation."""

    failures: list[tuple[str, str]] = field(default_factory=list)
    steps: list[tuple[str, str, str, Mapping[str, Any] | None]] = field(default_factory=list)
    """(operation, URN, type, the new inputs) of every step that is not `same`."""
    began: dict[str, int] = field(default_factory=dict)
    took: dict[str, int] = field(default_factory=dict)
    """Seconds each resource's step took, from the engine's events' timestamps."""
    lock: threading.Lock = field(default_factory=threading.Lock)

    def slowest(self, count: int = 5) -> list[tuple[str, int]]:
        ranked = sorted(self.took.items(), key=lambda item: -item[1])[:count]
        return [(_resource(urn), seconds) for urn, seconds in ranked if seconds > 0]

    def __call__(self, event: auto.EngineEvent) -> None:
        with self.lock:
            pre = event.resource_pre_event
            if pre is not None:
                step = pre.metadata
                # Kubernetes objects only: a component's or a chart's time is its children's.
                if step.type.startswith("kubernetes:") and not step.type.startswith(COMPONENT_TYPES):
                    self.began[step.urn] = event.timestamp
                if step.op not in {auto.OpType.SAME, auto.OpType.READ}:
                    # A delete (or the deletion of a replaced object) has only the old state's inputs.
                    state = step.new or step.old
                    self.steps.append((step.op.value, step.urn, step.type, state.inputs if state else None))
            done = event.res_outputs_event or event.res_op_failed_event
            if done is not None and done.metadata.urn in self.began:
                self.took[done.metadata.urn] = event.timestamp - self.began[done.metadata.urn]
            diagnostic = event.diagnostic_event
            if diagnostic is not None and diagnostic.severity == "error":
                self.failures.append((_resource(diagnostic.urn), diagnostic.message.strip()))


Action = Callable[[Events], Mapping[Any, int] | None]
"""One engine run of a stack, reporting to its Events; its operations' counts."""


def up(workspace: Workspace, **options: Any) -> Action:
    return lambda events: workspace.stack.up(on_event=events, **options).summary.resource_changes


def preview(workspace: Workspace, **options: Any) -> Action:
    return lambda events: workspace.stack.preview(on_event=events, **options).change_summary


def destroy(workspace: Workspace, **options: Any) -> Action:
    return lambda events: workspace.stack.destroy(on_event=events, **options).summary.resource_changes


def _resource(urn: str | None) -> str:
    """A URN's type and name, as the engine's display shows them; the stack when it names none."""
    if not urn:
        return "the stack"
    parts = urn.split("::")
    return f"{parts[-2].rsplit('$', 1)[-1]} {parts[-1]}" if len(parts) >= 2 else urn


def _counts(changes: Mapping[Any, int] | None) -> dict[str, int]:
    return {str(getattr(op, "value", op)): int(count) for op, count in (changes or {}).items() if count}


def run_step(name: str, action: Action, log: Path) -> tuple[Step, Events]:
    """One engine run, timed: its operations' counts, or its failures in the engine's and the API
    server's words (the CLI's whole output is in `log`)."""
    events = Events()
    start = time.monotonic()
    progress(f"{name} ...")
    try:
        summary = action(events)
    except auto.CommandError as error:
        text = str(error)
        with log.open("a", encoding="utf-8") as out:
            out.write(f"--- {name}\n{text}\n")
        detail = _last_error_line(text)
        step = Step(name, False, time.monotonic() - start, {}, list(events.failures), detail)
    else:
        step = Step(name, not events.failures, time.monotonic() - start, _counts(summary), list(events.failures))
    step.slowest = events.slowest()
    slowest = ", ".join(f"{resource} {seconds} s" for resource, seconds in step.slowest[:3])
    progress(
        f"{name}: {'ok' if step.ok else 'failed'} in {step.seconds:.0f} s {dict(step.summary)}; slowest: {slowest}"
    )
    return step, events


def progress(text: str) -> None:
    """A line on stderr as the rehearsal goes (the report comes at the end)."""
    print(f"rehearse: {text}", file=sys.stderr, flush=True)


def _last_error_line(text: str) -> str:
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    errors = [line for line in lines if "error" in line.lower()]
    return (errors or lines or ["the engine failed"])[-1][:500]


def is_crd_gap(failures: Sequence[tuple[str, str]]) -> bool:
    """Whether a fresh cluster's preview failed only where a chart's object needs a CRD another
    chart installs (pulumi/pulumi-kubernetes#3176)."""
    gaps = [any(word in message for word in CRD_GAP_WORDS) for _, message in failures]
    others = [message for (_, message), gap in zip(failures, gaps, strict=True) if not gap]
    return any(gaps) and all(message.startswith("preview failed") for message in others)
