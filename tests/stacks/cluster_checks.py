"""Whole-cluster checks over a render's program objects and chart objects together.

Each check returns the problems it finds, as sentences: the tests require none for every stack,
and show each check finding the problem in a render broken on purpose.
"""

from __future__ import annotations

import copy
import functools
import ipaddress
import json
import re
from collections import Counter
from collections.abc import Callable, Iterator
from fractions import Fraction
from itertools import product
from typing import Any
from urllib.parse import urlsplit

import celpy
import celpy.adapter
import celpy.evaluation
import jsonschema
import kubernetes_validate
import yaml

from inference_platform.platform import network
from tests.cluster import LWS_GROUP_INDEX, LWS_NAME, LWS_WORKER_INDEX, Address, Cluster, Pod, dig, selects
from tests.stacks import kubernetes_cel

Check = Callable[[Cluster], list[str]]
MERGED_METRICS_PORT = 15020  # Istio's sidecar agent: the app's metrics and Envoy's together


def label(obj: dict[str, Any]) -> str:
    metadata = obj["metadata"]
    where = f"{metadata['namespace']}/{metadata['name']}" if metadata.get("namespace") else metadata["name"]
    return f"{obj['kind']} {where}"


def schema_version(kubernetes_version: str) -> str:
    """kubernetes-validate keeps one schema per minor version: 1.30.4 -> 1.30.0."""
    major, minor, _ = kubernetes_version.split(".")
    return f"{major}.{minor}.0"


def kubernetes_schema_problems(objects: list[dict[str, Any]], kubernetes_version: str) -> list[str]:
    version = schema_version(kubernetes_version)
    problems = []
    for obj in objects:
        if is_custom(obj):
            continue
        try:
            kubernetes_validate.validate(obj, version, strict=True)
        except (kubernetes_validate.ValidationError, kubernetes_validate.SchemaNotFoundError) as error:
            problems.append(f"{label(obj)}: {str(error).splitlines()[0]}")
    return problems


# API groups of the custom resources the program and the charts create: Istio's (CRDs from the
# base chart), KEDA's (from the keda and keda-add-ons-http charts), LeaderWorkerSet's (lws), the
# Gateway API's and the inference extension's (their pinned CRD files, which the platform applies).
CUSTOM_GROUPS = (
    ".istio.io",
    "keda.sh",
    "leaderworkerset.x-k8s.io",
    "gateway.networking.k8s.io",
    "inference.networking.k8s.io",
)


def is_custom(obj: dict[str, Any]) -> bool:
    group = str(obj["apiVersion"]).rpartition("/")[0]
    return group.endswith(CUSTOM_GROUPS)


# --- CRD schemas, as the charts render them ----------------------------------------------------


def _strict(schema: Any) -> Any:
    """A CRD's structural schema as the API server applies it with field validation Strict:
    unknown fields are errors, except under x-kubernetes-preserve-unknown-fields."""
    if isinstance(schema, list):
        return [_strict(item) for item in schema]
    if not isinstance(schema, dict):
        return schema
    # Branches of oneOf/anyOf/allOf/not only constrain values the structural schema above them
    # declares (the Gateway API's addresses): they close nothing themselves.
    strict = {key: value if key in JUNCTORS else _strict(value) for key, value in schema.items()}
    if (
        "properties" in schema
        and "additionalProperties" not in schema
        and not schema.get("x-kubernetes-preserve-unknown-fields")
    ):
        strict["additionalProperties"] = False
    if schema.get("x-kubernetes-int-or-string"):
        strict.pop("type", None)
        strict["anyOf"] = [{"type": "integer"}, {"type": "string"}]
    return strict


JUNCTORS = frozenset({"oneOf", "anyOf", "allOf", "not"})

ENVELOPE = {
    "apiVersion": {"type": "string"},
    "kind": {"type": "string"},
    "metadata": {"type": "object"},
}


@functools.cache
def crd_schema_validators(crds_json: str) -> dict[tuple[str, str], jsonschema.Draft7Validator]:
    validators = {}
    for crd in json.loads(crds_json):
        group, kind = crd["spec"]["group"], crd["spec"]["names"]["kind"]
        for version in crd["spec"]["versions"]:
            schema = copy.deepcopy(version["schema"]["openAPIV3Schema"])
            # Istio's CRDs leave the envelope out; the API server checks it itself.
            schema["properties"] = ENVELOPE | schema.get("properties", {})
            schema["required"] = sorted({*schema.get("required", []), "apiVersion", "kind", "metadata"})
            validators[(f"{group}/{version['name']}", kind)] = jsonschema.Draft7Validator(_strict(schema))
    return validators


def crd_validators(cluster: Cluster) -> dict[tuple[str, str], jsonschema.Draft7Validator]:
    crds = cluster.of_kind("CustomResourceDefinition")
    return crd_schema_validators(json.dumps(crds, sort_keys=True))


def custom_resource_problems(cluster: Cluster) -> list[str]:
    """Every custom object (Istio's, KEDA's), the program's and the charts', against the CRDs the
    charts render, made strict."""
    validators = crd_validators(cluster)
    problems = []
    for obj in cluster.objects:
        if not is_custom(obj):
            continue
        validator = validators.get((obj["apiVersion"], obj["kind"]))
        if validator is None:
            problems.append(f"{label(obj)}: no CRD in the render serves {obj['apiVersion']} {obj['kind']}")
            continue
        for error in validator.iter_errors(obj):
            path = ".".join(str(part) for part in error.absolute_path)
            problems.append(f"{label(obj)}: {path}: {error.message}")
    return problems


@functools.cache
def _schemas(crds_json: str) -> dict[tuple[str, str], dict[str, Any]]:
    return {
        (f"{crd['spec']['group']}/{version['name']}", crd["spec"]["names"]["kind"]): version["schema"][
            "openAPIV3Schema"
        ]
        for crd in json.loads(crds_json)
        for version in crd["spec"]["versions"]
    }


@functools.cache
def _cel_program(rule: str) -> Any:
    environment = celpy.Environment()
    return environment.program(environment.compile(rule), functions=kubernetes_cel.FUNCTIONS)


def _cel(schema: dict[str, Any], value: Any, path: str, problems: list[str]) -> None:
    """The CEL rules (x-kubernetes-validations) of a schema node and of every node below it, each
    evaluated with `self` bound to the value at its node, as the API server evaluates them.
    Transition rules (oldSelf) judge an update against the object before it: none to judge here."""
    for validation in schema.get("x-kubernetes-validations") or []:
        rule = validation["rule"]
        if "oldSelf" in rule:
            continue
        try:
            holds = bool(_cel_program(rule).evaluate({"self": celpy.adapter.json_to_cel(value)}))
        except celpy.evaluation.CELEvalError as error:
            problems.append(f"{path or '.'}: {rule!r} cannot be evaluated: {error}")
            continue
        if not holds:
            problems.append(f"{path or '.'}: {validation.get('message', rule)}")
    if isinstance(value, dict):
        properties = schema.get("properties") or {}
        extra = schema.get("additionalProperties")
        for key, item in value.items():
            child = properties.get(key, extra if isinstance(extra, dict) else None)
            if child is not None:
                _cel(child, item, f"{path}.{key}" if path else key, problems)
    elif isinstance(value, list) and isinstance(schema.get("items"), dict):
        for index, item in enumerate(value):
            _cel(schema["items"], item, f"{path}[{index}]", problems)


