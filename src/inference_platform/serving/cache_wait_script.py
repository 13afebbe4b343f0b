"""The first init container of a cached version's pod (docs/model-cache.md): wait until the cache
agent's completion marker on this node names the version's URI and its adapters', then exit 0; past
the bound, exit 1 with what is missing and where, so the pod fails its startup rather than serving a
half-fetched model (the kubelet runs it again, with its back-off).

Run as `python -c <this file> <dir> <seconds> <uri> [<adapter>=<uri> ...]` in the pinned
storage-initializer image (serving/model_cache_volumes.py builds the call): standard library only,
and nothing in it reads or writes anything but the marker.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

MARKER = ".complete"  # cached_files.MARKER: this file runs alone in the pod, so it names its own copy
EXIT_MISSING = 1
EXIT_USAGE = 2


def expected(arguments: list[str]) -> tuple[Path, float, str, dict[str, str]]:
    """(the version's directory, the bound in seconds, its URI, {adapter: URI}) from the command line."""
    directory, seconds, uri, *pairs = arguments
    adapters = dict(pair.split("=", 1) for pair in pairs)
    return Path(directory), float(seconds), uri, adapters


def problem(marker: Path, uri: str, adapters: dict[str, str]) -> str | None:
    """What keeps the copy under `marker`'s directory from being this version's, or None when it is."""
    try:
        held = json.loads(marker.read_text())
    except FileNotFoundError:
        return f"no completion marker {marker}: the cache agent has not finished fetching {uri} on this node"
    except (OSError, ValueError) as error:
        return f"the completion marker {marker} cannot be read ({error})"
    if not isinstance(held, dict):
        return f"the completion marker {marker} is not a JSON object"
    if held.get("uri") != uri:
        return f"the completion marker {marker} names {held.get('uri')!r}, not this version's {uri}"
    held_adapters = held.get("adapters") or {}
    wrong = sorted(
        f"{name} ({want}; the marker has {held_adapters.get(name)!r})"
        for name, want in adapters.items()
        if held_adapters.get(name) != want
    )
    if wrong:
        return f"the completion marker {marker} lacks adapters: {', '.join(wrong)}"
    return None


def wait(directory: Path, seconds: float, uri: str, adapters: dict[str, str], poll: float = 5.0) -> str | None:
    """Look for the marker until it is right or `seconds` have passed: None, or the last problem."""
    deadline = time.monotonic() + seconds
    while True:
        found = problem(directory / MARKER, uri, adapters)
        if found is None or time.monotonic() >= deadline:
            return found
        time.sleep(min(poll, max(deadline - time.monotonic(), 0.0)))


def main(arguments: list[str]) -> int:
    try:
        directory, seconds, uri, adapters = expected(arguments)
    except ValueError:
        print("usage: <dir> <seconds> <uri> [<adapter>=<uri> ...]", file=sys.stderr)
        return EXIT_USAGE
    found = wait(directory, seconds, uri, adapters)
    if found is not None:
        print(f"model cache: after {seconds:g}s, {found}", file=sys.stderr)
        return EXIT_MISSING
    print(f"model cache: {uri} is complete in {directory}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
