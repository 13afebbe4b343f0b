"""The model cache's bad input (issue 41): each a config error at the stack file's line and column,
through `infra render`, exit 2 and nothing written. Each file is the valid HEAD below with one thing
changed, so its line numbers can be counted on the page; the expected report is every line of it,
word for word (`{file}` stands for the stack file's path)."""

from __future__ import annotations

from pathlib import Path

import pytest

from inference_platform.cli.main import main
from inference_platform.config.errors import INCOMPLETE
from inference_platform.platform.model_cache import system_path

# A valid stack: one cached vLLM model of 140Gi on GPU nodes whose cache holds 200Gi.
HEAD = """\
config:
  inference-platform:domain: models.example.com
  inference-platform:platform:
    modelCache:
      enabled: true
      size: 200Gi
  inference-platform:models:
    - name: llama
      runtime: vllm
      gpu: exclusive
      downloadSize: 140Gi
      cache: true
      versions:
        - name: v1
          modelUri: hf://org/llama
          weight: 100
"""
CACHE = "    modelCache:\n      enabled: true\n      size: 200Gi\n"


def with_path(path: str) -> str:
    return HEAD.replace("      size: 200Gi\n", f"      size: 200Gi\n      path: {path}\n")


CASES = [
    (
        "cache-nodes-found-by-no-label",
        HEAD.replace("      size: 200Gi\n", "      size: 200Gi\n    gpuNodes:\n      nodeSelector: {}\n"),
        [
            "{file}:8:7: platform.gpuNodes.nodeSelector: the GPU nodes cache (platform.modelCache.nodes: gpu), and "
            "they are found by these labels: with none, no node would hold a cached version's copy"
        ],
    ),
    (
        "cache-without-the-platforms-cache",
        HEAD.replace(CACHE, "    kubernetesVersion: 1.30.4\n"),
        [
            "{file}:10:7: models[0] (llama).cache: the cache is off: set platform.modelCache.enabled and its size, "
            "or drop cache"
        ],
    ),
    (
        "a-version-caches-without-the-platforms-cache",
        HEAD.replace(CACHE, "    kubernetesVersion: 1.30.4\n")
        .replace("      cache: true\n", "")
        .replace("          weight: 100\n", "          weight: 100\n          cache: true\n"),
        [
            "{file}:14:11: models[0] (llama).versions[0] (v1).cache: the cache is off: set "
            "platform.modelCache.enabled and its size, or drop cache"
        ],
    ),
    (
        "relative-path",
        with_path("var/lib/models"),
        [
            "{file}:7:7: platform.modelCache.path: 'var/lib/models' is not absolute: write the path from / "
            "(e.g. /var/lib/inference-models)"
        ],
    ),
    (
        "root-path",
        with_path("/"),
        [
            "{file}:7:7: platform.modelCache.path: '/' is the node's whole disk: name a directory of the cache's "
            "own (e.g. /var/lib/inference-models)"
        ],
    ),
    (
        "path-with-dot-dot",
        with_path("/var/lib/../models"),
        [
            "{file}:7:7: platform.modelCache.path: '/var/lib/../models' is not in its plain form (no '.' or '..' "
            "segment, '//' or trailing '/'): write '/var/models'"
        ],
    ),
    (
        "path-with-a-trailing-slash",
        with_path("/var/lib/models/"),
        [
            "{file}:7:7: platform.modelCache.path: '/var/lib/models/' is not in its plain form (no '.' or '..' "
            "segment, '//' or trailing '/'): write '/var/lib/models'"
        ],
    ),
    (
        "path-with-a-space",
        with_path("'/var/lib/my models'"),
        [
            "{file}:7:7: platform.modelCache.path: '/var/lib/my models' is not a path of plain segments "
            "(letters, digits, '.', '_' and '-' between single '/')"
        ],
    ),
    *(
        (
            f"system-path-{path}",
            with_path(path),
            [
                f"{{file}}:7:7: platform.modelCache.path: '{path}' is {'' if path == system else 'under '}{system}, "
                "a directory of the node's own: the cache agent writes under its path, so name a directory of the "
                "cache's own (e.g. /var/lib/inference-models)"
            ],
        )
        for path, system in [
            ("/etc", "/etc"),
            ("/var/lib/kubelet", "/var/lib/kubelet"),
            ("/var/lib/kubelet/models", "/var/lib/kubelet"),
            ("/lib64/models", "/lib64"),
            ("/opt/cni/bin", "/opt/cni"),
            ("/home/ml/models", "/home"),
            ("/var/log/models", "/var/log"),
        ]
    ),
    (
        "size-not-a-quantity",
        HEAD.replace("size: 200Gi", "size: lots"),
        [
            "{file}:6:7: platform.modelCache.size: 'lots' is not a Kubernetes quantity "
            "(examples: 500m, 2, 1.5, 512Mi, 4Gi)",
            # What the cache holds cannot be weighed against a size that did not parse.
            INCOMPLETE,
        ],
    ),
    (
        "size-missing",
        HEAD.replace("      size: 200Gi\n", ""),
        ["{file}:4:5: platform.modelCache.size: set what each cache node can hold (e.g. 800Gi)"],
    ),
    (
        "versions-do-not-fit",
        HEAD.replace("size: 200Gi", "size: 150Gi").replace(
            "          weight: 100\n",
            "          weight: 100\n"
            "          adapters:\n"
            "            - name: sql\n"
            "              uri: hf://org/sql\n"
            "              downloadSize: 4Gi\n"
            "        - name: v2\n"
            "          modelUri: hf://org/llama-2\n"
            "          weight: 0\n",
        ),
        [
            "{file}:6:7: platform.modelCache.size: each GPU cache node would hold 284Gi (llama/v1 140Gi, "
            "llama/v1 adapter sql 4Gi, llama/v2 140Gi), more than its 150Gi"
        ],
    ),
    (
        "npu-cache-nodes-not-declared",
        HEAD.replace("      size: 200Gi\n", "      size: 200Gi\n      nodes: npu\n"),
        [
            # One mistake, the cache's nodes: the GPU model it leaves out is named there, not a line of its own.
            "{file}:7:7: platform.modelCache.nodes: npu caches on the NPU nodes, and platform.npuNodes.pools "
            "declares none: declare them, or cache on gpu, where llama runs",
        ],
    ),
    (
        "both-without-npu-nodes",
        HEAD.replace("      size: 200Gi\n", "      size: 200Gi\n      nodes: both\n"),
        [
            "{file}:7:7: platform.modelCache.nodes: both caches on the NPU nodes, and platform.npuNodes.pools "
            "declares none: declare them, or cache on gpu",
        ],
    ),
    (
        "files-on-a-claim",
        HEAD.replace("hf://org/llama", "pvc://models/llama"),
        [
            "{file}:12:7: models[0] (llama).cache: v1's files are on a claim (pvc://models/llama), already in the "
            "cluster: only downloaded files (s3, gs, http(s), hf) are cached"
        ],
    ),
    (
        "model-on-no-cache-node",
        HEAD.replace("      runtime: vllm\n      gpu: exclusive\n", "      runtime: mlserver\n"),
        [
            "{file}:11:7: models[0] (llama).cache: the model runs on no GPU or NPU, and platform.modelCache.nodes "
            "is gpu: its pods could not read the cache nodes' copy"
        ],
    ),
]


