"""The Pulumi program: read and validate the stack config, then build the stack.

Validation happens before any resource is registered, so an invalid config changes nothing.
"""

from __future__ import annotations

import pulumi
import pulumi.runtime.config

from inference_platform.config.errors import ConfigError
from inference_platform.stack.config import StackConfig, parse_stack_config, project_values
from inference_platform.stack.deploy import deploy


def load_stack_config() -> StackConfig:
    """The stack's config as the engine (or the offline render) handed it to this process."""
    return parse_stack_config(project_values(pulumi.runtime.config.CONFIG.get()))


def run() -> None:
    try:
        config = load_stack_config()
    except ConfigError as error:
        # The language host prints a RunError's message without a traceback.
        raise pulumi.RunError(error.report()) from None
    for name, value in deploy(config).items():
        pulumi.export(name, value)
