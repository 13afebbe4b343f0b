"""`infra rehearse`: the steps of a rehearsal, in order (docs/rehearsal.md).

A control plane starts with fake nodes shaped like the stack's declarations; then, with the real
CLI: `pulumi preview`, `pulumi up`, the placement the scheduler made, a second
`pulumi up --expect-no-changes`, and `pulumi destroy`, checked to leave nothing of the program's.
With --diff-from, the old stack file is brought up first and the new one previewed (`--diff`) and
brought up over it. Everything started is stopped at the end, on a failure or on Ctrl-C."""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType
from typing import Any

import yaml
from pulumi import automation as auto

from inference_platform.analysis.capacity import Plan
from inference_platform.analysis.rehearsal import (
    NodeGroup,
    NodeRequest,
    Outcome,
    Report,
    Step,
    compare_placement,
    markdown,
    model_of,
    node_groups,
    node_manifests,
    object_identity,
    pod_placement,
)
from inference_platform.cli.diff import object_label
from inference_platform.cli.environment import read_environment
from inference_platform.cli.exit_codes import ExitCode
from inference_platform.cli.rehearsal import engine
from inference_platform.cli.rehearsal.control_plane import (
    ControlPlane,
    ControlPlaneError,
    KubeApi,
    KubeApiError,
    api_path,
    find_tools,
    start,
)
from inference_platform.cli.rehearsal.processes import Children, adopt_orphans
from inference_platform.cli.stack_file import (
    SECRET_PLACEHOLDER,
    read_stack_config,
    read_stack_file,
    read_stack_text,
    unseal,
)
from inference_platform.config.errors import ConfigError
from inference_platform.config.project import PROJECT
from inference_platform.serving.model_storage import pvc_location
from inference_platform.stack.config import StackConfig, decode_value, project_values
from inference_platform.stack.fleet import PLATFORM_STACK_KEY, platform_stack_name, stack_kind
from inference_platform.stack.program import run as run_program

OUTCOME_CODES = {
    Outcome.PASSED: ExitCode.OK,
    Outcome.FAILED: ExitCode.REHEARSAL_FAILED,
    Outcome.PODS_PENDING: ExitCode.PODS_PENDING,
    Outcome.PLACEMENT_DISAGREES: ExitCode.PLACEMENT_DISAGREES,
    Outcome.INTERRUPTED: ExitCode.INTERRUPTED,
}
STORAGE_CLASS = "rehearsal-static"
STATIC_VOLUMES = 24
PLACEMENT_SECONDS = 120.0
DESTROY_SETTLE_SECONDS = 120.0
SKIPPED_RESOURCES = frozenset({"events", "leases", "endpoints", "endpointslices", "componentstatuses"})
"""What controllers keep writing (or the API server makes per Service): never the program's own."""
APISERVICE = "kubernetes:apiregistration.k8s.io/v1:APIService"
PASSPHRASE_ENV = "PULUMI_CONFIG_PASSPHRASE"
REPLACEMENT_STEPS = {"create-replacement": "replace", "delete-replaced": "replace"}
"""The engine's steps of one replacement, reported as the one replace they make."""

Program = Callable[[Callable[[str], dict[str, Any]]], Callable[[], None]]
"""Makes the inline program from a reader of other stacks' files (a platform stack's shards')."""


def default_program(read_stack: Callable[[str], dict[str, Any]]) -> Callable[[], None]:
    return lambda: run_program(read_stack)


@dataclass(frozen=True)
class Options:
    stack: str
    config: Path
    charts_dir: Path
    manifests_dir: Path | None
    tools_dir: Path | None = None
    nodes: NodeRequest = field(default_factory=NodeRequest)
    diff_from: str | None = None
    markdown: Path | None = None
    json: Path | None = None
    stored: Path | None = None
    keep: bool = False


class RehearsalInputError(Exception):
    """Bad usage: a file or a ref that cannot be read; the message says which."""


# --- The stack files -----------------------------------------------------------------------------


