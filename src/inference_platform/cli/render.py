"""The offline render: run the real program under the Pulumi SDK's mocks and record what it registers.

The program is the one `pulumi up` runs: the `main` of the project's Pulumi.yaml. It is started the
way the Pulumi language host starts it (config set the same way, the entry point run with runpy
inside `run_in_stack`); only the resource monitor is a mock, which records every registration
instead of talking to a cluster.
"""

from __future__ import annotations

import asyncio
import gc
import os
import runpy
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pulumi
import pulumi.runtime
import pulumi.runtime.config
import pulumi.runtime.settings
from pulumi.runtime import rpc
from pulumi.runtime.mocks import MockMonitor, MockResourceArgs, Mocks

from inference_platform.cli.project import project_program
from inference_platform.cli.stack_file import StackFile
from inference_platform.stack.config import PROJECT

STACK_TYPE = "pulumi:pulumi:Stack"
CHART_TYPES = ("kubernetes:helm.sh/v4:Chart", "kubernetes:helm.sh/v3:Release")
# Where a platform stack's program finds its shards' files (cli/environment.py): the render points
# it at the directory of the stack file it was given.
STACK_DIR_ENV = "INFRA_STACK_DIR"
CONFIG_FILE_TYPE = "kubernetes:yaml/v2:ConfigFile"
SECRET_MASK = "[secret]"


@dataclass(frozen=True)
class Registration:
    urn: str
    parent: str
    type: str
    name: str
    custom: bool
    inputs: dict[str, Any]
    dependencies: tuple[str, ...] = ()
    """URNs this resource waits for (its explicit and implicit dependencies)."""
    transforms: tuple[pulumi.ResourceTransform, ...] = ()
    """The program's transforms of this resource (for a chart: of the objects Helm renders for it)."""


@dataclass
class RenderResult:
    registrations: list[Registration] = field(default_factory=list)
    outputs: dict[str, Any] = field(default_factory=dict)
    component_outputs: dict[str, dict[str, Any]] = field(default_factory=dict)
    """What each component passed to register_outputs, by URN."""

    @property
    def manifests(self) -> list[Registration]:
        return [
            r for r in self.registrations if r.custom and r.type.startswith("kubernetes:") and "apiVersion" in r.inputs
        ]

    @property
    def charts(self) -> list[Registration]:
        return [r for r in self.registrations if r.type in CHART_TYPES]

    @property
    def config_files(self) -> dict[str, str]:
        """The manifest files the program applies (yaml.v2.ConfigFile): their URLs by resource name."""
        return {r.name: r.inputs["file"] for r in self.registrations if r.type == CONFIG_FILE_TYPE}

    def component_labels(self) -> dict[str, str]:
        """For each registration's URN, `type::name` of its nearest enclosing component (or `stack`)."""
        by_urn = {r.urn: r for r in self.registrations}
        labels: dict[str, str] = {}
        for registration in self.registrations:
            parent = by_urn.get(registration.parent)
            while parent is not None and parent.custom:
                parent = by_urn.get(parent.parent)
            labels[registration.urn] = f"{parent.type}::{parent.name}" if parent is not None else "stack"
        return labels


def plain(value: Any) -> Any:
    """Property values as data: secrets masked, integral floats back to ints.

    The wire format carries every number as a double, so 8080 arrives as 8080.0.
    """
    if rpc.is_rpc_secret(value):
        return mask(rpc.unwrap_rpc_secret(value))
    if isinstance(value, Mapping):
        return {key: plain(item) for key, item in value.items()}
    if isinstance(value, list):
        return [plain(item) for item in value]
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return value


def mask(value: Any) -> Any:
    """The shape of a secret with every value hidden."""
    if isinstance(value, Mapping):
        return {key: mask(item) for key, item in value.items()}
    if isinstance(value, list):
        return [mask(item) for item in value]
    return SECRET_MASK


STACK_REFERENCE_TYPE = "pulumi:pulumi:StackReference"


class RecordingMocks(Mocks):
    def __init__(self, stack_outputs: Mapping[str, Mapping[str, Any]] | None = None) -> None:
        self.stack_outputs = dict(stack_outputs or {})
        """Other stacks' outputs by stack name: what a StackReference to one of them reads (a
        platform stack's render, for its shards). A stack not here has none."""

    def new_resource(self, args: MockResourceArgs) -> tuple[str | None, dict[Any, Any]]:
        if args.typ == STACK_REFERENCE_TYPE:
            name = str(args.inputs.get("name", args.name))
            outputs = self.stack_outputs.get(name) or self.stack_outputs.get(name.rsplit("/", 1)[-1]) or {}
            return name, {"name": name, "outputs": dict(outputs), "secretOutputNames": []}
        return f"{args.name}-id", dict(args.inputs)

    def call(self, args: Any) -> tuple[dict[Any, Any], list[tuple[str, str]] | None]:
        raise NotImplementedError(f"the program invoked {args.token}; the offline render supports no invokes")


