"""Every container image and Helm chart the platform deploys, pinned in this one place.

Bump a version here and nowhere else; tests refuse `latest` and unpinned references. Renovate
(renovate.json) finds every pin here and proposes bumps: images and charts whose repository is
written out by their form, the rest by the `# renovate:` comment on the line above them (a test,
tests/test_renovate.py, fails when a pin is added that no manager finds).
"""

from __future__ import annotations

from dataclasses import dataclass

# Model servers.
MLSERVER_IMAGE = "docker.io/seldonio/mlserver:1.7.1"
TFSERVING_IMAGE = "docker.io/tensorflow/serving:2.20.0"
TFSERVING_GPU_IMAGE = "docker.io/tensorflow/serving:2.20.0-gpu"
TORCHSERVE_IMAGE = "docker.io/pytorch/torchserve:0.12.0-cpu"
TORCHSERVE_GPU_IMAGE = "docker.io/pytorch/torchserve:0.12.0-gpu"
# 26.07 ships Triton 2.71, the newest release confirmed published.
TRITON_IMAGE = "nvcr.io/nvidia/tritonserver:26.07-py3"
VLLM_IMAGE = "docker.io/vllm/vllm-openai:v0.33.0"
# vLLM on Ascend NPUs: vllm-project/vllm-ascend's image (vLLM and its Ascend plugin, whose versions
# follow vLLM's). v0.30.0 (2026-10, vLLM 0.30.0, CANN 9.2.1) is its newest release; none matches
# vLLM 0.33.0 yet. The tag is for Atlas A2 (910B); the runtime adds the chip family's suffix
# (-a3, -310p).
VLLM_ASCEND_IMAGE = "quay.io/ascend/vllm-ascend:v0.30.0"
# v0.5.23 is a CUDA 13 build (CUDA 12 builds end at v0.5.19-cu129): nodes need a CUDA 13 driver.
SGLANG_IMAGE = "docker.io/lmsysorg/sglang:v0.5.23"
# Triton with the TensorRT-LLM backend: 25.05 carries TensorRT-LLM 0.19.0 (its release notes), the
# version whose model templates the triton-llm runtime's configs follow. Engines must be built
# with that TensorRT-LLM.
TRITON_LLM_IMAGE = "nvcr.io/nvidia/tritonserver:25.05-trtllm-python-py3"
# MindIE Service for Atlas 800I A2 (Ascend 910B), Ascend's own image on its hub (AscendHub, the
# tag upstream's quick start names; MindIE-LLM's README pairs 2.2.RC1 with CANN 8.3.RC2). Other
# chips take another tag of the same repository (300I-Duo for 310P) through the model's `image`.
# A gap: the runtime's config.json follows (and is tested against) MindIE-LLM 3.0.0.beta.1's default
# file, while this image is 2.2.RC1; keys new in 3.0 (e.g. kvPoolConfig, the layerwiseDisaggregated*
# keys, distDPServerEnabled) are unproven against it. Move to a 3.0 image when one is published.
MINDIE_IMAGE = "swr.cn-south-1.myhuaweicloud.com/ascendhub/mindie:2.2.RC1-800I-A2-py311-openeuler24.03-lts"

# Downloads model files from s3://, gs://, http(s):// and hf:// before the server starts.
STORAGE_INITIALIZER_IMAGE = "docker.io/kserve/storage-initializer:v0.20.0"
# Runs inference pipelines: KServe's InferenceGraph router, given the graph as --graph-json.
KSERVE_ROUTER_IMAGE = "docker.io/kserve/router:v0.20.0"
# Pairs each shadow's answer with the primary's: this project's comparator/ package, built and
# published by .github/workflows/comparator-image.yml on a `comparator-v<version>` tag; the tag
# is the package's version (tests hold the two together).
COMPARATOR_IMAGE = "ghcr.io/inference-platform/inference-comparator:0.1.0"
# Gathers labelled ConfigMaps into a directory: Prometheus' rule files that shards write (the same
# image and version Grafana's pinned chart gathers dashboards with; a test holds them equal).
K8S_SIDECAR_IMAGE = "quay.io/kiwigrid/k8s-sidecar:2.10.1"
# HAMi's Ascend device plugin (Project-HAMi/ascend-device-plugin v1.4.0; HAMi's chart has none):
# the node side of Ascend NPUs, as upstream's ascend-device-plugin.yaml names its image.
ASCEND_DEVICE_PLUGIN_IMAGE = "docker.io/projecthami/ascend-device-plugin:v1.4.0"


@dataclass(frozen=True)
class ChartPin:
    repository: str
    """A chart repository's URL, or an OCI registry's path (oci://...)."""
    chart: str
    version: str

    @property
    def is_oci(self) -> bool:
        return self.repository.startswith("oci://")

    @property
    def reference(self) -> str:
        """How Helm names the chart: an OCI chart by its full reference, a repository's by its name."""
        return f"{self.repository}/{self.chart}" if self.is_oci else self.chart


