"""The node-local model cache's agent as Kubernetes objects (docs/model-cache.md): in a namespace of
its own (platform/model_cache_agent.py), one DaemonSet per kind of cache node (on exactly those
nodes) running cache_agent_script.py in the pinned storage-initializer image with the models'
download credentials, and per kind a ConfigMap listing what its nodes hold (versions.json). Its
network edges (out to the storage endpoints the models' downloads reach, in from Prometheus on its
metrics port) are stack/network.py's rows.

The namespace is Pod Security `privileged`: its pods mount the cache path with hostPath (the model
pods read it through `local` PersistentVolumes and stay `restricted`). The agent itself runs as the
image's non-root user with a read-only root filesystem; the cache path, created by the kubelet as
root, is handed to that user by an init container that only chowns it (root with CAP_CHOWN and no
other capability): the agent's user cannot write a directory root owns, and no other step needs root.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from inference_platform import pins
from inference_platform.platform.gpu_nodes import GpuNodes
from inference_platform.platform.model_cache import ModelCacheConfig, NodeKind
from inference_platform.platform.model_cache_agent import NAMESPACE
from inference_platform.platform.npu_nodes import NpuNodes
from inference_platform.serving import cache_agent_script
from inference_platform.serving.cached_files import CachedVersion
from inference_platform.serving.config_checksum import config_checksum
from inference_platform.serving.inference_service.pods import CONTAINER_SECURITY, INITIALIZER_USER
from inference_platform.serving.model_namespace import PART_OF_LABELS
from inference_platform.serving.model_storage import (
    SECRET_DIR,
    SECRET_VOLUME,
    StorageAccess,
    download_port,
    initializer_env,
)

AGENT = "model-cache-agent"
METRICS_PORT = cache_agent_script.METRICS_PORT
SCRIPT_CONFIG_MAP = AGENT
SCRIPT_FILE = "agent.py"
SCRIPT_DIR = "/etc/model-cache/agent"
VERSIONS_FILE = "versions.json"
VERSIONS_DIR = "/etc/model-cache/versions"
SECRET_NAME = SECRET_VOLUME
"""The copy of the models' storage Secret in the agent's namespace (the models' has the same name)."""
KIND_LABEL = "inference-platform.io/cache-nodes"
SCRIPT_TEXT = Path(cache_agent_script.__file__).read_text()


CHECKOV_SKIPS = {
    "CKV_K8S_25": "the init container adds CAP_CHOWN (and drops every other) only to hand the cache path "
    "the kubelet creates as root to the agent's non-root user",
}


def pod_labels(kind: NodeKind) -> dict[str, str]:
    """The agent's pods on one kind of cache node."""
    return {"app.kubernetes.io/name": AGENT, KIND_LABEL: kind}


def daemon_set_name(kind: NodeKind) -> str:
    return f"model-cache-{kind}"


@dataclass(frozen=True)
class CacheAgentArgs:
    config: ModelCacheConfig
    namespace: str
    """The model namespace: where the cached versions' pods run (the first part of their cache path)."""
    versions: tuple[CachedVersion, ...]
    gpu_nodes: GpuNodes
    npu_nodes: NpuNodes
    access: StorageAccess | None = None
    """The models' download credentials (their Secret is copied into the agent's namespace)."""
    secret_data: Any = None
    """The Secret's files (Pulumi secrets), when the models' downloads have one."""

    def held(self, kind: NodeKind) -> list[CachedVersion]:
        return [v for v in self.versions if v.kind == kind]


def _uris(versions: Sequence[CachedVersion]) -> list[str]:
    return [uri for v in versions for uri in (v.uri, *(a.uri for a in v.adapters))]


def download_ports(versions: Sequence[CachedVersion], access: StorageAccess | None) -> tuple[int, ...]:
    """The ports the agent's downloads reach: those the versions' own downloads would."""
    return tuple(sorted({download_port(uri, access) for uri in _uris(versions)}))


def versions_json(namespace: str, versions: Sequence[CachedVersion]) -> str:
    entries = [
        {
            "namespace": namespace,
            "model": v.model,
            "version": v.version,
            "uri": v.uri,
            "adapters": [{"name": a.name, "uri": a.uri} for a in v.adapters],
        }
        for v in versions
    ]
    return json.dumps(entries, indent=2, sort_keys=True) + "\n"


def _metadata(name: str, **labels: str) -> dict[str, Any]:
    return {"name": name, "namespace": NAMESPACE, "labels": PART_OF_LABELS | labels}


def service_account() -> dict[str, Any]:
    """It calls no API: no token is mounted."""
    metadata = _metadata(AGENT)
    return {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": metadata, "automountServiceAccountToken": False}


def script_config_map() -> dict[str, Any]:
    metadata = _metadata(SCRIPT_CONFIG_MAP)
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": metadata, "data": {SCRIPT_FILE: SCRIPT_TEXT}}


def versions_config_map(args: CacheAgentArgs, kind: NodeKind) -> dict[str, Any]:
    text = versions_json(args.namespace, args.held(kind))
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": _metadata(daemon_set_name(kind)),
        "data": {VERSIONS_FILE: text},
    }


def storage_secret(args: CacheAgentArgs) -> dict[str, Any] | None:
    if args.access is None or not args.secret_data:
        return None
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": _metadata(args.access.secret_name),
        "type": "Opaque",
        "stringData": args.secret_data,
    }


