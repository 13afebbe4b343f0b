"""The model-serving layer: the model namespace and one InferenceService per configured model."""

from __future__ import annotations

import pulumi

from components.inference_service import InferenceService, InferenceServiceArgs
from components.kube import register
from infra.config import StackConfig


def model_namespace(config: StackConfig) -> dict[str, object]:
    return {
        "apiVersion": "v1",
        "kind": "Namespace",
        "metadata": {
            "name": config.namespace,
            "labels": {
                "istio-injection": "enabled",
                "app.kubernetes.io/part-of": "inference-platform",
                "app.kubernetes.io/managed-by": "pulumi",
            },
        },
    }


def deploy_models(config: StackConfig) -> dict[str, InferenceService]:
    namespace = register(model_namespace(config))
    services = {
        model.name: InferenceService(
            model.name,
            InferenceServiceArgs(
                model=model, namespace=config.namespace, domain=config.domain, gateway=config.ingress.gateway
            ),
            opts=pulumi.ResourceOptions(depends_on=[namespace]),
        )
        for model in config.models
    }
    pulumi.export(
        "models",
        {
            name: {"urls": svc.urls, "curl": svc.curl, "weights": svc.weights, "mirrors": svc.mirrors}
            for name, svc in services.items()
        },
    )
    return services
