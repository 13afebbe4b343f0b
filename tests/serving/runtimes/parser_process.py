"""A server's own argument parser, in its own venv, started once per test module.

Importing vLLM or SGLang takes most of a parse (half a minute on a loaded CI machine), so the
parser script runs as one process that answers a JSON request per line (`serve` below) instead
of one process per command line. Answers carry a prefix, so whatever the server's libraries
print on stdout cannot be taken for one; stderr goes to a file, shown when the process fails.
"""

from __future__ import annotations

import atexit
import json
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import IO, Any

ANSWER = "\x1eanswer "


class ParserProcess:
    def __init__(self, python: Path, script: Path, missing: str) -> None:
        self.python, self.script, self.missing = python, script, missing
        self._process: subprocess.Popen[str] | None = None
        self._stderr: IO[str] | None = None

    def ask(self, request: Any) -> Any:
        process = self._started()
        assert process.stdin is not None
        assert process.stdout is not None
        process.stdin.write(json.dumps(request) + "\n")
        process.stdin.flush()
        for line in process.stdout:
            if line.startswith(ANSWER):
                return json.loads(line.removeprefix(ANSWER))
        raise AssertionError(f"{self.script.name} ended without an answer:\n{self._errors()}")

    def _started(self) -> subprocess.Popen[str]:
        assert self.python.exists(), self.missing
        if self._process is None or self._process.poll() is not None:
            self._stderr = tempfile.TemporaryFile("w+")  # noqa: SIM115 (closed in close())
            self._process = subprocess.Popen(
                [str(self.python), str(self.script)],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=self._stderr,
                text=True,
            )
            atexit.register(self.close)
        return self._process

    def _errors(self) -> str:
        if self._stderr is None:
            return ""
        self._stderr.seek(0)
        return self._stderr.read()[-4000:]

    def close(self) -> None:
        if self._process is not None:
            if self._process.stdin is not None:
                self._process.stdin.close()
            self._process.wait(timeout=60)
            self._process = None
        if self._stderr is not None:
            self._stderr.close()
            self._stderr = None


def serve(handle: Callable[[Any], Any]) -> None:
    """The parser script's loop: one JSON request per line on stdin, one answer line each."""
    for line in sys.stdin:
        if line.strip():
            print(ANSWER + json.dumps(handle(json.loads(line))), flush=True)
