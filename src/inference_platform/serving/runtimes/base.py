"""What every model server hands to the InferenceService: one container and its config files.

A runtime module (mlserver.py, tfserving.py, ...) knows its server's ports, probes, config format
and the directory layout it expects; the InferenceService knows Kubernetes: volumes, GPUs,
storage, the transformer. They meet here: a runtime fills one `ServerContainer` (its image and
resources by default, how the server starts, where the model's files go, its `Probes`) and
`model_server_container` turns it into the predictor container with a model's and a version's
overrides applied.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar

from inference_platform.serving.model_spec import ModelSpecBase, ModelVersion
from inference_platform.serving.resources import Resources

# Volume names the InferenceService defines and runtimes mount.
CONFIG_VOLUME = "server-config"
MODEL_VOLUME = "model-files"
SCRATCH_VOLUME = "scratch"
SCRATCH_PATH = "/tmp"

PREDICTOR_CONTAINER = "predictor"

Probe = dict[str, Any]
"""One Kubernetes probe (httpGet, tcpSocket or exec, with its period, failures and timeout)."""
Mount = dict[str, Any]
"""One Kubernetes volumeMount."""


def http_probe(path: str, port: int, *, period: int, failures: int, timeout: int = 5) -> Probe:
    return {
        "httpGet": {"path": path, "port": port},
        "periodSeconds": period,
        "failureThreshold": failures,
        "timeoutSeconds": timeout,
    }


def tcp_probe(port: int, *, period: int, failures: int, timeout: int = 5) -> Probe:
    return {
        "tcpSocket": {"port": port},
        "periodSeconds": period,
        "failureThreshold": failures,
        "timeoutSeconds": timeout,
    }


def exec_probe(command: list[str], *, period: int, failures: int) -> Probe:
    return {"exec": {"command": command}, "periodSeconds": period, "failureThreshold": failures, "timeoutSeconds": 5}


@dataclass(frozen=True)
class Probes:
    """A container's three health checks, made once by its runtime and carried as one value.

    `startup` holds the others off while the server loads (its period x failures is the loading
    budget, which the rollout timeout adds up); `readiness` says when the pod takes requests;
    `liveness` when the kubelet restarts it."""

    STARTUP_FIELD: ClassVar[str] = "startupProbe"
    FIELDS: ClassVar[tuple[str, str, str]] = (STARTUP_FIELD, "readinessProbe", "livenessProbe")
    """The container's fields that hold them, in the order containers list them."""

    startup: Probe
    readiness: Probe
    liveness: Probe

    @classmethod
    def ready_after_start(
        cls, readiness: Probe, liveness: Probe, *, startup_failures: int, startup_period: int | None = None
    ) -> Probes:
        """The usual shape: startup polls the readiness check (every `startup_period` seconds,
        readiness' own period by default) up to `startup_failures` times before liveness begins."""
        startup = copy.deepcopy(readiness) | {"failureThreshold": startup_failures}
        if startup_period is not None:
            startup["periodSeconds"] = startup_period
        return cls(startup=startup, readiness=readiness, liveness=liveness)

    def to_kubernetes(self) -> dict[str, Probe]:
        """The container's startupProbe, readinessProbe and livenessProbe."""
        return dict(zip(self.FIELDS, (self.startup, self.readiness, self.liveness), strict=True))

    def ports(self) -> set[int | str]:
        """The ports the probes check (an exec probe checks none)."""
        return {
            check["port"]
            for probe in (self.startup, self.readiness, self.liveness)
            for kind in ("httpGet", "tcpSocket", "grpc")
            if (check := probe.get(kind)) is not None
        }


def config_mount(path: str, file: str | None = None) -> Mount:
    """Mount the generated config: the whole ConfigMap at a directory, or one file of it at a path."""
    mount: Mount = {"name": CONFIG_VOLUME, "mountPath": path, "readOnly": True}
    if file is not None:
        mount["subPath"] = file
    return mount


@dataclass(frozen=True)
class ServerContainer:
    """What a runtime says about its server's container; a model and a version may override the
    image, resources, args and env (`model_server_container` applies them)."""

    image: str
    """The image when neither the model nor the version names one."""
    resources: Resources
    """Requests and limits when the model and version leave them unset."""
    model_dir: str
    """Where the version's model files are mounted (read-only)."""
    probes: Probes
    command: Sequence[str] = ()
    """The entrypoint; the image's own when empty."""
    args: Sequence[str] = ()
    """The server's arguments; a model's and a version's `args` follow them."""
    env: Mapping[str, str] = field(default_factory=dict)
    """The server's environment; a model's and a version's `env` win."""
    field_env: Mapping[str, str] = field(default_factory=dict)
    """Variables the kubelet fills from the pod's own fields (the Downward API: name -> fieldPath,
    e.g. status.podIP); a model's and a version's `env` of the same name win."""
    config_mounts: Sequence[Mount] = ()
    """Where the generated config files go (`config_mount`), mounted after the model's files."""
    mounts: Sequence[Mount] = ()
    """Further volumes (the plan's `volumes`), mounted after the scratch volume."""
    working_dir: str | None = None


def model_server_container(spec: ModelSpecBase, version: ModelVersion, server: ServerContainer) -> dict[str, Any]:
    """The predictor container, with the overrides a model and a version may make applied."""
    resources = (version.resources or Resources()).over(spec.resources).over(server.resources)
    merged_env = dict(server.env)
    merged_env.update({e.name: e.value for e in spec.env})
    merged_env.update({e.name: e.value for e in version.env})
    mounts = [{"name": MODEL_VOLUME, "mountPath": server.model_dir, "readOnly": True}]
    mounts += server.config_mounts
    mounts.append({"name": SCRATCH_VOLUME, "mountPath": SCRATCH_PATH})
    mounts += server.mounts
    all_args = [*server.args, *spec.args, *version.args]
    container: dict[str, Any] = {
        "name": PREDICTOR_CONTAINER,
        "image": version.image or spec.image or server.image,
    }
    if server.command:
        container["command"] = list(server.command)
    if all_args:
        container["args"] = all_args
    if server.working_dir:
        container["workingDir"] = server.working_dir
    container.update(
        {
            "ports": [
                {"name": name, "containerPort": number, "protocol": "TCP"} for name, number in spec.server_ports.items()
            ],
            "env": [entry for _, entry in sorted(_env_entries(merged_env, server.field_env).items())],
            "resources": resources.to_kubernetes(),
            "volumeMounts": mounts,
            **server.probes.to_kubernetes(),
        }
    )
    if not container["env"]:
        del container["env"]
    return container


def _env_entries(values: Mapping[str, str], fields: Mapping[str, str]) -> dict[str, dict[str, Any]]:
    """The container's env entries by name: plain values, and the pod's own fields for the rest."""
    entries: dict[str, dict[str, Any]] = {
        name: {"name": name, "valueFrom": {"fieldRef": {"fieldPath": path}}} for name, path in fields.items()
    }
    return entries | {name: {"name": name, "value": value} for name, value in values.items()}


def json_file(content: dict[str, Any]) -> str:
    return json.dumps(content, indent=2, sort_keys=True) + "\n"
