"""HAMi: GPU sharing. Its device plugin splits GPUs into vGPUs with memory and compute caps, and
its scheduler (a kube-scheduler with HAMi's extender) places pods that ask for them."""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction
from typing import Annotated, Any

import pulumi
from pydantic import Field

from inference_platform import pins
from inference_platform.config.base import ConfigModel, DNS1123Label, Matches
from inference_platform.platform import pod_security
from inference_platform.platform.gpu_nodes import GPU_RESOURCE, GpuNodes
from inference_platform.platform.helm import merge_values, own_namespace, release
from inference_platform.platform.npu_nodes import NpuNodes

RELEASE = "hami"
MONITOR_PORT = 9394
SCHEDULER_NAME = "hami-scheduler"
# The chart's pods: the scheduler (with the admission webhook the API server calls on WEBHOOK_PORT),
# the device plugin on every GPU node (its monitor's metrics on MONITOR_PORT), and the hook Jobs
# that make the webhook's certificate.
SCHEDULER_POD_LABELS = {"app.kubernetes.io/name": "hami", "app.kubernetes.io/component": "hami-scheduler"}
DEVICE_PLUGIN_POD_LABELS = {"app.kubernetes.io/name": "hami", "app.kubernetes.io/component": "hami-device-plugin"}
ADMISSION_JOB_POD_LABELS = {"app.kubernetes.io/name": "hami", "app.kubernetes.io/component": "admission-webhook"}
WEBHOOK_PORT = 443

# The resources HAMi's device plugin serves (besides nvidia.com/gpu, the count of vGPUs): what
# vGPU pods request (serving/gpu.py) and what the chart is told to serve.
GPU_MEMORY_RESOURCE = "nvidia.com/gpumem"
GPU_MEMORY_PERCENT_RESOURCE = "nvidia.com/gpumem-percentage"
GPU_CORES_RESOURCE = "nvidia.com/gpucores"


@dataclass(frozen=True)
class Sharing:
    """HAMi's device settings: how far one physical GPU stretches."""

    memory_scaling: Fraction = Fraction(1)
    core_scaling: Fraction = Fraction(1)
    split_count: int = 10


class KubeSchedulerImage(ConfigModel):
    """Where HAMi's kube-scheduler comes from; its tag is always the cluster's version."""

    registry: Annotated[
        str, Matches(r"^[a-z0-9.-]+(:[0-9]+)?$", "a registry's host in lowercase, with an optional :port")
    ] = Field(default=pins.KUBE_SCHEDULER_REGISTRY, description="An air-gapped cluster's mirror of registry.k8s.io.")
    repository: Annotated[
        str, Matches(r"^[a-z0-9._/-]+$", "a repository path of lowercase letters, digits, '.', '_', '/' and '-'")
    ] = Field(default=pins.KUBE_SCHEDULER_REPOSITORY, description="The image's repository in that registry.")


class HamiConfig(ConfigModel):
    enabled: bool = Field(default=False, description="GPU sharing with HAMi: lets models use gpu: vgpu.")
    namespace: DNS1123Label = Field(
        default="hami-system",
        description="HAMi's own namespace, closed like the platform's others; kube-system for clusters that "
        "must keep it there (its pods then get policies of their own, and kube-system no default deny).",
    )
    kube_scheduler_image: KubeSchedulerImage = Field(
        default_factory=KubeSchedulerImage,
        description="The kube-scheduler image HAMi runs, tagged with kubernetesVersion; "
        "point it at an air-gapped mirror.",
    )
    memory_scaling: Annotated[float, Field(gt=0, le=10)] = Field(
        default=1,
        description="HAMi's deviceMemoryScaling: above 1 hands out more GPU memory than a device has, "
        "backed by host memory (idle models), at the risk of out-of-memory errors when they all wake.",
    )
    core_scaling: Annotated[float, Field(gt=0, le=10)] = Field(
        default=1, description="HAMi's deviceCoreScaling: above 1 oversubscribes a GPU's cores."
    )
    split_count: Annotated[int, Field(ge=1, le=100)] = Field(
        default=10, description="HAMi's deviceSplitCount: the most vGPUs one GPU is split into."
    )

    @property
    def sharing(self) -> Sharing:
        return Sharing(
            memory_scaling=Fraction(str(self.memory_scaling)),
            core_scaling=Fraction(str(self.core_scaling)),
            split_count=self.split_count,
        )

    values: dict[str, Any] = Field(default_factory=dict, description="Raw chart values laid over the generated ones.")


class HamiArgs(ConfigModel):
    config: HamiConfig
    nodes: GpuNodes = Field(description="The GPU nodes HAMi's device plugin runs on.")
    kubernetes_version: Annotated[str, Matches(r"^1\.[0-9]+\.[0-9]+$", "a Kubernetes version such as 1.30.4")] = Field(
        description="The cluster's version, which HAMi's kube-scheduler must match."
    )
    npu_nodes: NpuNodes | None = Field(
        default=None,
        description="The Ascend NPU nodes, when some model runs on NPUs: turns on HAMi's Ascend side (its "
        "scheduler's, the vnpus device config); none leaves it off.",
    )


