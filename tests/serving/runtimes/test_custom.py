"""The custom runtime: any image, described by what the platform cannot guess (image, port,
readiness), with what every model gets; its config errors name their paths."""

from __future__ import annotations

from typing import Any

import pytest

from inference_platform.config.errors import ConfigError
from inference_platform.platform.gpu_nodes import GpuNodes
from inference_platform.serving.runtimes.custom import CustomModel
from inference_platform.serving.server_plan import MetricsEndpoint
from inference_platform.stack.config import parse_stack_config, project_values
from tests.conftest import base_config

VERSIONS = [{"name": "v1", "modelUri": "pvc://models/m/1", "weight": 100}]
MINIMAL = {
    "name": "m",
    "runtime": "custom",
    "image": "registry.example.com/server:1.0.0",
    "port": 8080,
    "readiness": {"path": "/ready"},
    "nonRootImage": True,
    "versions": VERSIONS,
}


def model(**settings: Any) -> CustomModel:
    return CustomModel.model_validate(MINIMAL | settings)


def problems(**settings: Any) -> list[tuple[str, str]]:
    config = base_config()
    entry = {key: value for key, value in (MINIMAL | settings).items() if value is not None}
    config["inference-platform:models"].append(entry)
    try:
        parse_stack_config(project_values(config))
    except ConfigError as error:
        return [(p.path, p.message) for p in error.problems]
    return []


def test_a_minimal_server_gets_its_port_probes_and_default_resources() -> None:
    spec = model()
    container = spec.plan(spec.versions[0], GpuNodes()).container
    assert container["image"] == "registry.example.com/server:1.0.0"
    assert "command" not in container  # the image's entrypoint
    assert container["ports"] == [{"name": "http", "containerPort": 8080, "protocol": "TCP"}]
    assert container["readinessProbe"] == {
        "httpGet": {"path": "/ready", "port": 8080},
        "periodSeconds": 10,
        "failureThreshold": 3,
        "timeoutSeconds": 5,
    }
    # Startup: readiness polled for startupTimeout (30m by default).
    assert container["startupProbe"]["httpGet"] == {"path": "/ready", "port": 8080}
    assert container["startupProbe"]["periodSeconds"] * container["startupProbe"]["failureThreshold"] == 1800
    # Liveness by default: a TCP connect to the serving port.
    assert container["livenessProbe"]["tcpSocket"] == {"port": 8080}
    assert container["resources"] == {
        "requests": {"cpu": "1", "memory": "2Gi"},
        "limits": {"cpu": "4", "memory": "8Gi"},
    }
    assert spec.plan(spec.versions[0], GpuNodes()).metrics is None
    assert spec.serving_ports == (8080,)
    assert (spec.example_request().path, spec.example_request().body) == ("/", {})


def test_every_port_the_server_uses_is_a_named_container_port() -> None:
    spec = model(
        grpcPort=9000,
        readiness={"path": "/v2/health/ready", "port": 1026},
        liveness={"port": 1026, "timeoutSeconds": 10},
        metrics={"port": 1027, "path": "/stats"},
        startupTimeout="5m",
        command=["/opt/server/start"],
        args=["--config=/etc/server.json"],
        writablePaths=["/opt/server/logs"],
        runAsUser=1000,
        example={"path": "/v1/completions", "body": {"prompt": "hi"}},
    )
    plan = spec.plan(spec.versions[0], GpuNodes())
    container = plan.container
    assert container["ports"] == [
        {"name": "http", "containerPort": 8080, "protocol": "TCP"},
        {"name": "grpc", "containerPort": 9000, "protocol": "TCP"},
        {"name": "port-1026", "containerPort": 1026, "protocol": "TCP"},
        {"name": "port-1027", "containerPort": 1027, "protocol": "TCP"},
    ]
    assert container["command"] == ["/opt/server/start"]
    assert container["args"] == ["--config=/etc/server.json"]
    assert container["readinessProbe"]["httpGet"] == {"path": "/v2/health/ready", "port": 1026}
    assert container["startupProbe"]["failureThreshold"] == 30
    assert container["livenessProbe"] == {
        "tcpSocket": {"port": 1026},
        "periodSeconds": 10,
        "failureThreshold": 3,
        "timeoutSeconds": 10,
    }
    assert {"name": "writable-0", "mountPath": "/opt/server/logs"} in container["volumeMounts"]
    assert plan.volumes == ({"name": "writable-0", "emptyDir": {}},)
    assert plan.metrics == MetricsEndpoint(1027, "/stats")
    assert plan.run_as_user == 1000
    assert spec.serving_ports == (8080, 9000)
    assert spec.inference_path == "/v1/completions"
    assert spec.example_request().body == {"prompt": "hi"}


