"""What every model server hands to the InferenceService: one container and its config files.

A runtime module (mlserver.py, tfserving.py, ...) knows its server's ports, probes, config format
and the directory layout it expects; the InferenceService knows Kubernetes: volumes, GPUs,
storage, the transformer. They meet here.
"""

from __future__ import annotations

import json
from typing import Any

from inference_platform.serving.model_spec import ModelSpecBase, ModelVersion, Resources

# Volume names the InferenceService defines and runtimes mount.
CONFIG_VOLUME = "server-config"
MODEL_VOLUME = "model-files"
SCRATCH_VOLUME = "scratch"
SCRATCH_PATH = "/tmp"

PREDICTOR_CONTAINER = "predictor"


def http_probe(path: str, port: int, *, period: int, failures: int, timeout: int = 5) -> dict[str, Any]:
    return {
        "httpGet": {"path": path, "port": port},
        "periodSeconds": period,
        "failureThreshold": failures,
        "timeoutSeconds": timeout,
    }


def tcp_probe(port: int, *, period: int, failures: int, timeout: int = 5) -> dict[str, Any]:
    return {
        "tcpSocket": {"port": port},
        "periodSeconds": period,
        "failureThreshold": failures,
        "timeoutSeconds": timeout,
    }


def exec_probe(command: list[str], *, period: int, failures: int) -> dict[str, Any]:
    return {"exec": {"command": command}, "periodSeconds": period, "failureThreshold": failures, "timeoutSeconds": 5}


def config_mount(path: str, file: str | None = None) -> dict[str, Any]:
    """Mount the generated config: the whole ConfigMap at a directory, or one file of it at a path."""
    mount: dict[str, Any] = {"name": CONFIG_VOLUME, "mountPath": path, "readOnly": True}
    if file is not None:
        mount["subPath"] = file
    return mount


def model_server_container(
    spec: ModelSpecBase,
    version: ModelVersion,
    *,
    default_image: str,
    default_resources: Resources,
    command: list[str] | None = None,
    args: list[str] | None = None,
    env: dict[str, str] | None = None,
    config_mounts: list[dict[str, Any]] | None = None,
    extra_mounts: list[dict[str, Any]] | None = None,
    model_mount_path: str,
    working_dir: str | None = None,
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
    mounts += config_mounts or []
    mounts.append({"name": SCRATCH_VOLUME, "mountPath": SCRATCH_PATH})
    mounts += extra_mounts or []
    all_args = [*(args or []), *spec.args, *version.args]
    container: dict[str, Any] = {
        "name": PREDICTOR_CONTAINER,
        "image": version.image or spec.image or default_image,
    }
    if command:
        container["command"] = command
    if all_args:
        container["args"] = all_args
    if working_dir:
        container["workingDir"] = working_dir
    container.update(
        {
            "ports": [
                {"name": name, "containerPort": number, "protocol": "TCP"} for name, number in spec.server_ports.items()
            ],
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


def json_file(content: dict[str, Any]) -> str:
    return json.dumps(content, indent=2, sort_keys=True) + "\n"
