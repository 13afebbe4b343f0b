"""What every model server hands to the InferenceService: one container and its config files.

A runtime module (mlserver.py, ...) knows its server's ports, probes, config format and the
directory layout it expects; the InferenceService knows Kubernetes. They meet here.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from components.model_spec import ModelSpecBase, ModelVersion, Resources

# Volume names the InferenceService defines and runtimes mount.
CONFIG_VOLUME = "server-config"
MODEL_VOLUME = "model-files"
SCRATCH_VOLUME = "scratch"
SCRATCH_PATH = "/tmp"

PREDICTOR_CONTAINER = "predictor"


@dataclass(frozen=True)
class ServerPlan:
    """One version's model server: the container, its generated config files and its endpoints."""

    container: dict[str, Any]
    config_files: dict[str, str]
    http_port: int
    metrics_port: int
    metrics_path: str


@dataclass(frozen=True)
class ExampleRequest:
    """A request that shows how to call the model (used for the stack's ready-to-run curl line)."""

    path: str
    body: dict[str, Any]


def http_probe(path: str, *, period: int, failures: int, timeout: int = 5) -> dict[str, Any]:
    return {
        "httpGet": {"path": path, "port": "http"},
        "periodSeconds": period,
        "failureThreshold": failures,
        "timeoutSeconds": timeout,
    }


def model_server_container(
    spec: ModelSpecBase,
    version: ModelVersion,
    *,
    default_image: str,
    default_resources: Resources,
    ports: dict[str, int],
    command: list[str] | None = None,
    args: list[str] | None = None,
    env: dict[str, str] | None = None,
    config_mount_path: str | None = None,
    model_mount_path: str,
    startup_probe: dict[str, Any],
    readiness_probe: dict[str, Any],
    liveness_probe: dict[str, Any],
) -> dict[str, Any]:
    """The predictor container, with the overrides a model and a version may make applied."""
    resources = (version.resources or Resources()).over(spec.resources).over(default_resources)
    merged_env = dict(env or {})
    merged_env.update({e.name: e.value for e in spec.env})
    merged_env.update({e.name: e.value for e in version.env})
    mounts = [{"name": MODEL_VOLUME, "mountPath": model_mount_path, "readOnly": True}]
    if config_mount_path is not None:
        mounts.append({"name": CONFIG_VOLUME, "mountPath": config_mount_path, "readOnly": True})
    mounts.append({"name": SCRATCH_VOLUME, "mountPath": SCRATCH_PATH})
    container: dict[str, Any] = {
        "name": PREDICTOR_CONTAINER,
        "image": version.image or spec.image or default_image,
    }
    if command:
        container["command"] = command
    if args:
        container["args"] = args
    container.update(
        {
            "ports": [{"name": name, "containerPort": number, "protocol": "TCP"} for name, number in ports.items()],
            "env": [{"name": name, "value": value} for name, value in sorted(merged_env.items())],
            "resources": resources.to_kubernetes(),
            "volumeMounts": mounts,
            "startupProbe": startup_probe,
            "readinessProbe": readiness_probe,
            "livenessProbe": liveness_probe,
        }
    )
    if not container["env"]:
        del container["env"]
    return container
