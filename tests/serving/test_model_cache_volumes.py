"""A cached version's volumes and pods (docs/model-cache.md): its local PersistentVolume and claim,
its pods reading the node's copy through the claim, and the wait-for-marker step run for real (the
container's own command line, against a temporary directory standing for a cache node's disk)."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

from inference_platform import pins
from inference_platform.config.errors import problems_from_validation
from inference_platform.serving import cache_wait_script
from inference_platform.serving.cached_files import ADAPTERS_DIR, MARKER, MODEL_DIR
from inference_platform.serving.inference_service.args import InferenceServiceArgs
from inference_platform.serving.model_cache_volumes import WAIT_CONTAINER, WAIT_MOUNT, WAIT_SECONDS
from inference_platform.serving.model_storage import INITIALIZER_CONTAINER
from inference_platform.serving.runtimes.base import MODEL_VOLUME
from inference_platform.stack.config import UNIONS
from tests.owner_schemas import validate
from tests.serving.test_scale_to_zero import keda, render

URI = "hf://meta-llama/Llama-3.1-8B-Instruct"
ADAPTERS = {"sql": "s3://adapters/llama/sql", "support": "hf://acme/llama-support-lora"}
CACHE = {"path": "/var/lib/inference-models"}
GPU_NODES = {"nodeSelector": {"gpu": "on", "pool": "a100"}}
# What this change builds or changes (the other objects' schemas are the other tests').
VALIDATED = {"PersistentVolume", "PersistentVolumeClaim", "Deployment", "LeaderWorkerSet"}
STORAGE = {"secretName": "creds", "s3Keys": True, "hfToken": True}


def llama(**settings: Any) -> dict[str, Any]:
    """A vLLM model that sleeps at zero, with two downloaded adapters and one on a claim."""
    adapters = [{"name": name, "uri": uri} for name, uri in ADAPTERS.items()]
    adapters.append({"name": "legal", "uri": "pvc://adapters/llama/legal"})
    return {
        "name": "llama",
        "runtime": "vllm",
        "gpu": "exclusive",
        "downloadSize": "16Gi",
        "cache": True,
        "autoscaling": {"minReplicas": 0, "maxReplicas": 2, "requestsPerSecond": 1},
        "versions": [{"name": "v1", "modelUri": URI, "weight": 100, "adapters": adapters}],
    } | settings


def objects(model: dict[str, Any], **args: Any) -> dict[tuple[str, str], dict[str, Any]]:
    settings: dict[str, Any] = {"keda": keda(), "storage": STORAGE, "gpuNodes": GPU_NODES, "modelCache": CACHE} | args
    rendered = render(model, **settings)
    for (kind, _), manifest in rendered.items():
        if kind in VALIDATED:
            validate(manifest)
    return rendered


def pod(rendered: dict[tuple[str, str], dict[str, Any]], name: str = "llama-v1") -> dict[str, Any]:
    spec: dict[str, Any] = rendered["Deployment", name]["spec"]["template"]["spec"]
    return spec


# --- The wait-for-marker step, run for real -------------------------------------------------------


def write_marker(directory: Path, uri: str = URI, adapters: dict[str, str] = ADAPTERS) -> None:
    """The agent's completion marker (cached_files.MARKER's format)."""
    marker = {"uri": uri, "adapters": adapters, "digest": "sha256:0", "bytes": 1, "completedAt": "2026-01-01T00:00:00Z"}
    (directory / MARKER).write_text(json.dumps(marker))


def run_wait(directory: Path, seconds: float) -> subprocess.CompletedProcess[str]:
    """The pod's wait container's own command and arguments, its mount and bound swapped for the test's."""
    container = pod(objects(llama()))["initContainers"][0]
    arguments = [str(directory), str(seconds), *container["args"][2:]]
    command = [sys.executable, *container["command"][1:], *arguments]
    return subprocess.run(command, capture_output=True, text=True, timeout=60, check=False)


def test_the_wait_proceeds_when_the_marker_names_the_versions_uri_and_adapters(tmp_path: Path) -> None:
    write_marker(tmp_path)
    done = run_wait(tmp_path, 0.2)
    assert done.returncode == 0, done.stderr
    assert f"{URI} is complete in {tmp_path}" in done.stdout


def test_the_wait_proceeds_once_the_agent_writes_the_marker(tmp_path: Path) -> None:
    writer = threading.Timer(0.5, write_marker, [tmp_path])
    writer.start()
    started = time.monotonic()
    done = run_wait(tmp_path, 20)
    writer.join()
    assert done.returncode == 0, done.stderr
    assert time.monotonic() - started < 15  # it polls every 5 s: it saw the marker, it did not time out


def test_the_wait_fails_clearly_when_no_marker_comes_within_the_bound(tmp_path: Path) -> None:
    (tmp_path / MODEL_DIR).mkdir()  # half a copy: files, no marker
    started = time.monotonic()
    done = run_wait(tmp_path, 0.5)
    assert done.returncode == cache_wait_script.EXIT_MISSING
    assert time.monotonic() - started < 10
    assert done.stderr.strip() == (
        f"model cache: after 0.5s, no completion marker {tmp_path / MARKER}: "
        f"the cache agent has not finished fetching {URI} on this node"
    )


