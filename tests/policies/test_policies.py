"""Every policy of the pack, driven with passing and failing resources.

Runs in .venv-policy (pulumi-policy pins protobuf 5), started by tests/policies/test_pack.py;
it imports nothing of the program.
"""

from __future__ import annotations

import copy
import importlib.util
from pathlib import Path
from typing import Any

import pytest
from pulumi_policy import (
    EnforcementLevel,
    PolicyCustomTimeouts,
    PolicyResource,
    PolicyResourceOptions,
    ResourceValidationArgs,
    ResourceValidationPolicy,
    StackValidationArgs,
    StackValidationPolicy,
)

PACK_DIR = Path(__file__).resolve().parents[2] / "policies"
_spec = importlib.util.spec_from_file_location("inference_platform_policies", PACK_DIR / "__main__.py")
assert _spec is not None
assert _spec.loader is not None
pack = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(pack)
POLICIES = {policy.name: policy for policy in pack.POLICIES}

OPTIONS = PolicyResourceOptions(
    protect=False,
    ignore_changes=[],
    delete_before_replace=None,
    aliases=[],
    custom_timeouts=PolicyCustomTimeouts(0, 0, 0),
    additional_secret_outputs=[],
)
MODEL_LABELS = {
    "app": "iris",
    "version": "v1",
    "app.kubernetes.io/part-of": "inference-platform",
    "app.kubernetes.io/component": "predictor",
}
CONTAINER = {
    "name": "predictor",
    "image": "docker.io/seldonio/mlserver:1.7.1",
    "resources": {"requests": {"cpu": "1", "memory": "1Gi"}, "limits": {"cpu": "2", "memory": "2Gi"}},
}


def deployment(stack: str = "dev", replicas: int | None = 2, **pod: Any) -> tuple[str, dict[str, Any], str]:
    spec: dict[str, Any] = {"containers": [copy.deepcopy(CONTAINER)]} | pod
    props: dict[str, Any] = {
        "metadata": {"name": "iris-v1", "namespace": "service", "labels": MODEL_LABELS},
        "spec": {"template": {"metadata": {"labels": MODEL_LABELS}, "spec": spec}},
    }
    if replicas is not None:
        props["spec"]["replicas"] = replicas
    return "kubernetes:apps/v1:Deployment", props, urn(stack, "kubernetes:apps/v1:Deployment", "iris-v1")


def urn(stack: str, type_: str, name: str) -> str:
    return f"urn:pulumi:{stack}::inference-platform::{type_}::{name}"


def violations_of(name: str, resource_type: str, props: dict[str, Any], resource_urn: str = "") -> list[str]:
    policy = POLICIES[name]
    assert isinstance(policy, ResourceValidationPolicy)
    found: list[str] = []
    args = ResourceValidationArgs(
        resource_type, props, resource_urn or urn("dev", resource_type, "r"), "r", OPTIONS, None, None
    )
    policy.validate(args, lambda message, _urn=None: found.append(message))
    return found


def stack_violations(name: str, resources: list[tuple[str, dict[str, Any], str]], **config: Any) -> list[str]:
    policy = POLICIES[name]
    assert isinstance(policy, StackValidationPolicy)
    found: list[str] = []
    items = [PolicyResource(t, p, u, u.rsplit("::", 1)[-1], OPTIONS, None, None, [], {}) for t, p, u in resources]
    policy.validate(StackValidationArgs(items, config or None), lambda message, _urn=None: found.append(message))
    return found


def test_the_pack_has_the_promised_policies_and_levels() -> None:
    levels = {name: policy.enforcement_level for name, policy in POLICIES.items()}
    mandatory = {"pinned-images", "requests-and-limits", "gpus-on-gpu-nodes", "traffic-weights-add-up"}
    assert {n for n, level in levels.items() if level == EnforcementLevel.MANDATORY} == mandatory | {
        "model-namespaces-injected"
    }
    assert {n for n, level in levels.items() if level == EnforcementLevel.ADVISORY} == {
        "gpus-fit-at-peak",
        "production-replicas",
        "production-disruption-budgets",
    }


