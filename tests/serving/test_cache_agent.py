"""The cache agent's code run for real: KServe's storage code downloads the listed versions from a
file server into a temporary directory standing for a cache node's disk."""

from __future__ import annotations

import ast
import hashlib
import http.server
import io
import json
import shutil
import socket
import subprocess
import sys
import tarfile
import threading
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from inference_platform.serving import cache_agent_script as agent
from inference_platform.serving import cached_files
from inference_platform.serving.model_storage import DOWNLOAD_DIR, HF_DOWNLOAD, initializer_call
from tests.serving.test_model_storage import _Files

NS = "models"


@pytest.fixture
def served(tmp_path: Path) -> Iterator[tuple[str, Path]]:
    root = tmp_path / "served"
    root.mkdir()
    handler = lambda *a, **k: _Files(*a, directory=str(root), **k)  # noqa: E731
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", root
    finally:
        server.shutdown()
        server.server_close()


def _tar(path: Path, files: dict[str, bytes]) -> None:
    with tarfile.open(path, "w") as archive:
        for name, data in files.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            archive.addfile(info, io.BytesIO(data))


class Counting:
    """The agent's real fetch, counted."""

    def __init__(self) -> None:
        self.calls: list[str] = []

    def __call__(self, uri: str, destination: str) -> None:
        self.calls.append(uri)
        agent.fetch(uri, destination)


def _versions(path: Path, entries: list[dict[str, object]]) -> list[agent.Listed]:
    path.write_text(json.dumps(entries))
    return agent.load_versions(path)


def _expected_digest(files: dict[str, bytes]) -> str:
    sha = hashlib.sha256()
    for name in sorted(files):
        sha.update(f"{name}\0{len(files[name])}\0".encode() + files[name])
    return "sha256:" + sha.hexdigest()


MODEL = {"config.json": b"{}", "weights/model.safetensors": b"w" * 1000}
ADAPTER = {"adapter_config.json": b'{"r": 8}', "adapter_model.safetensors": b"a" * 100}


@pytest.fixture
def listed(served: tuple[str, Path], tmp_path: Path) -> list[agent.Listed]:
    base, root = served
    _tar(root / "llama.tar", MODEL)
    _tar(root / "sql.tar", ADAPTER)
    entry: dict[str, object] = {
        "namespace": NS,
        "model": "llama",
        "version": "v1",
        "uri": f"{base}/llama.tar",
        "adapters": [{"name": "sql", "uri": f"{base}/sql.tar"}],
    }
    return _versions(tmp_path / "versions.json", [entry])


def _mtimes(directory: Path) -> dict[str, int]:
    return {str(p): p.stat().st_mtime_ns for p in directory.rglob("*")}


def test_the_layout_is_the_one_the_pods_read() -> None:
    assert (agent.MODEL_DIR, agent.ADAPTERS_DIR, agent.MARKER) == (
        cached_files.MODEL_DIR,
        cached_files.ADAPTERS_DIR,
        cached_files.MARKER,
    )
    assert str(agent.listed_dir(Path("/c"), NS, "m", "v")) == cached_files.node_dir("/c", NS, "m", "v")


@pytest.mark.parametrize(
    "uri",
    ["hf://org/model", "hf://org/model:main", "hf://org/model:refs/pr/7", "hf://org/m.x:feature/a/b", "s3://b/p"],
)
def test_the_agent_takes_the_same_download_path_as_the_pods_storage_initializer(uri: str) -> None:
    call = initializer_call(uri)
    snapshot = agent.hf_snapshot(uri)
    if call.get("command") == ["python", "-c", HF_DOWNLOAD]:
        assert snapshot is not None
        assert [*snapshot, DOWNLOAD_DIR] == call["args"]
    else:
        assert snapshot is None
        assert call == {"args": [uri, DOWNLOAD_DIR]}


