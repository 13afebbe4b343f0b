"""MindIE Service, Ascend's LLM server, on Ascend NPUs: OpenAI-compatible routes on its business
port, health on its management port, Prometheus metrics on its metrics port.

Its whole `config.json` is generated here: MindIE's published default (Ascend/MindIE-LLM, tag
3.0.0.beta.1, `src/server/conf/config.json`, whose keys the server reads without defaults) with
what a pod needs changed:

- Addresses. The default management address, 127.0.0.2, answers no probe. Both planes listen on
  0.0.0.0 (`allowAllZeroIpListening: true`): the kubelet's probes, rewritten by Istio, reach the
  pod IP, and Istio's agent scrapes the metrics it merges at localhost (pilot-agent's
  `appMetricsURL`), so the management plane (which the metrics plane shares) must answer on both.
  In a multi-node group MindIE needs the pod's own address (`MIES_CONTAINER_IP`, which replaces
  `ipAddress`, from the Downward API): its gRPC address and how it finds itself in the rank table.
- TLS off (`httpsEnabled`, `interCommTLSEnabled`, `interNodeTLSEnabled`): Istio's mTLS protects
  every hop into the pod, and a group's own traffic stays within its NetworkPolicy.
- The model: `modelName` is the model's name, `modelWeightPath` where its files are mounted,
  `npuDeviceIds` [[0..n-1]] and `worldSize` n from `npu.count` (logical ids: the device plugin's
  ASCEND_RT_VISIBLE_DEVICES numbers the pod's NPUs from 0).

`mindie_launcher.py`, shipped beside the config, copies it where MindIE's ownership check passes,
builds a group's HCCL rank table, and starts the daemon.
"""

from __future__ import annotations

import copy
import dataclasses
from pathlib import Path
from typing import Annotated, Any, ClassVar, Literal

from pydantic import Field, model_validator

from inference_platform import pins
from inference_platform.config.base import config_problems
from inference_platform.platform.gpu_nodes import GpuNodes
from inference_platform.serving.analysis_spec import PayloadProtocol
from inference_platform.serving.model_spec import ModelSpecBase, ModelVersion
from inference_platform.serving.resources import ResourceList, Resources
from inference_platform.serving.runtimes.base import (
    SCRATCH_PATH,
    Probes,
    ServerContainer,
    config_mount,
    http_probe,
    json_file,
    model_server_container,
)
from inference_platform.serving.server_plan import ExampleRequest, MetricsEndpoint, ServerPlan, WorkerPlan

PORT = 1025
MANAGEMENT_PORT = 1026
METRICS_PORT = 1027
# A group's daemons talk gRPC on these (BackendConfig.multiNodesInferPort, ServerConfig.interCommPort).
MULTI_NODES_INFER_PORT = 1120
INTER_COMM_PORT = 1121
# Where the leader gathers a group's rank table (mindie_launcher.py).
RANK_TABLE_PORT = 1122
READY_PATH = "/v2/health/ready"
LIVE_PATH = "/v2/health/live"
METRICS_PATH = "/metrics"
MODEL_DIR = "/mnt/models"
CONFIG_DIR = "/etc/mindie"
CONFIG_FILE = "config.json"
LAUNCHER_FILE = "start.py"
LAUNCHER = Path(__file__).with_name("mindie_launcher.py")
ALL_ADDRESSES = "0.0.0.0"
# Ascend's images and drivers give the NPUs to HwHiAiUser, uid 1000 (see docs/serving.md).
RUN_AS_USER = 1000
SHM_VOLUME = "shm"
# The image sets up CANN, ATB, ATB Models and MindIE from these scripts (its shell profile sources
# them for root; the pod's user has none): every one present is sourced before the launcher runs.
SET_ENV_SCRIPTS = (
    "/usr/local/Ascend/ascend-toolkit/set_env.sh",
    "/usr/local/Ascend/cann/set_env.sh",
    "/usr/local/Ascend/nnal/atb/set_env.sh",
    "/usr/local/Ascend/atb-models/set_env.sh",
    "/usr/local/Ascend/mindie/set_env.sh",
)
# The node's tools a group's pods read their NPUs' RoCE addresses with (`hccn_tool -i <n> -ip -g`),
# and the file it reads them from; the ascend RuntimeClass mounts the driver's libraries, not these.
HCCN_TOOL = "/usr/local/Ascend/driver/tools/hccn_tool"
HCCN_CONF = "/etc/hccn.conf"
NODE_TOOLS = (("hccn-tool", HCCN_TOOL), ("hccn-conf", HCCN_CONF))