@pytest.mark.parametrize(
    ("image", "ok"),
    [
        ("docker.io/seldonio/mlserver:1.7.1", True),
        ("nvcr.io/nvidia/tritonserver:26.07-py3", True),
        ("registry:5000/team/model@sha256:" + "a" * 64, True),
        ("auto", True),  # filled by istiod's injector
        ("docker.io/seldonio/mlserver:latest", False),
        ("docker.io/seldonio/mlserver", False),
        ("registry:5000/team/model", False),
    ],
)
def test_pinned_images(image: str, ok: bool) -> None:
    resource_type, props, _ = deployment()
    props["spec"]["template"]["spec"]["initContainers"] = [CONTAINER | {"name": "init", "image": image}]
    found = violations_of("pinned-images", resource_type, props)
    assert (found == []) is ok, found


def test_requests_and_limits() -> None:
    resource_type, props, _ = deployment()
    assert violations_of("requests-and-limits", resource_type, props) == []
    del props["spec"]["template"]["spec"]["containers"][0]["resources"]["limits"]["memory"]
    assert violations_of("requests-and-limits", resource_type, props) == ["container 'predictor' has no limits.memory"]
    props["spec"]["template"]["spec"]["containers"].append({"name": "sidecar", "image": "x:1"})
    assert len(violations_of("requests-and-limits", resource_type, props)) == 2


def test_gpus_on_gpu_nodes() -> None:
    resource_type, props, _ = deployment()
    pod = props["spec"]["template"]["spec"]
    pod["containers"][0]["resources"]["limits"]["nvidia.com/gpu"] = "1"
    assert violations_of("gpus-on-gpu-nodes", resource_type, props)
    pod["nodeSelector"] = {"nvidia.com/gpu.present": "true"}
    assert violations_of("gpus-on-gpu-nodes", resource_type, props) == []
    del pod["nodeSelector"]
    term = {"matchExpressions": [{"key": "gpu", "operator": "In", "values": ["on"]}]}
    pod["affinity"] = {
        "nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [term]}}
    }
    assert violations_of("gpus-on-gpu-nodes", resource_type, props) == []


@pytest.mark.parametrize(
    ("weights", "ok"),
    [([90, 10], True), ([100], True), ([None], True), ([50, 40], False), ([60, 50], False), ([None, None], False)],
)
def test_traffic_weights_add_up(weights: list[int | None], ok: bool) -> None:
    route = [{"destination": {"host": "iris", "subset": f"v{i}"}} | ({"weight": w} if w is not None else {})
             for i, w in enumerate(weights)]  # fmt: skip
    props = {"spec": {"http": [{"name": "by-host", "route": route}]}}
    found = violations_of("traffic-weights-add-up", "kubernetes:networking.istio.io/v1:VirtualService", props)
    assert (found == []) is ok, found


@pytest.mark.parametrize(
    ("weights", "ok"),
    [([80, 20], True), ([100], True), ([None], True), ([50, 40], False), ([None, None], False), ([99, None], True)],
)
def test_an_httproutes_backend_weights_add_up(weights: list[int | None], ok: bool) -> None:
    """Gateway API's backendRefs weigh 1 when unset."""
    backends = [{"group": "inference.networking.k8s.io", "kind": "InferencePool", "name": f"chat-v{i}"}
                | ({"weight": w} if w is not None else {}) for i, w in enumerate(weights)]  # fmt: skip
    props = {"spec": {"rules": [{"name": "by-host", "backendRefs": backends}]}}
    found = violations_of("traffic-weights-add-up", "kubernetes:gateway.networking.k8s.io/v1:HTTPRoute", props)
    assert (found == []) is ok, found


def test_a_redirect_splits_no_traffic() -> None:
    redirect = {
        "name": "add-slash",
        "match": [{"uri": {"exact": "/models/iris"}}],
        "redirect": {"uri": "/models/iris/"},
    }
    props = {"spec": {"http": [redirect]}}
    assert violations_of("traffic-weights-add-up", "kubernetes:networking.istio.io/v1:VirtualService", props) == []


def namespace(labels: dict[str, str]) -> tuple[str, dict[str, Any], str]:
    props = {"metadata": {"name": "service", "labels": labels}}
    return "kubernetes:core/v1:Namespace", props, urn("dev", "kubernetes:core/v1:Namespace", "service")


