"""The components the package serves, under `inference-platform:index:<Name>`.

Each is the library's own component with the package's type token and dictionary arguments
(provider/args.py, generated from the config models): the same constructor registers the same
objects, after the arguments have been validated into the config model the native class takes.
"""

# No `from __future__ import annotations`: Pulumi's component analyzer reads these annotations as
# types at run time.
from typing import Any

import pulumi

from inference_platform import serving, stack
from inference_platform.provider.args import (
    InferencePlatformArgs,
    InferenceServiceArgs,
    ModelNamespaceArgs,
    PayloadComparatorArgs,
    PipelineArgs,
)
from inference_platform.provider.inputs import validated

PACKAGE = "inference-platform"


class InferencePlatform(stack.InferencePlatform):
    """The cluster platform and every model and pipeline on it, from a stack file's settings. One per program."""

    TYPE = f"{PACKAGE}:index:InferencePlatform"
    CONFIG = stack.StackConfig

    platform: pulumi.Output[dict[str, str]]
    """The platform's endpoints as installed: gateway, gatewayService, prometheus, grafana, resourceMetrics."""
    models: pulumi.Output[dict[str, Any]]
    """Per model: urls, a curl line, the live weights and the mirrors; with LoRA adapters, a curl line for each."""
    pipelines: pulumi.Output[dict[str, Any]]
    """Per pipeline: urls, a curl line and the models it calls."""
    capacity: pulumi.Output[dict[str, Any]]
    """The GPU capacity plan: GPUs held at minimum replicas and at peak, per model, against those declared."""

    def __init__(self, name: str, args: InferencePlatformArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__(name, validated(self.CONFIG, args), opts)


class ModelNamespace(serving.ModelNamespace):
    """The namespace models run in: sidecar injection, STRICT mutual TLS, and no traffic but DNS and istiod's."""

    TYPE = f"{PACKAGE}:index:ModelNamespace"
    CONFIG = serving.ModelNamespaceArgs

    name: pulumi.Output[str]
    """The namespace's name."""

    def __init__(self, name: str, args: ModelNamespaceArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__(name, validated(self.CONFIG, args), opts)


class InferenceService(serving.InferenceService):
    """One model: a server per version, routes that split live traffic and mirror shadows, autoscaling, protection."""

    TYPE = f"{PACKAGE}:index:InferenceService"
    CONFIG = serving.InferenceServiceArgs

    urls: pulumi.Output[list[str]]
    """The model's URLs: its own host, and the path under the shared domain."""
    curl: pulumi.Output[str]
    """A ready-to-run curl line with an example request in the runtime's protocol."""
    weights: pulumi.Output[dict[str, int]]
    """Live traffic shares by version."""
    mirrors: pulumi.Output[dict[str, float]]
    """Mirrored shares by shadow version."""
    adapters: pulumi.Output[dict[str, str]]
    """The LoRA adapters the live versions serve (vLLM, SGLang): a ready-to-run curl line each, by adapter name."""

    def __init__(self, name: str, args: InferenceServiceArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__(name, validated(self.CONFIG, args), opts)


class Pipeline(serving.Pipeline):
    """An inference graph over models (KServe's InferenceGraph), run by KServe's router and served like a model."""

    TYPE = f"{PACKAGE}:index:Pipeline"
    CONFIG = serving.PipelineArgs

    urls: pulumi.Output[list[str]]
    """The pipeline's URLs: its own host, and the path under the shared domain."""
    curl: pulumi.Output[str]
    """A ready-to-run curl line with the first model's example request."""
    models: pulumi.Output[list[str]]
    """The models the graph calls."""

    def __init__(self, name: str, args: PipelineArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__(name, validated(self.CONFIG, args), opts)


class PayloadComparator(serving.PayloadComparator):
    """The service that pairs each shadow's answer with its primary's and counts how often they agree,
    for InferenceServices whose model sets analysis.payloads.enabled (give them comparator.namespace)."""

    TYPE = f"{PACKAGE}:index:PayloadComparator"
    CONFIG = serving.PayloadComparatorArgs

    host: pulumi.Output[str]
    """The comparator's Service host, which the compared models' capture filters stream to."""

    def __init__(self, name: str, args: PayloadComparatorArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__(name, validated(self.CONFIG, args), opts)


COMPONENTS: list[type[InferencePlatform | ModelNamespace | InferenceService | Pipeline | PayloadComparator]] = [
    InferencePlatform,
    ModelNamespace,
    InferenceService,
    Pipeline,
    PayloadComparator,
]
