"""The node-local model cache's agent (docs/model-cache.md): fills a cache node's disk with the cached
versions' files and says what it holds.

This file runs as it is in the pinned storage-initializer image (a ConfigMap file, run with `python`):
it imports nothing from this package, only the standard library and what that image holds, KServe's
storage code (`kserve_storage.Storage`, what the versions' downloads run) and huggingface_hub. Its
series are written in Prometheus' text format here, not with prometheus_client: kserve-storage 0.20.0
does not depend on it, and whether the pinned image holds it anyway (older images installed all of
kserve, which does) is not something this code should rest on. The tests parse what it writes with
prometheus_client's own parser.

Each pass: read versions.json (its ConfigMap's mount follows the ConfigMap), and for each listed
version whose marker is missing or names another URI (or other adapters), fetch the model into
<dir>/model and each adapter into <dir>/adapters/<name>, then write the marker <dir>/.complete last
and atomically: {"uri", "adapters": {name: uri}, "digest", "bytes", "completedAt"}; the digest is a
sha256 over the sorted relative paths, sizes and contents. A version that is complete is left alone.
A version on disk that is no longer listed is removed once it has been unlisted for the grace period
(when it was first seen unlisted is kept in <path>/.agent-state.json, so a restart does not reset it).

The agent owns only what it made. Every directory it creates under the path (a namespace's, a model's,
a version's) gets an owner file, <dir>/.inference-platform-cache, before anything else is written in
it; it removes, empties or writes into only directories that hold one. A directory it did not create
is never touched, whatever its name: one that stands where a listed version would go is reported as
that version's error (and its pods keep waiting), and one that is not listed is left alone for good.
"""

from __future__ import annotations

import argparse
import hashlib
import http.server
import json
import os
import shutil
import sys
import tempfile
import threading
import time
import traceback
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

# The node layout (serving/cached_files.py holds the same names; a test checks they agree).
MODEL_DIR = "model"
ADAPTERS_DIR = "adapters"
MARKER = ".complete"
STATE_FILE = ".agent-state.json"
OWNER = ".inference-platform-cache"
"""The file the agent writes first in every directory it creates: what it may remove or write into."""
GRACE_SECONDS = 24 * 3600
"""How long a version stays on disk after it is no longer listed: a model unlisted by mistake, or
rolled back within a day, still wakes from local disk."""
INTERVAL_SECONDS = 60
METRICS_PORT = 9500

# huggingface_hub's snapshot_download, as serving/model_storage.py's HF_DOWNLOAD runs it: KServe's
# storage code refuses an hf:// revision with a slash (refs/pr/7, a branch feature/x).
Fetch = Callable[[str, str], None]


def hf_snapshot(uri: str) -> tuple[str, str] | None:
    """(repository, revision) of an hf:// URI whose revision has a slash: what KServe's code refuses."""
    if not uri.startswith("hf://"):
        return None
    repo, _, revision = uri.removeprefix("hf://").partition(":")
    return (repo, revision) if "/" in revision else None


def fetch(uri: str, destination: str) -> None:
    """Put `uri`'s files in `destination`, as the versions' storage initializer does."""
    snapshot = hf_snapshot(uri)
    if snapshot is not None:
        # Only here: the test environment installs kserve-storage without its dependencies.
        from huggingface_hub import snapshot_download  # type: ignore[import-not-found]  # noqa: PLC0415

        snapshot_download(repo_id=snapshot[0], revision=snapshot[1], local_dir=destination)
        return
    # Here, not at the top: the library imports this file for its constants and its text (serving/
    # cache_agent.py), and a program that uses the library need not install KServe's storage code.
    from kserve_storage import Storage  # noqa: PLC0415

    Storage.download(uri, destination)


def listed_dir(root: Path, namespace: str, model: str, version: str) -> Path:
    """A version's directory on this node: <path>/<namespace>/<model>/<version>."""
    return root / namespace / model / version


@dataclass(frozen=True)
class Listed:
    """One version the ConfigMap lists."""

    namespace: str
    model: str
    version: str
    uri: str
    adapters: dict[str, str]

    @property
    def key(self) -> tuple[str, str, str]:
        return (self.namespace, self.model, self.version)

    def directory(self, root: Path) -> Path:
        return listed_dir(root, self.namespace, self.model, self.version)

    def wanted(self) -> dict[str, Any]:
        """What its marker must name for its copy to be this version's."""
        return {"uri": self.uri, "adapters": self.adapters}


def load_versions(path: Path) -> list[Listed]:
    return load_versions_text(path.read_text())


def load_versions_text(text: str) -> list[Listed]:
    """versions.json: [{"namespace", "model", "version", "uri", "adapters": [{"name", "uri"}]}]."""
    entries = json.loads(text)
    return [
        Listed(
            e["namespace"],
            e["model"],
            e["version"],
            e["uri"],
            {a["name"]: a["uri"] for a in e.get("adapters", [])},
        )
        for e in entries
    ]


def read_marker(directory: Path) -> dict[str, Any] | None:
    try:
        marker = json.loads((directory / MARKER).read_text())
    except (OSError, ValueError):
        return None
    return marker if isinstance(marker, dict) else None


