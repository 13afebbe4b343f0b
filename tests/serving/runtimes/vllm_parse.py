"""Parse `vllm serve` arguments with vLLM's own parser; runs in .venv-vllm, not in the test venv.

Reads a JSON list of arguments on stdin and prints the parsed settings (FIELDS, and any field
named on the command line), or the parser's error, as JSON. It imports nothing of this project.
"""

import contextlib
import io
import json
import os
import sys
from typing import Any

os.environ.setdefault("VLLM_TARGET_DEVICE", "cpu")  # vLLM cannot infer a device on a CPU-only machine

from vllm.entrypoints.common.cli_args import make_arg_parser, validate_parsed_serve_args
from vllm.utils.argparse_utils import FlexibleArgumentParser

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


def parse(argv: list[str]) -> dict[str, Any]:
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
    return {field: getattr(namespace, field) for field in (*FIELDS, *sys.argv[1:])}


def main() -> None:
    """One command line (a list of arguments), or several (a list of them) parsed in one process."""
    given = json.load(sys.stdin)
    if given and all(isinstance(argv, list) for argv in given):
        print(json.dumps([parse(argv) for argv in given]))
    else:
        print(json.dumps(parse(given)))


if __name__ == "__main__":
    main()
