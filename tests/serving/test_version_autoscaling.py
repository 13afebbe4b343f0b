"""A version's own autoscaling bounds within its model's, and a shadow's floor of 1: what every
reader of a version's bounds (HPA, Deployment, capacity plan) sees."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from inference_platform.cli.main import main
from inference_platform.serving.inference_service.args import InferenceServiceArgs
from inference_platform.serving.inference_service.manifests import model_manifests
from inference_platform.serving.runtimes.vllm import VLLMModel
from inference_platform.stack.config import parse_stack_config, project_values
from tests.conftest import RUNTIME_MINIMUMS, write_stack_file

PRIMARY = {"name": "v1", "modelUri": "pvc://m/chat/1", "weight": 90}
CANARY = {"name": "v2", "modelUri": "pvc://m/chat/2", "weight": 10}
SHADOW = {"name": "v3", "modelUri": "pvc://m/chat/3", "mirrorPercent": 10}


def chat(versions: list[dict[str, Any]], **settings: Any) -> dict[str, Any]:
    return RUNTIME_MINIMUMS["vllm"] | {"name": "chat", "versions": versions} | settings


def bounds(manifests: list[dict[str, Any]]) -> dict[str, tuple[int, int] | int]:
    """Each version's HPA bounds, or a Deployment's fixed replicas where it has no HPA."""
    hpas = {m["metadata"]["name"]: m["spec"] for m in manifests if m["kind"] == "HorizontalPodAutoscaler"}
    found: dict[str, tuple[int, int] | int] = {
        name: (spec["minReplicas"], spec["maxReplicas"]) for name, spec in hpas.items()
    }
    for deployment in (m for m in manifests if m["kind"] == "Deployment"):
        name = deployment["metadata"]["name"]
        if name in hpas:
            assert "replicas" not in deployment["spec"]  # left to the autoscaler
        else:
            found[name] = deployment["spec"]["replicas"]
    return found


def render(model: dict[str, Any]) -> list[dict[str, Any]]:
    spec = VLLMModel.model_validate(model)
    return model_manifests(InferenceServiceArgs(model=spec, namespace="service", domain="models.example.com"))


def test_a_shadow_starts_at_one_pod_and_a_version_may_set_its_own_bounds() -> None:
    canary = CANARY | {"autoscaling": {"minReplicas": 1, "maxReplicas": 2}}
    manifests = render(chat([PRIMARY, canary, SHADOW], autoscaling={"minReplicas": 3, "maxReplicas": 8}))
    assert bounds(manifests) == {"chat-v1": (3, 8), "chat-v2": (1, 2), "chat-v3": (1, 8)}


def test_a_shadows_own_floor_and_equal_bounds_fix_its_replicas() -> None:
    shadow = SHADOW | {"autoscaling": {"minReplicas": 2}}
    fixed = CANARY | {"autoscaling": {"minReplicas": 2, "maxReplicas": 2}}
    manifests = render(chat([PRIMARY, fixed, shadow], autoscaling={"minReplicas": 3, "maxReplicas": 8}))
    assert bounds(manifests) == {"chat-v1": (3, 8), "chat-v2": 2, "chat-v3": (2, 8)}


def test_a_model_with_equal_bounds_runs_that_many_pods_of_its_shadow_unless_it_says_otherwise() -> None:
    scaling = {"minReplicas": 3, "maxReplicas": 3}
    assert bounds(render(chat([PRIMARY | {"weight": 100}, SHADOW], autoscaling=scaling))) == {
        "chat-v1": 3,
        "chat-v3": 3,
    }
    shadow = SHADOW | {"autoscaling": {"minReplicas": 1}}
    assert bounds(render(chat([PRIMARY | {"weight": 100}, shadow], autoscaling=scaling))) == {
        "chat-v1": 3,
        "chat-v3": (1, 3),
    }


def test_a_shadow_of_a_model_asleep_at_zero_sleeps_too() -> None:
    spec = VLLMModel.model_validate(
        chat([PRIMARY | {"weight": 100}, SHADOW], autoscaling={"minReplicas": 0, "maxReplicas": 4})
    )
    assert [spec.version_autoscaling(v).min_replicas for v in spec.versions] == [0, 0]


def test_the_capacity_plan_counts_each_versions_bounds() -> None:
    """The issue's case: a 10 % mirror of a vLLM model held the model's whole floor (2 GPUs more)."""
    config = {
        "inference-platform:domain": "models.example.com",
        "inference-platform:models": [
            chat(
                [PRIMARY, CANARY | {"autoscaling": {"maxReplicas": 2}}, SHADOW | {"autoscaling": {"maxReplicas": 1}}],
                autoscaling={"minReplicas": 2, "maxReplicas": 4},
            )
        ],
    }
    plan = parse_stack_config(project_values(config)).capacity()
    # min: 2 (v1) + 2 (v2: the model's floor) + 1 (v3: a shadow's); peak: 4 + 2 + 1.
    assert plan.as_json()["gpus"] == {"min": 5, "awake": 5, "peak": 7}


def problems(config: dict[str, Any], tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> list[str]:
    stack_file = write_stack_file(tmp_path / "Pulumi.t.yaml", config)
    assert main(["render", "--stack", "t", "--config", str(stack_file), "--out", str(tmp_path / "out")]) == 2
    assert not (tmp_path / "out").exists()
    return [line for line in capsys.readouterr().err.splitlines() if "Pulumi.t.yaml:" in line]


def test_bounds_outside_the_models_are_reported_at_their_lines(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    scaling = {"minReplicas": 2, "maxReplicas": 4}
    models = [
        chat([PRIMARY, CANARY | {"autoscaling": {"maxReplicas": 5}}], autoscaling=scaling) | {"name": "above"},
        chat([PRIMARY, CANARY | {"autoscaling": {"minReplicas": 0}}], autoscaling=scaling) | {"name": "asleep"},
        chat([PRIMARY, CANARY | {"autoscaling": {"minReplicas": 3, "maxReplicas": 2}}], autoscaling=scaling)
        | {"name": "crossed"},
        chat([PRIMARY, CANARY | {"autoscaling": {"maxReplicas": 2}}]) | {"name": "unscaled"},
        chat([PRIMARY, CANARY | {"autoscaling": {"minReplicas": 1}}], autoscaling={"minReplicas": 0, "maxReplicas": 2})
        | {"name": "woken"},
    ]
    config = {
        "inference-platform:domain": "models.example.com",
        "inference-platform:platform": {"autoscaler": "keda"},
        "inference-platform:models": models,
    }
    found = problems(config, tmp_path, capsys)
    expected = [
        "models[0] (above).versions[1] (v2).autoscaling.maxReplicas: 5 is more than the model's maxReplicas (4)",
        "models[1] (asleep).versions[1] (v2).autoscaling.minReplicas: 0 only where the model's minReplicas is 0",
        "models[2] (crossed).versions[1] (v2).autoscaling.minReplicas: 3 is more than this version's maxReplicas (2)",
        "models[3] (unscaled).versions[1] (v2).autoscaling: a version's bounds lie within the model's",
        "models[4] (woken).versions[1] (v2).autoscaling.minReplicas: a model sleeps at zero as a whole",
    ]
    assert len(found) == len(expected), found
    for text in expected:
        assert any(text in line for line in found), (text, found)