def _env(versions: Sequence[CachedVersion], access: StorageAccess | None) -> tuple[list[dict[str, Any]], bool]:
    """The storage initializer's environment for every scheme the kind's versions use, and whether
    the credentials are mounted."""
    env: dict[str, dict[str, Any]] = {}
    mounts = False
    for scheme in sorted({urlsplit(uri).scheme for uri in _uris(versions)}):
        found, credentials = initializer_env(scheme, access)
        env |= {e["name"]: e for e in found}
        mounts = mounts or credentials
    node = {"name": "NODE_NAME", "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}}}
    return [*env.values(), {"name": "PYTHONDONTWRITEBYTECODE", "value": "1"}, node], mounts


def _nodes(args: CacheAgentArgs, kind: NodeKind) -> GpuNodes | NpuNodes:
    return args.gpu_nodes if kind == "gpu" else args.npu_nodes


def node_placement(nodes: GpuNodes | NpuNodes) -> dict[str, Any]:
    """The kind's nodes: their selector and tolerations."""
    placement: dict[str, Any] = {"nodeSelector": dict(sorted(nodes.node_selector.items()))}
    if nodes.tolerations:
        placement["tolerations"] = [t.to_kubernetes() for t in nodes.tolerations]
    return placement


def daemon_set(args: CacheAgentArgs, kind: NodeKind) -> dict[str, Any]:
    path = args.config.path
    env, mounts_credentials = _env(args.held(kind), args.access)
    mounts: list[dict[str, Any]] = [
        {"name": "cache", "mountPath": path},
        {"name": "script", "mountPath": SCRIPT_DIR, "readOnly": True},
        # The directory, not a subPath: the kubelet updates it when the ConfigMap changes.
        {"name": "versions", "mountPath": VERSIONS_DIR, "readOnly": True},
        {"name": "scratch", "mountPath": "/tmp"},
    ]
    volumes: list[dict[str, Any]] = [
        {"name": "cache", "hostPath": {"path": path, "type": "DirectoryOrCreate"}},
        {"name": "script", "configMap": {"name": SCRIPT_CONFIG_MAP}},
        {"name": "versions", "configMap": {"name": daemon_set_name(kind)}},
        {"name": "scratch", "emptyDir": {"sizeLimit": "1Gi"}},
    ]
    if mounts_credentials and args.access is not None:
        mounts.append({"name": SECRET_VOLUME, "mountPath": SECRET_DIR, "readOnly": True})
        volumes.append({"name": SECRET_VOLUME, "secret": {"secretName": args.access.secret_name}})
    probe = {"httpGet": {"path": "/metrics", "port": METRICS_PORT}, "periodSeconds": 30}
    agent = {
        "name": "agent",
        "image": pins.STORAGE_INITIALIZER_IMAGE,
        "imagePullPolicy": "Always",
        "command": ["python", f"{SCRIPT_DIR}/{SCRIPT_FILE}"],
        "args": ["--versions", f"{VERSIONS_DIR}/{VERSIONS_FILE}", "--path", path, "--port", str(METRICS_PORT)],
        "env": env,
        "ports": [{"name": "http-metrics", "containerPort": METRICS_PORT, "protocol": "TCP"}],
        "resources": {
            "requests": {"cpu": "100m", "memory": "256Mi", "ephemeral-storage": "1Gi"},
            "limits": {"cpu": "1", "memory": "1Gi", "ephemeral-storage": "1Gi"},
        },
        "readinessProbe": probe,
        "livenessProbe": probe,
        "securityContext": CONTAINER_SECURITY,
        "volumeMounts": mounts,
    }
    chown = {
        "name": "own-cache-path",
        "image": pins.STORAGE_INITIALIZER_IMAGE,
        "imagePullPolicy": "Always",
        "command": ["chown", f"{INITIALIZER_USER}:{INITIALIZER_USER}", path],
        "resources": {"requests": {"cpu": "10m", "memory": "16Mi"}, "limits": {"cpu": "100m", "memory": "64Mi"}},
        "securityContext": {
            "runAsUser": 0,
            "runAsNonRoot": False,
            "allowPrivilegeEscalation": False,
            "readOnlyRootFilesystem": True,
            "capabilities": {"drop": ["ALL"], "add": ["CHOWN"]},
        },
        "volumeMounts": [{"name": "cache", "mountPath": path}],
    }
    annotations = {
        "prometheus.io/scrape": "true",
        "prometheus.io/port": str(METRICS_PORT),
        "prometheus.io/path": "/metrics",
    } | config_checksum(SCRIPT_TEXT)  # it reads versions.json each pass, its own code once
    pod = {
        "serviceAccountName": AGENT,
        "automountServiceAccountToken": False,
        "enableServiceLinks": False,
        "securityContext": {
            "runAsNonRoot": True,
            "runAsUser": INITIALIZER_USER,
            "runAsGroup": INITIALIZER_USER,
            "seccompProfile": {"type": "RuntimeDefault"},
        },
        "initContainers": [chown],
        "containers": [agent],
        "volumes": volumes,
        **node_placement(_nodes(args, kind)),
    }
    labels = pod_labels(kind)
    metadata = _metadata(daemon_set_name(kind), **labels)
    skips = enumerate(CHECKOV_SKIPS.items(), 1)
    metadata["annotations"] = {f"checkov.io/skip{i}": f"{check}={why}" for i, (check, why) in skips}
    return {
        "apiVersion": "apps/v1",
        "kind": "DaemonSet",
        "metadata": metadata,
        "spec": {
            "selector": {"matchLabels": labels},
            "template": {"metadata": {"labels": labels, "annotations": annotations}, "spec": pod},
        },
    }


def manifests(args: CacheAgentArgs) -> list[dict[str, Any]]:
    """Every object of the agent's, in its namespace (platform/model_cache_agent.py makes that)."""
    secret = storage_secret(args)
    found = [service_account(), script_config_map(), *([secret] if secret else [])]
    for kind in args.config.kinds:
        found += [versions_config_map(args, kind), daemon_set(args, kind)]
    return found
