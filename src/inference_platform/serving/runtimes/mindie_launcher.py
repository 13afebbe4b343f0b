"""Starts MindIE Service in its pod: the program ships this file in the version's ConfigMap, and the
server container runs it (python3 of the MindIE image, the standard library only). Never imported
by the program.

1. MindIE reads its config only from a regular file that the running user owns with mode 640 or
   tighter (`FileUtils::ConstrainOwner`, `ConstrainPermission`); a ConfigMap's files belong to root.
   So the generated config.json is copied to the scratch volume, 640, and named by
   MIES_CONFIG_JSON_PATH.
2. In a multi-node group (LWS_GROUP_SIZE above 1) every pod takes part in one HCCL rank table
   (RANK_TABLE_FILE, the same checks). Each pod reads its own NPUs' device IPs (by the physical ids
   the device plugin allocated, ASCEND_VISIBLE_DEVICES) from the node's /etc/hccn.conf, mounted
   read-only (`address_<device id>=<ip>` lines, written when the NPUs' addresses were set), and
   asks `hccn_tool -i <id> -ip -g` only for a device the file lacks: the tool answers root only,
   and the pod runs as uid 1000. The leader (LWS_WORKER_INDEX 0) gathers the parts over HTTP on
   RANK_TABLE_PORT: each worker
   POSTs its part to the leader (LWS_LEADER_ADDRESS), the leader answers GET with the whole table
   once every pod has joined and stops serving when every worker has it; each pod writes the same
   table. Rank ids run by worker index, then device: the leader holds rank 0, so MindIE makes it
   the master (the server whose container_ip is this pod's MIES_CONTAINER_IP).
3. Then it replaces itself with MindIE's daemon, $MINDIE_LLM_HOME_PATH/bin/mindieservice_daemon.
"""

from __future__ import annotations

import http.client
import http.server
import json
import os
import re
import shutil
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

CONFIG_SOURCE = os.environ.get("MINDIE_CONFIG_SOURCE", "/etc/mindie/config.json")
WORK_DIR = Path(os.environ.get("MINDIE_WORK_DIR", "/tmp/mindie"))
DEFAULT_HOME = "/usr/local/Ascend/mindie/latest/mindie-service"
RANK_TABLE_PORT = int(os.environ.get("MINDIE_RANK_TABLE_PORT", "1122"))
# How long a group waits for all its pods: they are scheduled together, but images are large.
JOIN_TIMEOUT_SECONDS = float(os.environ.get("MINDIE_RANK_TABLE_TIMEOUT", "1800"))
IP_PATTERN = re.compile(r"ipaddr\s*:\s*([0-9]+(?:\.[0-9]+){3})")
HCCN_CONF = Path(os.environ.get("MINDIE_HCCN_CONF", "/etc/hccn.conf"))
HCCN_ADDRESS = re.compile(r"^\s*address_([0-9]+)\s*=\s*([0-9]+(?:\.[0-9]+){3})\s*$", re.M)


def log(message: str) -> None:
    print(f"mindie-launcher: {message}", file=sys.stderr, flush=True)


def private_copy(text: str, path: Path) -> None:
    """Write `text` to `path`, owned by the running user with mode 640, as MindIE requires."""
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o750)
    path.write_text(text, encoding="utf-8")
    path.chmod(0o640)


def physical_devices() -> list[int]:
    """The NPUs the device plugin gave this container, by their physical ids."""
    for name in ("ASCEND_VISIBLE_DEVICES", "ASCEND_RT_VISIBLE_DEVICES"):
        value = os.environ.get(name, "").strip()
        if value:
            return [int(part) for part in value.split(",") if part.strip()]
    raise SystemExit("mindie-launcher: no ASCEND_VISIBLE_DEVICES: the pod got no NPUs from the device plugin")


def configured_ips() -> dict[int, str]:
    """The NPUs' RoCE addresses the node's hccn.conf holds (`address_<device id>=<ip>`), by device id."""
    try:
        text = HCCN_CONF.read_text(encoding="utf-8")
    except OSError:
        return {}
    return {int(match.group(1)): match.group(2) for match in HCCN_ADDRESS.finditer(text)}


def device_ip(device: int) -> str:
    """The RoCE address of one NPU, as `hccn_tool -i <id> -ip -g` reports it (`ipaddr:<address>`)."""
    tool = shutil.which("hccn_tool") or "/usr/local/Ascend/driver/tools/hccn_tool"
    output = subprocess.run([tool, "-i", str(device), "-ip", "-g"], capture_output=True, text=True, check=True).stdout
    match = IP_PATTERN.search(output)
    if match is None:
        raise SystemExit(f"mindie-launcher: hccn_tool reported no ipaddr for NPU {device}: {output.strip()!r}")
    return match.group(1)


def own_server(index: int) -> dict[str, Any]:
    """This pod's entry of the rank table: its node, its address and its NPUs with global ranks."""
    devices = physical_devices()
    configured = configured_ips()
    return {
        "server_id": os.environ["HOST_IP"],
        "container_ip": os.environ["MIES_CONTAINER_IP"],
        "device": [
            {
                "device_id": str(device),
                "device_ip": configured.get(device) or device_ip(device),
                "rank_id": str(index * len(devices) + n),
            }
            for n, device in enumerate(devices)
        ],
    }


