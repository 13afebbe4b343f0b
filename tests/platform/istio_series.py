"""Istio's request series as the sidecars report them (reporter="destination", the pod's app and
version as destination_app and destination_version), and the payload comparator's pairs, as
OpenMetrics sample lines for promtool's backfill (prometheus_harness.backfilled).

A version's series are written sample by sample from what it served between samples, so a test
can give any traffic over time (a canary's weight moving step by step, errors from some minute).
"""

from __future__ import annotations

from collections.abc import Sequence

NAMESPACE = "service"
# The request duration histogram's buckets (ms) and the share of requests at or under each: p50
# 25 ms, p95 90 ms, p99 98 ms; the sum counts 40 ms a request.
LATENCY_BUCKETS: tuple[tuple[str, float], ...] = (("25", 0.5), ("50", 0.75), ("100", 1.0), ("250", 1.0), ("+Inf", 1.0))
MEAN_MS = 40
REQUESTS_TYPE = "# TYPE istio_requests counter"
DURATIONS_TYPE = "# TYPE istio_request_duration_milliseconds histogram"
PAIRS_TYPE = "# TYPE inference_payload_pairs counter"


def istio_labels(model: str, version: str, namespace: str = NAMESPACE, **extra: str) -> str:
    """The labels of a destination sidecar's series for requests to a model's version, from the
    ingress gateway (`extra`: response_code, le)."""
    pairs = {
        "reporter": "destination",
        "destination_workload_namespace": namespace,
        "destination_app": model,
        "destination_version": version,
        "source_workload": "istio-ingressgateway",
    } | extra
    return ",".join(f'{k}="{v}"' for k, v in pairs.items())


def request_samples(
    model: str, version: str, times: Sequence[int], added: Sequence[tuple[float, float]], namespace: str = NAMESPACE
) -> tuple[list[str], list[str]]:
    """istio_requests_total (response codes 200 and 503) and istio_request_duration_milliseconds
    at each of `times` (seconds): `added[i]` is (answered, failed) between samples i - 1 and i (the
    first sample is 0). Returns the requests family's lines and the durations family's."""
    requests: list[str] = []
    durations: list[str] = []
    ok = errors = 0.0
    for step, t in enumerate(times):
        if step:
            ok += added[step][0]
            errors += added[step][1]
        requests.append(
            f"istio_requests_total{{{istio_labels(model, version, namespace, response_code='200')}}} {ok:g} {t}"
        )
        requests.append(
            f"istio_requests_total{{{istio_labels(model, version, namespace, response_code='503')}}} {errors:g} {t}"
        )
        total = ok + errors
        for bound, share in LATENCY_BUCKETS:
            bucket = istio_labels(model, version, namespace, le=bound)
            durations.append(f"istio_request_duration_milliseconds_bucket{{{bucket}}} {total * share:g} {t}")
        series = istio_labels(model, version, namespace)
        durations.append(f"istio_request_duration_milliseconds_count{{{series}}} {total:g} {t}")
        durations.append(f"istio_request_duration_milliseconds_sum{{{series}}} {total * MEAN_MS:g} {t}")
    return requests, durations


def pair_samples(
    model: str, version: str, times: Sequence[int], added: Sequence[tuple[float, float]], namespace: str = NAMESPACE
) -> list[str]:
    """The payload comparator's inference_payload_pairs_total for a shadow, as the pods job scrapes
    it: `added[i]` is (agreeing, disagreeing) pairs between samples i - 1 and i."""
    lines = []
    agreed = disagreed = 0.0
    shadow = f'namespace="{namespace}",model="{model}",version="{version}",job="kubernetes-pods"'
    for step, t in enumerate(times):
        if step:
            agreed += added[step][0]
            disagreed += added[step][1]
        lines.append(f'inference_payload_pairs_total{{{shadow},result="agree"}} {agreed:g} {t}')
        lines.append(f'inference_payload_pairs_total{{{shadow},result="disagree"}} {disagreed:g} {t}')
    return lines