def old_stack_text(reference: str, config: Path) -> str:
    """--diff-from: a stack file's text, or the stack file's text at a git ref."""
    path = Path(reference)
    if path.is_file():
        return read_stack_text(path)
    try:
        root = subprocess.run(
            ["git", "rev-parse", "--show-toplevel"],
            cwd=config.resolve().parent,
            check=True,
            capture_output=True,
            text=True,
        ).stdout.strip()
        relative = config.resolve().relative_to(Path(root).resolve())
        return subprocess.run(
            ["git", "show", f"{reference}:{relative.as_posix()}"], cwd=root, check=True, capture_output=True, text=True
        ).stdout
    except (subprocess.CalledProcessError, ValueError, FileNotFoundError) as error:
        why = getattr(error, "stderr", None) or str(error)
        raise RehearsalInputError(
            f"--diff-from {reference}: neither a file nor {config} at a git ref ({why.strip()})"
        ) from None


def config_path(path: tuple[int | str, ...]) -> str:
    """A value's path as `pulumi config set --path` reads it: namespace:key, then [i] and ["k"]."""
    head, *rest = path
    return str(head) + "".join(f"[{part}]" if isinstance(part, int) else f'["{part}"]' for part in rest)


@dataclass(frozen=True)
class Settings:
    """A stack file as the rehearsal hands it to the CLI."""

    text: str
    placeholders: tuple[str, ...] = ()
    """Config paths of secure values set as placeholder secrets (no passphrase at hand)."""


def settings(text: str, passphrase_given: bool) -> Settings:
    """With the stack's passphrase, the file as it is; without it, a copy without its secure values
    and secrets provider, each secure value then set as a placeholder secret under a throwaway
    passphrase (cli/stack_file.py's placeholder, as the offline render reads it)."""
    if passphrase_given:
        return Settings(text)
    document = yaml.safe_load(text) or {}
    config, found = unseal(document.get("config") or {}, ())
    if not found and "encryptionsalt" not in document:
        return Settings(text)
    for key in ("encryptionsalt", "secretsprovider", "encryptedkey"):
        document.pop(key, None)
    document["config"] = config
    return Settings(yaml.safe_dump(document, sort_keys=False), tuple(config_path(where) for where in found))


def write_settings(workspace: engine.Workspace, name: str, stack_settings: Settings) -> None:
    path = Path(workspace.stack.workspace.work_dir) / f"Pulumi.{name}.yaml"
    text = stack_settings.text
    if stack_settings.placeholders or "encryptionsalt" not in text:
        # The copy keeps the salt `stack init` made for the throwaway passphrase.
        made = yaml.safe_load(path.read_text(encoding="utf-8")) if path.is_file() else None
        salt = (made or {}).get("encryptionsalt")
        if salt:
            text = yaml.safe_dump({"encryptionsalt": salt, **(yaml.safe_load(text) or {})}, sort_keys=False)
    path.write_text(text, encoding="utf-8")
    for key in stack_settings.placeholders:
        workspace.stack.set_config(key, auto.ConfigValue(SECRET_PLACEHOLDER, secret=True), path=True)


# --- The cluster: storage, claims, nodes -----------------------------------------------------------


def storage_objects() -> list[tuple[str, dict[str, Any]]]:
    """A default StorageClass with static volumes (no provisioner runs here), for the claims of
    StatefulSets and the models' pvc:// claims."""
    objects: list[tuple[str, dict[str, Any]]] = [
        (
            api_path("storage.k8s.io/v1", "storageclasses"),
            {
                "apiVersion": "storage.k8s.io/v1",
                "kind": "StorageClass",
                "metadata": {
                    "name": STORAGE_CLASS,
                    "annotations": {"storageclass.kubernetes.io/is-default-class": "true"},
                },
                "provisioner": "kubernetes.io/no-provisioner",
                "volumeBindingMode": "Immediate",
            },
        )
    ]
    for index in range(STATIC_VOLUMES):
        objects.append(
            (
                api_path("v1", "persistentvolumes"),
                {
                    "apiVersion": "v1",
                    "kind": "PersistentVolume",
                    "metadata": {"name": f"rehearsal-{index}"},
                    "spec": {
                        "capacity": {"storage": "1Ti"},
                        "accessModes": ["ReadWriteOnce", "ReadOnlyMany", "ReadWriteMany"],
                        "storageClassName": STORAGE_CLASS,
                        "persistentVolumeReclaimPolicy": "Retain",
                        "hostPath": {"path": f"/rehearsal/volume-{index}"},
                    },
                },
            )
        )
    return objects


