"""Environments past one stack: a platform stack and the model stacks (shards) that read it.

An environment is one stack (`Pulumi.<env>.yaml` with the platform and every model, as it always
was), or a platform stack and its shards:

- the platform stack (`Pulumi.<env>.yaml`) holds the platform's settings and names its shards,
  `inference-platform:shards: [<stack>, ...]`; it installs the cluster platform;
- each shard (`Pulumi.<shard>.yaml`) holds some of the environment's models and pipelines, and names
  the platform stack it runs on, `inference-platform:platformStack: <org>/<project>/<stack>` (a
  pulumi.StackReference); its platform stack's file is `Pulumi.<last part of that name>.yaml`.

This module is the one place that knows the two keys and tells the kinds apart.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any, Literal

import pulumi
import yaml
from pydantic import Field, ValidationError

from inference_platform.analysis import comparison
from inference_platform.analysis.dashboards import model_dashboard
from inference_platform.config.base import ConfigModel, DNS1123Label, DNSSubdomain
from inference_platform.config.errors import ConfigError, Problem, format_path
from inference_platform.config.secrets import secret_paths
from inference_platform.kube import register
from inference_platform.platform import grafana, prometheus
from inference_platform.platform.keda import KedaRef
from inference_platform.serving.access import Workload
from inference_platform.serving.inference_service.routing import mesh_route_name
from inference_platform.serving.model_namespace import PART_OF_LABELS
from inference_platform.stack import network, platform_components, serving_layer
from inference_platform.stack.config import (
    PROJECT,
    StackConfig,
    decode_value,
    decode_within_limits,
    parse_stack_config,
)
from inference_platform.stack.elsewhere import Elsewhere, Neighbour, Usage, beside
from inference_platform.stack.platform_layer import deploy_platform

SHARDS_KEY = "shards"
"""A platform stack's key (under the project's namespace): the stack names of its shards."""
PLATFORM_STACK_KEY = "platformStack"
"""A shard's key: the platform stack it reads, as a StackReference names it (<org>/<project>/<stack>)."""

StackKind = Literal["single", "platform", "shard"]


def stack_kind(values: Mapping[str, Any]) -> StackKind:
    """What a stack's config (the project's keys, without the `inference-platform:` prefix) makes it."""
    if PLATFORM_STACK_KEY in values:
        return "shard"
    if SHARDS_KEY in values:
        return "platform"
    return "single"


def repeated_shard(shards: Sequence[object], index: int) -> str | None:
    """Why a platform stack's `shards` may not list what it lists at `index`: the same stack
    earlier in the list (the one check `infra stacks`, the render and `pulumi up` make)."""
    name = shards[index]
    return f"lists {name!r} twice" if name in shards[:index] else None


def platform_stack_name(reference: str) -> str:
    """The stack name of a StackReference's fully qualified name (<org>/<project>/<stack>, or a
    bare stack name): its platform stack's file is Pulumi.<that>.yaml."""
    return reference.rsplit("/", 1)[-1]


# --- What a platform stack exports for its shards ---------------------------------------------

FACTS_OUTPUT = "inferencePlatform"
"""The platform stack's output its shards read through their StackReference: the platform as a
shard's models need it, and the environment's other models and pipelines."""
SECRET = "[secret]"
# Secret settings a platform stack holds (marked SECRET in their models): never exported, a
# placeholder in their place.
SECRET_KEYS = {
    key: tuple(path[1:] for path in secret_paths(StackConfig) if path[0] == key) for key in ("platform", "storage")
}
RULES_CONFIG_MAP = "inference-rules-{stack}"
DASHBOARDS_CONFIG_MAP = "inference-dashboards-{stack}"
ALERTING_RULES_FILE = "alerting_rules.yml"


class DirectoryEntry(ConfigModel):
    """One model or pipeline of the environment, as the other stacks need to know it."""

    stack: str = Field(description="The shard that holds it.")
    index: int = Field(description="Its place among the environment's models (or pipelines), shard by shard.")
    kind: Literal["model", "pipeline"]
    workload: Workload
    object_names: list[str] = Field(description="The names its Kubernetes objects take.")
    calls: list[str] = Field(default_factory=list, description="The models it calls.")
    sleeps: bool = False
    inference_path: str | None = None
    example_body: Any = None