def is_complete(listed: Listed, root: Path) -> bool:
    marker = read_marker(listed.directory(root))
    return marker is not None and {k: marker.get(k) for k in ("uri", "adapters")} == listed.wanted()


def _files(directory: Path) -> Iterator[tuple[str, Path]]:
    for parent in (MODEL_DIR, ADAPTERS_DIR):
        top = directory / parent
        if top.is_dir():
            for found in top.rglob("*"):
                if found.is_file() and not found.is_symlink():
                    yield found.relative_to(directory).as_posix(), found


def digest(directory: Path) -> tuple[str, int]:
    """sha256 over the sorted relative paths, sizes and contents of a version's files; their bytes."""
    sha = hashlib.sha256()
    total = 0
    for relative, found in sorted(_files(directory)):
        size = found.stat().st_size
        total += size
        sha.update(f"{relative}\0{size}\0".encode())
        with found.open("rb") as stream:
            for chunk in iter(lambda: stream.read(1 << 20), b""):
                sha.update(chunk)
    return sha.hexdigest(), total


def write_json_atomically(path: Path, content: dict[str, Any]) -> None:
    """Write to a temporary file beside `path`, then rename it over `path`: a reader sees all or nothing."""
    handle, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    try:
        with os.fdopen(handle, "w") as stream:
            json.dump(content, stream, sort_keys=True)
            stream.flush()
            os.fsync(stream.fileno())
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise


def owned(directory: Path) -> bool:
    """Whether the agent made `directory` (it holds the owner file, and is a directory, not a link)."""
    return directory.is_dir() and not directory.is_symlink() and (directory / OWNER).is_file()


class NotOwnedError(Exception):
    """A directory the agent did not make stands where it would write."""


def make_own(root: Path, key: tuple[str, str, str]) -> Path:
    """The version's directory <root>/<namespace>/<model>/<version>, each level made with its owner file
    where it does not exist; raises NotOwnedError where a level exists and the agent did not make it."""
    directory = root
    for part in key:
        directory = directory / part
        if not directory.exists() and not directory.is_symlink():
            directory.mkdir()
            (directory / OWNER).write_text("made by the inference-platform model cache agent\n")
        elif not owned(directory):
            raise NotOwnedError(f"{directory} was not made by the cache agent: it is left untouched")
    return directory


def fill(listed: Listed, root: Path, fetcher: Fetch, now: float) -> None:
    """Fetch a version's model and adapters afresh, then write its marker last."""
    directory = make_own(root, listed.key)
    (directory / MARKER).unlink(missing_ok=True)  # first: a pod never reads a copy being replaced
    for parent in (MODEL_DIR, ADAPTERS_DIR):
        shutil.rmtree(directory / parent, ignore_errors=True)
    (directory / MODEL_DIR).mkdir()
    fetcher(listed.uri, str(directory / MODEL_DIR))
    for name, uri in sorted(listed.adapters.items()):
        (directory / ADAPTERS_DIR / name).mkdir(parents=True)
        fetcher(uri, str(directory / ADAPTERS_DIR / name))
    sha, size = digest(directory)
    completed = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(now))
    marker = {**listed.wanted(), "digest": f"sha256:{sha}", "bytes": size, "completedAt": completed}
    write_json_atomically(directory / MARKER, marker)


def on_disk(root: Path) -> set[tuple[str, str, str]]:
    """Every <namespace>/<model>/<version> directory under the cache path that the agent made, through
    namespace and model directories it made: nothing else is its to remove."""
    return {
        (version.parent.parent.name, version.parent.name, version.name)
        for version in root.glob("*/*/*")
        if owned(version) and owned(version.parent) and owned(version.parent.parent)
    }


def _remove(root: Path, key: tuple[str, str, str]) -> None:
    directory = root.joinpath(*key)
    (directory / MARKER).unlink(missing_ok=True)
    shutil.rmtree(directory)
    for parent in (directory.parent, directory.parent.parent):
        # A namespace's or model's directory the agent made goes once it holds only its owner file.
        if parent != root and owned(parent) and [p.name for p in parent.iterdir()] == [OWNER]:
            (parent / OWNER).unlink()
            parent.rmdir()


@dataclass
class Sync:
    """One pass's outcome: what the series report."""

    at: float
    errors: list[str] = field(default_factory=list)
    fetched: list[tuple[str, str, str]] = field(default_factory=list)
    removed: list[tuple[str, str, str]] = field(default_factory=list)


