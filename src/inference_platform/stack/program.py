"""The Pulumi program: read and validate the stack config, then build the stack.

Validation happens before any resource is registered, so an invalid config changes nothing. A
stack is one of three kinds (stack/fleet.py): a whole environment in one stack; a platform stack,
which reads its shards' files (`read_stack`) for the environment's models; or a shard, which reads
its platform stack's outputs through a StackReference and registers its models once they arrive
(its own file is checked first; what it is checked beside arrives with the outputs).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import pulumi
import pulumi.runtime.config

from inference_platform.config.errors import ConfigError
from inference_platform.config.secrets import plain_secret_problems
from inference_platform.stack import fleet
from inference_platform.stack.config import (
    StackConfig,
    decode_value,
    parse_stack_config,
    project_values,
    pulumi_sealed,
)
from inference_platform.stack.deploy import deploy

StackReader = Callable[[str], Mapping[str, Any]]
"""A stack of the project by name -> its project keys, as the CLI passes them (its Pulumi.<stack>.yaml)."""


def load_stack_config() -> StackConfig:
    """The stack's config as the engine (or the offline render) handed it to this process."""
    sealed = pulumi_sealed(pulumi.runtime.config.is_config_secret)
    return parse_stack_config(project_values(pulumi.runtime.config.CONFIG.get()), sealed=sealed)


def _fail(error: ConfigError) -> pulumi.RunError:
    # The language host prints a RunError's message without a traceback.
    return pulumi.RunError(error.report())


def run(read_stack: StackReader | None = None) -> None:
    values = project_values(pulumi.runtime.config.CONFIG.get())
    kind = fleet.stack_kind(values)
    try:
        if kind != "single":
            _refuse_plain_secrets(values)
        if kind == "platform":
            if read_stack is None:
                raise pulumi.RunError("a platform stack reads its shards' stack files: run it through infra/")
            stack = pulumi.get_stack()
            shards = {name: read_stack(name) for name in decode_value(values[fleet.SHARDS_KEY]) or []}
            config, views = fleet.environment(stack, values, shards)
            outputs = fleet.deploy_platform_stack(config, stack, views)
        elif kind == "shard":
            _run_shard(values)
            return
        else:
            outputs = deploy(load_stack_config())
    except ConfigError as error:
        raise _fail(error) from None
    for name, value in outputs.items():
        pulumi.export(name, value)


def _refuse_plain_secrets(values: Mapping[str, Any]) -> None:
    """A platform stack's or a shard's secret settings in plain text (a whole environment's stack
    checks its own as it parses them)."""
    decoded = {key: decode_value(value) for key, value in values.items()}
    problems = plain_secret_problems(StackConfig, decoded, pulumi_sealed(pulumi.runtime.config.is_config_secret))
    if problems:
        raise ConfigError(problems)


def _run_shard(values: Mapping[str, Any]) -> None:
    stack = pulumi.get_stack()
    reference = str(decode_value(values[fleet.PLATFORM_STACK_KEY]))
    platform = pulumi.StackReference(reference)

    def deploy_shard(outputs: Any) -> dict[str, Any]:
        try:
            facts = fleet.read_facts(stack, outputs, reference, pulumi.get_project())
            config = fleet.shard_config(stack, values, facts)
        except ConfigError as error:
            raise _fail(error) from None
        return fleet.deploy_shard(config, facts, stack)

    deployed = platform.outputs.apply(deploy_shard)
    names = ["models", "capacity", *(["pipelines"] if decode_value(values.get("pipelines")) else [])]
    for name in names:
        pulumi.export(name, deployed.apply(_output(name)))


def _output(name: str) -> Callable[[dict[str, Any]], Any]:
    def pick(outputs: dict[str, Any]) -> Any:
        return outputs.get(name)

    return pick
