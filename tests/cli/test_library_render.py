"""`render` of a library program: another Pulumi project (its own Pulumi.yaml and __main__.py) that
composes the library's components, with no stack file at all. The summary and the GPU plan come
from what the program registered; a typo in a model's settings is reported as a stack file's
problems are (exit 2, no traceback); without Helm the error names a step such a project can run."""

from __future__ import annotations

import dataclasses
import textwrap
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from inference_platform.analysis.capacity import Plan
from inference_platform.cli.helm import HelmNotFoundError, find_helm
from inference_platform.cli.main import main
from inference_platform.cli.registered import registered_capacity
from inference_platform.cli.render import RenderResult
from inference_platform.cli.render_files import read_render
from inference_platform.cli.stack_file import read_stack_config
from tests.conftest import full_config, keda_config, write_stack_file

PROJECT = textwrap.dedent(
    """\
    name: team-models
    runtime:
      name: python
      options:
        toolchain: pip
    description: A team's own program composing the library's components.
    """
)

# A GPU model (vLLM on two whole GPUs, two replicas) on a cluster of 1 node x 4 GPUs.
PROGRAM = textwrap.dedent(
    '''\
    """A team's program: the gateway, Prometheus, the models' namespace and one GPU model."""
    import pulumi

    from inference_platform.platform import (
        IngressGateway,
        IngressGatewayArgs,
        IngressGatewayConfig,
        Prometheus,
        PrometheusArgs,
        PrometheusConfig,
    )
    from inference_platform.serving import InferenceService, InferenceServiceArgs, ModelNamespace, ModelNamespaceArgs

    gateway = IngressGateway("ingress", IngressGatewayArgs(config=IngressGatewayConfig(), domain="llm.example.com"))
    prometheus = Prometheus("prometheus", PrometheusArgs(config=PrometheusConfig()))
    after_gateway = pulumi.ResourceOptions(depends_on=gateway.ready)
    namespace = ModelNamespace("llm", ModelNamespaceArgs(name="llm"), opts=after_gateway)
    llama = InferenceService(
        "llama",
        InferenceServiceArgs.parse(
            {{
                "model": {{
                    "name": "llama",
                    "runtime": "vllm",
                    "gpu": {{"mode": "exclusive", "count": 2}},
                    "tensorParallelSize": 2,
                    "replicas": 2,
                    "versions": [{{"name": "v1", "modelUri": "hf://meta-llama/Llama-3.1-8B", "{weight}": 100}}],
                }},
                "namespace": "llm",
                "domain": "llm.example.com",
                "gpuNodes": {{"count": 1, "gpusPerNode": 4}},
                "metricsScraper": PrometheusConfig().scraper,
            }}
        ),
        opts=pulumi.ResourceOptions(depends_on=[namespace, *gateway.ready]),
    )
    pulumi.export("llamaUrls", llama.urls)
    '''
)


def project(directory: Path, weight: str = "weight") -> Path:
    directory.mkdir()
    (directory / "Pulumi.yaml").write_text(PROJECT, encoding="utf-8")
    (directory / "__main__.py").write_text(PROGRAM.format(weight=weight), encoding="utf-8")
    return directory


def test_a_library_program_renders_with_no_stack_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: Any
) -> None:
    monkeypatch.chdir(project(tmp_path / "team"))
    assert not list(Path().glob("Pulumi.*.yaml"))

    assert main(["render", "--stack", "dev", "--no-charts"]) == 0

    out = capsys.readouterr().out
    assert "Rendered stack dev:" in out
    assert "inference-platform:serving:InferenceService::llama" in out
    assert "llama http://llama.llm.example.com/ http://llm.example.com/models/llama/\n" in out
    # Two replicas of two GPUs, from the model the program registered, against the 4 it declares.
    assert "GPUs: 4 at minimum replicas, 4 awake, 4 at peak of 4 declared\n" in out
    manifests, _, outputs = read_render(Path("build/dev"))
    assert outputs["llamaUrls"] == ["http://llama.llm.example.com/", "http://llm.example.com/models/llama/"]
    (deployment,) = [m for m in manifests if m["kind"] == "Deployment" and m["metadata"]["name"] == "llama-v1"]
    assert deployment["spec"]["replicas"] == 2


