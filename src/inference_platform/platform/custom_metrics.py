"""The custom metrics autoscaling reads, and how they are computed from Prometheus: by
prometheus-adapter for HorizontalPodAutoscalers, and by KEDA's Prometheus triggers for
ScaledObjects, over the same series and windows.

The adapter's queries are Go templates over <<.Series>>, <<.LabelMatchers>> and <<.GroupBy>>,
which the adapter fills in for the pods an HPA asks about. A KEDA trigger asks for one number per
version: the same series summed over the version's pods (its target is then per pod, as an HPA's
AverageValue is), one element always, 0 rather than nothing when no pod reports. Time to first
token is no sum: its trigger is the pods' values averaged, compared with the target as a Value,
which is what an HPA does with the per-pod values and an AverageValue target.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

GPU_USAGE = "container_gpu_usage"
"""Per pod: GPU utilisation averaged over 5 minutes, summed over the pod's GPUs, as a fraction (0.6 = 60 %)."""

REQUESTS_PER_SECOND = "requests_per_second"
"""Per pod: requests the pod's sidecar received per second, over the last minute."""

REQUESTS_WAITING = "requests_waiting"
"""Per pod: requests queued in the engine, not yet running (an LLM engine's own gauge, e.g. vLLM's
vllm:num_requests_waiting). A saturated engine shows 100 % GPU while this grows."""

TIME_TO_FIRST_TOKEN_P90 = "time_to_first_token_p90_seconds"
"""Per pod: the 90th percentile of the engine's time to first token over the last TOKEN_LATENCY_WINDOW,
in seconds, from its own histogram (e.g. vLLM's vllm:time_to_first_token_seconds). What a user of a
chat endpoint waits for before anything appears; it grows with the queue and with prompt length."""
TTFT_QUANTILE = 0.9
# Long enough to hold a few dozen first tokens at a pod's usual rate, short enough to follow a burst.
TOKEN_LATENCY_WINDOW = "2m"

# DCGM's per-device gauge in percent. dcgm-exporter labels it with the pod that owns the GPU.
DCGM_GPU_UTIL = "DCGM_FI_DEV_GPU_UTIL"
# HAMi's per-container utilisation of its vGPU slice, in percent. Under sharing, DCGM reports
# the whole device's utilisation to every pod on it, which would scale the wrong pods.
HAMI_GPU_UTIL = "hami_container_device_utilization_ratio"
ISTIO_REQUESTS = "istio_requests_total"

POD_RESOURCES = {"namespace": {"resource": "namespace"}, "pod": {"resource": "pod"}}
GPU_WINDOW = "5m"
RATE_WINDOW = "1m"
# Prometheus' job for annotated pods (platform/prometheus.py): one `up` series per scraped pod,
# labelled with the pod's own labels, which is how a query finds a version's pods by label.
PODS_JOB = "kubernetes-pods"


def gpu_usage_rule(source: str) -> dict[str, Any]:
    """container_gpu_usage from DCGM (whole GPUs) or from HAMi (shared GPUs)."""
    return {
        "seriesQuery": f'{source}{{namespace!="",pod!=""}}',
        "resources": {"overrides": POD_RESOURCES},
        "name": {"matches": f"^{source}$", "as": GPU_USAGE},
        "metricsQuery": f"sum(avg_over_time(<<.Series>>{{<<.LabelMatchers>>}}[{GPU_WINDOW}])) by (<<.GroupBy>>) / 100",
    }


def requests_per_second_rule() -> dict[str, Any]:
    """requests_per_second from Istio's server-side request counter."""
    return {
        "seriesQuery": f'{ISTIO_REQUESTS}{{namespace!="",pod!=""}}',
        "seriesFilters": [],
        "resources": {"overrides": POD_RESOURCES},
        "name": {"matches": f"^{ISTIO_REQUESTS}$", "as": REQUESTS_PER_SECOND},
        "metricsQuery": (
            f'sum(rate(<<.Series>>{{<<.LabelMatchers>>,reporter="destination"}}[{RATE_WINDOW}])) by (<<.GroupBy>>)'
        ),
    }


def gauge_selector(series: str) -> tuple[str, str]:
    """A queue gauge's metric name and its own label matchers: `vllm:num_requests_waiting` is a whole
    series, `nv_trt_llm_request_metrics{request_type="waiting"}` one label value of a gauge family."""
    name, _, matchers = series.partition("{")
    return name, matchers.removesuffix("}")


def requests_waiting_rule(queue_series: Sequence[str]) -> dict[str, Any]:
    """requests_waiting from the runtimes' queue gauges, as the engines report them.

    One rule over all of them: the adapter serves a metric name from one rule, and each pod reports
    only its own engine's gauge, so the query sums whichever of them the pod has rather than the
    one series the adapter happened to name the metric after (<<.Series>>). A gauge that is one
    label value of a family is selected with its matchers, beside the plain gauges (`or`)."""
    gauges = sorted(gauge_selector(series) for series in queue_series)
    names = "|".join(re.escape(name) for name in sorted({name for name, _ in gauges}))
    plain = "|".join(re.escape(name) for name, matchers in gauges if not matchers)
    selectors = [f'{{__name__=~"{plain}",<<.LabelMatchers>>}}'] if plain else []
    selectors += [f'{{__name__="{name}",{matchers},<<.LabelMatchers>>}}' for name, matchers in gauges if matchers]
    return {
        "seriesQuery": f'{{__name__=~"{names}",namespace!="",pod!=""}}',
        "resources": {"overrides": POD_RESOURCES},
        "name": {"matches": f"^({names})$", "as": REQUESTS_WAITING},
        "metricsQuery": f"sum({' or '.join(selectors)}) by (<<.GroupBy>>)",
    }


