"""Inference pools (routing: inference-pool): the HTTPRoutes and the Gateway they attach to, the
pickers' config against the pinned picker's own source and chart, istiod's switch, and the bad input
reported at its stack-file line.

The picker's flags are read from its options.go and its scorers from its documented plugin types
(../shared/inference-extension/v1.4.0); its Deployment is the pinned chart's own render (real Helm).
No gateway, istiod or picker runs here.
"""

from __future__ import annotations

import re
import subprocess
from fractions import Fraction
from pathlib import Path
from typing import Any

import pytest
import yaml

from inference_platform import pins
from inference_platform.cli.helm import find_helm
from inference_platform.cli.main import main
from inference_platform.cli.render_files import read_chart_objects, read_render
from inference_platform.platform.ingress_gateway import INFERENCE_EXTENSION_ENV, istiod_values
from inference_platform.serving.inference_pool import (
    DATA_LAYER_GATE,
    DEFAULT_SCORERS,
    PLUGINS_FILE,
    SCORERS,
    InferencePoolSpec,
    chart_values,
    picker_config,
)
from tests.conftest import RUNTIME_MINIMUMS, charts_dir, manifests_dir, shared_path, write_stack_file
from tests.stacks.cluster_checks import mirror_percent

PICKER = "inference-extension/v1.4.0"
GPU = {"mode": "exclusive", "count": 1}


def version(name: str, **extra: Any) -> dict[str, Any]:
    return {"name": name, "modelUri": f"pvc://models/x/{name}"} | extra


def llm(name: str, runtime: str = "vllm", **extra: Any) -> dict[str, Any]:
    return {
        "name": name,
        "runtime": runtime,
        "gpu": GPU,
        "routing": "inference-pool",
        "versions": [version("v1", weight=100)],
    } | extra


def stack(models: list[dict[str, Any]], **platform: Any) -> dict[str, Any]:
    return {
        "inference-platform:domain": "models.example.com",
        "inference-platform:namespace": "llm",
        "inference-platform:platform": {"kubernetesVersion": "1.30.4"} | platform,
        "inference-platform:models": models,
    }


def render(tmp_path: Path, config: dict[str, Any], *, charts: bool = False) -> Path:
    stack_file = write_stack_file(tmp_path / "Pulumi.t.yaml", config)
    out = tmp_path / "out"
    arguments = ["render", "--stack", "t", "--config", str(stack_file), "--out", str(out)]
    if charts:
        arguments += ["--charts-dir", str(charts_dir()), "--manifests-dir", str(manifests_dir())]
    assert main(arguments) == 0
    return out


def of_kind(objects: list[dict[str, Any]], kind: str) -> dict[str, dict[str, Any]]:
    return {o["metadata"]["name"]: o for o in objects if o["kind"] == kind}


CANARY = llm(
    "chat",
    versions=[version("v1", weight=80), version("v2", weight=20), version("v3", mirrorPercent=12.5)],
)


