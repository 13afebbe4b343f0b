"""Loopback ports for the servers the tests start (MLServer, TorchServe, Prometheus).

A port found free is bound by its server a moment later, so two pytest-xdist workers must never
be handed the same one. Each worker takes ports from its own block below Linux's ephemeral range
(32768-60999, where bind(0) and outgoing connections draw from), from a random point on, and
never the same port twice.
"""

from __future__ import annotations

import itertools
import os
import secrets
import socket
from collections.abc import Iterator

LOWEST, END = 20000, 32768
_offsets: list[Iterator[int]] = []


def _worker() -> tuple[int, int]:
    """(this worker's index, number of workers); (0, 1) without xdist."""
    name = os.environ.get("PYTEST_XDIST_WORKER", "")  # gw0, gw1, ...
    count = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1"))
    index = int(name.removeprefix("gw")) if name.startswith("gw") else 0
    return index, max(count, 1)


def worker_ports() -> range:
    """This worker's block of ports."""
    index, count = _worker()
    size = (END - LOWEST) // count
    return range(LOWEST + index * size, LOWEST + (index + 1) * size)


def free_port() -> int:
    """A loopback port of this worker's block that nothing listens on now, not handed out before.
    The starting point is random (not the seeded `random`), so two test runs on one machine
    rarely meet in a block either."""
    block = worker_ports()
    if not _offsets:
        _offsets.append(itertools.count(secrets.randbelow(len(block))))
    for _ in block:
        port = block[next(_offsets[0]) % len(block)]
        with socket.socket() as sock:
            try:
                sock.bind(("127.0.0.1", port))
            except OSError:
                continue  # taken: by another program, or by a server of ours
        return port
    raise RuntimeError(f"no free loopback port in {block}")
