"""HAMi's Ascend device plugin (Project-HAMi/ascend-device-plugin v1.4.0): the node side of Ascend
NPUs, which HAMi's chart (2.10.0) does not deploy. On every NPU node it registers the chips'
huawei.com/* resources with the kubelet, allocates the NPUs (or vNPUs) HAMi's scheduler chose, and
under soft slicing mounts hami-vnpu-core into the containers and serves their usage on :9395.

Its objects are upstream's ascend-device-plugin.yaml built as data (tests/platform/
test_ascend_device_plugin.py compares them with that file): the DaemonSet, its service account and
cluster role, the node config it mounts, and the RuntimeClass of Ascend Docker Runtime (from the
facts; upstream's file repeats its `handler` key). It runs in HAMi's namespace so that it reads
HAMi's own device config, the ConfigMap the scheduler reads (its `vnpus:` section), rather than a
copy that would have to be kept in step by hand.
"""

from __future__ import annotations

from typing import Annotated, Any

import pulumi
from pydantic import Field

from inference_platform import pins
from inference_platform.config.base import ConfigModel, DNS1123Label, Matches
from inference_platform.kube import register
from inference_platform.platform import ascend, hami
from inference_platform.platform.helm import dependencies
from inference_platform.platform.npu_nodes import NpuNodes

NAME = "hami-ascend-device-plugin"
SERVICE_ACCOUNT = "hami-ascend"
# Upstream's selector; `hami.io/webhook: ignore` keeps HAMi's admission webhook off the plugin's pods.
POD_LABELS = {"app.kubernetes.io/component": NAME, "hami.io/webhook": "ignore"}
# The embedded vNPU exporter (started only when the node runs hami-vnpu-core soft slicing).
MONITOR_PORT = 9395
# HAMi's chart names its device config <fullname>-scheduler-device (templates/scheduler/device-configmap.yaml).
DEVICE_CONFIG_MAP = f"{hami.RELEASE}-scheduler-device"
# Per-node overrides (hami-vnpu-core, vDeviceCount, filterDevices). Upstream's pod mounts it (the
# kubelet starts no pod without it) but upstream's args pass no --node_config_file, so the plugin
# does not read it: it is created empty, as upstream's own chart does.
NODE_CONFIG_MAP = "hami-device-node-config"
CONFIG_FILE = "/device-config.yaml"

# Upstream's requests and limits (the policy pack wants both on every container).
RESOURCES = {"requests": {"cpu": "500m", "memory": "500Mi"}, "limits": {"cpu": "500m", "memory": "500Mi"}}

# What checkov finds in the DaemonSet, each with why upstream's design needs it; checkov reads
# these annotations as skips with their reasons (no "=" in a reason: it splits on it).
CHECKOV_SKIPS = {
    "CKV_K8S_16": "privileged as upstream: it opens the NPU devices and the driver through npu-smi and DCMI",
    "CKV_K8S_20": "privileged containers escalate by definition; upstream's design",
    "CKV_K8S_22": "it writes its logs and hami-vnpu-core's shared region under host paths and /tmp",
    "CKV_K8S_23": "root in upstream's image, which opens the devices and the kubelet's sockets",
    "CKV_K8S_28": "privileged: capabilities are not dropped; upstream's design",
    "CKV_K8S_29": "upstream's pod sets no pod-level security context; the container is privileged",
    "CKV_K8S_30": "upstream's container context is privileged by design",
    "CKV_K8S_31": "a privileged container runs unconfined; seccomp profiles do not apply",
    "CKV_K8S_37": "as CKV_K8S_28",
    "CKV_K8S_38": "it annotates its node and the pods it allocates NPUs to through the API server",
    "CKV_K8S_8": "upstream defines no probes; the kubelet's device plugin registration is its health",
    "CKV_K8S_9": "as CKV_K8S_8",
}


