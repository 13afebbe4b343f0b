"""KEDA: event-driven autoscaling (ScaledObjects instead of HPAs), and its HTTP add-on, whose
interceptor holds the first request to a version asleep at zero replicas until it wakes.

Both charts come from kedacore's repository and go into one namespace (the add-on's chart renders
a ScaledObject for its own interceptor, so it waits for KEDA's CRDs). The add-on is installed only
when some model scales to zero; its interceptor then sits in the path of those models' live
versions (serving/waking.py), and nothing else.
"""

from __future__ import annotations

from typing import Any, Literal

import pulumi
from pydantic import Field

from inference_platform import pins
from inference_platform.config.base import ConfigModel, DNS1123Label
from inference_platform.platform import pod_security
from inference_platform.platform.helm import chart, dependencies, merge_values, own_namespace

RELEASE = "keda"
HTTP_ADD_ON_RELEASE = "keda-add-ons-http"
# What the add-on's chart names its objects (after the chart's name, whatever the release).
INTERCEPTOR = f"{HTTP_ADD_ON_RELEASE}-interceptor"
INTERCEPTOR_PROXY_SERVICE = f"{HTTP_ADD_ON_RELEASE}-interceptor-proxy"
INTERCEPTOR_PROXY_PORT = 8080
INTERCEPTOR_POD_LABELS = {"app.kubernetes.io/component": "interceptor", "app.kubernetes.io/name": "http-add-on"}
EXTERNAL_SCALER_SERVICE = f"{HTTP_ADD_ON_RELEASE}-external-scaler"
EXTERNAL_SCALER_PORT = 9090
# The label Istio's injector looks for on a pod in a namespace that is not injected.
SIDECAR_LABEL = {"sidecar.istio.io/inject": "true"}
# KEDA's pods (the keda chart): the operator (its gRPC metrics service on OPERATOR_PORT), the
# external metrics API the API server aggregates, and the admission webhooks.
OPERATOR_POD_LABELS = {"app": "keda-operator"}
OPERATOR_PORT = 9666
METRICS_API_POD_LABELS = {"app": "keda-operator-metrics-apiserver"}
METRICS_API_PORT = 6443
ADMISSION_POD_LABELS = {"app": "keda-admission-webhooks"}
ADMISSION_PORT = 9443
# The HTTP add-on's other pods: the scaler KEDA asks (it asks the interceptors' admin port for
# pending requests) and the operator that watches InterceptorRoutes.
INTERCEPTOR_ADMIN_PORT = 9090
SCALER_POD_LABELS = {"app.kubernetes.io/component": "scaler", "app.kubernetes.io/name": "http-add-on"}
ADD_ON_OPERATOR_POD_LABELS = {"app.kubernetes.io/component": "operator", "app.kubernetes.io/name": "http-add-on"}


class KedaConfig(ConfigModel):
    namespace: DNS1123Label = Field(default="keda", description="KEDA's namespace, and its HTTP add-on's.")
    values: dict[str, Any] = Field(
        default_factory=dict, description="Raw values of the keda chart, laid over the generated ones."
    )
    http_add_on_values: dict[str, Any] = Field(
        default_factory=dict, description="Raw values of the keda-add-ons-http chart, laid over the generated ones."
    )


class KedaArgs(ConfigModel):
    config: KedaConfig = Field(default_factory=KedaConfig)
    http_add_on: bool = Field(default=False, description="Install the HTTP add-on too (some model sleeps at zero).")


class HttpAddOnRef(ConfigModel):
    """Where the HTTP add-on runs: what a sleeping version's routes, policies and ScaledObject name."""

    namespace: DNS1123Label = "keda"

    @property
    def proxy_host(self) -> str:
        return f"{INTERCEPTOR_PROXY_SERVICE}.{self.namespace}.svc.cluster.local"

    @property
    def scaler_address(self) -> str:
        return f"{EXTERNAL_SCALER_SERVICE}.{self.namespace}:{EXTERNAL_SCALER_PORT}"

    @property
    def service_account(self) -> str:
        return INTERCEPTOR

    @property
    def pod_labels(self) -> dict[str, str]:
        return dict(INTERCEPTOR_POD_LABELS)


