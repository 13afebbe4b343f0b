"""The script that starts MindIE in its pod (mindie_launcher.py, shipped in the ConfigMap), run
here as the pod runs it: with a stand-in for the node's `hccn_tool` on PATH (printing what the real
one prints, `ipaddr:<address>`) and, in place of MindIE's daemon, a script that records what it was
handed. What is tested is our launcher: the copy MindIE's owner and mode checks accept, and the
rank table a group's leader gathers from its workers over the network."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

from inference_platform.platform.gpu_nodes import GpuNodes
from inference_platform.serving.runtimes.mindie import LAUNCHER, MindIEModel

HCCN_TOOL = """#!/bin/sh
# hccn_tool -i <device> -ip -g
echo "ipaddr:10.20.$NODE.$2"
echo "netmask:255.255.255.0"
"""
DAEMON = """#!/bin/sh
python3 - "$@" <<'EOF'
import json, os, sys
keep = ("MIES_CONFIG_JSON_PATH", "RANK_TABLE_FILE", "MIES_CONTAINER_IP")
out = {"args": sys.argv[1:], "cwd": os.getcwd(), "env": {k: os.environ.get(k) for k in keep}}
for key in ("MIES_CONFIG_JSON_PATH", "RANK_TABLE_FILE"):
    path = os.environ.get(key)
    if path:
        st = os.stat(path)
        out[key] = {"mode": oct(st.st_mode & 0o777), "owner": st.st_uid, "text": open(path).read()}