def test_the_agent_fetches_a_listed_version_and_its_adapter_and_writes_the_marker_last(
    listed: list[agent.Listed], tmp_path: Path
) -> None:
    disk = tmp_path / "disk"
    disk.mkdir()
    result = agent.sync(disk, listed, now=1000.0)

    version = disk / NS / "llama" / "v1"
    assert result.errors == []
    assert result.fetched == [(NS, "llama", "v1")]
    for name, data in MODEL.items():
        assert (version / "model" / name).read_bytes() == data
    for name, data in ADAPTER.items():
        assert (version / "adapters" / "sql" / name).read_bytes() == data
    marker = json.loads((version / ".complete").read_text())
    everything = {f"model/{k}": v for k, v in MODEL.items()} | {f"adapters/sql/{k}": v for k, v in ADAPTER.items()}
    assert marker == {
        "uri": listed[0].uri,
        "adapters": {"sql": listed[0].adapters["sql"]},
        "digest": _expected_digest(everything),
        "bytes": sum(len(v) for v in everything.values()),
        "completedAt": "1970-01-01T00:16:40Z",
    }
    # The marker is the newest file: written after every file it covers.
    files = [p for p in version.rglob("*") if p.is_file()]
    assert max(files, key=lambda p: p.stat().st_mtime_ns) == version / ".complete"


def test_a_complete_version_is_not_fetched_again(listed: list[agent.Listed], tmp_path: Path) -> None:
    disk = tmp_path / "disk"
    disk.mkdir()
    counting = Counting()
    agent.sync(disk, listed, now=1000.0, fetcher=counting)
    assert len(counting.calls) == 2
    before = _mtimes(disk / NS)

    result = agent.sync(disk, listed, now=2000.0, fetcher=counting)

    assert result.fetched == []
    assert len(counting.calls) == 2
    assert _mtimes(disk / NS) == before


def test_every_listed_directory_exists_before_the_first_download(listed: list[agent.Listed], tmp_path: Path) -> None:
    """The kubelet mounts a local volume only over a directory that exists: a pod of the last listed
    version, placed on the node while the first downloads, must find its directory (and wait there)."""
    disk = tmp_path / "disk"
    disk.mkdir()
    later = agent.Listed(NS, "llama", "v2", listed[0].uri, {})
    seen: list[bool] = []

    def fetcher(uri: str, destination: str) -> None:
        seen.append(later.directory(disk).is_dir())
        agent.fetch(uri, destination)

    agent.sync(disk, [*listed, later], now=1000.0, fetcher=fetcher)

    assert seen[0] is True
    assert all(seen)


def test_a_version_whose_uri_changes_is_fetched_afresh(
    listed: list[agent.Listed], served: tuple[str, Path], tmp_path: Path
) -> None:
    base, root = served
    disk = tmp_path / "disk"
    disk.mkdir()
    agent.sync(disk, listed, now=1000.0)
    _tar(root / "llama-2.tar", {"config.json": b'{"new": 1}'})
    moved = _versions(
        tmp_path / "versions.json",
        [{"namespace": NS, "model": "llama", "version": "v1", "uri": f"{base}/llama-2.tar", "adapters": []}],
    )

    result = agent.sync(disk, moved, now=2000.0)

    version = disk / NS / "llama" / "v1"
    assert result.fetched == [(NS, "llama", "v1")]
    assert (version / "model" / "config.json").read_bytes() == b'{"new": 1}'
    assert not (version / "model" / "weights").exists()
    assert not (version / "adapters").exists()
    marker = json.loads((version / ".complete").read_text())
    assert (marker["uri"], marker["adapters"]) == (f"{base}/llama-2.tar", {})


def test_a_failed_download_leaves_no_marker_and_is_reported(listed: list[agent.Listed], tmp_path: Path) -> None:
    disk = tmp_path / "disk"
    disk.mkdir()
    missing = agent.Listed(NS, "gone", "v1", listed[0].uri.replace("llama.tar", "absent.tar"), {})

    result = agent.sync(disk, [missing, *listed], now=1000.0)

    assert [e.split(":")[0] for e in result.errors] == [f"{NS}/gone/v1"]
    assert not (disk / NS / "gone" / "v1" / ".complete").exists()
    assert (disk / NS / "llama" / "v1" / ".complete").exists()  # the others go on