def buckets(histogram: str) -> str:
    """A Prometheus histogram's bucket series: `<name>_bucket`, one per upper bound `le`."""
    return f"{histogram}_bucket"


def time_to_first_token_rule(histograms: Sequence[str]) -> dict[str, Any]:
    """time_to_first_token_p90_seconds from the runtimes' histograms, per pod: the 90th percentile of
    the pod's buckets' rates over TOKEN_LATENCY_WINDOW, summed over the engine's own labels (vLLM's
    `engine`, SGLang's `is_streaming`...). As for requests_waiting, one rule over every engine's
    histogram, each pod having only its own. A pod without a first token in the window has no value
    (NaN is left out), which an HPA counts as not reporting."""
    names = "|".join(re.escape(buckets(name)) for name in sorted(set(histograms)))
    rates = f'rate({{__name__=~"{names}",<<.LabelMatchers>>}}[{TOKEN_LATENCY_WINDOW}])'
    return {
        "seriesQuery": f'{{__name__=~"{names}",namespace!="",pod!=""}}',
        "resources": {"overrides": POD_RESOURCES},
        "name": {"matches": f"^({names})$", "as": TIME_TO_FIRST_TOKEN_P90},
        "metricsQuery": f"histogram_quantile({TTFT_QUANTILE:g}, sum({rates}) by (le, <<.GroupBy>>)) >= 0",
    }


def adapter_rules(
    gpu_source: str, queue_series: Sequence[str] = (), ttft_histograms: Sequence[str] = ()
) -> list[dict[str, Any]]:
    """The adapter's rules; requests_waiting only where some model scales on a queue, and
    time_to_first_token_p90_seconds only where some model scales on it."""
    rules = [gpu_usage_rule(gpu_source), requests_per_second_rule()]
    rules += [requests_waiting_rule(queue_series)] if queue_series else []
    return rules + ([time_to_first_token_rule(ttft_histograms)] if ttft_histograms else [])


def pods(namespace: str, labels: Mapping[str, str]) -> str:
    """One `up` series per pod with these labels (a version's, a router's): what `and on(namespace,
    pod)` keeps a series to."""
    matchers = "".join(f',{key}="{value}"' for key, value in labels.items())
    return f'up{{job="{PODS_JOB}",namespace="{namespace}"{matchers}}}'


def pods_gpu_usage(source: str, namespace: str, labels: Mapping[str, str]) -> str:
    """container_gpu_usage of every pod with these labels, summed."""
    series = f'avg_over_time({source}{{namespace="{namespace}",pod!=""}}[{GPU_WINDOW}])'
    return f"sum({series} and on(namespace, pod) {pods(namespace, labels)}) / 100 or vector(0)"


def pods_requests_per_second(namespace: str, labels: Mapping[str, str]) -> str:
    """requests_per_second of every pod with these labels, summed."""
    series = f'rate({ISTIO_REQUESTS}{{namespace="{namespace}",pod!="",reporter="destination"}}[{RATE_WINDOW}])'
    return f"sum({series} and on(namespace, pod) {pods(namespace, labels)}) or vector(0)"


def pods_requests_waiting(series: str, namespace: str, labels: Mapping[str, str]) -> str:
    """The engine queue of every pod with these labels, summed."""
    name, matchers = gauge_selector(series)
    own = f",{matchers}" if matchers else ""
    queued = f'{{__name__="{name}"{own},namespace="{namespace}",pod!=""}}'
    return f"sum({queued} and on(namespace, pod) {pods(namespace, labels)}) or vector(0)"


def pods_time_to_first_token_p90(histogram: str, namespace: str, labels: Mapping[str, str]) -> str:
    """time_to_first_token_p90_seconds of every pod with these labels that had a first token in the
    window, averaged: the figure an HPA compares with its AverageValue target."""
    rates = f'rate({buckets(histogram)}{{namespace="{namespace}",pod!=""}}[{TOKEN_LATENCY_WINDOW}])'
    per_pod = (
        f"histogram_quantile({TTFT_QUANTILE:g}, sum by (le, namespace, pod) "
        f"({rates} and on(namespace, pod) {pods(namespace, labels)}))"
    )
    return f"avg({per_pod} >= 0) or vector(0)"


def live_requests_per_second(namespace: str, app: str, live: Sequence[str]) -> str:
    """The requests per second a model's live versions receive: what a shadow's mirror follows."""
    versions = "|".join(live)
    matchers = f'reporter="destination",namespace="{namespace}",app="{app}",version=~"{versions}"'
    return f"sum(rate({ISTIO_REQUESTS}{{{matchers}}}[{RATE_WINDOW}])) or vector(0)"