def test_a_library_programs_stack_file_is_its_own_config(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: Any
) -> None:
    """When the program has a stack file, it is the program's config (its own namespace), not this
    repository's stack config: no domain or models are required of it."""
    directory = project(tmp_path / "team")
    program = (directory / "__main__.py").read_text(encoding="utf-8")
    program += 'pulumi.export("owner", pulumi.Config().require("owner"))\n'
    (directory / "__main__.py").write_text(program, encoding="utf-8")
    (directory / "Pulumi.dev.yaml").write_text(yaml.safe_dump({"config": {"team-models:owner": "ml"}}), "utf-8")
    monkeypatch.chdir(directory)

    assert main(["render", "--stack", "dev", "--no-charts"]) == 0

    _, _, outputs = read_render(Path("build/dev"))
    assert outputs["owner"] == "ml"


def test_a_typo_in_a_model_is_reported_as_a_stack_files_problems_are(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: Any
) -> None:
    monkeypatch.chdir(project(tmp_path / "team", weight="wieght"))

    assert main(["render", "--stack", "dev", "--no-charts"]) == 2

    captured = capsys.readouterr()
    assert "Traceback" not in captured.err
    lines = captured.err.splitlines()
    line = [text.strip() for text in PROGRAM.splitlines()].index("InferenceServiceArgs.parse(") + 1
    assert lines == [
        "invalid InferenceServiceArgs (1 problem):",
        f"  __main__.py:{line}: model (llama).versions[0] (v1).wieght: "
        "unknown setting 'wieght': did you mean 'weight'?",
    ]


def test_without_helm_the_error_names_a_step_a_library_project_can_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(project(tmp_path / "team"))
    monkeypatch.delenv("HELM", raising=False)
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))

    with pytest.raises(HelmNotFoundError) as error:
        find_helm()

    assert "make" not in str(error.value)
    assert "python -m inference_platform.cli.helm" in str(error.value)
    assert str(tmp_path / "team" / "tools" / "bin" / "helm") in str(error.value)


def test_a_typo_validated_by_the_program_itself_is_reported_the_same_way(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: Any
) -> None:
    """`model_validate` (pydantic's own error) escapes the program: the render reports it as well."""
    directory = project(tmp_path / "team", weight="wieght")
    program = (directory / "__main__.py").read_text(encoding="utf-8")
    (directory / "__main__.py").write_text(program.replace(".parse(", ".model_validate("), encoding="utf-8")
    monkeypatch.chdir(directory)

    assert main(["render", "--stack", "dev", "--no-charts"]) == 2

    captured = capsys.readouterr()
    line = [text.strip() for text in PROGRAM.splitlines()].index("InferenceServiceArgs.parse(") + 1
    assert captured.err.splitlines() == [
        "invalid InferenceServiceArgs (1 problem):",
        f"  __main__.py:{line}: model (llama).versions[0] (v1).wieght: "
        "unknown setting 'wieght': did you mean 'weight'?",
    ]


def _by_model(plan: Plan) -> Plan:
    """The plan with its rows, notes and packings in one order whatever the models' order."""
    return dataclasses.replace(
        plan,
        rows=tuple(sorted(plan.rows, key=lambda row: (row.model, row.version))),
        notes=tuple(sorted(plan.notes)),
        packings=tuple(sorted(plan.packings, key=repr)),
    )


@pytest.mark.parametrize("config", [full_config, keda_config], ids=["all-features", "keda"])
def test_the_plan_from_registered_objects_is_the_stack_configs_plan(
    config: Callable[[], dict[str, Any]], render_config: Callable[..., RenderResult], tmp_path: Path
) -> None:
    """The stack's own program: the models its InferenceServices registered (vGPU, exclusive,
    multi-node and sleeping ones) and HAMi's sharing plan as its validated config does."""
    values = config()
    _, stack_config = read_stack_config(write_stack_file(tmp_path / "Pulumi.plan.yaml", values))
    planned = stack_config.capacity()
    registered = registered_capacity(render_config(values))
    # The registered models come by name, the stack's in its order: the same rows, notes and packings.
    assert _by_model(registered) == _by_model(planned)
    assert planned.gpus_peak > 0
