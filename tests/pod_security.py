"""Pods checked against the Pod Security Standards by Kubernetes' own implementation of them: the
checker in tools/pod-security (k8s.io/pod-security-admission at Kubernetes 1.33's release), built
by `make pod-security` (part of `make test`'s setup, so CI always has it).

Each pod is checked as the API server admits it: after istiod's injector has added its containers,
for the pods it injects. `injected` adds them as the injector's own sidecar template makes them,
read from the rendered istiod chart (the istio-sidecar-injector ConfigMap holds the template,
files/injection-template.yaml, and the values the injector renders it with): the `istio-validation`
init container (or `istio-init`, without the CNI) and the `istio-proxy` native sidecar, each with
the securityContext the template gives it. The template is Go text/template; `render_branches`
evaluates the few actions of its securityContext blocks (conditionals on the chart's values and the
pod's annotations, and a few defaults), and fails on any action it does not know, so a new Istio
whose template changes there fails the test rather than being misread. Not modelled: the volumes
the injector adds (emptyDir, projected, downwardAPI and configMap, which every level admits) and
the rest of each container (images, ports, probes), which Pod Security does not judge."""

from __future__ import annotations

import json
import re
import subprocess
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.cluster import Cluster, Pod

ROOT = Path(__file__).resolve().parents[1]
CHECKER = ROOT / "tools" / "bin" / "pod-security"

INJECTION_LABEL = "istio-injection"
INJECT = "sidecar.istio.io/inject"
TEMPLATES_ANNOTATION = "inject.istio.io/templates"
INTERCEPTION_MODE = "sidecar.istio.io/interceptionMode"
CAP_NET_BIND_SERVICE = "sidecar.istio.io/capNetBindService"


def checker() -> Path:
    """The built checker, or a failure that says how to build it (CI builds it: make test)."""
    if not CHECKER.exists():
        pytest.fail(
            f"{CHECKER.relative_to(ROOT)} is not built: run `make pod-security` (it needs Go, which fetches "
            "k8s.io/pod-security-admission from the Go module proxy; `make test` builds it first)"
        )
    return CHECKER


@dataclass(frozen=True)
class Result:
    checked: int
    violations: list[dict[str, Any]]
    """Pods short of their namespace's enforced level."""
    warnings: list[dict[str, Any]]
    """Pods short of the level their namespace warns at, where stricter than the enforced one."""


def check(pods: Iterable[tuple[str, str, Mapping[str, Any]]], namespaces: Mapping[str, Mapping[str, str]]) -> Result:
    """Runs the checker over `(name, namespace, pod)` triples, each pod a `{metadata, spec}`."""
    document = {
        "namespaces": {name: dict(labels) for name, labels in namespaces.items()},
        "pods": [{"name": name, "namespace": namespace, **pod} for name, namespace, pod in pods],
    }
    run = subprocess.run([checker()], input=json.dumps(document), capture_output=True, text=True, check=False)
    assert run.returncode in (0, 1), f"pod-security exited {run.returncode}: {run.stderr}"
    out = json.loads(run.stdout)
    assert (run.returncode == 1) == bool(out["violations"]), run.stdout
    return Result(out["checked"], out["violations"], out["warnings"])


def check_cluster(cluster: Cluster) -> Result:
    """Every pod of the render (charts' included; a LeaderWorkerSet's leader and worker), as injected."""
    injector = Injector.read(cluster)
    pods = [(pod.owner, pod.namespace, injector.pod(pod, cluster.namespaces)) for pod in cluster.pods()]
    return check(pods, cluster.namespaces)


# Go template actions: {{ ... }} with optional whitespace trimming on either side.
ACTION = re.compile(r"{{(-?)\s*(.*?)\s*(-?)}}", re.DOTALL)


def security_context_blocks(template: str) -> list[str]:
    """The `securityContext:` blocks of the sidecar template's containers, in order (the init
    container's, then istio-proxy's): each from its key to the next key of its container."""
    lines = template.splitlines()
    blocks: list[str] = []
    for start, line in enumerate(lines):
        if line != "    securityContext:":
            continue
        block: list[str] = []
        for following in lines[start + 1 :]:
            indent = len(following) - len(following.lstrip())
            directive = following.lstrip().startswith("{{")
            if (not directive and indent <= 4) or (directive and indent < 4):
                break
            block.append(following)
        blocks.append("\n".join(block) + "\n")
    return blocks


