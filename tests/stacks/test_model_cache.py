"""The model-cache stack rendered whole (tests/conftest.py `model_cache_config`: the KEDA stack with
the cache on for llama, a vLLM model that sleeps at zero with LoRA adapters, resnet, a Triton model,
and qwen's first version): what the cache changes in the cluster. The whole-cluster checks every
stack passes (schemas, custom objects, checkov, Pod Security labels) take it through
tests/stacks/conftest.py's GENERATED_STACKS.

The Pod Security Standards' own checks run over this stack's pods in test_pod_security.py; below,
the fields of the `restricted` profile a cached version's pods could change (their volumes' types
and their init containers' security settings), by name."""

from __future__ import annotations

import pytest

from inference_platform.platform.pod_security import LABEL_PREFIX
from inference_platform.serving.cached_files import cached_versions
from inference_platform.serving.model_cache_volumes import WAIT_CONTAINER, claim_name, volume_name
from inference_platform.serving.model_storage import INITIALIZER_CONTAINER
from inference_platform.serving.runtimes.base import MODEL_VOLUME
from tests.cluster import Pod
from tests.stacks.conftest import Rendered, shared_render

STACK = "model-cache"
# The volume types the `restricted` profile allows (the Pod Security Standards, "Volume Types").
RESTRICTED_VOLUMES = {
    "configMap",
    "csi",
    "downwardAPI",
    "emptyDir",
    "ephemeral",
    "persistentVolumeClaim",
    "projected",
    "secret",
}


@pytest.fixture(scope="module")
def cached(tmp_path_factory: pytest.TempPathFactory) -> Rendered:
    return shared_render(STACK, tmp_path_factory)


def model_pods(rendered: Rendered) -> list[Pod]:
    return [pod for pod in rendered.cluster.pods() if pod.namespace == rendered.config.namespace]


def test_the_stack_caches_a_sleeping_vllm_model_with_adapters_and_a_triton_model(cached: Rendered) -> None:
    models = {model.name: model for model in cached.config.models}
    versions = {(c.model, c.version): c for c in cached_versions(cached.config.models)}
    assert models["llama"].runtime == "vllm"
    assert models["llama"].autoscaling.scales_to_zero
    assert versions["llama", "v1"].adapters
    assert models["resnet"].runtime == "triton"
    assert ("resnet", "v1") in versions
    assert ("qwen", "v1") in versions
    assert ("qwen", "v2") not in versions


def test_each_volumes_node_affinity_selects_exactly_the_cache_nodes(cached: Rendered) -> None:
    selector = cached.config.platform.gpu_nodes.node_selector
    volumes = {volume["metadata"]["name"]: volume for volume in cached.cluster.of_kind("PersistentVolume")}
    namespace = cached.config.namespace
    expected = {volume_name(namespace, c) for c in cached_versions(cached.config.models)}
    assert set(volumes) == expected
    for volume in volumes.values():
        terms = volume["spec"]["nodeAffinity"]["required"]["nodeSelectorTerms"]
        # One term (terms are ORed), each requirement `In` one value (requirements are ANDed): the
        # nodes whose labels hold every pair of the GPU nodes' selector, which the GPU pods select.
        assert len(terms) == 1
        requirements = terms[0]["matchExpressions"]
        assert all(r["operator"] == "In" and len(r["values"]) == 1 for r in requirements)
        assert {r["key"]: r["values"][0] for r in requirements} == selector
        assert volume["spec"]["local"]["path"].startswith(f"{cached.config.platform.model_cache.path}/{namespace}/")


def test_each_claim_binds_its_volume_in_the_model_namespace(cached: Rendered) -> None:
    claims = {claim["metadata"]["name"]: claim for claim in cached.cluster.of_kind("PersistentVolumeClaim")}
    namespace = cached.config.namespace
    for version in cached_versions(cached.config.models):
        claim = claims[claim_name(version)]
        assert claim["metadata"]["namespace"] == namespace
        assert claim["spec"]["volumeName"] == volume_name(namespace, version)


def test_every_model_pod_stays_restricted_without_host_paths(cached: Rendered) -> None:
    # Model pods are built to `restricted`, which the namespace warns and audits at (and enforces,
    # unless a model mounts the node's files: serving/model_namespace.py).
    labels = cached.cluster.one("Namespace", name=cached.config.namespace)["metadata"]["labels"]
    assert labels[f"{LABEL_PREFIX}warn"] == labels[f"{LABEL_PREFIX}audit"] == "restricted"
    # Ascend models' pods mount the NPU driver from the host (as before the cache; docs/security.md).
    npu = {model.name for model in cached.config.models if model.accelerator_kind == "npu"}
    pods = [pod for pod in model_pods(cached) if pod.labels.get("app") not in npu]
    assert len(pods) > len(npu)
    for pod in pods:
        types = {key for volume in pod.spec.get("volumes", []) for key in volume if key != "name"}
        assert types <= RESTRICTED_VOLUMES, f"{pod.owner}: {types - RESTRICTED_VOLUMES}"
        for container in pod.spec.get("initContainers", []):
            security = container["securityContext"]
            assert security["allowPrivilegeEscalation"] is False, pod.owner
            assert security["capabilities"] == {"drop": ["ALL"]}, pod.owner
        assert pod.spec["securityContext"]["runAsNonRoot"] is True, pod.owner
        assert pod.spec["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}, pod.owner


def test_no_pod_of_a_cached_version_downloads_its_files(cached: Rendered) -> None:
    claims = {claim_name(version) for version in cached_versions(cached.config.models)}
    reading = {}
    for pod in model_pods(cached):
        volumes = {volume["name"]: volume for volume in pod.spec.get("volumes", [])}
        claim = volumes.get(MODEL_VOLUME, {}).get("persistentVolumeClaim", {}).get("claimName")
        if claim not in claims:
            continue
        reading[pod.owner] = claim
        init = [container["name"] for container in pod.spec.get("initContainers", [])]
        assert init == [WAIT_CONTAINER], pod.owner
        assert not [v for v in volumes.values() if "emptyDir" in v and v["name"] == MODEL_VOLUME]
        assert INITIALIZER_CONTAINER not in init
    # Every cached version's pods read its claim: llama's, resnet's and qwen's first version's.
    assert set(reading.values()) == claims