def defaulted(schema: dict[str, Any], value: Any) -> Any:
    """The value as the API server stores it: each absent field with a `default` in the structural
    schema set to it, at every level, before validation (and CEL) sees the object."""
    if isinstance(value, dict):
        properties = schema.get("properties") or {}
        out = {key: defaulted(properties.get(key) or {}, item) for key, item in value.items()}
        for key, child in properties.items():
            if key not in out and "default" in child:
                out[key] = defaulted(child, copy.deepcopy(child["default"]))
        return out
    if isinstance(value, list) and isinstance(schema.get("items"), dict):
        return [defaulted(schema["items"], item) for item in value]
    return value


def cel_schema_problems(crds_json: str, obj: dict[str, Any]) -> list[str]:
    """One object against its CRD's CEL rules, defaults applied first as the API server does."""
    schema = _schemas(crds_json).get((obj["apiVersion"], obj["kind"]))
    found: list[str] = []
    if schema is not None:
        _cel(schema, defaulted(schema, obj), "", found)
    return [f"{label(obj)}: {problem}" for problem in found]


def cel_problems(cluster: Cluster) -> list[str]:
    """Every custom object against its CRD's CEL rules (cel-python), which no JSON Schema check sees."""
    crds = json.dumps(cluster.of_kind("CustomResourceDefinition"), sort_keys=True)
    return [problem for obj in cluster.objects if is_custom(obj) for problem in cel_schema_problems(crds, obj)]


def rules_evaluated(cluster: Cluster) -> int:
    """How many CEL rules the render's custom objects meet (their CRDs have some: a check with none
    to evaluate would prove nothing)."""
    schemas = _schemas(json.dumps(cluster.of_kind("CustomResourceDefinition"), sort_keys=True))

    def count(schema: dict[str, Any], value: Any) -> int:
        here = sum("oldSelf" not in v["rule"] for v in schema.get("x-kubernetes-validations") or [])
        if isinstance(value, dict):
            properties, extra = schema.get("properties") or {}, schema.get("additionalProperties")
            here += sum(
                count(child, item)
                for key, item in value.items()
                if (child := properties.get(key, extra if isinstance(extra, dict) else None)) is not None
            )
        elif isinstance(value, list) and isinstance(schema.get("items"), dict):
            here += sum(count(schema["items"], item) for item in value)
        return here

    return sum(
        count(schema, obj)
        for obj in cluster.objects
        if is_custom(obj) and (schema := schemas.get((obj["apiVersion"], obj["kind"]))) is not None
    )


# --- What KEDA's admission webhook would refuse (it fails open) -----------------------------------
# apis/keda/v1alpha1/scaledobject_webhook.go at v2.20.2, rule by rule, over the render.

KEDA_NAME_LIMIT = 63


def _target(autoscaler: dict[str, Any]) -> tuple[str, str, str]:
    ref = autoscaler["spec"]["scaleTargetRef"]
    return autoscaler["metadata"].get("namespace", ""), ref.get("kind", "Deployment"), ref["name"]


def keda_webhook_problems(cluster: Cluster) -> list[str]:
    """No workload has two autoscalers (two ScaledObjects, or an HPA of its own beside one), and each
    ScaledObject passes every check KEDA's webhook makes: replica bounds, names within a label
    value, unique trigger names, not only cpu/memory triggers when it may scale to zero, and a
    request on every container for a cpu or memory trigger."""
    problems: list[str] = []
    scaled = cluster.of_kind("ScaledObject")
    by_target: dict[tuple[str, str, str], list[str]] = {}
    for autoscaler in [*scaled, *cluster.of_kind("HorizontalPodAutoscaler")]:
        by_target.setdefault(_target(autoscaler), []).append(label(autoscaler))
    problems += [
        f"{'/'.join(target)} has {len(owners)} autoscalers: {', '.join(sorted(owners))}"
        for target, owners in sorted(by_target.items())
        if len(owners) > 1
    ]
    deployments = {(d["metadata"]["namespace"], d["metadata"]["name"]): d for d in cluster.of_kind("Deployment")}
    # A LeaderWorkerSet scales by groups; its leaders' containers are what the triggers measure.
    deployments |= {
        (s["metadata"]["namespace"], s["metadata"]["name"]): {
            "spec": {"template": s["spec"]["leaderWorkerTemplate"]["leaderTemplate"]}
        }
        for s in cluster.of_kind("LeaderWorkerSet")
    }
    for obj in scaled:
        spec, name = obj["spec"], obj["metadata"]["name"]
        minimum, maximum = spec.get("minReplicaCount", 0), spec.get("maxReplicaCount", 100)
        if minimum > maximum:
            problems.append(f"{label(obj)}: MinReplicaCount={minimum} must be less than MaxReplicaCount={maximum}")
        if "idleReplicaCount" in spec and spec["idleReplicaCount"] >= minimum:
            problems.append(f"{label(obj)}: IdleReplicaCount must be less than MinReplicaCount")
        hpa = dig(spec, "advanced", "horizontalPodAutoscalerConfig", "name") or f"keda-hpa-{name}"
        problems += [
            f"{label(obj)}: {what} {value!r} is longer than {KEDA_NAME_LIMIT} characters"
            for what, value in (("name", name), ("HPA name", hpa))
            if len(value) > KEDA_NAME_LIMIT
        ]
        triggers = spec.get("triggers") or []
        names = [t["name"] for t in triggers if t.get("name")]
        if not triggers:
            problems.append(f"{label(obj)}: no triggers")
        if len(names) != len(set(names)):
            problems.append(f"{label(obj)}: trigger names {names} repeat")
        kinds = {t["type"] for t in triggers}
        if kinds & {"cpu", "memory"} and kinds <= {"cpu", "memory"} and minimum == 0:
            problems.append(
                f"{label(obj)}: only cpu/memory triggers and minReplicaCount 0: it would never scale to zero"
            )
        deployment = deployments.get(_target(obj)[::2])
        if deployment is None:
            problems.append(f"{label(obj)}: targets {'/'.join(_target(obj))}, which is not rendered")
            continue
        for resource in sorted(kinds & {"cpu", "memory"}):
            problems += [
                f"{label(obj)}: a {resource} trigger but container {container['name']} has no {resource} request"
                for container in deployment["spec"]["template"]["spec"]["containers"]
                if resource not in (dig(container, "resources", "requests") or {})
            ]
    return problems


# --- The HTTP add-on's routes: a Host the interceptor knows, a Service that reaches the version ---


def interceptor_proxies(cluster: Cluster) -> set[str]:
    """The in-mesh names of the add-on's interceptor proxy Services."""
    return {
        f"{service['metadata']['name']}.{service['metadata']['namespace']}.svc.cluster.local"
        for service in cluster.charts.get("keda-add-ons-http", [])
        if service["kind"] == "Service" and service["metadata"]["name"].endswith("-interceptor-proxy")
    }


def _hosts(route: dict[str, Any]) -> list[str]:
    return sorted({host for rule in route["spec"].get("rules") or [] for host in rule.get("hosts") or []})


