"""The generated scrape jobs, run by a real Prometheus against exporters on loopback."""

from __future__ import annotations

import http.server
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any, ClassVar

import pytest
from pydantic import ValidationError

from inference_platform.platform.prometheus import (
    PrometheusConfig,
    pods_job,
    prometheus_values,
    scrape_configs,
    service_endpoints_job,
)
from inference_platform.serving.runtimes.vllm import VLLMModel
from tests.platform.prometheus_harness import (
    PROMTOOL,
    RunningPrometheus,
    config_file,
    prometheus,
    write_targets,
)
from tests.serving import engine_histograms

pytestmark = pytest.mark.slow

GPU_SERIES = 'DCGM_FI_DEV_GPU_UTIL{gpu="0",namespace="service",pod="resnet-v1-7d9f",container="predictor"} 60\n'
APP_SERIES = 'model_infer_request_success{model="iris"} 7\n'
# What a sidecar's merged endpoint adds: Envoy's request counter, which names no pod itself.
ISTIO_SERIES = 'istio_requests_total{reporter="destination",response_code="200"} 42\n'
# An exporter scraped as a pod that reports for another pod (as dcgm-exporter does) names it.
FOREIGN_SERIES = 'gpu_owner_util{namespace="service",pod="resnet-v1-7d9f",container="predictor"} 60\n'


class _Exporter(http.server.BaseHTTPRequestHandler):
    """Serves fixed metrics at a few paths, like an exporter or a sidecar would."""

    bodies: ClassVar[dict[str, str]] = {
        "/custom/metrics": GPU_SERIES,
        "/stats/prometheus": APP_SERIES + ISTIO_SERIES + FOREIGN_SERIES,
        "/metrics": "up_marker 1\n",
    }

    def do_GET(self) -> None:
        body = self.bodies.get(self.path)
        self.send_response(200 if body else 404)
        self.send_header("Content-Type", "text/plain; version=0.0.4")
        self.end_headers()
        self.wfile.write((body or "").encode())

    def log_message(self, *args: Any) -> None:
        pass


def engine_series() -> str:
    """One bucket of vLLM's time-to-first-token histogram as the engine exports it (its own labels
    only, read from the pinned wheel), merged into the sidecar's endpoint as the app's metrics are."""
    assert VLLMModel.TTFT_HISTOGRAM is not None
    histogram = engine_histograms.vllm()[VLLMModel.TTFT_HISTOGRAM]
    own = {label: {"model_name": "iris"}.get(label, "0") for label in histogram.labels}
    return engine_histograms.selector(f"{histogram.name}_bucket", own | {"le": "0.25"}) + " 7\n"


@pytest.fixture(scope="module")
def exporter_port() -> Iterator[int]:
    _Exporter.bodies = _Exporter.bodies | {"/stats/prometheus": _Exporter.bodies["/stats/prometheus"] + engine_series()}
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Exporter)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield server.server_address[1]
    server.shutdown()
    server.server_close()


def service_target(name: str, **annotations: str) -> dict[str, str]:
    """An endpoint of a Service as endpointslice discovery reports it."""
    target = {
        "__address__": "127.0.0.1:1",  # the endpoint's own port: the port annotation must redirect it
        "__meta_kubernetes_namespace": "gpu-monitoring",
        "__meta_kubernetes_service_name": name,
        "__meta_kubernetes_service_label_app_kubernetes_io_name": name,
    }
    return target | {
        f"__meta_kubernetes_service_annotation_prometheus_io_{key}": value for key, value in annotations.items()
    }


def pod_target(name: str, phase: str, **annotations: str) -> dict[str, str]:
    target = {
        "__address__": "127.0.0.1:1",
        "__meta_kubernetes_namespace": "service",
        "__meta_kubernetes_pod_name": name,
        "__meta_kubernetes_pod_phase": phase,
        "__meta_kubernetes_pod_label_app": "iris",
        "__meta_kubernetes_pod_label_version": "v1",
    }
    return target | {
        f"__meta_kubernetes_pod_annotation_prometheus_io_{key}": value for key, value in annotations.items()
    }