class StackUsage(ConfigModel):
    """What one shard's models hold in accelerators, as the platform last planned the shard alone."""

    # Not strict: tuples arrive as lists from the platform stack's outputs.
    gpus: tuple[int, int, int] = Field(strict=False, description="GPUs at minimum replicas, awake and at peak.")
    npus: dict[str, tuple[int, int, int]] = Field(
        strict=False, default_factory=dict, description="NPUs by Ascend type."
    )


class PlatformFacts(ConfigModel):
    """A platform stack's `inferencePlatform` output (a JSON document)."""

    stack: str
    domain: DNSSubdomain
    namespace: DNS1123Label
    shards: list[str]
    platform: dict[str, Any] = Field(description="The platform's settings, secrets left out.")
    storage: dict[str, Any] | None = Field(default=None, description="Its storage settings, secrets left out.")
    keda: KedaRef | None = None
    provides: dict[str, list[str]] = Field(description="What the installed platform serves (requirements' union).")
    directory: dict[str, DirectoryEntry] = Field(description="Every model and pipeline of the environment.")
    usage: dict[str, StackUsage] = Field(default_factory=dict, description="Each shard's accelerators alone.")

    def elsewhere(self, stack: str) -> Elsewhere:
        """The environment's other stacks, seen from `stack`."""
        neighbours = {
            name: Neighbour(entry.stack, entry.kind, tuple(entry.object_names), tuple(entry.calls), entry.sleeps)
            for name, entry in self.directory.items()
            if entry.stack != stack
        }
        gpus = Usage(0, 0, 0)
        npus: dict[str, Usage] = {}
        for shard, usage in self.usage.items():
            if shard == stack:
                continue
            gpus += Usage(*usage.gpus)
            for device, numbers in usage.npus.items():
                npus[device] = npus.get(device, Usage(0, 0, 0)) + Usage(*numbers)
        return Elsewhere(neighbours, gpus, npus)


def _masked(dump: dict[str, Any], paths: tuple[tuple[str, ...], ...]) -> dict[str, Any]:
    out = copy.deepcopy(dump)
    for path in paths:
        node: Any = out
        for key in path[:-1]:
            node = node.get(key) if isinstance(node, dict) else None
        if isinstance(node, dict) and node.get(path[-1]) is not None:
            node[path[-1]] = SECRET
    return out


def requirements(config: StackConfig) -> dict[str, list[str]]:
    """What a stack's models need of the installed platform, as sorted lists: the platform stack
    provides its whole environment's; a shard needs its own to be among them."""
    edges = network.edge_ports(config)
    return {
        "components": sorted(entry.name for entry in platform_components.installed(config)),
        "poolHosts": sorted(config.inference_routes.hosts if config.inference_routes else []),
        "queueSeries": config.queue_series,
        "tokenHistograms": config.ttft_histograms,
        "comparedNamespaces": sorted(
            {config.namespace} if any(m.analysis.payloads.enabled for m in config.models) else set()
        ),
        **{name: [str(port) for port in ports] for name, ports in edges.items()},
    }


def missing_requirements(needs: dict[str, list[str]], provided: dict[str, list[str]]) -> list[str]:
    """What a shard's models need that its platform stack did not install, as sentences."""
    return [
        f"{what}: {', '.join(sorted(set(wanted) - set(provided.get(what, []))))}"
        for what, wanted in needs.items()
        if set(wanted) - set(provided.get(what, []))
    ]


def directory(config: StackConfig, owners: Mapping[str, str]) -> dict[str, DirectoryEntry]:
    """Every model and pipeline of an environment's config, by name, each with the shard that holds it."""
    context = serving_layer.serving_context(config)
    entries: dict[str, DirectoryEntry] = {}
    for index, model in enumerate(config.models):
        facts = context.directory[model.name]
        names = [model.name, mesh_route_name(model.name), *(f"{model.name}-{v.name}" for v in model.versions)]
        entries[model.name] = DirectoryEntry(
            stack=owners[model.name],
            index=index,
            kind="model",
            workload=facts.workload,
            object_names=names,
            calls=list(model.calls),
            sleeps=model.autoscaling.scales_to_zero,
            inference_path=facts.inference_path,
            example_body=facts.example_body,
        )
    for index, pipeline in enumerate(config.pipelines):
        entries[pipeline.name] = DirectoryEntry(
            stack=owners[pipeline.name],
            index=index,
            kind="pipeline",
            workload=context.directory[pipeline.name].workload,
            object_names=[pipeline.name],
            calls=list(pipeline.models),
        )
    return entries


