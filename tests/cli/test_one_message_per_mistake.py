"""One mistake, one line, in the stack file's words: each bad file in full, its whole report word for
word (exit 2, nothing written). `{file}` stands for the stack file's path. Every report any test makes
is also read for pydantic's own sentences (tests/conftest.py, LIBRARY_PHRASES)."""

from __future__ import annotations

from pathlib import Path

import pytest

from inference_platform.cli.main import main
from inference_platform.config.errors import INCOMPLETE
from inference_platform.serving.model_storage import S3_MAX_KEY_BYTES
from tests.cli.test_config_positions import FRAUD_VERSIONS, HEAD

LLM = """\
    - name: llm
      runtime: vllm
      gpu: exclusive
      cache: true
      versions:
        - name: v1
          modelUri: s3://models/llm
          weight: 100
"""
S3 = """\
  inference-platform:storage:
    s3:
      anonymous: true
"""
CACHE_ON_NPU = """\
  inference-platform:platform:
    gpuNodes:
      nodeSelector:
        gpu: "on"
    modelCache:
      enabled: true
      size: 1Ti
      nodes: npu
"""

CASES = [
    (
        "cache-on-undeclared-npu-nodes",
        HEAD + FRAUD_VERSIONS + LLM + LLM.replace("name: llm", "name: llm2") + S3 + CACHE_ON_NPU,
        # Not also a line for each GPU model it leaves out: they are named in it.
        [
            "{file}:45:7: platform.modelCache.nodes: npu caches on the NPU nodes, and platform.npuNodes.pools "
            "declares none: declare them, or cache on gpu, where llm, llm2 run"
        ],
    ),
    (
        "cached-with-the-cache-off",
        HEAD.replace("      runtime: mlserver\n", "      runtime: mlserver\n      cache: true\n")
        + FRAUD_VERSIONS.replace("          weight: 100\n", "          weight: 100\n          cache: true\n"),
        [
            "{file}:6:7: models[0] (iris).cache: the cache is off: set platform.modelCache.enabled and its size, "
            "or drop cache (here and at models[1] (fraud).versions[0].cache)"
        ],
    ),
    (
        "a-rollout-of-a-one-version-model",
        HEAD
        + FRAUD_VERSIONS
        + """\
      rollout:
        candidate: v9
        steps: [20]
        interval: 10m
""",
        [
            "{file}:19:7: models[1] (fraud).rollout: the model has one version: a rollout needs a candidate beside "
            "the primary"
        ],
    ),
    (
        "weight-null",
        HEAD.replace("weight: 90\n", "weight: ~\n") + FRAUD_VERSIONS,
        # Not also the weights' sum, which cannot be added up without it.
        [
            "{file}:7:11: models[0] (iris).versions[0] (v1): set weight (a live version, 0 to keep it idle) or "
            "mirrorPercent (a shadow)"
        ],
    ),
    (
        "a-non-breaking-space-in-a-key",
        HEAD + FRAUD_VERSIONS.replace("modelUri:", "model\u00a0Uri:"),
        # Not also modelUri as missing: the key is what was meant.
        [
            "{file}:17:11: models[1] (fraud).versions[0] (v9).model\\xa0Uri: unknown setting 'model\\xa0Uri': "
            "did you mean 'modelUri'?"
        ],
    ),
    (
        "a-version-repeated-through-an-alias",
        HEAD.replace("        - name: v1\n", "        - &first\n          name: v1\n").replace(
            "          weight: 10\n", "          weight: 10\n        - *first\n"
        )
        + FRAUD_VERSIONS,
        # At the alias (line 14), not at the anchor's name (line 8).
        [
            "{file}:6:7: models[0] (iris).versions: live weights add up to 190 (v1=90, v2=10, v1=90); they must "
            "add up to exactly 100",
            "{file}:14:11: models[0] (iris).versions[2] (v1).name: version 'v1' is defined twice (also "
            "versions[0].name)",
        ],
    ),
    (
        "a-bound",
        HEAD + FRAUD_VERSIONS + "      replicas: -1\n",
        ["{file}:19:7: models[1] (fraud).replicas: must be at least 0 (got -1)", INCOMPLETE],
    ),
    (
        "a-pattern-said-in-words",
        HEAD
        + FRAUD_VERSIONS
        + """\
      protection:
        jwt:
          issuer: https://auth.example.com
          jwksUri: http://auth.example.com/jwks
""",
        [
            "{file}:22:11: models[1] (fraud).protection.jwt.jwksUri: must be an https:// URL "
            "(got 'http://auth.example.com/jwks')",
        ],
    ),
    (
        "an-s3-key-past-1024-bytes",
        HEAD + FRAUD_VERSIONS.replace("pvc://models/fraud/v9", "s3://models/" + "é" * 600) + S3,
        [
            f"{{file}}:17:11: models[1] (fraud).versions[0] (v9).modelUri: its object key (after the bucket) is 1200 "
            f"bytes in UTF-8: S3 takes at most {S3_MAX_KEY_BYTES:,}"
        ],
    ),
]


@pytest.mark.parametrize(("text", "expected"), [case[1:] for case in CASES], ids=[case[0] for case in CASES])
def test_one_line_per_mistake_in_the_stack_files_words(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], text: str, expected: list[str]
) -> None:
    path = tmp_path / "Pulumi.bad.yaml"
    path.write_text(text, encoding="utf-8")
    out = tmp_path / "out"

    code = main(["render", "--stack", "bad", "--config", str(path), "--out", str(out), "--no-charts"])

    lines = capsys.readouterr().err.splitlines()
    assert code == 2
    assert not out.exists()
    count = len(expected) - (INCOMPLETE in expected)
    assert lines[0] == f"invalid stack config ({count} problem{'s' if count != 1 else ''}):"
    assert [line.removeprefix("  ") for line in lines[1:]] == [line.replace("{file}", str(path)) for line in expected]
