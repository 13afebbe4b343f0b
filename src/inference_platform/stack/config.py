"""The stack configuration: the contract between a platform team's Pulumi.<stack>.yaml and this program.

Keys live under the project's namespace (`inference-platform:models`, ...). The Pulumi CLI hands
them to the program as strings, objects JSON-encoded; `parse_stack_config` takes that form, so
the offline render and `pulumi up` validate exactly the same input the same way.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Callable, Collection, Mapping, Sequence
from typing import Annotated, Any, Literal

from pydantic import BaseModel, Field, ValidationError, model_validator

from inference_platform.analysis.capacity import CacheNodePlan, Plan, cache_plan
from inference_platform.analysis.capacity import plan as capacity_plan
from inference_platform.config.base import (
    ConfigModel,
    DNS1123Label,
    DNSSubdomain,
    Matches,
    config_problems,
    duplicate_problems,
    find_cycles,
)
from inference_platform.config.errors import (
    ConfigError,
    Problem,
    problem_order,
    problems_from_errors,
    problems_from_validation,
)
from inference_platform.config.limits import nesting_problem
from inference_platform.config.partial import parsed, validate_partially
from inference_platform.config.project import PROJECT as PROJECT  # noqa: PLC0414 (re-exported)
from inference_platform.config.secrets import SecretPath, plain_secret_problems
from inference_platform.platform.ascend_device_plugin import AscendDevicePluginConfig
from inference_platform.platform.dcgm_exporter import DcgmExporterConfig
from inference_platform.platform.gpu_nodes import GpuNodes
from inference_platform.platform.grafana import HOST_PREFIX as GRAFANA_HOST
from inference_platform.platform.grafana import GrafanaConfig
from inference_platform.platform.hami import HamiConfig
from inference_platform.platform.ingress_gateway import ISTIO_NAMESPACE, InferenceRoutes, IngressGatewayConfig
from inference_platform.platform.keda import HttpAddOnRef, KedaConfig, KedaRef
from inference_platform.platform.leader_worker_set import NAMESPACE as LWS_NAMESPACE
from inference_platform.platform.leader_worker_set import LeaderWorkerSetConfig
from inference_platform.platform.metrics_server import MetricsServerConfig
from inference_platform.platform.model_cache import ModelCacheConfig
from inference_platform.platform.network import NetworkConfig
from inference_platform.platform.npu_nodes import NpuNodes
from inference_platform.platform.prometheus import SERVER_PORT, PrometheusConfig
from inference_platform.platform.prometheus_adapter import PrometheusAdapterConfig
from inference_platform.serving.gpu import GPU_MODE_UNION, VirtualGpu
from inference_platform.serving.inference_service.routing import mesh_route_name
from inference_platform.serving.model_spec import ModelSpecBase, ModelVersion
from inference_platform.serving.model_storage import StorageCredentials, is_downloaded, needs_s3_credentials
from inference_platform.serving.payload_comparator import PayloadComparatorConfig
from inference_platform.serving.pipeline.spec import PipelineSpec
from inference_platform.serving.rollout_spec import RolloutSettings
from inference_platform.serving.runtimes import RUNTIME_UNION, ModelSpec
from inference_platform.stack.elsewhere import elsewhere

# The discriminated unions a stack's config holds (for reports of their problems).
UNIONS = (RUNTIME_UNION, GPU_MODE_UNION)

MAX_HOST_LENGTH = 253
# Pulumi's stack names, and a StackReference's fully qualified name (<org>/<project>/<stack>).
StackName = Annotated[
    str, Matches(r"^[A-Za-z0-9_.-]{1,100}$", "a stack's name: 1 to 100 letters, digits, '_', '.' and '-'")
]
StackReferenceName = Annotated[
    str,
    Matches(
        r"^([A-Za-z0-9_.-]{1,100}/){0,2}[A-Za-z0-9_.-]{1,100}$",
        "a stack's name, <project>/<stack> or <organization>/<project>/<stack>",
    ),
]
# A Gateway API Gateway holds at most 64 listeners; one is the plain HTTP listener.
MAX_GATEWAY_LISTENERS = 64
MAX_TLS_POOL_MODELS = MAX_GATEWAY_LISTENERS - 1


class PlatformConfig(ConfigModel):
    """The cluster-wide pieces models run on; each can be switched off."""

    kubernetes_version: (
        Annotated[str, Matches(r"^1\.[0-9]+\.[0-9]+$", "a Kubernetes version such as 1.30.4")] | None
    ) = Field(default=None, description="The cluster's version (1.30.4); HAMi runs a kube-scheduler of this version.")
    ingress: IngressGatewayConfig = Field(
        default_factory=IngressGatewayConfig, description="Istio: the ingress gateway and the mesh's control plane."
    )
    prometheus: PrometheusConfig = Field(
        default_factory=PrometheusConfig,
        description="Prometheus, which scrapes the models, the sidecars and the exporters.",
    )
    prometheus_adapter: PrometheusAdapterConfig = Field(
        default_factory=PrometheusAdapterConfig,
        description="prometheus-adapter: the custom metrics (GPU use, QPS, queue depth) HPAs read; needs Prometheus.",
    )
    metrics_server: MetricsServerConfig = Field(
        default_factory=MetricsServerConfig,
        description="metrics-server: the resource metrics API HPAs on CPU and memory read.",
    )
    grafana: GrafanaConfig = Field(
        default_factory=GrafanaConfig, description="Grafana with a dashboard per compared model (off by default)."
    )
    dcgm_exporter: DcgmExporterConfig = Field(
        default_factory=DcgmExporterConfig,
        description="NVIDIA dcgm-exporter: per-GPU metrics on GPU nodes (off by default).",
    )
    hami: HamiConfig = Field(
        default_factory=HamiConfig,
        description="HAMi: GPU sharing, required for gpu: vgpu and for Ascend NPUs (off by default).",
    )
    ascend_device_plugin: AscendDevicePluginConfig = Field(
        default_factory=AscendDevicePluginConfig,
        description="HAMi's Ascend device plugin, installed in HAMi's namespace when some model runs on Ascend NPUs.",
    )
    gpu_nodes: GpuNodes = Field(default_factory=GpuNodes, description="How GPU pods find and tolerate GPU nodes.")
    npu_nodes: NpuNodes = Field(
        default_factory=NpuNodes,
        description="How Ascend NPU pods find and tolerate NPU nodes, their runtime class, and the NPUs declared.",
    )
    autoscaler: Literal["hpa", "keda"] = Field(
        default="hpa",
        description="hpa: an HPA per autoscaled version, custom metrics from prometheus-adapter; keda: a KEDA "
        "ScaledObject instead (KEDA installed), which also lets models sleep at zero (minReplicas 0).",
    )
    keda: KedaConfig = Field(default_factory=KedaConfig, description="KEDA, with platform.autoscaler: keda.")
    leader_worker_set: LeaderWorkerSetConfig = Field(
        default_factory=LeaderWorkerSetConfig,
        description="LeaderWorkerSet's controller, installed when some model spans several nodes (vLLM's nodes).",
    )
    network: NetworkConfig = Field(
        default_factory=NetworkConfig,
        description="The platform's own namespaces closed edge by edge, and where the API server and kubelets are.",
    )
    payload_comparator: PayloadComparatorConfig = Field(
        default_factory=PayloadComparatorConfig,
        description="The comparator of shadows' answers, deployed when a model sets analysis.payloads.enabled.",
    )
    model_cache: ModelCacheConfig = Field(
        default_factory=ModelCacheConfig,
        description="{enabled, path, size, nodes}: model files kept on the cache nodes' local disk, read by the "
        "pods of the versions models cache (`cache`) instead of a download (docs/model-cache.md).",
    )

    @model_validator(mode="after")
    def _dependencies(self) -> PlatformConfig:
        problems = []
        if self.hami.enabled and self.kubernetes_version is None:
            problems.append(
                ("kubernetesVersion", "HAMi runs a kube-scheduler of the cluster's version: set it (1.30.4)")
            )
        if self.installs_prometheus_adapter and not self.prometheus.enabled:
            problems.append(("prometheusAdapter.enabled", "the adapter reads Prometheus: enable prometheus too"))
        if self.autoscaler == "keda" and not self.prometheus.enabled:
            problems.append(("autoscaler", "KEDA's triggers read Prometheus: enable prometheus too"))
        if self.grafana.enabled and not self.prometheus.enabled:
            problems.append(("grafana.enabled", "Grafana's dashboards read Prometheus: enable prometheus too"))
        if self.grafana.enabled and self.grafana.admin_password is None:
            problems.append(
                (
                    "grafana.adminPassword",
                    "required with Grafana: pulumi config set --secret --path 'platform.grafana.adminPassword' ...",
                )
            )
        if self.grafana.expose and not self.ingress.enabled:
            problems.append(("grafana.expose", "Grafana is exposed through the gateway: enable ingress too"))
        if self.network.closed and self.prometheus.subcharts:
            problems.append(
                (
                    "prometheus.subcharts",
                    "the platform's edge table has no rows for Prometheus' subcharts: drop them, or set "
                    "network.closed: false",
                )
            )
        problems += self._own_namespace_problems()
        if problems:
            raise config_problems(problems)
        return self

    def _own_namespace_problems(self) -> list[tuple[str, str]]:
        """HAMi and metrics-server create their namespaces: not one another component creates."""
        taken = {
            self.ingress.gateway.namespace,
            ISTIO_NAMESPACE,
            self.prometheus.namespace,
            self.grafana.namespace,
            self.dcgm_exporter.namespace,
            self.keda.namespace,
            LWS_NAMESPACE,
        }
        owned = [("hami.namespace", self.hami.namespace)] if self.hami.enabled else []
        if self.metrics_server.enabled is not False:
            owned.append(("metricsServer.namespace", self.metrics_server.namespace))
        problems = [
            (path, f"{name} is another component's namespace: give it its own (or kube-system)")
            for path, name in owned
            if name in taken
        ]
        if len(owned) == 2 and self.hami.namespace == self.metrics_server.namespace != "kube-system":
            problems.append(
                ("metricsServer.namespace", "HAMi's namespace: give metrics-server its own (or kube-system)")
            )
        return problems

    @property
    def installs_prometheus_adapter(self) -> bool:
        """Whether anything needs the adapter: the HPAs' custom metrics (KEDA reads Prometheus itself)."""
        return self.prometheus_adapter.installed(self.autoscaler == "hpa")

    @property
    def gpu_metrics(self) -> Literal["dcgm", "hami"] | None:
        """Where per-pod GPU utilisation comes from: HAMi's per-container metric when HAMi shares
        the GPUs (it allocates every GPU on its nodes, whole ones too), else dcgm-exporter."""
        if self.hami.enabled:
            return "hami"
        if self.dcgm_exporter.enabled:
            return "dcgm"
        return None


