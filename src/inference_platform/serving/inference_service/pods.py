"""The pods of one model version: the server container, an optional transformer in front, the
model's files, and the Deployment, ConfigMap and disruption budget around them."""

from __future__ import annotations

import copy
import json
import math
import re
from typing import Any

from inference_platform.config.base import duration_seconds
from inference_platform.serving.config_checksum import config_checksum
from inference_platform.serving.gpu import VISIBLE_DEVICES
from inference_platform.serving.inference_service.args import (
    InferenceServiceArgs,
    object_labels,
    object_metadata,
    selector_labels,
    service_fqdn,
    version_name,
)
from inference_platform.serving.model_cache_volumes import cache_claim, wait_container
from inference_platform.serving.model_spec import ModelVersion, TransformerSpec
from inference_platform.serving.model_storage import (
    CacheClaim,
    PodFiles,
    extra_files,
    is_downloaded,
    model_files,
    pvc_location,
)
from inference_platform.serving.resources import ResourceList, Resources
from inference_platform.serving.runtimes.base import (
    CONFIG_VOLUME,
    MODEL_VOLUME,
    SCRATCH_PATH,
    SCRATCH_VOLUME,
    Probes,
    http_probe,
    tcp_probe,
)
from inference_platform.serving.server_plan import ServerPlan

TRANSFORMER_CONTAINER = "transformer"
TRANSFORMER_SCRATCH = "transformer-scratch"
# With a transformer in front, the server's own HTTP port is renamed so the entry point is `http`.
PREDICTOR_HTTP_PORT_NAME = "http-predictor"
CONTAINER_SECURITY = {
    "allowPrivilegeEscalation": False,
    "readOnlyRootFilesystem": True,
    "capabilities": {"drop": ["ALL"]},
}
# The storage initializer image runs as this (non-root) user.
INITIALIZER_USER = 1000
# Before a pod stops, it keeps serving this long while endpoints and routes drop it.
PRESTOP_SECONDS = 10
# pulumi-kubernetes waits this long for a Deployment to roll out (its default is 10 minutes).
ROLLOUT_TIMEOUT_ANNOTATION = "pulumi.com/timeoutSeconds"
# Beyond the servers' startup probes: pulling images and downloading model files.
ROLLOUT_ALLOWANCE_SECONDS = 15 * 60
LIFECYCLE = {"preStop": {"sleep": {"seconds": PRESTOP_SECONDS}}}
TRANSFORMER_RESOURCES = Resources(
    requests=ResourceList(cpu="100m", memory="256Mi"),
    limits=ResourceList(cpu="1", memory="1Gi"),
)


def scrape_annotations(plan: ServerPlan) -> dict[str, str]:
    """The annotations Prometheus' kubernetes_sd relabel rules keep and follow (on the pods;
    Istio's injector points them at the sidecar, which serves these metrics merged with its own).
    A server without metrics gets none: the injector then adds its own, for the sidecar's metrics."""
    if plan.metrics is None:
        return {}
    return {
        "prometheus.io/scrape": "true",
        "prometheus.io/port": str(plan.metrics.port),
        "prometheus.io/path": plan.metrics.path,
    }


def config_map(args: InferenceServiceArgs, version: ModelVersion, plan: ServerPlan) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": object_metadata(args, version_name(args, version), version),
        "data": dict(sorted(plan.config_files.items())),
    }


def url_env_name(model: str) -> str:
    """The env var holding a callee's base URL: model `text-embedder` -> TEXT_EMBEDDER_URL."""
    return re.sub(r"[^A-Z0-9]", "_", model.upper()) + "_URL"


def callee_urls(args: InferenceServiceArgs) -> dict[str, str]:
    """Each model this one calls, by the env var its code reads the base URL from."""
    return {url_env_name(c.name): f"http://{service_fqdn(c.name, c.namespace)}" for c in args.callees}


def _config_checksum(plan: ServerPlan) -> dict[str, str]:
    """Changes whenever the generated config does, so a config change rolls the pods."""
    return config_checksum(json.dumps(plan.config_files, sort_keys=True))