def _host_problems(cluster: Cluster, routes: list[dict[str, Any]]) -> list[str]:
    proxies = interceptor_proxies(cluster)
    claims = Counter(host for route in routes for host in _hosts(route))
    problems = []
    for virtual_service in cluster.of_kind("VirtualService"):
        for entry in (e for http in virtual_service["spec"].get("http") or [] for e in http.get("route") or []):
            host = dig(entry, "headers", "request", "set", "Host")
            if entry["destination"]["host"] not in proxies:
                continue
            if host is None:
                problems.append(f"{label(virtual_service)} sends a request to the interceptor without a Host")
            elif claims[host] != 1:
                problems.append(
                    f"{label(virtual_service)} sets Host {host}, which {claims[host]} InterceptorRoutes claim"
                )
    return problems


def _target_problems(cluster: Cluster, route: dict[str, Any]) -> list[str]:
    namespace, target = route["metadata"]["namespace"], route["spec"]["target"]
    expected = f"{target['service']}.{namespace}.svc.cluster.local"
    problems = []
    if _hosts(route) != [expected]:
        problems.append(f"{label(route)} claims {_hosts(route)}, not its target Service's in-mesh name {expected}")
    service = cluster.service(target["service"], namespace)
    if service is None:
        problems.append(f"{label(route)} targets Service {namespace}/{target['service']}, which is not rendered")
    elif not cluster.endpoints(service, target.get("port", 0)):
        problems.append(f"{label(route)}: Service {label(service)} reaches no pod on {target.get('port')}")
    return problems


def _wake_problems(cluster: Cluster, scaled: dict[str, Any], routes: list[dict[str, Any]]) -> list[str]:
    namespace = scaled["metadata"]["namespace"]
    by_name = {(r["metadata"]["namespace"], r["metadata"]["name"]): r for r in routes}
    own = f"Deployment {namespace}/{scaled['spec']['scaleTargetRef']['name']}"
    problems = []
    for trigger in (t for t in scaled["spec"]["triggers"] if t["type"] == "external-push"):
        route = by_name.get((namespace, trigger["metadata"].get("interceptorRoute", "")))
        if route is None:
            problems.append(f"{label(scaled)} wakes on InterceptorRoute {trigger['metadata']}, which is not rendered")
            continue
        target = route["spec"]["target"]
        service = cluster.service(target["service"], namespace)
        reached = {pod.owner for pod, _ in cluster.endpoints(service, target.get("port", 0))} if service else set()
        if service is not None and reached != {own}:
            problems.append(f"{label(scaled)} wakes on {label(route)}, whose Service reaches {sorted(reached)}")
    return problems


def interceptor_route_problems(cluster: Cluster) -> list[str]:
    """Every route entry to the interceptor sets a Host; exactly one InterceptorRoute claims it, and
    that Host is the in-mesh name of the route's target Service (the interceptor's sidecar routes
    by it), a Service port that reaches pods. Every external-push trigger names an InterceptorRoute
    of its namespace whose Service reaches the pods of the ScaledObject's own Deployment."""
    routes = cluster.of_kind("InterceptorRoute")
    problems = _host_problems(cluster, routes)
    problems += [problem for route in routes for problem in _target_problems(cluster, route)]
    problems += [
        problem for scaled in cluster.of_kind("ScaledObject") for problem in _wake_problems(cluster, scaled, routes)
    ]
    return problems


# --- Identity ---------------------------------------------------------------------------------


def duplicate_problems(cluster: Cluster) -> list[str]:
    """No object twice: the same group, kind, namespace and name from two places would fight."""

    def identity(obj: dict[str, Any]) -> tuple[str, str, str, str]:
        group = str(obj["apiVersion"]).rpartition("/")[0]
        return group, obj["kind"], obj["metadata"].get("namespace", ""), obj["metadata"]["name"]

    counts = Counter(identity(obj) for obj in cluster.objects)
    return [
        f"{kind} {namespace}/{name} ({group or 'core'}) is rendered {n} times"
        for (group, kind, namespace, name), n in counts.items()
        if n > 1
    ]


# --- Seams ------------------------------------------------------------------------------------


def istio_gateway(cluster: Cluster) -> dict[str, Any]:
    """The Istio Gateway (a Gateway API Gateway beside it serves inference-pool routes)."""
    (gateway,) = [g for g in cluster.of_kind("Gateway") if g["apiVersion"].startswith("networking.istio.io/")]
    return gateway


def gateway_pods(cluster: Cluster) -> list[Pod]:
    gateway = istio_gateway(cluster)
    return [
        pod
        for pod in cluster.pods(release="istio-ingressgateway")
        if selects({"matchLabels": gateway["spec"]["selector"]}, pod.labels)
    ]


def gateway_problems(cluster: Cluster) -> list[str]:
    """The Gateway selects the gateway chart's pods, and listens on ports its Service exposes."""
    gateway = istio_gateway(cluster)
    pods = gateway_pods(cluster)
    if not pods:
        return [f"the Gateway's selector {gateway['spec']['selector']} matches no pod of the gateway chart"]
    service = cluster.one("Service", release="istio-ingressgateway")
    exposed = {port["port"] for port in service["spec"]["ports"]}
    problems = [
        f"the Gateway's server port {server['port']['number']} is not a port of {label(service)} ({sorted(exposed)})"
        for server in gateway["spec"]["servers"]
        if server["port"]["number"] not in exposed
    ]
    if not cluster.endpoints(service, 80):
        problems.append(f"Service {label(service)} selects no gateway pod")
    return problems


def routed_destinations(cluster: Cluster) -> Iterator[tuple[str, dict[str, Any], int]]:
    """(VirtualService, Service, port) for every route and mirror destination of the program's VirtualServices."""
    for virtual_service in cluster.of_kind("VirtualService"):
        for route in virtual_service["spec"].get("http") or []:
            destinations = [r["destination"] for r in route.get("route") or []]
            destinations += [m["destination"] for m in route.get("mirrors") or []]
            for destination in destinations:
                name, namespace = destination["host"].split(".")[:2]
                service = cluster.service(name, namespace)
                port = dig(destination, "port", "number")
                if service is None or port is None:
                    yield label(virtual_service), {"missing": destination["host"]}, port or 0
                else:
                    yield label(virtual_service), service, port


def gateway_reach_problems(cluster: Cluster) -> list[str]:
    """Every routed port: a Service port that reaches pods, and NetworkPolicies that let the gateway in."""
    sources = gateway_pods(cluster)
    problems = []
    for route, service, port in routed_destinations(cluster):
        if "missing" in service:
            problems.append(f"{route} routes to {service['missing']}:{port}, which is no rendered Service port")
            continue
        endpoints = cluster.endpoints(service, port)
        if not endpoints:
            problems.append(f"{route} routes to {label(service)}:{port}, which reaches no pod")
        for pod, target in endpoints:
            for source in sources:
                if not cluster.network_admits(source, pod, target):
                    problems.append(
                        f"NetworkPolicies keep the gateway ({source.owner}) from {pod.owner}:{target} ({route})"
                    )
    return problems


def prometheus_pods(cluster: Cluster) -> list[Pod]:
    return [pod for pod in cluster.pods(release="prometheus") if "prometheus-server" in pod.owner]


def meshed(cluster: Cluster, pod: Pod) -> bool:
    return cluster.namespaces.get(pod.namespace, {}).get("istio-injection") == "enabled"


