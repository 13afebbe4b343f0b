"""A fleet of models as the real Prometheus would have scraped it, backfilled with promtool: for
`infra analyze` at scale (tests/cli/test_analyze_queries.py and bench/analyze_scale.py).

Model `model-<i>` has a primary v1 (weight 90, 9 requests a second), a canary v2 (weight 10, 1 a
second) and a shadow v3 (mirrored 50 %, 5 a second) whose answers the payload comparator pairs
with the primary's (2.5 pairs a second). Every seventh model's canary fails 5 % of its requests,
every eleventh's shadow is slower (p95 240 ms against 90), and every thirteenth's shadow agrees on
only 96 % of its pairs, so the fleet's verdicts are mixed, as a real fleet's are.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from tests.platform.prometheus_harness import backfilled

NAMESPACE = "service"
STEP = 15  # seconds between samples, as the platform scrapes
RATES = {"v1": 9.0, "v2": 1.0, "v3": 5.0}
PAIRS_PER_SECOND = 2.5
BUCKETS = ("25", "50", "100", "250", "+Inf")
SHARES = {"fast": (0.5, 0.75, 1.0, 1.0, 1.0), "slow": (0.1, 0.3, 0.5, 0.98, 1.0)}


def model_name(index: int) -> str:
    return f"model-{index}"


def stack_config(models: int) -> dict[str, Any]:
    """The `config:` section of a stack file with the first `models` models of the fleet."""
    return {
        "inference-platform:domain": "models.example.com",
        "inference-platform:namespace": NAMESPACE,
        "inference-platform:models": [
            {
                "name": model_name(i),
                "runtime": "mlserver",
                "versions": [
                    {"name": "v1", "modelUri": f"pvc://models/m{i}/v1", "weight": 90},
                    {"name": "v2", "modelUri": f"pvc://models/m{i}/v2", "weight": 10},
                    {"name": "v3", "modelUri": f"pvc://models/m{i}/v3", "mirrorPercent": 50},
                ],
                "analysis": {"payloads": {"enabled": True, "sample": 0.5}},
            }
            for i in range(models)
        ],
    }


def write_stack_file(path: Path, models: int) -> Path:
    path.write_text(yaml.safe_dump({"config": stack_config(models)}, sort_keys=False), encoding="utf-8")
    return path


def _istio_labels(model: str, version: str, **extra: str) -> str:
    pairs = {
        "reporter": "destination",
        "destination_workload_namespace": NAMESPACE,
        "destination_app": model,
        "destination_version": version,
    } | extra
    return ",".join(f'{k}="{v}"' for k, v in pairs.items())


def openmetrics(models: int, start: int, minutes: int) -> str:
    """Counters and histogram buckets of every version, and the comparator's pairs of every shadow,
    one sample every STEP seconds from `start` for `minutes` minutes."""
    steps = range(minutes * 60 // STEP + 1)
    requests = ["# TYPE istio_requests counter"]
    durations = ["# TYPE istio_request_duration_milliseconds histogram"]
    pairs = ["# TYPE inference_payload_pairs counter"]
    for i in range(models):
        model = model_name(i)
        for version, rate in RATES.items():
            error_share = 0.05 if version == "v2" and i % 7 == 3 else 0.0
            shares = SHARES["slow" if version == "v3" and i % 11 == 5 else "fast"]
            for step in steps:
                t, total = start + step * STEP, rate * step * STEP
                ok, errors = f"{total * (1 - error_share):g}", f"{total * error_share:g}"
                requests.append(
                    f"istio_requests_total{{{_istio_labels(model, version, response_code='200')}}} {ok} {t}"
                )
                requests.append(
                    f"istio_requests_total{{{_istio_labels(model, version, response_code='503')}}} {errors} {t}"
                )
                for bound, share in zip(BUCKETS, shares, strict=True):
                    bucket = _istio_labels(model, version, le=bound)
                    durations.append(f"istio_request_duration_milliseconds_bucket{{{bucket}}} {total * share:g} {t}")
                durations.append(
                    f"istio_request_duration_milliseconds_count{{{_istio_labels(model, version)}}} {total:g} {t}"
                )
                durations.append(
                    f"istio_request_duration_milliseconds_sum{{{_istio_labels(model, version)}}} {total * 40:g} {t}"
                )
        agreeing = 0.96 if i % 13 == 7 else 1.0
        shadow = f'namespace="{NAMESPACE}",model="{model}",version="v3",job="kubernetes-pods"'
        for step in steps:
            t, paired = start + step * STEP, PAIRS_PER_SECOND * step * STEP
            pairs.append(f'inference_payload_pairs_total{{{shadow},result="agree"}} {paired * agreeing:g} {t}')
            pairs.append(f'inference_payload_pairs_total{{{shadow},result="disagree"}} {paired * (1 - agreeing):g} {t}')
    return "\n".join([*requests, *durations, *pairs, "# EOF"]) + "\n"


def backfill(directory: Path, models: int, start: int, minutes: int) -> Path:
    """The fleet's series written as TSDB blocks under directory/data, ready for Prometheus to open;
    the Prometheus configuration file (no scrape jobs: the data is all there is)."""
    return backfilled(directory, openmetrics(models, start, minutes))
