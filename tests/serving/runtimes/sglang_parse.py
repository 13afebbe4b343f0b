"""Parse `python3 -m sglang.launch_server` arguments with SGLang's own parser; runs in
.venv-sglang, not in the test venv.

Answers requests, one JSON list of arguments a line on stdin, with the parsed settings, or the
parser's error, as JSON (parser_process.py). prepare_server_args is what launch_server calls
first: argparse over every ServerArgs field, then msgspec's typed record. (Resolution,
resolve_once, reads the model's checkpoint and probes the device, so it does not run here.) With
LoRA on, the one resolution hook that decides LoRA, check_lora_server_args (which the pipeline's
validation hook calls), does run: it needs neither, parses --lora-paths into the adapters SGLang
loads and refuses what SGLang refuses; the answer then carries the LoRA settings as resolved. It
imports nothing else of this project.
"""

import contextlib
import io
import sys
from pathlib import Path
from typing import Any

from sglang.srt.arg_groups.lora_hook import check_lora_server_args
from sglang.srt.arg_groups.model_override_base import resolved_view
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
    answer = {field: getattr(args, field) for field in FIELDS}
    if args.enable_lora or args.lora_paths:
        try:
            check_lora_server_args(args)
        except (AssertionError, ValueError) as error:
            return {"error": f"{type(error).__name__}: {error}"}
        resolved = resolved_view(args)
        answer |= {
            "enable_lora": resolved.enable_lora,
            "lora_paths": [{"name": ref.lora_name, "path": ref.lora_path} for ref in resolved.lora_paths],
            "max_loras_per_batch": resolved.max_loras_per_batch,
            "max_lora_rank": resolved.max_lora_rank,
            "max_loaded_loras": resolved.max_loaded_loras,
        }
    return answer


if __name__ == "__main__":
    serve(handle)