def test_an_unlisted_version_is_removed_only_after_the_grace_period(listed: list[agent.Listed], tmp_path: Path) -> None:
    disk = tmp_path / "disk"
    disk.mkdir()
    agent.sync(disk, listed, now=1000.0, grace=3600)
    version = disk / NS / "llama" / "v1"

    assert agent.sync(disk, [], now=5000.0, grace=3600).removed == []  # first seen unlisted
    assert agent.sync(disk, [], now=5000.0 + 3599, grace=3600).removed == []
    assert (version / ".complete").exists()
    removed = agent.sync(disk, [], now=5000.0 + 3600, grace=3600).removed

    assert removed == [(NS, "llama", "v1")]
    assert not (disk / NS).exists()
    assert json.loads((disk / agent.STATE_FILE).read_text()) == {"unlistedSince": {}}


def test_a_version_listed_again_within_the_grace_period_is_kept_and_its_clock_reset(
    listed: list[agent.Listed], tmp_path: Path
) -> None:
    disk = tmp_path / "disk"
    disk.mkdir()
    agent.sync(disk, listed, now=1000.0, grace=3600)
    agent.sync(disk, [], now=2000.0, grace=3600)
    agent.sync(disk, listed, now=3000.0, grace=3600)  # listed again
    agent.sync(disk, [], now=4000.0, grace=3600)  # unlisted since 4000, not 2000

    assert agent.sync(disk, [], now=2000.0 + 3600, grace=3600).removed == []
    assert agent.sync(disk, [], now=4000.0 + 3600, grace=3600).removed == [(NS, "llama", "v1")]


def test_the_agent_serves_what_the_node_holds_as_prometheus_series(listed: list[agent.Listed], tmp_path: Path) -> None:
    disk = tmp_path / "disk"
    disk.mkdir()
    pending = agent.Listed(NS, "gone", "v1", listed[0].uri.replace("llama.tar", "absent.tar"), {})
    last = agent.sync(disk, [*listed, pending], now=1000.0)
    series = agent.Series()
    series.set(agent.exposition(disk, [*listed, pending], last, "gpu-node-1"))
    server = agent.serve(series, 0, "127.0.0.1")
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{server.server_address[1]}/metrics") as response:
            assert response.headers["Content-Type"].startswith("text/plain; version=0.0.4")
            text = response.read().decode()
    finally:
        server.shutdown()
        server.server_close()

    samples = {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }
    llama = (("model", "llama"), ("namespace", NS), ("node", "gpu-node-1"), ("version", "v1"))
    gone = (("model", "gone"), ("namespace", NS), ("node", "gpu-node-1"), ("version", "v1"))
    node = (("node", "gpu-node-1"),)
    size = json.loads((disk / NS / "llama" / "v1" / ".complete").read_text())["bytes"]
    assert samples[("model_cache_version_bytes", llama)] == size
    assert samples[("model_cache_version_complete", llama)] == 1
    assert samples[("model_cache_version_bytes", gone)] == 0
    assert samples[("model_cache_version_complete", gone)] == 0
    on_disk = sum(p.stat().st_size for p in disk.rglob("*") if p.is_file())
    assert samples[("model_cache_bytes", node)] == on_disk >= size
    assert samples[("model_cache_last_sync_timestamp_seconds", node)] == 1000.0
    assert samples[("model_cache_last_sync_errors", node)] == 1


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


def _completes(text: str) -> list[tuple[str, str, float]]:
    return [
        (s.labels["model"], s.labels["node"], s.value)
        for family in text_string_to_metric_families(text)
        for s in family.samples
        if s.name == "model_cache_version_complete"
    ]


