"""The node-local model cache's agent as the program renders it (serving/cache_agent.py): its objects in
a stack with the cache on (the generated model-cache stack), where it runs, how, and its way out and in.
The whole-cluster checks (strict schemas, policies, checkov, Pod Security) cover the same stack through
GENERATED_STACKS (tests/stacks/conftest.py)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from inference_platform.cli.main import main
from inference_platform.cli.stack_file import read_stack_file
from inference_platform.platform.model_cache_agent import NAMESPACE
from inference_platform.serving import cache_agent, cache_agent_script
from inference_platform.serving.cached_files import cached_versions
from inference_platform.stack.config import StackConfig, parse_stack_config, project_values
from tests.conftest import model_cache_config, write_stack_file
from tests.policies.test_stacks_meet_policies import RESOURCE_CHECKS, rules

Objects = dict[tuple[str, str, str], dict[str, Any]]


def _render(config: dict[str, Any], root: Path) -> tuple[Objects, StackConfig]:
    path = write_stack_file(root / "Pulumi.model-cache.yaml", config)
    assert main(["render", "--stack", "model-cache", "--config", str(path), "--out", str(root / "out")]) == 0
    documents = yaml.safe_load_all((root / "out" / "manifests.yaml").read_text())
    objects = {
        (d["kind"], d["metadata"].get("namespace", ""), d["metadata"]["name"]): d for d in documents if d is not None
    }
    return objects, parse_stack_config(project_values(read_stack_file(path).config))


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> tuple[Objects, StackConfig]:
    return _render(model_cache_config(), tmp_path_factory.mktemp("model-cache"))


def _agent(objects: Objects, kind: str) -> dict[str, Any]:
    return objects[("DaemonSet", NAMESPACE, f"model-cache-{kind}")]


def test_the_cache_nodes_list_every_cached_version_with_its_downloaded_adapters(
    stack: tuple[Objects, StackConfig],
) -> None:
    objects, config = stack
    listed = json.loads(objects[("ConfigMap", NAMESPACE, "model-cache-gpu")]["data"]["versions.json"])

    assert [(e["model"], e["version"]) for e in listed] == [
        (cached.model, cached.version) for cached in cached_versions(config.models) if cached.kind == "gpu"
    ]
    # The stack's order: mnist's two versions, resnet, llama and qwen's first version (its second downloads).
    assert [(e["model"], e["version"]) for e in listed] == [
        ("mnist", "v1"),
        ("mnist", "v2"),
        ("resnet", "v1"),
        ("llama", "v1"),
        ("qwen", "v1"),
    ]
    assert {e["namespace"] for e in listed} == {config.namespace}
    llama = next(e for e in listed if e["model"] == "llama")
    model = next(m for m in config.models if m.name == "llama")
    assert llama["uri"] == model.versions[0].model_uri
    assert llama["adapters"] == [{"name": a.name, "uri": a.uri} for a in model.versions[0].adapters]
    # What the agent reads is what it fetches: its own loader takes the file.
    assert [v.key for v in cache_agent_script.load_versions_text(json.dumps(listed))] == [
        (config.namespace, e["model"], e["version"]) for e in listed
    ]


def test_the_agent_runs_on_exactly_the_gpu_nodes_and_on_no_npu_node(stack: tuple[Objects, StackConfig]) -> None:
    objects, config = stack
    pod = _agent(objects, "gpu")["spec"]["template"]["spec"]

    assert pod["nodeSelector"] == config.platform.gpu_nodes.node_selector
    assert pod.get("tolerations", []) == [t.to_kubernetes() for t in config.platform.gpu_nodes.tolerations]
    assert ("DaemonSet", NAMESPACE, "model-cache-npu") not in objects  # nodes: gpu


def test_the_agent_is_non_root_with_a_read_only_root_filesystem_and_no_token(
    stack: tuple[Objects, StackConfig],
) -> None:
    objects, config = stack
    pod = _agent(objects, "gpu")["spec"]["template"]["spec"]
    (agent,) = pod["containers"]
    (chown,) = pod["initContainers"]
    user = pod["securityContext"]["runAsUser"]

    assert pod["securityContext"]["runAsNonRoot"] is True
    assert user != 0
    assert agent["securityContext"] == {
        "allowPrivilegeEscalation": False,
        "readOnlyRootFilesystem": True,
        "capabilities": {"drop": ["ALL"]},
    }
    # Root only to hand the cache path to the agent's user, with no capability but CHOWN.
    assert chown["command"] == ["chown", f"{user}:{user}", config.platform.model_cache.path]
    assert chown["securityContext"]["capabilities"] == {"drop": ["ALL"], "add": ["CHOWN"]}
    assert chown["securityContext"]["readOnlyRootFilesystem"] is True
    assert pod["automountServiceAccountToken"] is False
    account = objects[("ServiceAccount", NAMESPACE, cache_agent.AGENT)]
    assert account["automountServiceAccountToken"] is False
    namespace = objects[("Namespace", "", NAMESPACE)]
    assert namespace["metadata"]["labels"]["pod-security.kubernetes.io/enforce"] == "privileged"  # hostPath


def test_the_agent_runs_its_shipped_code_in_the_storage_initializer_image_with_the_models_credentials(
    stack: tuple[Objects, StackConfig],
) -> None:
    objects, config = stack
    pod = _agent(objects, "gpu")["spec"]["template"]["spec"]
    (agent,) = pod["containers"]
    shipped = objects[("ConfigMap", NAMESPACE, cache_agent.SCRIPT_CONFIG_MAP)]["data"]["agent.py"]

    assert shipped == Path(cache_agent_script.__file__).read_text()
    assert (
        agent["image"]
        == objects[("Deployment", config.namespace, "llama-v1")]["spec"]["template"]["spec"]["initContainers"][0][
            "image"
        ]
    )
    mounts = {m["name"]: m["mountPath"] for m in agent["volumeMounts"]}
    assert agent["command"] == ["python", f"{mounts['script']}/agent.py"]
    assert agent["args"][:4] == ["--versions", f"{mounts['versions']}/versions.json", "--path", mounts["cache"]]
    volumes = {v["name"]: v for v in pod["volumes"]}
    assert volumes["cache"]["hostPath"]["path"] == config.platform.model_cache.path
    # The models' storage Secret, copied beside the agent, its keys the same.
    models_secret = objects[("Secret", config.namespace, "model-storage-credentials")]
    copy = objects[("Secret", NAMESPACE, volumes["model-storage-credentials"]["secret"]["secretName"])]
    assert set(copy["stringData"]) == set(models_secret["stringData"])


def _uncached(config: dict[str, Any]) -> dict[str, Any]:
    """The same stack with no version cached: each downloads its files, as before the cache."""
    for model in config["inference-platform:models"]:
        model.pop("cache", None)
        for version in model["versions"]:
            version.pop("cache", None)
    return config


def test_the_agent_goes_out_only_where_the_cached_downloads_go_and_lets_in_only_prometheus(
    stack: tuple[Objects, StackConfig], tmp_path: Path
) -> None:
    """The agent's way out is the union of the ways out the cached versions' pods had when they
    downloaded their own files (the same stack rendered with nothing cached)."""
    objects, config = stack
    policy = objects[("NetworkPolicy", NAMESPACE, "model-cache-gpu")]["spec"]
    cached = {(v.model, v.version) for v in cached_versions(config.models)}
    before, _ = _render(_uncached(model_cache_config()), tmp_path)
    downloads = [
        before[("NetworkPolicy", config.namespace, f"{model}-{version}-download")]["spec"]["egress"][0]
        for model, version in sorted(cached)
    ]
    assert not [name for kind, _, name in objects if kind == "NetworkPolicy" and name.endswith("-download")
                and tuple(name.removesuffix("-download").rsplit("-", 1)) in cached]  # fmt: skip

    assert policy["podSelector"]["matchLabels"] == cache_agent.pod_labels("gpu")
    (egress,) = policy["egress"]
    assert {c["ipBlock"]["cidr"] for c in egress["to"]} == {p["ipBlock"]["cidr"] for d in downloads for p in d["to"]}
    assert sorted(p["port"] for p in egress["ports"]) == sorted({p["port"] for d in downloads for p in d["ports"]})
    (ingress,) = policy["ingress"]
    assert ingress["ports"] == [{"protocol": "TCP", "port": cache_agent.METRICS_PORT}]
    (scraper,) = ingress["from"]
    assert scraper["namespaceSelector"]["matchLabels"] == {
        "kubernetes.io/metadata.name": config.platform.prometheus.namespace
    }
    annotations = _agent(objects, "gpu")["spec"]["template"]["metadata"]["annotations"]
    assert annotations["prometheus.io/port"] == str(cache_agent.METRICS_PORT)


def test_npu_cache_nodes_get_their_own_agent_on_exactly_the_npu_nodes(tmp_path: Path) -> None:
    config = model_cache_config()
    platform = config["inference-platform:platform"]
    platform["modelCache"]["nodes"] = "both"
    platform.setdefault("npuNodes", {})["pools"] = [{"type": "Ascend910B3", "count": 8, "npusPerNode": 8}]
    objects, parsed = _render(config, tmp_path)

    npu = _agent(objects, "npu")["spec"]["template"]["spec"]
    assert npu["nodeSelector"] == parsed.platform.npu_nodes.node_selector
    assert npu.get("tolerations", []) == [t.to_kubernetes() for t in parsed.platform.npu_nodes.tolerations]
    # No NPU model is cached (theirs are on claims): the NPU nodes' list is empty, and so is their way out.
    assert json.loads(objects[("ConfigMap", NAMESPACE, "model-cache-npu")]["data"]["versions.json"]) == []
    assert "egress" not in objects[("NetworkPolicy", NAMESPACE, "model-cache-npu")]["spec"]


def test_the_policy_pack_looks_at_the_agent(stack: tuple[Objects, StackConfig]) -> None:
    """tests/policies/test_stacks_meet_policies.py runs the pack's resource checks over this stack
    (its GENERATED stacks); here, that the agent's DaemonSet is a workload the pack reads a pod of,
    and that its pod passes every check."""
    objects, _ = stack
    daemon = _agent(objects, "gpu")
    assert rules.pod_spec("kubernetes:apps/v1:DaemonSet", daemon) is not None
    assert [m for check in RESOURCE_CHECKS for m in check("kubernetes:apps/v1:DaemonSet", daemon)] == []