def _predictor(
    args: InferenceServiceArgs, plan: ServerPlan, model_sub_path: str | None, adapters: PodFiles
) -> dict[str, Any]:
    """The server container with the model's (and its adapters') files, GPUs and (behind a
    transformer) renamed port."""
    container = copy.deepcopy(plan.container)
    if model_sub_path is not None:
        for mount in container["volumeMounts"]:
            if mount["name"] == MODEL_VOLUME:
                mount["subPath"] = model_sub_path
    container["volumeMounts"] += adapters.mounts
    placement = args.model.placement(args.gpu_nodes, args.npu_nodes)
    if placement.limits:
        container["resources"].setdefault("limits", {}).update(placement.limits)
    if placement.env:
        env = [e for e in container.get("env", []) if e["name"] not in placement.env]
        env += [{"name": name, "value": value} for name, value in placement.env.items()]
        container["env"] = sorted(env, key=lambda e: e["name"])
    if args.callees:
        # The model's own env vars win: a team may point a callee's URL elsewhere.
        env = container.get("env", [])
        taken = {e["name"] for e in env}
        env += [{"name": n, "value": v} for n, v in callee_urls(args).items() if n not in taken]
        container["env"] = sorted(env, key=lambda e: e["name"])
    if args.model.transformer is not None:
        for port in container["ports"]:
            if port["name"] == "http":
                port["name"] = PREDICTOR_HTTP_PORT_NAME
    container["securityContext"] = CONTAINER_SECURITY
    container["lifecycle"] = LIFECYCLE
    container["imagePullPolicy"] = "Always"
    return container


def _transformer(args: InferenceServiceArgs, transformer: TransformerSpec, plan: ServerPlan) -> dict[str, Any]:
    """The pre/post-processing container: it takes requests on `http` and calls the server on localhost."""
    env = {
        "PREDICTOR_HOST": f"localhost:{plan.http_port}",
        "MODEL_NAME": args.model.name,
        "PORT": str(transformer.port),
        VISIBLE_DEVICES: "none",
    }
    env.update(callee_urls(args))
    env.update({e.name: e.value for e in transformer.env})
    ready = (
        http_probe(transformer.health_path, transformer.port, period=10, failures=3)
        if transformer.health_path
        else tcp_probe(transformer.port, period=10, failures=3)
    )
    probes = Probes.ready_after_start(ready, tcp_probe(transformer.port, period=10, failures=3), startup_failures=60)
    container: dict[str, Any] = {"name": TRANSFORMER_CONTAINER, "image": transformer.image}
    if transformer.command:
        container["command"] = transformer.command
    if transformer.args:
        container["args"] = transformer.args
    container.update(
        {
            "ports": [{"name": "http", "containerPort": transformer.port, "protocol": "TCP"}],
            "env": [{"name": name, "value": value} for name, value in sorted(env.items())],
            "resources": transformer.resources.over(TRANSFORMER_RESOURCES).to_kubernetes(),
            "volumeMounts": [{"name": TRANSFORMER_SCRATCH, "mountPath": SCRATCH_PATH}],
            **probes.to_kubernetes(),
            "securityContext": CONTAINER_SECURITY
            | ({"runAsUser": transformer.run_as_user} if transformer.run_as_user is not None else {}),
            "lifecycle": LIFECYCLE,
            "imagePullPolicy": "Always",
        }
    )
    return container


INITIALIZER_SECURITY = CONTAINER_SECURITY | {"runAsUser": INITIALIZER_USER}


def version_cache(args: InferenceServiceArgs, version: ModelVersion) -> CacheClaim | None:
    """The claim on the node's copy of a cached version (its model's files and downloaded adapters'),
    mounted in the model's volume; None when the version is not cached."""
    cached = args.cached.get(version.name)
    return None if cached is None else cache_claim(cached, MODEL_VOLUME)


def adapter_files(args: InferenceServiceArgs, version: ModelVersion) -> PodFiles:
    """The version's LoRA adapters' files, each fetched the way its model's are, into its own directory
    (a cached version's downloaded adapters mounted from its cache claim, beside the model's)."""
    cache = version_cache(args, version)
    downloaded = is_downloaded(version.model_uri) and cache is None
    claims = {cache.claim: MODEL_VOLUME} if cache is not None else {}
    if not is_downloaded(version.model_uri):
        claims = {pvc_location(version.model_uri)[0]: MODEL_VOLUME}
    return extra_files(
        [adapter.files for adapter in version.adapters],
        claims=claims,
        downloaded=[str(args.model.download_size)] if downloaded else [],
        access=args.storage,
        scratch_volume=SCRATCH_VOLUME,
        security_context=INITIALIZER_SECURITY,
        cache=cache,
    )