def scrape_problems(cluster: Cluster) -> list[str]:
    """Every annotated pod's metrics port is a port of the pod, and Prometheus' server may reach it
    (and, in meshed namespaces, the sidecar agent's merged port the injector points it at)."""
    scrapers = prometheus_pods(cluster)
    if not scrapers:
        return ["no Prometheus server pod in the render"]
    problems = []
    for pod in cluster.pods():
        if pod.annotations.get("prometheus.io/scrape") != "true" or "prometheus.io/port" not in pod.annotations:
            continue
        port = int(pod.annotations["prometheus.io/port"])
        if port not in pod.ports.values() and not (port == MERGED_METRICS_PORT and "istio" in pod.owner):
            problems.append(f"{pod.owner} is scraped on port {port}, which none of its containers declares")
        scraped = {port, MERGED_METRICS_PORT} if meshed(cluster, pod) else {port}
        for target in sorted(scraped):
            for scraper in scrapers:
                if not cluster.network_admits(scraper, pod, target):
                    problems.append(f"NetworkPolicies keep Prometheus from {pod.owner}:{target}")
    for service in cluster.of_kind("Service"):
        annotations = service["metadata"].get("annotations") or {}
        if annotations.get("prometheus.io/scrape") == "true" and "prometheus.io/port" in annotations:
            port = int(annotations["prometheus.io/port"])
            selected = [
                pod
                for pod in cluster.pods()
                if pod.namespace == service["metadata"]["namespace"]
                and selects({"matchLabels": service["spec"].get("selector") or {}}, pod.labels)
            ]
            if not any(port in pod.ports.values() for pod in selected):
                problems.append(f"{label(service)} is scraped on port {port}, which none of its pods declares")
            problems += [
                f"NetworkPolicies keep Prometheus from {pod.owner}:{port} ({label(service)})"
                for pod in selected
                for scraper in scrapers
                if not cluster.network_admits(scraper, pod, port)
            ]
    return problems


def prometheus_config(cluster: Cluster) -> dict[str, Any]:
    config_map = cluster.one("ConfigMap", release="prometheus", name="prometheus-server")
    loaded: dict[str, Any] = yaml.safe_load(config_map["data"]["prometheus.yml"])
    return loaded


def chart_values(cluster: Cluster, release: str) -> dict[str, Any]:
    (values,) = [chart["values"] for chart in cluster.chart_values if chart["name"] == release]
    return dict(values)


def scrape_job_problems(cluster: Cluster) -> list[str]:
    """Prometheus runs exactly the program's scrape jobs: the chart neither drops nor adds one."""
    ours = chart_values(cluster, "prometheus")["serverFiles"]["prometheus.yml"]["scrape_configs"]
    rendered = prometheus_config(cluster).get("scrape_configs")
    if rendered != ours:
        ours_names = [job["job_name"] for job in ours]
        rendered_names = [job["job_name"] for job in rendered or []]
        return [f"rendered prometheus.yml has jobs {rendered_names}, the program's are {ours_names} (or they differ)"]
    return []


def adapter_rules(cluster: Cluster) -> list[dict[str, Any]]:
    config_map = cluster.one("ConfigMap", release="prometheus-adapter")
    rules: list[dict[str, Any]] = yaml.safe_load(config_map["data"]["config.yaml"])["rules"]
    return rules


def adapter_problems(cluster: Cluster) -> list[str]:
    """The adapter runs the program's rules, serves every HPA's custom metric, and reads the
    rendered Prometheus Service."""
    if "prometheus-adapter" not in cluster.charts:
        custom = [
            m
            for hpa in cluster.of_kind("HorizontalPodAutoscaler")
            for m in hpa["spec"]["metrics"]
            if m["type"] == "Pods"
        ]
        return ["HPAs scale on custom metrics, and no adapter is rendered"] if custom else []
    problems = []
    rules = adapter_rules(cluster)
    if rules != chart_values(cluster, "prometheus-adapter")["rules"]["custom"]:
        problems.append("the adapter's rendered config.yaml does not carry the program's rules")
    served = {dig(rule, "name", "as") for rule in rules}
    for hpa in cluster.of_kind("HorizontalPodAutoscaler"):
        for metric in hpa["spec"]["metrics"]:
            name = dig(metric, "pods", "metric", "name")
            if metric["type"] == "Pods" and name not in served:
                problems.append(f"{label(hpa)} scales on {name}, which no adapter rule serves ({sorted(served)})")
    deployment = cluster.one("Deployment", release="prometheus-adapter")
    args = [a for c in deployment["spec"]["template"]["spec"]["containers"] for a in c.get("args") or []]
    (url,) = [a.split("=", 1)[1] for a in args if a.startswith("--prometheus-url=")]
    problems += url_problems(cluster, url, "the adapter's --prometheus-url")
    return problems


def url_problems(cluster: Cluster, url: str, what: str) -> list[str]:
    """An in-cluster URL (http://<service>.<namespace>.svc[.cluster.local][:port]) reaches pods."""
    parts = urlsplit(url)
    host = parts.hostname or ""
    pieces = host.split(".")
    if len(pieces) < 3 or pieces[2] != "svc":
        return [f"{what} {url} is not an in-cluster Service address"]
    service = cluster.service(pieces[0], pieces[1])
    if service is None:
        return [f"{what} {url} names Service {pieces[1]}/{pieces[0]}, which is not rendered"]
    port = parts.port or (443 if parts.scheme == "https" else 80)
    if not cluster.endpoints(service, port):
        return [f"{what} {url}: Service {label(service)} has no port {port} that reaches a pod"]
    return []


def api_service_problems(cluster: Cluster) -> list[str]:
    """Every aggregated API (custom metrics, resource metrics) is served by a rendered pod; HPAs on
    CPU or memory have the resource metrics API when the stack installs metrics-server."""
    problems = []
    for api in cluster.of_kind("APIService"):
        reference = api["spec"].get("service")
        if reference is None:
            continue
        service = cluster.service(reference["name"], reference["namespace"])
        if service is None:
            problems.append(
                f"{label(api)} points at Service {reference['namespace']}/{reference['name']}, which is not rendered"
            )
        elif not cluster.endpoints(service, reference.get("port", 443)):
            problems.append(f"{label(api)}: Service {label(service)} reaches no pod on {reference.get('port', 443)}")
    served = Counter((api["spec"]["group"], api["spec"]["version"]) for api in cluster.of_kind("APIService"))
    problems += [
        f"{count} APIServices serve {group}/{version}" for (group, version), count in served.items() if count > 1
    ]
    groups = {group for group, _ in served}
    uses_resource_metrics = any(
        m["type"] == "Resource" for hpa in cluster.of_kind("HorizontalPodAutoscaler") for m in hpa["spec"]["metrics"]
    ) or any(t["type"] in ("cpu", "memory") for so in cluster.of_kind("ScaledObject") for t in so["spec"]["triggers"])
    if cluster.of_kind("ScaledObject") and "external.metrics.k8s.io" not in groups:
        problems.append("ScaledObjects are rendered but no APIService serves external.metrics.k8s.io (KEDA's)")
    if (
        uses_resource_metrics
        and "metrics-server" in {c["name"] for c in cluster.chart_values}
        and "metrics.k8s.io" not in groups
    ):
        problems.append("metrics-server is installed but no APIService serves metrics.k8s.io")
    return problems