DEFAULT_RESOURCES = Resources(
    requests=ResourceList(cpu="4", memory="32Gi"),
    limits=ResourceList(cpu="16", memory="64Gi"),
)

# MindIE-LLM 3.0.0.beta.1, src/server/conf/config.json, whole: the server reads most of its keys
# without a default, so the generated file carries them all (certificate paths unused with TLS off).
_CERTS = "security/certs"
DEFAULTS: dict[str, Any] = {
    "Version": "1.0.0",
    "ServerConfig": {
        "ipAddress": "127.0.0.1",
        "managementIpAddress": "127.0.0.2",
        "port": PORT,
        "managementPort": MANAGEMENT_PORT,
        "metricsPort": METRICS_PORT,
        "allowAllZeroIpListening": False,
        "maxLinkNum": 1000,
        "httpsEnabled": True,
        "fullTextEnabled": False,
        "tlsCaPath": "security/ca/",
        "tlsCaFile": ["ca.pem"],
        "tlsCert": f"{_CERTS}/server.pem",
        "tlsPk": "security/keys/server.key.pem",
        "tlsCrlPath": f"{_CERTS}/",
        "tlsCrlFiles": ["server_crl.pem"],
        "managementTlsCaFile": ["management_ca.pem"],
        "managementTlsCert": f"{_CERTS}/management/server.pem",
        "managementTlsPk": "security/keys/management/server.key.pem",
        "managementTlsCrlPath": "security/management/certs/",
        "managementTlsCrlFiles": ["server_crl.pem"],
        "metricsTlsCaFile": ["metrics_ca.pem"],
        "metricsTlsCert": f"{_CERTS}/metrics/server.pem",
        "metricsTlsPk": "security/keys/metrics/server.key.pem",
        "metricsTlsCrlPath": "security/metrics/certs/",
        "metricsTlsCrlFiles": ["server_crl.pem"],
        "inferMode": "standard",
        "interCommTLSEnabled": True,
        "interCommPort": INTER_COMM_PORT,
        "interCommTlsCaPath": "security/grpc/ca/",
        "interCommTlsCaFiles": ["ca.pem"],
        "interCommTlsCert": "security/grpc/certs/server.pem",
        "interCommPk": "security/grpc/keys/server.key.pem",
        "interCommTlsCrlPath": "security/grpc/certs/",
        "interCommTlsCrlFiles": ["server_crl.pem"],
        "openAiSupport": "vllm",
        "tokenTimeout": 600,
        "e2eTimeout": 600,
        "distDPServerEnabled": False,
        "layerwiseDisaggregated": False,
        "layerwiseDisaggregatedRoleType": "",
        "layerwiseDisaggregatedMasterIpAddress": "127.0.0.3",
        "layerwiseDisaggregatedSlaveIpAddress": ["127.0.0.4"],
        "layerwiseDisaggregatedDataPort": 10024,
        "layerwiseDisaggregatedCrtlPort": [10001, 10002],
    },
    "BackendConfig": {
        "backendName": "mindieservice_llm_engine",
        "modelInstanceNumber": 1,
        "npuDeviceIds": [[0, 1, 2, 3]],
        "tokenizerProcessNumber": 8,
        "multiNodesInferEnabled": False,
        "multiNodesInferPort": MULTI_NODES_INFER_PORT,
        "interNodeTLSEnabled": True,
        "interNodeTlsCaPath": "security/grpc/ca/",
        "interNodeTlsCaFiles": ["ca.pem"],
        "interNodeTlsCert": "security/grpc/certs/server.pem",
        "interNodeTlsPk": "security/grpc/keys/server.key.pem",
        "interNodeTlsCrlPath": "security/grpc/certs/",
        "interNodeTlsCrlFiles": ["server_crl.pem"],
        "kvPoolConfig": {"backend": "", "configPath": ""},
        "ModelDeployConfig": {
            "maxSeqLen": 2560,
            "maxInputTokenLen": 2048,
            "truncation": False,
            "ModelConfig": [
                {
                    "modelInstanceType": "Standard",
                    "modelName": "llama_65b",
                    "modelWeightPath": "/data/atb_testdata/weights/llama1-65b-safetensors",
                    "worldSize": 4,
                    "cpuMemSize": 0,
                    "npuMemSize": -1,
                    "backendType": "atb",
                    "trustRemoteCode": False,
                    "async_scheduler_wait_time": 120,
                    "kv_trans_timeout": 10,
                    "kv_link_timeout": 1080,
                    "models": {"layerwiseDisaggregatedMasterDeviceNum": 2, "layerwiseDisaggregatedSlaveDeviceNum": 8},
                }
            ],
        },
        "ScheduleConfig": {
            "templateType": "Standard",
            "templateName": "Standard_LLM",
            "cacheBlockSize": 128,
            "maxPrefillBatchSize": 50,
            "maxPrefillTokens": 8192,
            "prefillTimeMsPerReq": 150,
            "prefillPolicyType": 0,
            "decodeTimeMsPerReq": 50,
            "decodePolicyType": 0,
            "maxBatchSize": 200,
            "maxIterTimes": 512,
            "maxPreemptCount": 0,
            "supportSelectBatch": False,
            "maxQueueDelayMicroseconds": 5000,
            "maxFirstTokenWaitTime": 2500,
        },
    },
    "LogConfig": {"dynamicLogLevel": "", "dynamicLogLevelValidHours": 2, "dynamicLogLevelValidTime": ""},
    "EnableDynamicAdjustTimeoutConfig": False,
}


