"""The stack configuration: the contract between a platform team's Pulumi.<stack>.yaml and this program.

Keys live under the project's namespace (`inference-platform:models`, ...). The Pulumi CLI hands
them to the program as strings, objects JSON-encoded; `parse_stack_config` takes that form, so
the offline render and `pulumi up` validate exactly the same input the same way.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from pydantic import Field, ValidationError, model_validator

from components.config_base import ConfigModel, DNS1123Label, DNSSubdomain, config_problems, duplicate_problems
from components.gpu import GpuNodes, VirtualGpu
from components.ingress_gateway import GatewayRef
from components.model_storage import StorageCredentials
from components.runtimes import ModelSpec
from infra.errors import ConfigError, problems_from_validation

PROJECT = "inference-platform"

MAX_HOST_LENGTH = 253


class IngressConfig(ConfigModel):
    gateway: GatewayRef = Field(
        default=GatewayRef(), description="The Istio Gateway every model's VirtualService binds to."
    )


class HamiConfig(ConfigModel):
    enabled: bool = Field(default=False, description="GPU sharing with HAMi: lets models use gpu: vgpu.")


class PlatformConfig(ConfigModel):
    """The cluster-wide pieces models run on."""

    ingress: IngressConfig = IngressConfig()
    gpu_nodes: GpuNodes = Field(default_factory=GpuNodes, description="How GPU pods find and tolerate GPU nodes.")
    hami: HamiConfig = HamiConfig()


class StackConfig(ConfigModel):
    """Everything under `inference-platform:` in a stack file."""

    domain: DNSSubdomain = Field(description="Models are served at <model>.<domain> and <domain>/models/<model>/.")
    namespace: DNS1123Label = Field(default="service", description="The namespace model workloads run in.")
    models: list[ModelSpec] = Field(default_factory=list, description="The models to serve.")
    platform: PlatformConfig = PlatformConfig()
    storage: StorageCredentials | None = Field(
        default=None, description="Credentials for downloading model files; store the values as Pulumi secrets."
    )

    @model_validator(mode="after")
    def _check_names(self) -> StackConfig:
        problems = duplicate_problems([m.name for m in self.models], "models[{}].name", "model")
        # Objects of different models must not share a name: model 'a' with version 'b-c' and
        # model 'a-b' with version 'c' would both own a Deployment 'a-b-c'.
        owners: dict[str, tuple[str, str]] = {}
        for index, model in enumerate(self.models):
            host = f"{model.name}.{self.domain}"
            if len(host) > MAX_HOST_LENGTH:
                problems.append(
                    (f"models[{index}].name", f"the host '{host}' is longer than {MAX_HOST_LENGTH} characters")
                )
            if any(owner_model == model.name for owner_model, _ in owners.values()):
                continue  # a duplicate model name, reported above
            derived = {model.name: f"models[{index}].name"}
            derived |= {
                f"{model.name}-{v.name}": f"models[{index}].versions[{j}].name" for j, v in enumerate(model.versions)
            }
            for name, path in derived.items():
                owner_model, owner_path = owners.setdefault(name, (model.name, path))
                if owner_model != model.name:
                    problems.append(
                        (path, f"its objects would be named '{name}', like those of {owner_path}: rename one")
                    )
        problems += self._gpu_problems()
        if problems:
            raise config_problems(problems)
        return self

    def _gpu_problems(self) -> list[tuple[str, str]]:
        return [
            (f"models[{index}].gpu", "vgpu needs GPU sharing: set platform.hami.enabled to true")
            for index, model in enumerate(self.models)
            if isinstance(model.gpu, VirtualGpu) and not self.platform.hami.enabled
        ]


def decode_value(raw: Any) -> Any:
    """A config value as the program receives it: objects and lists arrive JSON-encoded."""
    if isinstance(raw, str) and raw.lstrip()[:1] in ("{", "["):
        try:
            return json.loads(raw)
        except json.JSONDecodeError:
            return raw
    return raw


def parse_stack_config(values: Mapping[str, Any]) -> StackConfig:
    """Validate the project's config keys (without the `inference-platform:` prefix).

    Raises ConfigError listing every problem with its path.
    """
    decoded = {key: decode_value(value) for key, value in values.items()}
    try:
        return StackConfig.model_validate(decoded)
    except ValidationError as error:
        raise ConfigError(problems_from_validation(error)) from None


def project_values(config: Mapping[str, Any]) -> dict[str, Any]:
    """The values under this project's namespace from a full `namespace:key` config map."""
    prefix = f"{PROJECT}:"
    return {key[len(prefix) :]: value for key, value in config.items() if key.startswith(prefix)}
