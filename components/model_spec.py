"""What a platform team writes about one model: its versions, where their files are, and how
traffic reaches them. Runtime-specific settings live in each runtime's own subclass
(components/runtimes/); this module holds what every runtime shares.
"""

from __future__ import annotations

from abc import abstractmethod
from typing import TYPE_CHECKING, Annotated
from urllib.parse import urlsplit

from pydantic import AfterValidator, Field, model_validator
from pydantic_core import PydanticCustomError

from components.config_base import (
    ConfigModel,
    DNS1035Label,
    DNS1123Label,
    Duration,
    Percent,
    Quantity,
    check_dns1123_subdomain,
    config_problems,
    duplicate_problems,
)

if TYPE_CHECKING:
    from components.runtimes.base import ExampleRequest, ServerPlan

# Kubernetes names (Services above all) are DNS labels of at most 63 characters.
MAX_NAME_LENGTH = 63

MOUNTED_SCHEMES = ("pvc",)


def _model_uri(value: str) -> str:
    parts = urlsplit(value)
    if parts.scheme not in MOUNTED_SCHEMES:
        raise PydanticCustomError(
            "model_uri_scheme",
            "'{value}' has an unsupported scheme: use one of {schemes}",
            {"value": value, "schemes": ", ".join(f"{s}://" for s in MOUNTED_SCHEMES)},
        )
    claim, path = parts.netloc, parts.path.strip("/")
    if not claim or len(claim) > 253 or not all(label for label in claim.split(".")):
        raise PydanticCustomError(
            "model_uri_claim", "'{value}' names no volume claim: write pvc://<claim>/<path>", {"value": value}
        )
    if not path or ".." in path.split("/") or parts.query or parts.fragment:
        raise PydanticCustomError(
            "model_uri_path",
            "'{value}' needs a path inside the claim without '..', '?' or '#': write pvc://<claim>/<path>",
            {"value": value},
        )
    check_dns1123_subdomain(claim)  # the claim is a PersistentVolumeClaim name
    return value


ModelUri = Annotated[str, AfterValidator(_model_uri)]


def pvc_location(model_uri: str) -> tuple[str, str]:
    """(claim, path inside the claim) of a pvc:// model URI."""
    parts = urlsplit(model_uri)
    return parts.netloc, parts.path.strip("/")


class ResourceList(ConfigModel):
    cpu: Quantity | None = None
    memory: Quantity | None = None


class Resources(ConfigModel):
    """Container requests and limits; keys left out keep the runtime's defaults."""

    requests: ResourceList = ResourceList()
    limits: ResourceList = ResourceList()

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


class EnvVar(ConfigModel):
    name: Annotated[str, Field(pattern=r"^[-._a-zA-Z][-._a-zA-Z0-9]*$", max_length=256)]
    value: str


class ModelVersion(ConfigModel):
    """One version of a model: its own Deployment and Service, live or shadow."""

    name: DNS1123Label
    model_uri: ModelUri = Field(description="Where the model files are: pvc://<claim>/<path>.")
    weight: Annotated[int, Field(ge=0, le=100)] | None = Field(
        default=None, description="Share of live traffic in percent; live weights of a model add up to 100."
    )
    mirror_percent: Percent | None = Field(
        default=None, description="Makes this version a shadow that gets a copy of this share of requests."
    )
    replicas: Annotated[int, Field(ge=0, le=1000)] | None = Field(
        default=None, description="Overrides the model's replicas for this version."
    )
    image: Annotated[str, Field(min_length=1)] | None = Field(
        default=None, description="Overrides the runtime's image for this version."
    )
    resources: Resources | None = None
    env: list[EnvVar] = Field(default_factory=list)

    @model_validator(mode="after")
    def _live_or_shadow(self) -> ModelVersion:
        if self.weight is not None and self.mirror_percent is not None:
            raise config_problems([("", "a version is either live (weight) or a shadow (mirrorPercent), not both")])
        if self.weight is None and self.mirror_percent is None:
            raise config_problems([("", "set weight (a live version, 0 to keep it idle) or mirrorPercent (a shadow)")])
        return self

    @property
    def is_live(self) -> bool:
        return self.weight is not None


class RetryPolicy(ConfigModel):
    attempts: Annotated[int, Field(ge=0, le=10)] = 2
    per_try_timeout: Duration = "30s"
    # Only failures where the request never reached the model: retrying those is always safe.
    retry_on: Annotated[str, Field(pattern=r"^[a-z0-9-]+(,[a-z0-9-]+)*$")] = (
        "connect-failure,refused-stream,unavailable,cancelled,503"
    )


class ModelSpecBase(ConfigModel):
    """Fields every runtime shares. Each runtime subclasses it with `runtime: Literal[...]`."""

    name: DNS1035Label = Field(description="Served at <name>.<domain>; also the Kubernetes name prefix.")
    runtime: str
    versions: Annotated[list[ModelVersion], Field(min_length=1)]
    replicas: Annotated[int, Field(ge=0, le=1000)] = 1
    image: Annotated[str, Field(min_length=1)] | None = Field(
        default=None, description="Overrides the runtime's pinned default image."
    )
    resources: Resources = Resources()
    env: list[EnvVar] = Field(default_factory=list)
    timeout: Duration = Field(default="60s", description="Request timeout at the gateway.")
    retries: RetryPolicy = RetryPolicy()

    @model_validator(mode="after")
    def _check_versions(self) -> ModelSpecBase:
        problems = duplicate_problems([v.name for v in self.versions], "versions[{}].name", "version")
        for index, version in enumerate(self.versions):
            derived = f"{self.name}-{version.name}"
            if len(derived) > MAX_NAME_LENGTH:
                problems.append(
                    (
                        f"versions[{index}].name",
                        f"'{derived}', the name of this version's Deployment and Service, is {len(derived)} "
                        f"characters; Kubernetes allows {MAX_NAME_LENGTH}: shorten the model or version name",
                    )
                )
        live = [v for v in self.versions if v.is_live]
        if not live:
            problems.append(("versions", "no live version: give at least one version a weight"))
        else:
            total = sum(v.weight or 0 for v in live)
            if total != 100:
                shares = ", ".join(f"{v.name}={v.weight}" for v in live)
                problems.append(
                    ("versions", f"live weights add up to {total} ({shares}); they must add up to exactly 100")
                )
        if problems:
            raise config_problems(problems)
        return self

    @property
    def live_weights(self) -> dict[str, int]:
        return {v.name: v.weight for v in self.versions if v.weight is not None}

    @property
    def mirrors(self) -> dict[str, float]:
        return {v.name: v.mirror_percent for v in self.versions if v.mirror_percent is not None}

    @abstractmethod
    def plan(self, version: ModelVersion) -> ServerPlan:
        """How this runtime serves one version: its container, config files and ports."""

    @abstractmethod
    def example_request(self) -> ExampleRequest:
        """An inference request in the runtime's own protocol."""