def pvc_claims(values: Any) -> set[str]:
    """The claims the stack's pvc:// storage URIs name: the user's, which a rehearsal creates."""
    found: set[str] = set()
    if isinstance(values, str) and values.startswith("pvc://"):
        found.add(pvc_location(values)[0])
    elif isinstance(values, Mapping):
        for item in values.values():
            found |= pvc_claims(item)
    elif isinstance(values, list):
        for item in values:
            found |= pvc_claims(item)
    return found


class ClaimMaker(threading.Thread):
    """During `up`: each pvc:// claim a workload mounts, created in its namespace once that exists,
    as the user would have (the program never creates them)."""

    def __init__(self, api: KubeApi, claims: set[str]) -> None:
        super().__init__(daemon=True)
        self.api = api
        self.claims = claims
        self.made: list[str] = []
        self.done = threading.Event()

    def run(self) -> None:
        while not self.done.wait(1.0):
            with contextlib.suppress(KubeApiError, OSError):
                self._make()

    def _make(self) -> None:
        for kind in ("deployments", "statefulsets"):
            for item in self.api.get(api_path("apps/v1", kind)).get("items", []):
                namespace = item["metadata"]["namespace"]
                volumes = item["spec"]["template"]["spec"].get("volumes", [])
                for volume in volumes:
                    claim = volume.get("persistentVolumeClaim", {}).get("claimName")
                    label = f"{namespace}/{claim}"
                    if claim in self.claims and label not in self.made:
                        self.made.append(label)
                        with contextlib.suppress(KubeApiError):
                            self.api.create(api_path("v1", "persistentvolumeclaims", namespace), _claim(claim))


def _claim(name: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "metadata": {"name": name},
        "spec": {"accessModes": ["ReadOnlyMany"], "resources": {"requests": {"storage": "1Gi"}}},
    }


def prepare_cluster(api: KubeApi, groups: list[NodeGroup]) -> None:
    for path, body in storage_objects():
        api.create(path, body)
    for node in node_manifests(groups):
        api.create(api_path("v1", "nodes"), node)


AUTOMANAGED = "kube-aggregator.kubernetes.io/automanaged"
"""The API server's own APIServices, one per group and version a CRD serves (a kept CRD's stay)."""


def identities(objects: list[dict[str, Any]]) -> set[tuple[str, str, str, str]]:
    """The objects' identities, but those the API server makes for itself."""
    return {object_identity(obj) for obj in objects if AUTOMANAGED not in (obj.get("metadata", {}).get("labels") or {})}


def _label(identity: tuple[str, str, str, str]) -> str:
    _, kind, namespace, name = identity
    return f"{kind} {namespace + '/' if namespace else ''}{name}"


# --- Placement -------------------------------------------------------------------------------------


def wait_for_pods(api: KubeApi, seconds: float = PLACEMENT_SECONDS) -> list[dict[str, Any]]:
    """The pods once the controllers made them all and the scheduler judged each: every
    autoscaler's target at its minimum at least, every workload with the pods it asks for (or the
    API server's refusal of them), every pod bound or marked unschedulable, for three polls in a row."""
    deadline = time.monotonic() + seconds
    stable = 0
    previous: tuple[Any, ...] = ()
    pods: list[dict[str, Any]] = []
    while time.monotonic() < deadline and stable < 3:
        pods = api.get(api_path("v1", "pods")).get("items", [])
        judged = all(p["spec"].get("nodeName") or _unschedulable(p) for p in pods)
        state = tuple(sorted((p["metadata"]["name"], p["spec"].get("nodeName") or "") for p in pods))
        stable = stable + 1 if judged and _workloads_settled(api) and state == previous else 0
        previous = state
        time.sleep(1.0)
    return pods


