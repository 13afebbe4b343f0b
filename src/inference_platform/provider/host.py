"""The component package's provider: Pulumi's component provider over components.py, with every
input validated through the config models before a component is constructed.

`pulumi.provider.experimental.component_provider_host` serves the SDK's own ComponentProvider,
which hands a component's constructor its inputs and reports whatever the constructor raises as a
Python traceback. This host serves a subclass of it the same way (`pulumi.provider.main`, as
component_provider_host does) whose only change is that step: the inputs are validated first, and
a bad one is refused as invalid input with one property path per problem, the paths a stack
file's report gives. Its schema is the SDK's less the nulls the SDK writes for enum values
without a description (its None-stripping stops at lists), which Pulumi's package metaschema refuses.
"""

from __future__ import annotations

import json
import sys
from typing import Any

from pulumi.errors import InputPropertiesError
from pulumi.output import Inputs
from pulumi.provider import main
from pulumi.provider.experimental.analyzer import ComponentDefinition
from pulumi.provider.experimental.component import ComponentProvider

from inference_platform import __version__
from inference_platform.config.errors import ConfigError
from inference_platform.provider.components import COMPONENTS, PACKAGE
from inference_platform.provider.inputs import plain_inputs, validated


def without_nulls(node: Any) -> Any:
    if isinstance(node, dict):
        return {key: without_nulls(value) for key, value in node.items() if value is not None}
    if isinstance(node, list):
        return [without_nulls(value) for value in node]
    return node


class InferencePlatformProvider(ComponentProvider):
    def __init__(self) -> None:
        super().__init__(list(COMPONENTS), PACKAGE, version=__version__)
        self.configs = {component.__name__: component.CONFIG for component in COMPONENTS}
        self.schema = json.dumps(without_nulls(json.loads(self.schema or "{}")))

    def map_inputs(self, inputs: Inputs, component_def: ComponentDefinition) -> Inputs:
        """The inputs, validated through the component's config model; the constructor takes them
        as the wire names them (camelCase), which the config models read as a stack file's keys."""
        try:
            validated(self.configs[component_def.name], inputs)
            plain: Inputs = plain_inputs(inputs)
        except ConfigError as error:
            count = len(error.problems)
            raise InputPropertiesError(
                f"invalid inputs of {component_def.name} ({count} problem{'s' if count != 1 else ''})",
                [{"property_path": problem.path, "reason": problem.message} for problem in error.problems],
            ) from None
        return plain


def schema() -> dict[str, Any]:
    """The package schema the provider serves (plugin/schema.json)."""
    text = InferencePlatformProvider().schema
    assert text is not None
    document: dict[str, Any] = json.loads(text)
    return document


def serve() -> None:
    """Serve the provider to the Pulumi engine: what `component_provider_host` does, with this provider."""
    main(InferencePlatformProvider(), sys.argv[1:])