def usage(config: StackConfig) -> StackUsage:
    plan = config.capacity()
    return StackUsage(
        gpus=(plan.gpus_min, plan.gpus_awake, plan.gpus_peak),
        npus={device: (p.min, p.awake, p.peak) for device, p in plan.npus.items()},
    )


def platform_facts(config: StackConfig, stack: str, shards: Mapping[str, StackConfig]) -> PlatformFacts:
    """What a platform stack exports: `config` is the whole environment's (every shard's models),
    `shards` each shard's own config (their models alone)."""
    owners = {item.name: shard for shard, view in shards.items() for item in (*view.models, *view.pipelines)}
    storage = config.storage.model_dump(mode="json", by_alias=True, exclude_unset=True) if config.storage else None
    return PlatformFacts(
        stack=stack,
        domain=config.domain,
        namespace=config.namespace,
        shards=list(shards),
        platform=_masked(
            config.platform.model_dump(mode="json", by_alias=True, exclude_unset=True), SECRET_KEYS["platform"]
        ),
        storage=_masked(storage, SECRET_KEYS["storage"]) if storage is not None else None,
        keda=config.keda,
        provides=requirements(config),
        directory=directory(config, owners),
        usage={shard: usage(view) for shard, view in shards.items()},
    )


# --- Deploying the two kinds --------------------------------------------------------------------


def deploy_platform_stack(
    config: StackConfig, stack: str, shards: Mapping[str, StackConfig], parent: pulumi.Resource | None = None
) -> dict[str, Any]:
    """A platform stack: the cluster platform for the whole environment (`config`, every shard's
    models), the models' namespace with its defaults, storage credentials and payload comparator;
    its outputs are the platform's endpoints, the environment's capacity, and the facts its shards read."""
    platform = deploy_platform(config, parent)
    serving_layer.deploy_namespace(config, platform.ready, parent)
    return {
        "platform": platform.outputs,
        "capacity": config.capacity().as_json(),
        # One JSON document, not a nested output: a shard's StackReference reads one string, where
        # 10,000 models' nested values cost seconds and hundreds of MiB to deserialize.
        FACTS_OUTPUT: platform_facts(config, stack, shards).model_dump_json(by_alias=True),
    }


def shard_view(values: Mapping[str, Any], facts: PlatformFacts) -> dict[str, Any]:
    """A shard's config as a stack's: its models and pipelines, on its platform stack's domain,
    namespace, platform and storage."""
    view = dict(values) | {"domain": facts.domain, "namespace": facts.namespace, "platform": facts.platform}
    if facts.storage is not None:
        view["storage"] = facts.storage
    return view


def shard_context(config: StackConfig, facts: PlatformFacts, stack: str) -> serving_layer.ServingContext:
    """What a shard's models deploy against: its own, and the others the platform stack's directory
    holds, in the environment's order (shard by shard, as the platform stack lists them)."""
    others = {
        name: serving_layer.ModelFacts(entry.workload, tuple(entry.calls), entry.inference_path, entry.example_body)
        for name, entry in facts.directory.items()
        if entry.stack != stack
    }
    own = serving_layer.serving_context(config, others)
    # The output's mapping comes back with its keys sorted: the environment's order is each entry's index.
    held: dict[tuple[str, str], list[str]] = {}
    for name, entry in sorted(facts.directory.items(), key=lambda item: item[1].index):
        held.setdefault((entry.kind, entry.stack), []).append(name)
    directory: dict[str, serving_layer.ModelFacts] = {}
    for kind, mine in (("model", config.models), ("pipeline", config.pipelines)):
        for shard in facts.shards:
            names = [item.name for item in mine] if shard == stack else held.get((kind, shard), [])
            for name in names:
                directory[name] = own.directory[name] if shard == stack else others[name]
    calls = tuple((name, callee) for name, found in directory.items() for callee in found.calls)
    return serving_layer.ServingContext(facts.keda, own.scraper, directory, calls)


