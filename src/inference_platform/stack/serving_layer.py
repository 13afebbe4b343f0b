"""The model-serving layer: the model namespace, storage credentials, one InferenceService per model,
and one Pipeline per inference graph."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import pulumi

from inference_platform.kube import register
from inference_platform.platform.keda import KedaRef
from inference_platform.platform.prometheus import MetricsScraper
from inference_platform.serving.access import Workload
from inference_platform.serving.host_access import host_access
from inference_platform.serving.inference_service import InferenceService, InferenceServiceArgs
from inference_platform.serving.inference_service.args import model_workload, service_fqdn
from inference_platform.serving.model_cache_volumes import ModelCacheRef
from inference_platform.serving.model_namespace import PART_OF_LABELS, ModelNamespace, ModelNamespaceArgs
from inference_platform.serving.model_storage import StorageAccess
from inference_platform.serving.payload_capture import COMPARATOR, ComparatorRef
from inference_platform.serving.payload_comparator import PayloadComparator, PayloadComparatorArgs
from inference_platform.serving.pipeline import Pipeline, PipelineArgs, PipelineSpec
from inference_platform.stack.config import StackConfig

STORAGE_SECRET = "model-storage-credentials"


def storage_secret(config: StackConfig) -> dict[str, Any] | None:
    """The Secret the storage initializer reads; every value stays a Pulumi secret end to end."""
    if config.storage is None or not config.storage.secret_data():
        return None
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": STORAGE_SECRET, "namespace": config.namespace, "labels": PART_OF_LABELS},
        "type": "Opaque",
        "stringData": {key: pulumi.Output.secret(value) for key, value in sorted(config.storage.secret_data().items())},
    }


@dataclass(frozen=True)
class ModelFacts:
    """What the models and pipelines of the environment need to know of one model or pipeline that
    may live in another stack (a shard's neighbour): how it is reached, what it calls, and, for a
    model, where one inference request goes and what it looks like (a pipeline's steps)."""

    workload: Workload
    calls: tuple[str, ...]
    inference_path: str | None = None
    example_body: Any = None


@dataclass(frozen=True)
class ServingContext:
    """What the stack's models are deployed against, beside their own config: the platform's
    autoscaling and scraping, and every model and pipeline of the environment by name."""

    keda: KedaRef | None
    scraper: MetricsScraper | None
    directory: Mapping[str, ModelFacts]
    call_edges: tuple[tuple[str, str], ...]
    """(caller, callee) for every declared call of the environment, in the environment's order."""


def serving_context(config: StackConfig, beside: Mapping[str, ModelFacts] | None = None) -> ServingContext:
    """The context of a stack holding every model of its environment (one stack, or a platform
    stack reading its shards); a shard's own, with the environment's other models `beside` it for
    its pipelines to reach."""
    add_on = config.http_add_on
    directory: dict[str, ModelFacts] = {
        model.name: ModelFacts(
            model_workload(model, config.namespace, add_on if model.autoscaling.scales_to_zero else None),
            tuple(model.calls),
            model.inference_path,
            model.example_request().body,
        )
        for model in config.models
    }
    reachable = {**(beside or {}), **directory}
    for spec in config.pipelines:
        args = pipeline_args(config.namespace, config, spec, reachable, config.keda)
        directory[spec.name] = ModelFacts(args.workload(), tuple(spec.models))
    scraper = config.platform.prometheus.scraper if config.platform.prometheus.enabled else None
    return ServingContext(config.keda, scraper, directory, tuple(config.call_edges()))


def deploy_namespace(
    config: StackConfig, platform: list[pulumi.Resource], parent: pulumi.Resource | None = None
) -> list[pulumi.Resource]:
    """The models' namespace with its mesh and network defaults, the storage credentials and the
    payload comparator: what every model of the namespace shares; what models wait for."""
    namespace = ModelNamespace(
        config.namespace,
        ModelNamespaceArgs(name=config.namespace, host_access=host_access(config.models, config.platform.gpu_nodes)),
        opts=pulumi.ResourceOptions(parent=parent, depends_on=platform),
    )
    dependencies: list[pulumi.Resource] = [namespace, *platform]
    secret = storage_secret(config)
    if secret is not None:
        dependencies.append(register(secret, pulumi.ResourceOptions(parent=parent, depends_on=[namespace])))
    compared = [model for model in config.models if model.analysis.payloads.enabled]
    if compared:
        scraper = config.platform.prometheus.scraper if config.platform.prometheus.enabled else None
        comparator_args = PayloadComparatorArgs(
            namespace=config.namespace,
            models=compared,
            config=config.platform.payload_comparator,
            metrics_scraper=scraper,
        )
        PayloadComparator(
            COMPARATOR, comparator_args, opts=pulumi.ResourceOptions(parent=parent, depends_on=dependencies)
        )
    return dependencies


def deploy_models(
    config: StackConfig, platform: list[pulumi.Resource], parent: pulumi.Resource | None = None
) -> dict[str, Any]:
    """One InferenceService per model and one Pipeline per graph, after `platform` (istiod) is ready
    for Istio objects; returns the `models` (and `pipelines`) stack outputs."""
    dependencies = deploy_namespace(config, platform, parent)
    return deploy_workloads(config, serving_context(config), dependencies, parent)


def deploy_workloads(
    config: StackConfig,
    context: ServingContext,
    dependencies: list[pulumi.Resource],
    parent: pulumi.Resource | None = None,
) -> dict[str, Any]:
    """The stack's own models and pipelines (`config`'s), against `context`: the environment's."""
    access: StorageAccess | None = None
    if config.storage is not None:
        access = config.storage.access(STORAGE_SECRET)
    directory = context.directory
    after = pulumi.ResourceOptions(parent=parent, depends_on=dependencies)
    comparator = ComparatorRef(namespace=config.namespace)
    cache = config.platform.model_cache
    model_cache = ModelCacheRef(path=cache.path) if cache.enabled else None
    services = {
        model.name: InferenceService(
            model.name,
            InferenceServiceArgs(
                model=model,
                namespace=config.namespace,
                domain=config.domain,
                gateway=config.platform.ingress.gateway,
                url_scheme=config.platform.ingress.url_scheme,
                gpu_nodes=config.platform.gpu_nodes,
                npu_nodes=config.platform.npu_nodes,
                storage=access,
                metrics_scraper=context.scraper,
                callers=[directory[caller].workload for caller, callee in context.call_edges if callee == model.name],
                callees=[directory[callee].workload for callee in model.calls],
                keda=context.keda,
                comparator=comparator if model.analysis.payloads.enabled else None,
                network=config.platform.network,
                model_cache=model_cache if model.cache_settings() else None,
            ),
            opts=after,
        )
        for model in config.models
    }
    outputs: dict[str, Any] = {
        "models": {
            model.name: {"urls": svc.urls, "curl": svc.curl, "weights": svc.weights, "mirrors": svc.mirrors}
            | ({"adapters": svc.adapters} if model.served_adapters else {})
            for model in config.models
            for svc in (services[model.name],)
        }
    }
    pipelines = {
        spec.name: Pipeline(
            spec.name, pipeline_args(config.namespace, config, spec, directory, context.keda), opts=after
        )
        for spec in config.pipelines
    }
    if pipelines:
        outputs["pipelines"] = {
            name: {"urls": p.urls, "curl": p.curl, "models": p.models} for name, p in pipelines.items()
        }
    return outputs


def pipeline_args(
    namespace: str, config: StackConfig, spec: PipelineSpec, directory: Mapping[str, ModelFacts], keda: KedaRef | None
) -> PipelineArgs:
    """A pipeline placed beside the models it calls, with each model step's URL in the cluster."""
    first = spec.first_model()
    return PipelineArgs(
        pipeline=spec,
        namespace=namespace,
        domain=config.domain,
        gateway=config.platform.ingress.gateway,
        url_scheme=config.platform.ingress.url_scheme,
        metrics_scraper=config.platform.prometheus.scraper if config.platform.prometheus.enabled else None,
        callees=[directory[name].workload for name in spec.models],
        step_urls={
            name: f"http://{service_fqdn(name, namespace)}{directory[name].inference_path}" for name in spec.models
        },
        example_body=directory[first].example_body if first else None,
        keda=keda,
    )
