"""The local rate limit the program writes (protection.rateLimit), run by a real Envoy: the HTTP
filter exactly as the rendered EnvoyFilter patches it into a sidecar's inbound chain (before the
router), on a listener shaped like that chain, in front of a real MLServer serving a model trained
here. Envoy accepts every rendered rate-limit filter, refuses a broken one, and enforces the
bucket: exactly the burst passes at once, the next request gets 429 with the headers we
configure, and tokens come back at the configured rate."""

from __future__ import annotations

import copy
import math
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import requests

from inference_platform.cli.render import run_program
from inference_platform.cli.render_files import manifest_documents
from inference_platform.cli.stack_file import read_stack_file
from tests import envoy
from tests.conftest import base_config, full_config, write_stack_file
from tests.ports import free_port
from tests.serving.runtimes.test_mlserver_boot import SPEC, mlserver, train_iris, wait_until

pytestmark = pytest.mark.slow

RATE_LIMIT = "envoy.filters.http.local_ratelimit"
PER_SECOND, BURST = 2, 5


def rate_limit_filters(config: dict[str, Any], root: Path) -> dict[str, dict[str, Any]]:
    """Each rendered rate-limit EnvoyFilter's inserted HTTP filter, by the EnvoyFilter's name."""
    rendered = run_program("rate-limit", read_stack_file(write_stack_file(root / "Pulumi.yaml", config)))
    return {
        document["metadata"]["name"]: patch["patch"]["value"]
        for document in manifest_documents(rendered)
        if document["kind"] == "EnvoyFilter"
        for patch in document["spec"]["configPatches"]
        if patch["patch"]["value"].get("name") == RATE_LIMIT
    }


def inbound(filters: dict[str, dict[str, Any]], upstream: int, first_port: int) -> dict[str, Any]:
    """A listener per filter, each like a sidecar's inbound HTTP chain: the filter, then the router
    to the pod's server (Istio's inbound|<port>|| cluster)."""
    route = [{"match": {"prefix": "/"}, "route": {"cluster": f"inbound|{upstream}||"}}]
    listeners = [
        envoy.http_listener(f"inbound_{name}", first_port + i, route, [http_filter])
        for i, (name, http_filter) in enumerate(sorted(filters.items()))
    ]
    return envoy.bootstrap(free_port(), listeners, [envoy.cluster(f"inbound|{upstream}||", upstream)])


def test_envoy_loads_every_rendered_rate_limit(tmp_path: Path) -> None:
    filters = rate_limit_filters(full_config(), tmp_path)
    assert sorted(filters) == ["bert-rate-limit", "chat-rate-limit", "detect-classify-rate-limit"]
    done = envoy.validate(inbound(filters, 8080, 20000), tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr


@pytest.mark.parametrize(
    ("change", "said"),
    [
        (lambda value: value["token_bucket"].update(fill_interval="0.01s"), "token bucket fill timer must be >= 50ms"),
        (lambda value: value.update(stat_prefixx="x"), "stat_prefixx"),
    ],
)
def test_envoy_refuses_a_broken_rate_limit(tmp_path: Path, change: Any, said: str) -> None:
    filters = rate_limit_filters(full_config(), tmp_path)
    broken = copy.deepcopy(filters)
    change(broken["bert-rate-limit"]["typed_config"]["value"])
    done = envoy.validate(inbound(broken, 8080, 20000), tmp_path)
    assert done.returncode != 0
    assert said in done.stdout + done.stderr


@pytest.fixture(scope="module")
def limited(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """iris limited to PER_SECOND requests a second with a bucket of BURST, behind a real Envoy."""
    root = tmp_path_factory.mktemp("rate-limit")
    config = base_config()
    iris = config["inference-platform:models"][0]
    iris["protection"] = {"rateLimit": {"requestsPerSecond": PER_SECOND, "burst": BURST}}
    (http_filter,) = rate_limit_filters(config, root).values()
    with mlserver(root / "mlserver", train_iris) as server:
        assert wait_until(lambda: server.probe("readinessProbe") == 200), "iris never became ready"
        front = free_port()
        upstream = int(server.http.rpartition(":")[2])
        with envoy.running(inbound({"iris": http_filter}, upstream, front), root):
            yield f"http://127.0.0.1:{front}"


def infer(url: str) -> requests.Response:
    example = SPEC.example_request()
    return requests.post(f"{url}{example.path}", json=example.body, timeout=10)


def test_the_burst_passes_the_next_is_refused_and_tokens_come_back(limited: str) -> None:
    time.sleep(BURST / PER_SECOND + 1)  # a full bucket, whatever ran before
    started = time.monotonic()
    answers = [infer(limited) for _ in range(BURST + 1)]
    elapsed = time.monotonic() - started
    # Tokens refilled while the burst ran (at PER_SECOND a second) may let more through.
    refilled = math.floor(elapsed * PER_SECOND)
    passed = [a for a in answers if a.status_code == 200]
    assert len(passed) == BURST + min(refilled, 1), [a.status_code for a in answers]
    if refilled == 0:
        refused = answers[-1]
        assert refused.status_code == 429
        assert refused.headers["x-local-rate-limit"] == "true"
        assert all("x-local-rate-limit" not in a.headers for a in passed)
        assert passed[0].json()["outputs"][0]["name"] == "predict"

    time.sleep(1 / PER_SECOND + 0.1)  # one token back
    assert infer(limited).status_code == 200
    assert infer(limited).status_code == 429
