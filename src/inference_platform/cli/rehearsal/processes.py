"""The processes a rehearsal starts, and stopping every one of them.

The Pulumi CLI starts the Kubernetes provider, which outlives it when the CLI is killed: this
process makes itself a child subreaper (Linux's PR_SET_CHILD_SUBREAPER), so that such orphans
become its children, which `stop_children` then finds, stops and reaps. Nothing started before
the rehearsal (`Children.before`) is touched."""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

PR_SET_CHILD_SUBREAPER = 36
STOP_SECONDS = 5.0


def adopt_orphans() -> bool:
    """Make this process its descendants' reaper; False where the system cannot (not Linux)."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return int(libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)) == 0
    except (OSError, AttributeError):
        return False


def child_pids() -> set[int]:
    """This process's children, adopted orphans among them (from /proc)."""
    own = os.getpid()
    found = set()
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        # pid (comm) state ppid ...: comm may hold spaces and parentheses, so split after the last ')'.
        fields = stat.rpartition(")")[2].split()
        if len(fields) > 1 and int(fields[1]) == own:
            found.add(int(entry.name))
    return found


def _reap(pid: int) -> bool:
    """Whether `pid` is gone (reaped here, or not ours to reap)."""
    try:
        done, _ = os.waitpid(pid, os.WNOHANG)
    except ChildProcessError:
        return True
    return done == pid


@dataclass
class Children:
    """The processes a rehearsal started (each in a process group of its own) and their logs."""

    directory: Path
    before: frozenset[int] = field(default_factory=lambda: frozenset(child_pids()))
    started: list[subprocess.Popen[bytes]] = field(default_factory=list)
    logs: list[IO[bytes]] = field(default_factory=list)

    def start(self, name: str, command: Sequence[str], env: dict[str, str]) -> subprocess.Popen[bytes]:
        log = (self.directory / f"{name}.log").open("wb")
        self.logs.append(log)
        process = subprocess.Popen(
            list(command),
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            env=env,
            start_new_session=True,
        )
        self.started.append(process)
        return process

    def exited(self) -> list[tuple[str, int]]:
        """Each started process that has exited, by its command, with its status."""
        return [(Path(str(p.args[0])).name, p.returncode) for p in self.started if p.poll() is not None]  # type: ignore[index]

    def stop(self) -> None:
        """Stop what was started, last first, then every other descendant this process adopted."""
        for process in reversed(self.started):
            _signal_group(process.pid, signal.SIGTERM)
        deadline = time.monotonic() + STOP_SECONDS
        for process in reversed(self.started):
            with contextlib.suppress(subprocess.TimeoutExpired):
                process.wait(timeout=max(0.1, deadline - time.monotonic()))
            if process.poll() is None:
                _signal_group(process.pid, signal.SIGKILL)
                process.wait()
        stop_children(self.before)
        for log in self.logs:
            log.close()


def _signal_group(pid: int, sig: signal.Signals) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, sig)
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.kill(pid, sig)


def stop_children(keep: frozenset[int]) -> None:
    """Stop and reap every child of this process but those in `keep`: SIGTERM, then SIGKILL."""
    deadline = time.monotonic() + STOP_SECONDS
    sig = signal.SIGTERM
    while True:
        pids = child_pids() - keep
        if not pids:
            return
        for pid in pids:
            if not _reap(pid):
                _signal_group(pid, sig)
        time.sleep(0.2)
        for pid in pids:
            _reap(pid)
        if time.monotonic() > deadline:
            sig = signal.SIGKILL
