"""Parse `vllm serve` arguments with vLLM's own parser; runs in .venv-vllm, not in the test venv.

Answers requests, one JSON line each on stdin ({"given": arguments, "fields": more to show}),
with the parsed settings (FIELDS and those named), or the parser's error, as JSON
(parser_process.py). It imports nothing else of this project.
"""

import contextlib
import io
import os
import sys
from pathlib import Path
from typing import Any

os.environ.setdefault("VLLM_TARGET_DEVICE", "cpu")  # vLLM cannot infer a device on a CPU-only machine

from vllm.entrypoints.common.cli_args import make_arg_parser, validate_parsed_serve_args
from vllm.utils.argparse_utils import FlexibleArgumentParser

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))  # the checkout: the request loop beside this file
from tests.serving.runtimes.parser_process import serve

FIELDS = (
    "model_tag",
    "served_model_name",
    "host",
    "port",
    "tensor_parallel_size",
    "max_model_len",
    "dtype",
    "gpu_memory_utilization",
)


def parse(argv: list[str], fields: list[str]) -> dict[str, Any]:
    # allow_abbrev=False: a prefix of a flag must not pass for the flag.
    parser = make_arg_parser(FlexibleArgumentParser(prog="vllm serve", allow_abbrev=False))
    errors = io.StringIO()
    try:
        with contextlib.redirect_stderr(errors):
            namespace = parser.parse_args(argv)
        validate_parsed_serve_args(namespace)
    except SystemExit:
        return {"error": errors.getvalue().strip().splitlines()[-1]}
    except (ValueError, TypeError) as error:
        return {"error": f"{type(error).__name__}: {error}"}
    return {field: getattr(namespace, field) for field in (*FIELDS, *fields)}


def handle(request: dict[str, Any]) -> Any:
    """One command line (a list of arguments), or several (a list of them), and the fields to show."""
    given, fields = request["given"], request["fields"]
    if given and all(isinstance(argv, list) for argv in given):
        return [parse(argv, fields) for argv in given]
    return parse(given, fields)


if __name__ == "__main__":
    serve(handle)
