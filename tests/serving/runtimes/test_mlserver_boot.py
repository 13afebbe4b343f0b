"""A real MLServer boots with the generated settings and serves a model the test trains."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import joblib
import pytest
import requests
from sklearn.datasets import load_iris
from sklearn.linear_model import LogisticRegression

from inference_platform.platform.gpu_nodes import GpuNodes
from inference_platform.serving.runtimes.mlserver import MLServerModel
from inference_platform.serving.server_plan import ServerPlan
from tests.ports import free_port

pytestmark = pytest.mark.slow

STARTUP_SECONDS = 90
SPEC = MLServerModel.model_validate(
    {
        "name": "iris",
        "runtime": "mlserver",
        "versions": [{"name": "v1", "modelUri": "pvc://models/iris/v1", "weight": 100}],
    }
)


@dataclass(frozen=True)
class Server:
    http: str
    metrics: str
    plan: ServerPlan

    def probe(self, kind: str) -> int:
        """Status code of the generated probe of this kind (readinessProbe, ...)."""
        path = self.plan.container[kind]["httpGet"]["path"]
        return requests.get(f"{self.http}{path}", timeout=5).status_code


def train_iris(model_dir: Path) -> None:
    features, labels = load_iris(return_X_y=True)
    joblib.dump(LogisticRegression(max_iter=500).fit(features, labels), model_dir / "model.joblib")


@dataclass
class Started:
    server: Server
    process: subprocess.Popen[bytes]
    log: Path


@contextlib.contextmanager
def start_mlserver(root: Path, write_model: Callable[[Path], None]) -> Iterator[Started]:
    """Start MLServer with the generated files, verbatim except for what the pod provides:
    the mount points (/etc/mlserver, /mnt/models, /tmp) and ports on loopback instead of 0.0.0.0."""
    plan = SPEC.plan(SPEC.versions[0], GpuNodes())
    config_dir, model_dir, scratch = root / "etc-mlserver", root / "mnt-models", root / "tmp"
    for directory in (config_dir, model_dir, scratch):
        directory.mkdir(parents=True)
    write_model(model_dir)

    settings = json.loads(plan.config_files["settings.json"])
    ports = {key: free_port() for key in ("http_port", "grpc_port", "metrics_port")}
    settings |= ports | {"host": "127.0.0.1", "model_repository_root": str(config_dir)}
    for key in ("metrics_dir", "environments_dir"):
        settings[key] = settings[key].replace("/tmp", str(scratch), 1)
    model_settings = json.loads(plan.config_files["model-settings.json"])
    model_settings["parameters"]["uri"] = str(model_dir)
    (config_dir / "settings.json").write_text(json.dumps(settings))
    (config_dir / "model-settings.json").write_text(json.dumps(model_settings))

    log_path = root / "server.log"
    command = [str(Path(sys.executable).parent / "mlserver"), "start", str(config_dir)]
    with log_path.open("w") as log:
        # Its own session, so its worker processes go with it.
        process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        server = Server(f"http://127.0.0.1:{ports['http_port']}", f"http://127.0.0.1:{ports['metrics_port']}", plan)
        try:
            yield Started(server, process, log_path)
        finally:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGTERM)
            try:
                process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait()


@contextlib.contextmanager
def mlserver(root: Path, write_model: Callable[[Path], None]) -> Iterator[Server]:
    """A started MLServer, once it answers /v2/health/live."""
    with start_mlserver(root, write_model) as started:
        deadline = time.monotonic() + STARTUP_SECONDS
        while time.monotonic() < deadline:
            assert started.process.poll() is None, started.log.read_text()
            try:
                if requests.get(f"{started.server.http}/v2/health/live", timeout=2).status_code == 200:
                    break
            except requests.RequestException:  # not listening yet, or busy starting
                pass
            time.sleep(0.5)
        else:
            pytest.fail("MLServer did not start:\n" + started.log.read_text())
        yield started.server


def wait_until(condition: Callable[[], bool], seconds: float = STARTUP_SECONDS) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.5)
    return False


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    with mlserver(tmp_path_factory.mktemp("mlserver"), train_iris) as running:
        assert wait_until(lambda: running.probe("startupProbe") == 200), "the model never became ready"
        yield running


def test_generated_probes_pass_on_a_ready_server(server: Server) -> None:
    assert server.probe("startupProbe") == 200
    assert server.probe("readinessProbe") == 200
    assert server.probe("livenessProbe") == 200
    assert requests.get(f"{server.http}/v2/health/ready", timeout=5).status_code == 200
    assert requests.get(f"{server.http}/v2/models/iris/ready", timeout=5).status_code == 200


def test_the_stack_outputs_example_request_gets_a_prediction(server: Server) -> None:
    example = SPEC.example_request()

    response = requests.post(f"{server.http}{example.path}", json=example.body, timeout=10)

    assert response.status_code == 200, response.text
    assert response.json()["outputs"][0]["data"] == [0]  # iris setosa: sepal 5.1 x 3.5, petal 1.4 x 0.2


def test_metrics_are_served_in_prometheus_format(server: Server) -> None:
    # An inference of its own: the counter appears with the first request, whichever test ran first.
    example = SPEC.example_request()
    assert requests.post(f"{server.http}{example.path}", json=example.body, timeout=10).status_code == 200

    assert server.plan.metrics is not None
    response = requests.get(f"{server.metrics}{server.plan.metrics.path}", timeout=5)
    assert response.status_code == 200
    assert "# TYPE" in response.text
    assert "model_infer_request_success" in response.text


def test_a_model_that_fails_to_load_never_passes_the_readiness_probe(tmp_path: Path) -> None:
    """MLServer stops when its model cannot load (the container restarts), and until then the
    generated readiness probe, the version's own endpoint, never says ready."""

    def corrupt_model(model_dir: Path) -> None:
        (model_dir / "model.joblib").write_bytes(b"not a model")

    with start_mlserver(tmp_path, corrupt_model) as started:
        answers: list[int] = []
        deadline = time.monotonic() + STARTUP_SECONDS
        while started.process.poll() is None and time.monotonic() < deadline:
            with contextlib.suppress(requests.RequestException):
                answers.append(started.server.probe("readinessProbe"))
            time.sleep(0.2)
        stopped_by_itself = started.process.poll() is not None
        log = started.log.read_text()

    # It exits 0, which a Deployment's pod restarts all the same (restartPolicy: Always).
    assert stopped_by_itself, "MLServer kept running with a model it could not load"
    assert 200 not in answers, answers
    assert "Couldn't load model 'iris'" in log, log
