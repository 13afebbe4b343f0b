"""HAMi's Ascend side through the real program: the HAMi values a stack with an NPU model gets (and
what the pinned chart makes of them, through real Helm), and the Ascend device plugin the platform
installs, checked against Project-HAMi/ascend-device-plugin's own manifest in ../shared/ascend
(read from the file, never retyped). No Ascend device or device plugin runs here: these are the
objects a cluster would get, compared with upstream's."""

from __future__ import annotations

import http.server
import json
import subprocess
import threading
import time
from pathlib import Path
from typing import Any

import pytest
import yaml

from inference_platform import pins
from inference_platform.cli.helm import find_helm
from inference_platform.cli.render import Registration, RenderResult, run_program
from inference_platform.cli.render_files import chart_documents
from inference_platform.cli.stack_file import read_stack_file
from inference_platform.platform import ascend, ascend_device_plugin
from inference_platform.platform.hami import RELEASE as HAMI_RELEASE
from inference_platform.platform.prometheus import scrape_configs
from tests.conftest import RUNTIME_MINIMUMS, base_config, charts_dir, shared_path, write_stack_file
from tests.platform.prometheus_harness import config_file, prometheus, write_targets

NPU_NODES = {
    "nodeSelector": {"ascend": "on", "node.example.com/pool": "npu"},
    "tolerations": [{"key": "huawei.com/Ascend910B3", "operator": "Exists", "effect": "NoSchedule"}],
    "runtimeClassName": "ascend",
    "softSlicing": True,
}


def npu_model(name: str, npu: Any, **extra: Any) -> dict[str, Any]:
    return (
        RUNTIME_MINIMUMS["custom"]
        | {"name": name, "versions": [{"name": "v1", "modelUri": "pvc://m/x", "weight": 100}], "npu": npu}
        | extra
    )


def npu_config(npu_nodes: dict[str, Any] | None = None, namespace: str | None = None) -> dict[str, Any]:
    config = base_config()
    hami: dict[str, Any] = {"enabled": True} | ({"namespace": namespace} if namespace else {})
    config["inference-platform:platform"] = {"kubernetesVersion": "1.30.4", "hami": hami} | (
        {"npuNodes": npu_nodes} if npu_nodes is not None else {}
    )
    soft = {"type": "Ascend910B3", "mode": "vnpu", "slicing": "soft", "memoryMib": 16384, "cores": 25}
    config["inference-platform:models"].append(npu_model("pangu", soft))
    return config


def render(tmp_path: Path, config: dict[str, Any]) -> RenderResult:
    return run_program("npu", read_stack_file(write_stack_file(tmp_path / "Pulumi.npu.yaml", config)))


@pytest.fixture(scope="module")
def rendered(tmp_path_factory: pytest.TempPathFactory) -> RenderResult:
    return render(tmp_path_factory.mktemp("npu"), npu_config(NPU_NODES))


def hami_values(result: RenderResult) -> dict[str, Any]:
    (hami,) = [c for c in chart_documents(result) if c["name"] == HAMI_RELEASE]
    values: dict[str, Any] = hami["values"]
    return values


def objects(result: RenderResult, kind: str) -> list[dict[str, Any]]:
    return [r.inputs for r in result.manifests if r.inputs["kind"] == kind]


def plugin_objects(result: RenderResult) -> list[Registration]:
    owners = result.component_labels()
    return [r for r in result.manifests if owners[r.urn].startswith("inference-platform:platform:AscendDevicePlugin::")]


def the(result: RenderResult, kind: str) -> dict[str, Any]:
    (found,) = [r.inputs for r in plugin_objects(result) if r.inputs["kind"] == kind]
    return found


@pytest.fixture(scope="module")
def upstream() -> dict[str, dict[str, Any]]:
    """Upstream's manifest (ascend-device-plugin v1.4.0), by kind."""
    documents = [d for d in yaml.safe_load_all(shared_path("ascend/ascend-device-plugin.yaml").read_text()) if d]
    return {d["kind"]: d for d in documents}


# --- HAMi's Ascend side ------------------------------------------------------------------------


def test_an_npu_model_turns_on_hamis_ascend_side_from_the_npu_nodes(rendered: RenderResult) -> None:
    """The NPU nodes' selector and tolerations reach the plugin's own DaemonSet (below), not HAMi's
    chart, whose templates read neither (tests/stacks/test_chart_values.py)."""
    assert hami_values(rendered)["devices"] == {
        "ascend": {"enabled": True, "runtimeClassName": "ascend", "hamiVnpuCore": True}
    }


