"""hf:// URIs take every revision the Hub takes (a branch with slashes, refs/pr/<n>, a tag, a commit
hash), and the revision reaches the download intact: KServe's own storage code for the URIs it
parses, huggingface_hub's snapshot_download (which that code calls) for the ones it cannot."""

from __future__ import annotations

import sys
import types
from typing import Any

import pytest
from kserve_storage import Storage
from pydantic import TypeAdapter, ValidationError

from inference_platform.serving.model_storage import DOWNLOAD_DIR, ModelUri, model_files

URI = TypeAdapter(ModelUri)
REVISIONS = ["refs/pr/7", "feature/long-context", "v1.0", "main", "0123456789abcdef0123456789abcdef01234567"]


def init_container(uri: str) -> dict[str, Any]:
    files = model_files(
        uri, volume_name="m", download_size="1Gi", access=None, scratch_volume="scratch", security_context={}
    )
    assert files.init_container is not None
    return files.init_container


@pytest.fixture
def hub(monkeypatch: pytest.MonkeyPatch) -> list[dict[str, Any]]:
    """huggingface_hub's snapshot_download (not installed here), recording each call it gets."""
    calls: list[dict[str, Any]] = []
    module = types.ModuleType("huggingface_hub")
    module.snapshot_download = lambda **kwargs: calls.append(kwargs)  # type: ignore[attr-defined]
    utils = types.ModuleType("huggingface_hub.utils")
    for name in ("RepositoryNotFoundError", "RevisionNotFoundError", "GatedRepoError", "HfHubHTTPError"):
        setattr(utils, name, type(name, (Exception,), {}))
    monkeypatch.setitem(sys.modules, "huggingface_hub", module)
    monkeypatch.setitem(sys.modules, "huggingface_hub.utils", utils)
    return calls


def run(container: dict[str, Any], monkeypatch: pytest.MonkeyPatch) -> None:
    """What the container runs: its command (python -c) with its arguments, or KServe's entry point."""
    command, args = container.get("command"), container["args"]
    if command is None:
        Storage._download_hf(args[0], args[1])
        return
    assert command[:2] == ["python", "-c"]
    monkeypatch.setattr(sys, "argv", ["-c", *args])
    exec(compile(command[2], "<init container>", "exec"), {"__name__": "__main__"})


@pytest.mark.parametrize("revision", REVISIONS)
def test_every_hub_revision_is_accepted_and_reaches_the_download_intact(
    revision: str, hub: list[dict[str, Any]], monkeypatch: pytest.MonkeyPatch
) -> None:
    uri = f"hf://Qwen/Qwen3-8B:{revision}"
    assert URI.validate_python(uri) == uri

    run(init_container(uri), monkeypatch)

    ((call),) = hub
    assert (call["repo_id"], call["revision"], call["local_dir"]) == ("Qwen/Qwen3-8B", revision, DOWNLOAD_DIR)


def test_kserves_initializer_cannot_take_a_revision_with_a_slash(hub: list[dict[str, Any]]) -> None:
    """Why such a revision is downloaded without it: the pinned initializer refuses the URI."""
    with pytest.raises(RuntimeError, match="Invalid Hugging Face URI format"):
        Storage._download_hf("hf://Qwen/Qwen3-8B:refs/pr/7", DOWNLOAD_DIR)
    assert hub == []


def test_a_revision_without_a_slash_keeps_kserves_initializer() -> None:
    assert init_container("hf://Qwen/Qwen3-8B:v1.0")["args"] == ["hf://Qwen/Qwen3-8B:v1.0", DOWNLOAD_DIR]
    assert "command" not in init_container("hf://Qwen/Qwen3-8B:v1.0")


@pytest.mark.parametrize(
    "uri",
    [
        "hf://Qwen/Qwen3-8B:a..b",
        "hf://Qwen/Qwen3-8B:with space",
        "hf://Qwen/Qwen3-8B:$(touch /tmp/x)",
        "hf://Qwen/Qwen3-8B:x.lock",
        "hf://Qwen/Qwen3-8B:/leading",
        "hf://Qwen/Qwen3-8B:trailing/",
        "hf://Qwen/Qwen3-8B:a//b",
        "hf://Qwen/Qwen3-8B:.hidden",
        "hf://Qwen/Qwen3-8B:a@{1}",
    ],
)
def test_a_revision_git_would_refuse_is_refused(uri: str) -> None:
    with pytest.raises(ValidationError, match="has a revision the Hub cannot hold"):
        URI.validate_python(uri)
