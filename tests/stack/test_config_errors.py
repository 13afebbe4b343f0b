"""Invalid stack config: exit 2, every problem named by its path, nothing rendered."""

from __future__ import annotations

import re
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pulumi
import pytest

from inference_platform.cli.main import main
from inference_platform.cli.render import run_program
from inference_platform.cli.stack_file import read_stack_file
from inference_platform.config.errors import INCOMPLETE
from tests.conftest import ROOT, base_config, write_stack_file

Config = dict[str, Any]
MODELS = "inference-platform:models"


def models(config: Config) -> list[dict[str, Any]]:
    result: list[dict[str, Any]] = config[MODELS]
    return result


def iris(config: Config) -> dict[str, Any]:
    return models(config)[0]


def version(config: Config, index: int) -> dict[str, Any]:
    result: dict[str, Any] = iris(config)["versions"][index]
    return result


def unplaced(report: str, stack_file: Path) -> list[str]:
    """A render's problem lines without where they are in the file: each must start with the
    file's `path:line:column:`; list items' names beside their indexes are dropped
    (tests/cli/test_config_positions.py checks both exactly)."""
    lines = []
    for line in report.splitlines()[1:]:
        if line.strip() == INCOMPLETE:
            continue
        position, _, rest = line.strip().partition(": ")
        assert re.fullmatch(rf"{re.escape(str(stack_file))}:\d+:\d+", position), line
        lines.append(re.sub(r"\[(\d+)\] \([^)]*\)", r"[\1]", rest))
    return lines


def set_key(key: str, value: Any) -> Callable[[Config], None]:
    return lambda config: config.__setitem__(key, value)


def delete_key(key: str) -> Callable[[Config], None]:
    return lambda config: config.__delitem__(key)