def rank_table(servers: dict[int, dict[str, Any]]) -> dict[str, Any]:
    return {
        "version": "1.0",
        "server_count": str(len(servers)),
        "server_list": [servers[index] for index in sorted(servers)],
        "status": "completed",
    }


class Gathering:
    """The leader's side: parts by worker index, and which workers have fetched the whole table."""

    def __init__(self, size: int, own: dict[str, Any]) -> None:
        self.size = size
        self.servers: dict[int, dict[str, Any]] = {0: own}
        self.fetched: set[int] = set()
        self.lock = threading.Lock()
        self.done = threading.Event()

    def join(self, index: int, server: dict[str, Any]) -> None:
        with self.lock:
            self.servers[index] = server

    def table(self) -> dict[str, Any] | None:
        with self.lock:
            if len(self.servers) < self.size:
                return None
            return rank_table(self.servers)

    def delivered(self, index: int) -> None:
        """A worker has the whole table (its answer written): the leader may stop serving once all have."""
        with self.lock:
            self.fetched.add(index)
            if len(self.fetched) == self.size - 1:
                self.done.set()


class Server(http.server.ThreadingHTTPServer):
    """Answers each worker on a thread of its own, and on closing waits for those under way."""

    daemon_threads = False
    block_on_close = True


def serve(gathering: Gathering) -> dict[str, Any]:
    class Handler(http.server.BaseHTTPRequestHandler):
        def _index(self) -> int | None:
            match = re.fullmatch(r"/workers/([0-9]+)", self.path)
            index = int(match.group(1)) if match else None
            return index if index is not None and 0 < index < gathering.size else None

        def _answer(self, status: int, body: dict[str, Any] | None = None) -> None:
            data = json.dumps(body).encode() if body is not None else b""
            self.send_response(status)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_POST(self) -> None:
            index = self._index()
            if index is None:
                return self._answer(404)
            length = int(self.headers.get("Content-Length", "0"))
            gathering.join(index, json.loads(self.rfile.read(length)))
            return self._answer(204)

        def do_GET(self) -> None:
            index = self._index()
            if index is None:
                return self._answer(404)
            table = gathering.table()
            if table is None:
                return self._answer(202)  # not every pod has joined yet
            self._answer(200, table)
            # Only now: the leader goes on to exec the server once every worker holds the table,
            # and an answer cut off by that would leave its worker without one.
            return gathering.delivered(index)

        def log_message(self, format: str, *args: Any) -> None:
            log(f"{self.address_string()} {format % args}")

    server = Server(("", RANK_TABLE_PORT), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    log(f"gathering {gathering.size - 1} worker(s) on port {RANK_TABLE_PORT}")
    if not gathering.done.wait(JOIN_TIMEOUT_SECONDS):
        raise SystemExit(f"mindie-launcher: only {sorted(gathering.servers)} of {gathering.size} pods joined in time")
    server.shutdown()
    server.server_close()  # waits for every answer under way
    with gathering.lock:
        return rank_table(gathering.servers)


def request(method: str, url: str, body: dict[str, Any] | None = None) -> tuple[int, bytes]:
    data = json.dumps(body).encode() if body is not None else None
    with urllib.request.urlopen(urllib.request.Request(url, data=data, method=method), timeout=10) as answer:
        return answer.status, answer.read()


def fetch(index: int, own: dict[str, Any]) -> dict[str, Any]:
    """A worker's side: hand the leader this pod's part, then wait for the whole table."""
    url = f"http://{os.environ['LWS_LEADER_ADDRESS']}:{RANK_TABLE_PORT}/workers/{index}"
    deadline, joined = time.monotonic() + JOIN_TIMEOUT_SECONDS, False
    while time.monotonic() < deadline:
        try:
            if not joined:
                request("POST", url, own)
                joined = True
            status, body = request("GET", url)
            if status == 200:
                table: dict[str, Any] = json.loads(body)
                return table
        except (OSError, urllib.error.URLError, http.client.HTTPException) as error:
            # The leader not up yet, its name not yet known, or an answer cut off: ask again.
            log(f"waiting for the leader: {error}")
        time.sleep(2)
    raise SystemExit("mindie-launcher: the group's leader gave no rank table in time")


def main() -> None:
    config = Path(CONFIG_SOURCE).read_text(encoding="utf-8")
    private_copy(config, WORK_DIR / "config.json")
    os.environ["MIES_CONFIG_JSON_PATH"] = str(WORK_DIR / "config.json")
    size = int(os.environ.get("LWS_GROUP_SIZE", "1"))
    if size > 1:
        index = int(os.environ["LWS_WORKER_INDEX"])
        own = own_server(index)
        table = serve(Gathering(size, own)) if index == 0 else fetch(index, own)
        private_copy(json.dumps(table, indent=2) + "\n", WORK_DIR / "rank_table.json")
        os.environ["RANK_TABLE_FILE"] = str(WORK_DIR / "rank_table.json")
        log(f"rank table of {table['server_count']} server(s) written; this pod is worker {index}")
    home = os.environ.get("MINDIE_LLM_HOME_PATH", DEFAULT_HOME)
    daemon = os.path.join(home, "bin", "mindieservice_daemon")
    os.chdir(home)
    os.execv(daemon, [daemon, *sys.argv[1:]])


if __name__ == "__main__":
    main()