def test_metrics_on_the_serving_port_and_a_queue_gauge() -> None:
    spec = model(metrics={"queueGauge": "tgi_queue_size"}, autoscaling={"maxReplicas": 3, "queueDepth": 4})
    assert spec.plan(spec.versions[0], GpuNodes()).metrics == MetricsEndpoint(8080, "/metrics")
    assert spec.queue_metric == "tgi_queue_size"


def test_a_version_may_bring_its_own_image() -> None:
    spec = model(
        image=None,
        versions=[
            {"name": "v1", "modelUri": "pvc://m/1", "weight": 100, "image": "registry.example.com/server:1.0.0"},
            {"name": "v2", "modelUri": "pvc://m/2", "mirrorPercent": 5, "image": "registry.example.com/server:1.1.0"},
        ],
    )
    assert [spec.plan(v, GpuNodes()).container["image"] for v in spec.versions] == [
        "registry.example.com/server:1.0.0",
        "registry.example.com/server:1.1.0",
    ]


M = "models[2]"


@pytest.mark.parametrize(
    ("settings", "expected"),
    [
        ({"port": None}, [(f"{M}.port", "set the port the server listens on")]),
        (
            {"readiness": None},
            [(f"{M}.readiness", "set how to tell the server is ready: {path: /health} or {} for a TCP check")],
        ),
        (
            {"image": None},
            [(f"{M}.image", "a custom runtime runs the image you name: set image (pinned tag or digest)")],
        ),
        (
            {"image": "registry.example.com/server:latest"},
            [
                (
                    f"{M}.image",
                    "'registry.example.com/server:latest' is not pinned: give it a tag other than latest, or an "
                    "@sha256: digest",
                )
            ],
        ),
        (
            {"port": 15021, "metrics": {"port": 15090}},
            [
                (f"{M}.metrics.port", "15090 is Istio's (15000-15099): the sidecar listens there"),
                (f"{M}.port", "15021 is Istio's (15000-15099): the sidecar listens there"),
            ],
        ),
        ({"grpcPort": 8080}, [(f"{M}.grpcPort", "8080 is the HTTP port too: give gRPC a port of its own")]),
        ({"writablePaths": ["/tmp"]}, [(f"{M}.writablePaths[0]", "/tmp is writable already (the scratch volume)")]),
        (
            {"autoscaling": {"maxReplicas": 3, "queueDepth": 4}},
            [
                (
                    f"{M}.autoscaling.queueDepth",
                    "custom exports no gauge of waiting requests: scale on requestsPerSecond, gpuUtilization or CPU",
                )
            ],
        ),
        (
            {"transformer": {"image": "registry.example.com/t:1.0.0", "port": 8080}},
            [(f"{M}.transformer.port", "8080 is taken in the pod (the server uses 8080, Istio 15000-15099)")],
        ),
        (
            {"readiness": {"path": "health"}},
            [(f"{M}.readiness.path", "must be an absolute path (starting with /) without spaces (got 'health')")],
        ),
    ],
)
def test_what_a_custom_server_must_say_is_asked_for_by_path(
    settings: dict[str, Any], expected: list[tuple[str, str]]
) -> None:
    assert problems(**settings) == expected


def test_the_minimal_server_is_valid_in_a_stack() -> None:
    assert problems() == []


# The kubelet refuses (CreateContainerConfigError) a container under runAsNonRoot whose image runs
# as root, or as a user name it cannot check: the render must refuse it first.
NON_ROOT = (
    f"{M}.runAsUser",
    "pods run with runAsNonRoot, and the kubelet refuses to start an image whose USER is root or a name "
    "(CreateContainerConfigError: container has runAsNonRoot and image will run as root): set runAsUser "
    "to a numeric user (e.g. runAsUser: 1000), or nonRootImage: true if the image's USER is a numeric "
    "user other than 0",
)


def test_an_image_that_may_run_as_root_needs_a_user_or_a_declaration() -> None:
    assert problems(nonRootImage=None) == [NON_ROOT]
    assert problems(nonRootImage=False) == [NON_ROOT]
    assert problems(nonRootImage=None, runAsUser=1000) == []
    spec = model(nonRootImage=False, runAsUser=1000)
    assert spec.plan(spec.versions[0], GpuNodes()).run_as_user == 1000
    # Declared non-root: the image's own numeric USER, which the kubelet verifies.
    spec = model()
    assert spec.plan(spec.versions[0], GpuNodes()).run_as_user is None