ISTIO_REPOSITORY = "https://istio-release.storage.googleapis.com/charts"
# renovate: datasource=helm depName=istiod registryUrl=https://istio-release.storage.googleapis.com/charts
ISTIO_VERSION = "1.30.3"
ISTIO_BASE = ChartPin(ISTIO_REPOSITORY, "base", ISTIO_VERSION)
ISTIOD = ChartPin(ISTIO_REPOSITORY, "istiod", ISTIO_VERSION)
ISTIO_GATEWAY = ChartPin(ISTIO_REPOSITORY, "gateway", ISTIO_VERSION)
# Istio's CNI node agent: sets up each injected pod's traffic redirection from the node, so the
# injected pods need no privileged istio-init container.
ISTIO_CNI = ChartPin(ISTIO_REPOSITORY, "cni", ISTIO_VERSION)
# Istio's images; the charts' source defaults point at test builds, so say which ones.
ISTIO_HUB = "docker.io/istio"

PROMETHEUS_COMMUNITY = "https://prometheus-community.github.io/helm-charts"
# renovate: datasource=helm depName=prometheus registryUrl=https://prometheus-community.github.io/helm-charts
PROMETHEUS = ChartPin(PROMETHEUS_COMMUNITY, "prometheus", "29.27.0")
# renovate: datasource=helm depName=prometheus-adapter registryUrl=https://prometheus-community.github.io/helm-charts
PROMETHEUS_ADAPTER = ChartPin(PROMETHEUS_COMMUNITY, "prometheus-adapter", "5.3.0")
DCGM_EXPORTER = ChartPin("https://nvidia.github.io/dcgm-exporter/helm-charts", "dcgm-exporter", "4.8.2")
# The chart moved from grafana/helm-charts to grafana-community in January 2026.
GRAFANA = ChartPin("https://grafana-community.github.io/helm-charts", "grafana", "12.11.1")
METRICS_SERVER = ChartPin("https://kubernetes-sigs.github.io/metrics-server/", "metrics-server", "3.13.1")
HAMI = ChartPin("https://project-hami.github.io/HAMi/", "hami", "2.10.0")
KEDA_REPOSITORY = "https://kedacore.github.io/charts"
# renovate: datasource=helm depName=keda registryUrl=https://kedacore.github.io/charts
KEDA = ChartPin(KEDA_REPOSITORY, "keda", "2.20.2")
# The HTTP add-on (its interceptor wakes versions that sleep at zero replicas), beta upstream.
# renovate: datasource=helm depName=keda-add-ons-http registryUrl=https://kedacore.github.io/charts
KEDA_HTTP_ADD_ON = ChartPin(KEDA_REPOSITORY, "keda-add-ons-http", "0.15.0")
# LeaderWorkerSet's controller and webhooks, for models served across several nodes.
# renovate: datasource=docker depName=registry.k8s.io/lws/charts/lws
LWS = ChartPin("oci://registry.k8s.io/lws/charts", "lws", "v0.10.0")
# HAMi runs its own kube-scheduler, tagged with the cluster's version (platform.kubernetesVersion);
# the chart's default pulls it from a regional mirror registry.
KUBE_SCHEDULER_REGISTRY = "registry.k8s.io"
KUBE_SCHEDULER_REPOSITORY = "kube-scheduler"

# LLM-aware routing (the Gateway API Inference Extension): v1.4.0, the release Istio 1.30.3 builds
# and tests against (its go.mod). Each inference pool gets its endpoint picker from this chart,
# which renders the InferencePool, the picker's Deployment, Service, config and RBAC.
# renovate: datasource=docker depName=registry.k8s.io/gateway-api-inference-extension/charts/inferencepool
INFERENCE_POOL = ChartPin("oci://registry.k8s.io/gateway-api-inference-extension/charts", "inferencepool", "v1.4.0")


@dataclass(frozen=True)
class ManifestPin:
    """A release's published manifest file (CRDs), which the Kubernetes provider applies from its URL."""

    url: str
    file: str
    """The name a pinned local copy of it goes by (the offline render reads it from a directory)."""


# The CRDs of both, which no chart installs: Gateway API's standard channel at v1.5.1 (the version
# Istio 1.30.3 supports) and the inference extension's (InferencePool v1, and its experimental kinds,
# which the picker watches).
GATEWAY_API_CRDS = ManifestPin(
    "https://github.com/kubernetes-sigs/gateway-api/releases/download/v1.5.1/standard-install.yaml",
    "gateway-api-v1.5.1-standard.yaml",
)
INFERENCE_EXTENSION_CRDS = ManifestPin(
    "https://github.com/kubernetes-sigs/gateway-api-inference-extension/releases/download/v1.4.0/manifests.yaml",
    "inference-extension-v1.4.0.yaml",
)

# The Pod Security Standards' version every Namespace the program creates is checked against (its
# pod-security.kubernetes.io/*-version labels): the minor of the default Kubernetes version the
# render assumes (cli/charts.py), so a newer cluster does not tighten the checks under a running stack.
POD_SECURITY_VERSION = "v1.33"
