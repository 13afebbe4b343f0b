"""How much GPU memory a serving process holds outside its framework's allocator, on a real GPU.

Under a HAMi vGPU memory cap, `--gpu-memory-utilization` for vLLM is derived as
`(cap - CAP_RESERVE_MIB) / cap` (src/inference_platform/serving/runtimes/vllm.py): the reserve is meant for what
vLLM's allocator never sees, the CUDA context, cuBLAS state and NCCL's communicator. This script
measures that memory stage by stage with PyTorch (the framework vLLM runs on) and NVML, and
prints it next to the reserve. Run it on a machine with an NVIDIA GPU and PyTorch:

    python bench/vgpu_memory_reserve.py

It needs neither this project's virtualenv nor Pulumi: the reserve is read from the source.
"""

from __future__ import annotations

import ast
import os
import socket
from pathlib import Path
from typing import Any

import pynvml  # nvidia-ml-py, beside PyTorch on GPU machines
import torch
import torch.distributed as dist

VLLM_RUNTIME = Path(__file__).resolve().parent.parent / "components" / "runtimes" / "vllm.py"
MIB = 1024 * 1024


def cap_reserve_mib() -> int:
    """CAP_RESERVE_MIB as the vLLM runtime module assigns it, without importing the module."""
    for node in ast.parse(VLLM_RUNTIME.read_text()).body:
        if isinstance(node, ast.Assign) and any(
            isinstance(target, ast.Name) and target.id == "CAP_RESERVE_MIB" for target in node.targets
        ):
            value = ast.literal_eval(node.value)
            if isinstance(value, int):
                return value
    raise SystemExit(f"CAP_RESERVE_MIB not found in {VLLM_RUNTIME}")


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


def main() -> None:
    if not torch.cuda.is_available():
        raise SystemExit("no CUDA device: run this on a GPU machine")
    pynvml.nvmlInit()  # the device's memory before this process creates a CUDA context
    handle = pynvml.nvmlDeviceGetHandleByIndex(0)

    def device_used_mib() -> float:
        used: int = pynvml.nvmlDeviceGetMemoryInfo(handle).used
        return used / MIB

    before_context = device_used_mib()
    name = torch.cuda.get_device_name(0)
    total = pynvml.nvmlDeviceGetMemoryInfo(handle).total / MIB
    print(f"device: {name}, {total:.0f} MiB; used before this process: {before_context:.0f} MiB")
    nccl = ".".join(map(str, torch.cuda.nccl.version()))  # type: ignore[no-untyped-call]
    print(f"torch {torch.__version__}, CUDA {torch.version.cuda}, NCCL {nccl}")

    rows: list[tuple[str, float, float]] = []

    def record(stage: str) -> None:
        torch.cuda.synchronize()
        rows.append((stage, device_used_mib() - before_context, torch.cuda.memory_reserved() / MIB))

    torch.cuda.init()  # type: ignore[no-untyped-call]
    torch.empty(1, device="cuda")
    record("CUDA context")

    a = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
    b = a @ a  # cuBLAS handle and workspace
    record("+ cuBLAS bf16 matmul")

    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(free_port()))
    dist.init_process_group("nccl", rank=0, world_size=1, device_id=torch.device("cuda:0"))
    reduced: Any = b[:1024].clone()
    dist.all_reduce(reduced)  # creates the NCCL communicator and its buffers
    record("+ NCCL communicator, all_reduce")

    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        a.mul_(1.0)
    graph.replay()
    record("+ one captured CUDA graph")
    dist.destroy_process_group()

    reserve = cap_reserve_mib()
    print()
    print(f"{'stage':34} {'device used':>12} {'allocator':>10} {'outside':>9}")
    for stage, used, allocator in rows:
        print(f"{stage:34} {used:>9.0f} MiB {allocator:>6.0f} MiB {used - allocator:>5.0f} MiB")
    outside = rows[-1][1] - rows[-1][2]
    print()
    print(
        f"outside the allocator: {outside:.0f} MiB; CAP_RESERVE_MIB: {reserve} MiB "
        f"({'covers it' if outside <= reserve else 'TOO SMALL'}, {reserve - outside:.0f} MiB to spare)"
    )


if __name__ == "__main__":
    main()
