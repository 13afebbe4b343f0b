"""Whether a shadow answers as its primary does: the payload comparator's series, as rules, alerts
and the queries `infra analyze` runs.

The comparator (serving/payload_comparator.py) counts each (primary, shadow) pair of answers to
one request as agreeing or not, labelled with the shadow's `namespace`, `model` and `version`,
and the exchanges that found no twin by side. Not every primary exchange has a twin (the mirror
copies a share of requests, chosen at random), so unpaired primaries are normal; unpaired
shadows with no pair at all mean the join is broken.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from inference_platform.analysis.promql import one_of
from inference_platform.serving.analysis_spec import PayloadComparison

PAIRS = "inference_payload_pairs_total"
UNPAIRED = "inference_payload_unpaired_total"
MAX_ABS_DIFFERENCE = "inference_payload_max_abs_difference"
DROPPED = "inference_payload_dropped_total"
BY = ("namespace", "model", "version")
RECORDING_WINDOW = "5m"


def _selector(matchers: dict[str, str | None], regex: Mapping[str, str]) -> str:
    exact = [f'{key}="{value}"' for key, value in matchers.items() if value is not None]
    return "{" + ",".join([*exact, *(f'{key}=~"{value}"' for key, value in regex.items())]) + "}"


def _increase(metric: str, window: str, matchers: dict[str, str | None], regex: Mapping[str, str]) -> str:
    return f"sum by ({', '.join(BY)}) (increase({metric}{_selector(matchers, regex)}[{window}]))"


def fleet(models: Iterable[tuple[str, str]]) -> dict[str, str]:
    """Regex matchers for the shadows of these (namespace, model) pairs, for one query over a
    whole fleet whose result is split by BY (see comparison.fleet_selector)."""
    namespaces, names = zip(*models, strict=True)
    return {"namespace": one_of(namespaces), "model": one_of(names)}


def pairs(
    window: str,
    namespace: str | None = None,
    model: str | None = None,
    version: str | None = None,
    regex: Mapping[str, str] | None = None,
) -> str:
    """Pairs compared in the window, per shadow; `regex` adds label regexes (see `fleet`)."""
    return _increase(PAIRS, window, {"namespace": namespace, "model": model, "version": version}, regex or {})


def agreement(
    window: str,
    namespace: str | None = None,
    model: str | None = None,
    version: str | None = None,
    regex: Mapping[str, str] | None = None,
) -> str:
    """The share of pairs that agree, per shadow; 0, not nothing, where none agreed."""
    shadow: dict[str, str | None] = {"namespace": namespace, "model": model, "version": version}
    every = _increase(PAIRS, window, shadow, regex or {})
    return f"({_increase(PAIRS, window, shadow | {'result': 'agree'}, regex or {})} or {every} * 0) / {every}"


def unpaired(
    window: str, side: str, namespace: str | None = None, model: str | None = None, version: str | None = None
) -> str:
    """Exchanges of one side that found no twin in the window, per shadow."""
    return _increase(UNPAIRED, window, {"namespace": namespace, "model": model, "version": version, "side": side}, {})


def recording_rules() -> dict[str, Any]:
    window = RECORDING_WINDOW
    return {
        "name": "inference-payloads",
        "rules": [
            {"record": f"inference:payload_pairs:increase{window}", "expr": pairs(window)},
            {"record": f"inference:payload_agreement:ratio{window}", "expr": agreement(window)},
        ],
    }


def alerts(
    *, namespace: str, model: str, primary: str, shadow: str, window: str, spec: PayloadComparison, stop: str
) -> list[dict[str, Any]]:
    """A shadow that answers differently too often, and a join that pairs nothing."""
    labels = {"model": model, "version": shadow, "role": "shadow", "namespace": namespace}
    paired = pairs(window, namespace, model, shadow)
    enough = f"{paired} >= {spec.min_pairs}"
    return [
        {
            "alert": "InferencePayloadDisagreement",
            "expr": f"({agreement(window, namespace, model, shadow)} < {spec.min_agreement:g}) and ({enough})",
            "for": "10m",
            "labels": labels | {"severity": "critical"},
            "annotations": {
                "summary": f"{model} {shadow} (shadow) answers differently from {primary}",
                "description": f"It agrees with {primary} on fewer than {spec.min_agreement:.1%} of the requests "
                f"paired over {window}.",
                "action": f"Stop it: {stop}; then look at what it answers: `python -m infra analyze --model {model}`.",
            },
        },
        {
            "alert": "InferencePayloadJoinBroken",
            "expr": f"({unpaired(window, 'shadow', namespace, model, shadow)} > 0) unless ({paired} > 0)",
            "for": "10m",
            "labels": labels | {"severity": "warning"},
            "annotations": {
                "summary": f"{model} {shadow}'s answers reach the comparator, but none pairs with {primary}'s",
                "description": f"The capture on {primary}'s pods may be missing, or the request ids differ.",
                "action": f"Check the EnvoyFilters {model}-{primary}-capture and {model}-{shadow}-capture and the "
                f"comparator's logs (kubectl -n {namespace} logs deploy/inference-comparator).",
            },
        },
    ]
