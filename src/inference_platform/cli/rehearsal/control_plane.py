"""A throwaway Kubernetes control plane on loopback: etcd, kube-apiserver (its default admission
plugins, Pod Security among them, but the two webhook plugins), kube-controller-manager,
kube-scheduler and KWOK, from a tool directory (tools/rehearsal/build) or PATH.

Every process gets an environment without proxy variables (loopback must not go through a
proxy), every port is chosen free on 127.0.0.1, and everything lives in one directory that is
removed afterwards (unless kept)."""

from __future__ import annotations

import base64
import json
import os
import shutil
import socket
import ssl
import subprocess
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from inference_platform.analysis.rehearsal import FAKE_NODE_ANNOTATION
from inference_platform.cli.rehearsal.processes import Children

CONTROL_PLANE_TOOLS = ("etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "kwok")
ENGINE_TOOLS = ("pulumi", "pulumi-resource-kubernetes")
TOOLS = (*CONTROL_PLANE_TOOLS, *ENGINE_TOOLS)
STAGES_FILE = "kwok-stages.yaml"
"""KWOK's stages (nodes Ready, pods Running), written beside kwok by tools/rehearsal/build."""
PROXY_VARIABLES = ("http_proxy", "https_proxy", "all_proxy", "no_proxy", "ftp_proxy")
SERVICE_CIDR = "10.96.0.0/16"
START_SECONDS = 120.0
DISABLED_ADMISSION = ("MutatingAdmissionWebhook", "ValidatingAdmissionWebhook")
"""The charts' webhooks' servers never run here (no kubelet runs their pods): a real cluster, before
they run, refuses what a failing webhook with failurePolicy Fail would see, or lets it through with
Ignore. The rehearsal calls none of them, as if each failed open (docs/rehearsal.md)."""


class ControlPlaneError(Exception):
    """A tool is missing, or a process of the control plane did not start; the message says which."""


def without_proxies(environ: Mapping[str, str]) -> dict[str, str]:
    return {key: value for key, value in environ.items() if key.lower() not in PROXY_VARIABLES}


def find_tools(tools_dir: Path | None, names: Sequence[str] = TOOLS) -> dict[str, Path]:
    """Each tool's path: in `tools_dir` when given (and there), else on PATH; ControlPlaneError
    naming every one that is missing."""
    found: dict[str, Path] = {}
    missing = []
    for name in names:
        candidate = tools_dir / name if tools_dir is not None else None
        if candidate is not None and os.access(candidate, os.X_OK):
            found[name] = candidate
            continue
        on_path = shutil.which(name)
        if on_path is None:
            missing.append(name)
        else:
            found[name] = Path(on_path)
    if missing:
        where = f"in {tools_dir} or on PATH" if tools_dir is not None else "on PATH"
        raise ControlPlaneError(
            f"{', '.join(missing)} not found {where}: build them with `make rehearsal-tools` "
            "(tools/bin/rehearsal), or install them and put them on PATH (docs/rehearsal.md)"
        )
    return found


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def port_open(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.settimeout(0.5)
        return sock.connect_ex(("127.0.0.1", port)) == 0


# --- Certificates (openssl) ----------------------------------------------------------------------


def _openssl(arguments: Sequence[str], cwd: Path) -> None:
    try:
        subprocess.run(["openssl", *arguments], cwd=cwd, check=True, capture_output=True, timeout=60)
    except FileNotFoundError:
        raise ControlPlaneError(
            "openssl not found on PATH: the control plane's certificates are made with it"
        ) from None
    except subprocess.CalledProcessError as error:
        raise ControlPlaneError(f"openssl {arguments[0]}: {error.stderr.decode(errors='replace').strip()}") from None


def make_certificates(directory: Path) -> None:
    """A CA, the API server's serving certificate (127.0.0.1, localhost and its Service's names),
    an admin client certificate (system:masters), the service accounts' signing key."""
    directory.mkdir(parents=True, exist_ok=True)
    _openssl(["req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", "ca.key", "-out", "ca.crt",
              "-days", "2", "-subj", "/CN=rehearsal-ca"], directory)  # fmt: skip
    names = "DNS:localhost,DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc,IP:127.0.0.1,IP:10.96.0.1"
    (directory / "server.ext").write_text(f"subjectAltName={names}\nextendedKeyUsage=serverAuth,clientAuth\n")
    (directory / "client.ext").write_text("extendedKeyUsage=clientAuth\n")
    for name, subject, ext in (
        ("server", "/CN=kube-apiserver", "server.ext"),
        ("admin", "/O=system:masters/CN=rehearsal-admin", "client.ext"),
    ):
        _openssl(["req", "-newkey", "rsa:2048", "-nodes", "-keyout", f"{name}.key", "-out", f"{name}.csr",
                  "-subj", subject], directory)  # fmt: skip
        _openssl(["x509", "-req", "-in", f"{name}.csr", "-CA", "ca.crt", "-CAkey", "ca.key", "-CAcreateserial",
                  "-out", f"{name}.crt", "-days", "2", "-extfile", ext], directory)  # fmt: skip
    _openssl(["genrsa", "-out", "sa.key", "2048"], directory)
    _openssl(["rsa", "-in", "sa.key", "-pubout", "-out", "sa.pub"], directory)


def kubeconfig(server: str, certs: Path) -> dict[str, Any]:
    def data(name: str) -> str:
        return base64.b64encode((certs / name).read_bytes()).decode()

    return {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [
            {"name": "rehearsal", "cluster": {"server": server, "certificate-authority-data": data("ca.crt")}}
        ],
        "users": [
            {
                "name": "admin",
                "user": {"client-certificate-data": data("admin.crt"), "client-key-data": data("admin.key")},
            }
        ],
        "contexts": [{"name": "rehearsal", "context": {"cluster": "rehearsal", "user": "admin"}}],
        "current-context": "rehearsal",
    }


# --- The API server's REST interface ---------------------------------------------------------


class KubeApiError(Exception):
    def __init__(self, status: int, message: str) -> None:
        super().__init__(f"{status}: {message}")
        self.status = status
        self.message = message


@dataclass
class KubeApi:
    """A client of the API server with the admin certificate: JSON in, JSON out, no proxy."""

    server: str
    certs: Path

    def __post_init__(self) -> None:
        context = ssl.create_default_context(cafile=str(self.certs / "ca.crt"))
        context.load_cert_chain(str(self.certs / "admin.crt"), str(self.certs / "admin.key"))
        # No ProxyHandler from the environment: loopback never goes through a proxy (trust_env off).
        self._opener = urllib.request.build_opener(
            urllib.request.ProxyHandler({}), urllib.request.HTTPSHandler(context=context)
        )

    def request(self, method: str, path: str, body: Any = None, timeout: float = 30) -> Any:
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(self.server + path, data=data, method=method)
        request.add_header("Accept", "application/json")
        if data is not None:
            request.add_header("Content-Type", "application/json")
        try:
            with self._opener.open(request, timeout=timeout) as response:
                text = response.read()
        except urllib.error.HTTPError as error:
            raw = error.read().decode(errors="replace")
            try:
                message = json.loads(raw).get("message", raw)
            except ValueError:
                message = raw
            raise KubeApiError(error.code, str(message)) from None
        return json.loads(text) if text else None

    def get(self, path: str) -> Any:
        return self.request("GET", path)

    def create(self, path: str, body: Mapping[str, Any]) -> Any:
        return self.request("POST", path, body)

    def exists(self, path: str) -> bool:
        try:
            self.get(path)
        except KubeApiError as error:
            if error.status == 404:
                return False
            raise
        return True

    def ready(self) -> bool:
        try:
            request = urllib.request.Request(self.server + "/readyz")
            with self._opener.open(request, timeout=2) as response:
                return bool(response.status == 200)
        except (urllib.error.URLError, OSError, ssl.SSLError):
            return False

    def resources(self) -> Iterator[tuple[str, Mapping[str, Any]]]:
        """Every listable resource the API server serves, in every version of its group (the
        preferred first): (its group's apiVersion, its discovery entry)."""
        yield from self._group_resources("v1")
        for group in self.get("/apis").get("groups", []):
            preferred = group.get("preferredVersion", {}).get("groupVersion")
            versions = [v["groupVersion"] for v in group.get("versions", [])]
            for version in sorted(versions, key=lambda v: v != preferred):
                yield from self._group_resources(version)

    def _group_resources(self, version: str) -> Iterator[tuple[str, Mapping[str, Any]]]:
        try:
            listed = self.get(group_path(version))
        except (KubeApiError, OSError):
            return  # an aggregated API whose server does not run
        for resource in listed.get("resources", []):
            if "/" in resource["name"] or "list" not in resource.get("verbs", []):
                continue
            yield version, resource

    def all_objects(self, skip: frozenset[str] = frozenset()) -> list[dict[str, Any]]:
        """Every object of every resource (but the resource names in `skip`), each once (in its
        group's preferred version where it serves the kind), with its kind and apiVersion."""
        objects = []
        seen: set[tuple[str, str]] = set()
        for version, resource in self.resources():
            group = version.rpartition("/")[0]
            if resource["name"] in skip or (group, resource["kind"]) in seen:
                continue
            seen.add((group, resource["kind"]))
            try:
                listed = self.get(api_path(version, resource["name"]))
            except (KubeApiError, OSError):
                continue
            for item in listed.get("items", []):
                objects.append({"apiVersion": version, "kind": resource["kind"], **item})
        return objects


def group_path(api_version: str) -> str:
    """Where the API server serves an apiVersion (core v1 under /api, every group under /apis)."""
    return "/api/v1" if api_version == "v1" else f"/apis/{api_version}"


def api_path(api_version: str, plural: str, namespace: str | None = None, name: str | None = None) -> str:
    path = (
        group_path(api_version) + (f"/namespaces/{urllib.parse.quote(namespace)}" if namespace else "") + f"/{plural}"
    )
    return path + (f"/{urllib.parse.quote(name)}" if name else "")


# --- Starting it ---------------------------------------------------------------------------------


@dataclass
class ControlPlane:
    directory: Path
    api: KubeApi
    kubeconfig: Path
    port: int
    children: Children

    def stop(self) -> None:
        self.children.stop()


def _wait(what: str, ready: Any, children: Children, seconds: float = START_SECONDS) -> None:
    deadline = time.monotonic() + seconds
    while not ready():
        exited = children.exited()
        if exited:
            name, status = exited[0]
            raise ControlPlaneError(f"{name} exited with status {status} (its log: {children.directory}/{name}.log)")
        if time.monotonic() > deadline:
            raise ControlPlaneError(f"{what} did not start within {seconds:.0f} s (logs in {children.directory})")
        time.sleep(0.25)


def start(directory: Path, tools: Mapping[str, Path], children: Children) -> ControlPlane:
    """Start etcd, the API server, the controller manager, the scheduler and KWOK in `directory`;
    ControlPlaneError when one does not come up."""
    env = without_proxies(os.environ)
    certs = directory / "pki"
    make_certificates(certs)
    etcd_port, peer_port, api_port = free_port(), free_port(), free_port()
    etcd_url, peer_url = f"http://127.0.0.1:{etcd_port}", f"http://127.0.0.1:{peer_port}"
    children.start("etcd", [str(tools["etcd"]), "--data-dir", str(directory / "etcd"), "--name", "rehearsal",
        "--listen-client-urls", etcd_url, "--advertise-client-urls", etcd_url, "--listen-peer-urls", peer_url,
        "--initial-advertise-peer-urls", peer_url, "--initial-cluster", f"rehearsal={peer_url}",
        "--unsafe-no-fsync", "--log-level", "warn", "--listen-metrics-urls", ""], env)  # fmt: skip
    _wait("etcd", lambda: port_open(etcd_port), children)
    children.start("kube-apiserver", [str(tools["kube-apiserver"]), f"--etcd-servers={etcd_url}",
        "--bind-address=127.0.0.1", "--advertise-address=127.0.0.1", f"--secure-port={api_port}",
        f"--tls-cert-file={certs}/server.crt", f"--tls-private-key-file={certs}/server.key",
        f"--client-ca-file={certs}/ca.crt", f"--service-account-key-file={certs}/sa.pub",
        f"--service-account-signing-key-file={certs}/sa.key",
        "--service-account-issuer=https://kubernetes.default.svc.cluster.local",
        f"--service-cluster-ip-range={SERVICE_CIDR}", "--authorization-mode=Node,RBAC",
        # Privileged node agents (Istio's CNI, dcgm-exporter, HAMi's device plugin) are allowed, as
        # on every real cluster's API server; Pod Security admission still judges each namespace.
        "--allow-privileged=true", f"--disable-admission-plugins={','.join(DISABLED_ADMISSION)}",
        "--enable-priority-and-fairness=false", "--profiling=false", "--v=1"], env)  # fmt: skip
    server = f"https://127.0.0.1:{api_port}"
    api = KubeApi(server, certs)
    _wait("kube-apiserver", api.ready, children)
    config_path = directory / "kubeconfig"
    config_path.write_text(json.dumps(kubeconfig(server, certs)))
    config_path.chmod(0o600)
    children.start("kube-controller-manager", [str(tools["kube-controller-manager"]), f"--kubeconfig={config_path}",
        f"--authentication-kubeconfig={config_path}", f"--authorization-kubeconfig={config_path}",
        f"--service-account-private-key-file={certs}/sa.key", f"--root-ca-file={certs}/ca.crt",
        f"--cluster-signing-cert-file={certs}/ca.crt", f"--cluster-signing-key-file={certs}/ca.key",
        "--use-service-account-credentials=false", "--leader-elect=false", "--bind-address=127.0.0.1",
        f"--secure-port={free_port()}", f"--cert-dir={directory / 'kcm'}", "--controllers=*,-nodeipam",
        "--concurrent-deployment-syncs=10", "--concurrent-replicaset-syncs=10", "--v=1"], env)  # fmt: skip
    children.start("kube-scheduler", [str(tools["kube-scheduler"]), f"--kubeconfig={config_path}",
        f"--authentication-kubeconfig={config_path}", f"--authorization-kubeconfig={config_path}",
        "--leader-elect=false", "--bind-address=127.0.0.1", f"--secure-port={free_port()}",
        f"--cert-dir={directory / 'scheduler'}", "--v=1"], env)  # fmt: skip
    stages = tools["kwok"].parent / STAGES_FILE
    children.start("kwok", [str(tools["kwok"]), f"--kubeconfig={config_path}", "--manage-all-nodes=false",
        f"--manage-nodes-with-annotation-selector={FAKE_NODE_ANNOTATION}=fake",
        "--cidr=10.244.0.0/16", "--node-ip=10.0.0.1", "--node-lease-duration-seconds=40",
        f"--server-address=127.0.0.1:{free_port()}",
        *([f"--config={stages}"] if stages.is_file() else [])], env)  # fmt: skip
    plane = ControlPlane(directory, api, config_path, api_port, children)
    _wait(
        "the service account controller",
        lambda: api.exists("/api/v1/namespaces/default/serviceaccounts/default"),
        children,
    )
    return plane
