"""MLServer's own settings models accept what we generate, and agree with the pod we build."""

from __future__ import annotations

import json
from typing import Any

import pytest
from mlserver.settings import ModelParameters, ModelSettings, Settings

from inference_platform.platform.gpu_nodes import GpuNodes
from inference_platform.serving.inference_service.args import InferenceServiceArgs
from inference_platform.serving.inference_service.pods import deployment
from inference_platform.serving.runtimes import mlserver
from inference_platform.serving.runtimes.mlserver import MLServerModel
from inference_platform.serving.server_plan import MetricsEndpoint

VERSION = {"name": "v1", "modelUri": "pvc://models/iris/v1", "weight": 100}


def model(**settings: Any) -> MLServerModel:
    return MLServerModel.model_validate({"name": "iris", "runtime": "mlserver", "versions": [VERSION], **settings})


def known_keys(model_class: Any) -> set[str]:
    """The keys a settings model reads: field names, aliases and alias choices."""
    keys = set()
    for name, field in model_class.model_fields.items():
        keys |= {name, field.alias or name}
        keys |= {c for c in getattr(field.validation_alias, "choices", []) if isinstance(c, str)}
    return keys


def test_settings_parse_with_mlserver_settings_and_use_only_known_keys() -> None:
    plan = model(parallelWorkers=2).plan(model().versions[0], GpuNodes())
    settings = json.loads(plan.config_files["settings.json"])

    parsed = Settings.model_validate(settings)

    # Settings ignores unknown keys, so a misspelt one would silently do nothing.
    assert set(settings) <= known_keys(Settings)
    assert (parsed.http_port, parsed.grpc_port, parsed.metrics_port) == (8080, 8081, 8082)
    assert parsed.parallel_workers == 2
    assert parsed.model_repository_root == mlserver.CONFIG_DIR


@pytest.mark.parametrize(
    ("model_format", "implementation"),
    [
        ("sklearn", "mlserver_sklearn.SKLearnModel"),
        ("xgboost", "mlserver_xgboost.XGBoostModel"),
        ("lightgbm", "mlserver_lightgbm.LightGBMModel"),
    ],
)
def test_model_settings_parse_with_mlserver_model_settings(model_format: str, implementation: str) -> None:
    spec = model(format=model_format, maxBatchSize=16, maxBatchTime=0.05)
    settings = json.loads(spec.plan(spec.versions[0], GpuNodes()).config_files["model-settings.json"])

    parsed = ModelSettings.model_validate(settings)

    assert set(settings) <= known_keys(ModelSettings)
    assert set(settings["parameters"]) <= known_keys(ModelParameters)
    assert parsed.name == "iris"
    assert parsed.implementation_ == implementation
    assert (parsed.max_batch_size, parsed.max_batch_time) == (16, 0.05)
    assert parsed.parameters is not None
    assert parsed.parameters.version == "v1"


def test_sklearn_implementation_is_importable_by_mlserver() -> None:
    spec = model()
    parsed = ModelSettings.model_validate(
        json.loads(spec.plan(spec.versions[0], GpuNodes()).config_files["model-settings.json"])
    )
    assert parsed.implementation.__name__ == "SKLearnModel"


def test_settings_paths_match_the_pod_mounts() -> None:
    spec = model()
    version = spec.versions[0]
    plan = spec.plan(version, GpuNodes())
    args = InferenceServiceArgs(model=spec, namespace="service", domain="models.example.com")
    pod = deployment(args, version, plan)["spec"]["template"]["spec"]
    mounts = {m["name"]: m for m in pod["containers"][0]["volumeMounts"]}
    settings = json.loads(plan.config_files["settings.json"])
    model_settings = json.loads(plan.config_files["model-settings.json"])

    assert pod["containers"][0]["command"] == ["mlserver", "start", mounts["server-config"]["mountPath"]]
    assert settings["model_repository_root"] == mounts["server-config"]["mountPath"]
    assert model_settings["parameters"]["uri"] == mounts["model-files"]["mountPath"]
    assert mounts["model-files"]["subPath"] == "iris/v1"
    assert mounts["model-files"]["readOnly"] is True
    # Everything MLServer writes goes to the writable scratch volume; the root file system is read-only.
    for key in ("metrics_dir", "environments_dir"):
        assert settings[key].startswith(mounts["scratch"]["mountPath"] + "/")


def test_probes_and_scrape_annotations_use_mlserver_endpoints() -> None:
    spec = model()
    plan = spec.plan(spec.versions[0], GpuNodes())
    container = plan.container
    ports = {p["name"]: p["containerPort"] for p in container["ports"]}

    assert ports == {"http": 8080, "grpc": 8081, "http-metrics": 8082}
    assert container["readinessProbe"]["httpGet"] == {"path": "/v2/models/iris/versions/v1/ready", "port": 8080}
    assert container["startupProbe"]["httpGet"] == container["readinessProbe"]["httpGet"]
    assert container["livenessProbe"]["httpGet"] == {"path": "/v2/health/live", "port": 8080}
    assert plan.metrics == MetricsEndpoint(8082, "/metrics")


def test_image_and_resources_can_be_overridden_per_model_and_version() -> None:
    spec = model(
        image="registry.example.com/mlserver:1.7.1-custom",
        resources={"limits": {"memory": "4Gi"}},
        versions=[
            VERSION | {"image": "registry.example.com/mlserver:v1-only", "resources": {"requests": {"cpu": "2"}}}
        ],
    )
    container = spec.plan(spec.versions[0], GpuNodes()).container
    assert container["image"] == "registry.example.com/mlserver:v1-only"
    assert container["resources"] == {
        "requests": {"cpu": "2", "memory": "1Gi"},
        "limits": {"cpu": "2", "memory": "4Gi"},
    }


def test_args_and_env_can_be_added_per_model_and_version() -> None:
    spec = model(
        args=["--debug"],
        env=[{"name": "MLSERVER_LOGGING", "value": "model"}, {"name": "SHARED", "value": "model"}],
        versions=[VERSION | {"args": ["--extra"], "env": [{"name": "SHARED", "value": "version"}]}],
    )
    container = spec.plan(spec.versions[0], GpuNodes()).container
    assert container["args"][-2:] == ["--debug", "--extra"]  # the server's own args first
    env = {e["name"]: e["value"] for e in container["env"]}
    assert env == {"MLSERVER_LOGGING": "model", "SHARED": "version"}  # the version's value wins
