"""Pod Security Admission labels on every Namespace a stack creates, over whole renders (charts
included): each namespace enforces, audits and warns at a level of the Pod Security Standards,
pinned to pins.POD_SECURITY_VERSION, and every pod runs in a namespace that carries them.

Not exercised here: whether each rendered pod meets its namespace's level. That needs the
standards' own checks (the Go module k8s.io/pod-security-admission's `policy` package), and the Go
module proxy cannot be reached from this project's machines or CI; the levels were chosen by
reading the pods (docs/security.md says which namespace needs what, and why)."""

from __future__ import annotations

import re

from inference_platform import pins
from inference_platform.cli.charts import DEFAULT_KUBERNETES_VERSION
from inference_platform.platform.helm import BUILT_IN_NAMESPACES
from inference_platform.platform.pod_security import LABEL_PREFIX, MODES
from tests.stacks.conftest import Rendered

# The standards' levels (https://kubernetes.io/docs/concepts/security/pod-security-standards/).
LEVELS = {"privileged", "baseline", "restricted"}


def pod_security(labels: dict[str, str]) -> dict[str, str]:
    return {key.removeprefix(LABEL_PREFIX): value for key, value in labels.items() if key.startswith(LABEL_PREFIX)}


def test_every_namespace_enforces_audits_and_warns_at_a_pinned_level(rendered: Rendered) -> None:
    namespaces = rendered.cluster.of_kind("Namespace")
    assert namespaces, f"{rendered.stack}: no Namespace rendered"
    wrong = {}
    for namespace in namespaces:
        labels = pod_security(namespace["metadata"].get("labels") or {})
        expected_keys = {*MODES, *(f"{mode}-version" for mode in MODES)}
        levels_ok = all(labels.get(mode) in LEVELS for mode in MODES)
        versions_ok = all(labels.get(f"{mode}-version") == pins.POD_SECURITY_VERSION for mode in MODES)
        if set(labels) != expected_keys or not levels_ok or not versions_ok:
            wrong[namespace["metadata"]["name"]] = labels
    assert not wrong, f"{rendered.stack}: Namespaces without complete, pinned Pod Security labels: {wrong}"


def test_every_pod_runs_in_a_namespace_the_stack_labels(rendered: Rendered) -> None:
    """A pod in a namespace the stack does not create would escape the labels (a built-in one, such
    as kube-system where HAMi may be told to run, is the cluster's to label)."""
    created = {n["metadata"]["name"] for n in rendered.cluster.of_kind("Namespace")}
    pods = list(rendered.cluster.pods())
    assert pods
    outside = {(p.owner, p.namespace) for p in pods if p.namespace not in created | set(BUILT_IN_NAMESPACES)}
    assert not outside, f"{rendered.stack}: pods in namespaces the stack neither creates nor labels: {outside}"


def test_meshed_namespaces_report_against_restricted(rendered: Rendered) -> None:
    """Model namespaces (the mesh injects their pods): Istio's istio-init container needs privileged
    without Istio's CNI plugin, so they enforce privileged and report what falls short of restricted,
    the level model pods are built to."""
    meshed = [
        n
        for n in rendered.cluster.of_kind("Namespace")
        if (n["metadata"].get("labels") or {}).get("istio-injection") == "enabled"
    ]
    assert meshed, f"{rendered.stack}: no model namespace"
    for namespace in meshed:
        labels = pod_security(namespace["metadata"]["labels"])
        assert (labels["enforce"], labels["audit"], labels["warn"]) == ("privileged", "restricted", "restricted")


def test_the_version_pinned_is_the_default_kubernetes_minor() -> None:
    """The pin is a Kubernetes minor the standards name (never `latest`), the one renders assume."""
    match = re.fullmatch(r"(1\.[0-9]+)\.[0-9]+", DEFAULT_KUBERNETES_VERSION)
    assert match
    assert f"v{match[1]}" == pins.POD_SECURITY_VERSION
