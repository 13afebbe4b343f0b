"""inference-comparator: serve Envoy's ext_proc on --grpc-port and Prometheus metrics on --metrics-port.

    inference-comparator --config /etc/comparator/config.json [--grpc-port 9001] [--metrics-port 9090] [--host 0.0.0.0]

Exit codes: 0 after SIGTERM or SIGINT, 2 for a bad config (or bad arguments), 1 when a port cannot be bound.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import signal
import sys
from collections.abc import Sequence

from prometheus_client import CollectorRegistry, start_http_server

from inference_comparator import __version__
from inference_comparator.config import ConfigError, load_config
from inference_comparator.join import Joiner
from inference_comparator.metrics import PrometheusSink
from inference_comparator.server import serve

log = logging.getLogger("inference_comparator")


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="inference-comparator",
        description="Compare a model's shadow responses with its primary's, as Envoy's ext_proc streams them.",
    )
    parser.add_argument("--config", required=True, metavar="PATH", help="the comparator's JSON config file")
    parser.add_argument("--grpc-port", type=int, default=9001, help="ext_proc gRPC port (default 9001)")
    parser.add_argument("--metrics-port", type=int, default=9090, help="Prometheus /metrics port (default 9090)")
    parser.add_argument("--host", default="0.0.0.0", help="address to listen on (default 0.0.0.0)")
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    return parser


async def _run(joiner: Joiner, host: str, port: int) -> int:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, stop.set)
    try:
        await serve(joiner, host, port, stop)
    except RuntimeError as error:
        print(f"inference-comparator: {error}", file=sys.stderr)
        return 1
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s", stream=sys.stderr)
    try:
        config = load_config(args.config)
    except ConfigError as error:
        print(f"inference-comparator: bad config: {error}", file=sys.stderr)
        return 2
    registry = CollectorRegistry()
    joiner = Joiner(config, PrometheusSink(registry, config))
    try:
        metrics_server, _ = start_http_server(args.metrics_port, args.host, registry)
    except OSError as error:
        print(f"inference-comparator: cannot serve metrics on {args.metrics_port}: {error.strerror}", file=sys.stderr)
        return 1
    log.info("metrics on port %d; comparing %d models", args.metrics_port, len(config.models))
    try:
        return asyncio.run(_run(joiner, args.host, args.grpc_port))
    finally:
        metrics_server.shutdown()


if __name__ == "__main__":
    sys.exit(main())
