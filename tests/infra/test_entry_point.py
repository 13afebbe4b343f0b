"""The program starts the way the Pulumi language host starts it, from outside our packages.

The host's exec script lives elsewhere, so its directory, not the project root, is first on
sys.path; it then runs `main: infra/` with runpy inside run_in_stack. This test does the same
with a mock monitor, so a program that only works from `python -m infra` fails here.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from inference_platform.cli.stack_file import read_stack_file
from tests.conftest import ROOT

HOST = """
import asyncio, json, os, runpy, sys
import pulumi, pulumi.runtime, pulumi.runtime.settings

config = json.loads(os.environ["PULUMI_CONFIG"])
pulumi.runtime.set_all_config(config, [])
types = []

class Mocks(pulumi.runtime.Mocks):
    def new_resource(self, args):
        types.append(args.typ)
        return args.name + "-id", args.inputs

    def call(self, args):
        return {}

loop = asyncio.new_event_loop()
asyncio.set_event_loop(loop)
pulumi.runtime.set_mocks(Mocks(), project="inference-platform", stack="dev", preview=True)
pulumi.runtime.settings.set_root_resource(None)
assert not any(os.path.exists(os.path.join(p, "components")) for p in sys.path if p), sys.path
sys.argv = ["infra/"]
try:
    loop.run_until_complete(pulumi.runtime.run_in_stack(lambda: runpy.run_path("infra/", run_name="__main__")))
except pulumi.RunError as error:
    print("RunError:", error)
    print("registered:", json.dumps(sorted(set(types))))
    sys.exit(1)
print(json.dumps(sorted(set(types))))
"""


def run_like_the_host(tmp_path: Path, stack_file: Path) -> subprocess.CompletedProcess[str]:
    script = tmp_path / "pulumi-language-python-exec.py"
    script.write_text(HOST)
    config = read_stack_file(stack_file).config
    return subprocess.run(
        [sys.executable, str(script)],
        cwd=ROOT,
        env={"PULUMI_CONFIG": json.dumps(config), "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        check=False,
    )


def test_the_program_runs_when_started_like_the_language_host(tmp_path: Path) -> None:
    done = run_like_the_host(tmp_path, ROOT / "Pulumi.dev.yaml")

    assert done.returncode == 0, done.stderr
    types = json.loads(done.stdout.splitlines()[-1])
    assert "inference-platform:serving:InferenceService" in types
    assert "kubernetes:apps/v1:Deployment" in types


def test_invalid_config_stops_the_host_run_with_the_report(tmp_path: Path) -> None:
    bad = tmp_path / "Pulumi.bad.yaml"
    bad.write_text((ROOT / "Pulumi.dev.yaml").read_text().replace("weight: 90", "weight: 91"))

    done = run_like_the_host(tmp_path, bad)

    assert done.returncode == 1
    assert "RunError: invalid stack config (1 problem):" in done.stdout
    assert "models[0].versions: live weights add up to 101" in done.stdout
    # Nothing but the stack itself was registered: no half-applied update.
    registered = json.loads(done.stdout.split("registered: ", 1)[1])
    assert set(registered) <= {"pulumi:pulumi:Stack"}, registered
