"""Hostile and broken stack files: each renders cleanly and passes every validator, or exits 2
with readable errors naming paths. Never a traceback, never a partial render directory.

Hypothesis generates valid stacks across every runtime, then breaks them: wrong types, missing
keys, huge numbers, unicode and overlong names, duplicates, bad URIs, weights off by one, deep
nesting, empty lists, renamed keys. Runs are derandomized so CI sees the same configs each time.
"""

from __future__ import annotations

import contextlib
import copy
import io
import math
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, get_args

import yaml
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from inference_platform.cli.main import main
from inference_platform.cli.render_files import CHARTS, MANIFESTS, OUTPUTS, read_render
from inference_platform.config.errors import INCOMPLETE
from inference_platform.serving.runtimes import ModelSpec
from tests.conftest import ROOT, RUNTIME_MINIMUMS
from tests.owner_schemas import validate
from tests.policies.test_stacks_meet_policies import RESOURCE_CHECKS, rules

Config = dict[str, Any]
# No shrinking: a failure reports the config as generated, without minutes spent minimizing it.
SETTINGS = {
    "deadline": None,
    "derandomize": True,
    "suppress_health_check": list(HealthCheck),
    "phases": [Phase.explicit, Phase.generate],
}
# The lines `python -m infra render` writes for a config error: a header, then
# "  Pulumi.<stack>.yaml:line:column: path: sentence" (a problem of the whole file: no line, no path).
HEADER = "invalid stack config ("

# The engines that serve an LLM on whole GPUs (vLLM also beside others, with a memory share).
LLM_ENGINES = ("vllm", "sglang")
NAMES = st.from_regex(r"[a-z][a-z0-9]{0,8}", fullmatch=True)
TENSORS = {
    "inputs": [{"name": "input", "dataType": "FP32", "dims": [4]}],
    "outputs": [{"name": "output", "dataType": "FP32", "dims": [2]}],
}


@st.composite
def versions(draw: st.DrawFn, model: str) -> list[dict[str, Any]]:
    live = draw(st.integers(1, 2))
    shadows = draw(st.integers(0, 1))
    cuts = sorted(draw(st.lists(st.integers(0, 100), min_size=live - 1, max_size=live - 1)))
    weights = [b - a for a, b in zip([0, *cuts], [*cuts, 100], strict=True)]
    scheme = draw(st.sampled_from(["pvc://models/", "s3://bucket/", "gs://bucket/", "https://files.example.com/"]))
    result: list[dict[str, Any]] = []
    for index in range(live + shadows):
        version: dict[str, Any] = {"name": f"v{index + 1}", "modelUri": f"{scheme}{model}/{index + 1}/model.bin"}
        if index < live:
            version["weight"] = weights[index]
        else:
            version["mirrorPercent"] = draw(st.integers(1, 100))
        result.append(version)
    return result


VGPUS = st.sampled_from(
    [
        {"mode": "vgpu", "memoryMib": 16384, "cores": 50},
        {"mode": "vgpu", "memoryPercent": 25},
        {"mode": "vgpu", "count": 1, "memoryMib": 40960},
    ]
)
PROTECTION = st.fixed_dictionaries(
    {},
    optional={
        "rateLimit": st.fixed_dictionaries({"requestsPerSecond": st.integers(1, 1000)}),
        "clients": st.fixed_dictionaries(
            {"allowCidrs": st.sampled_from([["10.0.0.0/8"], ["192.168.0.0/16", "2001:db8::/32"]])},
            optional={"denyCidrs": st.just(["172.16.0.0/12"])},
        ),
        "requireHeaders": st.just([{"name": "x-team", "values": ["ml"]}]),
        "jwt": st.just({"issuer": "https://auth.example.com", "jwksUri": "https://auth.example.com/jwks"}),
        "circuitBreaker": st.fixed_dictionaries({"consecutiveErrors": st.integers(1, 20)}),
    },
)


def gpu_settings(draw: st.DrawFn, runtime: str, gpu_sharing: bool) -> dict[str, Any]:
    """A model's GPU settings ({} for none): LLM engines and triton-llm always have a GPU, and only
    vLLM a shared one."""
    gpus = ["exclusive", *(["vgpu"] if gpu_sharing else [])]
    if runtime not in (*LLM_ENGINES, "triton-llm"):
        gpus += ["none", "shared"]
    elif runtime == "vllm":
        gpus += ["shared"]
    gpu = draw(st.sampled_from(gpus))
    if gpu == "vgpu":
        return {"gpu": draw(VGPUS)}
    if gpu == "shared":
        return {"gpu": {"mode": "shared", "visibleDevices": "0"}} | (
            {"gpuMemoryUtilization": 0.4} if runtime == "vllm" else {}
        )
    if gpu != "none" or draw(st.booleans()):
        return {"gpu": gpu}
    return {}