def _workloads_settled(api: KubeApi) -> bool:
    """Whether every HorizontalPodAutoscaler's target holds its minimum replicas (the controller
    scales a target up to it without metrics), and every Deployment, ReplicaSet and StatefulSet
    has made the pods its spec asks for, or was refused them."""
    workloads = {
        (kind, item["metadata"]["namespace"], item["metadata"]["name"]): item
        for kind in ("deployments", "replicasets", "statefulsets")
        for item in api.get(api_path("apps/v1", kind)).get("items", [])
    }
    for hpa in api.get(api_path("autoscaling/v2", "horizontalpodautoscalers")).get("items", []):
        target = hpa["spec"]["scaleTargetRef"]
        kind = {"Deployment": "deployments", "StatefulSet": "statefulsets"}.get(target.get("kind"), "")
        workload = workloads.get((kind, hpa["metadata"]["namespace"], target.get("name")))
        if workload is not None and int(workload["spec"].get("replicas", 1)) < int(hpa["spec"].get("minReplicas", 1)):
            return False
    for item in workloads.values():
        status = item.get("status", {})
        refused = any(c.get("type") == "ReplicaFailure" for c in status.get("conditions", []))
        if int(status.get("replicas", 0)) < int(item["spec"].get("replicas", 1)) and not refused:
            return False
    return True


def _unschedulable(pod: Mapping[str, Any]) -> bool:
    return any(
        c.get("type") == "PodScheduled" and c.get("status") == "False"
        for c in pod.get("status", {}).get("conditions", [])
    )


def refused_pods(api: KubeApi) -> list[tuple[str, str]]:
    """The API server's refusals of a controller's pods (a ReplicaSet's ReplicaFailure: Pod Security
    among them): each controller, with the API server's words."""
    out = []
    for kind in ("replicasets", "statefulsets", "daemonsets"):
        for item in api.get(api_path("apps/v1", kind)).get("items", []):
            for condition in item.get("status", {}).get("conditions", []):
                if condition.get("type") == "ReplicaFailure" and condition.get("status") == "True":
                    meta = item["metadata"]
                    out.append((f"{kind[:-1]} {meta['namespace']}/{meta['name']}", str(condition.get("message"))))
    return out


def unmade_models(api: KubeApi) -> dict[str, str]:
    """Models whose pods no controller makes here: those of LeaderWorkerSets (its controller's pod
    is placed, never run)."""
    try:
        items = api.get(api_path("leaderworkerset.x-k8s.io/v1", "leaderworkersets")).get("items", [])
    except KubeApiError:
        return {}
    out = {}
    for item in items:
        model = model_of(item.get("metadata", {}))
        if model is not None:
            out[model] = f"LeaderWorkerSet {item['metadata']['name']}: its controller does not run here"
    return out


# --- The rehearsal ---------------------------------------------------------------------------------


@dataclass
class Stacks:
    """The stacks to rehearse, in order (a shard's platform stack first), and the plan's config."""

    order: list[tuple[str, Path]]
    config: StackConfig
    values: dict[str, Any]


def read_stacks(stack: str, config: Path) -> Stacks:
    """The stacks a rehearsal brings up: the stack, and before a shard its platform stack (from
    the file beside it); the config whose nodes and plan are rehearsed (a platform stack's and a
    shard's: their whole environment's). Raises ConfigError at the stack file's lines."""
    values = project_values(read_stack_file(config).config)
    kind = stack_kind(values)
    if kind == "single":
        return Stacks([(stack, config)], read_stack_config(config)[1], values)
    if kind == "platform":
        return Stacks([(stack, config)], read_environment(config, stack)[1], values)
    platform = platform_stack_name(str(decode_value(values[PLATFORM_STACK_KEY])))
    platform_path = config.parent / f"Pulumi.{platform}.yaml"
    return Stacks([(platform, platform_path), (stack, config)], read_environment(platform_path, platform)[1], values)


def _reader(directory: Path) -> Callable[[str], dict[str, Any]]:
    return lambda name: project_values(read_stack_file(directory / f"Pulumi.{name}.yaml").config)


def _on_sigterm(_: int, __: FrameType | None) -> None:
    raise KeyboardInterrupt


@dataclass
class Run:
    """One rehearsal's state: its directory, control plane, stacks and report."""

    options: Options
    program: Program
    directory: Path
    report: Report
    plane: ControlPlane | None = None
    old_text: str | None = None
    """--diff-from: the old stack file's text."""
    workspaces: dict[str, engine.Workspace] = field(default_factory=dict)
    baseline: set[tuple[str, str, str, str]] = field(default_factory=set)

    @property
    def log(self) -> Path:
        return self.directory / "engine.log"


