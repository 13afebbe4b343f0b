"""The payload comparator under load on loopback: its memory, CPU, pairs and drops at a steady
request rate, each request's exchanges sent over gRPC exactly as Envoy's ext_proc filter streams
them in observability mode (request headers, request body, response headers, response body; one
stream per exchange, the filter's initial metadata naming the version).

Two phases, each against a freshly started comparator (its own process, the pinned package from
.venv-comparator, the config the program renders for one model with one shadow):

    paired     every primary request's shadow twin arrives too (all agree): what steady work costs;
    unpaired   no shadow ever answers: everything is held for the whole window, so only the
               memory bound (maxBufferedBytes) stands between the comparator and unbounded growth.

Run from the repository root with the comparator's venv (it has the ext_proc messages):

    make .venv-comparator/.installed
    .venv-comparator/bin/python -m bench.comparator_load            # 1,000 requests/s, 60 s each
    .venv-comparator/bin/python -m bench.comparator_load --rate 200 --seconds 10

The figures printed are the comparator's own: peak resident memory read from /proc while it
runs, CPU seconds it used, and its /metrics counters at the end. The generator keeps at most
--concurrency streams open (256: what sidecars hold open at 1,000 requests/s of 250 ms), so when
the comparator cannot keep up the achieved rate, printed beside the target, falls to what it
compares; on 2 cores the generator and the comparator have one core each.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.request import urlopen

import grpc
from envoy.config.core.v3 import base_pb2
from envoy.service.ext_proc.v3 import external_processor_pb2, external_processor_pb2_grpc
from prometheus_client.parser import text_string_to_metric_families

ROOT = Path(__file__).resolve().parent.parent
COMPARATOR = ROOT / ".venv-comparator" / "bin" / "inference-comparator"
BODY_BYTES = 10 * 1024
NAMESPACE, MODEL, PRIMARY, SHADOW = "service", "iris", "v1", "v2"


def settings(buffer_mib: int, window_seconds: int) -> dict[str, Any]:
    """The comparator config the program renders (serving/payload_comparator.settings) for a model
    with one shadow and the default tolerances."""
    return {
        "maxBufferedBytes": buffer_mib * 1024 * 1024,
        "maxBodyBytes": 1024 * 1024,
        "models": [
            {
                "namespace": NAMESPACE,
                "model": MODEL,
                "protocol": "open-inference-v2",
                "primary": PRIMARY,
                "shadows": [SHADOW],
                "windowSeconds": window_seconds,
                "absoluteTolerance": 1e-6,
                "relativeTolerance": 1e-4,
                "minTextSimilarity": 0.9,
                "sample": 1.0,
            }
        ],
    }


def bodies() -> tuple[bytes, bytes]:
    """A 10 KB Open Inference Protocol request and a 10 KB response (scores of 100 rows x 10 classes)."""
    values = [round(i * 0.001, 6) for i in range(1 + BODY_BYTES // 8)]
    request = json.dumps({"inputs": [{"name": "x", "shape": [1, len(values)], "datatype": "FP64", "data": values}]})
    scores = [round((i % 10) / 10 + i * 1e-5, 6) for i in range(1000)]
    response = json.dumps({"outputs": [{"name": "scores", "shape": [100, 10], "datatype": "FP32", "data": scores}]})
    return request.encode()[:BODY_BYTES].ljust(BODY_BYTES), response.encode()


def headers(pairs: dict[str, str]) -> Any:
    return base_pb2.HeaderMap(headers=[base_pb2.HeaderValue(key=k, raw_value=v.encode()) for k, v in pairs.items()])


def exchange(request_id: str, request: bytes, response: bytes) -> list[Any]:
    """The messages one exchange's ext_proc stream carries, in Envoy's order."""
    message = external_processor_pb2.ProcessingRequest
    request_headers = headers({":method": "POST", ":path": f"/v2/models/{MODEL}/infer", "x-request-id": request_id})
    return [
        message(request_headers=external_processor_pb2.HttpHeaders(headers=request_headers)),
        message(request_body=external_processor_pb2.HttpBody(body=request, end_of_stream=True)),
        message(response_headers=external_processor_pb2.HttpHeaders(headers=headers({":status": "200"}))),
        message(response_body=external_processor_pb2.HttpBody(body=response, end_of_stream=True)),
    ]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class Running:
    process: subprocess.Popen[bytes]
    grpc_address: str
    metrics_url: str

    def rss_mib(self) -> float:
        for line in Path(f"/proc/{self.process.pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
        return 0.0

    def cpu_seconds(self) -> float:
        fields = Path(f"/proc/{self.process.pid}/stat").read_text().rpartition(")")[2].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    def counters(self) -> dict[str, float]:
        """Each counter's total, by name and its telling label (result, side or reason)."""
        with urlopen(self.metrics_url, timeout=5) as answer:
            text = answer.read().decode()
        found: dict[str, float] = {}
        for family in text_string_to_metric_families(text):
            for sample in family.samples:
                label = sample.labels.get("result") or sample.labels.get("side") or sample.labels.get("reason") or ""
                key = f"{sample.name}{{{label}}}" if label else sample.name
                found[key] = found.get(key, 0.0) + sample.value
        return found