# (id, mutation of the valid base config, expected path, words the message must contain)
INVALID: list[tuple[str, Callable[[Config], Any], str, str]] = [
    ("uppercase-model-name", lambda c: iris(c).update(name="Iris"), "models[0].name", "not a valid name"),
    (
        "model-name-starts-with-digit",
        lambda c: iris(c).update(name="1iris"),
        "models[0].name",
        "starting with a letter",
    ),
    (
        "model-name-too-long-for-derived-objects",
        lambda c: iris(c).update(name="m" * 61),
        "models[0].versions[0].name",
        "Kubernetes allows 63",
    ),
    ("duplicate-model", lambda c: models(c).append(iris(c)), "models[2].name", "defined twice"),
    (
        "unpinned-image",
        lambda c: iris(c).update(image="seldonio/mlserver"),
        "models[0].image",
        "'seldonio/mlserver' is not pinned: give it a tag other than latest, or an @sha256: digest",
    ),
    (
        "latest-version-image",
        lambda c: version(c, 1).update(image="seldonio/mlserver:latest"),
        "models[0].versions[1].image",
        "is not pinned",
    ),
    (
        "transformer-image-not-a-reference",
        lambda c: iris(c).update(transformer={"image": "s3:///nobucket"}),
        "models[0].transformer.image",
        "'s3:///nobucket' is not an image reference",
    ),
    (
        "payloads-without-a-shadow",
        lambda c: models(c)[1].update(analysis={"payloads": {"enabled": True}}),
        "models[1].analysis.payloads.enabled",
        "answers are compared between the primary and its shadows, and this model has no shadow: "
        "give a version mirrorPercent (or the rollout a shadowFirst), or drop this",
    ),
    (
        "payloads-sample-zero",
        lambda c: iris(c).update(analysis={"payloads": {"enabled": True, "sample": 0}}),
        "models[0].analysis.payloads.sample",
        "more than 0",
    ),
    (
        "payloads-agreement-over-one",
        lambda c: iris(c).update(analysis={"payloads": {"minAgreement": 99}}),
        "models[0].analysis.payloads.minAgreement",
        "at most 1",
    ),
    (
        "payloads-unknown-protocol",
        lambda c: iris(c).update(analysis={"payloads": {"protocol": "grpc"}}),
        "models[0].analysis.payloads.protocol",
        "open-inference-v2",
    ),
    ("duplicate-version", lambda c: version(c, 1).update(name="v1"), "models[0].versions[1].name", "defined twice"),
    ("weights-not-100", lambda c: version(c, 1).update(weight=5), "models[0].versions", "add up to 95"),
    ("weights-over-100", lambda c: version(c, 1).update(weight=11), "models[0].versions", "add up to 101"),
    (
        "no-live-version",
        lambda c: iris(c).update(versions=[{"name": "v3", "modelUri": "pvc://m/x", "mirrorPercent": 5}]),
        "models[0].versions",
        "no live version",
    ),
    ("live-and-mirrored", lambda c: version(c, 2).update(weight=0), "models[0].versions[2]", "not both"),
    ("neither-live-nor-shadow", lambda c: version(c, 2).pop("mirrorPercent"), "models[0].versions[2]", "set weight"),
    (
        "mirror-zero",
        lambda c: version(c, 2).update(mirrorPercent=0),
        "models[0].versions[2].mirrorPercent",
        "more than 0",
    ),
    (
        "mirror-over-100",
        lambda c: version(c, 2).update(mirrorPercent=101),
        "models[0].versions[2].mirrorPercent",
        "100",
    ),
    (
        "weight-negative",
        lambda c: version(c, 0).update(weight=-10),
        "models[0].versions[0].weight",
        "at least 0",
    ),
    (
        "weight-not-a-number",
        lambda c: version(c, 0).update(weight="ninety"),
        "models[0].versions[0].weight",
        "must be a whole number, not the string 'ninety'",
    ),
    (
        "unsupported-scheme",
        lambda c: version(c, 0).update(modelUri="ftp://host/m"),
        "models[0].versions[0].modelUri",
        "unsupported scheme",
    ),
    (
        "pvc-without-path",
        lambda c: version(c, 0).update(modelUri="pvc://models"),
        "models[0].versions[0].modelUri",
        "path inside the claim",
    ),
    (
        "pvc-path-escapes",
        lambda c: version(c, 0).update(modelUri="pvc://models/../etc"),
        "models[0].versions[0].modelUri",
        "'..'",
    ),
    ("unknown-model-key", lambda c: iris(c).update(replcas=2), "models[0].replcas", "not a setting of the mlserver"),
    (
        "setting-of-another-runtime",
        lambda c: iris(c).update(maxModelLen=4096),
        "models[0].maxModelLen",
        "mlserver runtime",
    ),
    (
        "unknown-version-key",
        lambda c: version(c, 0).update(wieght=90),
        "models[0].versions[0].wieght",
        "unknown setting",
    ),
    ("unknown-top-level-key", set_key("inference-platform:modles", []), "modles", "unknown setting"),
    ("missing-domain", delete_key("inference-platform:domain"), "domain", "required"),
    ("invalid-domain", set_key("inference-platform:domain", "Models_Example.com"), "domain", "not a valid DNS name"),
    ("invalid-namespace", set_key("inference-platform:namespace", "Service!"), "namespace", "not a valid name"),
    (
        "unknown-runtime",
        lambda c: iris(c).update(runtime="tensorflow"),
        "models[0].runtime",
        "unknown runtime 'tensorflow'",
    ),
    ("missing-runtime", lambda c: iris(c).pop("runtime"), "models[0].runtime", "set runtime"),
    ("no-versions", lambda c: iris(c).update(versions=[]), "models[0].versions", "must not be empty"),
    ("models-not-a-list", set_key(MODELS, {"iris": {}}), "models", "must be a list"),
    ("negative-replicas", lambda c: iris(c).update(replicas=-1), "models[0].replicas", "at least 0"),
    ("bad-timeout", lambda c: iris(c).update(timeout="a minute"), "models[0].timeout", "not a duration"),
    (
        "bad-quantity",
        lambda c: iris(c).update(resources={"limits": {"memory": "2 GB"}}),
        "models[0].resources.limits.memory",
        "not a Kubernetes quantity",
    ),
    (
        "unknown-format",
        lambda c: iris(c).update(format="pytorch"),
        "models[0].format",
        "unknown value 'pytorch': use one of sklearn, xgboost, lightgbm",
    ),
    (
        "per-try-timeout-over-the-timeout",
        lambda c: iris(c).update(timeout="10s", retries={"perTryTimeout": "30s"}),
        "models[0].retries.perTryTimeout",
        "longer than the model's timeout (10s)",
    ),
    (
        "retries-out-of-range",
        lambda c: iris(c).update(retries={"attempts": 50}),
        "models[0].retries.attempts",
        "at most 10",
    ),
    (
        "names-collide-across-models",
        lambda c: models(c).append(
            {
                "name": "iris-v1",
                "runtime": "mlserver",
                "versions": [{"name": "a", "modelUri": "pvc://m/a", "weight": 100}],
            }
        ),
        "models[2].name",
        "like those of models[0].versions[0].name",
    ),
    ("model-is-not-a-mapping", lambda c: c[MODELS].append("iris"), "models[2]", "mapping"),
    # Runtimes, GPUs, downloads and transformers.
    ("vgpu-without-hami", lambda c: iris(c).update(gpu="vgpu"), "models[0].gpu", "set platform.hami.enabled"),
    ("gpu-cores-over-100", lambda c: iris(c).update(gpu={"mode": "vgpu", "cores": 150}), "models[0].gpu.cores", "100"),
    ("unknown-gpu-mode", lambda c: iris(c).update(gpu="tpu"), "models[0].gpu.mode", "unknown GPU mode 'tpu'"),
    (
        "two-memory-caps",
        lambda c: iris(c).update(gpu={"mode": "vgpu", "memoryMib": 1024, "memoryPercent": 10}),
        "models[0].gpu",
        "not both",
    ),
    (
        "vllm-without-gpu",
        lambda c: models(c).append(
            {"name": "llm", "runtime": "vllm", "versions": [{"name": "v1", "modelUri": "hf://o/m", "weight": 100}]}
        ),
        "models[2].gpu",
        "vLLM serves on GPUs",
    ),
    (
        "setting-of-tfserving-on-mlserver",
        lambda c: iris(c).update(batching={}),
        "models[0].batching",
        "mlserver runtime",
    ),
    (
        "unnumbered-tfserving-version",
        lambda c: (iris(c).update(runtime="tfserving"), version(c, 0).update(name="blue")),
        "models[0].versions[0].name",
        "end the name in a number",
    ),
    (
        "triton-without-tensors",
        lambda c: iris(c).update(runtime="triton", format="onnx"),
        "models[0].inputs",
        "strict model config",
    ),
    (
        "bad-hf-uri",
        lambda c: version(c, 0).update(modelUri="hf://just-a-name"),
        "models[0].versions[0].modelUri",
        "hf://<owner>/<model>",
    ),
    (
        "transformer-port-taken",
        lambda c: iris(c).update(transformer={"image": "t:1", "port": 8080}),
        "models[0].transformer.port",
        "taken in the pod",
    ),
    (
        "hami-without-kubernetes-version",
        set_key("inference-platform:platform", {"hami": {"enabled": True}}),
        "platform.kubernetesVersion",
        "HAMi runs a kube-scheduler",
    ),
    (
        "grafana-without-a-password",
        set_key("inference-platform:platform", {"grafana": {"enabled": True}}),
        "platform.grafana.adminPassword",
        "required with Grafana",
    ),
    (
        "grafana-over-a-model-named-grafana",
        lambda c: (
            c.update(
                {"inference-platform:platform": {"grafana": {"enabled": True, "adminPassword": "x", "expose": True}}}
            ),
            iris(c).update(name="grafana"),
        ),
        "models[0].name",
        "serves Grafana",
    ),
    (
        "analysis-window-not-a-duration",
        lambda c: iris(c).update(analysis={"window": "ten minutes"}),
        "models[0].analysis.window",
        "not a duration",
    ),
    (
        "analysis-unknown-key",
        lambda c: iris(c).update(analysis={"maxErrorIncrease": 0.02}),
        "models[0].analysis.maxErrorIncrease",
        "unknown setting",
    ),
    (
        "adapter-without-prometheus",
        set_key("inference-platform:platform", {"prometheus": {"enabled": False}}),
        "platform.prometheusAdapter.enabled",
        "enable prometheus",
    ),
    (
        "qps-autoscaling-without-adapter",
        lambda c: (
            c.update({"inference-platform:platform": {"prometheusAdapter": {"enabled": False}}}),
            iris(c).update(autoscaling={"maxReplicas": 3, "requestsPerSecond": 10}),
        ),
        "models[0].autoscaling",
        "enable platform.prometheusAdapter",
    ),
    (
        "gpu-autoscaling-without-gpu-metrics",
        lambda c: iris(c).update(gpu="exclusive", autoscaling={"maxReplicas": 3, "gpuUtilization": 60}),
        "models[0].autoscaling.gpuUtilization",
        "enable platform.dcgmExporter",
    ),
    (
        "autoscaling-min-over-max",
        lambda c: iris(c).update(autoscaling={"minReplicas": 4, "maxReplicas": 2}),
        "models[0].autoscaling.minReplicas",
        "more than maxReplicas",
    ),
    (
        "bad-gateway-service-type",
        set_key("inference-platform:platform", {"ingress": {"serviceType": "Ingress"}}),
        "platform.ingress.serviceType",
        "unknown value 'Ingress': use one of LoadBalancer, NodePort, ClusterIP",
    ),
    (
        "bad-gateway-selector-label",
        set_key("inference-platform:platform", {"ingress": {"gateway": {"selector": {"istio": "ingress gateway"}}}}),
        "platform.ingress.gateway.selector",
        "label value 'ingress gateway' of 'istio' is not valid",
    ),
    (
        "bad-gpu-node-label-key",
        set_key("inference-platform:platform", {"gpuNodes": {"nodeSelector": {"nvidia.com/gpu/present": "true"}}}),
        "platform.gpuNodes.nodeSelector",
        "has a prefix that is not a DNS name",
    ),
    (
        "node-port-out-of-range",
        set_key("inference-platform:platform", {"ingress": {"nodePorts": {"http": 80}}}),
        "platform.ingress.nodePorts.http",
        "at least 30000",
    ),
    (
        "transformer-without-image",
        lambda c: iris(c).update(transformer={"port": 9000}),
        "models[0].transformer.image",
        "required",
    ),
]


