"""Pod Security Admission labels on every Namespace a stack creates, over whole renders (charts
included): each namespace enforces, audits and warns at a level of the Pod Security Standards,
pinned to pins.POD_SECURITY_VERSION, and every pod runs in a namespace that carries them; and every
rendered pod (charts' included, a LeaderWorkerSet's leader and worker, each as istiod's injector
makes it) meets its namespace's enforced level by Kubernetes' own checks (tests/pod_security.py,
the checker built from k8s.io/pod-security-admission in tools/pod-security)."""

from __future__ import annotations

import copy
import re
from typing import Any

import pytest

from inference_platform import pins
from inference_platform.cli.charts import DEFAULT_KUBERNETES_VERSION
from inference_platform.platform.helm import BUILT_IN_NAMESPACES
from inference_platform.platform.pod_security import LABEL_PREFIX, MODES
from inference_platform.serving.host_access import host_access
from inference_platform.serving.model_namespace import HOST_ACCESS_ANNOTATION
from tests.cluster import Pod
from tests.pod_security import Injector, check, check_cluster
from tests.stacks.conftest import Rendered, shared_render

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


def meshed_namespaces(rendered: Rendered) -> list[dict[str, Any]]:
    return [
        n
        for n in rendered.cluster.of_kind("Namespace")
        if (n["metadata"].get("labels") or {}).get("istio-injection") == "enabled"
    ]


def test_meshed_namespaces_enforce_restricted_unless_a_model_needs_the_node(rendered: Rendered) -> None:
    """Model namespaces (the mesh injects their pods, with Istio's CNI: no istio-init) enforce
    restricted, the level model pods are built to; one holding a model that mounts the node's files
    enforces privileged, audits and warns at restricted, and says which models and why."""
    meshed = meshed_namespaces(rendered)
    assert meshed, f"{rendered.stack}: no model namespace"
    reasons = host_access(rendered.config.models, rendered.config.platform.gpu_nodes)
    for namespace in meshed:
        labels = pod_security(namespace["metadata"]["labels"])
        levels = (labels["enforce"], labels["audit"], labels["warn"])
        why = (namespace["metadata"].get("annotations") or {}).get(HOST_ACCESS_ANNOTATION)
        if reasons:
            assert levels == ("privileged", "restricted", "restricted")
            assert why == "; ".join(reasons)
        else:
            assert levels == ("restricted", "restricted", "restricted")
            assert why is None


def test_every_pod_meets_its_namespace_level(rendered: Rendered) -> None:
    """The whole render through Kubernetes' own Pod Security checks, injected pods as injected."""
    cluster = rendered.cluster
    pods = list(cluster.pods())
    injector = Injector.read(cluster)
    assert injector.cni, "istiod injects istio-init: pilot.cni.enabled is off"
    if rendered.config.models:
        assert any(injector.injects(pod, cluster.namespaces) for pod in pods), "no pod is injected"
    result = check_cluster(cluster)
    assert result.checked == len(pods) > 0
    assert not result.violations, f"{rendered.stack}: pods short of their namespace's level: {result.violations}"


def test_only_models_that_need_the_node_fall_short_of_restricted(rendered: Rendered) -> None:
    """Where a namespace enforces less than it warns at, only the pods of the models its annotation
    names fall short, and only by the hostPath volumes it names."""
    result = check_cluster(rendered.cluster)
    for warning in result.warnings:
        labels = rendered.cluster.namespaces[warning["namespace"]]
        (namespace,) = [n for n in meshed_namespaces(rendered) if n["metadata"]["name"] == warning["namespace"]]
        why = namespace["metadata"]["annotations"][HOST_ACCESS_ANNOTATION]
        assert labels[f"{LABEL_PREFIX}enforce"] == "privileged"
        for reason in warning["reasons"]:
            assert reason["reason"] == "restricted volume types", warning
            volumes = re.findall(r'"([^"]+)"', reason["detail"].split(" use ")[0])
            assert volumes
            assert all(f"{volume} (hostPath " in why for volume in volumes), (warning, why)


