"""TF Serving reads what we generate: models.config parsed with its own ModelServerConfig."""

from __future__ import annotations

from typing import Any

import pytest
from google.protobuf import text_format
from pydantic import ValidationError
from tensorflow_serving.config import model_server_config_pb2, platform_config_pb2

from inference_platform.platform.gpu_nodes import GpuNodes
from inference_platform.serving.inference_service.args import InferenceServiceArgs
from inference_platform.serving.inference_service.pods import deployment
from inference_platform.serving.model_storage import StorageAccess
from inference_platform.serving.runtimes import tfserving
from inference_platform.serving.runtimes.tfserving import TFServingModel
from inference_platform.serving.server_plan import MetricsEndpoint

VERSIONS = [
    {"name": "v1", "modelUri": "pvc://models/mnist/v1", "weight": 80},
    {"name": "v2", "modelUri": "s3://models/mnist/2", "weight": 20},
]


def model(**settings: Any) -> TFServingModel:
    return TFServingModel.model_validate({"name": "mnist", "runtime": "tfserving", "versions": VERSIONS, **settings})


def test_models_config_parses_as_model_server_config_serving_only_the_pods_version() -> None:
    spec = model()
    for version in spec.versions:
        text = spec.plan(version, GpuNodes()).config_files["models.config"]

        config = text_format.Parse(text, model_server_config_pb2.ModelServerConfig())

        (entry,) = config.model_config_list.config
        assert entry.name == "mnist"
        assert entry.base_path == "/models/mnist"
        assert entry.model_platform == "tensorflow"
        assert list(entry.model_version_policy.specific.versions) == [version.number]


def test_the_version_is_mounted_where_the_version_policy_looks() -> None:
    spec = model()
    version = spec.versions[1]
    plan = spec.plan(version, GpuNodes())
    config = text_format.Parse(plan.config_files["models.config"], model_server_config_pb2.ModelServerConfig())
    entry = config.model_config_list.config[0]

    mounts = {m["name"]: m["mountPath"] for m in plan.container["volumeMounts"]}

    assert mounts["model-files"] == f"{entry.base_path}/{entry.model_version_policy.specific.versions[0]}"


@pytest.mark.parametrize(
    ("settings", "extra_file"),
    [
        ({"batching": {"maxBatchSize": 16}}, "batching.config"),
        ({"platformConfig": 'platform_configs { key: "tensorflow" value { } }'}, "platform.config"),
    ],
)
def test_arguments_point_at_the_generated_files_and_ports(settings: dict[str, Any], extra_file: str) -> None:
    spec = model(**settings)
    plan = spec.plan(spec.versions[0], GpuNodes())
    args = plan.container["args"]
    files = {arg.split("=", 1)[1].rsplit("/", 1)[1] for arg in args if arg.endswith(".config")}

    assert plan.container["command"] == ["tensorflow_model_server"]
    assert "--port=8500" in args
    assert "--rest_api_port=8501" in args
    assert ("--enable_batching=true" in args) == (extra_file == "batching.config")
    assert files == set(plan.config_files) == {"models.config", "monitoring.config", extra_file}
    config_dir = next(m["mountPath"] for m in plan.container["volumeMounts"] if m["name"] == "server-config")
    assert all(arg.split("=", 1)[1].startswith(config_dir + "/") for arg in args if arg.endswith(".config"))


def test_batching_beside_a_platform_config_is_refused() -> None:
    """TF Serving reads the batching flags only without --platform_config_file (server.cc)."""
    with pytest.raises(ValidationError, match="ignores batching settings when a platformConfig is given"):
        model(batching={"maxBatchSize": 16}, platformConfig='platform_configs { key: "tensorflow" value { } }')


def test_monitoring_config_enables_prometheus_on_the_scraped_path() -> None:
    spec = model()
    plan = spec.plan(spec.versions[0], GpuNodes())

    # tensorflow-serving-api does not ship monitoring_config.proto: checked as the exact text.
    assert plan.config_files["monitoring.config"] == (
        'prometheus_config {\n  enable: true\n  path: "/monitoring/prometheus/metrics"\n}\n'
    )
    assert plan.metrics == MetricsEndpoint(8501, tfserving.METRICS_PATH)


def test_batching_parameters_wrap_numbers_as_int64_values() -> None:
    spec = model(batching={"maxBatchSize": 16, "batchTimeoutMicros": 500, "numBatchThreads": 2})
    text = spec.plan(spec.versions[0], GpuNodes()).config_files["batching.config"]

    # session_bundle_config.proto (BatchingParameters) is not in tensorflow-serving-api either.
    assert "max_batch_size {\n  value: 16\n}" in text
    assert "batch_timeout_micros {\n  value: 500\n}" in text
    assert "num_batch_threads {\n  value: 2\n}" in text
    assert "pad_variable_length_inputs: false" in text


def test_a_supplied_platform_config_is_passed_as_written_and_parses() -> None:
    supplied = 'platform_configs {\n  key: "tensorflow"\n  value {\n  }\n}'
    spec = model(platformConfig=supplied)
    text = spec.plan(spec.versions[0], GpuNodes()).config_files["platform.config"]

    parsed = text_format.Parse(text, platform_config_pb2.PlatformConfigMap())

    assert "tensorflow" in parsed.platform_configs
    assert text == supplied + "\n"


def test_probes_wait_for_the_version_to_be_loaded() -> None:
    spec = model()
    container = spec.plan(spec.versions[1], GpuNodes()).container

    assert container["readinessProbe"]["httpGet"] == {"path": "/v1/models/mnist/versions/2/metadata", "port": 8501}
    assert container["startupProbe"]["httpGet"] == container["readinessProbe"]["httpGet"]
    assert container["livenessProbe"]["httpGet"] == {"path": "/v1/models/mnist", "port": 8501}


def test_gpu_models_get_the_gpu_image_and_allow_growth() -> None:
    spec = model(gpu="exclusive")
    container = spec.plan(spec.versions[0], GpuNodes()).container
    cpu = model().plan(spec.versions[0], GpuNodes()).container

    assert container["image"].endswith("-gpu")
    assert {"name": "TF_FORCE_GPU_ALLOW_GROWTH", "value": "true"} in container["env"]
    assert not cpu["image"].endswith("-gpu")


def test_the_pod_runs_as_a_non_root_user() -> None:
    spec = model()
    plan = spec.plan(spec.versions[0], GpuNodes())
    storage = StorageAccess(secret_name="s", s3_anonymous=True)
    args = InferenceServiceArgs(model=spec, namespace="s", domain="d.example", storage=storage)
    pod = deployment(args, spec.versions[0], plan)
    assert pod["spec"]["template"]["spec"]["securityContext"]["runAsUser"] == 1000


def test_version_names_must_end_in_a_number() -> None:
    with pytest.raises(ValidationError, match="TF Serving numbers versions"):
        model(versions=[{"name": "blue", "modelUri": "pvc://m/x", "weight": 100}])