@pytest.mark.parametrize(("mutate", "path", "words"), [case[1:] for case in INVALID], ids=[case[0] for case in INVALID])
def test_invalid_config_exits_2_naming_the_path(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], mutate: Callable[[Config], Any], path: str, words: str
) -> None:
    config = base_config()
    mutate(config)
    stack_file = write_stack_file(tmp_path / "Pulumi.bad.yaml", config)
    out = tmp_path / "out"

    code = main(["render", "--stack", "bad", "--config", str(stack_file), "--out", str(out)])

    stderr = capsys.readouterr().err
    assert code == 2
    matching = [line for line in unplaced(stderr, stack_file) if line.startswith(f"{path}: ")]
    assert matching, f"no problem reported at {path}:\n{stderr}"
    assert any(words in line for line in matching), f"{words!r} not in:\n{stderr}"
    assert "Traceback" not in stderr
    assert not out.exists()


def test_all_problems_are_reported_at_once(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    config = base_config()
    config["inference-platform:namespace"] = "Bad_Namespace"
    version(config, 0)["modelUri"] = "ftp://x/y"
    models(config)[1]["replicas"] = -3
    models(config)[1]["colour"] = "blue"
    stack_file = write_stack_file(tmp_path / "Pulumi.bad.yaml", config)

    assert main(["render", "--stack", "bad", "--config", str(stack_file)]) == 2

    stderr = capsys.readouterr().err
    assert "4 problems" in stderr
    paths = [line.partition(": ")[0] for line in unplaced(stderr, stack_file)]
    assert paths == ["models[0].versions[0].modelUri", "models[1].colour", "models[1].replicas", "namespace"]


def test_the_program_refuses_invalid_config_before_registering_anything(tmp_path: Path) -> None:
    """What `pulumi up` does: the entry point itself validates, and stops with the same report."""
    config = base_config()
    version(config, 1)["weight"] = 5
    stack_file = read_stack_file(write_stack_file(tmp_path / "Pulumi.bad.yaml", config))

    with pytest.raises(pulumi.RunError) as raised:
        run_program("bad", stack_file)

    assert str(raised.value).startswith("invalid stack config (1 problem):")
    assert "models[0].versions: live weights add up to 95" in str(raised.value)


def test_command_line_reports_without_traceback(tmp_path: Path) -> None:
    config = base_config()
    iris(config)["name"] = "Iris"
    stack_file = write_stack_file(tmp_path / "Pulumi.bad.yaml", config)

    done = subprocess.run(
        [sys.executable, "-m", "infra", "render", "--stack", "bad", "--config", str(stack_file)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
    )

    assert done.returncode == 2
    assert done.stderr.startswith(
        f"invalid stack config (1 problem):\n  {stack_file}:5:5: models[0] (Iris).name: 'Iris' is not a valid name"
    )
    assert "Traceback" not in done.stderr
    assert done.stdout == ""


def test_unprintable_characters_cannot_break_the_report(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Found by the hostile-config property test: a key holding a record separator split the lines."""
    config = base_config() | {"\x1e": "x", "inference-platform:mo\ndels": []}
    stack_file = write_stack_file(tmp_path / "Pulumi.bad.yaml", config)

    assert main(["render", "--stack", "bad", "--config", str(stack_file)]) == 2

    lines = capsys.readouterr().err.splitlines()
    assert lines[0] == "invalid stack config (1 problem):"
    assert lines[1] == f"  {stack_file}:24:3: \\x1e: config keys are namespaced: write inference-platform:<key>"
    assert len(lines) == 2


def test_a_newline_in_a_key_stays_on_its_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    config = base_config() | {"inference-platform:mo\ndels": []}
    stack_file = write_stack_file(tmp_path / "Pulumi.bad.yaml", config)

    assert main(["render", "--stack", "bad", "--config", str(stack_file)]) == 2

    lines = capsys.readouterr().err.splitlines()
    assert lines[0] == "invalid stack config (1 problem):"
    assert len(lines) == 2
    assert lines[1].startswith(f"  {stack_file}:24:5: mo\\ndels: ")  # the key's first line, after `? `