def render_branches(text: str, evaluate: Callable[[str], Any]) -> str:
    """The text with its if/else/end actions resolved and its value actions replaced, by
    `evaluate(expression)`; Go's trimming (`{{-`, `-}}`) as text/template does it."""
    pieces: list[str] = []
    # (taking this branch, some branch of this if already taken, the enclosing branch taken)
    stack: list[tuple[bool, bool, bool]] = []
    active, position, trim_next = True, 0, False
    for match in ACTION.finditer(text):
        chunk = text[position : match.start()]
        if trim_next:
            chunk = chunk.lstrip()
        if match[1]:
            chunk = chunk.rstrip()
        if active:
            pieces.append(chunk)
        position, trim_next = match.end(), bool(match[3])
        action = match[2]
        if action.startswith("if "):
            taken = active and bool(evaluate(action[3:]))
            stack.append((taken, taken, active))
            active = taken
        elif action == "else":
            _, done, outer = stack.pop()
            active = outer and not done
            stack.append((active, True, outer))
        elif action == "end":
            _, _, active = stack.pop()
        elif active:
            value = evaluate(action)
            pieces.append(str(value).lower() if isinstance(value, bool) else str(value))
    tail = text[position:]
    pieces.append(tail.lstrip() if trim_next else tail)
    assert not stack, "unbalanced if/end"
    return "".join(pieces)


def lookup(values: Mapping[str, Any], path: str) -> Any:
    found: Any = values
    for key in path.split("."):
        found = found.get(key) if isinstance(found, Mapping) else None
    return found


@dataclass(frozen=True)
class Injector:
    """istiod's sidecar injector as the render configures it."""

    values: Mapping[str, Any]
    template: str
    injection_image: str

    @classmethod
    def read(cls, cluster: Cluster) -> Injector:
        (config_map,) = [
            o
            for o in cluster.of_kind("ConfigMap", release="istiod")
            if o["metadata"]["name"] == "istio-sidecar-injector"
        ]
        config = yaml.safe_load(config_map["data"]["config"])
        assert config["defaultTemplates"] == ["sidecar"], config["defaultTemplates"]
        values = json.loads(config_map["data"]["values"])
        proxy = values["global"]["proxy"]
        return cls(values, config["templates"]["sidecar"], f"{values['global']['hub']}/{proxy['image']}")

    @property
    def cni(self) -> bool:
        return bool(lookup(self.values, "pilot.cni.enabled"))

    def injects(self, pod: Pod, namespaces: Mapping[str, Mapping[str, str]]) -> bool:
        """Istio's default webhooks: a namespace labelled for injection (unless the pod opts out), or a
        pod labelled for it; with the sidecar template (gateways ask for their own)."""
        opted = pod.labels.get(INJECT, pod.annotations.get(INJECT))
        namespace = namespaces[pod.namespace].get(INJECTION_LABEL)
        if opted == "false" or namespace == "disabled":
            return False
        if pod.annotations.get(TEMPLATES_ANNOTATION, "sidecar") != "sidecar":
            return False
        return namespace == "enabled" or opted == "true"

    def security_contexts(self, annotations: Mapping[str, str]) -> tuple[dict[str, Any], dict[str, Any]]:
        """The init container's and istio-proxy's securityContexts for a pod with these annotations."""
        variables = {
            "$tproxy": annotations.get(INTERCEPTION_MODE, "REDIRECT") == "TPROXY",
            "$capNetBindService": annotations.get(
                CAP_NET_BIND_SERVICE, str(lookup(self.values, "global.proxy.capNetBindService")).lower()
            )
            == "true",
        }

        def evaluate(expression: str) -> Any:
            if expression.startswith("not "):
                return not evaluate(expression[4:])
            if expression.startswith("or "):
                return any(evaluate(term) for term in expression[3:].split())
            if expression in variables:
                return variables[expression]
            if re.fullmatch(r"\.Values(\.\w+)+", expression):
                return lookup(self.values, expression.removeprefix(".Values."))
            if expression in {'.ProxyUID | default "1337"', '.ProxyGID | default "1337"'}:
                return 1337  # istiod sets ProxyUID/GID only on OpenShift
            if expression == 'eq (index .ProxyConfig.ProxyMetadata "IPTABLES_TRACE_LOGGING") "true"':
                return False  # the mesh config sets no proxyMetadata
            raise AssertionError(
                f"the injection template's securityContext uses {expression!r}: teach tests/pod_security.py"
            )

        init, proxy = (yaml.safe_load(render_branches(b, evaluate)) for b in security_context_blocks(self.template))
        return init, proxy

    def pod(self, pod: Pod, namespaces: Mapping[str, Mapping[str, str]]) -> dict[str, Any]:
        """The pod as admitted: `{metadata, spec}`, with the injector's containers where it injects."""
        metadata = {"labels": dict(pod.labels), "annotations": dict(pod.annotations)}
        spec = dict(pod.spec)
        if self.injects(pod, namespaces):
            init, proxy = self.security_contexts(pod.annotations)
            first = "istio-validation" if self.cni else "istio-init"
            added: list[dict[str, Any]] = [
                {"name": first, "image": self.injection_image, "securityContext": init},
                {
                    "name": "istio-proxy",
                    "image": self.injection_image,
                    "restartPolicy": "Always",
                    "securityContext": proxy,
                },
            ]
            spec["initContainers"] = [*added, *(spec.get("initContainers") or [])]
        return {"metadata": metadata, "spec": spec}