def test_the_shipped_file_runs_on_its_own_as_the_daemon_set_runs_it(listed: list[agent.Listed], tmp_path: Path) -> None:
    """The file alone, copied where its ConfigMap puts it and run with `python -I` (as the DaemonSet's
    command does, isolated from this checkout): it fills the disk and serves its series, importing
    nothing of this package."""
    shipped = tmp_path / "etc" / "agent.py"
    shipped.parent.mkdir()
    shutil.copy(agent.__file__, shipped)
    disk = tmp_path / "disk"
    disk.mkdir()
    port = _free_port()
    command = [sys.executable, "-I", str(shipped), "--versions", str(tmp_path / "versions.json")]
    command += ["--path", str(disk), "--port", str(port), "--interval", "0.2"]
    process = subprocess.Popen(command, cwd=tmp_path, env={"NODE_NAME": "gpu-node-1", "HOME": str(tmp_path)})
    text = ""
    try:
        deadline = time.monotonic() + 60
        while _completes(text) != [("llama", "gpu-node-1", 1.0)]:
            assert time.monotonic() < deadline, text
            assert process.poll() is None, "the agent exited"
            time.sleep(0.2)
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as response:
                    text = response.read().decode()
            except OSError:
                continue
    finally:
        process.terminate()
        process.wait(timeout=10)

    marker = json.loads((disk / NS / "llama" / "v1" / ".complete").read_text())
    assert marker["uri"] == listed[0].uri


def test_the_shipped_file_imports_only_what_the_storage_initializer_image_holds() -> None:
    """The standard library, KServe's storage code and huggingface_hub (kserve-storage's dependency)."""
    tree = ast.parse(Path(agent.__file__).read_text())
    imported = {alias.name for node in ast.walk(tree) if isinstance(node, ast.Import) for alias in node.names}
    imported |= {node.module for node in ast.walk(tree) if isinstance(node, ast.ImportFrom) and node.module}
    tops = {name.split(".")[0] for name in imported}

    assert tops - set(sys.stdlib_module_names) == {"kserve_storage", "huggingface_hub"}


def _tree(directory: Path) -> dict[str, tuple[int, bytes]]:
    """Every path under `directory` with its mode and (for a file) its content."""
    return {
        found.relative_to(directory).as_posix(): (found.stat().st_mode, found.read_bytes() if found.is_file() else b"")
        for found in sorted(directory.rglob("*"))
    }


def test_the_agent_removes_only_what_it_made(listed: list[agent.Listed], tmp_path: Path) -> None:
    """Foreign directories three levels deep (a data set; one where a listed version would go; one in a
    namespace directory the agent made, one in a model directory it made) are never removed, emptied or
    written, after any number of passes past the grace period; its own unlisted versions are gone."""
    disk = tmp_path / "disk"
    first = listed[0]

    def plant(relatives: list[str]) -> None:
        for relative in relatives:
            (disk / relative).mkdir(parents=True)
            (disk / relative / "file.bin").write_bytes(relative.encode())

    outside = ["datasets/imagenet/train", "team/blocked/v1"]
    inside = [f"{first.namespace}/other-model/v1", f"{first.namespace}/{first.model}/not-a-version"]
    plant(outside)
    agent.sync(disk, listed, now=1000.0, grace=3600)  # makes its versions' directories itself
    plant(inside)
    foreign = outside + inside
    before = {relative: _tree(disk / relative) for relative in foreign}
    blocked = agent.Listed(namespace="team", model="blocked", version="v1", uri=first.uri, adapters={})

    result = agent.sync(disk, [*listed, blocked], now=2000.0, grace=3600)
    assert result.errors == [f"team/blocked/v1: {disk / 'team'} was not made by the cache agent: it is left untouched"]
    removed: list[tuple[str, str, str]] = []
    for step in range(5):  # unlisted from here on, passes well past the grace period
        removed += agent.sync(disk, [], now=10_000.0 + step * 86_400, grace=3600).removed

    assert sorted(removed) == sorted(version.key for version in listed)
    assert all(not version.directory(disk).exists() for version in listed)
    assert {relative: _tree(disk / relative) for relative in foreign} == before
    assert agent.on_disk(disk) == set()
