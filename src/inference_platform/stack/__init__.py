"""A whole stack from its typed config: the stack config model, the composition of the platform and
the models on it, the Pulumi program that runs it, and the same as one component."""

from inference_platform.stack.component import InferencePlatform
from inference_platform.stack.config import PlatformConfig, StackConfig, parse_stack_config
from inference_platform.stack.deploy import deploy

__all__ = ["InferencePlatform", "PlatformConfig", "StackConfig", "deploy", "parse_stack_config"]
