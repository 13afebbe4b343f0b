"""Parse `python3 -m sglang.launch_server` arguments with SGLang's own parser; runs in
.venv-sglang, not in the test venv.

Reads a JSON list of arguments on stdin and prints the parsed settings, or the parser's error, as
JSON. prepare_server_args is what launch_server calls first: argparse over every ServerArgs field,
then msgspec's typed record. (Resolution, resolve_once, reads the model's checkpoint and probes the
device, so it does not run here.) It imports nothing of this project.
"""

import contextlib
import io
import json
import sys

from sglang.srt.server_args import prepare_server_args

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


def main() -> None:
    argv = json.load(sys.stdin)
    errors = io.StringIO()
    try:
        with contextlib.redirect_stderr(errors):
            args = prepare_server_args(argv)
    except SystemExit:
        print(json.dumps({"error": errors.getvalue().strip().splitlines()[-1]}))
        return
    except (ValueError, TypeError) as error:
        print(json.dumps({"error": f"{type(error).__name__}: {error}"}))
        return
    print(json.dumps({field: getattr(args, field) for field in FIELDS}))


if __name__ == "__main__":
    main()
