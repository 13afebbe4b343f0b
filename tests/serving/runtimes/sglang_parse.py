"""Parse `python3 -m sglang.launch_server` arguments with SGLang's own parser; runs in
.venv-sglang, not in the test venv.

Answers requests, one JSON list of arguments a line on stdin, with the parsed settings, or the
parser's error, as JSON (parser_process.py). prepare_server_args is what launch_server calls
first: argparse over every ServerArgs field, then msgspec's typed record. (Resolution,
resolve_once, reads the model's checkpoint and probes the device, so it does not run here.) It
imports nothing else of this project.
"""

import contextlib
import io
import sys
from pathlib import Path
from typing import Any

from sglang.srt.server_args import prepare_server_args

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))  # the checkout: the request loop beside this file
from tests.serving.runtimes.parser_process import serve

FIELDS = (
    "model_path",
    "served_model_name",
    "host",
    "port",
    "tp_size",
    "context_length",
    "dtype",
    "mem_fraction_static",
    "enable_metrics",
)


def handle(argv: list[str]) -> dict[str, Any]:
    errors = io.StringIO()
    try:
        with contextlib.redirect_stderr(errors):
            args = prepare_server_args(argv)
    except SystemExit:
        return {"error": errors.getvalue().strip().splitlines()[-1]}
    except (ValueError, TypeError) as error:
        return {"error": f"{type(error).__name__}: {error}"}
    return {field: getattr(args, field) for field in FIELDS}


if __name__ == "__main__":
    serve(handle)
