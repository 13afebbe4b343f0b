"""A container's requests and limits, as a stack file sets them."""

from __future__ import annotations

from pydantic import Field

from inference_platform.config.base import ConfigModel, Quantity


class ResourceList(ConfigModel):
    cpu: Quantity | None = Field(
        default=None, description="CPU, a Kubernetes quantity (500m, 2); unset keeps the runtime's default."
    )
    memory: Quantity | None = Field(
        default=None, description="Memory, a Kubernetes quantity (512Mi, 8Gi); unset keeps the runtime's default."
    )


class Resources(ConfigModel):
    """Container requests and limits; keys left out keep the runtime's defaults."""

    requests: ResourceList = Field(default=ResourceList(), description="What the scheduler reserves for the container.")
    limits: ResourceList = Field(default=ResourceList(), description="The most the container may use.")

    def over(self, defaults: Resources) -> Resources:
        """These resources with every unset key taken from `defaults`."""

        def merge(mine: ResourceList, theirs: ResourceList) -> ResourceList:
            return ResourceList(cpu=mine.cpu or theirs.cpu, memory=mine.memory or theirs.memory)

        return Resources(requests=merge(self.requests, defaults.requests), limits=merge(self.limits, defaults.limits))

    def to_kubernetes(self) -> dict[str, dict[str, str]]:
        out: dict[str, dict[str, str]] = {}
        for key, values in (("requests", self.requests), ("limits", self.limits)):
            entries = {name: str(value) for name, value in values.model_dump().items() if value is not None}
            if entries:
                out[key] = entries
        return out