def rehearse(options: Options, program: Program = default_program) -> tuple[Report, ExitCode]:
    """The whole rehearsal; its report and exit status. Stops everything it started."""
    stacks = read_stacks(options.stack, options.config)
    tools = find_tools(options.tools_dir)
    old_text = None if options.diff_from is None else old_stack_text(options.diff_from, options.config)
    report = Report(options.stack, str(options.config))
    directory = Path(tempfile.mkdtemp(prefix="infra-rehearse-"))
    run = Run(options, program, directory, report, old_text=old_text)
    adopt_orphans()
    children = Children(directory)
    main_thread = threading.current_thread() is threading.main_thread()  # signals are the main thread's
    previous = signal.signal(signal.SIGTERM, _on_sigterm) if main_thread else None
    restore: Callable[[], None] | None = None
    started = time.monotonic()
    try:
        plane = start(directory, tools, children)
        run.plane = plane
        engine.progress(f"control plane at {plane.api.server} in {directory} ({time.monotonic() - started:.0f} s)")
        plan = stacks.config.capacity()
        groups, notes = node_groups(
            plan, stacks.config.platform.gpu_nodes, stacks.config.platform.npu_nodes,
            stacks.config.platform.hami.enabled, options.nodes,
        )  # fmt: skip
        report.nodes, report.notes = groups, notes
        prepare_cluster(plane.api, groups)
        run.baseline = identities(plane.api.all_objects(SKIPPED_RESOURCES))
        passphrase = os.environ.get(PASSPHRASE_ENV)
        if passphrase is None:
            report.notes.append(
                f"no ${PASSPHRASE_ENV}: secure values rehearsed as placeholder secrets under a throwaway passphrase"
            )
        env = engine.engine_environment(directory, tools, plane.kubeconfig, passphrase or secrets.token_hex(16))
        restore = engine.isolated_environ(env)
        _steps(
            run, stacks=stacks, plan=plan, groups=groups, tools=tools, env=env, passphrase_given=passphrase is not None
        )
    except KeyboardInterrupt:
        report.interrupted = True
    finally:
        # A second Ctrl-C must not cut the stopping short: what was started is stopped first.
        interrupt = signal.signal(signal.SIGINT, signal.SIG_IGN) if main_thread else None
        report.seconds = time.monotonic() - started
        if restore is not None:
            restore()
        children.stop()
        if previous is not None:
            signal.signal(signal.SIGTERM, previous)
        if interrupt is not None:
            signal.signal(signal.SIGINT, interrupt)
        if options.keep:
            report.notes.append(f"kept: {directory} (logs, the engine's output, the state)")
        _write_reports(options, report)
        if not options.keep:
            shutil.rmtree(directory, ignore_errors=True)
    return report, OUTCOME_CODES[report.outcome]


def _write_reports(options: Options, report: Report) -> None:
    if options.markdown is not None:
        options.markdown.write_text(markdown(report), encoding="utf-8")
    if options.json is not None:
        options.json.write_text(json.dumps(report.as_json(), indent=2) + "\n", encoding="utf-8")


def _steps(
    run: Run,
    *,
    stacks: Stacks,
    plan: Plan,
    groups: list[NodeGroup],
    tools: Mapping[str, Path],
    env: Mapping[str, str],
    passphrase_given: bool,
) -> None:
    options, report = run.options, run.report
    assert run.plane is not None
    api = run.plane.api
    # Nodes other than the declared (--gpu-nodes, --npu-nodes): pods may stay Pending anywhere.
    skipper = engine.AwaitSkipper(everything=options.nodes.gpu_nodes is not None or bool(options.nodes.npu_nodes))
    sources = engine.local_sources(options.charts_dir, options.manifests_dir)
    claims = ClaimMaker(api, pvc_claims({k: decode_value(v) for k, v in stacks.values.items()}))
    claims.start()
    try:
        brought_up = _up_all(
            run, stacks, tools=tools, env=env, skipper=skipper, sources=sources, passphrase_given=passphrase_given
        )
    finally:
        claims.done.set()
    if skipper.skipped:
        report.notes.append(
            f"pulumi.com/skipAwait added to {len(skipper.skipped)} objects: " + "; ".join(sorted(skipper.skipped))
        )
    if claims.made:
        report.notes.append(f"made the stack's pvc:// claims, as their owner would: {', '.join(claims.made)}")
    if brought_up:
        _observe(run, plan, groups)
        _up_again(run, stacks)
    # Not reached on Ctrl-C: the throwaway control plane goes with everything else.
    _destroy(run, stacks)