NPUS = st.sampled_from(
    [
        "Ascend910B3",
        {"type": "Ascend910B3", "count": 2},
        {"type": "Ascend310P", "mode": "vnpu", "memoryMib": 6000},
        {"type": "Ascend910B3", "mode": "vnpu", "slicing": "soft", "memoryMib": 8192, "cores": 25},
    ]
)
# The runtimes that may run on Ascend NPUs, read from the runtimes themselves.
NPU_RUNTIMES = frozenset(
    tag
    for variant in get_args(get_args(ModelSpec)[0])
    if variant.USES_NPUS
    for tag in get_args(variant.model_fields["runtime"].annotation)
)


# The runtimes an inference pool's picker can route for, read from the runtimes themselves.
POOL_RUNTIMES = frozenset(
    tag
    for variant in get_args(get_args(ModelSpec)[0])
    if variant.PICKER_ENGINE is not None
    for tag in get_args(variant.model_fields["runtime"].annotation)
)


def npu_settings(npu: Any, runtime: str) -> dict[str, Any]:
    """A model on Ascend NPUs (HAMi is on): its `npu`, and vLLM's tensor parallelism over them."""
    count = npu.get("count", 1) if isinstance(npu, dict) else 1
    return {"npu": npu} | ({"tensorParallelSize": count} if runtime == "vllm" else {})


@st.composite
def models(draw: st.DrawFn, name: str, gpu_sharing: bool) -> dict[str, Any]:
    # NPUs are scheduled by HAMi: a runtime that needs them only where HAMi runs.
    needs_npus = {r for r, minimum in RUNTIME_MINIMUMS.items() if "npu" in minimum}
    runtime = draw(st.sampled_from(sorted(set(RUNTIME_MINIMUMS) - (set() if gpu_sharing else needs_npus))))
    minimum = copy.deepcopy(RUNTIME_MINIMUMS[runtime])
    model: dict[str, Any] = {k: v for k, v in minimum.items() if k not in ("gpu", "npu")}
    model |= {"name": name, "versions": draw(versions(name))}
    if runtime == "triton":
        model |= {"format": draw(st.sampled_from(["onnx", "tensorrt", "pytorch"]))} | TENSORS
    if runtime in needs_npus or (gpu_sharing and runtime in NPU_RUNTIMES and draw(st.booleans())):
        # MindIE's pinned image is the 910B build: other chips need an image of their own.
        npu = draw(NPUS.filter(lambda n: runtime != "mindie" or "Ascend910B" in str(n)))
        model |= npu_settings(npu, runtime)
    else:
        model |= gpu_settings(draw, runtime, gpu_sharing)
    if draw(st.booleans()):
        model["replicas"] = draw(st.integers(0, 5))
    elif draw(st.booleans()):
        model["autoscaling"] = {"minReplicas": 1, "maxReplicas": draw(st.integers(2, 6)), "requestsPerSecond": 10}
    if draw(st.booleans()):
        model["protection"] = draw(PROTECTION)
    if runtime not in LLM_ENGINES and draw(st.booleans()):
        model["transformer"] = {"image": "registry.example.com/pre:1.0.0", "healthPath": "/healthz"}
    if draw(st.booleans()):
        model["timeout"] = draw(st.sampled_from(["5s", "1m30s", "250ms"]))
    if runtime in POOL_RUNTIMES and draw(st.booleans()):
        model["routing"] = "inference-pool"
    return model


