"""Envoy itself checks the capture filters the program writes: every ext_proc filter the
all-features stack renders, put on a listener of a bootstrap as the EnvoyFilter's patch puts it
on the sidecar's inbound chain (before the router), with Istio's outbound cluster it names, loads
in `envoy --mode validate`; a filter Envoy would refuse fails the same check."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest

from inference_platform.cli.render import run_program
from inference_platform.cli.render_files import manifest_documents
from inference_platform.cli.stack_file import read_stack_file
from inference_platform.serving.payload_capture import EXT_PROC
from tests import envoy
from tests.conftest import full_config, write_stack_file


@pytest.fixture(scope="module")
def capture_filters(tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict[str, Any]]:
    """Each rendered capture EnvoyFilter's inserted HTTP filter, by the EnvoyFilter's name."""
    root = tmp_path_factory.mktemp("capture")
    rendered = run_program("all-features", read_stack_file(write_stack_file(root / "Pulumi.yaml", full_config())))
    found = {}
    for document in manifest_documents(rendered):
        if document["kind"] != "EnvoyFilter":
            continue
        for patch in document["spec"]["configPatches"]:
            if patch["patch"]["value"].get("name") == EXT_PROC:
                found[document["metadata"]["name"]] = patch["patch"]["value"]
    return found


def bootstrap(filters: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """One listener per filter, routing to a local cluster, and every gRPC cluster the filters name."""
    listeners = [
        envoy.http_listener(name, 20000 + i, [{"match": {"prefix": "/"}, "route": {"cluster": "model"}}], [http_filter])
        for i, (name, http_filter) in enumerate(sorted(filters.items()))
    ]
    names = {f["typed_config"]["grpc_service"]["envoy_grpc"]["cluster_name"] for f in filters.values()}
    clusters = [envoy.cluster("model", 8080), *(envoy.cluster(name, 9001, http2=True) for name in sorted(names))]
    return envoy.bootstrap(19999, listeners, clusters)


def test_the_all_features_stack_captures_the_compared_models_primaries_and_shadows(
    capture_filters: dict[str, dict[str, Any]],
) -> None:
    # chat's too: on inference pools, its primary's and shadow's pods capture as any model's do.
    assert set(capture_filters) == {
        "iris-v1-capture",
        "iris-v3-capture",
        "mnist-v1-capture",
        "mnist-v2-capture",
        "chat-v1-capture",
        "chat-v3-capture",
    }


def test_envoy_loads_every_rendered_capture_filter(capture_filters: dict[str, dict[str, Any]], tmp_path: Path) -> None:
    done = envoy.validate(bootstrap(capture_filters), tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "OK" in done.stdout + done.stderr


@pytest.mark.parametrize(
    ("field", "value", "said"),
    [
        ("processing_mode", {"request_body_mode": "STREAMING"}, "unknown enum value: 'STREAMING'"),
        ("observability_mod", True, "observability_mod"),  # a field ExternalProcessor does not have
    ],
)
def test_envoy_refuses_a_broken_capture_filter(
    capture_filters: dict[str, dict[str, Any]], tmp_path: Path, field: str, value: Any, said: str
) -> None:
    broken = copy.deepcopy(capture_filters)
    broken["iris-v1-capture"]["typed_config"][field] = value
    done = envoy.validate(bootstrap(broken), tmp_path)
    assert done.returncode != 0
    assert said in done.stdout + done.stderr