def test_without_npu_models_hami_gets_no_ascend_values(tmp_path: Path) -> None:
    config = npu_config(NPU_NODES)
    config["inference-platform:models"].pop()
    result = render(tmp_path, config)
    assert "devices" not in hami_values(result)
    assert plugin_objects(result) == []


@pytest.fixture(scope="module")
def hami_chart(rendered: RenderResult, tmp_path_factory: pytest.TempPathFactory) -> list[dict[str, Any]]:
    """The pinned HAMi chart rendered by real Helm with the values the program registered."""
    values = tmp_path_factory.mktemp("hami-values") / "values.json"
    values.write_text(json.dumps(hami_values(rendered)))
    tarball = charts_dir() / f"{pins.HAMI.chart}-{pins.HAMI.version}.tgz"
    out = subprocess.run(
        [
            str(find_helm()),
            "template",
            HAMI_RELEASE,
            str(tarball),
            "--namespace",
            "hami-system",
            "--values",
            str(values),
            "--kube-version",
            "1.30.4",
        ],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    return [o for o in yaml.safe_load_all(out) if o]


def test_hamis_scheduler_schedules_ascend_and_its_device_config_is_the_one_the_plugin_mounts(
    hami_chart: list[dict[str, Any]], rendered: RenderResult
) -> None:
    (scheduler,) = [o for o in hami_chart if o["kind"] == "Deployment" and o["metadata"]["name"].endswith("scheduler")]
    args = [
        a for c in scheduler["spec"]["template"]["spec"]["containers"] for a in c.get("command", []) + c.get("args", [])
    ]
    assert "--enable-ascend=true" in args

    (device_config,) = [
        o
        for o in hami_chart
        if o["kind"] == "ConfigMap" and o["metadata"]["name"] == ascend_device_plugin.DEVICE_CONFIG_MAP
    ]
    assert device_config["metadata"]["namespace"] == "hami-system"
    vnpus = yaml.safe_load(device_config["data"]["device-config.yaml"])["vnpus"]
    assert vnpus["hamiVnpuCore"] is True
    assert {c["runtimeClassName"] for c in vnpus["configs"]} == {"ascend"}

    # The plugin runs beside it, in HAMi's namespace, and mounts that very ConfigMap.
    daemon_set = the(rendered, "DaemonSet")
    assert daemon_set["metadata"]["namespace"] == "hami-system"
    config_maps = {
        v["name"]: v["configMap"]["name"] for v in daemon_set["spec"]["template"]["spec"]["volumes"] if "configMap" in v
    }
    assert config_maps["ascend-config"] == device_config["metadata"]["name"]


def test_hamis_ascend_side_is_template_slicing_unless_soft_slicing_is_on(tmp_path: Path) -> None:
    config = npu_config({})
    config["inference-platform:models"][-1]["npu"] = {"type": "Ascend910B3", "mode": "vnpu", "memoryMib": 16384}
    ascend_values = hami_values(render(tmp_path, config))["devices"]["ascend"]
    assert ascend_values == {
        "enabled": True,
        "runtimeClassName": ascend.RUNTIME_CLASS,
        "hamiVnpuCore": False,
    }


# --- the plugin, against upstream's manifest ---------------------------------------------------


def test_the_daemon_set_runs_upstreams_container_on_the_npu_nodes(
    rendered: RenderResult, upstream: dict[str, dict[str, Any]]
) -> None:
    ours, theirs = the(rendered, "DaemonSet"), upstream["DaemonSet"]
    assert ours["metadata"]["name"] == theirs["metadata"]["name"]
    assert ours["spec"]["selector"] == theirs["spec"]["selector"]
    assert ours["spec"]["template"]["metadata"]["labels"] == theirs["spec"]["template"]["metadata"]["labels"]
    pod, their_pod = ours["spec"]["template"]["spec"], theirs["spec"]["template"]["spec"]
    for key in ("priorityClassName", "serviceAccountName", "volumes"):
        assert pod[key] == their_pod[key], key
    (container,), (their_container,) = pod["containers"], their_pod["containers"]
    for key in ("name", "args", "ports", "securityContext", "volumeMounts", "env", "resources"):
        assert container[key] == their_container[key], key
    # The pinned image is upstream's, with its registry written out as every pin's is.
    assert container["image"] == pins.ASCEND_DEVICE_PLUGIN_IMAGE == f"docker.io/{their_container['image']}"
    # On the NPU nodes: upstream's node label (HAMi's) is among them, and their taints tolerated.
    assert their_pod["nodeSelector"] == ascend.NODE_LABEL
    assert pod["nodeSelector"] == NPU_NODES["nodeSelector"]
    assert pod["tolerations"] == NPU_NODES["tolerations"]


def test_its_service_account_and_cluster_role_are_upstreams(
    rendered: RenderResult, upstream: dict[str, dict[str, Any]]
) -> None:
    assert the(rendered, "ClusterRole")["rules"] == upstream["ClusterRole"]["rules"]
    assert the(rendered, "ClusterRole")["metadata"]["name"] == upstream["ClusterRole"]["metadata"]["name"]
    binding, theirs = the(rendered, "ClusterRoleBinding"), upstream["ClusterRoleBinding"]
    assert binding["roleRef"] == theirs["roleRef"]
    # The same account, in HAMi's namespace rather than kube-system.
    assert binding["subjects"] == [s | {"namespace": "hami-system"} for s in theirs["subjects"]]
    account = the(rendered, "ServiceAccount")
    assert account["metadata"] | {"namespace": "kube-system"} == upstream["ServiceAccount"]["metadata"]


def test_the_node_config_it_mounts_exists_and_overrides_no_node(rendered: RenderResult) -> None:
    """The kubelet starts no pod whose ConfigMap volume is missing; upstream's example lists one node."""
    example = yaml.safe_load(shared_path("ascend/ascend-device-node-configmap.yaml").read_text())
    ours = the(rendered, "ConfigMap")
    assert ours["metadata"]["name"] == example["metadata"]["name"] == ascend_device_plugin.NODE_CONFIG_MAP
    assert ours["metadata"]["namespace"] == "hami-system"
    assert set(ours["data"]) == set(example["data"])
    assert yaml.safe_load(ours["data"]["node-config.yaml"]) == {"nodes": []}
    assert set(yaml.safe_load(example["data"]["node-config.yaml"])) == {"nodes"}


def test_the_runtime_class_is_ascend_docker_runtimes(rendered: RenderResult) -> None:
    """Built from the facts: upstream's file repeats its handler key (every copy says the same)."""
    text = shared_path("ascend/ascend-runtimeclass.yaml").read_text()
    handlers = {line.split(":", 1)[1].strip() for line in text.splitlines() if line.startswith("handler:")}
    theirs = yaml.safe_load(text)
    ours = the(rendered, "RuntimeClass")
    assert (ours["apiVersion"], ours["metadata"]["name"], {ours["handler"]}) == (
        theirs["apiVersion"],
        theirs["metadata"]["name"],
        handlers,
    )


def test_npu_pods_name_the_runtime_class_the_platform_installs(tmp_path: Path) -> None:
    config = npu_config(NPU_NODES | {"runtimeClassName": "ascend-npu"})
    result = render(tmp_path, config)
    (runtime_class,) = objects(result, "RuntimeClass")
    assert runtime_class["metadata"]["name"] == "ascend-npu"
    assert runtime_class["handler"] == ascend.RUNTIME_CLASS
    pods = [
        d["spec"]["template"]["spec"]
        for d in objects(result, "Deployment")
        if d["metadata"]["name"].startswith("pangu")
    ]
    assert pods
    assert {p["runtimeClassName"] for p in pods} == {"ascend-npu"}


def test_the_plugin_waits_for_hami(rendered: RenderResult) -> None:
    owners = rendered.component_labels()
    (release,) = [r for r in rendered.charts if owners[r.urn] == "inference-platform:platform:Hami::hami"]
    for registration in plugin_objects(rendered):
        assert release.urn in registration.dependencies, registration.name


def test_its_metrics_are_scraped_only_where_its_exporter_runs(tmp_path: Path, rendered: RenderResult) -> None:
    annotations = the(rendered, "DaemonSet")["spec"]["template"]["metadata"]["annotations"]
    assert annotations == {
        "prometheus.io/scrape": "true",
        "prometheus.io/port": "9395",
        "prometheus.io/path": "/metrics",
    }
    template = render(tmp_path, npu_config(NPU_NODES | {"softSlicing": False}))
    (daemon_set,) = objects(template, "DaemonSet")
    assert "annotations" not in daemon_set["spec"]["template"]["metadata"]


# One container's line as the plugin's collector writes it (internal/monitor/collector.go's labels).
PLUGIN_SERIES = (
    'hami_container_device_utilization_ratio{namespace="service",pod="pangu-v1-7d9f",container="server",'
    'vdevice_index="0",device_uuid="ascend-0"} 40\n'
)


class _PluginExporter(http.server.BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        self.send_response(200 if self.path == "/metrics" else 404)
        self.send_header("Content-Type", "text/plain; version=0.0.4")
        self.end_headers()
        self.wfile.write(PLUGIN_SERIES.encode() if self.path == "/metrics" else b"")

    def log_message(self, *args: Any) -> None:
        pass


@pytest.mark.slow
def test_prometheus_scrapes_the_plugin_pod_and_keeps_the_containers_own_pod(
    tmp_path: Path, rendered: RenderResult
) -> None:
    """The generated scrape jobs under a real Prometheus, the target being the plugin's pod as
    discovery reports it (its template's labels and annotations): the series names the model's pod."""
    address = "127.0.0.29"  # the annotation fixes the port; a loopback address of its own keeps it free
    try:
        server = http.server.ThreadingHTTPServer((address, ascend_device_plugin.MONITOR_PORT), _PluginExporter)
    except OSError as error:
        pytest.skip(f"{address}:{ascend_device_plugin.MONITOR_PORT} is not free here: {error}")
    threading.Thread(target=server.serve_forever, daemon=True).start()
    template = the(rendered, "DaemonSet")["spec"]["template"]["metadata"]
    target = {
        "__address__": f"{address}:1",
        "__meta_kubernetes_namespace": "hami-system",
        "__meta_kubernetes_pod_name": "hami-ascend-device-plugin-x2v9k",
        "__meta_kubernetes_pod_phase": "Running",
    }
    sanitize = str.maketrans("./-", "___")
    target |= {f"__meta_kubernetes_pod_label_{k.translate(sanitize)}": v for k, v in template["labels"].items()}
    target |= {
        f"__meta_kubernetes_pod_annotation_{k.translate(sanitize)}": v for k, v in template["annotations"].items()
    }
    write_targets(tmp_path, "kubernetes-pods", [target])
    write_targets(tmp_path, "kubernetes-service-endpoints", [])
    try:
        with prometheus(tmp_path, config_file(tmp_path, scrape_configs())) as running:
            deadline = time.monotonic() + 30
            while not (found := running.query("hami_container_device_utilization_ratio")):
                assert time.monotonic() < deadline, running.api("targets")
                time.sleep(0.3)
    finally:
        server.shutdown()
        server.server_close()
    (series,) = found
    labels = series["metric"]
    assert (labels["namespace"], labels["pod"], labels["container"]) == ("service", "pangu-v1-7d9f", "server")
    assert labels["app_kubernetes_io_component"] == ascend_device_plugin.NAME
    assert not [name for name in labels if name.startswith("exported_")]


def test_each_check_the_privileged_daemon_set_skips_carries_its_reason(rendered: RenderResult) -> None:
    """checkov reads `checkov.io/skip<n>: <check>=<reason>` and splits on "="."""
    annotations = the(rendered, "DaemonSet")["metadata"]["annotations"]
    skips = dict(value.split("=") for key, value in annotations.items() if key.startswith("checkov.io/skip"))
    assert skips == ascend_device_plugin.CHECKOV_SKIPS
    assert all(len(reason) >= 10 for reason in skips.values())


def test_a_cluster_that_has_the_runtime_class_keeps_its_own(tmp_path: Path) -> None:
    """Ascend Docker Runtime's installer may have made the RuntimeClass already: creating it again
    would fail `pulumi up`, so the platform can leave it out, and the pods still name it."""
    config = npu_config(NPU_NODES)
    config["inference-platform:platform"]["ascendDevicePlugin"] = {"createRuntimeClass": False}
    result = render(tmp_path, config)
    assert objects(result, "RuntimeClass") == []
    assert objects(result, "DaemonSet")
    pods = [
        d["spec"]["template"]["spec"]
        for d in objects(result, "Deployment")
        if d["metadata"]["name"].startswith("pangu")
    ]
    assert {p["runtimeClassName"] for p in pods} == {ascend.RUNTIME_CLASS}