def shard_manifests(config: StackConfig, stack: str) -> list[dict[str, Any]]:
    """The shard's own alerts and dashboards, as ConfigMaps the platform's Prometheus and Grafana
    gather (their sidecars, by label)."""
    compared = platform_components.comparisons(config)
    objects: list[dict[str, Any]] = []
    platform = config.platform
    if platform.prometheus.enabled and compared:
        rules = comparison.alert_rules(compared, stack)
        objects.append(
            {
                "apiVersion": "v1",
                "kind": "ConfigMap",
                "metadata": {
                    "name": RULES_CONFIG_MAP.format(stack=stack),
                    "namespace": platform.prometheus.namespace,
                    "labels": {prometheus.RULES_LABEL: "true", **PART_OF_LABELS},
                },
                # libyaml's emitter: the same text as PyYAML's, eight times faster (5 MB at 400 models).
                "data": {ALERTING_RULES_FILE: yaml.dump(rules, Dumper=yaml.CSafeDumper, sort_keys=False)},
            }
        )
    if platform.grafana.enabled and compared:
        dashboards = {c.model: model_dashboard(c, platform.gpu_metrics) for c, _ in compared}
        objects.append(
            {
                "apiVersion": "v1",
                "kind": "ConfigMap",
                "metadata": {
                    "name": DASHBOARDS_CONFIG_MAP.format(stack=stack),
                    "namespace": platform.grafana.namespace,
                    "labels": {grafana.DASHBOARDS_LABEL: grafana.DASHBOARDS_LABEL_VALUE, **PART_OF_LABELS},
                },
                "data": {
                    f"{name}.json": grafana.dashboard_json(document) for name, document in sorted(dashboards.items())
                },
            }
        )
    return objects


def deploy_shard(
    config: StackConfig, facts: PlatformFacts, stack: str, parent: pulumi.Resource | None = None
) -> dict[str, Any]:
    """A shard: its own models and pipelines, against the environment its platform stack exported,
    and its alerts and dashboards; its outputs are its models' URLs and what they hold."""
    for manifest in shard_manifests(config, stack):
        register(manifest, pulumi.ResourceOptions(parent=parent))
    outputs = serving_layer.deploy_workloads(config, shard_context(config, facts, stack), [], parent)
    outputs["capacity"] = config.capacity().as_json()
    return outputs


# --- Reading an environment -------------------------------------------------------------------

GATHERED = ("models", "pipelines")
"""What a platform stack gathers from its shards' files into its environment's config."""
SHARD_KEYS = frozenset({PLATFORM_STACK_KEY, *GATHERED})
"""What a shard's file holds; everything else is its platform stack's."""


def _problem(stack: str, loc: tuple[int | str, ...], message: str) -> Problem:
    return Problem(format_path(loc), message, loc, stack=stack)


def _decoded(values: Mapping[str, Any], key: str) -> Any:
    return decode_value(values.get(key))


def repeated_shards(stack: str, values: Mapping[str, Any]) -> list[Problem]:
    """Each shard a platform stack's `shards` (its project keys: `values`) lists again, at the repeat."""
    listed = _decoded(values, SHARDS_KEY)
    if not isinstance(listed, list):
        return []
    found = ((index, repeated_shard(listed, index)) for index in range(len(listed)))
    return [_problem(stack, (SHARDS_KEY, index), why) for index, why in found if why is not None]


