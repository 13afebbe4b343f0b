"""`python -m infra render`: the files it writes, byte-identical for the same config."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pulumi
import pytest
import yaml

from inference_platform.cli.main import main
from inference_platform.cli.render_files import CHARTS, MANIFESTS, OUTPUTS
from inference_platform.config.errors import ConfigError
from inference_platform.stack import program
from inference_platform.stack.config import parse_stack_config
from tests.conftest import ROOT, base_config, write_stack_file


def test_render_writes_every_object_with_apiversion_kind_metadata_first(render_dir: Callable[..., Path]) -> None:
    out = render_dir(base_config())

    documents = list(yaml.safe_load_all((out / MANIFESTS).read_text()))

    assert {d["kind"] for d in documents} == {
        "Namespace",
        "ServiceAccount",
        "ConfigMap",
        "Deployment",
        "Service",
        "Gateway",
        "DestinationRule",
        "VirtualService",
        "AuthorizationPolicy",
        "NetworkPolicy",
        "PeerAuthentication",
    }
    for document in documents:
        assert list(document)[:3] == ["apiVersion", "kind", "metadata"]
    names = [(d["kind"], d["metadata"].get("namespace"), d["metadata"]["name"]) for d in documents]
    assert ("Deployment", "service", "iris-v3") in names
    assert ("Service", "service", "iris") in names
    assert len(names) == len(set(names))
    assert (out / CHARTS).exists()


def test_outputs_carry_urls_curl_weights_and_mirrors(render_dir: Callable[..., Path]) -> None:
    out = render_dir(base_config())

    outputs = yaml.safe_load((out / OUTPUTS).read_text())

    iris = outputs["models"]["iris"]
    assert iris["urls"] == ["http://iris.models.example.com/", "http://models.example.com/models/iris/"]
    assert iris["weights"] == {"v1": 90, "v2": 10}
    assert iris["mirrors"] == {"v3": 50}
    assert iris["curl"].startswith("curl -sS http://iris.models.example.com/v2/models/iris/infer ")


def test_same_config_renders_byte_identical_files(render_dir: Callable[..., Path]) -> None:
    first, second = render_dir(base_config()), render_dir(base_config())
    for name in (MANIFESTS, CHARTS, OUTPUTS):
        assert (first / name).read_bytes() == (second / name).read_bytes()


def test_renders_in_separate_processes_are_byte_identical(tmp_path: Path) -> None:
    """Hash seeds differ between processes, so set or dict ordering cannot leak into the output."""
    stack_file = write_stack_file(tmp_path / "Pulumi.s.yaml", base_config())
    outputs = []
    for seed in ("1", "2"):
        out = tmp_path / f"out-{seed}"
        subprocess.run(
            [sys.executable, "-m", "infra", "render", "--stack", "s", "--config", str(stack_file), "--out", str(out)],
            cwd=ROOT,
            env=os.environ | {"PYTHONHASHSEED": seed},
            check=True,
            capture_output=True,
        )
        outputs.append({name: (out / name).read_bytes() for name in (MANIFESTS, CHARTS, OUTPUTS)})
    assert outputs[0] == outputs[1]


def test_a_failed_render_leaves_the_previous_render_untouched(render_dir: Callable[..., Path], tmp_path: Path) -> None:
    out = render_dir(base_config())
    before = (out / MANIFESTS).read_bytes()
    broken: dict[str, Any] = base_config()
    broken["inference-platform:models"][0]["versions"][0]["weight"] = 1
    stack_file = write_stack_file(tmp_path / "Pulumi.broken.yaml", broken)

    assert main(["render", "--stack", "broken", "--config", str(stack_file), "--out", str(out)]) == 2

    assert (out / MANIFESTS).read_bytes() == before
    assert sorted(p.name for p in out.parent.iterdir() if p.name.startswith(".")) == []


def test_summary_counts_objects_per_kind_and_component(tmp_path: Path) -> None:
    stack_file = write_stack_file(tmp_path / "Pulumi.s.yaml", base_config())
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "infra",
            "render",
            "--stack",
            "s",
            "--config",
            str(stack_file),
            "--out",
            str(tmp_path / "o"),
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    )
    assert "Rendered stack s: 41 Kubernetes objects, 6 Helm charts" in done.stdout
    assert re.search(r"│ Deployment\s*│ 4\s*│", done.stdout), done.stdout
    assert "inference-platform:serving:InferenceService::iris" in done.stdout
    assert re.search(r"IngressGateway::ingress\s*│\s*3\s*│\s*4\s*│", done.stdout), done.stdout


def test_unreadable_and_hostile_stack_files_are_refused(tmp_path: Path, capsys: Any) -> None:
    cases = {
        "missing.yaml": None,
        "not-yaml.yaml": "config: [unclosed",
        "not-a-mapping.yaml": "- just\n- a list\n",
        "laughs.yaml": "a: &a [x, x, x, x, x, x, x, x, x]\n"
        + "".join(f"{chr(98 + i)}: &{chr(98 + i)} [{', '.join(['*' + chr(97 + i)] * 9)}]\n" for i in range(8))
        + "config: {inference-platform:domain: *i}\n",
        "huge.yaml": "config:\n" + "  x:y: " + "a" * (2 * 1024 * 1024) + "\n",
        "bare-key.yaml": "config:\n  domain: models.example.com\n",
        # Past the YAML parser's recursion limit, and within it but deeper than any config.
        "nested-flow.yaml": "config: {inference-platform:models: " + "[" * 5000 + "]" * 5000 + "}\n",
        "nested-block.yaml": "config:\n  inference-platform:models:\n"
        + "".join("    " + "  " * depth + "- \n" for depth in range(60)),
        "not-utf8.yaml": b"config:\n  inference-platform:domain: \xff\xfe\n",
    }
    for name, text in cases.items():
        path = tmp_path / name
        if isinstance(text, bytes):
            path.write_bytes(text)
        elif text is not None:
            path.write_text(text)
        assert main(["render", "--stack", "s", "--config", str(path), "--out", str(tmp_path / "o")]) == 2, name
        err = capsys.readouterr().err
        assert err.startswith("invalid stack config"), (name, err)
        assert "Traceback" not in err
    assert not (tmp_path / "o").exists()


def test_values_nested_too_deep_for_the_program_are_refused_by_path() -> None:
    """What the Pulumi CLI passes the program can be deeper than any config; refused, not crashed."""
    deep = "[" * 50 + "]" * 50
    with pytest.raises(ConfigError) as raised:
        parse_stack_config({"models": deep, "storage": "[" * 5000 + "]" * 5000})
    assert [
        (problem.path, "levels deep" in problem.message or "too deeply" in problem.message)
        for problem in raised.value.problems
    ] == [("models", True), ("storage", True)]


def test_a_program_failure_exits_1_not_as_a_config_error(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: Any
) -> None:
    def fail(_: object) -> None:
        raise pulumi.RunError("the cluster layer could not be composed")

    monkeypatch.setattr(program, "deploy", fail)
    assert main(["render", "--stack", "dev", "--out", str(tmp_path / "o")]) == 1
    assert capsys.readouterr().err == "the program failed: the cluster layer could not be composed\n"
    assert not (tmp_path / "o").exists()


def test_encrypted_values_render_as_masked_secrets(tmp_path: Path) -> None:
    """`pulumi config set --secret` writes `secure:` values no offline render can decrypt."""
    config = base_config()
    config["inference-platform:storage"] = {
        "s3": {"accessKeyId": {"secure": "v1:QUtJQS1QTEFJTg=="}, "secretAccessKey": {"secure": "v1:b64ciphertext=="}}
    }
    stack_file = write_stack_file(tmp_path / "Pulumi.s.yaml", config)
    out = tmp_path / "out"

    assert main(["render", "--stack", "s", "--config", str(stack_file), "--out", str(out)]) == 0

    secret = next(d for d in yaml.safe_load_all((out / MANIFESTS).read_text()) if d["kind"] == "Secret")
    assert secret["stringData"] == {"aws-credentials": "[secret]"}
    assert "b64ciphertext" not in (out / MANIFESTS).read_text()
    assert "QUtJQS1QTEFJTg" not in (out / MANIFESTS).read_text()


def models_config(count: int) -> dict[str, Any]:
    models = [
        {
            "name": f"m{i}",
            "runtime": "mlserver",
            "versions": [{"name": "v1", "modelUri": f"pvc://m/{i}", "weight": 100}],
        }
        for i in range(count)
    ]
    return base_config() | {"inference-platform:models": models}


@pytest.mark.slow
def test_a_400_model_summary_fits_a_screen(tmp_path: Path, capsys: Any) -> None:
    stack_file = write_stack_file(tmp_path / "Pulumi.big.yaml", models_config(400))
    assert main(["render", "--stack", "big", "--config", str(stack_file), "--out", str(tmp_path / "out")]) == 0
    out = capsys.readouterr().out
    lines = out.splitlines()
    assert len(lines) < 60
    assert any("InferenceService x 400 (min/median/max)" in line for line in lines)
    # The console wraps a line longer than its width, which the temporary path (longer under an
    # xdist worker: .../popen-gw1/...) may make it: compare without the wrapping.
    said = f"400 models: their URLs are in {tmp_path / 'out'}/outputs.yaml (--verbose lists them)"
    assert "".join(said.split()) in "".join(out.split())


def test_verbose_lists_every_model_above_twenty(tmp_path: Path, capsys: Any) -> None:
    stack_file = write_stack_file(tmp_path / "Pulumi.s.yaml", models_config(21))
    args = ["render", "--stack", "s", "--config", str(stack_file), "--out", str(tmp_path / "out")]
    assert main(args) == 0
    assert "21 models: their URLs are in" in capsys.readouterr().out
    assert main([*args, "--verbose"]) == 0
    out = capsys.readouterr().out
    assert all(f"m{i} http://m{i}.models.example.com/" in out for i in range(21))
    assert "InferenceService::m20" in out


def test_the_render_leaves_the_garbage_collector_as_it_found_it(tmp_path: Path) -> None:
    import gc

    threshold = gc.get_threshold()
    stack_file = write_stack_file(tmp_path / "Pulumi.s.yaml", base_config())
    assert main(["render", "--stack", "s", "--config", str(stack_file), "--out", str(tmp_path / "out")]) == 0
    assert gc.get_threshold() == threshold
    assert gc.get_freeze_count() == 0