@pytest.mark.parametrize(("text", "expected"), [case[1:] for case in CASES], ids=[case[0] for case in CASES])
def test_each_cache_mistake_points_at_its_line_and_nothing_is_written(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], text: str, expected: list[str]
) -> None:
    path = tmp_path / "Pulumi.bad.yaml"
    path.write_text(text, encoding="utf-8")
    out = tmp_path / "out"

    code = main(["render", "--stack", "bad", "--config", str(path), "--out", str(out), "--no-charts"])

    stderr = capsys.readouterr().err
    assert code == 2, stderr
    lines = stderr.splitlines()
    count = len(lines) - 1 - (lines[-1] == f"  {INCOMPLETE}")
    assert lines[0] == f"invalid stack config ({count} problem{'s' if count != 1 else ''}):"
    assert [line.removeprefix("  ") for line in lines[1:]] == [line.replace("{file}", str(path)) for line in expected]
    assert not out.exists()


def test_the_valid_head_renders(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Each case above fails for its one change alone."""
    path = tmp_path / "Pulumi.good.yaml"
    path.write_text(HEAD, encoding="utf-8")
    assert (
        main(["render", "--stack", "good", "--config", str(path), "--out", str(tmp_path / "out"), "--no-charts"]) == 0
    )
    assert "Model cache: each GPU cache node holds 140Gi of 200Gi (70%)" in capsys.readouterr().out


@pytest.mark.parametrize("path", ["/var/lib/inference-models", "/data/models", "/optx", "/var/runner", "/srv/cache"])
def test_a_directory_beside_the_system_ones_is_the_caches_own(path: str) -> None:
    assert system_path(path) is None