def sync(root: Path, listed: list[Listed], now: float, fetcher: Fetch = fetch, grace: float = GRACE_SECONDS) -> Sync:
    """One pass: fill what is listed and not complete, remove what has been unlisted for `grace`."""
    result = Sync(at=now)
    # Every listed version's directory first: the kubelet mounts a `local` volume only over a directory
    # that exists, so a pod placed here before its turn reaches its wait for the marker (and says why).
    blocked: dict[tuple[str, str, str], str] = {}
    for version in listed:
        try:
            make_own(root, version.key)
        except NotOwnedError as error:
            blocked[version.key] = str(error)
    for version in listed:
        if version.key in blocked:
            result.errors.append(f"{'/'.join(version.key)}: {blocked[version.key]}")
            continue
        if is_complete(version, root):
            continue
        try:
            fill(version, root, fetcher, now)
            result.fetched.append(version.key)
        except Exception as error:  # one version's failure does not stop the others
            result.errors.append(f"{'/'.join(version.key)}: {error}")
            traceback.print_exc()
    state_path = root / STATE_FILE
    try:
        state = json.loads(state_path.read_text())
    except (OSError, ValueError):
        state = {}
    unlisted_since: dict[str, float] = {}
    listed_keys = {version.key for version in listed}
    for key in sorted(on_disk(root) - listed_keys):
        name = "/".join(key)
        since = float(state.get("unlistedSince", {}).get(name, now))
        if now - since >= grace:
            _remove(root, key)
            result.removed.append(key)
        else:
            unlisted_since[name] = since
    write_json_atomically(state_path, {"unlistedSince": unlisted_since})
    return result


# --- Series (Prometheus' text format 0.0.4) ------------------------------------------------------


def _labels(labels: dict[str, str]) -> str:
    def escape(value: str) -> str:
        return value.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')

    return "{" + ",".join(f'{k}="{escape(v)}"' for k, v in labels.items()) + "}"


def exposition(root: Path, listed: list[Listed], last: Sync | None, node: str) -> str:
    """What this node holds: each listed version's bytes and whether it is complete, the total bytes on
    the cache path, the last pass's time and errors."""
    lines = [
        "# HELP model_cache_version_bytes Bytes of a cached version's files on this node (its marker's count).",
        "# TYPE model_cache_version_bytes gauge",
    ]
    complete = [
        "# HELP model_cache_version_complete Whether a listed version's copy on this node is complete (1) or not (0).",
        "# TYPE model_cache_version_complete gauge",
    ]
    for version in listed:
        labels = _labels(
            {"node": node, "namespace": version.namespace, "model": version.model, "version": version.version}
        )
        marker = read_marker(version.directory(root)) if is_complete(version, root) else None
        lines.append(f"model_cache_version_bytes{labels} {int(marker['bytes']) if marker else 0}")
        complete.append(f"model_cache_version_complete{labels} {1 if marker else 0}")
    total = sum(found.stat().st_size for found in root.rglob("*") if found.is_file() and not found.is_symlink())
    node_labels = _labels({"node": node})
    lines += complete
    lines += [
        "# HELP model_cache_bytes Bytes of every file under the cache path on this node.",
        "# TYPE model_cache_bytes gauge",
        f"model_cache_bytes{node_labels} {total}",
        "# HELP model_cache_last_sync_timestamp_seconds When the agent's last pass began.",
        "# TYPE model_cache_last_sync_timestamp_seconds gauge",
        f"model_cache_last_sync_timestamp_seconds{node_labels} {last.at if last else 0}",
        "# HELP model_cache_last_sync_errors Versions the agent's last pass failed to fetch.",
        "# TYPE model_cache_last_sync_errors gauge",
        f"model_cache_last_sync_errors{node_labels} {len(last.errors) if last else 0}",
    ]
    return "\n".join(lines) + "\n"


class Series:
    """The latest exposition, served at /metrics."""

    def __init__(self) -> None:
        self.text = ""
        self.lock = threading.Lock()

    def set(self, text: str) -> None:
        with self.lock:
            self.text = text

    def get(self) -> str:
        with self.lock:
            return self.text


def serve(series: Series, port: int, host: str = "") -> http.server.ThreadingHTTPServer:
    """Serve `series` on `port` (0: any free one) from a thread; the caller shuts the server down."""

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            if self.path.split("?")[0] != "/metrics":
                self.send_error(404)
                return
            body = series.get().encode()
            self.send_response(200)
            self.send_header("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: Any) -> None:
            pass

    server = http.server.ThreadingHTTPServer((host, port), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--versions", type=Path, required=True, help="versions.json (the ConfigMap's file)")
    parser.add_argument("--path", type=Path, required=True, help="the cache path on this node")
    parser.add_argument("--port", type=int, default=METRICS_PORT)
    parser.add_argument("--interval", type=float, default=INTERVAL_SECONDS)
    parser.add_argument("--grace", type=float, default=GRACE_SECONDS)
    args = parser.parse_args(argv)
    node = os.environ.get("NODE_NAME", "")
    series = Series()
    serve(series, args.port)
    listed: list[Listed] = []
    last: Sync | None = None
    while True:
        try:
            listed = load_versions(args.versions)
        except (OSError, ValueError, KeyError, TypeError) as unreadable:  # keep the last list it read
            print(f"model-cache: {args.versions}: {unreadable}", file=sys.stderr, flush=True)
        # What is there already, while a pass (a large download) runs.
        series.set(exposition(args.path, listed, last, node))
        last = sync(args.path, listed, time.time(), grace=args.grace)
        series.set(exposition(args.path, listed, last, node))
        for failed in last.errors:
            print(f"model-cache: {failed}", file=sys.stderr, flush=True)
        time.sleep(args.interval)


if __name__ == "__main__":
    main()
