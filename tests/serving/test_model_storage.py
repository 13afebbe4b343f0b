"""Model files: which URIs are accepted, and KServe's own storage code consuming what we render."""

from __future__ import annotations

import http.server
import io
import os
import tarfile
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kserve_storage import Storage
from pydantic import TypeAdapter, ValidationError

from inference_platform.config.errors import ConfigError, problems_from_validation
from inference_platform.serving.inference_service import InferenceServiceArgs
from inference_platform.serving.inference_service.pods import deployment
from inference_platform.serving.model_storage import (
    AWS_CREDENTIALS_FILE,
    HF_TOKEN_FILE,
    SECRET_DIR,
    ModelUri,
    StorageCredentials,
    initializer_env,
    model_files,
)
from inference_platform.stack.config import UNIONS, parse_stack_config, project_values
from tests.conftest import base_config
from tests.owner_schemas import validate

URI = TypeAdapter(ModelUri)


@pytest.mark.parametrize(
    "uri",
    [
        "pvc://models/iris/v1",
        "s3://bucket/path/to/model",
        "s3://bucket",
        "gs://bucket/resnet/3",
        "https://models.example.com/bert/bert.mar",
        "http://10.0.0.1:8080/model.tar.gz",
        "hf://meta-llama/Llama-3.1-8B-Instruct",
        "hf://org/model:0123abc",
    ],
)
def test_supported_uris(uri: str) -> None:
    assert URI.validate_python(uri) == uri


@pytest.mark.parametrize(
    ("uri", "words"),
    [
        ("ftp://host/model", "unsupported scheme"),
        ("models/iris", "unsupported scheme"),
        ("pvc://models", "needs a path inside the claim"),
        ("pvc://Models_Claim/x", "not a valid DNS name"),
        ("s3:///path", "names no claim, bucket or host"),
        ("s3://bucket/../secret", "must not contain '..'"),
        ("https://models.example.com/", "must name a file"),
        ("hf://meta-llama", "hf://<owner>/<model>"),
        ("hf://a/b/c", "hf://<owner>/<model>"),
    ],
)
def test_unsupported_uris(uri: str, words: str) -> None:
    with pytest.raises(ValidationError, match=words):
        URI.validate_python(uri)


def initializer(uri: str, credentials: StorageCredentials | None = None) -> dict[str, Any]:
    files = model_files(
        uri,
        volume_name="model-files",
        download_size="1Gi",
        access=credentials.access("creds") if credentials else None,
        scratch_volume="scratch",
        security_context={},
    )
    assert files.init_container is not None
    return files.init_container


def plain_env(container: dict[str, Any]) -> dict[str, str]:
    return {e["name"]: e["value"] for e in container["env"] if "value" in e}


class _Files(http.server.SimpleHTTPRequestHandler):
    def guess_type(self, path: Any) -> str:
        # The storage initializer insists on these content types (as object stores send them).
        return "application/x-tar" if str(path).endswith(".tar") else "application/octet-stream"

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def file_server(tmp_path: Path) -> Iterator[tuple[str, Path]]:
    root = tmp_path / "served"
    root.mkdir()
    handler = lambda *a, **k: _Files(*a, directory=str(root), **k)  # noqa: E731
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", root
    finally:
        server.shutdown()
        server.server_close()