def environment(
    stack: str, values: Mapping[str, Any], shards: Mapping[str, Mapping[str, Any]]
) -> tuple[StackConfig, dict[str, StackConfig]]:
    """A platform stack's whole environment: its config with every shard's models and pipelines
    (in the order it lists the shards), validated as one stack's, and each shard's own part of it.
    `values` and `shards` are the stacks' project keys as the CLI passes them. Raises ConfigError
    whose problems each name the stack whose file holds it."""
    problems = repeated_shards(stack, values)
    problems += [
        _problem(stack, (key,), "a platform stack holds no models: they go in its shards (its `shards`)")
        for key in GATHERED
        if _decoded(values, key)
    ]
    gathered: dict[str, dict[str, Any]] = {}
    """Each shard's models and pipelines, decoded."""
    for name, shard in shards.items():
        reference = _decoded(shard, PLATFORM_STACK_KEY)
        platform_keys = [key for key in shard if key not in SHARD_KEYS]
        if reference is None and platform_keys:
            # One mistake: a stack of its own listed as a shard, not a line per key it holds.
            problems.append(
                _problem(
                    name,
                    (),
                    f"is a stack of its own (it sets {', '.join(platform_keys)}), listed as a shard of the platform "
                    f"stack {stack} (its `shards`): drop it from them, or make it a shard (set platformStack, and "
                    "leave the platform's settings to the platform stack)",
                )
            )
            gathered[name] = {}
            continue
        if reference is None:
            problems.append(
                _problem(name, (), f"is a shard of the platform stack {stack} (its `shards`): set platformStack")
            )
        elif not isinstance(reference, str) or platform_stack_name(reference) != stack:
            problems.append(
                _problem(
                    name,
                    (PLATFORM_STACK_KEY,),
                    f"names {reference!r}, but the platform stack {stack} lists this stack as its shard",
                )
            )
        elif (foreign := foreign_project(reference, PROJECT)) is not None:
            problems.append(_problem(name, (PLATFORM_STACK_KEY,), foreign))
        problems += [
            _problem(name, (key,), f"belongs to the platform stack {stack}: a shard holds models and pipelines only")
            for key in shard
            if key not in SHARD_KEYS
        ]
        # Each shard's models within the limits of one stack's; together they may be far larger.
        gathered[name], too_large = decode_within_limits({kind: shard[kind] for kind in GATHERED if kind in shard})
        problems += [_problem(name, problem.keys, problem.message) for problem in too_large]
    if problems:
        raise ConfigError(problems)
    merged = dict(values)
    origins: dict[str, list[tuple[str, int]]] = {kind: [] for kind in GATHERED}
    for kind in origins:
        items: list[Any] = []
        for name in shards:
            found = gathered[name].get(kind) or []
            found = found if isinstance(found, list) else [found]
            origins[kind] += [(name, index) for index in range(len(found))]
            items += found
        merged[kind] = items
    try:
        config = parse_stack_config(merged, checked=GATHERED)
    except ConfigError as error:
        raise error.with_problems(_in_shards(error.problems, stack, origins)) from None
    views: dict[str, StackConfig] = {}
    for name in shards:
        own = {kind: [i for i, (shard, _) in enumerate(origins[kind]) if shard == name] for kind in origins}
        views[name] = StackConfig.model_construct(
            domain=config.domain,
            namespace=config.namespace,
            platform=config.platform,
            storage=config.storage,
            models=[config.models[i] for i in own["models"]],
            pipelines=[config.pipelines[i] for i in own["pipelines"]],
            platform_stack=stack,
        )
    return config, views


# A repeated name's problem names the first of the name (config/base.py's duplicate_problems).
_ALSO = re.compile(r"\(also (models|pipelines)\[([0-9]+)\]((?:\.[A-Za-z]+)*)\)")


def _also_in_shards(message: str, shard: str, origins: Mapping[str, list[tuple[str, int]]]) -> str:
    """A duplicate's "(also models[3].name)", an index of the merged list, as the place in the
    shard that holds the first: its own index there, and its file when that is another shard's."""
    match = _ALSO.search(message)
    if match is None or int(match[2]) >= len(origins[match[1]]):
        return message
    other, index = origins[match[1]][int(match[2])]
    where = f"{match[1]}[{index}]{match[3]}" + ("" if other == shard else f" in Pulumi.{other}.yaml, the shard {other}")
    return f"{message[: match.start()]}(also {where}){message[match.end() :]}"


def _in_shards(problems: list[Problem], stack: str, origins: Mapping[str, list[tuple[str, int]]]) -> list[Problem]:
    """Each problem of the merged config at its place in the file it came from: a model's or
    pipeline's in its shard's, anything else in the platform stack's."""
    out = []
    for problem in problems:
        keys = problem.keys
        if len(keys) >= 2 and keys[0] in origins and isinstance(keys[1], int) and keys[1] < len(origins[str(keys[0])]):
            shard, index = origins[str(keys[0])][keys[1]]
            loc = (keys[0], index, *keys[2:])
            message = _also_in_shards(problem.message, shard, origins)
            out.append(replace(problem, path=format_path(loc), loc=loc, stack=shard, message=message))
        else:
            out.append(replace(problem, stack=stack))
    return out


