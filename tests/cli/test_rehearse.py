"""The rehearsal's decisions below its command, without a cluster: a stack file's secrets as it
hands them to the CLI, the stacks it brings up, the transforms it adds to the program's objects."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pulumi
import yaml

from inference_platform.cli.rehearsal.command import config_path, pvc_claims, read_stacks, settings
from inference_platform.cli.rehearsal.engine import SKIP_AWAIT, AwaitSkipper, is_crd_gap, local_sources
from inference_platform.platform.hami import GPU_MEMORY_RESOURCE
from tests.conftest import ROOT, write_sharded_repository

PROD = ROOT / "Pulumi.prod.yaml"


def test_without_the_passphrase_secure_values_become_placeholder_secrets() -> None:
    copy = settings(PROD.read_text(), passphrase_given=False)
    document = yaml.safe_load(copy.text)
    assert "encryptionsalt" not in document
    assert "secure" not in copy.text
    assert copy.placeholders == (
        'inference-platform:storage["s3"]["accessKeyId"]',
        'inference-platform:storage["s3"]["secretAccessKey"]',
        'inference-platform:storage["huggingface"]["token"]',
    )
    # Everything else as the file has it.
    original = yaml.safe_load(PROD.read_text())["config"]
    assert document["config"]["inference-platform:models"] == original["inference-platform:models"]


def test_with_the_passphrase_the_file_goes_as_it_is() -> None:
    text = PROD.read_text()
    assert settings(text, passphrase_given=True).text == text


def test_a_config_path_as_pulumi_config_set_path_reads_it() -> None:
    assert config_path(("ns:models", 0, "token")) == 'ns:models[0]["token"]'


def test_a_shard_is_rehearsed_after_its_platform_stack(tmp_path: Path) -> None:
    write_sharded_repository(tmp_path)
    stacks = read_stacks("prod-a", tmp_path / "Pulumi.prod-a.yaml")
    assert [name for name, _ in stacks.order] == ["prod", "prod-a"]
    assert stacks.order[0][1] == tmp_path / "Pulumi.prod.yaml"
    single = read_stacks("dev", ROOT / "Pulumi.dev.yaml")
    assert [name for name, _ in single.order] == ["dev"]


def test_pvc_claims_are_read_from_the_stacks_storage_uris() -> None:
    assert pvc_claims({"models": [{"versions": [{"modelUri": "pvc://models/iris/v1"}, {"modelUri": "s3://b/k"}]}]}) == {
        "models"
    }


def transform(callback: Any, type_: str, props: dict[str, Any], custom: bool = True) -> dict[str, Any] | None:
    result = callback(pulumi.ResourceTransformArgs(custom, type_, "x", props, pulumi.ResourceOptions()))
    return None if result is None else dict(result.props)


def test_charts_and_manifest_files_come_from_their_pinned_copies(tmp_path: Path) -> None:
    sources = local_sources(tmp_path / "charts", tmp_path / "crds")
    chart = transform(
        sources,
        "kubernetes:helm.sh/v4:Chart",
        {"chart": "oci://registry.k8s.io/lws/charts/lws", "version": "v0.10.0", "repositoryOpts": None},
        custom=False,
    )
    assert chart is not None
    assert chart["chart"] == str(tmp_path / "charts" / "lws-v0.10.0.tgz")
    assert "repositoryOpts" not in chart
    url = "https://github.com/kubernetes-sigs/gateway-api/releases/download/v1.5.1/standard-install.yaml"
    manifest = transform(sources, "kubernetes:yaml/v2:ConfigFile", {"file": url}, custom=False)
    assert manifest is not None
    assert manifest["file"].startswith(str(tmp_path / "crds"))
    assert transform(sources, "kubernetes:core/v1:ConfigMap", {"metadata": {}}) is None


def deployment(limits: dict[str, str]) -> dict[str, Any]:
    return {
        "metadata": {"name": "d"},
        "spec": {"template": {"spec": {"containers": [{"resources": {"limits": limits}}]}}},
    }


def test_await_is_skipped_only_where_it_cannot_end() -> None:
    skipper = AwaitSkipper(everything=False)
    sliced = transform(skipper, "kubernetes:apps/v1:Deployment", deployment({GPU_MEMORY_RESOURCE: "4000"}))
    assert sliced is not None
    assert sliced["metadata"]["annotations"] == {SKIP_AWAIT: "true"}
    assert transform(skipper, "kubernetes:apps/v1:Deployment", deployment({"nvidia.com/gpu": "1"})) is None
    balancer = transform(skipper, "kubernetes:core/v1:Service", {"metadata": {}, "spec": {"type": "LoadBalancer"}})
    assert balancer is not None
    assert balancer["metadata"]["annotations"][SKIP_AWAIT] == "true"
    assert len(skipper.skipped) == 2
    everything = AwaitSkipper(everything=True)
    assert transform(everything, "kubernetes:core/v1:ConfigMap", {"metadata": {}}) is not None


def test_a_fresh_clusters_crd_gap_is_told_from_other_failures() -> None:
    gap = [("Chart x", 'no matches for kind "InferencePool" in version "inference.networking.k8s.io/v1"')]
    assert is_crd_gap(gap)
    assert not is_crd_gap([*gap, ("Pod p", "pods is forbidden")])
    assert not is_crd_gap([])