# The label HAMi's install guide puts on the GPU nodes it manages (its chart's default selector).
HAMI_NODE_LABEL = {"gpu": "on"}


# The chart sets no resources; requests and limits on every container (the policy pack).
SCHEDULER_RESOURCES = {"requests": {"cpu": "100m", "memory": "128Mi"}, "limits": {"cpu": "1", "memory": "512Mi"}}
NODE_AGENT_RESOURCES = {"requests": {"cpu": "50m", "memory": "64Mi"}, "limits": {"cpu": "500m", "memory": "256Mi"}}


def ascend_values(nodes: NpuNodes) -> dict[str, Any]:
    """HAMi's Ascend side: the scheduler's --enable-ascend, the huawei.com/* resources it owns, and
    the `vnpus:` device config (ConfigMap hami-scheduler-device) the Ascend device plugin reads."""
    return {
        "enabled": True,
        # Written into every chip's device config; HAMi's webhook sets it on NPU pods naming none.
        "runtimeClassName": nodes.runtime_class_name,
        # Soft slicing (hami-vnpu-core) on every node; the device plugin reads it from the config.
        "hamiVnpuCore": nodes.soft_slicing,
        # No nodeSelector or tolerations: chart 2.10.0 deploys no Ascend device plugin (its templates
        # read none); the plugin's DaemonSet (platform/ascend_device_plugin.py) selects the NPU nodes.
    }


def hami_values(
    config: HamiConfig, nodes: GpuNodes, kubernetes_version: str, npu_nodes: NpuNodes | None = None
) -> dict[str, Any]:
    image = config.kube_scheduler_image
    devices = {"devices": {"ascend": ascend_values(npu_nodes)}} if npu_nodes is not None else {}
    return devices | {
        "scheduler": {
            # HAMi runs its own kube-scheduler; it must be the cluster's version.
            "kubeScheduler": {
                "image": {"registry": image.registry, "repository": image.repository, "tag": f"v{kubernetes_version}"},
                "resources": SCHEDULER_RESOURCES,
            },
            "extender": {"resources": SCHEDULER_RESOURCES},
        },
        # The resource names vGPU pods request (serving/gpu.py).
        "resourceName": GPU_RESOURCE,
        "resourceMem": GPU_MEMORY_RESOURCE,
        "resourceMemPercentage": GPU_MEMORY_PERCENT_RESOURCE,
        "resourceCores": GPU_CORES_RESOURCE,
        "devicePlugin": {
            "deviceMemoryScaling": config.memory_scaling,
            "deviceCoreScaling": config.core_scaling,
            "deviceSplitCount": config.split_count,
            "resources": NODE_AGENT_RESOURCES,
            "monitor": {"resources": NODE_AGENT_RESOURCES},
            # The device plugin runs on the GPU nodes HAMi manages: HAMi's own label, written out
            # because Helm would merge it in anyway (a null cannot reach Helm through Pulumi), and
            # the labels whole-GPU models select.
            "nvidiaNodeSelector": dict(sorted((HAMI_NODE_LABEL | nodes.node_selector).items())),
            "tolerations": [t.to_kubernetes() for t in nodes.tolerations],
            # Its per-container metrics (hami_container_device_utilization_ratio, ...) for Prometheus'
            # annotation-driven discovery; ClusterIP rather than the chart's NodePort.
            "service": {
                "type": "ClusterIP",
                "annotations": {
                    "prometheus.io/scrape": "true",
                    "prometheus.io/port": str(MONITOR_PORT),
                    "prometheus.io/path": "/metrics",
                },
            },
        },
    }


class Hami(pulumi.ComponentResource):
    """Installed with helm.v3.Release, not helm.v4.Chart: HAMi makes its admission webhook's
    certificate in Helm hook Jobs (pre-install, then post-install to patch the caBundle), and
    only real Helm runs hooks in order."""

    def __init__(self, name: str, args: HamiArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("inference-platform:platform:Hami", name, None, opts)
        config = args.config
        generated = hami_values(config, args.nodes, args.kubernetes_version, args.npu_nodes)
        values = merge_values(generated, config.values)
        waits = own_namespace(config.namespace, self, pod_security.PRIVILEGED)
        # A new namespace replaces the release; its cluster-scoped objects (the webhook, the
        # scheduler's roles) keep their names, which Helm refuses to a second release: delete first.
        opts = pulumi.ResourceOptions(parent=self, depends_on=waits, delete_before_replace=True)
        release(RELEASE, pins.HAMI, config.namespace, values, opts)
        self.scheduler = pulumi.Output.from_input(SCHEDULER_NAME)
        self.register_outputs({"scheduler": self.scheduler})