def istiod_problems(cluster: Cluster) -> list[str]:
    """istiod runs with the program's env and mesh config."""
    values = chart_values(cluster, "istiod")
    deployment = cluster.one("Deployment", release="istiod")
    (discovery,) = [c for c in deployment["spec"]["template"]["spec"]["containers"] if c["name"] == "discovery"]
    env = {e["name"]: e.get("value") for e in discovery.get("env") or []}
    problems = [
        f"istiod's env has {name}={env.get(name)!r}, the program sets {value!r}"
        for name, value in values.get("env", {}).items()
        if env.get(name) != value
    ]
    mesh = yaml.safe_load(cluster.one("ConfigMap", release="istiod", name="istio")["data"]["mesh"])
    problems += [
        f"istiod's mesh config has {key}={mesh.get(key)!r}, the program sets {value!r}"
        for key, value in values.get("meshConfig", {}).items()
        if mesh.get(key) != value
    ]
    return problems


def injection_problems(cluster: Cluster) -> list[str]:
    """istiod's injector takes every pod in a meshed namespace, and the gateway's pods."""
    webhooks = [
        w for config in cluster.of_kind("MutatingWebhookConfiguration", release="istiod") for w in config["webhooks"]
    ]

    def injected(pod: Pod) -> bool:
        namespace = cluster.namespaces.get(pod.namespace, {})
        return any(
            selects(w.get("namespaceSelector", {}), namespace) and selects(w.get("objectSelector", {}), pod.labels)
            for w in webhooks
        )

    gateway = gateway_pods(cluster)
    pickers = picker_pods(cluster)
    problems = []
    for pod in cluster.pods():
        if meshed(cluster, pod) and pod.labels.get(INJECT_LABEL) == "false":
            # Only an inference pool's picker stays out of a meshed namespace's mesh (the gateway
            # speaks the picker's own TLS to it); the injector must honour that.
            if pod not in pickers:
                problems.append(f"{pod.owner} opts out of the mesh")
            elif injected(pod):
                problems.append(f"istiod's injector takes {pod.owner}, which opts out")
        elif (meshed(cluster, pod) or pod in gateway) and not injected(pod):
            problems.append(f"istiod's injector does not take {pod.owner}")
    return problems


INJECT_LABEL = "sidecar.istio.io/inject"


def picker_pods(cluster: Cluster) -> list[Pod]:
    """The pods of every InferencePool's endpoint picker: those its endpointPickerRef Service selects."""
    found: list[Pod] = []
    for pool in cluster.of_kind("InferencePool"):
        ref = pool["spec"]["endpointPickerRef"]
        service = cluster.service(ref["name"], pool["metadata"]["namespace"])
        if service is not None:
            found += [pod for pod, _ in cluster.endpoints(service, ref["port"]["number"]) if pod not in found]
    return found


def hami_problems(cluster: Cluster, kubernetes_version: str) -> list[str]:
    """HAMi's kube-scheduler is the cluster's version, from registry.k8s.io (or the configured mirror)."""
    if "hami" not in cluster.charts:
        return []
    expected = f"registry.k8s.io/kube-scheduler:v{kubernetes_version}"
    images = [
        c["image"]
        for pod in cluster.pods(release="hami")
        for c in pod.spec["containers"]
        if "kube-scheduler" in c["image"]
    ]
    return [f"HAMi runs {image}, not {expected}" for image in images if image != expected] or (
        [] if images else ["HAMi runs no kube-scheduler"]
    )


def output_problems(cluster: Cluster) -> list[str]:
    """Addresses in the stack outputs name rendered Services."""
    platform = cluster.outputs.get("platform") or {}
    problems = []
    if "gatewayService" in platform:
        name, namespace = platform["gatewayService"].split(".")[:2]
        if cluster.service(name, namespace) is None:
            problems.append(f"output platform.gatewayService names {namespace}/{name}, which is not rendered")
    if "prometheus" in platform:
        problems += url_problems(cluster, platform["prometheus"], "output platform.prometheus")
    return problems


def grafana_problems(cluster: Cluster) -> list[str]:
    """Grafana reads the rendered Prometheus, has a dashboard for every model the program built one
    for, and takes its admin credentials from the program's Secret."""
    if "grafana" not in cluster.charts:
        return []
    config_map = cluster.one("ConfigMap", release="grafana", name="grafana")
    problems = []
    for source in yaml.safe_load(config_map["data"]["datasources.yaml"])["datasources"]:
        problems += url_problems(cluster, source["url"], f"Grafana's datasource {source['name']}")
    (dashboards,) = [
        c
        for c in cluster.of_kind("ConfigMap", release="grafana")
        if c["metadata"]["name"].startswith("grafana-dashboards-")
    ]
    values = chart_values(cluster, "grafana")
    wanted = {f"{name}.json" for name in values["dashboards"]["inference-platform"]}
    held = dashboards.get("data") or {}
    if set(held) != wanted:
        problems.append(f"Grafana's dashboards ConfigMap holds {sorted(held)}, not {sorted(wanted)}")
    # The dashboards other stacks write (an environment's shards), which the chart's sidecar gathers
    # from ConfigMaps with its label in the namespace it searches.
    sidecar = dig(values, "sidecar", "dashboards") or {}
    gathered = {
        name: text
        for c in cluster.of_kind("ConfigMap")
        if sidecar.get("enabled")
        and c["metadata"].get("namespace") == sidecar["searchNamespace"]
        and (c["metadata"].get("labels") or {}).get(sidecar["label"]) == sidecar["labelValue"]
        for name, text in c["data"].items()
    }
    problems += [
        f"{name} is not JSON with panels"
        for name, text in (held | gathered).items()
        if not json.loads(text).get("panels")
    ]
    deployment = cluster.one("Deployment", release="grafana")
    for container in deployment["spec"]["template"]["spec"]["containers"]:
        for env in container.get("env") or []:
            reference = dig(env, "valueFrom", "secretKeyRef")
            if reference is None:
                continue
            secrets = [
                s
                for s in cluster.of_kind("Secret")
                if s["metadata"]["name"] == reference["name"]
                and s["metadata"]["namespace"] == deployment["metadata"]["namespace"]
            ]
            if not any(reference["key"] in (s.get("stringData") or s.get("data") or {}) for s in secrets):
                problems.append(
                    f"Grafana's {env['name']} reads Secret {reference['name']} key {reference['key']}, not rendered"
                )
    return problems


# --- LeaderWorkerSets: what the lws webhook refuses, who serves, who talks to whom ---------------

DNS1035 = re.compile(r"^[a-z]([-a-z0-9]*[a-z0-9])?$")
GROUP_PROBE_PORTS = (29501, 40123)  # torch.distributed's rendezvous, and a port NCCL might pick


def _int_or_percent(value: Any, replicas: int) -> int:
    if isinstance(value, str) and value.endswith("%"):
        return int(value[:-1]) * replicas // 100
    return int(value)