@st.composite
def stack_configs(draw: st.DrawFn) -> Config:
    names = draw(st.lists(NAMES, max_size=2, unique=True))
    gpu_sharing = draw(st.booleans())
    config: Config = {
        "inference-platform:domain": draw(st.sampled_from(["models.example.com", "127.0.0.1.nip.io", "ml.internal"])),
        "inference-platform:namespace": draw(st.sampled_from(["service", "models", "team-a"])),
        "inference-platform:models": [draw(models(name, gpu_sharing)) for name in names],
    }
    platform: dict[str, Any] = {}
    if gpu_sharing:
        platform |= {"kubernetesVersion": "1.30.4", "hami": {"enabled": True}}
    if draw(st.booleans()):
        platform["ingress"] = draw(
            st.sampled_from([{"serviceType": "NodePort"}, {"tls": {"secretName": "models-tls"}, "trustedProxies": 1}])
        )
    if draw(st.booleans()):
        platform["prometheus"] = {"enabled": False}
        platform["prometheusAdapter"] = {"enabled": False}
        for model in config["inference-platform:models"]:
            model.pop("autoscaling", None)
    if platform:
        config["inference-platform:platform"] = platform
    if draw(st.booleans()):
        config["inference-platform:storage"] = {
            "s3": {
                "accessKeyId": {"secure": "v1:QUtJQS1IT1NUSUxF"},
                "secretAccessKey": {"secure": "v1:aG9zdGlsZS1zZWNyZXQ="},
                "region": "eu-west-1",
            },
            "huggingface": {"token": {"secure": "v1:aGZfaG9zdGlsZQ=="}},
        }
    else:
        # Without keys, s3:// files are read anonymously only when the stack says so.
        config["inference-platform:storage"] = {"s3": {"anonymous": True}}
    return config


