"""A real TorchServe boots with the generated config.properties and serves a TorchScript model
that the test traces and archives with torch-model-archiver."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import requests
import torch

from inference_platform.platform.gpu_nodes import GpuNodes
from inference_platform.serving.runtimes import torchserve
from inference_platform.serving.runtimes.torchserve import TorchServeModel
from tests.ports import free_port
from tests.serving.runtimes.test_mlserver_boot import wait_until

pytestmark = pytest.mark.slow

SPEC = TorchServeModel.model_validate(
    {
        "name": "iris",
        "runtime": "torchserve",
        "batchSize": 4,
        "maxBatchDelayMs": 20,
        "maxWorkers": 2,
        "versions": [{"name": "v1", "modelUri": "pvc://models/iris/v1", "weight": 100}],
    }
)
HANDLER = textwrap.dedent(
    """
    import json
    import os

    import torch

    _model = None


    def handle(data, context):
        global _model
        if _model is None:
            _model = torch.jit.load(os.path.join(context.system_properties["model_dir"], "model.pt"))
        if data is None:
            return None
        rows = []
        for item in data:
            body = item.get("body") or item.get("data")
            if isinstance(body, (bytes, bytearray)):
                body = json.loads(body)
            rows.append(body["data"])
        with torch.no_grad():
            return _model(torch.tensor(rows, dtype=torch.float32)).tolist()
    """
)


@dataclass(frozen=True)
class Server:
    inference: str
    management: str
    metrics: str
    ready_check: list[str]


def archive(store: Path, work: Path) -> None:
    """Trace a fixed linear model and package it as TorchServe expects: iris.mar, version 1.0."""
    model = torch.nn.Linear(4, 2)
    with torch.no_grad():
        model.weight.copy_(torch.tensor([[1.0, 0.0, 0.0, 0.0], [0.0, 1.0, 1.0, 1.0]]))
        model.bias.zero_()
    torch.jit.trace(model, torch.zeros(1, 4)).save(str(work / "model.pt"))  # type: ignore[no-untyped-call]
    (work / "handler.py").write_text(HANDLER)
    archiver = Path(sys.executable).parent / "torch-model-archiver"
    subprocess.run(
        [str(archiver), "--model-name", "iris", "--version", SPEC.mar_version, "--serialized-file",
         str(work / "model.pt"), "--handler", str(work / "handler.py"), "--export-path", str(store)],
        check=True,
    )  # fmt: skip
    assert (store / SPEC.archive).exists()


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    if shutil.which("java") is None:
        pytest.fail("TorchServe needs Java 17 on PATH")
    root = tmp_path_factory.mktemp("torchserve")
    store, work, scratch, config_dir = root / "model-store", root / "work", root / "tmp", root / "etc-torchserve"
    for directory in (store, work, scratch, config_dir):
        directory.mkdir()
    archive(store, work)

    plan = SPEC.plan(SPEC.versions[0], GpuNodes())
    # The generated file, verbatim except for what the pod provides: the model store's mount
    # point and the ports (loopback, free ones, instead of 0.0.0.0:8080-8082).
    ports = {"inference": free_port(), "management": free_port(), "metrics": free_port()}
    lines = plan.config_files["config.properties"].splitlines()
    replacements = {
        "inference_address": f"http://127.0.0.1:{ports['inference']}",
        "management_address": f"http://127.0.0.1:{ports['management']}",
        "metrics_address": f"http://127.0.0.1:{ports['metrics']}",
        "model_store": str(store),
    }
    config = [f"{key}={replacements.get(key, value)}" for key, value in (line.split("=", 1) for line in lines)]
    # TorchServe also serves gRPC, on 0.0.0.0:7070 and 7071 unless told otherwise: two servers at
    # once (on two xdist workers, or two test runs on one machine) must not share those.
    config += [
        "grpc_inference_address=127.0.0.1",
        f"grpc_inference_port={free_port()}",
        "grpc_management_address=127.0.0.1",
        f"grpc_management_port={free_port()}",
    ]
    (config_dir / "config.properties").write_text("\n".join(config) + "\n")

    container = plan.container
    env = {e["name"]: e["value"].replace("/tmp", str(scratch)) for e in container["env"]}
    command = [container["command"][0], *container["command"][1:]]
    command[0] = str(Path(sys.executable).parent / command[0])
    command[command.index("--ts-config") + 1] = str(config_dir / "config.properties")
    log_path = root / "server.log"
    with log_path.open("w") as log:
        process = subprocess.Popen(
            command,
            cwd=scratch,
            env=os.environ | env | {"PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}"},
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        ready_check = [
            part.replace(f":{torchserve.MANAGEMENT_PORT}/", f":{ports['management']}/")
            for part in plan.container["readinessProbe"]["exec"]["command"]
        ]
        running = Server(
            f"http://127.0.0.1:{ports['inference']}",
            f"http://127.0.0.1:{ports['management']}",
            f"http://127.0.0.1:{ports['metrics']}",
            ready_check,
        )
        try:
            ready = wait_until(lambda: process.poll() is None and probe(running.ready_check) == 0, seconds=180)
            assert ready, "TorchServe never became ready:\n" + log_path.read_text()[-5000:]
            yield running
        finally:
            os.killpg(process.pid, signal.SIGTERM)
            try:
                process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, signal.SIGKILL)


def probe(command: list[str]) -> int:
    return subprocess.run(command, capture_output=True, check=False, timeout=10).returncode


def test_the_generated_readiness_probe_passes_and_ping_is_healthy(server: Server) -> None:
    assert probe(server.ready_check) == 0
    response = requests.get(f"{server.inference}/ping", timeout=5)
    assert response.status_code == 200
    assert response.json() == {"status": "Healthy"}


def test_the_model_loaded_with_the_generated_worker_and_batching_settings(server: Server) -> None:
    described = requests.get(f"{server.management}/models/iris", timeout=5).json()

    assert len(described) == 1
    model = described[0]
    assert model["modelVersion"] == SPEC.mar_version
    assert (model["minWorkers"], model["maxWorkers"]) == (SPEC.min_workers, SPEC.max_workers)
    assert (model["batchSize"], model["maxBatchDelay"]) == (4, 20)
    assert any(worker["status"] == "READY" for worker in model["workers"])


def test_the_stack_outputs_example_request_gets_a_prediction(server: Server) -> None:
    example = SPEC.example_request()

    response = requests.post(f"{server.inference}{example.path}", json=example.body, timeout=30)

    assert response.status_code == 200, response.text
    assert response.json() == pytest.approx([1.0, 9.0])  # the traced weights: x0, and x1 + x2 + x3


def test_metrics_are_served_in_prometheus_format(server: Server) -> None:
    # An inference of its own, so the counter has counted, whichever test ran first.
    example = SPEC.example_request()
    assert requests.post(f"{server.inference}{example.path}", json=example.body, timeout=30).status_code == 200

    response = requests.get(f"{server.metrics}{torchserve.METRICS_PATH}", timeout=5)

    assert response.status_code == 200
    assert "# TYPE ts_inference_requests_total counter" in response.text


def test_the_management_api_is_not_on_the_pod_network() -> None:
    properties = dict(
        line.split("=", 1)
        for line in SPEC.plan(SPEC.versions[0], GpuNodes()).config_files["config.properties"].splitlines()
    )
    assert properties["management_address"].startswith("http://127.0.0.1:")
    assert properties["inference_address"] == "http://0.0.0.0:8080"
    assert properties["metrics_address"] == "http://0.0.0.0:8082"
    assert properties["disable_token_authorization"] == "true"
    assert properties["enable_model_api"] == "false"
    assert properties["metrics_mode"] == "prometheus"