def leader_worker_set_problems(cluster: Cluster) -> list[str]:
    """Each LeaderWorkerSet passes the rules the lws webhook (v0.10.0, pkg/webhooks/
    leaderworkerset_webhook.go) enforces: a DNS-1035 name (it names the set's headless Service),
    size at least 1, replicas not negative, maxUnavailable and maxSurge not both 0, a known
    restartPolicy, no subgroup-exclusive topology without a subgroup policy, and its pods' names
    (<set>-<group>-<worker>, their hostnames) DNS labels. The pods that serve a set's version are
    exactly its leaders: every Service selecting any of its pods selects the leaders and no worker.
    Its pods' NetworkPolicies admit a group's members to each other on any port, and nobody else to
    a group port."""
    problems = []
    pods = list(cluster.pods())
    for lws in cluster.of_kind("LeaderWorkerSet"):
        spec, name, where = lws["spec"], lws["metadata"]["name"], label(lws)
        template = spec["leaderWorkerTemplate"]
        size, replicas = template.get("size", 1), spec.get("replicas", 1)
        if not DNS1035.match(name) or len(name) > 63:
            problems.append(f"{where}: name is not a DNS-1035 label")
        if size < 1 or replicas < 0:
            problems.append(f"{where}: size {size} / replicas {replicas} out of range")
        rolling = dig(spec, "rolloutStrategy", "rollingUpdateConfiguration") or {"maxUnavailable": 1, "maxSurge": 0}
        unavailable = _int_or_percent(rolling.get("maxUnavailable", 1), replicas)
        if replicas and not unavailable and not _int_or_percent(rolling.get("maxSurge", 0), replicas):
            problems.append(f"{where}: maxUnavailable must not be 0 when maxSurge is 0")
        if template.get("restartPolicy", "RecreateGroupOnPodRestart") not in ("RecreateGroupOnPodRestart", "None"):
            problems.append(f"{where}: restartPolicy {template['restartPolicy']} is not one lws knows")
        annotations = lws["metadata"].get("annotations") or {}
        if (
            "leaderworkerset.sigs.k8s.io/subgroup-exclusive-topology" in annotations
            and "subGroupPolicy" not in template
        ):
            problems.append(f"{where}: subgroup-exclusive-topology without subGroupSize")
        longest = f"{name}-{max(replicas, 1) - 1}-{size - 1}"
        if len(longest) > 63:
            problems.append(f"{where}: pod name {longest} is longer than 63 characters")
        members = [p for p in pods if p.labels.get(LWS_NAME) == name and p.namespace == lws["metadata"]["namespace"]]
        leaders = [p for p in members if p.labels[LWS_WORKER_INDEX] == "0"]
        for service in cluster.of_kind("Service"):
            selector = service["spec"].get("selector")
            if selector is None or service["metadata"].get("namespace") != lws["metadata"]["namespace"]:
                continue
            chosen = [p for p in members if selects({"matchLabels": selector}, p.labels)]
            if chosen and chosen != leaders:
                problems.append(
                    f"{label(service)} selects {', '.join(p.owner for p in chosen)}: not exactly the leaders"
                )
        problems += _group_reach_problems(cluster, members, [p for p in pods if p not in members])
    return problems


def _group_reach_problems(cluster: Cluster, members: list[Pod], others: list[Pod]) -> list[str]:
    problems = []
    for source, destination, port in product(members, members, GROUP_PROBE_PORTS):
        if source is destination:
            continue
        same = source.labels[LWS_GROUP_INDEX] == destination.labels[LWS_GROUP_INDEX]
        if cluster.network_admits(source, destination, port) != same:
            verb = "cannot reach" if same else "reaches"
            problems.append(f"{source.owner} {verb} {destination.owner} on {port}")
    # Judged on the group's side alone: its policies must shut out every other pod, whatever
    # that pod's own egress allows.
    for source, destination, port in product(others, members, GROUP_PROBE_PORTS):
        if cluster.policies_admit(destination, "ingress", source, port, destination):
            problems.append(f"{source.owner}, outside the group, reaches {destination.owner} on {port}")
    return problems


# --- Probes: each asks a port its container has ---------------------------------------------------

PROBES = ("startupProbe", "readinessProbe", "livenessProbe")


def probe_problems(cluster: Cluster) -> list[str]:
    """Every probe's port is one its container declares: a named port must exist (the kubelet
    refuses the pod otherwise), and in the program's pods a number must be a declared
    containerPort too (a probe on a port nothing declares is a server that listens elsewhere).
    Chart pods may probe ports they do not list, as upstream writes them."""
    program = tuple(
        f"{o['kind']} {o['metadata'].get('namespace')}/{o['metadata']['name']}"
        for o in cluster.program
        if "namespace" in o["metadata"]
    )
    problems = []
    for pod in cluster.pods():
        ours = pod.owner.startswith(program)
        for container in [*(pod.spec.get("initContainers") or []), *(pod.spec.get("containers") or [])]:
            declared = {port.get("name"): port["containerPort"] for port in container.get("ports") or []}
            for kind in PROBES:
                action = next(
                    (a for key in ("httpGet", "tcpSocket", "grpc") if (a := dig(container, kind, key)) is not None),
                    None,
                )
                if action is None:
                    continue
                port = action["port"]
                if isinstance(port, str) and port not in declared:
                    problems.append(f"{pod.owner} {container['name']} {kind}: no container port named {port}")
                elif isinstance(port, int) and ours and port not in declared.values():
                    problems.append(f"{pod.owner} {container['name']} {kind}: port {port} is not a container port")
    return problems


# The platform's network: the open (pod, pod, port) triples and the ways to and from addresses
# outside the pod network, against the edge table the policies are built from
# (src/inference_platform/stack/network.py).

KUBE_DNS = Pod(
    owner="the cluster's DNS (kube-system/kube-dns)",
    namespace="kube-system",
    labels={"k8s-app": "kube-dns"},
    annotations={},
    spec={"containers": [{"name": "coredns", "ports": [{"name": "dns-tcp", "containerPort": 53}]}]},
)


def _contains(peer: network.Peer, pod: Pod, closed: set[str], direction: str) -> bool:
    if isinstance(peer, network.Pods):
        return pod.namespace == peer.namespace and all(pod.labels.get(k) == v for k, v in peer.labels)
    if isinstance(peer, network.AllPods):
        # A namespace-wide edge into a namespace holds only where a default deny carries it.
        return pod.namespace == peer.namespace and (direction != "in" or peer.namespace in closed)
    return False


def _holds(peer: network.Peer, address: Address) -> bool:
    return isinstance(peer, network.Addresses) and any(
        ipaddress.ip_address(address.ip) in ipaddress.ip_network(cidr) for cidr in peer.cidrs
    )


# Documentation ranges (RFC 5737, RFC 3849): in no private block, so only the internet's rows hold them.
OUTSIDE_ADDRESSES = ("203.0.113.7", "2001:db8::7")


def _representative(peer: network.Addresses) -> Address:
    """An address of the peer's first block: its first host (a /32 is that address)."""
    block = ipaddress.ip_network(peer.cidrs[0])
    return Address(peer.name, str(next(iter(block.hosts()), block.network_address)))


def network_pods(cluster: Cluster) -> list[Pod]:
    """Every pod of the render, and the cluster's DNS, which every pod may ask."""
    return [*cluster.pods(), KUBE_DNS]


