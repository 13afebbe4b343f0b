"""What an InferenceService is given, and the names and labels every one of its objects carries.

Names and selectors depend only on the model and version names, never on weights or other
settings, so a traffic change edits objects in place and `pulumi up` never replaces them.
"""

from __future__ import annotations

from typing import Any, ClassVar

from pydantic import Field, model_validator

from inference_platform.config.base import ConfigModel, DNS1123Label, DNSSubdomain, config_problems
from inference_platform.config.errors import Discriminated
from inference_platform.platform.gpu_nodes import GpuNodes
from inference_platform.platform.ingress_gateway import GatewayRef
from inference_platform.platform.keda import HttpAddOnRef, KedaRef
from inference_platform.platform.network import NetworkConfig
from inference_platform.platform.npu_nodes import NpuNodes
from inference_platform.platform.prometheus import MetricsScraper
from inference_platform.serving.access import Workload
from inference_platform.serving.cached_files import CachedVersion, cached_versions
from inference_platform.serving.gpu import GPU_MODE_UNION
from inference_platform.serving.model_cache_volumes import ModelCacheRef
from inference_platform.serving.model_spec import ModelVersion
from inference_platform.serving.model_storage import StorageAccess, needs_s3_credentials
from inference_platform.serving.payload_capture import ComparatorRef
from inference_platform.serving.runtimes import RUNTIME_UNION, ModelSpec

PART_OF = "inference-platform"


class InferenceServiceArgs(ConfigModel):
    """Everything an InferenceService needs: the model and where the platform puts it."""

    # `InferenceServiceArgs.parse({...})` validates a dict (camelCase or snake_case keys) and reports
    # every problem as a stack file's are, naming the runtime and GPU mode variants.
    REPORTED_UNIONS: ClassVar[tuple[Discriminated, ...]] = (RUNTIME_UNION, GPU_MODE_UNION)

    model: ModelSpec
    namespace: DNS1123Label
    domain: DNSSubdomain
    gateway: GatewayRef = GatewayRef()
    url_scheme: str = "http"
    gpu_nodes: GpuNodes = Field(default_factory=GpuNodes)
    npu_nodes: NpuNodes = Field(default_factory=NpuNodes)
    storage: StorageAccess | None = Field(default=None, description="Credentials for downloaded model files.")
    metrics_scraper: MetricsScraper | None = Field(
        default=None, description="Prometheus: the only workload that may reach metrics ports."
    )
    callers: list[Workload] = Field(
        default_factory=list, description="Models and pipelines the stack declares as calling this model."
    )
    callees: list[Workload] = Field(default_factory=list, description="The models this model calls (`calls`).")
    keda: KedaRef | None = Field(
        default=None,
        description="Scale with KEDA (ScaledObjects) instead of HPAs; with its HTTP add-on, a model may sleep at zero.",
    )
    comparator: ComparatorRef | None = Field(
        default=None, description="The payload comparator the primary and shadows stream their exchanges to."
    )
    network: NetworkConfig = Field(
        default_factory=NetworkConfig,
        description="Where the API server is: an inference pool's picker watches its pool and pods through it.",
    )
    model_cache: ModelCacheRef | None = Field(
        default=None,
        description="The node-local model cache the model's cached versions read their files from "
        "(platform.modelCache; docs/model-cache.md).",
    )

    @model_validator(mode="after")
    def _sleeping_needs_the_add_on(self) -> InferenceServiceArgs:
        if self.model.autoscaling.scales_to_zero and (self.keda is None or self.keda.http_add_on is None):
            raise config_problems(
                [
                    (
                        "model.autoscaling.minReplicas",
                        "a model sleeps at zero only with KEDA and its HTTP add-on: set keda.httpAddOn",
                    )
                ]
            )
        return self

    @model_validator(mode="after")
    def _payloads_need_the_comparator(self) -> InferenceServiceArgs:
        if self.model.analysis.payloads.enabled and self.comparator is None:
            raise config_problems(
                [("model.analysis.payloads.enabled", "answers are compared by the payload comparator: set comparator")]
            )
        return self

    @model_validator(mode="after")
    def _caching_needs_the_cache(self) -> InferenceServiceArgs:
        if self.model_cache is None and self.model.cache_settings():
            raise config_problems(
                [
                    (f"model.{setting}", "a cached version reads its files from the cache: set modelCache")
                    for setting, _ in self.model.cache_settings()
                ]
            )
        return self

    @model_validator(mode="after")
    def _s3_needs_credentials(self) -> InferenceServiceArgs:
        keys, anonymous = (self.storage.s3_keys, self.storage.s3_anonymous) if self.storage else (False, False)
        uris = [(f"model.versions[{i}].modelUri", version.model_uri) for i, version in enumerate(self.model.versions)]
        uris += [
            (f"model.versions[{i}].adapters[{k}].uri", adapter.uri)
            for i, version in enumerate(self.model.versions)
            for k, adapter in enumerate(version.adapters)
        ]
        problems = [
            (
                path,
                "s3:// needs credentials: give storage a Secret with S3 keys (s3Keys), or s3Anonymous: true "
                "for a public bucket",
            )
            for path, uri in uris
            if needs_s3_credentials(uri, keys, anonymous)
        ]
        if problems:
            raise config_problems(problems)
        return self

    @property
    def wakes_through(self) -> HttpAddOnRef | None:
        """The HTTP add-on in the path of the model's live versions, when the model sleeps at zero."""
        return self.keda.http_add_on if self.keda is not None and self.model.autoscaling.scales_to_zero else None

    @property
    def service_account(self) -> str:
        """The model's own identity in the mesh, which callees' access policies name."""
        return self.model.name

    @property
    def host(self) -> str:
        """The model's own host name."""
        return f"{self.model.name}.{self.domain}"

    @property
    def shared_host(self) -> str:
        """The gateway's host for path-based access: <domain>/models/<model>/."""
        return self.domain

    @property
    def path_prefix(self) -> str:
        return f"/models/{self.model.name}/"

    @property
    def service_fqdn(self) -> str:
        return service_fqdn(self.model.name, self.namespace)

    @property
    def cached(self) -> dict[str, CachedVersion]:
        """The model's cached versions, by name (none without the cache)."""
        if self.model_cache is None:
            return {}
        return {cached.version: cached for cached in cached_versions([self.model])}

    @property
    def cache_node_selector(self) -> dict[str, str]:
        """The nodes that hold the model's cached versions: those of its kind (GPU or NPU)."""
        nodes = self.npu_nodes if self.model.accelerator_kind == "npu" else self.gpu_nodes
        return dict(nodes.node_selector)

    def workload(self) -> Workload:
        return model_workload(self.model, self.namespace, self.wakes_through)


