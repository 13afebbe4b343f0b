"""vLLM's and SGLang's token-latency histograms as the engines register them, read from the pinned
wheels' source (.venv-vllm, .venv-sglang) with Python's own parser: each histogram's name, its help
text, the engine's own labels and its default bucket bounds. From these the tests build the series
a scrape of a model pod gives Prometheus (the engine's labels, then the pods job's: namespace, pod,
the pod's app and version), for promtool and for backfilling the real Prometheus.

No engine runs here: the series are shaped as the engines' metrics code would export them, with
the bounds written as prometheus_client (the library both engines use) writes `le`.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from prometheus_client.utils import floatToGoString

from tests.conftest import ROOT

SITE = "lib/python3.11/site-packages"
VLLM_METRICS = ROOT / ".venv-vllm" / SITE / "vllm" / "v1" / "metrics"
VLLM_LOGGERS = VLLM_METRICS / "loggers.py"
VLLM_BUCKETS = VLLM_METRICS / "buckets.py"
SGLANG_METRICS = ROOT / ".venv-sglang" / SITE / "sglang" / "srt" / "observability" / "metrics_collector.py"
MISSING = "{} comes from the pinned wheel in {}: run `make test`, which builds it"


@dataclass(frozen=True)
class EngineHistogram:
    """One histogram as an engine's metrics code registers it."""

    name: str
    help: str
    labels: tuple[str, ...]
    """The engine's own label names, in order."""
    bounds: tuple[float, ...]
    """The default bucket upper bounds (without +Inf)."""


def _tree(path: Path, venv: str) -> ast.Module:
    assert path.exists(), MISSING.format(path.name, venv)
    return ast.parse(path.read_text())


def _keywords(call: ast.Call) -> dict[str, ast.expr]:
    return {k.arg: k.value for k in call.keywords if k.arg is not None}


def _assignments(tree: ast.AST) -> Iterator[tuple[str, ast.expr]]:
    """Every `name = value` and `name: type = value` in the tree."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign):
            yield from ((t.id, node.value) for t in node.targets if isinstance(t, ast.Name))
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and node.value is not None:
            yield node.target.id, node.value


def _histogram_calls(tree: ast.AST, constructor: str) -> Iterator[tuple[str, str, dict[str, ast.expr]]]:
    """(name, help, keywords) of each call of `constructor` (a name or an attribute) with a constant name."""
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        func = node.func
        called = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else None
        keywords = _keywords(node)
        name, documentation = keywords.get("name"), keywords.get("documentation")
        if called == constructor and isinstance(name, ast.Constant) and isinstance(documentation, ast.Constant):
            yield str(name.value), str(documentation.value), keywords


@cache
def vllm() -> dict[str, EngineHistogram]:
    """vLLM's timing histograms (v1/metrics/loggers.py), their bounds from v1/metrics/buckets.py."""
    loggers, buckets = _tree(VLLM_LOGGERS, ".venv-vllm"), _tree(VLLM_BUCKETS, ".venv-vllm")
    constants = dict(_assignments(buckets))
    defaults = _dict(constants["_STATIC_FAMILY_DEFAULTS"])
    families = {
        ast.literal_eval(key): ast.literal_eval(constants[value.id])
        for key, value in zip(defaults.keys, defaults.values, strict=True)
        if key is not None and isinstance(value, ast.Name)
    }
    assigned = dict(_assignments(loggers))
    labels = tuple(ast.literal_eval(assigned["labelnames"]))
    found = {}
    for name, documentation, keywords in _histogram_calls(loggers, "_histogram_cls"):
        bucket_var, label_var = keywords.get("buckets"), keywords.get("labelnames")
        if not (isinstance(bucket_var, ast.Name) and isinstance(label_var, ast.Name) and label_var.id == "labelnames"):
            continue
        family = assigned.get(bucket_var.id)
        if isinstance(family, ast.Call) and family.args and isinstance(family.args[0], ast.Constant):
            bounds = families.get(family.args[0].value)
            if bounds is not None:
                found[name] = EngineHistogram(name, documentation, labels, tuple(float(b) for b in bounds))
    return found


def _dict(node: ast.expr | None) -> ast.Dict:
    assert isinstance(node, ast.Dict), node
    return node