def edge_table_problems(cluster: Cluster, edges: list[network.Edge], model_namespace: str) -> list[str]:
    """The NetworkPolicies open exactly the table's edges on the platform's side: a (source,
    destination, port) is open iff the table lets the source out and the destination in, where a
    model pod's side is its own policies' (access.py's, proven by test_reachability) and a pod in a
    namespace the platform leaves open (kube-system's own) lets everything in."""
    closed = set(network.closed_namespaces(edges, model_namespace))
    groups = network.pod_groups(edges)

    def platform_side(pod: Pod) -> bool:
        return pod.namespace in closed or any(_contains(g, pod, closed, "out") for g in groups)

    def side_allows(pod: Pod, direction: str, peer: Pod | Address, port: int) -> bool:
        if pod.namespace == model_namespace:
            port_pod = pod if direction == "in" else peer if isinstance(peer, Pod) else None
            kind = "egress" if direction == "out" else "ingress"
            return cluster.policies_admit(pod, kind, peer, port, port_pod)
        if not platform_side(pod):
            return True
        for edge in edges:
            mine, theirs = (edge.source, edge.destination) if direction == "out" else (edge.destination, edge.source)
            if "TCP" not in edge.protocols or port not in edge.ports or not _contains(mine, pod, closed, direction):
                continue
            if _holds(theirs, peer) if isinstance(peer, Address) else _contains(theirs, peer, closed, "peer"):
                return True
        return False

    pods = network_pods(cluster)
    problems = []
    policy_ports = {
        entry["port"]
        for policy in cluster.of_kind("NetworkPolicy")
        for direction in ("ingress", "egress")
        for rule in policy["spec"].get(direction) or []
        for entry in rule.get("ports") or []
        if isinstance(entry.get("port"), int)
    }
    table_ports = {port for edge in edges for port in edge.ports}
    for source, destination in product(pods, repeat=2):
        if not (platform_side(source) or platform_side(destination)) or (
            source.namespace == destination.namespace == model_namespace
        ):
            continue
        for port in sorted(set(destination.ports.values()) | table_ports | policy_ports | {MERGED_METRICS_PORT}):
            open_ = cluster.network_admits(source, destination, port)
            declared = side_allows(source, "out", destination, port) and side_allows(destination, "in", source, port)
            if open_ != declared:
                what = "open but not in the table" if open_ else "in the table but shut"
                problems.append(f"{source.owner} -> {destination.owner}:{port}: {what}")
    problems += [
        f"the table's {group.name} ({group.namespace}) selects no rendered pod"
        for group in groups
        if not any(_contains(group, pod, closed, "out") for pod in pods)
    ]
    # Probed at the first host of each block the table names, and at addresses outside them all;
    # addresses that coincide (the API server's and the kubelets' default blocks) are probed once.
    peers = [p for e in edges for p in (e.source, e.destination) if isinstance(p, network.Addresses)]
    by_ip: dict[str, set[str]] = {ip: {"an address outside the cluster"} for ip in OUTSIDE_ADDRESSES}
    for peer in peers:
        for cidr in peer.cidrs:
            block = ipaddress.ip_network(cidr)
            by_ip.setdefault(str(next(iter(block.hosts()), block.network_address)), set()).add(peer.name)
    addresses = [Address(" or ".join(sorted(names)), ip) for ip, names in sorted(by_ip.items())]
    for pod in pods:
        if not platform_side(pod):
            continue
        for address in sorted(addresses, key=lambda a: a.name):
            for port in sorted(set(pod.ports.values()) | table_ports):
                for direction, open_ in (
                    ("out", cluster.egress_to_address(pod, address, port)),
                    ("in", cluster.ingress_from_address(pod, address, port)),
                ):
                    declared = side_allows(pod, direction, address, port)
                    if open_ != declared:
                        arrow = (
                            f"{pod.owner} -> {address.name}:{port}"
                            if direction == "out"
                            else (f"{address.name} -> {pod.owner}:{port}")
                        )
                        problems.append(f"{arrow}: {'open but not in the table' if open_ else 'in the table but shut'}")
    return problems


def webhook_reach_problems(cluster: Cluster, api_server: Address) -> list[str]:
    """The API server reaches every webhook, CRD conversion and aggregated API it would call."""
    references = [
        (label(w), hook["clientConfig"]["service"])
        for kind in ("ValidatingWebhookConfiguration", "MutatingWebhookConfiguration")
        for w in cluster.of_kind(kind)
        for hook in w.get("webhooks") or []
        if "service" in hook.get("clientConfig", {})
    ]
    references += [
        (label(crd), dig(crd, "spec", "conversion", "webhook", "clientConfig", "service"))
        for crd in cluster.of_kind("CustomResourceDefinition")
        if dig(crd, "spec", "conversion", "strategy") == "Webhook"
    ]
    references += [
        (label(api), api["spec"]["service"]) for api in cluster.of_kind("APIService") if api["spec"].get("service")
    ]
    problems = []
    for caller, reference in references:
        service = cluster.service(reference["name"], reference["namespace"])
        if service is None:
            continue  # api_service_problems reports a missing Service
        for pod, port in cluster.endpoints(service, reference.get("port", 443)):
            if not cluster.ingress_from_address(pod, api_server, port):
                problems.append(f"NetworkPolicies keep the API server ({caller}) from {pod.owner}:{port}")
    return problems


def dns_and_mesh_problems(cluster: Cluster) -> list[str]:
    """Every pod may ask the cluster's DNS; every pod with an Istio proxy may reach istiod's xDS port."""
    istiod = [pod for pod in cluster.pods(release="istiod") if pod.labels.get("app") == "istiod"]
    problems = []
    if not istiod and any(meshed(cluster, pod) for pod in cluster.pods()):
        problems.append("pods are meshed but the render has no istiod pod")
    for pod in cluster.pods():
        if not cluster.network_admits(pod, KUBE_DNS, 53):
            problems.append(f"NetworkPolicies keep {pod.owner} from DNS")
        proxied = meshed(cluster, pod) or pod.labels.get("sidecar.istio.io/inject") == "true"
        if proxied and pod.labels.get(LWS_WORKER_INDEX, "0") == "0":
            problems += [
                f"NetworkPolicies keep {pod.owner}'s proxy from istiod"
                for server in istiod
                if not cluster.network_admits(pod, server, 15012)
            ]
    return problems


# --- Inference pools ------------------------------------------------------------------------------

EXT_PROC_PORT = 9002  # the picker's ext_proc gRPC port (the chart's Deployment)


def _pool_pods(cluster: Cluster, pool: dict[str, Any]) -> list[Pod]:
    namespace = pool["metadata"]["namespace"]
    return [p for p in cluster.pods() if p.namespace == namespace and selects(pool["spec"]["selector"], p.labels)]


def _pickers(cluster: Cluster, pool: dict[str, Any]) -> list[Pod]:
    ref = pool["spec"]["endpointPickerRef"]
    service = cluster.service(ref["name"], pool["metadata"]["namespace"])
    return [] if service is None else [pod for pod, _ in cluster.endpoints(service, ref["port"]["number"])]