def _suffix(run: Run, name: str) -> str:
    return "" if name == run.options.stack else f" ({name}, the platform stack)"


def _up_all(
    run: Run,
    stacks: Stacks,
    *,
    tools: Mapping[str, Path],
    env: Mapping[str, str],
    skipper: engine.AwaitSkipper,
    sources: Any,
    passphrase_given: bool,
) -> bool:
    """Each stack brought up in turn (a shard's platform stack first); whether all were."""
    for name, path in stacks.order:
        program = run.program(_reader(path.parent))
        try:
            workspace = engine.open_stack(
                run.directory, name=name, project=PROJECT, program=program, tools=tools, env=env,
                skipper=skipper, sources=sources,
            )  # fmt: skip
        except auto.CommandError as error:
            run.report.steps.append(Step(f"stack init{_suffix(run, name)}", False, 0.0, {}, [], str(error)[-500:]))
            return False
        run.workspaces[name] = workspace
        texts = [read_stack_text(path)]
        if name == run.options.stack and run.old_text is not None:
            texts.insert(0, run.old_text)
        if not _bring_up(run, workspace, name, texts, passphrase_given=passphrase_given):
            return False
    return True


def _observe(run: Run, plan: Plan, groups: list[NodeGroup]) -> None:
    """What the controllers and the scheduler made of it: refused pods, the placement, the stored objects."""
    assert run.plane is not None
    api, report = run.plane.api, run.report
    engine.progress("placement ...")
    start = time.monotonic()
    pods = [pod_placement(p) for p in wait_for_pods(api)]
    pending = sum(1 for p in pods if p.node is None)
    engine.progress(f"placement: {len(pods)} pods, {pending} not placed, in {time.monotonic() - start:.0f} s")
    refused = refused_pods(api)
    report.placement = compare_placement(pods, plan, groups, unmade_models(api))
    if refused:
        report.steps.append(Step("pods admitted", False, 0.0, {}, refused))
    if run.options.stored is not None:
        stored = [o for o in api.all_objects(SKIPPED_RESOURCES) if object_identity(o) not in run.baseline]
        run.options.stored.write_text(json.dumps(stored, indent=1, sort_keys=True), encoding="utf-8")


def _up_again(run: Run, stacks: Stacks) -> None:
    """A second `up --expect-no-changes` of each stack: the program and the provider agree with
    what the cluster stores."""
    for name, _ in stacks.order:
        step, _ = _step(run, f"up again{_suffix(run, name)}", engine.up(run.workspaces[name], expect_no_changes=True))
        changed = {op: n for op, n in step.summary.items() if op != "same"}
        if changed:
            step.ok = False
            step.detail = f"the second up changed what the first made: {changed}"


def _step(run: Run, name: str, action: engine.Action) -> tuple[Step, engine.Events]:
    """One engine run, its step added to the report."""
    step, events = engine.run_step(name, action, run.log)
    run.report.steps.append(step)
    return step, events


def _bring_up(run: Run, workspace: engine.Workspace, name: str, texts: list[str], *, passphrase_given: bool) -> bool:
    """preview and up of each text in turn (with --diff-from, the old one is only brought up);
    whether they passed."""
    suffix = _suffix(run, name)
    for index, text in enumerate(texts):
        write_settings(workspace, name, settings(text, passphrase_given))
        if len(texts) > 1 and index == 0:
            if not _step(run, f"up (old){suffix}", engine.up(workspace))[0].ok:
                return False
            continue
        preview, events = _step(run, f"preview{suffix}", engine.preview(workspace, diff=True))
        gap = not preview.ok and engine.is_crd_gap(preview.failures)
        if gap:
            _crd_gap(run, preview, suffix)
        if len(texts) > 1:
            run.report.changes = _changes(events)
        if not preview.ok or not _step(run, f"up{suffix}", engine.up(workspace))[0].ok:
            return False
        if (
            gap
            and not _step(run, f"preview (after up){suffix}", engine.preview(workspace, expect_no_changes=True))[0].ok
        ):
            return False
    return True


