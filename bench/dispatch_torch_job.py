"""A small real GPU job for bench/dispatch_gpu_check.py: allocates about --mib MiB with torch on the GPU it is
given (CUDA_VISIBLE_DEVICES), multiplies matrices for --seconds, then writes torch's own peak
(`torch.cuda.max_memory_reserved`, MiB) to --out as JSON.

    python bench/dispatch_torch_job.py --mib 8000 --seconds 15 --out peak.json
"""

from __future__ import annotations

import argparse
import json
import time

import torch


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--mib", type=int, default=8000, help="MiB to allocate (one float32 tensor)")
    p.add_argument("--seconds", type=float, default=15.0, help="how long to compute")
    p.add_argument("--out", required=True, help="JSON file for torch's peak")
    a = p.parse_args()
    device = torch.device("cuda")
    block = torch.empty(a.mib * (1 << 20) // 4, dtype=torch.float32, device=device)
    block.fill_(1.0)
    x = torch.randn(2048, 2048, device=device)
    until = time.monotonic() + a.seconds
    while time.monotonic() < until:
        x = torch.tanh(x @ x) + block[: x.numel()].view_as(x) * 0
        torch.cuda.synchronize()
    peak = torch.cuda.max_memory_reserved() / (1 << 20)
    with open(a.out, "w") as f:
        json.dump({"max_memory_reserved_mib": peak, "device": torch.cuda.get_device_name(0)}, f)


if __name__ == "__main__":
    main()
