"""Payload comparison end to end on loopback, every part real: the program renders a stack whose
iris compares its shadows' answers; a real Envoy routes as the rendered VirtualService says (its
weights and mirror percentages) and carries, on a listener per version standing for that pod's
inbound sidecar, the ext_proc filter exactly as the rendered EnvoyFilter patches it in; three
real MLServer processes serve models trained here (v2 the primary's model, v3 another one); the
comparator runs as its own process with the rendered config. Its counts are then held against
Envoy's own stats and against predictions made here with the same models.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import statistics
import subprocess
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

import joblib
import numpy as np
import pytest
import requests
from prometheus_client.parser import text_string_to_metric_families
from sklearn.datasets import load_iris
from sklearn.linear_model import LogisticRegression

from inference_platform.cli.render import run_program
from inference_platform.cli.render_files import manifest_documents
from inference_platform.cli.stack_file import read_stack_file
from tests import envoy
from tests.conftest import ROOT, base_config, write_stack_file
from tests.ports import free_port
from tests.serving.runtimes.test_mlserver_boot import Server, mlserver, wait_until

pytestmark = pytest.mark.slow

COMPARATOR = ROOT / ".venv-comparator" / "bin" / "inference-comparator"
REQUESTS = 300
VERSIONS = ("v1", "v2", "v3")


def ready(server: Server) -> bool:
    return server.probe("readinessProbe") == 200


def stack() -> dict[str, Any]:
    """iris: v1 live, v2 a 50 % shadow, v3 a 100 % shadow, answers compared; a 15 s timeout, so
    the comparator's window (timeout + 10 s) outlasts a shadow's answer on a loaded machine (with
    5 s, 2 of 300 pairs were once missed by a busy run) and still ends soon after the last request."""
    config = base_config()
    config["inference-platform:models"][0] = {
        "name": "iris",
        "runtime": "mlserver",
        "timeout": "15s",
        "versions": [
            {"name": "v1", "modelUri": "pvc://models/iris/v1", "weight": 100},
            {"name": "v2", "modelUri": "pvc://models/iris/v2", "mirrorPercent": 50},
            {"name": "v3", "modelUri": "pvc://models/iris/v3", "mirrorPercent": 100},
        ],
        "analysis": {"payloads": {"enabled": True}},
    }
    return config


def models() -> dict[str, LogisticRegression]:
    """v1 and v2 the same model; v3 regularised much harder, so it flips some answers."""
    features, labels = load_iris(return_X_y=True)
    primary = LogisticRegression(max_iter=500).fit(features, labels)
    other = LogisticRegression(C=0.01, max_iter=500).fit(features, labels)
    return {"v1": primary, "v2": primary, "v3": other}


def inputs() -> np.ndarray:
    features, _ = load_iris(return_X_y=True)
    rng = np.random.default_rng(7)
    rows: np.ndarray = features[rng.integers(0, len(features), REQUESTS)] + rng.normal(0, 0.3, (REQUESTS, 4))
    return rows.round(3)


def envoy_route(http: dict[str, Any]) -> dict[str, Any]:
    """One rendered VirtualService route in Envoy's terms, as istiod writes it: weighted clusters
    by subset, each mirror a request mirror policy at its percentage (per million), without the
    shadow Host suffix (Istio 1.30 no longer appends it)."""
    clusters = [{"name": d["destination"]["subset"], "weight": d.get("weight", 100)} for d in http["route"]]
    mirrors = [
        {
            "cluster": m["destination"]["subset"],
            "runtime_fraction": {
                "default_value": {"numerator": round(m["percentage"]["value"] * 10_000), "denominator": "MILLION"}
            },
            "disable_shadow_host_suffix_append": True,
        }
        for m in http.get("mirrors", [])
    ]
    route = {
        "weighted_clusters": {"clusters": clusters},
        "request_mirror_policies": mirrors,
        "timeout": http["timeout"],
    }
    return {"match": {"prefix": "/"}, "route": route}


@dataclass
class World:
    front: str
    envoy: envoy.RunningEnvoy
    settings: Path
    comparator_port: int
    directory: Path
    filters: dict[str, dict[str, Any]]
    rows: np.ndarray
    predictions: dict[str, np.ndarray]

    def send(self, rows: np.ndarray) -> list[float]:
        """Each row as an Open Inference Protocol request through the gateway; their latencies."""
        latencies = []
        with requests.Session() as session:
            for row in rows:
                body = {"inputs": [{"name": "input-0", "shape": [1, 4], "datatype": "FP64", "data": row.tolist()}]}
                started = time.monotonic()
                answer = session.post(f"{self.front}/v2/models/iris/infer", json=body, timeout=10)
                latencies.append(time.monotonic() - started)
                assert answer.status_code == 200, answer.text
        return latencies


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    root = tmp_path_factory.mktemp("payloads")
    rendered = run_program("e2e", read_stack_file(write_stack_file(root / "Pulumi.e2e.yaml", stack())))
    objects = {(o["kind"], o["metadata"]["name"]): o for o in manifest_documents(rendered)}
    (http, *_) = objects["VirtualService", "iris"]["spec"]["http"]
    filters = {
        v: objects["EnvoyFilter", f"iris-{v}-capture"]["spec"]["configPatches"][0]["patch"]["value"] for v in VERSIONS
    }
    settings = root / "comparator.json"
    settings.write_text(objects["ConfigMap", "inference-comparator"]["data"]["comparator.json"])

    trained, rows = models(), inputs()
    predictions = {v: model.predict(rows) for v, model in trained.items()}

    def writer(model: LogisticRegression) -> Callable[[Path], None]:
        return lambda directory: joblib.dump(model, directory / "model.joblib")

    with contextlib.ExitStack() as stack_:
        servers = {v: stack_.enter_context(mlserver(root / f"mlserver-{v}", writer(trained[v]))) for v in VERSIONS}
        for server in servers.values():  # live is not ready: a shadow still loading answers errors
            assert wait_until(partial(ready, server)), "iris never became ready"
        sidecars = {v: free_port() for v in VERSIONS}
        front, admin, comparator_port = free_port(), free_port(), free_port()
        (cluster_name,) = {f["typed_config"]["grpc_service"]["envoy_grpc"]["cluster_name"] for f in filters.values()}
        listeners = [envoy.http_listener("gateway", front, [envoy_route(http)])]
        listeners += [
            envoy.http_listener(
                f"sidecar_{v}",
                sidecars[v],
                [{"match": {"prefix": "/"}, "route": {"cluster": f"server-{v}"}}],
                [filters[v]],
            )
            for v in VERSIONS
        ]
        clusters = [envoy.cluster(v, sidecars[v]) for v in VERSIONS]
        clusters += [envoy.cluster(f"server-{v}", int(servers[v].http.rpartition(":")[2])) for v in VERSIONS]
        clusters.append(envoy.cluster(cluster_name, comparator_port, http2=True))
        running = stack_.enter_context(envoy.running(envoy.bootstrap(admin, listeners, clusters), root))
        yield World(f"http://127.0.0.1:{front}", running, settings, comparator_port, root, filters, rows, predictions)


@dataclass
class Comparator:
    process: subprocess.Popen[bytes]
    metrics_url: str

    def samples(self) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
        text = requests.get(self.metrics_url, timeout=5).text
        return {
            (sample.name, tuple(sorted(sample.labels.items()))): sample.value
            for family in text_string_to_metric_families(text)
            for sample in family.samples
        }

    def count(self, name: str, **labels: str) -> float:
        wanted = set(labels.items())
        return sum(value for (found, pairs), value in self.samples().items() if found == name and wanted <= set(pairs))


@pytest.fixture
def comparator(world: World) -> Iterator[Comparator]:
    assert COMPARATOR.exists(), "the comparator lives in .venv-comparator: run `make test`, which builds it"
    metrics = free_port()
    command = [str(COMPARATOR), "--config", str(world.settings), "--host", "127.0.0.1"]
    command += ["--grpc-port", str(world.comparator_port), "--metrics-port", str(metrics)]
    log = (world.directory / "comparator.log").open("a")
    process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    running = Comparator(process, f"http://127.0.0.1:{metrics}/metrics")
    try:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            assert process.poll() is None, (world.directory / "comparator.log").read_text()
            with contextlib.suppress(requests.RequestException):
                requests.get(running.metrics_url, timeout=1)
                break
            time.sleep(0.2)
        yield running
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGCONT)
            os.killpg(process.pid, signal.SIGTERM)
        process.wait(timeout=20)
        log.close()


def wait_for(condition: Callable[[], bool], seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.5)
    return condition()


def test_pairs_match_envoys_mirrors_and_agreement_matches_the_models(world: World, comparator: Comparator) -> None:
    before = world.envoy.stats()
    world.send(world.rows)

    def mirrored_now() -> dict[str, int]:
        after = world.envoy.stats()
        return {
            v: after[f"cluster.{v}.upstream_rq_completed"] - before.get(f"cluster.{v}.upstream_rq_completed", 0)
            for v in ("v2", "v3")
        }

    def mirrors_settled() -> bool:
        # A mirror is sent beside the live request and may still be in flight when its answer
        # has come back: count once no mirror cluster has a request open.
        stats = world.envoy.stats()
        open_ = ("upstream_rq_active", "upstream_rq_pending_active")
        return all(stats.get(f"cluster.{v}.{gauge}", 0) == 0 for v in ("v2", "v3") for gauge in open_)

    assert wait_for(mirrors_settled, 20), world.envoy.stats()
    mirrored = mirrored_now()
    assert mirrored["v3"] == REQUESTS  # mirrored at 100 %
    assert 0.35 * REQUESTS < mirrored["v2"] < 0.65 * REQUESTS  # at 50 %, chosen at random

    def pairs(version: str) -> float:
        return comparator.count("inference_payload_pairs_total", model="iris", version=version)

    assert wait_for(lambda: pairs("v2") == mirrored["v2"] and pairs("v3") == REQUESTS, 20), (
        pairs("v2"),
        pairs("v3"),
        mirrored,
    )
    # v2 is the primary's model: every pair agrees. v3 differs where the two models' classes do.
    differ = int((world.predictions["v1"] != world.predictions["v3"]).sum())
    assert 0 < differ < REQUESTS // 2
    assert comparator.count("inference_payload_pairs_total", version="v2", result="agree") == mirrored["v2"]
    assert comparator.count("inference_payload_pairs_total", version="v3", result="disagree") == differ
    assert comparator.count("inference_payload_pairs_total", version="v3", result="agree") == REQUESTS - differ
    assert comparator.count("inference_payload_dropped_total") == 0
    # Once the window (15 s timeout + 10 s) has passed: the primaries v2 never saw are unpaired, nothing else.
    assert wait_for(
        lambda: (
            comparator.count("inference_payload_unpaired_total", version="v2", side="primary")
            == REQUESTS - mirrored["v2"]
        ),
        40,
    )
    assert comparator.count("inference_payload_unpaired_total", version="v3") == 0
    assert comparator.count("inference_payload_unpaired_total", side="shadow") == 0
    assert comparator.count("inference_payload_max_abs_difference_count") == REQUESTS + mirrored["v2"]


def test_a_comparator_that_is_gone_costs_the_models_nothing(world: World) -> None:
    """Nothing listens on the comparator's port: every request is answered, as fast as before."""
    latencies = world.send(world.rows[:60])
    assert statistics.median(latencies) < 0.25
    assert max(latencies) < 1


def test_a_frozen_comparator_costs_the_models_nothing(world: World, comparator: Comparator) -> None:
    """The comparator's process stopped (SIGSTOP): its socket accepts, nothing answers. The
    primary's answers do not wait for it."""
    with_comparator = world.send(world.rows[:60])
    os.killpg(comparator.process.pid, signal.SIGSTOP)
    frozen = world.send(world.rows[60:120])
    os.killpg(comparator.process.pid, signal.SIGCONT)
    assert statistics.median(frozen) < statistics.median(with_comparator) + 0.05
    assert max(frozen) < 1


def test_the_filters_envoy_ran_are_the_rendered_ones(world: World) -> None:
    config = json.loads((world.directory / "envoy.json").read_text())
    carried = {
        listener["name"]: listener["filter_chains"][0]["filters"][0]["typed_config"]["http_filters"][0]
        for listener in config["static_resources"]["listeners"]
        if listener["name"].startswith("sidecar_")
    }
    assert carried == {f"sidecar_{v}": world.filters[v] for v in VERSIONS}