def service_fqdn(name: str, namespace: str) -> str:
    """The in-cluster host of a model's (or pipeline's) Service."""
    return f"{name}.{namespace}.svc.cluster.local"


def model_workload(model: ModelSpec, namespace: str, wakes_through: HttpAddOnRef | None = None) -> Workload:
    """A model as access rules see it: its pods, its service account, its serving ports, and the
    interceptor in front of it when it sleeps at zero."""
    return Workload(
        name=model.name,
        namespace=namespace,
        service_account=model.name,
        ports=model.serving_ports,
        wakes_through=wakes_through,
    )


def version_name(args: InferenceServiceArgs, version: ModelVersion) -> str:
    return f"{args.model.name}-{version.name}"


def version_fqdn(args: InferenceServiceArgs, version: ModelVersion) -> str:
    """The in-cluster host of one version's Service."""
    return service_fqdn(version_name(args, version), args.namespace)


def selector_labels(args: InferenceServiceArgs, version: ModelVersion | None = None) -> dict[str, str]:
    """The labels Services and Istio subsets select on. Never change these for an existing version."""
    labels = {"app": args.model.name}
    if version is not None:
        labels["version"] = version.name
    return labels


def object_labels(args: InferenceServiceArgs, version: ModelVersion | None = None) -> dict[str, str]:
    labels = {
        "app.kubernetes.io/name": args.model.name,
        "app.kubernetes.io/component": "predictor",
        "app.kubernetes.io/part-of": PART_OF,
        "app.kubernetes.io/managed-by": "pulumi",
        "inference-platform/runtime": args.model.runtime,
    }
    if version is not None:
        labels["app.kubernetes.io/instance"] = version_name(args, version)
        labels["app.kubernetes.io/version"] = version.name
    return selector_labels(args, version) | labels


def object_metadata(args: InferenceServiceArgs, name: str, version: ModelVersion | None = None) -> dict[str, Any]:
    return {"name": name, "namespace": args.namespace, "labels": object_labels(args, version)}