def pod_spec(args: InferenceServiceArgs, version: ModelVersion, plan: ServerPlan) -> dict[str, Any]:
    files = model_files(
        version.model_uri,
        volume_name=MODEL_VOLUME,
        download_size=str(args.model.download_size),
        access=args.storage,
        scratch_volume=SCRATCH_VOLUME,
        security_context=INITIALIZER_SECURITY,
        cache=version_cache(args, version),
    )
    adapters = adapter_files(args, version)
    containers = [_predictor(args, plan, files.sub_path, adapters)]
    volumes = [files.volume, {"name": SCRATCH_VOLUME, "emptyDir": {}}]
    if plan.config_files:
        volumes.append({"name": CONFIG_VOLUME, "configMap": {"name": version_name(args, version)}})
    volumes += [*files.extra_volumes, *plan.volumes]
    volumes += [v for v in adapters.volumes if v not in volumes]
    transformer = args.model.transformer
    if transformer is not None:
        containers.insert(0, _transformer(args, transformer, plan))
        volumes.append({"name": TRANSFORMER_SCRATCH, "emptyDir": {}})
    security: dict[str, Any] = {"runAsNonRoot": True, "seccompProfile": {"type": "RuntimeDefault"}}
    if plan.run_as_user is not None:
        security["runAsUser"] = plan.run_as_user
    spec: dict[str, Any] = {
        "serviceAccountName": args.service_account,
        "automountServiceAccountToken": False,
        "enableServiceLinks": False,
        "securityContext": security,
        # In-flight requests finish: the preStop pause, then up to the request timeout.
        "terminationGracePeriodSeconds": PRESTOP_SECONDS + int(duration_seconds(args.model.timeout)) + 5,
        "topologySpreadConstraints": [
            {
                "maxSkew": 1,
                "topologyKey": "kubernetes.io/hostname",
                "whenUnsatisfiable": "ScheduleAnyway",
                "labelSelector": {"matchLabels": selector_labels(args, version)},
            }
        ],
    }
    cached = args.cached.get(version.name)
    # A cached version's pods wait for their node's copy first (there is nothing to download).
    downloads = [wait_container(cached, MODEL_VOLUME, INITIALIZER_SECURITY)] if cached is not None else []
    downloads += [files.init_container] if files.init_container is not None else []
    downloads += adapters.init_containers
    if downloads:
        spec["initContainers"] = [download | {"imagePullPolicy": "Always"} for download in downloads]
    spec["containers"] = containers
    spec["volumes"] = volumes
    spec.update(args.model.placement(args.gpu_nodes, args.npu_nodes).pod_fields())
    return spec


def rollout_timeout_seconds(args: InferenceServiceArgs, pod: dict[str, Any]) -> int:
    """How long a version may take to become ready: as configured, or the longest startup probe
    budget of its containers plus time to pull images and download the model."""
    if args.model.rollout_timeout is not None:
        return math.ceil(duration_seconds(args.model.rollout_timeout))
    startup = max(
        (
            probe.get("initialDelaySeconds", 0) + probe["periodSeconds"] * probe["failureThreshold"]
            for container in pod["containers"]
            if (probe := container.get(Probes.STARTUP_FIELD)) is not None
        ),
        default=0,
    )
    return startup + ROLLOUT_ALLOWANCE_SECONDS


def deployment(args: InferenceServiceArgs, version: ModelVersion, plan: ServerPlan) -> dict[str, Any]:
    name = version_name(args, version)
    spec: dict[str, Any] = {}
    if not args.model.version_autoscaling(version).enabled:
        # With an autoscaler, replicas stay unset so Pulumi never fights it over the count.
        spec["replicas"] = args.model.fixed_replicas(version)
    pod = pod_spec(args, version, plan)
    metadata = object_metadata(args, name, version)
    metadata["annotations"] = {ROLLOUT_TIMEOUT_ANNOTATION: str(rollout_timeout_seconds(args, pod))}
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": metadata,
        "spec": spec
        | {
            "revisionHistoryLimit": 5,
            "selector": {"matchLabels": selector_labels(args, version)},
            "strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 1, "maxUnavailable": 0}},
            "template": {
                "metadata": {
                    "labels": object_labels(args, version),
                    "annotations": scrape_annotations(plan)
                    | _config_checksum(plan)
                    | args.model.placement(args.gpu_nodes, args.npu_nodes).annotations,
                },
                "spec": pod,
            },
        },
    }


def disruption_budget(args: InferenceServiceArgs, version: ModelVersion) -> dict[str, Any] | None:
    """At most one pod of a version down for voluntary disruptions, when it can have several."""
    autoscaling = args.model.version_autoscaling(version)
    most = autoscaling.max_replicas if autoscaling.enabled else args.model.fixed_replicas(version)
    if most < 2:
        return None
    return {
        "apiVersion": "policy/v1",
        "kind": "PodDisruptionBudget",
        "metadata": object_metadata(args, version_name(args, version), version),
        "spec": {"maxUnavailable": 1, "selector": {"matchLabels": selector_labels(args, version)}},
    }
