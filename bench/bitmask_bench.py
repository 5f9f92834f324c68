"""Time ``glrmask.apply_token_bitmask_`` at batch 1 / 128 / 4096 with a 128k vocabulary.

    python bench/bitmask_bench.py                      # CPU (torch float32), and CUDA when present
    python bench/bitmask_bench.py --vocab 128256 --batches 1 128 --dtype bfloat16

CPU: the default branch-free path, next to the plain-torch ``masked_fill_`` path it replaced (the
fallback on devices without Triton). CUDA: the fused Triton kernel (and the torch fallback), timed
with CUDA events over many launches, so the number includes the launch. Masks are random with half
the bits set, the worst case for a branchy implementation. Targets (issue #14): <= 1 ms at batch 1
on CPU; <= 6 us at batch 1 and <= 250 us at batch 4096 on an H100/H200-class GPU.
"""
from __future__ import annotations

import argparse
import time

import numpy as np
import torch

import glrmask
from glrmask.kernels import triton_apply
from glrmask.kernels.apply import torch_apply_token_bitmask_


def cpu_time(fn, reps: int) -> float:
    fn()
    best = float("inf")
    for _ in range(3):
        t0 = time.perf_counter()
        for _ in range(reps):
            fn()
        best = min(best, (time.perf_counter() - t0) / reps)
    return best


def cuda_time(fn, reps: int) -> float:
    for _ in range(10):
        fn()
    torch.cuda.synchronize()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(reps):
        fn()
    end.record()
    torch.cuda.synchronize()
    return start.elapsed_time(end) / 1e3 / reps


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--vocab", type=int, default=128_000)
    parser.add_argument("--batches", type=int, nargs="+", default=[1, 128, 4096])
    parser.add_argument("--dtype", default="float32", choices=["float32", "float16", "bfloat16"])
    parser.add_argument("--threads", type=int, default=1, help="torch CPU threads (default 1)")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    dtype = getattr(torch, args.dtype)
    rng = np.random.default_rng(0)
    words = (args.vocab + 31) // 32
    print(f"V={args.vocab} dtype={args.dtype} torch threads={args.threads}")
    print(f"{'device':6s} {'batch':>6s} {'glrmask':>12s} {'torch masked_fill':>18s}")
    for batch in args.batches:
        bitmask = rng.integers(-2**31, 2**31, size=(batch, words), dtype=np.int64).astype(np.int32)
        logits = torch.randn(batch, args.vocab).to(dtype)
        reps = max(1, 2000 // batch)
        ours = cpu_time(lambda: glrmask.apply_token_bitmask_(logits, bitmask), reps)
        ref_bits = torch.from_numpy(bitmask)
        theirs = cpu_time(lambda: torch_apply_token_bitmask_(logits, ref_bits), max(1, reps // 4))
        print(f"{'cpu':6s} {batch:6d} {ours * 1e6:10.1f}us {theirs * 1e6:16.1f}us", flush=True)
        del logits
    if not torch.cuda.is_available():
        print("cuda: not available")
        return
    print(f"cuda: {torch.cuda.get_device_name()}  triton kernel: {triton_apply.triton is not None}")
    for batch in args.batches:
        bitmask = torch.from_numpy(
            rng.integers(-2**31, 2**31, size=(batch, words), dtype=np.int64).astype(np.int32)).cuda()
        logits = torch.randn(batch, args.vocab, device="cuda").to(dtype)
        ours = cuda_time(lambda: glrmask.apply_token_bitmask_(logits, bitmask), 200)
        theirs = cuda_time(lambda: torch_apply_token_bitmask_(logits, bitmask), 50)
        print(f"{'cuda':6s} {batch:6d} {ours * 1e6:10.1f}us {theirs * 1e6:16.1f}us", flush=True)
        del logits


if __name__ == "__main__":
    main()