class StackConfig(ConfigModel):
    """Everything under `inference-platform:` in a stack file."""

    domain: DNSSubdomain = Field(description="Models are served at <model>.<domain> and <domain>/models/<model>/.")
    namespace: DNS1123Label = Field(default="service", description="The namespace model workloads run in.")
    models: list[ModelSpec] = Field(default_factory=list, description="The models to serve.")
    rollouts: RolloutSettings = Field(
        default_factory=RolloutSettings,
        description="How `infra rollout`'s pull requests are merged (models[].rollout: each model's own).",
    )
    pipelines: list[PipelineSpec] = Field(
        default_factory=list,
        description="Inference graphs over the models (KServe InferenceGraph shapes), served at <pipeline>.<domain>.",
    )
    platform: PlatformConfig = Field(
        default=PlatformConfig(), description="The cluster-wide pieces models run on; each can be switched off."
    )
    storage: StorageCredentials | None = Field(
        default=None, description="Credentials for downloading model files; store the values as Pulumi secrets."
    )
    shards: Annotated[list[StackName], Field(min_length=1)] | None = Field(
        default=None,
        description="A platform stack: the stacks holding the environment's models (shards), each naming this "
        "one as its platformStack. The platform stack holds no models itself.",
    )
    platform_stack: StackReferenceName | None = Field(
        default=None,
        description="A shard: the platform stack it runs on, as a StackReference names it (<org>/<project>/<stack>); "
        "its domain, namespace, platform and storage are that stack's. Only models and pipelines beside it.",
    )

    @model_validator(mode="after")
    def _check_names(self) -> StackConfig:
        problems = duplicate_problems([m.name for m in self.models], "models[{}].name", "model")
        problems += duplicate_problems([p.name for p in self.pipelines], "pipelines[{}].name", "pipeline")
        problems += self._neighbour_problems()
        # Objects of different models (and pipelines) must not share a name: model 'a' with
        # version 'b-c' and model 'a-b' with version 'c' would both own a Deployment 'a-b-c'.
        owners: dict[str, tuple[str, str]] = {}
        for owner, path, derived in self._object_names():
            host = f"{owner}.{self.domain}"
            if len(host) > MAX_HOST_LENGTH:
                problems.append((path, f"the host '{host}' is longer than {MAX_HOST_LENGTH} characters"))
            if self.platform.grafana.enabled and self.platform.grafana.expose and owner == GRAFANA_HOST:
                problems.append((path, f"{GRAFANA_HOST}.{self.domain} serves Grafana (platform.grafana.expose)"))
            for name, name_path in derived.items():
                owner_name, owner_path = owners.setdefault(name, (path, name_path))
                if owner_name != path:
                    problems.append(
                        (name_path, f"its objects would be named '{name}', like those of {owner_path}: rename one")
                    )
        problems += self._call_problems()
        problems += self._storage_problems()
        problems += self._pipeline_problems()
        problems += self._gpu_problems()
        if not problems:
            problems += self._capacity_problems()
        problems += self._autoscaling_problems()
        problems += self._pool_problems()
        problems += self._cache_problems()
        if problems:
            raise config_problems(problems)
        return self

    def _cache_problems(self) -> list[tuple[str, str]]:
        """Cached versions need the cache, files that are downloaded, and pods on the cache nodes; the
        cache nodes' kind must be declared, and what each holds must fit its size."""
        cache = self.platform.model_cache
        problems = []
        settings = [
            (f"models[{index}].{path}", model, version)
            for index, model in enumerate(self.models)
            for path, version in model.cache_settings()
        ]
        elsewhere = list(
            dict.fromkeys(
                model.name
                for _, model, version in settings
                if is_downloaded(version.model_uri) and model.accelerator_kind not in cache.kinds
            )
        )
        # One mistake, platform.modelCache.nodes: the models that run on other nodes are named there.
        undeclared = cache.enabled and "npu" in cache.kinds and not self.platform.npu_nodes.pools
        if undeclared:
            runs = f", where {', '.join(elsewhere)} run{'s' if len(elsewhere) == 1 else ''}" if elsewhere else ""
            problems.append(
                (
                    "platform.modelCache.nodes",
                    f"{cache.nodes} caches on the NPU nodes, and platform.npuNodes.pools declares none: "
                    f"declare them, or cache on gpu{runs}",
                )
            )
        selectors: dict[str, tuple[str, dict[str, str]]] = {
            "gpu": ("gpuNodes", self.platform.gpu_nodes.node_selector),
            "npu": ("npuNodes", self.platform.npu_nodes.node_selector),
        }
        for kind in cache.kinds if cache.enabled else ():
            key, selector = selectors[kind]
            if not selector and not (kind == "npu" and undeclared):
                problems.append(
                    (
                        f"platform.{key}.nodeSelector",
                        f"the {kind.upper()} nodes cache (platform.modelCache.nodes: {cache.nodes}), and they are "
                        "found by these labels: with none, no node would hold a cached version's copy",
                    )
                )
        problems += self._cached_version_problems(settings, undeclared)
        if cache.enabled and cache.size is not None and not problems:
            problems += self._cache_fit()
        return problems

    def _cached_version_problems(
        self, settings: Sequence[tuple[str, ModelSpecBase, ModelVersion]], undeclared: bool
    ) -> list[tuple[str, str]]:
        """What each setting that caches (`cache`, a version's `cache`) asks that the cache cannot do, one
        problem per setting: the cache off (one problem, at the first, naming the others), files on
        claims (the setting's versions together), a model on other nodes than the cache's (unless the
        cache's own nodes are the mistake, `undeclared`)."""
        cache = self.platform.model_cache
        if not settings:
            return []
        if not cache.enabled:
            first, *others = dict.fromkeys(where for where, _, _ in settings)
            also = f" (here and at {', '.join(self._named(where) for where in others)})" if others else ""
            return [(first, f"the cache is off: set platform.modelCache.enabled and its size, or drop cache{also}")]
        problems = []
        claims: dict[str, list[ModelVersion]] = {}
        for where, model, version in settings:
            if not is_downloaded(version.model_uri):
                claims.setdefault(where, []).append(version)
            elif model.accelerator_kind not in cache.kinds and not undeclared:
                runs = f"{model.accelerator_kind.upper()} nodes" if model.accelerator_kind else "no GPU or NPU"
                problems.append(
                    (
                        where,
                        f"the model runs on {runs}, and platform.modelCache.nodes is {cache.nodes}: "
                        "its pods could not read the cache nodes' copy",
                    )
                )
        for where, versions in claims.items():
            files = (
                f"{versions[0].name}'s files are on a claim ({versions[0].model_uri})"
                if len(versions) == 1
                else f"the files of {', '.join(version.name for version in versions)} are on claims"
            )
            problems.append(
                (where, f"{files}, already in the cluster: only downloaded files (s3, gs, http(s), hf) are cached")
            )
        return problems

    def _named(self, where: str) -> str:
        """models[1].cache as a report names it: models[1] (churn).cache."""
        index = int(where.split("]", maxsplit=1)[0].removeprefix("models["))
        return where.replace(f"models[{index}]", f"models[{index}] ({self.models[index].name})", 1)

    def _cache_fit(self) -> list[tuple[str, str]]:
        """Each kind of cache node holds every cached version of its kind's models (and their adapters)."""
        return [
            (
                "platform.modelCache.size",
                f"each {nodes.kind.upper()} cache node would hold {nodes.total} "
                f"({', '.join(f'{name} {size}' for name, size in nodes.held)}), more than its {nodes.size}",
            )
            for nodes in self.cache_plan()
            if not nodes.fits
        ]

    def _pool_problems(self) -> list[tuple[str, str]]:
        """Inference pools need the platform's Istio, whose istiod and gateway the platform sets up for them."""
        pooled = [i for i, model in enumerate(self.models) if model.routed_by_pool]
        if not pooled:
            return []
        ingress = self.platform.ingress
        if not ingress.enabled:
            return [
                (
                    f"models[{i}].routing",
                    "inference pools need the platform's Istio (platform.ingress.enabled): it turns on istiod's "
                    "inference extension, installs the Gateway API's CRDs and serves the HTTPRoutes",
                )
                for i in pooled
            ]
        if ingress.tls is not None and len(pooled) > MAX_TLS_POOL_MODELS:
            return [
                (
                    f"models[{pooled[MAX_TLS_POOL_MODELS]}].routing",
                    f"over TLS each pool-routed model is a listener of the Gateway, which holds at most "
                    f"{MAX_GATEWAY_LISTENERS}: {len(pooled)} models are too many",
                )
            ]
        return []

    @property
    def inference_routes(self) -> InferenceRoutes | None:
        """What the Gateway for inference-pool routes serves, when some model is routed through pools."""
        pooled = [model for model in self.models if model.routed_by_pool]
        if not pooled:
            return None
        return InferenceRoutes(namespaces=[self.namespace], hosts=[f"{m.name}.{self.domain}" for m in pooled])

    def _neighbour_problems(self) -> list[tuple[str, str]]:
        """A shard's models and pipelines against the environment's other stacks: a name claimed
        once, and no object name another stack's objects take."""
        neighbours = elsewhere().neighbours
        if not neighbours:
            return []
        taken = {name: (owner, n.shard) for owner, n in neighbours.items() for name in n.object_names}
        problems = []
        items = [("models", m.name) for m in self.models] + [("pipelines", p.name) for p in self.pipelines]
        counts = {"models": 0, "pipelines": 0}
        for kind, name in items:
            index = counts[kind]
            counts[kind] += 1
            if name in neighbours:
                other = neighbours[name]
                problems.append(
                    (
                        f"{kind}[{index}].name",
                        f"'{name}' is also a {other.kind} of the stack {other.shard}: a name is one stack's",
                    )
                )
        for owner, _, derived in self._object_names():
            for name, name_path in derived.items():
                if name in taken and owner not in neighbours:
                    other_owner, shard = taken[name]
                    problems.append(
                        (
                            name_path,
                            f"its objects would be named '{name}', like those of {other_owner} (stack {shard}): "
                            "rename one",
                        )
                    )
        return problems

    def _object_names(self) -> list[tuple[str, str, dict[str, str]]]:
        """Each model and pipeline (its name's path) with the names its objects take, and their paths.
        A repeated name is left out: it is reported as a duplicate."""
        named: list[tuple[str, str, dict[str, str]]] = []
        models: set[str] = set()
        for index, model in enumerate(self.models):
            if model.name in models:
                continue
            models.add(model.name)
            path = f"models[{index}].name"
            derived = {model.name: path, mesh_route_name(model.name): path}
            derived |= {
                f"{model.name}-{v.name}": f"models[{index}].versions[{j}].name" for j, v in enumerate(model.versions)
            }
            named.append((model.name, path, derived))
        pipelines: set[str] = set()
        for index, pipeline in enumerate(self.pipelines):
            if pipeline.name in pipelines:
                continue
            pipelines.add(pipeline.name)
            path = f"pipelines[{index}].name"
            named.append((pipeline.name, path, {pipeline.name: path}))
        return named

    def _storage_problems(self) -> list[tuple[str, str]]:
        """s3:// files are read with the stack's keys, or anonymously only where the stack says so."""
        s3 = self.storage.s3 if self.storage is not None else None
        declared = s3 is not None and s3.says_how  # half a pair of keys is reported on storage.s3 alone
        uris = [
            (f"models[{i}].versions[{j}].modelUri", version.model_uri)
            for i, model in enumerate(self.models)
            for j, version in enumerate(model.versions)
            if parsed(version, "model_uri")
        ]
        uris += [
            (f"models[{i}].versions[{j}].adapters[{k}].uri", adapter.uri)
            for i, model in enumerate(self.models)
            for j, version in enumerate(model.versions)
            if parsed(version, "adapters")
            for k, adapter in enumerate(version.adapters)
        ]
        return [
            (
                path,
                "s3:// needs credentials: set storage.s3.accessKeyId and storage.s3.secretAccessKey (Pulumi "
                "secrets), or storage.s3.anonymous: true for a public bucket",
            )
            for path, uri in uris
            if needs_s3_credentials(uri, declared, s3_anonymous=False)
        ]

    def _pipeline_problems(self) -> list[tuple[str, str]]:
        """Every model step names a model of the stack (or of a neighbour), and none that sleeps is a
        Hard dependency."""
        neighbours = elsewhere().models
        names = {model.name for model in self.models} | set(neighbours)
        sleeping = {model.name for model in self.models if model.autoscaling.scales_to_zero}
        sleeping |= {name for name, n in neighbours.items() if n.sleeps}
        problems = []
        for i, pipeline in enumerate(self.pipelines):
            for node_name, node in pipeline.nodes.items():
                for j, step in enumerate(node.steps):
                    path = f"pipelines[{i}].nodes.{node_name}.steps[{j}]"
                    if step.model is not None and step.model not in names:
                        problems.append((f"{path}.model", f"'{step.model}' is not a model of {self._where}"))
                    elif step.model in sleeping and step.dependency == "Hard":
                        problems.append(
                            (
                                f"{path}.dependency",
                                f"'{step.model}' sleeps at zero replicas, and while it wakes its requests wait or get "
                                "503, past the router's 60s cut-off for a cold start of minutes: a Hard step would "
                                "fail the pipeline on every cold start; make it Soft, or keep the model awake "
                                "(minReplicas 1)",
                            )
                        )
        return problems

    def _call_problems(self) -> list[tuple[str, str]]:
        """Callees must be models of the stack, and calls must not go round in a circle (a request
        would then call itself until it timed out)."""
        neighbours = elsewhere().models
        names = {model.name for model in self.models} | set(neighbours)
        problems = [
            (f"models[{i}].calls[{j}]", f"'{callee}' is not a model of {self._where}")
            for i, model in enumerate(self.models)
            for j, callee in enumerate(model.calls)
            if callee not in names
        ]
        calls = {name: [c for c in n.calls if c in names and c != name] for name, n in neighbours.items()}
        calls |= {model.name: [c for c in model.calls if c in names and c != model.name] for model in self.models}
        index = {model.name: i for i, model in enumerate(self.models)}
        for cycle in find_cycles(calls):
            # Reported at one of this stack's calls on the circle (a neighbour's own circle is its own).
            mine = [(a, b) for a, b in itertools.pairwise(cycle) if a in index]
            if not mine:
                continue
            caller, callee = mine[-1]
            path = f"models[{index[caller]}].calls[{self.models[index[caller]].calls.index(callee)}]"
            problems.append((path, f"calls go round in a circle: {' -> '.join(cycle)}"))
        return problems

    @property
    def _where(self) -> str:
        return "this environment" if self.platform_stack is not None else "this stack"

    def call_edges(self) -> list[tuple[str, str]]:
        """(caller, callee) for each declared call: models' `calls`, then each pipeline's models."""
        edges = [(model.name, callee) for model in self.models for callee in model.calls]
        return edges + [(pipeline.name, model) for pipeline in self.pipelines for model in pipeline.models]

    @property
    def sharded(self) -> bool:
        """A platform stack: its models are its shards', each of which writes its own alerts and dashboards."""
        return self.shards is not None

    @property
    def http_add_on(self) -> HttpAddOnRef | None:
        """KEDA's HTTP add-on: installed when some model sleeps at zero."""
        if self.platform.autoscaler != "keda" or not any(m.autoscaling.scales_to_zero for m in self.models):
            return None
        return HttpAddOnRef(namespace=self.platform.keda.namespace)

    @property
    def keda(self) -> KedaRef | None:
        """What ScaledObjects name, when the platform scales with KEDA."""
        if self.platform.autoscaler != "keda":
            return None
        return KedaRef(
            prometheus_url=f"{self.platform.prometheus.url}:{SERVER_PORT}",
            gpu_source=self.platform.gpu_metrics or "dcgm",
            http_add_on=self.http_add_on,
        )

    @property
    def queue_series(self) -> list[str]:
        """The runtimes' queue gauges the models that scale on queueDepth read."""
        return sorted({m.queue_metric for m in self.models if m.autoscaling.queue_depth is not None and m.queue_metric})

    @property
    def ttft_histograms(self) -> list[str]:
        """The runtimes' time-to-first-token histograms the models that scale on timeToFirstTokenP90 read."""
        return sorted(
            {
                m.ttft_histogram
                for m in self.models
                if m.autoscaling.time_to_first_token_p90 is not None and m.ttft_histogram
            }
        )

    @property
    def installs_leader_worker_set(self) -> bool:
        """Some model spans several nodes: each replica a LeaderWorkerSet group."""
        return any(model.group_size > 1 for model in self.models)

    @property
    def installs_metrics_server(self) -> bool:
        needed = any(model.uses_resource_metrics for model in self.models)
        return self.platform.metrics_server.installed(needed)

    def _autoscaling_problems(self) -> list[tuple[str, str]]:
        problems = []
        hpa = self.platform.autoscaler == "hpa"
        for index, model in enumerate(self.models):
            scaling = model.autoscaling
            if hpa and scaling.uses_custom_metrics and not self.platform.installs_prometheus_adapter:
                problems.append(
                    (
                        f"models[{index}].autoscaling",
                        "GPU and QPS targets are custom metrics: enable platform.prometheusAdapter",
                    )
                )
            if hpa and scaling.scales_to_zero:
                problems.append(
                    (
                        f"models[{index}].autoscaling.minReplicas",
                        "0 (sleeping at zero replicas) needs KEDA: set platform.autoscaler to keda",
                    )
                )
            if scaling.gpu_utilization is not None and self.platform.gpu_metrics is None:
                problems.append(
                    (
                        f"models[{index}].autoscaling.gpuUtilization",
                        "nothing measures GPU use: enable platform.dcgmExporter (or platform.hami)",
                    )
                )
        return problems

    def capacity(self) -> Plan:
        """The GPUs the models hold at minimum replicas and at peak (analysis/capacity.py)."""
        platform = self.platform
        return capacity_plan(
            self.models,
            platform.gpu_nodes,
            platform.hami.sharing,
            platform.gpu_nodes.declared,
            platform.npu_nodes,
            model_cache=platform.model_cache,
        )

    def cache_plan(self) -> tuple[CacheNodePlan, ...]:
        """What each kind of cache node holds against platform.modelCache.size; empty when the cache is off."""
        return cache_plan(self.models, self.platform.model_cache)

    def _capacity_problems(self) -> list[tuple[str, str]]:
        """Pods that could never all be scheduled: more GPUs at minimum than the cluster declares,
        or more in one pod than one node has."""
        nodes = self.platform.gpu_nodes
        problems = [
            (
                f"models[{index}].gpu.count",
                f"each pod needs {model.gpu.device_count} GPUs on one node; "
                f"platform.gpuNodes.gpusPerNode is {nodes.gpus_per_node}",
            )
            for index, model in enumerate(self.models)
            if nodes.gpus_per_node is not None
            and (model.gpu.device_count or 0) > nodes.gpus_per_node
            and model.gpu.mode in ("exclusive", "vgpu")
        ]
        problems += [
            (
                f"models[{index}].nodes",
                f"a replica is a group of {model.group_size} pods, each on a node of its own with "
                f"{model.gpu.device_count} GPUs: {model.group_size} x {model.gpu.device_count} = "
                f"{model.group_size * (model.gpu.device_count or 0)} GPUs on {model.group_size} nodes, but "
                f"platform.gpuNodes declares {nodes.count} nodes",
            )
            for index, model in enumerate(self.models)
            # An NPU group is measured against its NPU pool (_npu_capacity_problems).
            if nodes.count is not None and model.group_size > nodes.count and model.npu is None
        ]
        problems += self._npu_capacity_problems()
        plan = self.capacity()
        others = elsewhere().gpus
        # Awake, not at the minimum: a version asleep at zero must still be able to wake.
        need = plan.gpus_awake + others.awake
        if plan.declared is not None and need > plan.declared:
            awake = (
                "with every version awake"
                if (plan.gpus_awake, others.awake) != (plan.gpus_min, others.min)
                else "at their minimum replicas"
            )
            beside = (
                f" ({plan.gpus_awake} here, {others.awake} in the environment's other stacks)" if others.awake else ""
            )
            problems.append(
                (
                    "platform.gpuNodes" if self.platform_stack is None else "models",
                    f"the models need {need} GPUs {awake}{beside}, more than the "
                    f"{plan.declared} declared ({nodes.count} nodes x {nodes.gpus_per_node}): pods could never all "
                    "schedule; add GPU nodes, or lower replicas or GPU requests",
                )
            )
        return problems

    def _npu_capacity_problems(self) -> list[tuple[str, str]]:
        """NPU pods that could never all be scheduled: more cards in one pod (or group) than the
        declared nodes of that type have, or more cards awake than the cluster declares."""
        pools = self.platform.npu_nodes
        problems = []
        for index, model in enumerate(self.models):
            if model.npu is None:
                continue
            pool = pools.pool(model.npu.type)
            if pool is None:
                if pools.pools:
                    declared = ", ".join(p.type for p in pools.pools)
                    problems.append(
                        (
                            f"models[{index}].npu.type",
                            f"platform.npuNodes.pools declares no {model.npu.type} nodes (only {declared}): its pods "
                            "could never schedule; add a pool of them, or pick a declared type",
                        )
                    )
                continue
            if model.npu.count > pool.npus_per_node:
                problems.append(
                    (
                        f"models[{index}].npu.count",
                        f"each pod needs {model.npu.count} {model.npu.type} NPUs on one node; the "
                        f"{model.npu.type} nodes have {pool.npus_per_node} (platform.npuNodes.pools)",
                    )
                )
            if model.group_size > pool.count:
                problems.append(
                    (
                        f"models[{index}].nodes",
                        f"a replica is a group of {model.group_size} pods, each on a node of its own with "
                        f"{model.npu.count} {model.npu.type} NPUs, but platform.npuNodes.pools declares "
                        f"{pool.count} {model.npu.type} nodes",
                    )
                )
        plan = self.capacity()
        others = elsewhere().npus
        for device, npus in plan.npus.items():
            pool = pools.pool(device)
            beside = others.get(device)
            need = npus.awake + (beside.awake if beside else 0)
            if pool is None or npus.declared is None or need <= npus.declared:
                continue
            awake = "with every version awake" if npus.awake != npus.min else "at their minimum replicas"
            elsewhere_note = f" ({npus.awake} here, {beside.awake} in the environment's other stacks)" if beside else ""
            problems.append(
                (
                    "platform.npuNodes.pools" if self.platform_stack is None else "models",
                    f"the models need {need} {device} NPUs {awake}{elsewhere_note}, more than the {npus.declared} "
                    f"declared ({pool.count} nodes x {pool.npus_per_node}): pods could never all schedule; add "
                    f"{device} nodes, or lower replicas or NPU requests",
                )
            )
        return problems

    def _gpu_problems(self) -> list[tuple[str, str]]:
        problems = [
            (f"models[{index}].gpu", "vgpu needs GPU sharing: set platform.hami.enabled to true")
            for index, model in enumerate(self.models)
            if isinstance(model.gpu, VirtualGpu) and not self.platform.hami.enabled
        ]
        problems += [
            (
                f"models[{index}].npu",
                "Ascend NPUs are scheduled by HAMi (its scheduler and Ascend device plugin): set "
                "platform.hami.enabled to true",
            )
            for index, model in enumerate(self.models)
            if model.npu is not None and not self.platform.hami.enabled
        ]
        return problems

    @property
    def uses_npus(self) -> bool:
        """Whether some model runs on Ascend NPUs: HAMi's Ascend side and its device plugin are installed."""
        return any(model.npu is not None for model in self.models)

    @property
    def installs_ascend_device_plugin(self) -> bool:
        """HAMi's Ascend device plugin: on the NPU nodes when some model runs on NPUs (which HAMi
        schedules: a model's npu without HAMi is a config error)."""
        return self.uses_npus and self.platform.hami.enabled


