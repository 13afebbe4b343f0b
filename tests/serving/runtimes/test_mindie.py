"""MindIE Service: the generated config.json against MindIE's published default (every key it
writes exists there with the same type), the addresses probes and scrapes reach, the probes on
the documented management endpoints, and the config errors. No MindIE image or Ascend device runs
here: the config is checked against upstream's file and README (../shared/mindie)."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest
from pydantic import ValidationError

from inference_platform.config.errors import ConfigError
from inference_platform.platform.gpu_nodes import GpuNodes
from inference_platform.serving.runtimes.mindie import MindIEModel
from inference_platform.stack.config import parse_stack_config, project_values
from tests.conftest import base_config, shared_path
from tests.serving.test_scale_to_zero import render

VERSIONS = [{"name": "v1", "modelUri": "pvc://models/qwen", "weight": 100}]


def model(**settings: Any) -> MindIEModel:
    base = {"name": "qwen", "runtime": "mindie", "npu": {"type": "Ascend910B3", "count": 4}, "versions": VERSIONS}
    return MindIEModel.model_validate(base | settings)


def generated(spec: MindIEModel) -> dict[str, Any]:
    config: dict[str, Any] = json.loads(spec.plan(spec.versions[0], GpuNodes()).config_files["config.json"])
    return config


def upstream_config() -> dict[str, Any]:
    config: dict[str, Any] = json.loads(shared_path("mindie/config.json").read_text(encoding="utf-8"))
    return config


def mismatches(ours: Any, theirs: Any, path: str = "") -> list[str]:
    """Where `ours` has a key `theirs` lacks, or a value of another JSON type (lists of objects
    compared element by element with upstream's first)."""
    if type(ours) is not type(theirs):
        return [f"{path}: {type(ours).__name__} where upstream has {type(theirs).__name__}"]
    if isinstance(ours, dict):
        found = [f"{path}.{key}: not in upstream's config" for key in ours if key not in theirs]
        return found + [m for key in ours if key in theirs for m in mismatches(ours[key], theirs[key], f"{path}.{key}")]
    if isinstance(ours, list) and ours and theirs:
        return [m for i, item in enumerate(ours) for m in mismatches(item, theirs[0], f"{path}[{i}]")]
    return []


@pytest.mark.parametrize("nodes", [1, 2])
def test_every_key_written_is_mindies_own_with_its_type(nodes: int) -> None:
    theirs = upstream_config()
    ours = generated(model(nodes=nodes))
    assert mismatches(ours, theirs) == []
    # And nothing of upstream's file left out: MindIE reads most keys without a default.
    assert mismatches(theirs, ours) == []


def test_a_mismatch_is_found() -> None:
    """The walk itself: a misspelt key and a number written as a string are both caught."""
    theirs = upstream_config()
    bad = generated(model())
    bad["ServerConfig"]["managementPort"] = "1026"
    bad["BackendConfig"]["ModelDeployConfig"]["ModelConfig"][0]["worldsize"] = 4
    assert sorted(mismatches(bad, theirs)) == [
        ".BackendConfig.ModelDeployConfig.ModelConfig[0].worldsize: not in upstream's config",
        ".ServerConfig.managementPort: str where upstream has int",
    ]


def test_the_model_is_served_from_its_mounted_files_on_its_npus_without_tls() -> None:
    config = generated(model(maxSeqLen=8192, maxInputTokenLen=4096, maxBatchSize=64))
    backend = config["BackendConfig"]
    assert backend["npuDeviceIds"] == [[0, 1, 2, 3]]
    deployed = backend["ModelDeployConfig"]["ModelConfig"][0]
    assert (deployed["modelName"], deployed["modelWeightPath"], deployed["worldSize"]) == ("qwen", "/mnt/models", 4)
    assert (backend["ModelDeployConfig"]["maxSeqLen"], backend["ModelDeployConfig"]["maxInputTokenLen"]) == (8192, 4096)
    assert backend["ScheduleConfig"]["maxBatchSize"] == 64
    assert config["ServerConfig"]["httpsEnabled"] is False
    assert config["ServerConfig"]["interCommTLSEnabled"] is False
    assert backend["interNodeTLSEnabled"] is False
    assert backend["multiNodesInferEnabled"] is False
    spec = model()
    mount = {"name": "model-files", "mountPath": "/mnt/models", "readOnly": True}
    assert mount in spec.plan(spec.versions[0], GpuNodes()).container["volumeMounts"]


def test_probes_and_scrapes_reach_the_management_plane() -> None:
    """Upstream's management address, 127.0.0.2, answers nothing from outside the container. The
    generated one listens everywhere (allowed by allowAllZeroIpListening, which MindIE requires for
    0.0.0.0), and no env var sets it back to a loopback address."""
    assert upstream_config()["ServerConfig"]["managementIpAddress"] == "127.0.0.2"
    spec = model()
    plan = spec.plan(spec.versions[0], GpuNodes())
    server = generated(spec)["ServerConfig"]
    assert (server["managementIpAddress"], server["allowAllZeroIpListening"]) == ("0.0.0.0", True)
    env = {e["name"]: e for e in plan.container["env"]}
    assert "MIES_CONTAINER_MANAGEMENT_IP" not in env
    assert env["MIES_SERVICE_MONITOR_MODE"]["value"] == "1"  # /metrics answers only then
    assert plan.metrics is not None
    assert (plan.metrics.port, plan.metrics.path) == (server["metricsPort"], "/metrics")
    assert plan.http_port == server["port"]


def test_probes_use_the_documented_management_endpoints_on_the_management_port() -> None:
    readme = shared_path("mindie/README.md").read_text(encoding="utf-8")
    (management,) = re.findall(r"^- `managementPort` \(1026\), management plane:(.*?)(?=^- )", readme, re.M | re.S)
    documented = set(re.findall(r"`GET (/[^` ]+)`", management))
    spec = model()
    container = spec.plan(spec.versions[0], GpuNodes()).container
    port = generated(spec)["ServerConfig"]["managementPort"]
    probes = [container[key]["httpGet"] for key in ("startupProbe", "readinessProbe", "livenessProbe")]
    assert {probe["port"] for probe in probes} == {port}
    assert {probe["path"] for probe in probes} <= documented
    assert container["readinessProbe"]["httpGet"]["path"] == "/v2/health/ready"
    startup = container["startupProbe"]
    assert startup["periodSeconds"] == 5  # upstream's example: 5 s x 100
    assert startup["failureThreshold"] >= 100


def test_the_config_is_copied_where_mindies_owner_check_passes() -> None:
    spec = model()
    plan = spec.plan(spec.versions[0], GpuNodes())
    assert set(plan.config_files) == {"config.json", "start.py"}
    assert plan.container["command"][:2] == ["/bin/bash", "-c"]
    assert "exec python3 /etc/mindie/start.py" in plan.container["command"][2]
    assert plan.run_as_user == 1000


def stack_problems(*models: dict[str, Any]) -> list[tuple[str, str]]:
    config = base_config()
    config["inference-platform:models"] += list(models)
    config["inference-platform:platform"] = {"kubernetesVersion": "1.30.4", "hami": {"enabled": True}}
    try:
        parse_stack_config(project_values(config))
    except ConfigError as error:
        return [(p.path, p.message) for p in error.problems]
    return []


M = "models[2]"
MODEL = {"name": "qwen", "runtime": "mindie", "npu": {"type": "Ascend910B3", "count": 8}, "versions": VERSIONS}


@pytest.mark.parametrize(
    ("settings", "expected"),
    [
        (
            {"npu": None},
            [(f"{M}.npu", "mindie serves on Ascend NPUs: set npu, e.g. npu: {type: Ascend910B3, count: 8}")],
        ),
        (
            {"worldSize": 4},
            [(f"{M}.worldSize", "is 4 but each pod gets 8 NPU(s): make them equal, or drop this")],
        ),
        ({"worldSize": 8}, []),
        (
            {"npu": "Ascend310P"},
            [
                (
                    f"{M}.npu.type",
                    "the pinned MindIE image is the Atlas 800I A2 build (Ascend 910B: Ascend910B2, Ascend910B3, "
                    "Ascend910B4, Ascend910B4-1); for Ascend310P set image to MindIE's build for that chip",
                )
            ],
        ),
        ({"npu": "Ascend310P", "image": "swr.cn-south-1.myhuaweicloud.com/ascendhub/mindie:2.2.RC1-300I-Duo"}, []),
        (
            {"nodes": 2, "npu": {"type": "Ascend910C", "count": 8}, "image": "registry.example.com/mindie-a3:1.0.0"},
            [(f"{M}.nodes", "Ascend910C groups need an A3 super-pod rank table, which the launcher does not write")],
        ),
        (
            {"maxSeqLen": 1024},
            [(f"{M}.maxInputTokenLen", "2048 is longer than maxSeqLen (1024)")],
        ),
        (
            {"nodes": 2, "npu": {"type": "Ascend910B3", "mode": "vnpu", "memoryMib": 32768}},
            [(f"{M}.nodes", "a group spans whole nodes' NPUs: use npu mode exclusive, not vnpu")],
        ),
        (
            {"nodes": 2, "transformer": {"image": "registry.example.com/t:1.0.0"}},
            [(f"{M}.transformer", "a multi-node group serves from its leader alone: no transformer")],
        ),
        (
            {"nodes": 2, "name": "q" * 51},
            [
                (
                    f"{M}.versions[0].name",
                    f"'{'q' * 51}-v1-group-0-1', the name of this version's last group's last pod (its hostname), "
                    "is 64 characters; Kubernetes allows 63: shorten the model or version name",
                )
            ],
        ),
    ],
)
def test_bad_input_is_refused_with_its_path(settings: dict[str, Any], expected: list[tuple[str, str]]) -> None:
    spec = {key: value for key, value in (MODEL | settings).items() if value is not None}
    assert stack_problems(spec) == expected


def test_a_world_size_that_disagrees_is_a_validation_error() -> None:
    with pytest.raises(ValidationError, match="worldSize"):
        model(worldSize=2)


def test_queue_depth_scales_on_mindies_waiting_gauge() -> None:
    spec = model(autoscaling={"minReplicas": 1, "maxReplicas": 3, "queueDepth": 8})
    assert spec.queue_metric == "num_requests_waiting"


def test_a_group_enables_multi_node_inference_and_gives_each_pod_its_address_and_the_nodes_tools() -> None:
    objects = render(MODEL | {"nodes": 2})
    template = objects["LeaderWorkerSet", "qwen-v1-group"]["spec"]["leaderWorkerTemplate"]
    assert template["size"] == 2
    config = json.loads(objects["ConfigMap", "qwen-v1"]["data"]["config.json"])
    assert config["BackendConfig"]["multiNodesInferEnabled"] is True
    # worldSize and npuDeviceIds are per pod; the rank table holds the group's (upstream's A2 two-node guide).
    assert config["BackendConfig"]["ModelDeployConfig"]["ModelConfig"][0]["worldSize"] == 8
    for key in ("leaderTemplate", "workerTemplate"):
        pod = template[key]["spec"]
        (container,) = pod["containers"]
        env = {e["name"]: e for e in container["env"]}
        assert env["MIES_CONTAINER_IP"]["valueFrom"] == {"fieldRef": {"fieldPath": "status.podIP"}}
        assert env["HOST_IP"]["valueFrom"] == {"fieldRef": {"fieldPath": "status.hostIP"}}
        assert container["resources"]["limits"]["huawei.com/Ascend910B3"] == "8"
        volumes = {v["name"]: v for v in pod["volumes"]}
        assert volumes["hccn-tool"]["hostPath"] == {"path": "/usr/local/Ascend/driver/tools/hccn_tool", "type": "File"}
        assert volumes["hccn-conf"]["hostPath"] == {"path": "/etc/hccn.conf", "type": "File"}
    worker = template["workerTemplate"]["spec"]["containers"][0]
    assert not {"ports", "readinessProbe", "livenessProbe", "startupProbe"} & set(worker)
    # The group's own traffic (the rank-table exchange, MindIE's gRPC 1120/1121) is admitted
    # between the group's pods on every port, and only between them.
    policy = objects["NetworkPolicy", "qwen-v1-group-0"]["spec"]
    members = {
        "podSelector": {
            "matchLabels": {
                "leaderworkerset.sigs.k8s.io/name": "qwen-v1-group",
                "leaderworkerset.sigs.k8s.io/group-index": "0",
            }
        }
    }
    assert policy["ingress"] == [{"from": [members]}]
    assert policy["egress"] == [{"to": [members]}]
    assert "ports" not in policy["ingress"][0]
    annotations = template["leaderTemplate"]["metadata"]["annotations"]
    assert annotations["traffic.sidecar.istio.io/includeInboundPorts"] == "1025"


def test_a_single_pod_gets_no_node_tools_and_no_pod_address() -> None:
    objects = render(MODEL)
    pod = objects["Deployment", "qwen-v1"]["spec"]["template"]["spec"]
    assert not [v for v in pod["volumes"] if "hostPath" in v]
    assert "MIES_CONTAINER_IP" not in {e["name"] for e in pod["containers"][0]["env"]}


def test_the_capacity_plan_counts_a_group_as_its_nodes_npus() -> None:
    """2 pods x 8 NPUs a group, 1 to 3 groups: min 16, peak 48 Ascend910B3."""
    config = base_config()
    config["inference-platform:models"] = [
        MODEL | {"nodes": 2, "autoscaling": {"minReplicas": 1, "maxReplicas": 3, "queueDepth": 8}}
    ]
    config["inference-platform:platform"] = {"kubernetesVersion": "1.30.4", "hami": {"enabled": True}}
    npus = parse_stack_config(project_values(config)).capacity().as_json()["npus"]["Ascend910B3"]
    assert (npus["min"], npus["peak"]) == (16, 48)
