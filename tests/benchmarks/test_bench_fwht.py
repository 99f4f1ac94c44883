"""Microbenchmarks of the CPU fast Walsh-Hadamard transform against torch, in the same process.

Run: pytest tests/benchmarks/test_bench_fwht.py -o addopts="" --benchmark-only -s
The case is 6000 x 2048 float32 (a SORF / Fastfood block over a CNN feature set).
Ours is timed three ways: ops.fwht(X) as called (a fresh 49 MB output, whose
first-touch page faults cost as much as the transform), into a preallocated
out, and in place. The baselines are the torch butterfly of dlmsvdd_ext.reference,
the same butterfly with two buffers (no allocation per level), allocated per
call or (to compare with our preallocated out) beforehand, the dense Hadamard
matmul X @ H, and a bare copy (the memory-traffic floor of an out-of-place
transform). The interleaved comparison alternates them per
round, so that machine noise hits all alike; its ratios go to extra_info.
"""

import pytest
import scipy.linalg
import torch

from dlmsvdd_ext.reference import fwht_torch
from dlmsvdd.experiments.kernel_bench import time_interleaved as _interleaved
from dlmsvdd_ext import ops

ROWS, LENGTH = 6000, 2048


def _data():
    return torch.randn(ROWS, LENGTH, generator=torch.Generator().manual_seed(0))


def _hadamard(length):
    return torch.from_numpy(scipy.linalg.hadamard(length)).float()


def _torch_two_buffers(X, buffers=None):
    """fwht_torch's levels with torch.add / torch.sub into two buffers in turn:
    the same arithmetic without a new 49 MB tensor per level. The buffers are
    allocated per call unless given (then the result is one of them)."""
    L = X.shape[-1]
    buffers = buffers or (torch.empty_like(X), torch.empty_like(X))
    src, h, level = X, 1, 0
    while h < L:
        dst = buffers[level % 2]
        a = src.view(-1, L // (2 * h), 2, h)
        b = dst.view(-1, L // (2 * h), 2, h)
        torch.add(a[:, :, 0], a[:, :, 1], out=b[:, :, 0])
        torch.sub(a[:, :, 0], a[:, :, 1], out=b[:, :, 1])
        src, h, level = dst, 2 * h, level + 1
    return src


@pytest.mark.parametrize("impl", ["dlmsvdd", "torch", "matmul"])
def test_fwht(benchmark, impl):
    X = _data()
    benchmark.group = f"fwht {ROWS}x{LENGTH} float32"
    if impl == "dlmsvdd":
        benchmark.pedantic(ops.fwht, args=(X,), rounds=10, warmup_rounds=1)
    elif impl == "torch":
        benchmark.pedantic(fwht_torch, args=(X,), rounds=3, warmup_rounds=1)
    else:
        H = _hadamard(LENGTH)
        benchmark.pedantic(torch.matmul, args=(X, H), rounds=3, warmup_rounds=1)


def test_fwht_interleaved(benchmark):
    X = _data()
    H = _hadamard(LENGTH)
    out = torch.empty_like(X)
    buffers = (torch.empty_like(X), torch.empty_like(X))
    Y = X.clone()
    expected = fwht_torch(X)
    scale = expected.abs().max()
    for result in (ops.fwht(X), _torch_two_buffers(X), _torch_two_buffers(X, buffers), X @ H):
        assert float((result - expected).abs().max() / scale) < 1e-5
    t = _interleaved({
        "ours": lambda: ops.fwht(X),
        "ours_preallocated": lambda: ops.fwht(X, out=out),
        # Normalised, so that repeated transforms of Y stay bounded.
        "ours_in_place": lambda: ops.fwht(Y, normalized=True, out=Y),
        "torch": lambda: fwht_torch(X),
        "torch_two_buffers": lambda: _torch_two_buffers(X),
        "torch_two_buffers_preallocated": lambda: _torch_two_buffers(X, buffers),
        "matmul": lambda: X @ H,
        "copy": lambda: out.copy_(X),
    }, 7)
    ratios = {
        "speedup_vs_torch": t["torch"] / t["ours"],
        "speedup_preallocated_vs_torch": t["torch"] / t["ours_preallocated"],
        "speedup_vs_torch_two_buffers": t["torch_two_buffers"] / t["ours"],
        "speedup_both_preallocated_vs_torch_two_buffers": t["torch_two_buffers_preallocated"] / t["ours_preallocated"],
        "speedup_vs_matmul": t["matmul"] / t["ours"],
        "preallocated_over_copy": t["ours_preallocated"] / t["copy"],
    }
    benchmark.extra_info.update({k: round(v, 5) for k, v in {**t, **ratios}.items()})
    ms = {k: v * 1e3 for k, v in t.items()}
    print(f"\nfwht {ROWS}x{LENGTH} float32: ours {ms['ours']:.2f} ms (preallocated out {ms['ours_preallocated']:.2f}, "
          f"in place {ms['ours_in_place']:.2f}; copy {ms['copy']:.2f}); torch butterfly {ms['torch']:.1f} ms "
          f"-> {ratios['speedup_vs_torch']:.1f}x ({ratios['speedup_preallocated_vs_torch']:.1f}x preallocated); "
          f"torch two buffers {ms['torch_two_buffers']:.1f} ms -> {ratios['speedup_vs_torch_two_buffers']:.1f}x "
          f"(both preallocated: {ms['torch_two_buffers_preallocated']:.1f} ms -> "
          f"{ratios['speedup_both_preallocated_vs_torch_two_buffers']:.1f}x); "
          f"dense matmul {ms['matmul']:.1f} ms -> {ratios['speedup_vs_matmul']:.1f}x")
    benchmark.pedantic(lambda: None, rounds=1)  # the timings above are the measurement