class AscendDevicePluginConfig(ConfigModel):
    """HAMi's Ascend device plugin, installed on the NPU nodes when some model runs on Ascend NPUs."""

    image: Annotated[
        str,
        Matches(
            r"^[a-z0-9.-]+(:[0-9]+)?/[a-z0-9._/-]+:[A-Za-z0-9._-]+$",
            "an image <registry>/<repository>:<tag> (registry and repository in lowercase)",
        ),
    ] = Field(
        default=pins.ASCEND_DEVICE_PLUGIN_IMAGE,
        description="The plugin's image (registry/repository:tag): an air-gapped cluster's mirror of the pinned one.",
    )
    priority_class_name: DNS1123Label = Field(
        default="system-node-critical",
        description="The plugin pods' PriorityClass (upstream's: NPU pods cannot start on a node without it).",
    )
    create_runtime_class: bool = Field(
        default=True,
        description="Create the RuntimeClass NPU pods name (platform.npuNodes.runtimeClassName, handler ascend); "
        "false where the cluster already has it (Ascend Docker Runtime's or MindCluster's installer made one).",
    )


class AscendDevicePluginArgs(ConfigModel):
    config: AscendDevicePluginConfig
    namespace: DNS1123Label = Field(
        description="HAMi's namespace: the plugin reads HAMi's device config (hami-scheduler-device) there."
    )
    nodes: NpuNodes = Field(description="The NPU nodes it runs on, and the runtime class NPU pods use.")


def _metadata(name: str, namespace: str | None = None, **extra: Any) -> dict[str, Any]:
    return {"name": name, **({"namespace": namespace} if namespace else {}), **extra}


def service_account(namespace: str) -> dict[str, Any]:
    labels = {"app.kubernetes.io/component": SERVICE_ACCOUNT}
    return {
        "apiVersion": "v1",
        "kind": "ServiceAccount",
        "metadata": _metadata(SERVICE_ACCOUNT, namespace, labels=labels),
    }


def cluster_role() -> dict[str, Any]:
    """It watches and patches pods (the devices HAMi allocated) and annotates its node's NPUs."""
    return {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "ClusterRole",
        "metadata": _metadata(SERVICE_ACCOUNT),
        "rules": [
            {"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list", "update", "watch", "patch"]},
            {"apiGroups": [""], "resources": ["nodes"], "verbs": ["get", "update", "patch"]},
        ],
    }


def cluster_role_binding(namespace: str) -> dict[str, Any]:
    return {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "ClusterRoleBinding",
        "metadata": _metadata(SERVICE_ACCOUNT),
        "subjects": [{"kind": "ServiceAccount", "name": SERVICE_ACCOUNT, "namespace": namespace}],
        "roleRef": {"kind": "ClusterRole", "name": SERVICE_ACCOUNT, "apiGroup": "rbac.authorization.k8s.io"},
    }


def node_config_map(namespace: str) -> dict[str, Any]:
    """No per-node overrides: every node follows HAMi's global hamiVnpuCore (platform.npuNodes.softSlicing)."""
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": _metadata(NODE_CONFIG_MAP, namespace),
        "data": {"node-config.yaml": "nodes: []"},
    }


# Upstream's host paths: the kubelet's device-plugin and pod-resources sockets, the Ascend driver
# and npu-smi, the plugin's log directory, and hami-vnpu-core's files it hands soft-sliced containers.
HOST_PATHS: tuple[tuple[str, str, str, bool, str | None], ...] = (
    # (volume, host path, mount path, read-only, hostPath type)
    ("device-plugin", "/var/lib/kubelet/device-plugins", "/var/lib/kubelet/device-plugins", False, None),
    ("pod-resource", "/var/lib/kubelet/pod-resources", "/var/lib/kubelet/pod-resources", False, None),
    ("hiai-driver", "/usr/local/Ascend/driver", "/usr/local/Ascend/driver", True, None),
    ("host-sbin", "/usr/local/sbin", "/usr/local/sbin", True, "DirectoryOrCreate"),
    ("log-path", "/var/log/mindx-dl/devicePlugin", "/var/log/mindx-dl/devicePlugin", False, "DirectoryOrCreate"),
    ("tmp", "/tmp", "/tmp", False, None),
    (
        "hami-shared-region",
        "/usr/local/hami-shared-region",
        "/usr/local/hami-shared-region",
        False,
        "DirectoryOrCreate",
    ),
    ("hami-vnpu-core", "/usr/local/hami-vnpu-core", "/usr/local/hami-vnpu-core", False, "DirectoryOrCreate"),
)


