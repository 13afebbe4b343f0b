"""The engines' command lines as the stacks render them, for the parser tests of LoRA adapters: every
version of every vLLM or SGLang model in the repository's stacks and the generated ones (the
all-features stack and its KEDA twin), read from the rendered pods, beside the version's config."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from inference_platform.cli.render import run_program
from inference_platform.cli.stack_file import read_stack_config, read_stack_file
from inference_platform.serving.model_spec import ModelVersion
from inference_platform.serving.runtimes.base import PREDICTOR_CONTAINER
from inference_platform.serving.runtimes.llm_engine import LLMEngineModel
from tests.render_stacks import STACKS, stack_path


@dataclass(frozen=True)
class EngineLine:
    stack: str
    model: LLMEngineModel
    version: ModelVersion
    role: str
    """leader (the one serving pod of a Deployment or a group) or worker"""
    line: list[str]
    """The container's command and args as rendered."""


def _predictor(pod: dict[str, Any]) -> list[str]:
    container = next(c for c in pod["containers"] if c["name"] == PREDICTOR_CONTAINER)
    return [*container.get("command", []), *container.get("args", [])]


def engine_lines(out: Path, runtime: str) -> list[EngineLine]:
    """Every pod's engine command line of every `runtime` model in every stack."""
    lines = []
    for stack in STACKS:
        path = stack_path(stack, out)
        _, config = read_stack_config(path)
        objects = {
            (r.inputs["kind"], r.inputs["metadata"]["name"]): r.inputs
            for r in run_program(stack, read_stack_file(path)).manifests
        }
        for model in config.models:
            if model.runtime != runtime or not isinstance(model, LLMEngineModel):
                continue
            for version in model.versions:
                name = f"{model.name}-{version.name}"
                if ("Deployment", name) in objects:
                    pods = {"leader": objects["Deployment", name]["spec"]["template"]["spec"]}
                else:
                    template = objects["LeaderWorkerSet", f"{name}-group"]["spec"]["leaderWorkerTemplate"]
                    pods = {role: template[f"{role}Template"]["spec"] for role in ("leader", "worker")}
                lines += [EngineLine(stack, model, version, role, _predictor(pod)) for role, pod in pods.items()]
    return lines
