"""Running the real Prometheus (Debian's build) on the generated scrape configuration.

Debian builds Prometheus without Kubernetes service discovery, so each job's
`kubernetes_sd_configs` is swapped for `file_sd_configs` whose targets carry the labels
Kubernetes discovery would attach (`__meta_kubernetes_*`). The relabel rules stay untouched.
"""

from __future__ import annotations

import copy
import re
import shutil
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import requests
import yaml

from tests.ports import free_port

PROMETHEUS = shutil.which("prometheus") or "/usr/bin/prometheus"
PROMTOOL = shutil.which("promtool") or "/usr/bin/promtool"
# One line of the text exposition per status code: ...{code="200",handler="/api/v1/query"} 7
INSTANT_QUERIES = re.compile(
    r'^prometheus_http_requests_total\{[^}]*handler="/api/v1/query"[^}]*\} (\S+)$', re.MULTILINE
)


def with_file_discovery(jobs: list[dict[str, Any]], directory: Path) -> list[dict[str, Any]]:
    """The jobs with Kubernetes discovery replaced by one targets file per job."""
    swapped = copy.deepcopy(jobs)
    for job in swapped:
        assert job.pop("kubernetes_sd_configs"), job["job_name"]
        job["file_sd_configs"] = [{"files": [str(directory / f"{job['job_name']}.yml")]}]
    return swapped


def write_targets(directory: Path, job: str, targets: list[dict[str, str]]) -> None:
    """Targets as Kubernetes discovery would report them: an address and meta labels each."""
    groups = [
        {"targets": [t["__address__"]], "labels": {k: v for k, v in t.items() if k != "__address__"}} for t in targets
    ]
    (directory / f"{job}.yml").write_text(yaml.safe_dump(groups))


def config_file(directory: Path, jobs: list[dict[str, Any]], scrape_interval: str = "1s") -> Path:
    path = directory / "prometheus.yml"
    document = {
        "global": {"scrape_interval": scrape_interval, "evaluation_interval": scrape_interval},
        "scrape_configs": with_file_discovery(jobs, directory),
    }
    path.write_text(yaml.safe_dump(document, sort_keys=False))
    return path


def backfilled(directory: Path, openmetrics: str) -> Path:
    """Series (OpenMetrics text, ending in # EOF) written as TSDB blocks under directory/data by
    promtool; the configuration file of a Prometheus with no scrape jobs, which serves only them."""
    source = directory / "series.om"
    source.write_text(openmetrics)
    done = subprocess.run(
        [PROMTOOL, "tsdb", "create-blocks-from", "openmetrics", str(source), str(directory / "data")],
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        raise RuntimeError(f"promtool could not backfill the series: {done.stderr}")
    source.unlink()
    config = directory / "prometheus.yml"
    config.write_text("global:\n  scrape_interval: 15s\n")
    return config


@dataclass(frozen=True)
class RunningPrometheus:
    url: str

    def api(self, path: str, **params: str) -> Any:
        response = requests.get(f"{self.url}/api/v1/{path}", params=params, timeout=5)
        response.raise_for_status()
        return response.json()["data"]

    def query(self, expression: str) -> list[dict[str, Any]]:
        result: list[dict[str, Any]] = self.api("query", query=expression)["result"]
        return result

    def instant_queries_answered(self) -> int:
        """Requests to /api/v1/query so far (GET and POST, any status), by Prometheus' own count,
        read from /metrics so that reading it is not one of them."""
        response = requests.get(f"{self.url}/metrics", timeout=5)
        response.raise_for_status()
        return round(sum(float(value) for value in INSTANT_QUERIES.findall(response.text)))


@contextmanager
def prometheus(directory: Path, config: Path) -> Iterator[RunningPrometheus]:
    port = free_port()
    log = (directory / "prometheus.log").open("w")
    process = subprocess.Popen(
        [
            PROMETHEUS,
            f"--config.file={config}",
            f"--storage.tsdb.path={directory / 'data'}",
            f"--web.listen-address=127.0.0.1:{port}",
        ],
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    running = RunningPrometheus(f"http://127.0.0.1:{port}")
    try:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            assert process.poll() is None, (directory / "prometheus.log").read_text()
            try:
                if requests.get(f"{running.url}/-/ready", timeout=1).status_code == 200:
                    break
            except requests.RequestException:
                pass
            time.sleep(0.2)
        else:
            pytest.fail("Prometheus did not become ready:\n" + (directory / "prometheus.log").read_text())
        yield running
    finally:
        process.terminate()
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        log.close()