@contextlib.contextmanager
def comparator(config: dict[str, Any], directory: Path) -> Iterator[Running]:
    if not COMPARATOR.exists():
        sys.exit("the comparator lives in .venv-comparator: run `make .venv-comparator/.installed` first")
    path = directory / "comparator.json"
    path.write_text(json.dumps(config))
    grpc_port, metrics_port = free_port(), free_port()
    command = [str(COMPARATOR), "--config", str(path), "--host", "127.0.0.1"]
    command += ["--grpc-port", str(grpc_port), "--metrics-port", str(metrics_port)]
    process = subprocess.Popen(command, stderr=(directory / "comparator.log").open("w"))
    running = Running(process, f"127.0.0.1:{grpc_port}", f"http://127.0.0.1:{metrics_port}/metrics")
    try:
        deadline = time.monotonic() + 30
        while True:
            if process.poll() is not None:
                sys.exit("the comparator exited:\n" + (directory / "comparator.log").read_text())
            with contextlib.suppress(OSError):
                running.counters()
                break
            if time.monotonic() > deadline:
                sys.exit("the comparator did not start")
            time.sleep(0.2)
        yield running
    finally:
        process.terminate()
        process.wait(timeout=20)


failed: dict[str, int] = {}  # streams that ended in a gRPC error, by status code


