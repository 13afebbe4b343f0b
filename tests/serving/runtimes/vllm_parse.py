"""Parse `vllm serve` arguments with vLLM's own parser; runs in .venv-vllm, not in the test venv.

Answers requests, one JSON line each on stdin ({"given": arguments, "fields": more to show}),
with the parsed settings (FIELDS and those named), or the parser's error, as JSON
(parser_process.py). A parsed value vLLM keeps as a dataclass (--lora-modules' LoRAModulePath)
is answered as its fields. The field `lora_config` answers the LoRAConfig vLLM's engine builds
from the parsed LoRA settings (EngineArgs.create_engine_config, which also needs the model's
files, builds it the same way), or its refusal. It imports nothing else of this project.
"""

import contextlib
import dataclasses
import io
import os
import sys
from pathlib import Path
from typing import Any

os.environ.setdefault("VLLM_TARGET_DEVICE", "cpu")  # vLLM cannot infer a device on a CPU-only machine

from vllm.config.lora import LoRAConfig
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
    answer = {field: plain(getattr(namespace, field)) for field in (*FIELDS, *fields) if field != "lora_config"}
    if "lora_config" in fields:
        answer["lora_config"] = lora_config(namespace)
    return answer


def plain(value: Any) -> Any:
    if isinstance(value, list):
        return [plain(item) for item in value]
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return dataclasses.asdict(value)
    return value


def lora_config(namespace: Any) -> Any:
    """The engine's LoRAConfig from the parsed settings, as arg_utils builds it (None without --enable-lora)."""
    if not namespace.enable_lora:
        return None
    try:
        config = LoRAConfig(
            max_lora_rank=namespace.max_lora_rank,
            max_loras=namespace.max_loras,
            max_cpu_loras=namespace.max_cpu_loras if namespace.max_cpu_loras and namespace.max_cpu_loras > 0 else None,
        )
    except ValueError as error:
        return {"error": str(error)}
    return {"max_loras": config.max_loras, "max_lora_rank": config.max_lora_rank, "max_cpu_loras": config.max_cpu_loras}


def handle(request: dict[str, Any]) -> Any:
    """One command line (a list of arguments), or several (a list of them), and the fields to show."""
    given, fields = request["given"], request["fields"]
    if given and all(isinstance(argv, list) for argv in given):
        return [parse(argv, fields) for argv in given]
    return parse(given, fields)


if __name__ == "__main__":
    serve(handle)