def test_the_wait_fails_clearly_when_the_marker_names_another_uri(tmp_path: Path) -> None:
    write_marker(tmp_path, uri="hf://meta-llama/Llama-3.1-70B-Instruct")
    done = run_wait(tmp_path, 0.2)
    assert done.returncode == cache_wait_script.EXIT_MISSING
    assert done.stderr.strip() == (
        f"model cache: after 0.2s, the completion marker {tmp_path / MARKER} names "
        f"'hf://meta-llama/Llama-3.1-70B-Instruct', not this version's {URI}"
    )


def test_the_wait_fails_clearly_when_the_marker_lacks_an_adapter(tmp_path: Path) -> None:
    write_marker(tmp_path, adapters={"sql": ADAPTERS["sql"]})
    done = run_wait(tmp_path, 0.2)
    assert done.returncode == cache_wait_script.EXIT_MISSING
    assert f"lacks adapters: support ({ADAPTERS['support']}; the marker has None)" in done.stderr


def test_the_wait_script_names_the_agents_marker() -> None:
    # It runs alone in the pod (python -c), so it carries its own copy of the name.
    assert cache_wait_script.MARKER == MARKER


# --- The volume, the claim and the pods -----------------------------------------------------------


def test_a_cached_version_gets_a_local_volume_on_exactly_its_kinds_nodes_and_a_claim_bound_to_it() -> None:
    rendered = objects(llama())
    volume = rendered["PersistentVolume", "model-cache-service-llama-v1"]
    claim = rendered["PersistentVolumeClaim", "llama-v1-cache"]
    assert "namespace" not in volume["metadata"]
    assert volume["spec"]["local"] == {"path": "/var/lib/inference-models/service/llama/v1"}
    terms = volume["spec"]["nodeAffinity"]["required"]["nodeSelectorTerms"]
    assert terms == [
        {
            "matchExpressions": [
                {"key": "gpu", "operator": "In", "values": ["on"]},
                {"key": "pool", "operator": "In", "values": ["a100"]},
            ]
        }
    ]
    # Its files and its downloaded adapters' (2Gi each by default); the claim's adapter is not on it.
    assert volume["spec"]["capacity"] == {"storage": "20Gi"}
    assert claim["spec"]["resources"]["requests"] == {"storage": "20Gi"}
    assert volume["spec"]["accessModes"] == claim["spec"]["accessModes"] == ["ReadOnlyMany"]
    assert volume["spec"]["storageClassName"] == claim["spec"]["storageClassName"] == ""
    assert volume["spec"]["claimRef"] | {"apiVersion": "v1", "kind": "PersistentVolumeClaim"} == {
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "namespace": "service",
        "name": "llama-v1-cache",
    }
    assert claim["metadata"]["namespace"] == "service"
    assert claim["spec"]["volumeName"] == "model-cache-service-llama-v1"


def test_an_npu_models_volume_selects_the_npu_nodes() -> None:
    model = {
        "name": "qwen-npu",
        "runtime": "mindie",
        "npu": {"type": "Ascend910B3", "count": 1},
        "cache": True,
        "versions": [{"name": "v1", "modelUri": "hf://Qwen/Qwen3-8B", "weight": 100}],
    }
    rendered = objects(model, modelCache=CACHE, npuNodes={"nodeSelector": {"npu": "ascend"}}, keda=None)
    volume = rendered["PersistentVolume", "model-cache-service-qwen-npu-v1"]
    assert volume["spec"]["nodeAffinity"]["required"]["nodeSelectorTerms"] == [
        {"matchExpressions": [{"key": "npu", "operator": "In", "values": ["ascend"]}]}
    ]