def _crd_gap(run: Run, preview: Step, suffix: str) -> None:
    """A fresh cluster's preview that failed only for CRDs another chart installs: a note, not a failure."""
    run.report.notes.append(
        f"preview{suffix}: {len(preview.failures)} objects of a chart need a CRD another chart installs, which a "
        "preview of a fresh cluster cannot know (pulumi/pulumi-kubernetes#3176): on a fresh cluster run the first "
        "`pulumi up --skip-preview`; the preview after up shows the rest"
    )
    preview.ok = True
    preview.failures = []
    preview.detail = "fresh cluster: objects whose CRDs another chart installs not previewed (#3176)"


def _changes(events: engine.Events) -> list[tuple[str, str]]:
    """The preview's changes, each as `infra diff` labels an object (kind namespace/name), or the
    engine's type and name for what is not a Kubernetes object; a replacement's steps as one replace."""
    out = []
    for step, urn, type_, inputs in events.steps:
        if type_.startswith("pulumi:providers:"):
            continue  # the engine's own bookkeeping of default providers, which its summary does not count either
        op = REPLACEMENT_STEPS.get(step, step)
        if type_.startswith("kubernetes:") and not type_.startswith(engine.COMPONENT_TYPES) and inputs:
            manifest = {
                "apiVersion": inputs.get("apiVersion"),
                "kind": inputs.get("kind"),
                "metadata": inputs.get("metadata") or {},
            }
            label = object_label(manifest)
        else:
            label = f"{type_} {urn.rsplit('::', 1)[-1]}"
        out.append((op, label))
    return sorted(set(out))


def _destroy(run: Run, stacks: Stacks) -> None:
    """destroy, the shard before its platform stack, APIServices first (the namespace controller
    cannot empty a namespace while an aggregated API it must list does not answer); then what it
    left of the program's."""
    report = run.report
    kept: set[tuple[str, str, str, str]] = set()
    for name, _ in reversed(stacks.order):
        workspace = run.workspaces.get(name)
        if workspace is None:
            continue
        state = workspace.stack.export_stack().deployment or {}
        resources = state.get("resources", [])
        kept |= {
            object_identity(r.get("outputs") or {})
            for r in resources
            if r.get("retainOnDelete") and r.get("type", "").startswith("kubernetes:")
        }
        services = [r["urn"] for r in resources if r.get("type") == APISERVICE]
        with contextlib.suppress(Exception):
            workspace.stack._run_pulumi_cmd_sync(["state", "unprotect", "--all", "--yes"])
        suffix = _suffix(run, name)
        if services:
            _step(run, f"destroy APIServices{suffix}", engine.destroy(workspace, target=services))
        _step(run, f"destroy{suffix}", engine.destroy(workspace))
    report.kept = sorted(_label(identity) for identity in kept)
    if run.plane is not None and run.workspaces:
        start = time.monotonic()
        report.left_behind = _left_behind(run.plane.api, run.baseline, kept)
        engine.progress(f"left behind: {len(report.left_behind)} objects, in {time.monotonic() - start:.0f} s")


def _left_behind(
    api: KubeApi, baseline: set[tuple[str, str, str, str]], kept: set[tuple[str, str, str, str]]
) -> list[str]:
    """What the cluster holds after destroy that it did not before (but what was kept on purpose),
    once the garbage collector and the namespace controller have had their time."""
    deadline = time.monotonic() + DESTROY_SETTLE_SECONDS
    while True:
        left = sorted(_label(i) for i in identities(api.all_objects(SKIPPED_RESOURCES)) - baseline - kept)
        if not left or time.monotonic() > deadline:
            return left
        time.sleep(2.0)


def main(options: Options) -> ExitCode:
    """Run a rehearsal and print its Markdown report; config and tool problems as the other
    commands report them (exit 2)."""
    try:
        report, code = rehearse(options)
    except ConfigError as error:
        print(error.report(), file=sys.stderr)
        return ExitCode.CONFIG_ERROR
    except (ControlPlaneError, RehearsalInputError) as error:
        print(f"rehearse: {error}", file=sys.stderr)
        return ExitCode.CONFIG_ERROR
    if options.markdown is None:
        print(markdown(report))
    else:
        print(f"rehearsal of {options.stack}: {report.outcome.value} (report: {options.markdown})")
    return code