@pytest.fixture(scope="module")
def plain_http(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A canary and a fractional shadow on pools, beside a model on its VirtualService, over HTTP."""
    iris = RUNTIME_MINIMUMS["mlserver"] | {"name": "iris", "versions": [version("v1", weight=100)]}
    return render(tmp_path_factory.mktemp("http"), stack([CANARY, iris]))


# --- the routes ---------------------------------------------------------------------------------


def test_a_pool_model_has_httproutes_in_place_of_its_gateway_virtual_service(plain_http: Path) -> None:
    manifests, _, outputs = read_render(plain_http)
    routes = of_kind(manifests, "HTTPRoute")
    assert sorted(routes) == ["chat", "chat-by-path"]
    services = of_kind(manifests, "VirtualService")
    # The model on pools keeps only its in-mesh route; iris keeps both.
    assert sorted(services) == ["chat-mesh", "iris", "iris-mesh"]
    assert outputs["models"]["chat"]["urls"] == [
        "http://chat.models.example.com/",
        "http://models.example.com/models/chat/",
    ]


def test_backends_and_mirrors_are_the_models_weights_and_mirrors(plain_http: Path) -> None:
    manifests, _, outputs = read_render(plain_http)
    weights, mirrors = outputs["models"]["chat"]["weights"], outputs["models"]["chat"]["mirrors"]
    for route in of_kind(manifests, "HTTPRoute").values():
        (rule, *_) = route["spec"]["rules"]
        assert {b["name"]: b["weight"] for b in rule["backendRefs"]} == {f"chat-{v}": w for v, w in weights.items()}
        assert {b["kind"] for b in rule["backendRefs"]} == {"InferencePool"}
        mirrored = {
            f["requestMirror"]["backendRef"]["name"]: mirror_percent(f["requestMirror"])
            for f in rule.get("filters", [])
            if f["type"] == "RequestMirror"
        }
        assert mirrored == {f"chat-{v}": Fraction(str(p)) for v, p in mirrors.items()}
        assert rule["timeouts"] == {"request": "60s"}


def test_the_shared_host_route_rewrites_its_prefix_and_redirects_the_bare_one(plain_http: Path) -> None:
    manifests, _, _ = read_render(plain_http)
    by_path = of_kind(manifests, "HTTPRoute")["chat-by-path"]["spec"]
    assert by_path["hostnames"] == ["models.example.com"]
    served, slash = by_path["rules"]
    assert served["matches"] == [{"path": {"type": "PathPrefix", "value": "/models/chat/"}}]
    assert served["filters"][0]["urlRewrite"]["path"] == {"type": "ReplacePrefixMatch", "replacePrefixMatch": "/"}
    assert slash["matches"] == [{"path": {"type": "Exact", "value": "/models/chat"}}]
    assert slash["filters"][0]["requestRedirect"]["statusCode"] == 308
    by_host = of_kind(manifests, "HTTPRoute")["chat"]["spec"]
    assert by_host["hostnames"] == ["chat.models.example.com"]


def test_the_gateway_for_pools_is_istios_bound_to_the_gateway_pods_on_port_80(plain_http: Path) -> None:
    manifests, _, _ = read_render(plain_http)
    gateways = {(g["apiVersion"], g["metadata"]["name"]): g for g in manifests if g["kind"] == "Gateway"}
    api = gateways["gateway.networking.k8s.io/v1", "inference-gateway-pools"]["spec"]
    assert api["gatewayClassName"] == "istio"
    assert api["addresses"] == [{"type": "Hostname", "value": "istio-ingressgateway.istio-ingress.svc.cluster.local"}]
    (listener,) = api["listeners"]
    assert (listener["port"], listener["protocol"]) == (80, "HTTP")
    assert listener["allowedRoutes"]["namespaces"]["selector"]["matchExpressions"][0]["values"] == ["llm"]
    for route in of_kind(manifests, "HTTPRoute").values():
        (parent,) = route["spec"]["parentRefs"]
        assert (parent["namespace"], parent["name"]) == ("istio-ingress", "inference-gateway-pools")


def test_over_tls_each_pool_model_has_a_listener_of_its_own_host_and_no_shared_host_route(tmp_path: Path) -> None:
    out = render(tmp_path, stack([CANARY, llm("code")], ingress={"tls": {"secretName": "models-tls"}}))
    manifests, _, outputs = read_render(out)
    (api,) = [g for g in manifests if g["apiVersion"] == "gateway.networking.k8s.io/v1" and g["kind"] == "Gateway"]
    listeners = api["spec"]["listeners"]
    # httpsRedirect (the default): the Istio Gateway answers port 80 for every host with a redirect.
    assert [(x["hostname"], x["port"], x["tls"]["certificateRefs"][0]["name"]) for x in listeners] == [
        ("chat.models.example.com", 443, "models-tls"),
        ("code.models.example.com", 443, "models-tls"),
    ]
    assert sorted(of_kind(manifests, "HTTPRoute")) == ["chat", "code"]
    assert outputs["models"]["chat"]["urls"] == ["https://chat.models.example.com/"]


def test_without_pool_models_nothing_changes_in_istio(tmp_path: Path) -> None:
    out = render(
        tmp_path, stack([RUNTIME_MINIMUMS["mlserver"] | {"name": "iris", "versions": [version("v1", weight=100)]}])
    )
    manifests, charts, _ = read_render(out)
    assert not [m for m in manifests if m["kind"] in ("HTTPRoute", "InferencePool")]
    assert [c["name"] for c in charts if c["kind"] == "yaml.v2.ConfigFile"] == []
    istiod = next(c for c in charts if c["name"] == "istiod")
    assert INFERENCE_EXTENSION_ENV not in istiod["values"]["env"]


def test_istiod_routes_to_pools_and_the_pinned_crds_are_applied(plain_http: Path) -> None:
    _, charts, _ = read_render(plain_http)
    istiod = next(c for c in charts if c["name"] == "istiod")
    assert istiod["values"]["env"][INFERENCE_EXTENSION_ENV] == "true"
    files = {c["name"]: c["file"] for c in charts if c["kind"] == "yaml.v2.ConfigFile"}
    assert set(files.values()) == {pins.GATEWAY_API_CRDS.url, pins.INFERENCE_EXTENSION_CRDS.url}
    pools = [c for c in charts if c.get("chart") == pins.INFERENCE_POOL.reference]
    assert sorted(c["name"] for c in pools) == ["chat-v1", "chat-v2", "chat-v3"]


def test_istiods_own_chart_renders_the_switch_into_its_container(tmp_path: Path) -> None:
    """The value goes where the pinned istiod chart puts it: the discovery container's env."""
    objects = helm_template(pins.ISTIOD, "istiod", "istio-system", istiod_values(inference_extension=True), tmp_path)
    (deployment,) = [d for d in objects if d["kind"] == "Deployment"]
    (discovery,) = deployment["spec"]["template"]["spec"]["containers"]
    assert {"name": INFERENCE_EXTENSION_ENV, "value": "true"} in discovery["env"]


def helm_template(
    pin: pins.ChartPin, release: str, namespace: str, values: dict[str, Any], tmp_path: Path
) -> list[dict[str, Any]]:
    """The pinned chart's objects as real Helm renders them with `values`."""
    path = tmp_path / f"{release}-values.yaml"
    path.write_text(yaml.safe_dump(values))
    tarball = charts_dir() / f"{pin.chart}-{pin.version}.tgz"
    command = [str(find_helm()), "template", release, str(tarball), "-n", namespace, "-f", str(path)]
    text = subprocess.run(command, capture_output=True, text=True, check=True).stdout
    return [d for d in yaml.safe_load_all(text) if d]


# --- the pickers, against the pinned picker's source and chart ----------------------------------


def options_flags() -> set[str]:
    """Every flag the pinned picker defines (fs.XxxVar(&opts.Field, "name", ...) in options.go)."""
    text = (shared_path(PICKER) / "options.go").read_text()
    return set(re.findall(r'fs\.\w+Var[P]?\(&opts\.\w+,\s*"([a-z-]+)"', text))


def deprecated_metric_flags() -> set[str]:
    """The metric flags the pinned picker refuses to be given (its Validate)."""
    text = (shared_path(PICKER) / "options.go").read_text()
    block = text.split("deprecatedMetricFlags := []string{")[1].split("}")[0]
    return set(re.findall(r'"([a-z-]+)"', block))


def documented_plugin_types() -> set[str]:
    text = (shared_path(PICKER) / "config-text.md").read_text()
    return set(re.findall(r"\*Type\*: ([a-z-]+)", text))


def test_every_flag_the_program_sets_is_the_pickers() -> None:
    flags = chart_values(InferencePoolSpec(), "vllm", {"app": "x"}, 8000)["inferenceExtension"]["flags"]
    assert set(flags) <= options_flags()
    assert not set(flags) & deprecated_metric_flags()


def test_every_scorer_the_setting_offers_is_a_plugin_type_of_the_picker() -> None:
    # The four the issue names: prefix cache, queue, KV-cache utilisation, LoRA affinity.
    assert len(SCORERS) == 4
    assert set(SCORERS) <= documented_plugin_types()


def test_the_data_layer_gate_is_the_pickers_and_is_what_its_error_prescribes() -> None:
    text = (shared_path(PICKER) / "config-text.md").read_text()
    assert f"- `{DATA_LAYER_GATE}`" in text
    assert (
        "configure metrics via engineConfigs in EndpointPickerConfig"
        in (shared_path(PICKER) / "options.go").read_text()
    )


def test_the_default_scorers_are_the_charts_default_profile() -> None:
    """The chart's default-plugins.yaml, as upstream's _config.yaml writes it, is our default config."""
    text = (shared_path(PICKER) / "chart-default-plugins-configmap.yaml").read_text()
    profile = re.search(r"- name: default\n      plugins:\n((?:      - pluginRef: .*\n        weight: .*\n)+)", text)
    assert profile is not None
    upstream = re.findall(r"pluginRef: ([a-z-]+)\n\s+weight: ([0-9]+)", profile.group(1))
    ours = picker_config(InferencePoolSpec(), "vllm")["schedulingProfiles"][0]["plugins"]
    assert [(p["pluginRef"], str(p["weight"])) for p in ours] == upstream
    assert [s.type for s in DEFAULT_SCORERS] == [name for name, _ in upstream]


def pool_template(values: dict[str, Any], tmp_path: Path) -> list[dict[str, Any]]:
    return helm_template(pins.INFERENCE_POOL, "chat-v1", "llm", values, tmp_path)


def picker_args(objects: list[dict[str, Any]]) -> list[str]:
    (deployment,) = [o for o in objects if o["kind"] == "Deployment"]
    (container,) = deployment["spec"]["template"]["spec"]["containers"]
    return [str(a) for a in container["args"]]


def given_flags(arguments: list[str]) -> set[str]:
    return {a[2:].split("=")[0] for a in arguments if a.startswith("--")}


@pytest.mark.parametrize("engine", ["vllm", "sglang"])
def test_the_charts_picker_gets_only_flags_the_picker_accepts(engine: Any, tmp_path: Path) -> None:
    objects = pool_template(chart_values(InferencePoolSpec(), engine, {"app": "x"}, 8000), tmp_path)
    given = given_flags(picker_args(objects))
    # zap's flags are controller-runtime's (BindFlags), not options.go's.
    assert given - {"zap-encoder"} <= options_flags()
    assert not given & deprecated_metric_flags()
    (config_map,) = [o for o in objects if o["kind"] == "ConfigMap"]
    assert yaml.safe_load(config_map["data"][PLUGINS_FILE]) == picker_config(InferencePoolSpec(), engine)
    assert f"/config/{PLUGINS_FILE}" in picker_args(objects)


def test_the_charts_own_sglang_type_would_give_the_picker_flags_it_refuses(tmp_path: Path) -> None:
    """Why an SGLang pool is the chart's vllm type with SGLang's gauges in the config's data layer:
    the chart's sglang type sets metric flags that the v1.4.0 picker refuses at start."""
    values = chart_values(InferencePoolSpec(), "sglang", {"app": "x"}, 30000)
    values["inferencePool"]["modelServerType"] = "sglang"
    assert given_flags(picker_args(pool_template(values, tmp_path))) & deprecated_metric_flags()


def test_sglangs_picker_reads_its_gauges_through_the_data_layer() -> None:
    config = picker_config(InferencePoolSpec(), "sglang")
    assert config["featureGates"] == [DATA_LAYER_GATE]
    (extractor,) = [p for p in config["plugins"] if "parameters" in p]
    assert extractor["parameters"] == {"defaultEngine": "sglang"}
    assert "featureGates" not in picker_config(InferencePoolSpec(), "vllm")


def test_each_version_has_a_pool_of_its_serving_pods_and_a_hardened_picker_outside_the_mesh(tmp_path: Path) -> None:
    out = render(tmp_path, stack([CANARY]), charts=True)
    charts = read_chart_objects(out)
    for name in ("v1", "v2", "v3"):
        objects = charts[f"chat-{name}"]
        (pool,) = [o for o in objects if o["kind"] == "InferencePool"]
        assert pool["spec"]["selector"]["matchLabels"] == {"app": "chat", "version": name}
        assert pool["spec"]["targetPorts"] == [{"number": 8000}]
        assert pool["spec"]["endpointPickerRef"]["name"] == f"chat-{name}-epp"
        (deployment,) = [o for o in objects if o["kind"] == "Deployment"]
        template = deployment["spec"]["template"]
        assert template["metadata"]["labels"]["sidecar.istio.io/inject"] == "false"
        assert template["spec"]["securityContext"]["runAsNonRoot"] is True
        (container,) = template["spec"]["containers"]
        assert container["securityContext"]["readOnlyRootFilesystem"] is True
        assert container["resources"]["limits"] == {"cpu": "2", "memory": "4Gi"}
        arguments = picker_args(objects)
        assert arguments[arguments.index("--model-server-metrics-port") + 1] == "15020"


# --- bad input ----------------------------------------------------------------------------------


def problems(config: dict[str, Any], tmp_path: Path, capsys: Any) -> list[str]:
    stack_file = write_stack_file(tmp_path / "Pulumi.t.yaml", config)
    assert main(["render", "--stack", "t", "--config", str(stack_file), "--out", str(tmp_path / "out")]) == 2
    assert not (tmp_path / "out").exists()  # nothing written
    return [line for line in capsys.readouterr().err.splitlines() if "Pulumi.t.yaml:" in line]


def test_bad_routing_is_reported_at_its_lines_all_at_once(tmp_path: Path, capsys: Any) -> None:
    iris = RUNTIME_MINIMUMS["mlserver"] | {"name": "iris", "versions": [version("v1", weight=100)]}
    models = [
        iris | {"routing": "inference-pool"},
        llm("typo", inferencePool={"scorers": [{"type": "prefix-cache"}]}),
        llm("lora-sg", "sglang", inferencePool={"scorers": [{"type": "lora-affinity-scorer"}]}),
        llm("twice", inferencePool={"scorers": [{"type": "queue-scorer"}, {"type": "queue-scorer"}]}),
        llm("vs") | {"routing": "virtual-service", "inferencePool": {"replicas": 2}},
        llm("own-engine", inferencePool={"engine": "sglang"}),
        llm("a-model-name-long-enough", versions=[version("and-a-long-version", weight=100)]),
        RUNTIME_MINIMUMS["custom"]
        | {"name": "image", "routing": "inference-pool", "versions": [version("v1", weight=100)]},
        llm("triton", "triton-llm", engine="e", tokenizer="t"),
    ]
    pipeline = {
        "name": "flow",
        "routing": "inference-pool",
        "nodes": {"root": {"routerType": "Sequence", "steps": [{"model": "iris"}]}},
    }
    found = problems(stack(models) | {"inference-platform:pipelines": [pipeline]}, tmp_path, capsys)
    expected = [
        ("models[0] (iris).routing", "mlserver publishes none it knows"),
        ("models[1] (typo).inferencePool.scorers[0].type", "'prefix-cache-scorer'"),
        ("models[2] (lora-sg).inferencePool.scorers[0].type", "sglang publishes none"),
        ("models[3] (twice).inferencePool.scorers[1].type", "queue-scorer"),
        ("models[4] (vs).inferencePool", "only with routing: inference-pool"),
        ("models[5] (own-engine).inferencePool.engine", "vllm publishes vllm's metrics"),
        ("models[6] (a-model-name-long-enough).versions[0] (and-a-long-version).name", "first 40"),
        ("models[7] (image).metrics", "engine's gauges"),
        ("models[7] (image).routing", "set inferencePool.engine"),
        ("models[8] (triton).routing", "triton-llm publishes none it knows"),
        ("pipelines[0] (flow).routing", "a pipeline's router has no queue or KV cache"),
    ]
    for where, text in expected:
        assert any(f"{where}: " in line and text in line for line in found), (where, found)
    assert len(found) == len(expected), found
    assert all(line.split("Pulumi.t.yaml:")[1].split(":")[0].isdigit() for line in found)


def test_what_a_pool_cannot_have_is_refused_with_why(tmp_path: Path, capsys: Any) -> None:
    sleepy = llm("sleepy", autoscaling={"minReplicas": 0, "maxReplicas": 2, "requestsPerSecond": 1})
    custom = RUNTIME_MINIMUMS["custom"] | {
        "name": "image",
        "routing": "inference-pool",
        "inferencePool": {"engine": "vllm"},
        "versions": [version("v1", weight=100)],
    }
    custom.pop("metrics", None)
    found = problems(stack([sleepy, custom], autoscaler="keda"), tmp_path, capsys)
    assert any(
        "models[0] (sleepy).autoscaling.minReplicas: " in line and "no pod for the picker" in line for line in found
    )
    assert any("models[1] (image).metrics: " in line and "engine's gauges" in line for line in found)


def test_pools_need_the_platforms_istio(tmp_path: Path, capsys: Any) -> None:
    (line,) = problems(stack([llm("chat")], ingress={"enabled": False}), tmp_path, capsys)
    assert "models[0] (chat).routing: " in line
    assert "platform.ingress.enabled" in line