async def drive(running: Running, rate: int, seconds: int, shadows: bool, concurrency: int) -> tuple[int, float]:
    """Send `rate` requests a second for `seconds`: each the primary's exchange and, with
    `shadows`, its shadow's. Returns the requests sent and the seconds it took."""
    request, response = bodies()
    metadata = {PRIMARY: (("x-inference-namespace", NAMESPACE), ("x-inference-model", MODEL))}
    slots = asyncio.Semaphore(concurrency)
    failed.clear()
    async with grpc.aio.insecure_channel(running.grpc_address) as channel:
        process = external_processor_pb2_grpc.ExternalProcessorStub(channel).Process

        async def stream(version: str, messages: list[Any]) -> None:
            async def iterate() -> AsyncIterator[Any]:
                for message in messages:
                    yield message

            try:
                call = process(iterate(), metadata=(*metadata[PRIMARY], ("x-inference-version", version)))
                async for _ in call:
                    pass
            except grpc.aio.AioRpcError as error:  # as Envoy would, fail open; but say how often
                failed[error.code().name] = failed.get(error.code().name, 0) + 1
            finally:
                slots.release()

        tasks: set[asyncio.Task[None]] = set()
        started = time.monotonic()
        sent = 0
        while (elapsed := time.monotonic() - started) < seconds:
            due = min(int(elapsed * rate) + 1, sent + rate // 50)  # behind: catch up 20 ms at a time
            while sent < due:
                messages = exchange(str(uuid.uuid4()), request, response)
                for version in (PRIMARY, SHADOW) if shadows else (PRIMARY,):
                    await slots.acquire()
                    task = asyncio.create_task(stream(version, messages))
                    tasks.add(task)
                    task.add_done_callback(tasks.discard)
                sent += 1
            await asyncio.sleep(0.002)
        await asyncio.gather(*tasks)
        return sent, time.monotonic() - started


def phase(name: str, args: argparse.Namespace, shadows: bool) -> None:
    with (
        tempfile.TemporaryDirectory() as directory,
        comparator(settings(args.buffer_mib, args.window), Path(directory)) as running,
    ):
        idle_rss = running.rss_mib()
        peak = [idle_rss]
        stop = False

        async def sample_memory() -> None:
            while not stop:
                peak.append(running.rss_mib())
                await asyncio.sleep(0.25)

        async def main() -> tuple[int, float]:
            nonlocal stop
            sampler = asyncio.create_task(sample_memory())
            try:
                return await drive(running, args.rate, args.seconds, shadows, args.concurrency)
            finally:
                stop = True
                await sampler

        cpu_before = running.cpu_seconds()
        sent, took = asyncio.run(main())
        time.sleep(1.5)  # the last streams settle
        counters, cpu = running.counters(), running.cpu_seconds() - cpu_before
        alive = running.process.poll() is None
    pairs = {k: v for k, v in counters.items() if k.startswith("inference_payload_pairs_total")}
    dropped = {k: v for k, v in counters.items() if k.startswith("inference_payload_dropped_total") and v}
    print(f"{name}: {sent:,} requests in {took:.1f} s ({sent / took:,.0f}/s, target {args.rate:,}/s)", end="")
    print(f", {sent * (2 if shadows else 1):,} exchanges of {BODY_BYTES // 1024} KB request bodies")
    print(f"  comparator RSS: {idle_rss:.0f} MiB idle, {max(peak):.0f} MiB peak (buffer bound {args.buffer_mib} MiB)")
    print(f"  comparator CPU: {cpu:.1f} s over {took:.0f} s ({cpu / took:.0%} of one core); still running: {alive}")
    print(f"  pairs: {', '.join(f'{k}={v:,.0f}' for k, v in sorted(pairs.items()))}")
    unpaired = {k: v for k, v in counters.items() if k.startswith("inference_payload_unpaired_total") and v}
    print(f"  dropped: {', '.join(f'{k}={v:,.0f}' for k, v in sorted(dropped.items())) or 'none'}")
    listed = ", ".join(f"{k}={v:,.0f}" for k, v in sorted(unpaired.items())) or "none"
    print(f"  unpaired (window {args.window} s): {listed}")
    print(f"  streams failing at the client: {', '.join(f'{k}={v:,}' for k, v in sorted(failed.items())) or 'none'}")


def main() -> None:
    sys.stdout.reconfigure(line_buffering=True)  # type: ignore[union-attr]  # each phase's lines as it ends
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--rate", type=int, default=1000, help="primary requests per second (default 1000)")
    parser.add_argument("--seconds", type=int, default=60, help="how long each phase sends (default 60)")
    parser.add_argument("--buffer-mib", type=int, default=64, help="the comparator's bufferMib (default 64)")
    parser.add_argument("--window", type=int, default=40, help="windowSeconds: timeout 30 s + 10 s (default 40)")
    parser.add_argument("--concurrency", type=int, default=256, help="streams open at once, at most (default 256)")
    parser.add_argument("--phase", choices=["paired", "unpaired", "both"], default="both")
    args = parser.parse_args()
    if args.phase in ("paired", "both"):
        phase("paired", args, shadows=True)
    if args.phase in ("unpaired", "both"):
        phase("unpaired", args, shadows=False)


if __name__ == "__main__":
    main()