def registered_transforms(callbacks: Any) -> tuple[pulumi.ResourceTransform, ...]:
    """The program's own transform functions behind a registration's transform callbacks. The
    engine calls them through the callback server for every child of a remote component (a
    chart's objects); the offline render applies them to the objects Helm renders the same way."""
    if not callbacks:
        return ()
    server = pulumi.runtime.settings.SETTINGS.callbacks
    by_token = {token: function for function, token in getattr(server, "_transforms", {}).items()}
    missing = [callback.token for callback in callbacks if callback.token not in by_token]
    if missing:
        raise RuntimeError(f"the SDK's callback server no longer maps transforms to tokens: {missing}")
    return tuple(by_token[callback.token] for callback in callbacks)


class RecordingMonitor(MockMonitor):
    def __init__(self, mocks: Mocks, result: RenderResult) -> None:
        super().__init__(mocks)
        self.result = result

    def RegisterResource(self, request: Any) -> Any:  # noqa: N802 - the gRPC method's name
        response = super().RegisterResource(request)  # type: ignore[no-untyped-call]
        if request.type != STACK_TYPE:
            state = self.resources[response.urn].state
            self.result.registrations.append(
                Registration(
                    urn=response.urn,
                    parent=request.parent,
                    type=request.type,
                    name=request.name,
                    custom=bool(request.custom),
                    inputs=plain(state),
                    dependencies=tuple(sorted(request.dependencies)),
                    transforms=registered_transforms(request.transforms),
                )
            )
        return response

    def RegisterResourceOutputs(self, request: Any) -> Any:  # noqa: N802
        outputs = plain(rpc.deserialize_properties(request.outputs))
        if request.urn.split("::")[2] == STACK_TYPE:  # urn:pulumi:<stack>::<project>::<type>::<name>
            self.result.outputs = outputs
        else:
            self.result.component_outputs[request.urn] = outputs
        return super().RegisterResourceOutputs(request)  # type: ignore[no-untyped-call]


def _run_entry_point(program: Path) -> None:
    """What the language host's exec script does inside run_in_stack."""
    runpy.run_path(str(program), run_name="__main__")


@contextmanager
def batch_gc() -> Iterator[None]:
    """A render allocates hundreds of thousands of small objects that live to its end. CPython's
    default thresholds then run full collections over all of them again and again: a third of a
    400-model render, growing faster than the render itself. Freeze what exists and collect
    young objects less often for the duration; the settings come back afterwards. (No collection
    first: in a long-lived process, a test run, it costs a third of a second per render, and what
    it would free is freed by the first collection after the render.)"""
    threshold = gc.get_threshold()
    gc.freeze()
    gc.set_threshold(50_000, 20, 100)
    try:
        yield
    finally:
        gc.set_threshold(*threshold)
        gc.unfreeze()


def run_program(
    stack: str,
    stack_file: StackFile | None,
    program: Path | None = None,
    project: str = PROJECT,
    stack_outputs: Mapping[str, Mapping[str, Any]] | None = None,
) -> RenderResult:
    """Run the program's entry point (the project's, by default) under mocks with the stack file's
    config (none without one), as the Pulumi project `project`; a StackReference reads the stack's
    outputs in `stack_outputs`. The program finds the environment's other stack files beside the
    stack file, as under `pulumi up` it finds them in the project's directory."""
    entry_point = program or project_program()
    config, secret_keys = (stack_file.config, stack_file.secret_keys) if stack_file is not None else ({}, [])
    directory = str(stack_file.path.resolve().parent) if stack_file is not None else None
    with batch_gc(), _environment(STACK_DIR_ENV, directory):
        return record(
            lambda: _run_entry_point(entry_point), stack, config, secret_keys, project, stack_outputs=stack_outputs
        )


@contextmanager
def _environment(name: str, value: str | None) -> Iterator[None]:
    """An environment variable set for the length of the block (left alone for None)."""
    before = os.environ.get(name)
    if value is not None:
        os.environ[name] = value
    try:
        yield
    finally:
        if before is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = before


def _discard(_: object) -> None:
    """A program's own return value is not the language host's business."""


def record(
    program: Callable[[], object],
    stack: str,
    config: Mapping[str, str] | None = None,
    secret_keys: Sequence[str] = (),
    project: str = PROJECT,
    *,
    stack_outputs: Mapping[str, Mapping[str, Any]] | None = None,
) -> RenderResult:
    """Run `program` the way the language host runs one (inside run_in_stack, with the stack's
    config set), under mocks that record every registration instead of talking to a cluster."""
    result = RenderResult()
    loop = asyncio.new_event_loop()
    asyncio.set_event_loop(loop)
    try:
        pulumi.runtime.set_all_config(dict(config or {}), list(secret_keys))
        mocks = RecordingMocks(stack_outputs)
        pulumi.runtime.set_mocks(
            mocks, project=project, stack=stack, preview=False, monitor=RecordingMonitor(mocks, result)
        )
        # set_mocks makes a root stack of its own; the language host's run_in_stack makes the real one.
        pulumi.runtime.settings.set_root_resource(None)  # type: ignore[arg-type]
        loop.run_until_complete(pulumi.runtime.run_in_stack(lambda: _discard(program())))
    finally:
        pulumi.runtime.settings.set_root_resource(None)  # type: ignore[arg-type]
        pulumi.runtime.config.CONFIG.set({})
        loop.close()
        asyncio.set_event_loop(None)
    return result
