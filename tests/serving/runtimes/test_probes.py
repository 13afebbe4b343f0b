"""Every runtime's probes, read from the objects the program registers: each checks a port its
container declares, and the startup probe gates on the readiness check itself (a longer budget of
the same request), so liveness never starts before the server could be ready.

Read from the all-features stack with, beside its models, the smallest valid model of every runtime
and a custom server whose liveness check and metrics have ports of their own."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from inference_platform.cli.render import run_program
from inference_platform.cli.stack_file import read_stack_file
from inference_platform.serving.runtimes import RUNTIMES
from inference_platform.serving.runtimes.base import Probes
from tests.conftest import RUNTIME_MINIMUMS, full_config, write_stack_file

RUNTIME_LABEL = "inference-platform/runtime"
CUSTOM = {
    "name": "bento",
    "runtime": "custom",
    "image": "registry.example.com/bento:1.4.0",
    "port": 3000,
    "readiness": {"path": "/readyz"},
    "liveness": {"path": "/livez", "port": 3001},
    "metrics": {"port": 3002},
    "runAsUser": 1000,
    "versions": [{"name": "v1", "modelUri": "pvc://models/bento/1", "weight": 100}],
}
# What a startup probe may change of the readiness check it polls: how often and how many times.
BUDGET = ("periodSeconds", "failureThreshold")


def pod_specs(manifest: dict[str, Any]) -> Iterator[dict[str, Any]]:
    spec = manifest.get("spec", {})
    if "template" in spec:
        yield spec["template"]
    for key in ("leaderTemplate", "workerTemplate"):
        if key in spec.get("leaderWorkerTemplate", {}):
            yield spec["leaderWorkerTemplate"][key]


@pytest.fixture(scope="module")
def containers(tmp_path_factory: pytest.TempPathFactory) -> list[tuple[str, dict[str, Any]]]:
    """(runtime, container) of every container of every model's pods (predictors and transformers)."""
    config = full_config()
    config["inference-platform:models"] += [
        {"name": f"{runtime}-min", **model, "versions": [{"name": "v1", "modelUri": "pvc://m/1", "weight": 100}]}
        for runtime, model in RUNTIME_MINIMUMS.items()
    ] + [CUSTOM]
    path = write_stack_file(tmp_path_factory.mktemp("probes") / "Pulumi.probes.yaml", config)
    result = run_program("probes", read_stack_file(path))
    found = []
    for registration in result.manifests:
        for template in pod_specs(registration.inputs):
            runtime = template.get("metadata", {}).get("labels", {}).get(RUNTIME_LABEL)
            if runtime is not None:
                found += [(runtime, container) for container in template["spec"]["containers"]]
    return found


def probed_port(probe: dict[str, Any]) -> int | str | None:
    return next((probe[kind]["port"] for kind in ("httpGet", "tcpSocket", "grpc") if kind in probe), None)


def declared(container: dict[str, Any]) -> set[int | str]:
    ports = container.get("ports", [])
    return {p["containerPort"] for p in ports} | {p["name"] for p in ports}


def test_every_runtime_is_rendered(containers: list[tuple[str, dict[str, Any]]]) -> None:
    assert {runtime for runtime, _ in containers} == set(RUNTIMES)


def test_every_probe_checks_a_port_its_container_declares(containers: list[tuple[str, dict[str, Any]]]) -> None:
    undeclared = [
        (runtime, container["name"], field, port)
        for runtime, container in containers
        for field in Probes.FIELDS
        if field in container
        and (port := probed_port(container[field])) is not None
        and port not in declared(container)
    ]
    probed = {runtime for runtime, container in containers if any(f in container for f in Probes.FIELDS)}
    assert probed == set(RUNTIMES)
    assert undeclared == []


def test_the_startup_probe_polls_the_readiness_check_with_a_longer_budget(
    containers: list[tuple[str, dict[str, Any]]],
) -> None:
    def check(probe: dict[str, Any]) -> dict[str, Any]:
        return {key: value for key, value in probe.items() if key not in BUDGET}

    def budget(probe: dict[str, Any]) -> int:
        return int(probe["periodSeconds"] * probe["failureThreshold"])

    served = set()
    for runtime, container in containers:
        if "readinessProbe" not in container:
            continue  # a multi-node group's worker serves nothing
        startup, readiness = container["startupProbe"], container["readinessProbe"]
        assert check(startup) == check(readiness), (runtime, container["name"])
        assert budget(startup) > budget(readiness), (runtime, container["name"])
        served.add(runtime)
    assert served == set(RUNTIMES)