class KedaRef(ConfigModel):
    """What a version's ScaledObject needs of the platform: the Prometheus its triggers query,
    where GPU use comes from, and the HTTP add-on that wakes versions asleep at zero replicas."""

    prometheus_url: str = Field(description="The platform Prometheus' in-cluster URL with its port.")
    gpu_source: Literal["dcgm", "hami"] = Field(
        default="dcgm",
        description="Source of GPU utilisation: DCGM (whole GPUs) or HAMi (per container, under sharing).",
    )
    http_add_on: HttpAddOnRef | None = Field(default=None, description="Installed when some model scales to zero.")


def keda_values() -> dict[str, Any]:
    # The chart's defaults already set requests, limits and a restricted security context on
    # every container, and make the webhook's certificate in the operator (no Helm hooks).
    return {"crds": {"install": True}}


def http_add_on_values() -> dict[str, Any]:
    # The add-on's chart sets requests, limits and a read-only container context itself, but leaves
    # the user and the seccomp profile to the image and the runtime: pin both for its three pods.
    non_root = {
        "runAsNonRoot": True,
        "runAsUser": 1000,
        "runAsGroup": 1000,
        "fsGroup": 1000,
        "supplementalGroups": [1000],
        "seccompProfile": {"type": "RuntimeDefault"},
    }
    return {"crds": {"install": True}, "podSecurityContext": non_root}


def interceptor_sidecar(args: pulumi.ResourceTransformArgs) -> pulumi.ResourceTransformResult | None:
    """Labels the interceptor's pods, and no other pod of KEDA's namespace, for Istio's injector:
    under STRICT mTLS the interceptor reaches model pods only through a sidecar of its own. The
    add-on's chart has no per-component pod labels, hence a transform of its Deployment."""
    props: dict[str, Any] = dict(args.props)
    if args.type_ != "kubernetes:apps/v1:Deployment" or (props.get("metadata") or {}).get("name") != INTERCEPTOR:
        return None
    template = props["spec"]["template"]
    metadata = template.get("metadata") or {}
    labels = (metadata.get("labels") or {}) | SIDECAR_LABEL
    spec = props["spec"] | {"template": template | {"metadata": metadata | {"labels": labels}}}
    return pulumi.ResourceTransformResult(props=props | {"spec": spec}, opts=args.opts)


class Keda(pulumi.ComponentResource):
    """KEDA's operator, metrics server and admission webhooks; with `http_add_on`, its HTTP add-on too."""

    namespace: pulumi.Output[str]
    ready: list[pulumi.Resource]
    """What ScaledObjects and InterceptorRoutes wait for: the charts that bring their CRDs."""

    def __init__(self, name: str, args: KedaArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        """`opts.depends_on`: what the add-on waits for too (istiod, whose injector gives the
        interceptor its sidecar)."""
        super().__init__("inference-platform:platform:Keda", name, None, opts)
        config = args.config
        after = dependencies(opts)
        waits = own_namespace(config.namespace, self, pod_security.BASELINE)
        keda = chart(
            RELEASE,
            pins.KEDA,
            config.namespace,
            merge_values(keda_values(), config.values),
            pulumi.ResourceOptions(parent=self, depends_on=waits),
        )
        self.ready = [keda]
        if args.http_add_on:
            self.ready.append(
                chart(
                    HTTP_ADD_ON_RELEASE,
                    pins.KEDA_HTTP_ADD_ON,
                    config.namespace,
                    merge_values(http_add_on_values(), config.http_add_on_values),
                    pulumi.ResourceOptions(parent=self, depends_on=[keda, *after], transforms=[interceptor_sidecar]),
                )
            )
        self.namespace = pulumi.Output.from_input(config.namespace)
        self.register_outputs({"namespace": self.namespace})