def test_model_namespaces_injected() -> None:
    workload = deployment()
    assert stack_violations("model-namespaces-injected", [namespace({"istio-injection": "enabled"}), workload]) == []
    assert stack_violations("model-namespaces-injected", [namespace({"istio.io/rev": "stable"}), workload]) == []
    assert stack_violations("model-namespaces-injected", [namespace({}), workload])
    assert stack_violations("model-namespaces-injected", [workload])  # a namespace the stack does not make


def hpa(min_replicas: int, stack: str = "prod") -> tuple[str, dict[str, Any], str]:
    props = {"spec": {"scaleTargetRef": {"name": "iris-v1"}, "minReplicas": min_replicas, "maxReplicas": 5}}
    return "kubernetes:autoscaling/v2:HorizontalPodAutoscaler", props, urn(stack, "hpa", "iris-v1")


def test_production_replicas_only_in_production() -> None:
    assert stack_violations("production-replicas", [deployment("prod", replicas=2)]) == []
    assert stack_violations("production-replicas", [deployment("prod", replicas=1)])
    assert stack_violations("production-replicas", [deployment("dev", replicas=1)]) == []
    assert stack_violations("production-replicas", [deployment("prod", replicas=None), hpa(2)]) == []
    assert stack_violations("production-replicas", [deployment("prod", replicas=None), hpa(1)])
    assert stack_violations("production-replicas", [deployment("live", replicas=1)], productionStacks=["live"])


def pdb(labels: dict[str, str]) -> tuple[str, dict[str, Any], str]:
    props = {"metadata": {"namespace": "service"}, "spec": {"selector": {"matchLabels": labels}, "maxUnavailable": 1}}
    return "kubernetes:policy/v1:PodDisruptionBudget", props, urn("prod", "pdb", "iris-v1")


def test_production_disruption_budgets() -> None:
    assert stack_violations("production-disruption-budgets", [deployment("prod")])
    assert (
        stack_violations("production-disruption-budgets", [deployment("prod"), pdb({"app": "iris", "version": "v1"})])
        == []
    )
    assert stack_violations("production-disruption-budgets", [deployment("prod"), pdb({"app": "other"})])
    assert stack_violations("production-disruption-budgets", [deployment("dev")]) == []


def stack_outputs(capacity: dict[str, Any]) -> tuple[str, dict[str, Any], str]:
    """The root stack resource, whose properties are the stack outputs."""
    return "pulumi:pulumi:Stack", {"capacity": capacity}, urn("prod", "pulumi:pulumi:Stack", "inference-platform-prod")


def test_gpus_that_do_not_fit_at_peak_are_an_advisory() -> None:
    fits = {"gpus": {"min": 4, "peak": 10}, "declared": 16, "fits": {"min": True, "peak": True}}
    short = {"gpus": {"min": 4, "peak": 20}, "declared": 16, "fits": {"min": True, "peak": False}}
    undeclared = {"gpus": {"min": 4, "peak": 20}, "fits": {}}  # Pulumi drops the nulls of an undeclared plan
    assert stack_violations("gpus-fit-at-peak", [deployment("prod"), stack_outputs(fits)]) == []
    assert stack_violations("gpus-fit-at-peak", [stack_outputs(undeclared)]) == []
    # A render from before versions could sleep has no awake count: its minimum was what was awake.
    assert stack_violations("gpus-fit-at-peak", [deployment("prod"), stack_outputs(short)]) == [
        "at peak the models need 20 GPUs (awake 4, at their minimum 4), more than the 16 declared "
        "(platform.gpuNodes): scaling up will leave pods Pending"
    ]
    sleeping = {"gpus": {"min": 1, "awake": 6, "peak": 20}, "declared": 16, "fits": {"min": True, "peak": False}}
    assert stack_violations("gpus-fit-at-peak", [deployment("prod"), stack_outputs(sleeping)]) == [
        "at peak the models need 20 GPUs (awake 6, at their minimum 1), more than the 16 declared "
        "(platform.gpuNodes): scaling up will leave pods Pending"
    ]