def model_pod(rendered: Rendered) -> Pod:
    """A pod of the first model's, in its restricted namespace."""
    namespace = rendered.config.namespace
    assert rendered.cluster.namespaces[namespace][f"{LABEL_PREFIX}enforce"] == "restricted"
    return next(p for p in rendered.cluster.pods() if p.namespace == namespace and p.spec.get("containers"))


@pytest.fixture(scope="module")
def dev(tmp_path_factory: pytest.TempPathFactory) -> Rendered:
    return shared_render("dev", tmp_path_factory)


def test_a_pod_built_to_break_restricted_fails_naming_the_pod_and_the_reason(dev: Rendered) -> None:
    pod = model_pod(dev)
    admitted = Injector.read(dev.cluster).pod(pod, dev.cluster.namespaces)
    broken = copy.deepcopy(admitted)
    container = broken["spec"]["containers"][0]
    container["securityContext"] = container.get("securityContext", {}) | {"privileged": True}
    broken["spec"]["volumes"] = [*broken["spec"].get("volumes", []), {"name": "node", "hostPath": {"path": "/"}}]
    ok, bad = f"{pod.owner} as rendered", f"{pod.owner} made privileged"
    result = check([(ok, pod.namespace, admitted), (bad, pod.namespace, broken)], dev.cluster.namespaces)
    assert result.checked == 2
    (violation,) = result.violations
    assert (violation["pod"], violation["namespace"], violation["level"]) == (bad, pod.namespace, "restricted")
    assert violation["version"] == pins.POD_SECURITY_VERSION
    details = {reason["reason"]: reason["detail"] for reason in violation["reasons"]}
    assert f'container "{container["name"]}"' in details["privileged"]
    assert 'volume "node"' in details["restricted volume types"]


def test_without_the_cni_the_injected_istio_init_breaks_restricted(dev: Rendered) -> None:
    """The same pod, injected by an istiod without `pilot.cni.enabled`: istio-init (root, NET_ADMIN
    and NET_RAW, as the template makes it) is what only privileged admits."""
    pod = model_pod(dev)
    injector = Injector.read(dev.cluster)
    values = copy.deepcopy(dict(injector.values))
    values["pilot"]["cni"]["enabled"] = False
    without = Injector(values, injector.template, injector.injection_image)
    result = check([(pod.owner, pod.namespace, without.pod(pod, dev.cluster.namespaces))], dev.cluster.namespaces)
    (violation,) = result.violations
    details = {reason["reason"]: reason["detail"] for reason in violation["reasons"]}
    assert '"istio-init"' in details["unrestricted capabilities"]
    assert "NET_ADMIN" in details["unrestricted capabilities"]
    assert '"istio-init"' in details["runAsNonRoot != true"]


def test_the_version_pinned_is_the_default_kubernetes_minor() -> None:
    """The pin is a Kubernetes minor the standards name (never `latest`), the one renders assume."""
    match = re.fullmatch(r"(1\.[0-9]+)\.[0-9]+", DEFAULT_KUBERNETES_VERSION)
    assert match
    assert f"v{match[1]}" == pins.POD_SECURITY_VERSION


def test_an_action_of_the_template_the_tests_do_not_know_fails_loudly(dev: Rendered) -> None:
    """A newer injection template whose securityContext turns on something unmodelled is not misread."""
    injector = Injector.read(dev.cluster)
    changed = injector.template.replace("runAsNonRoot: true", "runAsNonRoot: {{ .Values.global.proxy.nonRoot | not }}")
    assert changed != injector.template
    with pytest.raises(AssertionError, match=r"uses '\.Values\.global\.proxy\.nonRoot \| not'"):
        Injector(injector.values, changed, injector.injection_image).security_contexts({})