def decode_value(raw: Any) -> Any:
    """A config value as the program receives it: objects and lists arrive JSON-encoded."""
    if isinstance(raw, str) and raw.lstrip()[:1] in ("{", "["):
        try:
            return json.loads(raw)
        except json.JSONDecodeError:
            return raw
    return raw


def decode_within_limits(
    values: Mapping[str, Any], checked: Collection[str] = ()
) -> tuple[dict[str, Any], list[Problem]]:
    """The project's config keys decoded, and a problem for each value too large or too deep to
    read (config/limits.py); keys in `checked` were checked piece by piece by the caller (a whole
    environment's models, gathered from its shards' files, each within the limits)."""
    decoded: dict[str, Any] = {}
    too_deep: list[Problem] = []
    for key, value in values.items():
        try:
            decoded[key] = decode_value(value)
            problem = None if key in checked else nesting_problem(decoded[key])
        except RecursionError:
            problem = "nests values too deeply"
        if problem is not None:
            too_deep.append(Problem(key, problem, (key,)))
    return decoded, too_deep


def parse_stack_config(
    values: Mapping[str, Any], checked: Collection[str] = (), sealed: Callable[[SecretPath], bool] | None = None
) -> StackConfig:
    """Validate the project's config keys (without the `inference-platform:` prefix); `checked`
    as for `decode_within_limits`. With `sealed` (whether a secret setting's value was a Pulumi
    secret), a secret setting written in plain text is a problem too (config/secrets.py).

    Raises ConfigError listing every problem with its path.
    """
    decoded, too_deep = decode_within_limits(values, checked)
    if too_deep:
        raise ConfigError(too_deep)
    plain = plain_secret_problems(StackConfig, decoded, sealed) if sealed is not None else []
    try:
        config = StackConfig.model_validate(decoded)
    except ValidationError as error:
        found = every_problem(StackConfig, decoded, error)
        raise found.with_problems(sorted({*found.problems, *plain}, key=problem_order)) from None
    if plain:
        raise ConfigError(plain)
    return config


def pulumi_sealed(is_secret: Callable[[str], bool]) -> Callable[[SecretPath], bool]:
    """Whether a setting was a secret, as far as the Pulumi CLI tells a program: it names the
    top-level keys that hold a secret (`is_secret`, pulumi.runtime.config.is_config_secret), so
    a plain value beside a secret one under the same key passes."""
    return lambda path: is_secret(f"{PROJECT}:{path[0]}")


def every_problem(model: type[BaseModel], data: Any, error: ValidationError) -> ConfigError:
    """The ConfigError of a config pydantic refused, with every independent problem in it: pydantic
    stops at the first problem of each model, so look again, piece by piece (config/partial.py)."""
    partial = validate_partially(model, data)
    found = set(problems_from_validation(error, UNIONS, model=model)) | set(
        problems_from_errors(partial.errors, UNIONS, model=model)
    )
    return ConfigError(sorted(found, key=problem_order), incomplete=partial.incomplete)


def project_values(config: Mapping[str, Any]) -> dict[str, Any]:
    """The values under this project's namespace from a full `namespace:key` config map."""
    prefix = f"{PROJECT}:"
    return {key[len(prefix) :]: value for key, value in config.items() if key.startswith(prefix)}
