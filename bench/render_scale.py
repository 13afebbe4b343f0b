"""How the program scales: time and peak memory under the Pulumi mocks for 10, 100 and 400 models.

Each model has two live versions (50/50). The program is measured as `infra render` runs it: the
entry point under the mocks, then the render directory written. The baseline registers the very
same Kubernetes objects directly, after their Namespace as any program must, with no config
parsing and no components (what a hand-written Pulumi program would cost), and writes the same
YAML the same way. Every measurement runs in a fresh process so peak memory is its own.

    python -m bench.render_scale              # the table (from the repository root)
    python -m bench.render_scale --repeat 3   # fastest of three runs each (takes a while at 400)
"""

from __future__ import annotations

import argparse
import asyncio
import json
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import pulumi.runtime
import pulumi.runtime.settings

# Imported for its side effect: every module the program runs is loaded before measuring,
# as import time is not program time.
import inference_platform.stack.program  # noqa: F401
from inference_platform.cli.render import RecordingMocks, RecordingMonitor, RenderResult, batch_gc, run_program
from inference_platform.cli.render_files import render_texts, write_render
from inference_platform.cli.stack_file import StackFile
from inference_platform.kube import register
from inference_platform.serving.inference_service.args import InferenceServiceArgs
from inference_platform.serving.inference_service.manifests import model_manifests
from inference_platform.serving.model_namespace import ModelNamespaceArgs, default_deny, namespace, strict_mtls
from inference_platform.stack.config import PROJECT, parse_stack_config, project_values

ROOT = Path(__file__).resolve().parent.parent

SIZES = (10, 100, 400)


def model_specs(models: int) -> list[dict[str, Any]]:
    """`models` MLServer models of two live versions, 50/50."""
    return [
        {
            "name": f"model-{i}",
            "runtime": "mlserver",
            "versions": [
                {"name": "v1", "modelUri": f"pvc://models/m{i}/v1", "weight": 50},
                {"name": "v2", "modelUri": f"pvc://models/m{i}/v2", "weight": 50},
            ],
        }
        for i in range(models)
    ]


def stack_config(models: int) -> dict[str, str]:
    specs = model_specs(models)
    # Models only: the platform's charts and namespaces would be the same at every size.
    platform = {
        "ingress": {"enabled": False},
        "prometheus": {"enabled": False},
        "prometheusAdapter": {"enabled": False},
    }
    return {
        "inference-platform:domain": "models.example.com",
        "inference-platform:platform": json.dumps(platform),
        "inference-platform:models": json.dumps(specs),
    }


def measure_program(models: int) -> tuple[float, int]:
    stack_file = StackFile(path=Path("bench"), config=stack_config(models), secret_keys=[])
    start = time.perf_counter()
    result = run_program("bench", stack_file)
    write(result)
    return time.perf_counter() - start, len(result.manifests)


def write(result: RenderResult) -> None:
    """What `infra render` writes, the same way, into a scratch directory."""
    with tempfile.TemporaryDirectory(prefix="bench-") as scratch:
        write_render(render_texts(result), Path(scratch) / "out")


def measure_baseline(models: int) -> tuple[float, int]:
    config = parse_stack_config(project_values(stack_config(models)))
    namespace_args = ModelNamespaceArgs(name=config.namespace)
    manifests = [namespace(namespace_args), strict_mtls(namespace_args), default_deny(namespace_args)]
    for model in config.models:
        manifests += model_manifests(
            InferenceServiceArgs(model=model, namespace=config.namespace, domain=config.domain)
        )

    result = RenderResult()
    loop = asyncio.new_event_loop()
    asyncio.set_event_loop(loop)
    mocks = RecordingMocks()
    pulumi.runtime.set_mocks(
        mocks, project=PROJECT, stack="bench", preview=False, monitor=RecordingMonitor(mocks, result)
    )
    pulumi.runtime.settings.set_root_resource(None)  # type: ignore[arg-type]

    def program() -> None:
        # What any program must do too: namespaced objects wait for their Namespace.
        ns = register(manifests[0])
        for manifest in manifests[1:]:
            register(manifest, pulumi.ResourceOptions(depends_on=[ns]))

    start = time.perf_counter()
    with batch_gc():  # as run_program registers
        loop.run_until_complete(pulumi.runtime.run_in_stack(program))
    write(result)
    return time.perf_counter() - start, len(result.manifests)


def one(models: int, mode: str) -> dict[str, Any]:
    seconds, objects = measure_program(models) if mode == "program" else measure_baseline(models)
    peak_kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return {"seconds": seconds, "objects": objects, "peak_mib": peak_kib / 1024}


def run_one(models: int, mode: str) -> dict[str, Any]:
    done = subprocess.run(
        [sys.executable, "-m", "bench.render_scale", "--one", str(models), mode],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    )
    result: dict[str, Any] = json.loads(done.stdout.splitlines()[-1])
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeat", type=int, default=1, help="runs per measurement; the fastest counts")
    parser.add_argument("--one", nargs=2, metavar=("MODELS", "MODE"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.one:
        print(json.dumps(one(int(args.one[0]), args.one[1])))
        return

    print(
        f"{'models':>6} {'objects':>7} {'program s':>9} {'baseline s':>10} {'ratio':>5} "
        f"{'µs/object':>9} {'program MiB':>11} {'baseline MiB':>12}"
    )
    for models in SIZES:
        runs = {mode: [run_one(models, mode) for _ in range(args.repeat)] for mode in ("program", "baseline")}
        program = min(runs["program"], key=lambda r: r["seconds"])
        baseline = min(runs["baseline"], key=lambda r: r["seconds"])
        assert program["objects"] == baseline["objects"], (program, baseline)
        ratio = program["seconds"] / baseline["seconds"]
        per_object = program["seconds"] / program["objects"] * 1e6
        print(
            f"{models:>6} {program['objects']:>7} {program['seconds']:>9.2f} {baseline['seconds']:>10.2f} "
            f"{ratio:>5.2f} {per_object:>9.0f} {program['peak_mib']:>11.0f} {baseline['peak_mib']:>12.0f}"
        )


if __name__ == "__main__":
    main()