@cache
def sglang() -> dict[str, EngineHistogram]:
    """SGLang's tokenizer histograms (srt/observability/metrics_collector.py): the labels every one
    of them has (tokenizer_metric_labels), the ones each adds, and the default bounds."""
    tree = _tree(SGLANG_METRICS, ".venv-sglang")
    (function,) = [n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef) and n.name == "tokenizer_metric_labels"]
    base = tuple(ast.literal_eval(key) for key in _dict(dict(_assignments(function))["labels"]).keys if key)
    lists = {name: value for name, value in _assignments(tree) if isinstance(value, ast.List)}
    found = {}
    for name, documentation, keywords in _histogram_calls(tree, "Histogram"):
        bucket_var, label_expr = keywords.get("buckets"), keywords.get("labelnames")
        if not isinstance(bucket_var, ast.Name) or bucket_var.id not in lists:
            continue
        extra: tuple[str, ...] = ()
        if isinstance(label_expr, (ast.List, ast.BinOp)):
            # [*labels.keys(), "is_streaming"] or list(labels.keys()) + ["is_streaming"]
            extra = tuple(
                n.value for n in ast.walk(label_expr) if isinstance(n, ast.Constant) and isinstance(n.value, str)
            )
        bounds = tuple(float(b) for b in ast.literal_eval(lists[bucket_var.id]))
        found[name] = EngineHistogram(name, documentation, base + extra, bounds)
    return found


# Values for the engines' own labels on a pod's series: the served model's name, the engine index
# (vLLM), the engine type and whether the request streamed (SGLang).
LABEL_VALUES = {"engine": "0", "engine_type": "unified", "is_streaming": "true"}


def scraped_labels(
    histogram: EngineHistogram, namespace: str, model: str, version: str, pod: str, **engine: str
) -> dict[str, str]:
    """The labels one of a pod's series has in Prometheus: the engine's own (`engine` overrides a
    value: engine="1", is_streaming="false"), then what the pods job adds (platform/prometheus.py)."""
    own = {
        label: engine.get(label, LABEL_VALUES.get(label, model if label == "model_name" else ""))
        for label in histogram.labels
    }
    return own | {
        "job": "kubernetes-pods",
        "namespace": namespace,
        "pod": pod,
        "app": model,
        "version": version,
        "app_kubernetes_io_component": "predictor",
    }


def cumulative(histogram: EngineHistogram, observed: Mapping[float, float]) -> list[tuple[str, float]]:
    """Each bucket's count (`le` as prometheus_client writes it, +Inf last) of these observations
    (value in seconds -> how many)."""
    bounds = [*histogram.bounds, float("inf")]
    return [(le(b), sum(n for value, n in observed.items() if value <= b)) for b in bounds]


def le(bound: float) -> str:
    """An upper bound as prometheus_client writes it in `le` (0.25, 1.0, +Inf)."""
    written: str = floatToGoString(bound)  # type: ignore[no-untyped-call]
    return written


def selector(name: str, labels: Mapping[str, str]) -> str:
    return name + "{" + ",".join(f'{k}="{v}"' for k, v in labels.items()) + "}"


def promtool_series(
    histogram: EngineHistogram, labels: Mapping[str, str], per_minute: Mapping[float, float], minutes: int
) -> list[dict[str, str]]:
    """`promtool test rules` input: the histogram's buckets and count growing by these observations
    every minute (the test's interval is one minute)."""
    series = [
        {"series": selector(f"{histogram.name}_bucket", {**labels, "le": le}), "values": f"0+{count:g}x{minutes}"}
        for le, count in cumulative(histogram, per_minute)
    ]
    total = sum(per_minute.values())
    series.append({"series": selector(f"{histogram.name}_count", labels), "values": f"0+{total}x{minutes}"})
    return series


def openmetrics_samples(
    histogram: EngineHistogram, labels: Mapping[str, str], added: Sequence[Mapping[float, float]], times: Sequence[int]
) -> list[str]:
    """OpenMetrics sample lines of the histogram's buckets, count and sum at each of `times` (seconds),
    for promtool's backfill: `added[i]` is what was observed between samples i - 1 and i (the
    first sample is 0)."""
    lines = []
    observed: dict[float, float] = {}
    for step, t in enumerate(times):
        if step:
            for value, n in added[step].items():
                observed[value] = observed.get(value, 0.0) + n
        for bound, count in cumulative(histogram, observed):
            lines.append(f"{selector(histogram.name + '_bucket', {**labels, 'le': bound})} {count:g} {t}")
        lines.append(f"{selector(histogram.name + '_count', labels)} {sum(observed.values()):g} {t}")
        lines.append(f"{selector(histogram.name + '_sum', labels)} {sum(v * n for v, n in observed.items()):g} {t}")
    return lines
