"""Getting a version's model files into its pod.

`pvc://<claim>/<path>` is mounted read-only where the runtime expects the files. Every other
scheme is downloaded before the server starts by KServe's storage initializer (an init
container) into an emptyDir the server then mounts read-only at the same place, so each
runtime sees the layout it expects whichever way the files arrive.

Files a server reads beside its model's (a LoRA adapter's, `ExtraFiles`) arrive the same way, each
into a volume of its own: downloaded by an init container of its own with the same credentials, or
mounted from its claim (the model's own volume when the claim is the same).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Annotated, Any
from urllib.parse import urlsplit

from pydantic import AfterValidator, Field, model_validator
from pydantic_core import PydanticCustomError

from inference_platform import pins
from inference_platform.config.base import (
    DNS1123_SUBDOMAIN_RULE,
    ConfigModel,
    DNS1123Label,
    Matches,
    SchemaRule,
    check_dns1123_subdomain,
    config_problems,
    quantity_sum,
)
from inference_platform.config.secrets import SECRET

MOUNTED_SCHEMES = ("pvc",)
DOWNLOADED_SCHEMES = ("s3", "gs", "http", "https", "hf")
SCHEMES = MOUNTED_SCHEMES + DOWNLOADED_SCHEMES

DOWNLOAD_DIR = "/mnt/models"
INITIALIZER_CONTAINER = "storage-initializer"
# Credentials reach the storage initializer as files, never as environment variables.
SECRET_VOLUME = "model-storage-credentials"
SECRET_DIR = "/var/run/secrets/model-storage"
AWS_CREDENTIALS_FILE = "aws-credentials"
GCS_KEY_FILE = "gcs-service-account.json"
HF_TOKEN_FILE = "hf-token"
DEFAULT_PORTS = {"s3": 443, "gs": 443, "hf": 443, "https": 443, "http": 80}
S3_MAX_KEY_BYTES = 1024
"""The longest object key S3 takes, in bytes of its UTF-8 (Amazon S3's "Naming objects")."""


def _fail(kind: str, message: str, value: str) -> PydanticCustomError:
    return PydanticCustomError(f"model_uri_{kind}", message, {"value": value})


def check_model_uri(value: str) -> str:
    parts = urlsplit(value)
    if parts.scheme not in SCHEMES:
        raise PydanticCustomError(
            "model_uri_scheme",
            "'{value}' has an unsupported scheme: use one of {schemes}",
            {"value": value, "schemes": ", ".join(f"{s}://" for s in SCHEMES)},
        )
    path = parts.path.strip("/")
    if not parts.netloc:
        raise _fail("host", "'{value}' names no claim, bucket or host", value)
    if ".." in path.split("/"):
        raise _fail("path", "'{value}' must not contain '..'", value)
    if parts.scheme == "pvc":
        if not path or parts.query or parts.fragment:
            raise _fail("path", "'{value}' needs a path inside the claim: write pvc://<claim>/<path>", value)
        check_dns1123_subdomain(parts.netloc)
    elif parts.scheme == "hf":
        _check_hf(value)
    elif parts.scheme in ("http", "https") and (not path or path.endswith("/")):
        raise _fail("http", "'{value}' must name a file (an archive is unpacked): a URL ending in a file name", value)
    elif parts.scheme == "s3" and len(s3_key(value).encode()) > S3_MAX_KEY_BYTES:
        raise PydanticCustomError(
            "model_uri_key",
            "its object key (after the bucket) is {bytes} bytes in UTF-8: S3 takes at most {most}",
            {"bytes": len(s3_key(value).encode()), "most": f"{S3_MAX_KEY_BYTES:,}"},
        )
    return value


def s3_key(model_uri: str) -> str:
    """The object key (or prefix) of an s3:// URI as written: all after s3://<bucket>/."""
    return model_uri.split("/", 3)[3] if model_uri.count("/") >= 3 else ""


# hf://<owner>/<model>[:<revision>]: the revision is whatever the Hub takes, a branch (slashes
# too), a tag, refs/pr/<n> or a commit hash: a git ref name, which never holds a colon.
_HF_URI = re.compile(r"^hf://(?P<repo>[A-Za-z0-9][A-Za-z0-9._-]*/[A-Za-z0-9][A-Za-z0-9._-]*)(?::(?P<revision>.+))?$")
# git check-ref-format's rules for a ref name (the Hub's branches and tags are git refs).
_REF_FORBIDDEN = re.compile(r"[\x00-\x20\x7f~^:?*\[\\]|\.\.|@\{|//")


def _check_hf(value: str) -> None:
    found = _HF_URI.match(value)
    if found is None:
        raise _fail("hf", "'{value}' must be hf://<owner>/<model> or hf://<owner>/<model>:<revision>", value)
    revision = found["revision"]
    if revision is not None and not _is_ref_name(revision):
        raise _fail(
            "hf",
            "'{value}' has a revision the Hub cannot hold: a branch, a tag, refs/pr/<n> or a commit hash "
            "(no spaces, '..', '~^:?*[\\', or a part that starts with '.' or ends with '.lock')",
            value,
        )


def _is_ref_name(revision: str) -> bool:
    """Whether git (and so the Hub) takes `revision` as a branch or tag name, a ref or a commit hash."""
    parts = revision.split("/")
    return not (
        _REF_FORBIDDEN.search(revision)
        or revision == "@"
        or revision.endswith(".")
        or any(not part or part.startswith(".") or part.endswith(".lock") for part in parts)
    )


def hf_parts(model_uri: str) -> tuple[str, str | None]:
    """(repository, revision or None) of a valid hf:// URI."""
    found = _HF_URI.match(model_uri)
    assert found is not None, model_uri
    return found["repo"], found["revision"]


def _any_case(scheme: str) -> str:
    """A scheme as a pattern that takes it in any case, as urlsplit does."""
    return "".join(f"[{c.lower()}{c.upper()}]" if c.isalpha() else c for c in scheme)


def _uri_pattern(schemes: Sequence[str], rest: str) -> str:
    return f"^({'|'.join(_any_case(s) for s in schemes)})://{rest}"


_SUBDOMAIN = str(DNS1123_SUBDOMAIN_RULE.keywords["pattern"]).removeprefix("^").removesuffix("$")
# check_model_uri's rules, for editors (JSON Schema): each scheme's shape, and no '..' in the path.
# Not said: a claim's 253 characters, and a Hugging Face revision's shape (past hf://<owner>/<model>).
# An S3 key's 1,024 bytes are bounded as 1,024 characters (JSON Schema counts characters, never
# bytes; a character is one to four bytes): a longer key is flagged, one of non-ASCII characters
# that is within 1,024 characters and past 1,024 bytes is left to the render.
MODEL_URI_RULE = SchemaRule(
    anyOf=[
        {"pattern": _uri_pattern(MOUNTED_SCHEMES, rf"{_SUBDOMAIN}/[^?#]*[^/?#][^?#]*\??#?$")},
        {"pattern": _uri_pattern(("s3", "gs"), "[^/?#]+")},
        {"pattern": _uri_pattern(("http", "https"), "[^/?#]+/[^?#]*[^/?#]")},
        {"pattern": _uri_pattern(("hf",), "[^/?#]+/[^/?#]")},
    ],
    **{
        "not": {
            "anyOf": [
                {"pattern": r"^[^:]+://[^/?#]*/([^?#]*/)?\.\.(/|[?#]|$)"},
                {"pattern": _uri_pattern(MOUNTED_SCHEMES, r"([^/?#]*\.)?[^/?#.]{64}")},
                {"pattern": _uri_pattern(("s3",), rf"[^/]*/[\s\S]{{{S3_MAX_KEY_BYTES + 1}}}")},
            ]
        }
    },
)

ModelUri = Annotated[str, AfterValidator(check_model_uri), MODEL_URI_RULE]


def is_downloaded(model_uri: str) -> bool:
    return urlsplit(model_uri).scheme in DOWNLOADED_SCHEMES


def pvc_location(model_uri: str) -> tuple[str, str]:
    """(claim, path inside the claim) of a pvc:// model URI."""
    parts = urlsplit(model_uri)
    return parts.netloc, parts.path.strip("/")


class S3Settings(ConfigModel):
    endpoint: Annotated[str, Matches(r"^https?://[^\s/]+", "an http:// or https:// URL")] | None = Field(
        default=None, description="S3-compatible endpoint URL (MinIO, Ceph, ...); AWS when unset."
    )
    region: str | None = Field(default=None, description="The bucket's region.")
    verify_ssl: bool = Field(default=True, description="Verify the endpoint's TLS certificate.")
    access_key_id: Annotated[str | None, SECRET] = Field(
        default=None, description="The access key id; set it with pulumi config set --secret --path."
    )
    secret_access_key: Annotated[str | None, SECRET] = Field(
        default=None, description="The secret access key; set it with pulumi config set --secret --path."
    )
    anonymous: bool = Field(
        default=False,
        description="Read s3:// model files without credentials (a public bucket). Without keys and without "
        "this, an s3:// model URI is a config error.",
    )

    @model_validator(mode="after")
    def _keys_or_anonymous(self) -> S3Settings:
        keys = {"accessKeyId": self.access_key_id, "secretAccessKey": self.secret_access_key}
        problems = [
            (path, "set both keys, or neither (storage.s3.anonymous: true for a public bucket)")
            for path, value in keys.items()
            if not value and any(keys.values())
        ]
        if self.anonymous and any(keys.values()):
            problems.append(("anonymous", "anonymous access sends no keys: remove the keys or anonymous"))
        if problems:
            raise config_problems(problems)
        return self

    @property
    def has_keys(self) -> bool:
        return bool(self.access_key_id and self.secret_access_key)

    @property
    def says_how(self) -> bool:
        """Keys (one alone is this model's own problem) or anonymous access: a way to read s3:// is declared."""
        return bool(self.access_key_id or self.secret_access_key or self.anonymous)


class GcsSettings(ConfigModel):
    service_account_key: Annotated[str, SECRET] = Field(
        description="The JSON key of a service account (a Pulumi secret)."
    )


class HuggingFaceSettings(ConfigModel):
    token: Annotated[str, SECRET] = Field(
        description="An access token for gated or private repositories (a Pulumi secret)."
    )


class StorageCredentials(ConfigModel):
    """Credentials the storage initializer uses, per scheme. Always stored as a Kubernetes Secret."""

    s3: S3Settings | None = Field(
        default=None, description="S3 (or S3-compatible) credentials and endpoint for s3:// model URIs."
    )
    gcs: GcsSettings | None = Field(default=None, description="A GCS service account key for gs:// model URIs.")
    huggingface: HuggingFaceSettings | None = Field(
        default=None, description="A Hugging Face token for hf:// model URIs."
    )

    def access(self, secret_name: str) -> StorageAccess:
        s3 = self.s3 or S3Settings()
        return StorageAccess(
            secret_name=secret_name,
            s3_endpoint=s3.endpoint,
            s3_region=s3.region,
            s3_verify_ssl=s3.verify_ssl,
            s3_keys=s3.has_keys,
            s3_anonymous=s3.anonymous,
            gcs_key=self.gcs is not None,
            hf_token=self.huggingface is not None,
        )

    def secret_data(self) -> dict[str, str]:
        """The Secret's files: an AWS shared credentials file, a GCS key, a Hugging Face token."""
        data: dict[str, str] = {}
        if self.s3 and self.s3.has_keys:
            data[AWS_CREDENTIALS_FILE] = (
                f"[default]\naws_access_key_id = {self.s3.access_key_id}\n"
                f"aws_secret_access_key = {self.s3.secret_access_key}\n"
            )
        if self.gcs:
            data[GCS_KEY_FILE] = self.gcs.service_account_key
        if self.huggingface:
            data[HF_TOKEN_FILE] = self.huggingface.token
        return data


class StorageAccess(ConfigModel):
    """What a pod needs to know about the credentials: the Secret's name and the settings that are
    not secret. The secret values themselves never pass through the components."""

    secret_name: DNS1123Label
    s3_endpoint: str | None = None
    s3_region: str | None = None
    s3_verify_ssl: bool = True
    s3_keys: bool = Field(
        default=False, description="The Secret holds S3 keys (an AWS shared credentials file, aws-credentials)."
    )
    s3_anonymous: bool = Field(
        default=False,
        description="Read s3:// model files without credentials (a public bucket); an s3:// model URI needs "
        "this or s3Keys.",
    )
    gcs_key: bool = False
    hf_token: bool = False


def initializer_env(scheme: str, access: StorageAccess | None) -> tuple[list[dict[str, Any]], bool]:
    """Environment of the storage initializer for one scheme, and whether it mounts the credentials.

    These are the variables KServe's storage code and the SDKs it uses read: boto3's shared
    credentials file, huggingface_hub's token file, Google's application credentials.
    """
    env: list[dict[str, Any]] = [{"name": "HOME", "value": "/tmp"}, {"name": "HF_HOME", "value": "/tmp/hf"}]
    credentials: dict[str, Any] = {}
    if scheme == "s3":
        if access and access.s3_endpoint:
            env.append({"name": "AWS_ENDPOINT_URL", "value": access.s3_endpoint})
        if access and access.s3_region:
            env.append({"name": "AWS_DEFAULT_REGION", "value": access.s3_region})
        if access and not access.s3_verify_ssl:
            env.append({"name": "S3_VERIFY_SSL", "value": "0"})
        if access and access.s3_keys:
            credentials = {"AWS_SHARED_CREDENTIALS_FILE": f"{SECRET_DIR}/{AWS_CREDENTIALS_FILE}"}
        elif access and access.s3_anonymous:
            env.append({"name": "awsAnonymousCredential", "value": "true"})
    elif scheme == "gs" and access and access.gcs_key:
        credentials = {"GOOGLE_APPLICATION_CREDENTIALS": f"{SECRET_DIR}/{GCS_KEY_FILE}"}
    elif scheme == "hf" and access and access.hf_token:
        credentials = {"HF_TOKEN_PATH": f"{SECRET_DIR}/{HF_TOKEN_FILE}"}
    env += [{"name": name, "value": value} for name, value in credentials.items()]
    return env, bool(credentials)


# KServe's storage initializer splits an hf:// URI at every '/' and refuses more than two parts:
# a revision with a slash (refs/pr/7, a branch feature/x) goes to huggingface_hub's
# snapshot_download directly (what the initializer calls), in the same image, its parts as
# arguments of their own: no shell, nothing to quote.
HF_DOWNLOAD = (
    "import sys; from huggingface_hub import snapshot_download; "
    "snapshot_download(repo_id=sys.argv[1], revision=sys.argv[2], local_dir=sys.argv[3])"
)


def initializer_call(model_uri: str) -> dict[str, list[str]]:
    """The storage initializer's command and arguments for a downloaded URI."""
    if urlsplit(model_uri).scheme == "hf":
        repo, revision = hf_parts(model_uri)
        if revision is not None and "/" in revision:
            return {"command": ["python", "-c", HF_DOWNLOAD], "args": [repo, revision, DOWNLOAD_DIR]}
    return {"args": [model_uri, DOWNLOAD_DIR]}


def needs_s3_credentials(model_uri: str, s3_keys: bool, s3_anonymous: bool) -> bool:
    """An s3:// URI with neither keys nor anonymous access declared: never read anonymously by default."""
    return urlsplit(model_uri).scheme == "s3" and not (s3_keys or s3_anonymous)


def download_port(model_uri: str, access: StorageAccess | None) -> int:
    """The port the storage initializer connects to for a downloaded URI (for network policy)."""
    parts = urlsplit(model_uri)
    if parts.scheme == "s3" and access and access.s3_endpoint:
        parts = urlsplit(access.s3_endpoint)
    return parts.port or DEFAULT_PORTS.get(parts.scheme, 443)


@dataclass(frozen=True)
class CacheClaim:
    """A cached version's copy on its node (serving/model_cache_volumes.py): a claim its pods mount
    read-only instead of downloading the files it holds."""

    claim: str
    sub_paths: Mapping[str, str]
    """Where each cached volume's files are inside the claim, by the volume's name (the model's, an
    adapter's)."""


@dataclass(frozen=True)
class ModelFiles:
    """The pod parts that put one version's files in place."""

    volume: dict[str, Any]
    sub_path: str | None
    init_container: dict[str, Any] | None = None
    extra_volumes: tuple[dict[str, Any], ...] = ()


def model_files(
    model_uri: str,
    *,
    volume_name: str,
    download_size: str,
    access: StorageAccess | None,
    scratch_volume: str,
    security_context: dict[str, Any],
    container_name: str = INITIALIZER_CONTAINER,
    storage_request: str | None = None,
    cache: CacheClaim | None = None,
) -> ModelFiles:
    """The volume and (for a download) the init container that put `model_uri`'s files in place.
    The download requests `storage_request` of ephemeral storage, `download_size` by default. Files
    a `cache` claim holds (for `volume_name`) are mounted from it instead of downloaded."""
    if cache is not None and volume_name in cache.sub_paths:
        volume = {"name": volume_name, "persistentVolumeClaim": {"claimName": cache.claim, "readOnly": True}}
        return ModelFiles(volume=volume, sub_path=cache.sub_paths[volume_name])
    if not is_downloaded(model_uri):
        claim, path = pvc_location(model_uri)
        volume = {"name": volume_name, "persistentVolumeClaim": {"claimName": claim, "readOnly": True}}
        return ModelFiles(volume=volume, sub_path=path)

    scheme = urlsplit(model_uri).scheme
    env, mounts_credentials = initializer_env(scheme, access)
    mounts: list[dict[str, Any]] = [
        {"name": volume_name, "mountPath": DOWNLOAD_DIR},
        {"name": scratch_volume, "mountPath": "/tmp"},
    ]
    extra_volumes: tuple[dict[str, Any], ...] = ()
    if mounts_credentials and access is not None:
        mounts.append({"name": SECRET_VOLUME, "mountPath": SECRET_DIR, "readOnly": True})
        extra_volumes = ({"name": SECRET_VOLUME, "secret": {"secretName": access.secret_name}},)
    init_container: dict[str, Any] = {
        "name": container_name,
        "image": pins.STORAGE_INITIALIZER_IMAGE,
        **initializer_call(model_uri),
        "env": env,
        # The scheduler counts ephemeral-storage requests, not an emptyDir's sizeLimit: the writer of
        # the files requests their size, so the pod's effective request has room for them on its node.
        "resources": {
            "requests": {"cpu": "100m", "memory": "256Mi", "ephemeral-storage": storage_request or download_size},
            "limits": {"cpu": "1", "memory": "1Gi"},
        },
        "securityContext": security_context,
        "volumeMounts": mounts,
    }
    volume = {"name": volume_name, "emptyDir": {"sizeLimit": download_size}}
    return ModelFiles(volume=volume, sub_path=None, init_container=init_container, extra_volumes=extra_volumes)


@dataclass(frozen=True)
class ExtraFiles:
    """Files a server reads beside its model's (a LoRA adapter's), fetched the way a model's are."""

    name: str
    """Its volume's name, and its download's init container's: a DNS label."""
    uri: str
    path: str
    """Where the server reads them (mounted read-only)."""
    download_size: str
    """The size of its download's volume."""


@dataclass(frozen=True)
class PodFiles:
    """The pod parts that put extra files in place: init containers, volumes, the server's mounts."""

    init_containers: tuple[dict[str, Any], ...] = ()
    volumes: tuple[dict[str, Any], ...] = ()
    mounts: tuple[dict[str, Any], ...] = ()


def extra_files(
    items: Sequence[ExtraFiles],
    *,
    claims: Mapping[str, str],
    downloaded: Sequence[str],
    access: StorageAccess | None,
    scratch_volume: str,
    security_context: dict[str, Any],
    cache: CacheClaim | None = None,
) -> PodFiles:
    """Each item's files, fetched as a model's are: a pvc:// item mounted from its claim (through the
    volume `claims` already maps it to, such as the model's, or a volume of its own), any other
    downloaded into a volume of its own by an init container of its own with the same credentials
    (the Secret's volume is the one the model's download mounts), and one a `cache` claim holds
    mounted from it (through the volume `claims` maps the cache's claim to).

    Init containers run one after another and the scheduler reserves the largest request among them,
    so each download requests everything on the node's disk when it is done: the sizes already
    `downloaded` (the model's) and every download before it, its own included."""
    init_containers: list[dict[str, Any]] = []
    volumes: list[dict[str, Any]] = []
    mounts: list[dict[str, Any]] = []
    claimed = dict(claims)
    sizes = list(downloaded)
    for item in items:
        if is_downloaded(item.uri) and not (cache is not None and item.name in cache.sub_paths):
            sizes.append(item.download_size)
        files = model_files(
            item.uri,
            volume_name=item.name,
            download_size=item.download_size,
            access=access,
            scratch_volume=scratch_volume,
            security_context=security_context,
            container_name=item.name,
            storage_request=quantity_sum(sizes),
            cache=cache,
        )
        mount: dict[str, Any] = {"name": item.name, "mountPath": item.path, "readOnly": True}
        if files.init_container is None:
            claim = files.volume["persistentVolumeClaim"]["claimName"]
            mount["name"] = claimed.setdefault(claim, item.name)
            mount["subPath"] = files.sub_path
        else:
            init_containers.append(files.init_container)
            volumes += [v for v in files.extra_volumes if v not in volumes]
        if mount["name"] == item.name:
            volumes.append(files.volume)
        mounts.append(mount)
    return PodFiles(tuple(init_containers), tuple(volumes), tuple(mounts))