@pytest.fixture(scope="module")
def running(tmp_path_factory: pytest.TempPathFactory, exporter_port: int) -> Iterator[RunningPrometheus]:
    directory = tmp_path_factory.mktemp("prometheus")
    port = str(exporter_port)
    write_targets(
        directory,
        "kubernetes-service-endpoints",
        [
            service_target("dcgm-exporter", scrape="true", port=port, path="/custom/metrics"),
            service_target("plain-https", scrape="true", port=port, scheme="https"),
            service_target("opted-out", scrape="false", port=port),
            service_target("unannotated"),
        ],
    )
    write_targets(
        directory,
        "kubernetes-pods",
        [
            pod_target("iris-v1-abc", "Running", scrape="true", port=port, path="/stats/prometheus"),
            pod_target("iris-v1-old", "Succeeded", scrape="true", port=port, path="/stats/prometheus"),
            # Still downloading its model (an init container): annotated, but nothing to scrape yet.
            pod_target("iris-v1-downloading", "Pending", scrape="true", port=port, path="/stats/prometheus"),
            pod_target("iris-v1-crashed", "Failed", scrape="true", port=port, path="/stats/prometheus"),
            pod_target("sidecarless", "Running"),
        ],
    )
    with prometheus(directory, config_file(directory, scrape_configs())) as server:
        deadline = time.monotonic() + 30
        while len(server.api("targets")["activeTargets"]) < 3:
            if time.monotonic() > deadline:
                pytest.fail(f"Prometheus found {server.api('targets')} instead of three active targets")
            time.sleep(0.3)  # discovery hands the targets files to the scrape pools
        yield server


def wait_for(running: RunningPrometheus, expression: str, seconds: float = 20) -> list[dict[str, Any]]:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        result = running.query(expression)
        if result:
            return result
        time.sleep(0.5)
    raise AssertionError(f"no series for {expression}")


def targets(running: RunningPrometheus) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    data = running.api("targets")
    return data["activeTargets"], data["droppedTargets"]


def test_only_opted_in_targets_are_kept(running: RunningPrometheus) -> None:
    active, dropped = targets(running)

    kept = sorted(t["labels"].get("kubernetes_name") or t["labels"]["pod"] for t in active)
    assert kept == ["dcgm-exporter", "iris-v1-abc", "plain-https"]
    dropped_names = sorted(
        t["discoveredLabels"].get("__meta_kubernetes_service_name")
        or t["discoveredLabels"]["__meta_kubernetes_pod_name"]
        for t in dropped
    )
    assert dropped_names == [
        "iris-v1-crashed",
        "iris-v1-downloading",
        "iris-v1-old",
        "opted-out",
        "sidecarless",
        "unannotated",
    ]


@pytest.mark.parametrize(
    ("pod", "phase"),
    [("iris-v1-downloading", "Pending"), ("iris-v1-crashed", "Failed"), ("iris-v1-old", "Succeeded")],
)
def test_pods_that_are_not_running_are_dropped_though_annotated(
    running: RunningPrometheus, pod: str, phase: str
) -> None:
    """Only a Running pod is scraped: one still pulling its model (Pending) or gone (Failed, Succeeded) is not."""
    active, dropped = targets(running)

    (target,) = [t for t in dropped if t["discoveredLabels"].get("__meta_kubernetes_pod_name") == pod]
    assert target["discoveredLabels"]["__meta_kubernetes_pod_phase"] == phase
    assert target["discoveredLabels"]["__meta_kubernetes_pod_annotation_prometheus_io_scrape"] == "true"
    assert pod not in [t["labels"].get("pod") for t in active]
    # The running pod's series arrive; none ever names this one.
    wait_for(running, 'up{pod="iris-v1-abc"}')
    assert running.query(f'up{{pod="{pod}"}}') == []


def test_annotations_rewrite_port_path_and_scheme(running: RunningPrometheus, exporter_port: int) -> None:
    active, _ = targets(running)
    urls = {t["labels"].get("kubernetes_name") or t["labels"]["pod"]: t["scrapeUrl"] for t in active}

    assert urls["dcgm-exporter"] == f"http://127.0.0.1:{exporter_port}/custom/metrics"
    assert urls["plain-https"] == f"https://127.0.0.1:{exporter_port}/metrics"
    assert urls["iris-v1-abc"] == f"http://127.0.0.1:{exporter_port}/stats/prometheus"


def test_service_labels_and_kubernetes_names_are_added(running: RunningPrometheus) -> None:
    (series,) = wait_for(running, 'up{kubernetes_name="dcgm-exporter"}')
    labels = series["metric"]
    assert labels["kubernetes_namespace"] == "gpu-monitoring"
    assert labels["app_kubernetes_io_name"] == "dcgm-exporter"


def test_exporter_labels_name_the_workload_pod_not_the_exporter(running: RunningPrometheus) -> None:
    (series,) = wait_for(running, "DCGM_FI_DEV_GPU_UTIL")
    labels = series["metric"]
    assert (labels["namespace"], labels["pod"], labels["container"]) == ("service", "resnet-v1-7d9f", "predictor")
    assert labels["kubernetes_name"] == "dcgm-exporter"
    assert series["value"][1] == "60"


