"""The model-serving layer: the model namespace, storage credentials, one InferenceService per model,
and one Pipeline per inference graph."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pulumi

from inference_platform.kube import register
from inference_platform.serving.access import Workload
from inference_platform.serving.inference_service import InferenceService, InferenceServiceArgs
from inference_platform.serving.inference_service.args import model_workload, service_fqdn
from inference_platform.serving.model_namespace import PART_OF_LABELS, ModelNamespace, ModelNamespaceArgs
from inference_platform.serving.model_storage import StorageAccess
from inference_platform.serving.payload_capture import COMPARATOR, ComparatorRef
from inference_platform.serving.payload_comparator import PayloadComparator, PayloadComparatorArgs
from inference_platform.serving.pipeline import Pipeline, PipelineArgs, PipelineSpec
from inference_platform.serving.runtimes import ModelSpec
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


def deploy_models(
    config: StackConfig, platform: list[pulumi.Resource], parent: pulumi.Resource | None = None
) -> dict[str, Any]:
    """One InferenceService per model and one Pipeline per graph, after `platform` (istiod) is ready
    for Istio objects; returns the `models` (and `pipelines`) stack outputs."""
    namespace = ModelNamespace(
        config.namespace,
        ModelNamespaceArgs(name=config.namespace),
        opts=pulumi.ResourceOptions(parent=parent, depends_on=platform),
    )
    dependencies: list[pulumi.Resource] = [namespace, *platform]
    access: StorageAccess | None = None
    secret = storage_secret(config)
    if config.storage is not None:
        access = config.storage.access(STORAGE_SECRET)
    if secret is not None:
        dependencies.append(register(secret, pulumi.ResourceOptions(parent=parent, depends_on=[namespace])))
    models = {model.name: model for model in config.models}
    keda, add_on = config.keda, config.http_add_on
    workloads = {
        name: model_workload(model, config.namespace, add_on if model.autoscaling.scales_to_zero else None)
        for name, model in models.items()
    }
    routers = {spec.name: pipeline_args(config, spec, models, workloads) for spec in config.pipelines}
    workloads |= {name: args.workload() for name, args in routers.items()}
    scraper = config.platform.prometheus.scraper if config.platform.prometheus.enabled else None
    edges = config.call_edges()
    after = pulumi.ResourceOptions(parent=parent, depends_on=dependencies)
    compared = [model for model in config.models if model.analysis.payloads.enabled]
    comparator = ComparatorRef(namespace=config.namespace) if compared else None
    if compared:
        comparator_args = PayloadComparatorArgs(
            namespace=config.namespace,
            models=compared,
            config=config.platform.payload_comparator,
            metrics_scraper=scraper,
        )
        PayloadComparator(COMPARATOR, comparator_args, opts=after)
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
                metrics_scraper=scraper,
                callers=[workloads[caller] for caller, callee in edges if callee == model.name],
                callees=[workloads[callee] for callee in model.calls],
                keda=keda,
                comparator=comparator if model.analysis.payloads.enabled else None,
                network=config.platform.network,
            ),
            opts=after,
        )
        for model in config.models
    }
    outputs: dict[str, Any] = {
        "models": {
            name: {"urls": svc.urls, "curl": svc.curl, "weights": svc.weights, "mirrors": svc.mirrors}
            | ({"adapters": svc.adapters} if models[name].served_adapters else {})
            for name, svc in services.items()
        }
    }
    pipelines = {name: Pipeline(name, args, opts=after) for name, args in routers.items()}
    if pipelines:
        outputs["pipelines"] = {
            name: {"urls": p.urls, "curl": p.curl, "models": p.models} for name, p in pipelines.items()
        }
    return outputs


def pipeline_args(
    config: StackConfig, spec: PipelineSpec, models: Mapping[str, ModelSpec], workloads: Mapping[str, Workload]
) -> PipelineArgs:
    """A pipeline placed beside the models it calls, with each model step's URL in the cluster."""
    return PipelineArgs(
        pipeline=spec,
        namespace=config.namespace,
        domain=config.domain,
        gateway=config.platform.ingress.gateway,
        url_scheme=config.platform.ingress.url_scheme,
        metrics_scraper=config.platform.prometheus.scraper if config.platform.prometheus.enabled else None,
        callees=[workloads[name] for name in spec.models],
        step_urls={
            name: f"http://{service_fqdn(name, config.namespace)}{models[name].inference_path}" for name in spec.models
        },
        example_body=models[first].example_request().body if (first := spec.first_model()) else None,
        keda=config.keda,
    )