# The chips the pinned image (the Atlas 800I A2 build) serves.
IMAGE_CHIPS = ("Ascend910B2", "Ascend910B3", "Ascend910B4", "Ascend910B4-1")


class MindIEModel(ModelSpecBase):
    SERVER_PORTS: ClassVar[dict[str, int]] = {
        "http": PORT,
        "http-management": MANAGEMENT_PORT,
        "http-metrics": METRICS_PORT,
    }
    INFERENCE_PATH: ClassVar[str] = "/v1/completions"  # OpenAI completions API (MindIE's http_handler.cpp)
    PAYLOAD_PROTOCOL: ClassVar[PayloadProtocol] = "openai"
    # MindIE's gauge of requests waiting to be scheduled, labelled model_name
    # (src/server/endpoint/http_wrapper/prometheus_metrics.cpp, tag 3.0.0.beta.1).
    QUEUE_METRIC: ClassVar[str | None] = "num_requests_waiting"
    USES_NPUS: ClassVar[bool] = True

    runtime: Literal["mindie"] = Field(
        description="MindIE Service: a Hugging Face model directory on Ascend NPUs (npu required); HTTP 1025 "
        "(OpenAI API), management 1026 (health), metrics 1027."
    )
    world_size: Annotated[int, Field(ge=1, le=16)] | None = Field(
        default=None,
        description="NPUs one pod's engine spans (ModelConfig worldSize); npu.count, which it must equal, by default.",
    )
    max_seq_len: Annotated[int, Field(ge=1)] = Field(
        default=2560, description="Longest sequence, prompt and output, in tokens (maxSeqLen)."
    )
    max_input_token_len: Annotated[int, Field(ge=1)] = Field(
        default=2048, description="Longest prompt in tokens (maxInputTokenLen); at most maxSeqLen."
    )
    max_batch_size: Annotated[int, Field(ge=1, le=5000)] = Field(
        default=200, description="Requests decoded together at most (ScheduleConfig maxBatchSize)."
    )
    nodes: Annotated[int, Field(ge=1, le=16)] = Field(
        default=1,
        description="Nodes one replica spans: a group of this many pods, each with npu.count NPUs, joined by "
        "an HCCL rank table built at start (multiNodesInferEnabled).",
    )

    @model_validator(mode="after")
    def _mindie(self) -> MindIEModel:
        problems: list[tuple[str, str]] = []
        if self.npu is None:
            problems.append(("npu", "mindie serves on Ascend NPUs: set npu, e.g. npu: {type: Ascend910B3, count: 8}"))
        elif self.world_size is not None and self.world_size != self.npu.count:
            problems.append(
                (
                    "worldSize",
                    f"is {self.world_size} but each pod gets {self.npu.count} NPU(s): make them equal, or drop this",
                )
            )
        elif self.npu.type not in IMAGE_CHIPS and self.image is None and any(v.image is None for v in self.versions):
            problems.append(
                (
                    "npu.type",
                    f"the pinned MindIE image is the Atlas 800I A2 build (Ascend 910B: {', '.join(IMAGE_CHIPS)}); for "
                    f"{self.npu.type} set image to MindIE's build for that chip",
                )
            )
        if self.npu is not None and self.npu.chip.super_pod and self.nodes > 1:
            problems.append(
                ("nodes", f"{self.npu.type} groups need an A3 super-pod rank table, which the launcher does not write")
            )
        if self.max_input_token_len > self.max_seq_len:
            problems.append(
                ("maxInputTokenLen", f"{self.max_input_token_len} is longer than maxSeqLen ({self.max_seq_len})")
            )
        if self.nodes > 1:
            problems += self.group_problems()
        if problems:
            raise config_problems(problems)
        return self

    @property
    def group_size(self) -> int:
        return self.nodes

    @property
    def npu_count(self) -> int:
        return self.npu.count if self.npu is not None else 1

    def config(self) -> dict[str, Any]:
        """MindIE's config.json for one pod of this model."""
        config = copy.deepcopy(DEFAULTS)
        server, backend = config["ServerConfig"], config["BackendConfig"]
        server |= {
            "ipAddress": ALL_ADDRESSES,
            "managementIpAddress": ALL_ADDRESSES,
            "allowAllZeroIpListening": True,
            "httpsEnabled": False,
            "interCommTLSEnabled": False,
        }
        backend |= {
            "npuDeviceIds": [list(range(self.npu_count))],
            "multiNodesInferEnabled": self.nodes > 1,
            "interNodeTLSEnabled": False,
        }
        deploy = backend["ModelDeployConfig"]
        deploy |= {"maxSeqLen": self.max_seq_len, "maxInputTokenLen": self.max_input_token_len}
        deploy["ModelConfig"][0] |= {"modelName": self.name, "modelWeightPath": MODEL_DIR, "worldSize": self.npu_count}
        backend["ScheduleConfig"]["maxBatchSize"] = self.max_batch_size
        return config

    def plan(self, version: ModelVersion, gpu_nodes: GpuNodes) -> ServerPlan:
        sources = "".join(f"[ -f {script} ] && . {script}; " for script in SET_ENV_SCRIPTS)
        group = self.nodes > 1
        server = ServerContainer(
            image=pins.MINDIE_IMAGE,
            resources=DEFAULT_RESOURCES,
            model_dir=MODEL_DIR,
            # Upstream's example gives startup 100 x 5 s; weights of a model worth several nodes take longer.
            probes=Probes.ready_after_start(
                http_probe(READY_PATH, MANAGEMENT_PORT, period=10, failures=3),
                http_probe(LIVE_PATH, MANAGEMENT_PORT, period=10, failures=3),
                startup_failures=360,
                startup_period=5,
            ),
            command=["/bin/bash", "-c", f'{sources}exec python3 {CONFIG_DIR}/{LAUNCHER_FILE} "$@"', "mindie"],
            env={
                "HOME": SCRATCH_PATH,
                "MINDIE_LOG_TO_STDOUT": "1",
                # /metrics answers only with the service monitor on (prometheus_metrics.cpp).
                "MIES_SERVICE_MONITOR_MODE": "1",
                # The weights are mounted read-only, written by the storage initializer or on a volume
                # of the team's: MindIE's owner and mode check on them is off (its config and rank
                # table still pass it: the launcher copies them, 640, owned by the server's user).
                "MINDIE_CHECK_INPUTFILES_PERMISSION": "0",
                "MINDIE_CONFIG_SOURCE": f"{CONFIG_DIR}/{CONFIG_FILE}",
                "MINDIE_RANK_TABLE_PORT": str(RANK_TABLE_PORT),
            },
            field_env={"MIES_CONTAINER_IP": "status.podIP", "HOST_IP": "status.hostIP"} if group else {},
            config_mounts=[config_mount(CONFIG_DIR)],
            mounts=[
                {"name": SHM_VOLUME, "mountPath": "/dev/shm"},
                *({"name": name, "mountPath": path, "readOnly": True} for name, path in NODE_TOOLS if group),
            ],
        )
        volumes: tuple[dict[str, Any], ...] = (
            {"name": SHM_VOLUME, "emptyDir": {"medium": "Memory", "sizeLimit": "2Gi"}},
        )
        if group:
            volumes += tuple({"name": name, "hostPath": {"path": path, "type": "File"}} for name, path in NODE_TOOLS)
        plan = ServerPlan(
            container=model_server_container(self, version, server),
            config_files={CONFIG_FILE: json_file(self.config()), LAUNCHER_FILE: LAUNCHER.read_text(encoding="utf-8")},
            http_port=PORT,
            metrics=MetricsEndpoint(METRICS_PORT, METRICS_PATH),
            run_as_user=RUN_AS_USER,
            volumes=volumes,
        )
        if not group:
            return plan
        # Every pod runs the same launcher and daemon; the launcher tells leader from worker by
        # LWS_WORKER_INDEX, and MindIE makes the holder of rank 0 (the leader) its master.
        return dataclasses.replace(plan, workers=WorkerPlan(self.nodes, (*self.args, *version.args)))

    def example_request(self) -> ExampleRequest:
        return ExampleRequest(
            path=self.inference_path, body={"model": self.name, "prompt": "The capital of France is", "max_tokens": 16}
        )
