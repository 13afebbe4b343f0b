"""Shared fixtures: stack configs to start from, and renders of them through the real program."""

from __future__ import annotations

import asyncio
import base64
import copy
import dataclasses
import functools
import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from filelock import FileLock

from inference_platform import pins
from inference_platform.cli.charts import (
    CHARTS_DIR_ENV,
    MANIFESTS_DIR_ENV,
    NO_CHARTS_ENV,
    ChartSource,
    ChartsUnavailableError,
    ManifestSource,
    default_cache,
    default_manifest_cache,
    pinned_tarball,
)
from inference_platform.cli.main import main
from inference_platform.cli.render import RenderResult, run_program
from inference_platform.cli.render_files import read_render
from inference_platform.cli.stack_file import StackFile, read_stack_file
from inference_platform.config.errors import ConfigError
from inference_platform.config.secrets import secret_paths
from inference_platform.pins import ChartPin, ManifestPin
from inference_platform.stack.config import PROJECT, StackConfig, decode_value
from inference_platform.stack.fleet import PLATFORM_STACK_KEY, SHARDS_KEY

ROOT = Path(__file__).resolve().parent.parent

# Renders expand charts with Helm only where a test asks for it (--charts-dir): the rest are about
# the program's own objects, and must not try to pull charts from the network.
# A directory of pinned chart tarballs given for the chart tests ($INFRA_TEST_CHARTS_DIR, or the
# render's own $INFRA_CHARTS_DIR), read before the render's variable is cleared below.
GIVEN_CHARTS_DIR = os.environ.get("INFRA_TEST_CHARTS_DIR") or os.environ.get(CHARTS_DIR_ENV)
# The same for the pinned manifest files (the Gateway API's and the inference extension's CRDs).
GIVEN_MANIFESTS_DIR = os.environ.get("INFRA_TEST_MANIFESTS_DIR") or os.environ.get(MANIFESTS_DIR_ENV)
os.environ[NO_CHARTS_ENV] = "1"
os.environ.pop(CHARTS_DIR_ENV, None)
os.environ.pop(MANIFESTS_DIR_ENV, None)
# The pinned chart tarballs beside the checkout, as in CI (see ../shared/charts/README.md).
SHARED_CHARTS_DIR = ROOT.parent / "shared" / "charts"
SHARED_MANIFESTS_DIR = ROOT.parent / "shared" / "crds"
# Upstream facts as their owners publish them, beside the checkout as in CI (../shared/README.md):
# for tests only, never read by the program.
SHARED_DIR = Path(os.environ.get("INFRA_TEST_SHARED_DIR") or ROOT.parent / "shared")


LIBRARY_PHRASES = (
    "Input should be",
    "Value error",
    "Assertion failed",
    "String should",
    "Field required",
    "Extra inputs",
    "List should",
    "Dictionary should",
)
"""Pydantic's own sentences, which a report in the stack file's words never holds."""