def pool_problems(cluster: Cluster) -> list[str]:
    """Each InferencePool selects serving pods that declare its target ports, and names a picker
    Service that reaches picker pods; each HTTPRoute's pools are rendered in its namespace, its mirrors
    are Service ports that reach pods, and its parent Gateway admits it; that Gateway is bound to
    the gateway chart's Service on ports the Service exposes; istiod routes to pools."""
    pools = {(p["metadata"]["namespace"], p["metadata"]["name"]): p for p in cluster.of_kind("InferencePool")}
    problems = []
    for pool in pools.values():
        pods = _pool_pods(cluster, pool)
        if not pods:
            problems.append(f"{label(pool)} selects no pod")
        for pod in pods:
            missing = {t["number"] for t in pool["spec"]["targetPorts"]} - set(pod.ports.values())
            if missing:
                problems.append(f"{label(pool)}: {pod.owner} declares no port {sorted(missing)}")
        if not _pickers(cluster, pool):
            problems.append(f"{label(pool)}'s picker {pool['spec']['endpointPickerRef']['name']} reaches no pod")
    gateways = {
        (g["metadata"]["namespace"], g["metadata"]["name"]): g
        for g in cluster.of_kind("Gateway")
        if g["apiVersion"].startswith("gateway.networking.k8s.io/")
    }
    for route in cluster.of_kind("HTTPRoute"):
        problems += _route_problems(cluster, route, set(pools), gateways)
    for gateway in gateways.values():
        problems += _pools_gateway_problems(cluster, gateway)
    if pools:
        istiod = cluster.one("Deployment", release="istiod")
        containers = istiod["spec"]["template"]["spec"]["containers"]
        env = {e["name"]: e.get("value") for c in containers for e in c.get("env") or []}
        if env.get("ENABLE_GATEWAY_API_INFERENCE_EXTENSION") != "true":
            problems.append("InferencePools are rendered but istiod does not route to them")
    return problems


def _route_problems(
    cluster: Cluster,
    route: dict[str, Any],
    pools: set[tuple[str, str]],
    gateways: dict[tuple[str, str], dict[str, Any]],
) -> list[str]:
    namespace = route["metadata"]["namespace"]
    problems = []
    for rule in route["spec"]["rules"]:
        problems += [
            f"{label(route)} routes to InferencePool {backend['name']}, which is not rendered"
            for backend in rule.get("backendRefs") or []
            if backend.get("kind") == "InferencePool" and (namespace, backend["name"]) not in pools
        ]
        for mirror in [f["requestMirror"]["backendRef"] for f in rule.get("filters") or [] if "requestMirror" in f]:
            service = cluster.service(mirror["name"], namespace)
            if service is None or not cluster.endpoints(service, mirror["port"]):
                problems.append(f"{label(route)} mirrors to {mirror['name']}:{mirror['port']}, which reaches no pod")
    for parent in route["spec"]["parentRefs"]:
        gateway = gateways.get((parent["namespace"], parent["name"]))
        if gateway is None:
            problems.append(f"{label(route)}'s Gateway {parent['namespace']}/{parent['name']} is not rendered")
            continue
        labels = cluster.namespaces.get(namespace, {})
        listeners = gateway["spec"]["listeners"]
        if not any(selects(dig(x, "allowedRoutes", "namespaces", "selector"), labels) for x in listeners):
            problems.append(f"no listener of {label(gateway)} admits routes from {namespace}")
    return problems


def _pools_gateway_problems(cluster: Cluster, gateway: dict[str, Any]) -> list[str]:
    (address,) = gateway["spec"]["addresses"]
    name, namespace = address["value"].split(".")[:2]
    service = cluster.service(name, namespace)
    if address["type"] != "Hostname" or service is None:
        return [f"{label(gateway)} is bound to {address['value']}, which is no rendered Service"]
    exposed = {port["port"] for port in service["spec"]["ports"]}
    return [
        f"{label(gateway)}'s listener {x['name']} is on port {x['port']}, which {label(service)} does not expose"
        for x in gateway["spec"]["listeners"]
        if x["port"] not in exposed
    ]


def picker_reach_problems(cluster: Cluster) -> list[str]:
    """The gateway reaches each pool's picker on its ext_proc port and each pool's pods on their
    target ports, and nothing else reaches a picker; a picker reaches its own pool's pods on the
    merged-metrics port and no other port of any pod of the models' namespace."""
    gateway = gateway_pods(cluster) if cluster.of_kind("InferencePool") else []
    everyone = list(cluster.pods())
    problems = []
    for pool in cluster.of_kind("InferencePool"):
        pods, pickers = _pool_pods(cluster, pool), _pickers(cluster, pool)
        targets = [t["number"] for t in pool["spec"]["targetPorts"]]
        for source, picker, pod, port in product(gateway, pickers, pods, targets):
            if not cluster.network_admits(source, picker, EXT_PROC_PORT):
                problems.append(f"NetworkPolicies keep the gateway from {picker.owner}:{EXT_PROC_PORT}")
            if not cluster.network_admits(source, pod, port):
                problems.append(f"NetworkPolicies keep the gateway from {pod.owner}:{port} ({label(pool)})")
        for picker in pickers:
            for source in everyone:
                if source == picker:
                    continue
                allowed = {EXT_PROC_PORT} if source in gateway else set()
                problems += [
                    f"{source.owner} reaches {picker.owner}:{port}"
                    for port in sorted(set(picker.ports.values()) - allowed)
                    if cluster.network_admits(source, picker, port)
                ]
            for destination in [p for p in everyone if p.namespace == pool["metadata"]["namespace"]]:
                if destination == picker:
                    continue
                for port in sorted(set(destination.ports.values()) | {MERGED_METRICS_PORT, 15090}):
                    wanted = destination in pods and port == MERGED_METRICS_PORT
                    if cluster.network_admits(picker, destination, port) != wanted:
                        what = "cannot read" if wanted else "reaches"
                        problems.append(f"{picker.owner} {what} {destination.owner}:{port}")
    return problems


def route_weight_problems(cluster: Cluster) -> list[str]:
    """Every HTTPRoute rule that serves a model sends its live versions' pools the model's weights,
    and mirrors its shadows' shares to their Services, as the stack outputs say the model holds."""
    models = cluster.outputs.get("models") or {}
    problems = []
    for route in cluster.of_kind("HTTPRoute"):
        model = route["metadata"]["labels"]["app"]
        expected = models[model]
        for rule in route["spec"]["rules"]:
            if not rule.get("backendRefs"):
                continue  # the redirect of the bare prefix
            weights = {b["name"].removeprefix(f"{model}-"): b.get("weight", 1) for b in rule["backendRefs"]}
            mirrors = {
                f["requestMirror"]["backendRef"]["name"].removeprefix(f"{model}-"): mirror_percent(f["requestMirror"])
                for f in rule.get("filters") or []
                if f["type"] == "RequestMirror"
            }
            if weights != expected["weights"]:
                problems.append(f"{label(route)} rule {rule.get('name')}: weights {weights}, not {expected['weights']}")
            if mirrors != {v: Fraction(str(p)) for v, p in (expected.get("mirrors") or {}).items()}:
                problems.append(f"{label(route)} rule {rule.get('name')}: mirrors {mirrors}, not {expected['mirrors']}")
    return problems


def mirror_percent(mirror: dict[str, Any]) -> Fraction:
    """A RequestMirror's share in percent as Istio reads it: `percent`, or 100 x numerator / denominator."""
    if "percent" in mirror:
        return Fraction(mirror["percent"])
    return Fraction(100 * mirror["fraction"]["numerator"], mirror["fraction"].get("denominator", 100))