def shard_config(stack: str, values: Mapping[str, Any], facts: PlatformFacts) -> StackConfig:
    """A shard's config (its project keys as the CLI passes them) as a stack's, on the platform its
    platform stack exported, checked beside the environment's other stacks. Raises ConfigError."""
    foreign = [
        Problem(key, f"belongs to the platform stack {facts.stack}: a shard holds models and pipelines only", (key,))
        for key in values
        if key not in SHARD_KEYS
    ]
    if foreign:
        raise ConfigError(foreign)
    with beside(facts.elsewhere(stack)):
        config = parse_stack_config(shard_view(values, facts))
    problems = []
    if stack not in facts.shards:
        problems.append(
            Problem(
                PLATFORM_STACK_KEY,
                f"the platform stack {facts.stack} does not list this stack in its shards",
                (PLATFORM_STACK_KEY,),
            )
        )
    # A stack the platform stack does not list is one mistake: the platform did not read its models,
    # so what they need is not also reported as missing.
    missing = missing_requirements(requirements(config), facts.provides) if stack in facts.shards else []
    if missing:
        problems.append(
            Problem(
                "models",
                f"the platform stack {facts.stack} installed no platform for what these models need "
                f"({'; '.join(missing)}): deploy it with this stack's file first (it reads its shards' files)",
                ("models",),
            )
        )
    if problems:
        raise ConfigError(problems)
    return config


def foreign_project(reference: str, project: str) -> str | None:
    """Why a shard of `project` cannot read the platform stack `reference` (<org>/<project>/<stack>,
    or a bare stack name) names, when that is another project's stack; None when it is not."""
    parts = reference.split("/")
    if len(parts) == 3 and parts[1] != project:
        return (
            f"{reference} names a stack of the project {parts[1]!r}, but this is the project {project!r}: "
            f"a shard's platform stack is of its own project (<org>/{project}/<stack>)"
        )
    return None


def _reference_problem(reference: str, project: str, facts: PlatformFacts) -> str | None:
    """What is wrong with reading `facts` for a shard of `project` whose platformStack is
    `reference`, if anything: the reference names another project's stack, or the facts are
    another platform stack's (a render of another platform)."""
    named = platform_stack_name(reference)
    foreign = foreign_project(reference, project)
    if foreign is not None:
        return foreign
    if facts.stack != named:
        return (
            f"{reference} names the platform stack {named!r}, but the outputs read for it are the platform "
            f"stack {facts.stack!r}'s (a render of another platform?)"
        )
    return None


def read_facts(stack: str, outputs: Any, reference: str, project: str) -> PlatformFacts:
    """A platform stack's exported facts, from its outputs, for a shard of `project`; ConfigError at
    `platformStack` when the stack referred to is not a platform stack (no facts, or facts of
    another shape), or not the one the outputs are of, or of another project."""
    raw = outputs.get(FACTS_OUTPUT) if isinstance(outputs, Mapping) else None
    try:
        if raw is None:
            raise ValueError(f"no {FACTS_OUTPUT} output")
        # A JSON document; a platform stack deployed before it was one exported the same as a mapping.
        facts = (
            PlatformFacts.model_validate_json(raw)
            if isinstance(raw, str)
            else PlatformFacts.model_validate(raw, strict=False)
        )
    except (ValueError, ValidationError):
        message = (
            f"{reference} is not a platform stack: its outputs have no {FACTS_OUTPUT} (a one-stack environment, "
            "another project's stack, or a platform stack not deployed yet)"
        )
        raise ConfigError([Problem(PLATFORM_STACK_KEY, message, (PLATFORM_STACK_KEY,))]) from None
    problem = _reference_problem(reference, project, facts)
    if problem is not None:
        raise ConfigError([Problem(PLATFORM_STACK_KEY, problem, (PLATFORM_STACK_KEY,))])
    return facts
