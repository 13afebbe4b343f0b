"""Parse `vllm serve` arguments with vLLM's own parser; runs in .venv-vllm, not in the test venv.

Reads a JSON list of arguments on stdin and prints the parsed settings (FIELDS, and any field
named on the command line), or the parser's error, as JSON. It imports nothing of this project.
"""

import contextlib
import io
import json
import os
import sys

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


def main() -> None:
    argv = json.load(sys.stdin)
    # allow_abbrev=False: a prefix of a flag must not pass for the flag.
    parser = make_arg_parser(FlexibleArgumentParser(prog="vllm serve", allow_abbrev=False))
    errors = io.StringIO()
    try:
        with contextlib.redirect_stderr(errors):
            namespace = parser.parse_args(argv)
        validate_parsed_serve_args(namespace)
    except SystemExit:
        print(json.dumps({"error": errors.getvalue().strip().splitlines()[-1]}))
        return
    except (ValueError, TypeError) as error:
        print(json.dumps({"error": f"{type(error).__name__}: {error}"}))
        return
    print(json.dumps({field: getattr(namespace, field) for field in (*FIELDS, *sys.argv[1:])}))


if __name__ == "__main__":
    main()