open(os.environ["RECORD"], "w").write(json.dumps(out))
EOF
"""


def executable(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    path.chmod(0o755)


def pod(
    tmp: Path, name: str, config: str, hccn_tool: bool = True, hccn_conf: str | None = None, **env: str
) -> tuple[dict[str, str], Path]:
    """A pod's environment: the ConfigMap's config, the node's tool (`hccn_tool` False: none, as for
    a user other than root) and its /etc/hccn.conf (`hccn_conf`: its text; none by default), MindIE's
    home with the stand-in daemon."""
    root = tmp / name
    (root / "tools").mkdir(parents=True)
    if hccn_tool:
        executable(root / "tools" / "hccn_tool", HCCN_TOOL)
    (root / "etc").mkdir()
    if hccn_conf is not None:
        (root / "etc" / "hccn.conf").write_text(hccn_conf, encoding="utf-8")
    executable(root / "home" / "bin" / "mindieservice_daemon", DAEMON)
    (root / "etc" / "config.json").write_text(config, encoding="utf-8")
    record = root / "record.json"
    return {
        "PATH": f"{root / 'tools'}:{os.environ['PATH']}",
        "MINDIE_CONFIG_SOURCE": str(root / "etc" / "config.json"),
        "MINDIE_HCCN_CONF": str(root / "etc" / "hccn.conf"),
        "MINDIE_WORK_DIR": str(root / "work"),
        "MINDIE_LLM_HOME_PATH": str(root / "home"),
        "MINDIE_RANK_TABLE_TIMEOUT": "60",
        "RECORD": str(record),
        **env,
    }, record


def generated_config(nodes: int) -> str:
    spec = MindIEModel.model_validate(
        {
            "name": "qwen",
            "runtime": "mindie",
            "npu": {"type": "Ascend910B3", "count": 2},
            "nodes": nodes,
            "versions": [{"name": "v1", "modelUri": "pvc://m/q", "weight": 100}],
        }
    )
    return spec.plan(spec.versions[0], GpuNodes()).config_files["config.json"]


def launch(env: dict[str, str]) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, str(LAUNCHER), "--extra"], env=env, text=True, stderr=subprocess.PIPE)


def finished(process: subprocess.Popen[str]) -> None:
    _, errors = process.communicate(timeout=120)
    assert process.returncode == 0, errors


def read(record: Path) -> dict[str, Any]:
    result: dict[str, Any] = json.loads(record.read_text(encoding="utf-8"))
    return result


def test_a_single_pod_starts_the_daemon_with_a_private_copy_of_the_config(tmp_path: Path) -> None:
    config = generated_config(1)
    env, record = pod(tmp_path, "solo", config)
    finished(launch(env))
    seen = read(record)
    copied = seen["MIES_CONFIG_JSON_PATH"]
    # MindIE accepts only a file of the running user's, mode 640 or tighter.
    assert (copied["mode"], copied["owner"], copied["text"]) == ("0o640", os.getuid(), config)
    assert seen["env"]["RANK_TABLE_FILE"] is None
    assert seen["args"] == ["--extra"]
    assert seen["cwd"] == env["MINDIE_LLM_HOME_PATH"]


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


def test_a_groups_pods_share_one_rank_table_gathered_by_the_leader(tmp_path: Path) -> None:
    """Three pods of two NPUs: the leader (worker 0) gathers the workers' parts; every pod writes
    the same table, ranks running by worker index then device, the leader's first (MindIE's master)."""
    config, port = generated_config(3), str(free_port())
    group: dict[str, Any] = {"LWS_GROUP_SIZE": "3", "LWS_LEADER_ADDRESS": "127.0.0.1", "MINDIE_RANK_TABLE_PORT": port}
    pods = []
    # Workers start first: they wait for the leader, as they would for its name in DNS.
    for index, devices in ((2, "0,1"), (1, "6,7"), (0, "2,3")):
        address = f"10.0.{index}.5"
        env, record = pod(
            tmp_path,
            f"pod{index}",
            config,
            **group,
            LWS_WORKER_INDEX=str(index),
            NODE=str(index),
            ASCEND_VISIBLE_DEVICES=devices,
            MIES_CONTAINER_IP=address,
            HOST_IP=f"192.168.0.{index}",
        )
        pods.append((launch(env), record))
    for process, _ in pods:
        finished(process)
    tables = [read(record) for _, record in pods]
    texts = {seen["RANK_TABLE_FILE"]["text"] for seen in tables}
    assert len(texts) == 1
    assert {(seen["RANK_TABLE_FILE"]["mode"], seen["RANK_TABLE_FILE"]["owner"]) for seen in tables} == {
        ("0o640", os.getuid())
    }
    assert json.loads(texts.pop()) == {
        "version": "1.0",
        "server_count": "3",
        "server_list": [
            {
                "server_id": "192.168.0.0",
                "container_ip": "10.0.0.5",
                "device": [
                    {"device_id": "2", "device_ip": "10.20.0.2", "rank_id": "0"},
                    {"device_id": "3", "device_ip": "10.20.0.3", "rank_id": "1"},
                ],
            },
            {
                "server_id": "192.168.0.1",
                "container_ip": "10.0.1.5",
                "device": [
                    {"device_id": "6", "device_ip": "10.20.1.6", "rank_id": "2"},
                    {"device_id": "7", "device_ip": "10.20.1.7", "rank_id": "3"},
                ],
            },
            {
                "server_id": "192.168.0.2",
                "container_ip": "10.0.2.5",
                "device": [
                    {"device_id": "0", "device_ip": "10.20.2.0", "rank_id": "4"},
                    {"device_id": "1", "device_ip": "10.20.2.1", "rank_id": "5"},
                ],
            },
        ],
        "status": "completed",
    }
    assert all(seen["env"]["RANK_TABLE_FILE"] for seen in tables)


def test_device_ips_come_from_hccn_conf_and_hccn_tool_only_for_devices_it_lacks(tmp_path: Path) -> None:
    """hccn_tool answers root only, and the pod runs as uid 1000: the node's /etc/hccn.conf
    (`address_<device id>=<ip>`, mounted read-only) is read first. The leader has no hccn_tool at
    all; the worker's hccn.conf lacks one of its devices, which hccn_tool reports."""
    config, port = generated_config(2), str(free_port())
    group: dict[str, Any] = {"LWS_GROUP_SIZE": "2", "LWS_LEADER_ADDRESS": "127.0.0.1", "MINDIE_RANK_TABLE_PORT": port}
    leader_conf = "address_2=10.30.0.12\nnetmask_2=255.255.255.0\naddress_3=10.30.0.13\nnetmask_3=255.255.255.0\n"
    worker_conf = "# from hccn_tool -i 6 -ip -s\naddress_6=10.30.1.16\nnetmask_6=255.255.255.0\n"
    pods = []
    for index, devices, conf, tool in ((1, "6,7", worker_conf, True), (0, "2,3", leader_conf, False)):
        env, record = pod(
            tmp_path,
            f"pod{index}",
            config,
            hccn_tool=tool,
            hccn_conf=conf,
            **group,
            LWS_WORKER_INDEX=str(index),
            NODE=str(index),
            ASCEND_VISIBLE_DEVICES=devices,
            MIES_CONTAINER_IP=f"10.0.{index}.5",
            HOST_IP=f"192.168.0.{index}",
        )
        pods.append((launch(env), record))
    for process, _ in pods:
        finished(process)
    table = json.loads(read(pods[0][1])["RANK_TABLE_FILE"]["text"])
    assert [[(d["device_id"], d["device_ip"]) for d in s["device"]] for s in table["server_list"]] == [
        [("2", "10.30.0.12"), ("3", "10.30.0.13")],
        [("6", "10.30.1.16"), ("7", "10.20.1.7")],
    ]