def _mounts() -> list[dict[str, Any]]:
    mounts: list[dict[str, Any]] = [
        {"name": volume, "mountPath": path, **({"readOnly": True} if read_only else {})}
        for volume, _, path, read_only, _ in HOST_PATHS
    ]
    return [
        *mounts,
        {"name": "ascend-config", "mountPath": CONFIG_FILE, "subPath": "device-config.yaml", "readOnly": True},
        {
            "name": "ascend-node-config",
            "mountPath": "/node-config.yaml",
            "subPath": "node-config.yaml",
            "readOnly": True,
        },
    ]


def _volumes() -> list[dict[str, Any]]:
    volumes: list[dict[str, Any]] = [
        {"name": volume, "hostPath": {"path": host, **({"type": kind} if kind else {})}}
        for volume, host, _, _, kind in HOST_PATHS
    ]
    return [
        *volumes,
        {"name": "ascend-config", "configMap": {"name": DEVICE_CONFIG_MAP}},
        {"name": "ascend-node-config", "configMap": {"name": NODE_CONFIG_MAP}},
    ]


def daemon_set(args: AscendDevicePluginArgs) -> dict[str, Any]:
    nodes = args.nodes
    container = {
        "name": "device-plugin",
        "image": args.config.image,
        # As every pod of the program's own (pinned tags; checkov's CKV_K8S_15); upstream: IfNotPresent.
        "imagePullPolicy": "Always",
        "resources": RESOURCES,
        "args": ["--config_file", CONFIG_FILE, "--v=4"],
        "ports": [{"name": "monitorport", "containerPort": MONITOR_PORT, "protocol": "TCP"}],
        "securityContext": {"privileged": True, "readOnlyRootFilesystem": False},
        "volumeMounts": _mounts(),
        "env": [{"name": "NODE_NAME", "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}}}],
    }
    # Its exporter runs only on soft-slicing nodes (hami-vnpu-core, HAMi's hamiVnpuCore): scraped then,
    # by the pods job, whose honor_labels keeps the series' own namespace, pod and container.
    scrape = (
        {"prometheus.io/scrape": "true", "prometheus.io/port": str(MONITOR_PORT), "prometheus.io/path": "/metrics"}
        if nodes.soft_slicing
        else {}
    )
    pod_metadata: dict[str, Any] = {"labels": POD_LABELS} | ({"annotations": scrape} if scrape else {})
    spec: dict[str, Any] = {
        "priorityClassName": args.config.priority_class_name,
        "serviceAccountName": SERVICE_ACCOUNT,
        "containers": [container],
        "volumes": _volumes(),
        "nodeSelector": dict(sorted(nodes.node_selector.items())),
    }
    if nodes.tolerations:
        spec["tolerations"] = [t.to_kubernetes() for t in nodes.tolerations]
    skips = {f"checkov.io/skip{i}": f"{check}={why}" for i, (check, why) in enumerate(CHECKOV_SKIPS.items(), 1)}
    return {
        "apiVersion": "apps/v1",
        "kind": "DaemonSet",
        "metadata": _metadata(NAME, args.namespace, labels={"app.kubernetes.io/component": NAME}, annotations=skips),
        "spec": {"selector": {"matchLabels": POD_LABELS}, "template": {"metadata": pod_metadata, "spec": spec}},
    }


def runtime_class(nodes: NpuNodes) -> dict[str, Any]:
    """Ascend Docker Runtime's RuntimeClass, which NPU pods name: the handler is the one its
    installer registers with the node's container runtime."""
    return {
        "apiVersion": "node.k8s.io/v1",
        "kind": "RuntimeClass",
        "metadata": _metadata(nodes.runtime_class_name),
        "handler": ascend.RUNTIME_CLASS,
    }


def manifests(args: AscendDevicePluginArgs) -> list[dict[str, Any]]:
    namespace = args.namespace
    return [
        service_account(namespace),
        cluster_role(),
        cluster_role_binding(namespace),
        node_config_map(namespace),
        daemon_set(args),
        *([runtime_class(args.nodes)] if args.config.create_runtime_class else []),
    ]


class AscendDevicePlugin(pulumi.ComponentResource):
    """Waits (through opts.depends_on) for HAMi, whose release makes the namespace and the device config."""

    def __init__(self, name: str, args: AscendDevicePluginArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("inference-platform:platform:AscendDevicePlugin", name, None, opts)
        child = pulumi.ResourceOptions(parent=self, depends_on=dependencies(opts))
        for manifest in manifests(args):
            register(manifest, child)
        self.register_outputs({})