def test_pod_metrics_carry_namespace_pod_and_pod_labels(running: RunningPrometheus) -> None:
    (series,) = wait_for(running, "model_infer_request_success")
    labels = series["metric"]
    assert (labels["namespace"], labels["pod"], labels["app"], labels["version"]) == (
        "service",
        "iris-v1-abc",
        "iris",
        "v1",
    )


def test_engine_histograms_keep_their_labels_beside_the_pods(running: RunningPrometheus) -> None:
    """What the token-latency rules split by (namespace, app, version) and sum over (the engine's own
    labels, the pod): all of them on the scraped series."""
    (series,) = wait_for(running, f"{VLLMModel.TTFT_HISTOGRAM}_bucket")
    labels = series["metric"]
    assert (labels["namespace"], labels["app"], labels["version"], labels["pod"]) == (
        "service",
        "iris",
        "v1",
        "iris-v1-abc",
    )
    assert (labels["model_name"], labels["engine"], labels["le"]) == ("iris", "0", "0.25")


def test_istio_requests_name_the_pod_the_adapter_asks_about(running: RunningPrometheus) -> None:
    (series,) = wait_for(running, "istio_requests_total")
    labels = series["metric"]
    assert (labels["namespace"], labels["pod"], labels["reporter"]) == ("service", "iris-v1-abc", "destination")


def test_a_pods_own_labels_win_over_the_targets(running: RunningPrometheus) -> None:
    """honor_labels: the scraped pod is iris-v1-abc, but the series names resnet-v1-7d9f and keeps it."""
    (series,) = wait_for(running, "gpu_owner_util")
    labels = series["metric"]
    assert (labels["namespace"], labels["pod"], labels["container"]) == ("service", "resnet-v1-7d9f", "predictor")
    assert not [name for name in labels if name.startswith("exported_")]


def test_promtool_accepts_the_generated_configuration(tmp_path: Path) -> None:
    config = config_file(tmp_path, scrape_configs(), scrape_interval="30s")
    for job in ("kubernetes-service-endpoints", "kubernetes-pods"):
        (tmp_path / f"{job}.yml").write_text("[]\n")

    done = subprocess.run([PROMTOOL, "check", "config", str(config)], capture_output=True, text=True, check=False)

    assert done.returncode == 0, done.stdout + done.stderr
    assert "SUCCESS" in done.stdout + done.stderr


def test_the_chart_gets_exactly_these_jobs_and_nothing_by_default() -> None:
    values = prometheus_values(PrometheusConfig())

    assert values["serverFiles"]["prometheus.yml"]["scrape_configs"] == [service_endpoints_job(), pods_job()]
    assert all(job == {"enabled": False} for job in values["scrapeConfigs"].values())
    assert len(values["scrapeConfigs"]) == 10
    for subchart in ("alertmanager", "kube-state-metrics", "prometheus-node-exporter", "prometheus-pushgateway"):
        assert values[subchart] == {"enabled": False}


def test_retention_storage_and_the_scraper_label_reach_the_server() -> None:
    config = PrometheusConfig.model_validate(
        {"retention": "30d", "retentionSize": "40GB", "storageSize": "100Gi", "storageClass": "fast-ssd"}
    )
    server = prometheus_values(config)["server"]
    assert (server["retention"], server["retentionSize"]) == ("30d", "40GB")
    assert server["persistentVolume"] == {"enabled": True, "size": "100Gi", "storageClass": "fast-ssd"}
    # Model pods' network policies let in pods with this label from Prometheus' namespace.
    assert server["podLabels"] == config.scraper.pod_labels == {"inference-platform.io/role": "metrics-scraper"}
    defaults = prometheus_values(PrometheusConfig())["server"]
    assert "storageClass" not in defaults["persistentVolume"]
    # requests_per_second is rate(...[1m]): 15 s scrapes put four samples in each window.
    assert defaults["global"]["scrape_interval"] == "15s"


def test_bundled_subcharts_are_off_unless_listed() -> None:
    values = prometheus_values(PrometheusConfig.model_validate({"subcharts": ["kube-state-metrics"]}))
    assert values["kube-state-metrics"] == {"enabled": True}
    assert values["alertmanager"] == values["prometheus-pushgateway"] == {"enabled": False}
    with pytest.raises(ValidationError, match="alertmanager"):
        PrometheusConfig.model_validate({"subcharts": ["grafana"]})
