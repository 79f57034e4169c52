"""Real-GPU workload for bench/gpu/run.sh when PyTorch with CUDA is installed.
  torch_workload.py mem        allocate 64 MiB tensors until OOM; print allocated bytes and mem_get_info
  torch_workload.py sm <sec>   run fixed-size matmuls for <sec> seconds; print iterations per second
"""
import sys
import time

import torch


def mem():
    blocks, total = [], 0
    try:
        while True:
            blocks.append(torch.empty(64 << 20, dtype=torch.uint8, device="cuda"))
            total += 64 << 20
    except RuntimeError:
        pass
    free, tot = torch.cuda.mem_get_info()
    print(f"allocated={total} free={free} total={tot}")


def sm(secs):
    a = torch.randn(4096, 4096, device="cuda")
    b = torch.randn(4096, 4096, device="cuda")
    torch.cuda.synchronize()
    t0, n = time.time(), 0
    while True:
        for _ in range(10):
            a @ b
        torch.cuda.synchronize()
        n += 10
        el = time.time() - t0
        if el >= secs:
            print(f"kernels_per_s={n / el:.3f}")
            return


if __name__ == "__main__":
    if sys.argv[1] == "mem":
        mem()
    else:
        sm(float(sys.argv[2]))