def run_initializer(container: dict[str, Any], out: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Do what the init container does: download its first argument into its second (remapped)."""
    for name, value in plain_env(container).items():
        monkeypatch.setenv(name, value.replace("/tmp", str(out.parent / "scratch")))
    source, destination = container["args"]
    assert destination == "/mnt/models"
    Storage.download(source, str(out))


def test_the_storage_initializer_downloads_a_file_where_the_server_looks(
    file_server: tuple[str, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    base, served = file_server
    (served / "bert.mar").write_bytes(b"an archive")
    out = tmp_path / "model-store"

    run_initializer(initializer(f"{base}/bert.mar"), out, monkeypatch)

    assert (out / "bert.mar").read_bytes() == b"an archive"


def test_the_storage_initializer_unpacks_an_archive(
    file_server: tuple[str, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    base, served = file_server
    with tarfile.open(served / "saved_model.tar", "w") as archive:
        for name, data in (("saved_model.pb", b"graph"), ("variables/variables.index", b"index")):
            info = tarfile.TarInfo(name)
            info.size = len(data)
            archive.addfile(info, io.BytesIO(data))
    out = tmp_path / "mnist-1"

    run_initializer(initializer(f"{base}/saved_model.tar"), out, monkeypatch)

    assert (out / "saved_model.pb").read_bytes() == b"graph"
    assert (out / "variables" / "variables.index").exists()


def test_s3_settings_reach_the_storage_initializers_client(monkeypatch: pytest.MonkeyPatch) -> None:
    credentials = StorageCredentials.model_validate(
        {"s3": {"endpoint": "https://minio.example.com", "region": "eu-west-1", "verifySsl": False,
                "accessKeyId": "id", "secretAccessKey": "key"}}
    )  # fmt: skip
    env = plain_env(initializer("s3://bucket/model", credentials))
    for name in ("AWS_ENDPOINT_URL", "AWS_DEFAULT_REGION", "S3_VERIFY_SSL", "awsAnonymousCredential"):
        monkeypatch.delenv(name, raising=False)
    for name, value in env.items():
        monkeypatch.setenv(name, value)

    kwargs = Storage._get_s3_client_kwargs()

    assert kwargs["endpoint_url"] == "https://minio.example.com"
    assert kwargs["verify"] is False
    assert os.environ["AWS_DEFAULT_REGION"] == "eu-west-1"
    assert kwargs["config"].signature_version is None  # signed with the keys from the Secret


def test_s3_is_read_anonymously_only_when_the_stack_says_so(monkeypatch: pytest.MonkeyPatch) -> None:
    from botocore import UNSIGNED

    monkeypatch.delenv("awsAnonymousCredential", raising=False)
    assert Storage.get_S3_config().signature_version is not UNSIGNED  # signed unless told otherwise
    anonymous = StorageCredentials.model_validate({"s3": {"anonymous": True}})
    env = plain_env(initializer("s3://public-bucket/model", anonymous))
    for name, value in env.items():
        monkeypatch.setenv(name, value)

    assert Storage.get_S3_config().signature_version is UNSIGNED


def test_a_model_on_s3_without_keys_is_a_config_error_not_anonymous_access() -> None:
    def stack(storage: dict[str, Any] | None) -> list[tuple[str, str]]:
        config = base_config()
        config["inference-platform:models"][0]["versions"][1]["modelUri"] = "s3://models/iris/2"
        if storage is not None:
            config["inference-platform:storage"] = storage
        try:
            parse_stack_config(project_values(config))
        except ConfigError as error:
            return [(p.path, p.message) for p in error.problems]
        return []

    no_keys = (
        "models[0].versions[1].modelUri",
        "s3:// needs credentials: set storage.s3.accessKeyId and storage.s3.secretAccessKey (Pulumi secrets), "
        "or storage.s3.anonymous: true for a public bucket",
    )
    assert stack(None) == [no_keys]
    assert stack({"s3": {"region": "eu-west-1"}}) == [no_keys]
    assert stack({"huggingface": {"token": "t"}}) == [no_keys]
    assert stack({"s3": {"accessKeyId": "id"}}) == [
        ("storage.s3.secretAccessKey", "set both keys, or neither (storage.s3.anonymous: true for a public bucket)")
    ]
    assert stack({"s3": {"anonymous": True, "accessKeyId": "id", "secretAccessKey": "key"}}) == [
        ("storage.s3.anonymous", "anonymous access sends no keys: remove the keys or anonymous")
    ]
    assert stack({"s3": {"anonymous": True}}) == []
    assert stack({"s3": {"accessKeyId": "id", "secretAccessKey": "key"}}) == []


def test_a_component_on_s3_without_keys_is_a_config_error() -> None:
    model = {"name": "iris", "runtime": "mlserver", "versions": [{"name": "v1", "modelUri": "s3://m/1", "weight": 100}]}
    base = {"model": model, "namespace": "service", "domain": "models.example.com"}
    with pytest.raises(ValidationError) as raised:
        InferenceServiceArgs.model_validate(base)
    assert [(p.path, p.message) for p in problems_from_validation(raised.value, UNIONS)] == [
        (
            "model.versions[0].modelUri",
            "s3:// needs credentials: give storage a Secret with S3 keys (s3Keys), or s3Anonymous: true "
            "for a public bucket",
        )
    ]
    anonymous = InferenceServiceArgs.model_validate(base | {"storage": {"secretName": "s", "s3Anonymous": True}})
    assert anonymous.storage is not None
    InferenceServiceArgs.model_validate(base | {"storage": {"secretName": "s", "s3Keys": True}})


@pytest.mark.parametrize(
    ("scheme", "variable", "file"),
    [("s3", "AWS_SHARED_CREDENTIALS_FILE", AWS_CREDENTIALS_FILE), ("hf", "HF_TOKEN_PATH", HF_TOKEN_FILE)],
)
def test_credentials_reach_the_initializer_as_files_from_the_secret(scheme: str, variable: str, file: str) -> None:
    """The SDKs read the credentials from the Secret mounted as files, not from the environment."""
    credentials = StorageCredentials.model_validate(
        {"s3": {"accessKeyId": "id-value", "secretAccessKey": "key-value"}, "huggingface": {"token": "tok"}}
    )
    env, mounts = initializer_env(scheme, credentials.access("creds"))
    assert mounts
    assert {e["name"]: e["value"] for e in env}[variable] == f"{SECRET_DIR}/{file}"
    assert all(set(e) == {"name", "value"} for e in env)  # plain values only: nothing secret inlined or referenced


@pytest.mark.parametrize(("settings", "size"), [({}, "20Gi"), ({"downloadSize": "120Gi"}, "120Gi")])
def test_the_download_requests_the_ephemeral_storage_its_volume_may_fill(settings: dict[str, Any], size: str) -> None:
    """The scheduler counts a pod's ephemeral-storage requests, never an emptyDir's sizeLimit: the
    container that writes the files requests their size, so the pod lands on a node with room."""
    model = {"name": "iris", "runtime": "mlserver", "versions": [{"name": "v1", "modelUri": "gs://m/1", "weight": 100}]}
    args = InferenceServiceArgs.model_validate(
        {"model": model | settings, "namespace": "service", "domain": "models.example.com"}
    )
    plan = args.model.plan(args.model.versions[0], args.gpu_nodes)
    pod = deployment(args, args.model.versions[0], plan)
    validate(pod)
    spec = pod["spec"]["template"]["spec"]
    (initializer,) = spec["initContainers"]
    assert initializer["resources"]["requests"]["ephemeral-storage"] == size
    assert "ephemeral-storage" not in initializer["resources"]["limits"]  # the volume's sizeLimit evicts
    (volume,) = [v for v in spec["volumes"] if v["name"] == initializer["volumeMounts"][0]["name"]]
    assert volume["emptyDir"] == {"sizeLimit": size}
