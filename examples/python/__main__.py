"""A platform team's own Pulumi program, composing the library's components: Istio's gateway,
Prometheus, the models' namespace and one model, without the repository's stack config."""

import pulumi

from inference_platform.platform import (
    IngressGateway,
    IngressGatewayArgs,
    IngressGatewayConfig,
    Prometheus,
    PrometheusArgs,
    PrometheusConfig,
)
from inference_platform.serving import InferenceService, InferenceServiceArgs, ModelNamespace, ModelNamespaceArgs

DOMAIN = "models.example.com"

gateway = IngressGateway(
    "ingress", IngressGatewayArgs(config=IngressGatewayConfig(service_type="NodePort"), domain=DOMAIN)
)
prometheus = Prometheus("prometheus", PrometheusArgs(config=PrometheusConfig()))
namespace = ModelNamespace(
    "service", ModelNamespaceArgs(name="service"), opts=pulumi.ResourceOptions(depends_on=gateway.ready)
)
# The config models validate what they are given, as a stack file's keys or as Python names;
# `parse` reports every mistake as a stack file's are (file:line: path: sentence), no traceback.
iris = InferenceService(
    "iris",
    InferenceServiceArgs.parse(
        {
            "model": {
                "name": "iris",
                "runtime": "mlserver",
                "versions": [
                    {"name": "v1", "modelUri": "pvc://models/iris/v1", "weight": 90},
                    {"name": "v2", "modelUri": "pvc://models/iris/v2", "weight": 10},
                ],
            },
            "namespace": "service",
            "domain": DOMAIN,
            "metricsScraper": PrometheusConfig().scraper,
        }
    ),
    opts=pulumi.ResourceOptions(depends_on=[namespace, *gateway.ready]),
)

pulumi.export("irisUrls", iris.urls)
pulumi.export("prometheus", prometheus.url)
