"""InferencePlatform: a whole stack as one component, for programs that hold more than this platform.

It registers exactly what this repository's program registers for the same config, parented to
itself. The program itself composes at the top level (infra/, `deploy`), where its resources'
URNs have always been.
"""

# No `from __future__ import annotations`: the component package (provider/) reads these
# annotations as types at run time.
from typing import Any

import pulumi

from inference_platform.config.errors import ConfigError, Problem
from inference_platform.stack.config import StackConfig
from inference_platform.stack.deploy import deploy


class InferencePlatform(pulumi.ComponentResource):
    """The cluster platform and every model and pipeline on it, from one stack config. One per
    program: it owns cluster-wide objects (the platform's namespaces, charts and gateway)."""

    TYPE = "inference-platform:stack:InferencePlatform"

    platform: pulumi.Output[dict[str, str]]
    models: pulumi.Output[dict[str, Any]]
    pipelines: pulumi.Output[dict[str, Any]]
    capacity: pulumi.Output[dict[str, Any]]

    def __init__(self, name: str, args: StackConfig, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__(self.TYPE, name, None, opts)
        fleet_keys = [key for key, value in (("shards", args.shards), ("platformStack", args.platform_stack)) if value]
        if fleet_keys:
            message = "a whole environment in one component: platform stacks and shards are the program's own stacks"
            raise ConfigError([Problem(key, message, (key,)) for key in fleet_keys])
        outputs = deploy(args, parent=self)
        self.platform = pulumi.Output.from_input(outputs["platform"])
        self.models = pulumi.Output.from_input(outputs["models"])
        self.pipelines = pulumi.Output.from_input(outputs.get("pipelines", {}))
        self.capacity = pulumi.Output.from_input(outputs["capacity"])
        self.register_outputs(outputs)