def _places(value: Any, path: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Every path in the config that a mutation can target."""
    places = [path] if path else []
    if isinstance(value, dict):
        for key, item in value.items():
            places += _places(item, (*path, key))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            places += _places(item, (*path, index))
    return places


JUNK = st.one_of(
    st.integers(-(10**30), 10**30),
    st.sampled_from([math.inf, -math.inf, math.nan, 1e308, -1, 0, True, False, None]),
    st.text(max_size=300),
    st.sampled_from(["", "ü" * 64, "a" * 300, "Ünïcode-名前", "v1", "pvc://", "ftp://x/y", "{not json", "["]),
    st.lists(st.integers(), max_size=3),
    st.dictionaries(st.text(max_size=5), st.integers(), max_size=3),
)


def _nested(depth: int) -> Any:
    value: Any = "deep"
    for level in range(depth):
        value = [value] if level % 2 else {"x": value}
    return value


@st.composite
def broken_configs(draw: st.DrawFn) -> Config:
    config = copy.deepcopy(draw(stack_configs()))
    for _ in range(draw(st.integers(2, 4))):
        places = _places(config)
        if not places:
            break
        path = draw(st.sampled_from(places))
        parent: Any = config
        for key in path[:-1]:
            parent = parent[key]
        key = path[-1]
        kind = draw(st.sampled_from(["junk", "delete", "duplicate", "off-by-one", "nest", "empty", "rename", "uri"]))
        if kind == "junk":
            parent[key] = draw(JUNK)
        elif kind == "delete":
            del parent[key]
        elif kind == "duplicate" and isinstance(parent, list):
            parent.append(copy.deepcopy(parent[key]))
        elif kind == "off-by-one" and isinstance(parent[key], int) and not isinstance(parent[key], bool):
            parent[key] += draw(st.sampled_from([-1, 1]))
        elif kind == "nest":
            parent[key] = _nested(draw(st.integers(5, 40)))
        elif kind == "empty":
            parent[key] = draw(st.sampled_from([[], {}, ""]))
        elif kind == "rename" and isinstance(parent, dict):
            parent[draw(st.text(min_size=1, max_size=20))] = parent.pop(key)
        elif kind == "uri":
            parent[key] = draw(st.sampled_from(["hf://just-one", "pvc://claim", "s3:///nobucket", "https://x/", "x"]))
    return config


def render(config: Config, out: Path) -> tuple[int, str, Path]:
    """`python -m infra render` on a stack file holding `config`; returns (exit code, stderr, the file)."""
    with tempfile.TemporaryDirectory(prefix="hostile-") as scratch:
        stack_file = Path(scratch) / "Pulumi.hostile.yaml"
        stack_file.write_text(yaml.safe_dump({"config": config}, allow_unicode=True))
        stderr, stdout = io.StringIO(), io.StringIO()
        with contextlib.redirect_stderr(stderr), contextlib.redirect_stdout(stdout):
            code = main(["render", "--stack", "hostile", "--config", str(stack_file), "--out", str(out)])
    return code, stderr.getvalue(), stack_file


def pulumi_type(manifest: dict[str, Any]) -> str:
    """The pulumi_kubernetes type token of an object, as policies see it: kubernetes:apps/v1:Deployment."""
    api_version = manifest["apiVersion"] if "/" in manifest["apiVersion"] else f"core/{manifest['apiVersion']}"
    return f"kubernetes:{api_version}:{manifest['kind']}"


def check(config: Config, out: Path) -> int:
    code, stderr, stack_file = render(config, out)
    if code == 0:
        assert sorted(p.name for p in out.iterdir()) == sorted([MANIFESTS, CHARTS, OUTPUTS])
        manifests, _, _ = read_render(out)
        for manifest in manifests:
            validate(manifest)
        typed = [(pulumi_type(m), m) for m in manifests]
        violations = [message for t, m in typed for rule in RESOURCE_CHECKS for message in rule(t, m)]
        assert violations == [], violations
        assert rules.namespaces_without_injection(typed) == []
    else:
        assert code == 2, stderr
        assert not out.exists(), "a failed render left a directory behind"
        lines = stderr.splitlines()
        assert lines[0].startswith(HEADER), stderr
        if lines[-1] == f"  {INCOMPLETE}":  # the one line that is not a problem, always last
            lines.pop()
        assert lines[0].endswith(f"({len(lines) - 1} problem{'s' if len(lines) != 2 else ''}):"), stderr
        for line in lines[1:]:
            assert line.startswith(f"  {stack_file}:"), stderr
            position, _, problem = line.strip().partition(": ")
            at_line = re.fullmatch(rf"{re.escape(str(stack_file))}(:\d+:\d+)?", position)
            assert at_line, line
            if at_line[1] is None:  # a problem of the whole file (nested too deep): a sentence alone
                assert problem.strip(), line
                continue
            path, sep, sentence = problem.partition(": ")
            assert sep, f"no 'path: sentence' in {line!r}"
            assert path.strip(), line
            assert sentence.strip(), line
        assert "Traceback" not in stderr
    return code


# 950 broken configs here and 60 valid ones (tests/cli/test_generated_stacks.py): over a
# thousand stack files in all.
@settings(max_examples=950, **SETTINGS)  # type: ignore[arg-type]
@given(broken_configs())
def test_broken_configs_render_or_fail_cleanly(config: Config) -> None:
    with tempfile.TemporaryDirectory(prefix="hostile-out-") as scratch:
        check(config, Path(scratch) / "out")


def test_hostile_files_are_refused_quickly(tmp_path: Path) -> None:
    laughs = "a: &a [" + ", ".join(["lol"] * 9) + "]\n"
    for level in range(1, 10):
        previous = chr(ord("a") + level - 1)
        laughs += f"{chr(ord('a') + level)}: &{chr(ord('a') + level)} [" + ", ".join([f"*{previous}"] * 9) + "]\n"
    cases = {
        "laughs": laughs + "config: {inference-platform:domain: *j}\n",
        "huge": "config:\n  inference-platform:domain: " + "x" * (3 * 1024 * 1024) + "\n",
    }
    for name, text in cases.items():
        path = tmp_path / f"Pulumi.{name}.yaml"
        path.write_text(text)
        stderr = io.StringIO()
        started = time.monotonic()
        with contextlib.redirect_stderr(stderr):
            code = main(["render", "--stack", name, "--config", str(path), "--out", str(tmp_path / name)])
        assert code == 2
        # Well under a second here; the margin is for a loaded CI machine, not for slow code.
        assert time.monotonic() - started < 5, f"{name} took too long to refuse"
        assert stderr.getvalue().startswith(HEADER)
        assert "refusing" in stderr.getvalue() or "at most" in stderr.getvalue()


def test_brackets_nested_past_libyamls_reach_are_refused_not_crashed_on(tmp_path: Path) -> None:
    """30,000 nested flow sequences (60 KB) crash libyaml's composer; the stack file reader gives
    such text to the pure-Python parser, whose RecursionError is the clean refusal. In a process
    of its own: a crash must fail this test, not the test run."""
    path = tmp_path / "Pulumi.deep.yaml"
    path.write_text("config:\n  inference-platform:domain: " + "[" * 30_000 + "]" * 30_000 + "\n")
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "infra",
            "render",
            "--stack",
            "deep",
            "--config",
            str(path),
            "--out",
            str(tmp_path / "o"),
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )
    assert done.returncode == 2, done.stderr[-2000:]
    assert done.stderr.startswith(HEADER)
    assert "levels deep; refusing to read it" in done.stderr