@pytest.fixture(autouse=True)
def _reports_in_the_stack_files_words(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Every config report any test makes (every bad input the tests hold: the schema corpus, the
    config errors, the hostile configs, fleets ...) holds none of pydantic's sentences: each
    ConfigError a test creates is read as it is made, and the test fails at its end on one."""
    leaked: list[str] = []
    made = ConfigError.__init__

    def reading(self: ConfigError, *args: Any, **kwargs: Any) -> None:
        made(self, *args, **kwargs)
        leaked.extend(str(p) for p in self.problems if any(phrase in p.message for phrase in LIBRARY_PHRASES))

    monkeypatch.setattr(ConfigError, "__init__", reading)
    yield
    assert not leaked, "a config report in pydantic's words:\n" + "\n".join(leaked)


def shared_path(relative: str) -> Path:
    """A file or directory of ../shared, or a skip that names what is missing and why it is needed."""
    path = SHARED_DIR / relative
    if not path.exists():
        pytest.skip(f"{path} is absent: the upstream files this test checks against are in ../shared (CI has them)")
    return path


CHART_PINS = [pin for pin in vars(pins).values() if isinstance(pin, ChartPin)]
MANIFEST_PINS = [pin for pin in vars(pins).values() if isinstance(pin, ManifestPin)]


def chart_source() -> tuple[ChartSource, str]:
    """Where the chart tests' renders take their charts from, in the render's own order (see
    cli/charts.py): a directory given, the copies beside the checkout, else the render's pull
    cache, which `helm pull` fills from the pinned repositories when there is network."""
    if GIVEN_CHARTS_DIR:
        return ChartSource(Path(GIVEN_CHARTS_DIR), pull=False), "the directory given"
    if SHARED_CHARTS_DIR.is_dir():
        return ChartSource(SHARED_CHARTS_DIR, pull=False), "the copies beside the checkout"
    return ChartSource(default_cache(), pull=True), "the render's pull cache"


@functools.cache
def _pinned_charts() -> Path | str:
    """The directory holding every pinned chart's tarball, or why the render could not expand
    charts here (each worker asks once; the cache's lock keeps workers from pulling at once)."""
    source, what = chart_source()
    try:
        source.directory.parent.mkdir(parents=True, exist_ok=True)
        with FileLock(f"{source.directory}.lock"):
            for pin in CHART_PINS:
                pinned_tarball(pin, source)
    except (ChartsUnavailableError, OSError) as error:
        return f"the render cannot expand charts from {what} ({source.directory}): {error}"
    return source.directory


def charts_dir() -> Path:
    """The pinned chart tarballs the render expands, or a skip that says why the render could not."""
    found = _pinned_charts()
    if isinstance(found, str):
        pytest.skip(found)
    return found


def manifest_source() -> tuple[ManifestSource, str]:
    """Where the chart tests' renders take pinned manifest files from, in the render's own order: a
    directory given, the copies beside the checkout, else the render's cache, fetched when missing."""
    if GIVEN_MANIFESTS_DIR:
        return ManifestSource(Path(GIVEN_MANIFESTS_DIR), fetch=False), "the directory given"
    if SHARED_MANIFESTS_DIR.is_dir():
        return ManifestSource(SHARED_MANIFESTS_DIR, fetch=False), "the copies beside the checkout"
    return ManifestSource(default_manifest_cache(), fetch=True), "the render's manifest cache"


@functools.cache
def _pinned_manifests() -> Path | str:
    source, what = manifest_source()
    try:
        source.directory.parent.mkdir(parents=True, exist_ok=True)
        with FileLock(f"{source.directory}.lock"):
            for pin in MANIFEST_PINS:
                source.path(pin.url)
    except (ChartsUnavailableError, OSError) as error:
        return f"the render cannot expand pinned manifests from {what} ({source.directory}): {error}"
    return source.directory


def manifests_dir() -> Path:
    """The pinned manifest files the render expands, or a skip that says why the render could not."""
    found = _pinned_manifests()
    if isinstance(found, str):
        pytest.skip(found)
    return found


BASE_CONFIG: dict[str, Any] = {
    "inference-platform:domain": "models.example.com",
    "inference-platform:namespace": "service",
    "inference-platform:models": [
        {
            "name": "iris",
            "runtime": "mlserver",
            "versions": [
                {"name": "v1", "modelUri": "pvc://models/iris/v1", "weight": 90},
                {"name": "v2", "modelUri": "pvc://models/iris/v2", "weight": 10},
                {"name": "v3", "modelUri": "pvc://models/iris/v3", "mirrorPercent": 50},
            ],
        },
        {
            "name": "churn",
            "runtime": "mlserver",
            "format": "xgboost",
            "versions": [{"name": "v1", "modelUri": "pvc://models/churn/v1", "weight": 100}],
        },
    ],
}


# A valid model of each runtime with only what that runtime requires (add `name` and `versions`);
# tests that go over every runtime read it, and one checks it holds every runtime of the union.
RUNTIME_MINIMUMS: dict[str, dict[str, Any]] = {
    "tfserving": {"runtime": "tfserving"},
    "torchserve": {"runtime": "torchserve"},
    "triton": {
        "runtime": "triton",
        "format": "onnx",
        "inputs": [{"name": "x", "dataType": "FP32", "dims": [4]}],
        "outputs": [{"name": "y", "dataType": "FP32", "dims": [2]}],
    },
    "triton-llm": {"runtime": "triton-llm", "engine": "engine", "gpu": "exclusive"},
    "mlserver": {"runtime": "mlserver"},
    "vllm": {"runtime": "vllm", "gpu": "exclusive"},
    "sglang": {"runtime": "sglang", "gpu": "exclusive"},
    "mindie": {"runtime": "mindie", "npu": "Ascend910B3"},
    "custom": {
        "runtime": "custom",
        "image": "registry.example.com/server:1.0.0",
        "port": 8080,
        "readiness": {"path": "/ready"},
        "nonRootImage": True,
    },
}


def base_config() -> dict[str, Any]:
    """A fresh copy of a valid stack config (the `config:` section), to mutate in a test."""
    return copy.deepcopy(BASE_CONFIG)


def write_stack_file(path: Path, config: dict[str, Any]) -> Path:
    path.write_text(yaml.safe_dump({"config": config}, sort_keys=False), encoding="utf-8")
    return path


def _secret_holders(config: dict[str, Any]) -> list[tuple[dict[str, Any], str]]:
    """(mapping, key) of every secret setting (config/secrets.py's marks) a stack config sets."""
    holders = []
    for path in secret_paths(StackConfig):
        holder: Any = config.get(f"{PROJECT}:{path[0]}")
        for key in path[1:-1]:
            holder = holder.get(key) if isinstance(holder, dict) else None
        value = holder.get(path[-1]) if isinstance(holder, dict) else None
        if value is not None and not (isinstance(value, dict) and set(value) == {"secure"}):
            holders.append((holder, path[-1]))
    return holders


def secured(config: dict[str, Any]) -> dict[str, Any]:
    """A stack config's secret settings as `pulumi config set --secret` writes them (`secure:`
    ciphertext, here the value base64-encoded), the rest as it is."""
    config = copy.deepcopy(config)
    for holder, key in _secret_holders(config):
        holder[key] = {"secure": "v1:" + base64.b64encode(str(holder[key]).encode()).decode()}
    return config


def as_pulumi_up(stack_file: StackFile) -> StackFile:
    """A stack file as `pulumi up` hands it to the program when its secret settings were set with
    `pulumi config set --secret`: decrypted, and their top-level keys named secret."""
    config = {key: decode_value(value) for key, value in stack_file.config.items()}
    keys = {key for key in config if _secret_holders({key: config[key]})}
    return dataclasses.replace(stack_file, secret_keys=sorted({*stack_file.secret_keys, *keys}))


def platform_stack_config(shards: list[str]) -> dict[str, Any]:
    """A platform stack: base_config's environment settings and its shards' stack names, no models."""
    config = {key: value for key, value in base_config().items() if key != "inference-platform:models"}
    return config | {f"inference-platform:{SHARDS_KEY}": shards}


def shard_stack_config(platform: str, models: list[str]) -> dict[str, Any]:
    """A shard: those of base_config's models, and the platform stack it reads (a self-managed
    backend's StackReference name: its organization is always `organization`)."""
    kept = [model for model in base_config()["inference-platform:models"] if model["name"] in models]
    return {
        f"inference-platform:{PLATFORM_STACK_KEY}": f"organization/inference-platform/{platform}",
        "inference-platform:models": kept,
    }


def write_sharded_repository(directory: Path) -> Path:
    """A project's stack files: prod, a platform stack with the shards prod-a (iris) and prod-b
    (churn); dev, one stack as today. With the project's Pulumi.yaml, and an example stack file
    under examples/ that is not one of its stacks."""
    (directory / "Pulumi.yaml").write_bytes((ROOT / "Pulumi.yaml").read_bytes())
    write_stack_file(directory / "Pulumi.prod.yaml", platform_stack_config(["prod-a", "prod-b"]))
    write_stack_file(directory / "Pulumi.prod-a.yaml", shard_stack_config("prod", ["iris"]))
    write_stack_file(directory / "Pulumi.prod-b.yaml", shard_stack_config("prod", ["churn"]))
    write_stack_file(directory / "Pulumi.dev.yaml", base_config())
    (directory / "examples").mkdir(exist_ok=True)
    write_stack_file(directory / "examples" / "Pulumi.example.yaml", base_config())
    return directory


@pytest.fixture
def render_config(tmp_path: Path) -> Callable[..., RenderResult]:
    """Run the program under mocks with a config; returns what it registered."""

    def render(config: dict[str, Any], stack: str = "test") -> RenderResult:
        stack_file = read_stack_file(write_stack_file(tmp_path / f"Pulumi.{stack}.yaml", config))
        return run_program(stack, as_pulumi_up(stack_file))

    return render


@pytest.fixture
def render_dir(tmp_path: Path) -> Callable[..., Path]:
    """Render a config with `python -m infra render` into a fresh directory; returns that directory."""
    counter = iter(range(1_000_000))

    def render(config: dict[str, Any]) -> Path:
        # One stack, several configs: the stack's name is part of what it renders (alert actions).
        index = next(counter)
        (tmp_path / f"stack-{index}").mkdir()
        stack_path = write_stack_file(tmp_path / f"stack-{index}" / "Pulumi.test.yaml", config)
        out = tmp_path / f"render-{index}"
        assert main(["render", "--stack", "test", "--config", str(stack_path), "--out", str(out)]) == 0
        return out

    return render


STACKS = sorted(path.name.split(".")[1] for path in ROOT.glob("Pulumi.*.yaml"))
# The recipes of docs/custom-runtime.md: stack files that render and pass the whole-cluster checks.
EXAMPLE_STACKS = {
    path.name.split(".")[1]: path for path in sorted((ROOT / "examples" / "stacks").glob("Pulumi.*.yaml"))
}


def stack_file(stack: str) -> Path:
    """A stack file of the repository: the project's own, or an example's."""
    return EXAMPLE_STACKS.get(stack, ROOT / f"Pulumi.{stack}.yaml")


def render_stack(tmp_path_factory: pytest.TempPathFactory, stack: str) -> list[dict[str, Any]]:
    out = tmp_path_factory.mktemp(stack) / "render"
    assert main(["render", "--stack", stack, "--config", str(ROOT / f"Pulumi.{stack}.yaml"), "--out", str(out)]) == 0
    manifests, _, _ = read_render(out)
    return manifests


@pytest.fixture(scope="session")
def dev_manifests(tmp_path_factory: pytest.TempPathFactory) -> list[dict[str, Any]]:
    """Every object the dev stack renders."""
    return render_stack(tmp_path_factory, "dev")


@pytest.fixture(scope="session", params=STACKS)
def stack_manifests(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> list[dict[str, Any]]:
    """Every object each stack in the repository renders (dev, prod)."""
    return render_stack(tmp_path_factory, request.param)


@pytest.fixture
def pulumi_mocks() -> Iterator[RenderResult]:
    """Pulumi mocks for unit tests of a single component; the result fills as resources register.

    The test gets an event loop of its own, as run_program does: the SDK creates futures on the
    current loop, and no loop must leak from one test into another."""
    import pulumi.runtime
    import pulumi.runtime.settings

    from inference_platform.cli.render import RecordingMocks, RecordingMonitor
    from inference_platform.stack.config import PROJECT

    loop = asyncio.new_event_loop()
    asyncio.set_event_loop(loop)
    result = RenderResult()
    mocks = RecordingMocks()
    try:
        pulumi.runtime.set_mocks(
            mocks, project=PROJECT, stack="unit", preview=False, monitor=RecordingMonitor(mocks, result)
        )
        yield result
    finally:
        pulumi.runtime.settings.set_root_resource(None)  # type: ignore[arg-type]
        loop.close()
        asyncio.set_event_loop(None)


SECRET_VALUES = (
    "AKIA-TEST-KEY-ID",
    "s3-secret-access-key-value",
    '{"private_key": "gcs-key"}',
    "hf_token_value",
    "grafana-admin-password",
)


def full_config(decrypted: bool = False) -> dict[str, Any]:
    """Every runtime, GPU mode and download scheme, a transformer, every protection, storage credentials
    and shadows whose answers are compared. Its secret settings are `secure:` values, as a stack
    file holds them; `decrypted`: their values, as `pulumi up` hands them to the program."""
    config = base_config()
    config["inference-platform:platform"] = {
        "kubernetesVersion": "1.30.4",
        "ingress": {"tls": {"secretName": "models-tls"}},
        "dcgmExporter": {"enabled": True},
        "hami": {"enabled": True},
        "gpuNodes": {"memoryMib": 81920, "nodeSelector": {"gpu": "on"}},
        "grafana": {"enabled": True, "adminPassword": SECRET_VALUES[4], "expose": True},
    }
    config["inference-platform:storage"] = {
        "s3": {
            "endpoint": "https://minio.example.com",
            "region": "eu-west-1",
            "accessKeyId": SECRET_VALUES[0],
            "secretAccessKey": SECRET_VALUES[1],
        },
        "gcs": {"serviceAccountKey": SECRET_VALUES[2]},
        "huggingface": {"token": SECRET_VALUES[3]},
    }
    tensors = {
        "inputs": [{"name": "input", "dataType": "FP32", "dims": [4]}],
        "outputs": [{"name": "output", "dataType": "FP32", "dims": [2]}],
    }
    # churn scales on CPU: the resource metrics API, so metrics-server is installed.
    config["inference-platform:models"][1]["autoscaling"] = {"minReplicas": 1, "maxReplicas": 4, "cpuUtilization": 70}
    # iris's shadow (Open Inference Protocol) has its answers compared with the primary's, sampled.
    config["inference-platform:models"][0]["analysis"] = {"payloads": {"enabled": True, "sample": 0.5}}
    config["inference-platform:models"] += [
        {
            "name": "mnist",
            "runtime": "tfserving",
            "gpu": {"mode": "exclusive", "count": 1},
            "batching": {"maxBatchSize": 16},
            "versions": [
                {"name": "v1", "modelUri": "s3://models/mnist/1", "weight": 100},
                {"name": "v2", "modelUri": "s3://models/mnist/2", "mirrorPercent": 10},
            ],
            "analysis": {"payloads": {"enabled": True, "minAgreement": 0.995}},
            # A rollout that starts with a dark launch: v2 judged as a shadow (answers compared) first.
            "rollout": {"candidate": "v2", "steps": [20, 50], "interval": "30m", "shadowFirst": {"mirrorPercent": 10}},
        },
        {
            "name": "resnet",
            "runtime": "triton",
            "format": "onnx",
            "maxBatchSize": 8,
            "gpu": {"mode": "vgpu", "memoryPercent": 25, "cores": 30},
            "versions": [{"name": "v1", "modelUri": "gs://models/resnet/1", "weight": 100}],
            **tensors,
        },
        {
            "name": "bert",
            "runtime": "torchserve",
            "transformer": {"image": "registry.example.com/tokenizer:1.2.0", "healthPath": "/healthz"},
            # The tokenizer looks tokens up in the embedding model: a declared call.
            "calls": ["embed"],
            "protection": {
                "rateLimit": {"requestsPerSecond": 100},
                "clients": {"allowCidrs": ["10.0.0.0/8"], "denyCidrs": ["10.6.6.0/24"]},
                "requireHeaders": [{"name": "x-team", "values": ["nlp"]}],
                "jwt": {"issuer": "https://auth.example.com", "jwksUri": "https://auth.example.com/jwks"},
                "circuitBreaker": {"maxConnections": 256, "consecutiveErrors": 3},
            },
            "versions": [{"name": "v1", "modelUri": "https://models.example.com/bert/bert.mar", "weight": 100}],
        },
        {
            "name": "llama",
            "runtime": "vllm",
            "gpu": {"mode": "vgpu", "memoryMib": 40960},
            "maxModelLen": 8192,
            "versions": [
                {
                    "name": "v1",
                    "modelUri": "hf://meta-llama/Llama-3.1-8B-Instruct",
                    "weight": 100,
                    # LoRA adapters beside the base model, downloaded like it: from the stack's S3 (its
                    # credentials) and from Hugging Face.
                    "adapters": [
                        {"name": "sql", "uri": "s3://adapters/llama-3.1-8b/sql"},
                        {"name": "support", "uri": "hf://acme/llama-3.1-8b-support-lora", "downloadSize": "1Gi"},
                    ],
                }
            ],
            "maxLoraRank": 32,
            # Scales on vLLM's queue and its p90 time to first token: the adapter serves requests_waiting
            # and time_to_first_token_p90_seconds (KEDA: a trigger each).
            "autoscaling": {"minReplicas": 1, "maxReplicas": 2, "queueDepth": 8, "timeToFirstTokenP90": 2},
        },
        {
            # Too large for one node: each replica a LeaderWorkerSet group of 2 pods x 8 GPUs.
            "name": "deepseek",
            "runtime": "vllm",
            "gpu": {"mode": "exclusive", "count": 8},
            "nodes": 2,
            "tensorParallelSize": 8,
            "maxModelLen": 32768,
            "versions": [{"name": "v1", "modelUri": "pvc://models/deepseek-v3", "weight": 100}],
            "autoscaling": {"minReplicas": 1, "maxReplicas": 2, "queueDepth": 16},
        },
        {
            # vLLM on Ascend NPUs: vllm-ascend's image, two whole 910B3 cards, tensor parallel over them.
            "name": "qwen-ascend",
            "runtime": "vllm",
            "npu": {"type": "Ascend910B3", "count": 2},
            "tensorParallelSize": 2,
            "maxModelLen": 16384,
            "versions": [{"name": "v1", "modelUri": "pvc://models/qwen3-32b", "weight": 100}],
        },
        {
            "name": "qwen",
            "runtime": "sglang",
            "gpu": {"mode": "exclusive", "count": 2},
            "tensorParallelSize": 2,
            # A canary judged on SGLang's time to first token and time per output token too (rules,
            # alerts, dashboard panels), its time-to-first-token threshold tighter than the default.
            "versions": [
                {
                    "name": "v1",
                    "modelUri": "hf://Qwen/Qwen3-8B",
                    "weight": 90,
                    # A LoRA adapter mounted from a claim; room in a batch for one more, loaded later.
                    "adapters": [{"name": "summarize", "uri": "pvc://adapters/qwen3-8b/summarize"}],
                },
                {
                    "name": "v2",
                    "modelUri": "hf://Qwen/Qwen3-8B-FP8",
                    "weight": 10,
                    # The canary takes a tenth of every request, the adapter's too: it serves it as well.
                    "adapters": [{"name": "summarize", "uri": "pvc://adapters/qwen3-8b/summarize"}],
                },
            ],
            "maxLoras": 2,
            "analysis": {"maxTimeToFirstTokenIncreasePercent": 10},
            # v2 rolled out by `infra rollout` (docs/rollouts.md): at its first step, as the command wrote it.
            "rollout": {
                "candidate": "v2",
                "steps": [10, 25, 50],
                "interval": "15m",
                "failureLimit": 2,
                "retirePrevious": True,
                "status": {
                    "phase": "canary",
                    "step": 1,
                    "primary": "v1",
                    "baseline": {"v1": 90},
                    "since": "2026-12-01T09:00:00Z",
                    "decision": "advance",
                    "reason": "started: step 1 (10 %)",
                },
            },
            # SGLang's queue and time to first token beside vLLM's: one adapter rule over both gauges,
            # one over both histograms.
            "autoscaling": {"minReplicas": 1, "maxReplicas": 2, "queueDepth": 4, "timeToFirstTokenP90": 1.5},
        },
        {
            # Triton with the TensorRT-LLM backend, streaming; scales on the backend's waiting requests,
            # a labelled gauge beside vLLM's and SGLang's plain ones.
            "name": "mistral",
            "runtime": "triton-llm",
            "engine": "engines/1-gpu",
            "tokenizer": "tokenizer",
            "maxBatchSize": 32,
            "kvCacheFreeGpuMemFraction": 0.85,
            "gpu": {"mode": "vgpu", "memoryMib": 40960},
            "versions": [{"name": "v1", "modelUri": "s3://models/mistral-7b-trtllm/1", "weight": 100}],
            "autoscaling": {"minReplicas": 1, "maxReplicas": 2, "queueDepth": 8},
        },
        {
            # MindIE on Ascend NPUs across nodes: a group of 2 pods x 8 NPUs joined by an HCCL rank table,
            # scaling on MindIE's own queue gauge.
            "name": "qwen-npu",
            "runtime": "mindie",
            "npu": {"type": "Ascend910B3", "count": 8},
            "nodes": 2,
            "maxSeqLen": 8192,
            "maxInputTokenLen": 4096,
            "versions": [{"name": "v1", "modelUri": "pvc://models/qwen3-32b", "weight": 100}],
            "autoscaling": {"minReplicas": 1, "maxReplicas": 2, "queueDepth": 16},
        },
        {
            # Routed through inference pools (an endpoint picker per version) on a TLS gateway: a
            # canary, a shadow mirrored at a fraction, answers compared, a rate limit and an allow list.
            "name": "chat",
            "runtime": "vllm",
            "gpu": {"mode": "exclusive", "count": 1},
            "routing": "inference-pool",
            "inferencePool": {
                "scorers": [
                    {"type": "prefix-cache-scorer", "weight": 3},
                    {"type": "queue-scorer", "weight": 2},
                    {"type": "kv-cache-utilization-scorer", "weight": 2},
                    {"type": "lora-affinity-scorer", "weight": 1},
                ],
                "failureMode": "FailClose",
            },
            "protection": {"rateLimit": {"requestsPerSecond": 20}, "clients": {"allowCidrs": ["10.0.0.0/8"]}},
            "analysis": {"payloads": {"enabled": True}},
            "versions": [
                {"name": "v1", "modelUri": "hf://Qwen/Qwen3-8B", "weight": 80},
                {"name": "v2", "modelUri": "hf://Qwen/Qwen3-8B", "weight": 20},
                {"name": "v3", "modelUri": "hf://Qwen/Qwen3-8B", "mirrorPercent": 12.5},
            ],
        },
        {
            "name": "embed",
            "runtime": "triton",
            "format": "onnx",
            "gpu": {"mode": "shared", "visibleDevices": "0"},
            "versions": [{"name": "v1", "modelUri": "pvc://models/embed/1", "weight": 100}],
            **tensors,
        },
        {
            # An Ascend vNPU (HAMi's template slicing): HAMi's Ascend side and its device plugin
            # are installed; it scales on requests (nothing reports one pod's NPU use).
            **RUNTIME_MINIMUMS["custom"],
            "name": "pangu",
            "npu": {"type": "Ascend910B3", "mode": "vnpu", "memoryMib": 16384},
            "versions": [{"name": "v1", "modelUri": "pvc://models/pangu/1", "weight": 100}],
            "autoscaling": {"minReplicas": 1, "maxReplicas": 2, "requestsPerSecond": 20},
        },
    ]
    config["inference-platform:pipelines"] = PIPELINES
    return config if decrypted else secured(config)


def keda_config() -> dict[str, Any]:
    """The all-features stack scaling with KEDA: versions that sleep at zero (iris, with a shadow,
    held; embed, called by bert, and llama, a GPU model, answering 503 while they wake), a
    ScaledObject on GPU use (resnet, HAMi's metric) and one on CPU (churn)."""
    config = full_config()
    config["inference-platform:platform"]["autoscaler"] = "keda"
    models = {model["name"]: model for model in config["inference-platform:models"]}
    models["iris"]["autoscaling"] = {"minReplicas": 0, "maxReplicas": 3, "requestsPerSecond": 5}
    models["embed"]["autoscaling"] = {"minReplicas": 0, "maxReplicas": 2, "wake": "respond", "idleAfter": "30m"}
    models["llama"]["autoscaling"] = {
        "minReplicas": 0,
        "maxReplicas": 2,
        "wake": "respond",
        "requestsPerSecond": 1,
        "queueDepth": 8,
    }
    models["resnet"]["autoscaling"] = {"minReplicas": 1, "maxReplicas": 3, "gpuUtilization": 60}
    return config


def model_cache_config() -> dict[str, Any]:
    """The KEDA stack with the node-local model cache on the GPU nodes (docs/model-cache.md): llama
    (vLLM, sleeps at zero, its LoRA adapters from S3 and the Hub cached beside it), mnist (TF Serving,
    S3), resnet (Triton, gs://) and qwen's first version (SGLang; its adapter is on a claim) read their
    files from the cache nodes' copies; qwen's second version still downloads."""
    config = keda_config()
    config["inference-platform:platform"]["modelCache"] = {"enabled": True, "size": "4Ti"}
    models = {model["name"]: model for model in config["inference-platform:models"]}
    for name in ("llama", "mnist", "resnet"):
        models[name]["cache"] = True
    models["qwen"]["versions"][0]["cache"] = True
    return config


# Every router type, steps on models and on nodes, and a pipeline with every option.
PIPELINES: list[dict[str, Any]] = [
    {
        "name": "detect-classify",
        "nodes": {
            "root": {
                "routerType": "Sequence",
                "steps": [
                    {"name": "detect", "model": "resnet"},
                    {"name": "classify", "model": "mnist", "data": "$response", "dependency": "Hard"},
                ],
            }
        },
        "autoscaling": {"minReplicas": 2, "maxReplicas": 6, "requestsPerSecond": 50},
        "propagateHeaders": ["x-request-id", "x-b3-.*"],
        "timeout": "30s",
        "protection": {
            "rateLimit": {"requestsPerSecond": 200},
            "jwt": {"issuer": "https://auth.example.com", "jwksUri": "https://auth.example.com/jwks"},
        },
    },
    {
        "name": "churn-ab",
        "nodes": {
            "root": {
                "routerType": "Splitter",
                "steps": [{"model": "churn", "weight": 80}, {"model": "iris", "weight": 20}],
            }
        },
    },
    {
        "name": "assist",
        "nodes": {
            "root": {
                "routerType": "Switch",
                "steps": [
                    {"condition": "inputs", "node": "vision"},
                    {"condition": "prompt", "model": "llama"},
                ],
            },
            "vision": {
                "routerType": "Ensemble",
                "steps": [
                    {"name": "resnet", "model": "resnet"},
                    {"name": "mnist", "model": "mnist", "dependency": "Soft"},
                ],
            },
        },
        "replicas": 2,
    },
]


# tests/policies/test_policies.py imports pulumi_policy, which lives in .venv-policy only;
# tests/policies/test_pack.py runs it there.
collect_ignore = ["policies/test_policies.py"]
# The rehearsals (tests/rehearsal) run the real engine against a control plane, minutes each, with
# tools `make rehearsal-tools` builds: `make rehearsal` runs them (INFRA_REHEARSAL=1), `make test` not.
REHEARSAL_ENV = "INFRA_REHEARSAL"
if not os.environ.get(REHEARSAL_ENV):
    collect_ignore.append("rehearsal")