def test_a_cached_versions_pod_reads_the_nodes_copy_through_the_claim_after_waiting_for_it() -> None:
    spec = pod(objects(llama()))
    volumes = {volume["name"]: volume for volume in spec["volumes"]}
    assert volumes[MODEL_VOLUME] == {
        "name": MODEL_VOLUME,
        "persistentVolumeClaim": {"claimName": "llama-v1-cache", "readOnly": True},
    }
    # The server's files: the model's where a download put them, each downloaded adapter beside it,
    # the adapter on a claim from its claim, as before; all read-only.
    mounts = {mount["mountPath"]: mount for mount in spec["containers"][-1]["volumeMounts"]}
    assert mounts["/mnt/models"] == {
        "name": MODEL_VOLUME,
        "mountPath": "/mnt/models",
        "readOnly": True,
        "subPath": MODEL_DIR,
    }
    for name in ADAPTERS:
        assert mounts[f"/mnt/adapters/{name}"] == {
            "name": MODEL_VOLUME,
            "mountPath": f"/mnt/adapters/{name}",
            "readOnly": True,
            "subPath": f"{ADAPTERS_DIR}/{name}",
        }
    legal = mounts["/mnt/adapters/legal"]
    assert volumes[legal["name"]]["persistentVolumeClaim"]["claimName"] == "adapters"
    # Nothing downloaded: no emptyDir for files, no storage initializer, no credentials, only the wait.
    assert not [v for v in spec["volumes"] if "emptyDir" in v and v["name"] not in ("scratch", "shm")]
    assert [c["name"] for c in spec["initContainers"]] == [WAIT_CONTAINER]
    wait = spec["initContainers"][0]
    assert wait["image"] == pins.STORAGE_INITIALIZER_IMAGE
    assert wait["args"] == [WAIT_MOUNT, str(WAIT_SECONDS), URI, *(f"{n}={u}" for n, u in ADAPTERS.items())]
    assert wait["volumeMounts"] == [{"name": MODEL_VOLUME, "mountPath": WAIT_MOUNT, "readOnly": True}]
    assert wait["securityContext"]["readOnlyRootFilesystem"] is True
    assert wait["securityContext"]["runAsUser"] != 0
    assert spec["securityContext"]["runAsNonRoot"] is True
    assert not [v for v in spec["volumes"] if "hostPath" in v]


def test_a_cached_version_needs_no_way_out_to_storage() -> None:
    assert ("NetworkPolicy", "llama-v1-download") in objects(llama(cache=False), modelCache=None)
    assert ("NetworkPolicy", "llama-v1-download") not in objects(llama())


def test_a_version_not_cached_is_unchanged_beside_a_cached_one() -> None:
    model = llama()
    v2 = model["versions"][0] | {"name": "v2", "modelUri": "hf://meta-llama/Llama-3.2-3B", "cache": False}
    v2 = {key: value for key, value in v2.items() if key != "weight"} | {"mirrorPercent": 10}
    model["versions"] = [*model["versions"], v2]
    cached, plain = objects(model), objects(model | {"cache": False}, modelCache=None)
    assert cached["Deployment", "llama-v2"] == plain["Deployment", "llama-v2"]
    assert ("PersistentVolumeClaim", "llama-v2-cache") not in cached
    assert pod(cached, "llama-v2")["initContainers"][0]["name"] == INITIALIZER_CONTAINER


def test_a_version_that_wakes_from_zero_starts_an_ordinary_pod_on_the_nodes_copy() -> None:
    # Scale to zero is untouched: the same ScaledObject, interceptor route and way in, with or without
    # the cache; what a wake starts is the Deployment's pod, which reads the cache node's copy.
    cached, downloaded = objects(llama()), objects(llama(cache=False), modelCache=None)
    changed = {"Deployment", "PersistentVolume", "PersistentVolumeClaim"}
    download = ("NetworkPolicy", "llama-v1-download")
    assert {k: v for k, v in cached.items() if k[0] not in changed} == {
        k: v for k, v in downloaded.items() if k[0] not in changed and k != download
    }
    assert ("ScaledObject", "llama-v1") in cached
    assert any(kind == "InterceptorRoute" for kind, _ in cached)
    deployment = cached["Deployment", "llama-v1"]
    assert "replicas" not in deployment["spec"]  # KEDA sets them, from zero
    assert [c["name"] for c in deployment["spec"]["template"]["spec"]["initContainers"]] == [WAIT_CONTAINER]


def test_a_multi_node_groups_leader_and_workers_read_the_cache() -> None:
    model = {
        "name": "deepseek",
        "runtime": "vllm",
        "gpu": {"mode": "exclusive", "count": 8},
        "nodes": 2,
        "tensorParallelSize": 8,
        "cache": True,
        "versions": [{"name": "v1", "modelUri": "hf://deepseek-ai/DeepSeek-V3", "weight": 100}],
        "autoscaling": {"minReplicas": 1, "maxReplicas": 3, "queueDepth": 16},
    }
    group = objects(model)["LeaderWorkerSet", "deepseek-v1-group"]["spec"]["leaderWorkerTemplate"]
    for template in (group["leaderTemplate"], group["workerTemplate"]):
        spec = template["spec"]
        assert [c["name"] for c in spec["initContainers"]] == [WAIT_CONTAINER]
        assert {
            "name": MODEL_VOLUME,
            "persistentVolumeClaim": {"claimName": "deepseek-v1-cache", "readOnly": True},
        } in spec["volumes"]


def test_a_cached_model_without_the_cache_is_refused_at_its_setting() -> None:
    with pytest.raises(ValidationError) as raised:
        InferenceServiceArgs.model_validate(
            {
                "model": llama(autoscaling={"minReplicas": 1}),
                "namespace": "service",
                "domain": "models.example.com",
                "storage": STORAGE,
            }
        )
    assert [(p.path, p.message) for p in problems_from_validation(raised.value, unions=UNIONS)] == [
        ("model.cache", "a cached version reads its files from the cache: set modelCache")
    ]
