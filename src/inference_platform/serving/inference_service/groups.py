"""A version served by groups of pods across nodes (vLLM's multi-node mode): one LeaderWorkerSet
per version, each replica a group of a leader and its workers, from the pinned lws chart's
controller.

- Only leaders serve: the version's Services select worker index 0, and only the leader has probes
  (workers run the engine headless; when a worker's process exits the group is recreated, the
  RecreateGroupOnPodRestart policy).
- Every pod of a group on a node of its own (anti-affinity over the set's pods), and a group within
  one topology domain (the controller's exclusive-topology annotation, `platform.gpuNodes.groupTopologyKey`).
- A group's pods talk to each other on ports the engine picks (torch.distributed's rendezvous,
  NCCL's sockets): a NetworkPolicy per group index admits every port between the pods of that
  group, and only between them. Those connections stay out of Istio: workers have no sidecar (they
  serve nothing and call nothing, so there is nothing for one to secure or measure), and the
  leader's sidecar intercepts only its serving ports (`traffic.sidecar.istio.io/includeInboundPorts`),
  so STRICT mTLS and the model's ALLOW-only AuthorizationPolicy never see group traffic arrive.
  The leader's own connections to its workers leave through its sidecar as passthrough TCP (the
  mesh's outboundTrafficPolicy ALLOW_ANY, Istio's default, which this platform keeps).
"""

from __future__ import annotations

from typing import Any

from inference_platform.serving.config_checksum import CONFIG_CHECKSUM
from inference_platform.serving.inference_service.args import InferenceServiceArgs, object_metadata, version_name
from inference_platform.serving.model_spec import ModelVersion
from inference_platform.serving.runtimes.base import PREDICTOR_CONTAINER, Probes
from inference_platform.serving.server_plan import WorkerPlan

API_VERSION = "leaderworkerset.x-k8s.io/v1"
KIND = "LeaderWorkerSet"
# Labels and annotations the LWS controller sets on, and reads from, its pods and sets.
SET_LABEL = "leaderworkerset.sigs.k8s.io/name"
GROUP_INDEX_LABEL = "leaderworkerset.sigs.k8s.io/group-index"
WORKER_INDEX_LABEL = "leaderworkerset.sigs.k8s.io/worker-index"
EXCLUSIVE_TOPOLOGY = "leaderworkerset.sigs.k8s.io/exclusive-topology"
INCLUDE_INBOUND_PORTS = "traffic.sidecar.istio.io/includeInboundPorts"
INJECT = "sidecar.istio.io/inject"
# The controller makes a headless Service named after the set (its pods' DNS subdomain), so the
# set cannot take the version's name, which its Service has.
SET_SUFFIX = "-group"


def set_name(args: InferenceServiceArgs, version: ModelVersion) -> str:
    return version_name(args, version) + SET_SUFFIX


def leader_worker_set(
    args: InferenceServiceArgs, version: ModelVersion, deployment: dict[str, Any], workers: WorkerPlan
) -> dict[str, Any]:
    """The version's LeaderWorkerSet, from the Deployment it would otherwise have: the same pod for
    the leader, and for the workers the same pod running the engine headless."""
    name = set_name(args, version)
    template = deployment["spec"]["template"]
    leader_pod = template["spec"] | {"affinity": _one_pod_per_node(name)}
    worker_pod = leader_pod | {"containers": [_worker(c, workers) for c in leader_pod["containers"]]}
    serving = ",".join(str(port) for port in args.model.serving_ports)
    leader_metadata = template["metadata"] | {
        "annotations": template["metadata"]["annotations"] | {INCLUDE_INBOUND_PORTS: serving}
    }
    checksum = {k: v for k, v in template["metadata"]["annotations"].items() if k == CONFIG_CHECKSUM}
    worker_metadata = {"labels": template["metadata"]["labels"], "annotations": {INJECT: "false"} | checksum}
    metadata = deployment["metadata"] | {"name": name}
    topology = (args.npu_nodes if args.model.npu is not None else args.gpu_nodes).group_topology_key
    if topology is not None:
        metadata["annotations"] = metadata["annotations"] | {EXCLUSIVE_TOPOLOGY: topology}
    spec: dict[str, Any] = {}
    if "replicas" in deployment["spec"]:
        spec["replicas"] = deployment["spec"]["replicas"]
    spec |= {
        # Workers start with the leader, so the group's rendezvous can complete.
        "startupPolicy": "LeaderCreated",
        "rolloutStrategy": {
            "type": "RollingUpdate",
            "rollingUpdateConfiguration": {"maxUnavailable": 0, "maxSurge": 1},
        },
        "leaderWorkerTemplate": {
            "size": workers.size,
            "restartPolicy": "RecreateGroupOnPodRestart",
            "leaderTemplate": {"metadata": leader_metadata, "spec": leader_pod},
            "workerTemplate": {"metadata": worker_metadata, "spec": worker_pod},
        },
    }
    return {"apiVersion": API_VERSION, "kind": KIND, "metadata": metadata, "spec": spec}


def _worker(container: dict[str, Any], workers: WorkerPlan) -> dict[str, Any]:
    if container["name"] != PREDICTOR_CONTAINER:
        return container
    served = ("ports", *Probes.FIELDS)
    return {key: value for key, value in container.items() if key not in served} | {"args": list(workers.args)}


def _one_pod_per_node(name: str) -> dict[str, Any]:
    return {
        "podAntiAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": [
                {"labelSelector": {"matchLabels": {SET_LABEL: name}}, "topologyKey": "kubernetes.io/hostname"}
            ]
        }
    }


def group_count(args: InferenceServiceArgs, version: ModelVersion) -> int:
    """The most groups a version can have: the autoscaler's maximum, or its fixed replicas."""
    scaling = args.model.version_autoscaling(version)
    return scaling.max_replicas if scaling.enabled else args.model.fixed_replicas(version)


def group_policies(args: InferenceServiceArgs, version: ModelVersion) -> list[dict[str, Any]]:
    """Each group's pods admit each other on every port, in and out; nobody else gains anything."""
    name, policies = set_name(args, version), []
    for index in range(group_count(args, version)):
        members = {"podSelector": {"matchLabels": {SET_LABEL: name, GROUP_INDEX_LABEL: str(index)}}}
        policies.append(
            {
                "apiVersion": "networking.k8s.io/v1",
                "kind": "NetworkPolicy",
                "metadata": object_metadata(args, f"{name}-{index}", version),
                "spec": members
                | {
                    "policyTypes": ["Ingress", "Egress"],
                    "ingress": [{"from": [members]}],
                    "egress": [{"to": [members]}],
                },
            }
        )
    return policies


def scale_target(args: InferenceServiceArgs, version: ModelVersion) -> dict[str, str]:
    """What a version's HPA or ScaledObject scales: its Deployment, or its LeaderWorkerSet's groups
    (through the set's scale subresource, whose pod selector is the leaders')."""
    if args.model.group_size > 1:
        return {"apiVersion": API_VERSION, "kind": KIND, "name": set_name(args, version)}
    return {"apiVersion": "apps/v1", "kind": "Deployment", "name": version_name(args, version)}
