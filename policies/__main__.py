"""The inference-platform policy pack: `pulumi preview --policy-pack policies`.

Mandatory policies stop a preview or an update; advisory ones warn. The production checks apply
to the stacks named in the pack's `productionStacks` config (default: prod).
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from pulumi_policy import (
    EnforcementLevel,
    PolicyConfigSchema,
    PolicyPack,
    ReportViolation,
    ResourceValidationArgs,
    ResourceValidationPolicy,
    StackValidationArgs,
    StackValidationPolicy,
)

sys.path.insert(0, str(Path(__file__).resolve().parent))

import rules  # the pack's directory is not a package: found through the path above

PRODUCTION_CONFIG = PolicyConfigSchema(
    properties={"productionStacks": {"type": "array", "items": {"type": "string"}, "default": ["prod"]}}
)


def _resource_policy(
    name: str, description: str, check: Callable[[str, Mapping[str, Any]], list[str]]
) -> ResourceValidationPolicy:
    def validate(args: ResourceValidationArgs, report_violation: ReportViolation) -> None:
        for message in check(args.resource_type, args.props):
            report_violation(message, args.urn)

    return ResourceValidationPolicy(name, description, validate, enforcement_level=EnforcementLevel.MANDATORY)


def _production_policy(
    name: str, description: str, check: Callable[[list[tuple[str, Mapping[str, Any]]]], list[str]]
) -> StackValidationPolicy:
    def validate(args: StackValidationArgs, report_violation: ReportViolation) -> None:
        production = (args.get_config() or {}).get("productionStacks", ["prod"])
        if not args.resources or rules.stack_of(args.resources[0].urn) not in production:
            return
        for message in check([(r.resource_type, r.props) for r in args.resources]):
            report_violation(message, None)

    return StackValidationPolicy(
        name, description, validate, enforcement_level=EnforcementLevel.ADVISORY, config_schema=PRODUCTION_CONFIG
    )


def _injection(args: StackValidationArgs, report_violation: ReportViolation) -> None:
    for message in rules.namespaces_without_injection((r.resource_type, r.props) for r in args.resources):
        report_violation(message, None)


def _gpus_at_peak(args: StackValidationArgs, report_violation: ReportViolation) -> None:
    for message in rules.gpus_short_at_peak((r.resource_type, r.props) for r in args.resources):
        report_violation(message, None)


POLICIES = [
    _resource_policy(
        "pinned-images", "Every image is pinned: a tag other than latest, or a digest.", rules.unpinned_images
    ),
    _resource_policy(
        "requests-and-limits",
        "Every container sets CPU and memory requests and limits.",
        rules.missing_requests_and_limits,
    ),
    _resource_policy("gpus-on-gpu-nodes", "Pods that request GPUs select GPU nodes.", rules.gpu_without_gpu_nodes),
    _resource_policy(
        "traffic-weights-add-up",
        "Each VirtualService route and HTTPRoute rule that splits traffic has weights adding up to 100.",
        rules.traffic_weights,
    ),
    StackValidationPolicy(
        "model-namespaces-injected",
        "Namespaces that run models have Istio sidecar injection.",
        _injection,
        enforcement_level=EnforcementLevel.MANDATORY,
    ),
    StackValidationPolicy(
        "gpus-fit-at-peak",
        "The models' GPUs at their autoscalers' maximum fit the GPUs the stack declares.",
        _gpus_at_peak,
        enforcement_level=EnforcementLevel.ADVISORY,
    ),
    _production_policy(
        "production-replicas", "In production every model version runs at least two replicas.", rules.too_few_replicas
    ),
    _production_policy(
        "production-disruption-budgets",
        "In production every model version has a PodDisruptionBudget.",
        rules.without_disruption_budget,
    ),
]

if __name__ == "__main__":
    PolicyPack("inference-platform", policies=POLICIES)
