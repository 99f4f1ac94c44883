"""Microbenchmarks of the CPU RBF kernels against torch, in the same process.

Run: pytest tests/benchmarks -o addopts="" --benchmark-only -s
Each case has pytest-benchmark timings per implementation, and an interleaved
comparison (ours, torch, bare matmul alternating per round, so that machine
noise hits all three alike) whose ratios are printed and stored in extra_info.
"""

import pytest
import torch

from dlmsvdd_ext import reference as torch_baselines
from dlmsvdd.experiments.kernel_bench import time_interleaved as _interleaved
from dlmsvdd.experiments.kernel_bench import unit_rows
from dlmsvdd_ext import ops

MATVEC_CASES = [(6000, 2048), (20000, 512), (20000, 64)]
GRAM_CASES = [(6000, 2048), (6000, 64)]


def _data(n, d, seed=0):
    """Unit rows like L2-normalised CNN features: squared distances near 2, gamma 1."""
    v = torch.randn(n, generator=torch.Generator().manual_seed(seed + 2))
    return unit_rows(n, d, seed), unit_rows(n, d, seed + 1), v, 1.0


def _case_id(case):
    return f"N{case[0]}-d{case[1]}"


@pytest.mark.parametrize("symmetric", [False, True], ids=["XY", "XX"])
@pytest.mark.parametrize("impl", ["dlmsvdd", "torch"])
@pytest.mark.parametrize("case", MATVEC_CASES, ids=_case_id)
def test_rbf_matvec(benchmark, case, impl, symmetric):
    X, Y, v, gamma = _data(*case)
    Y = X if symmetric else Y
    benchmark.group = f"rbf_matvec {_case_id(case)} {'Y=X' if symmetric else 'X!=Y'}"
    if impl == "dlmsvdd":
        benchmark.pedantic(ops.rbf_matvec, args=(X, Y, v, gamma), rounds=3, warmup_rounds=1)
    else:
        benchmark.pedantic(torch_baselines.rbf_matvec, args=(X, Y, v, gamma), rounds=3, warmup_rounds=1)


@pytest.mark.parametrize("case", MATVEC_CASES, ids=_case_id)
def test_rbf_matvec_interleaved(benchmark, case):
    X, Y, v, gamma = _data(*case)
    rounds = 5 if case[0] <= 6000 else 3
    t = _interleaved({
        "ours_xy": lambda: ops.rbf_matvec(X, Y, v, gamma),
        "torch_xy": lambda: torch_baselines.rbf_matvec(X, Y, v, gamma),
        "matmul_xy": lambda: torch_baselines.cross_product(X, Y),
        "ours_xx": lambda: ops.rbf_matvec(X, X, v, gamma),
        "torch_xx": lambda: torch_baselines.rbf_matvec(X, X, v, gamma),
    }, rounds)
    ratios = {
        "speedup_vs_torch_xy": t["torch_xy"] / t["ours_xy"],
        "speedup_vs_matmul_xy": t["matmul_xy"] / t["ours_xy"],
        "speedup_vs_torch_xx": t["torch_xx"] / t["ours_xx"],
        "gflops_ours_xy": 2 * case[0] ** 2 * case[1] / t["ours_xy"] / 1e9,
    }
    benchmark.extra_info.update({k: round(v, 4) for k, v in {**t, **ratios}.items()})
    print(f"\nrbf_matvec {_case_id(case)}: ours {t['ours_xy']:.3f}s torch {t['torch_xy']:.3f}s "
          f"matmul {t['matmul_xy']:.3f}s -> {ratios['speedup_vs_torch_xy']:.2f}x torch, "
          f"{ratios['speedup_vs_matmul_xy']:.2f}x bare matmul ({ratios['gflops_ours_xy']:.0f} GFLOP/s); "
          f"Y=X: ours {t['ours_xx']:.3f}s torch {t['torch_xx']:.3f}s -> {ratios['speedup_vs_torch_xx']:.2f}x")
    benchmark.pedantic(lambda: None, rounds=1)  # the timings above are the measurement


@pytest.mark.parametrize("case", GRAM_CASES, ids=_case_id)
def test_rbf_gram_interleaved(benchmark, case):
    X, Y, _, gamma = _data(*case)
    t = _interleaved({
        "ours_xy": lambda: ops.rbf_gram(X, Y, gamma),
        "torch_xy": lambda: torch_baselines.rbf_gram(X, Y, gamma),
        "ours_xx": lambda: ops.rbf_gram(X, None, gamma),
        "torch_xx": lambda: torch_baselines.rbf_gram(X, X, gamma),
    }, 5)
    ratios = {"speedup_vs_torch_xy": t["torch_xy"] / t["ours_xy"],
              "speedup_vs_torch_xx": t["torch_xx"] / t["ours_xx"]}
    benchmark.extra_info.update({k: round(v, 4) for k, v in {**t, **ratios}.items()})
    print(f"\nrbf_gram {_case_id(case)}: ours {t['ours_xy']:.3f}s torch addmm+exp {t['torch_xy']:.3f}s -> "
          f"{ratios['speedup_vs_torch_xy']:.2f}x; Y=X: ours {t['ours_xx']:.3f}s torch {t['torch_xx']:.3f}s -> "
          f"{ratios['speedup_vs_torch_xx']:.2f}x")
    benchmark.pedantic(lambda: None, rounds=1)


def test_rbf_columns(benchmark):
    """Two kernel columns of a 6000 x 2048 set (one Frank-Wolfe step) against torch."""
    X, _, _, gamma = _data(6000, 2048)
    cols = X[[17, 4242]].contiguous()
    t = _interleaved({
        "ours": lambda: ops.rbf_columns(X, cols, gamma),
        "torch": lambda: torch_baselines.rbf_gram(X, cols, gamma),
    }, 21)
    benchmark.extra_info.update({**t, "speedup_vs_torch": t["torch"] / t["ours"]})
    print(f"\nrbf_columns 6000x2048, 2 columns: ours {t['ours'] * 1e3:.2f} ms torch {t['torch'] * 1e3:.2f} ms "
          f"-> {t['torch'] / t['ours']:.2f}x")
    benchmark.pedantic(ops.rbf_columns, args=(X, cols, gamma), rounds=20, warmup_rounds=2)


def test_rbf_matvec_per_instruction_set(benchmark):
    """K(X, Y) v and K(X, X) v at N 6000, d 512 under each instruction set this
    CPU runs (ops.set_cpu_isa), interleaved with the bare matrix product of the
    same shape: GFLOP/s per set, for machines without AVX-512. The sets'
    results are first checked against each other."""
    X, Y, v, gamma = _data(6000, 512)
    isas = ops.supported_cpu_isas()
    active = ops.cpu_isa()

    def under(isa, fn):
        def run():
            ops.set_cpu_isa(isa)
            fn()
        return run

    reference = ops.rbf_matvec(X, Y, v, gamma)
    fns = {"matmul_xy": lambda: torch_baselines.cross_product(X, Y)}
    for isa in isas:
        fns[f"{isa}_xy"] = under(isa, lambda: ops.rbf_matvec(X, Y, v, gamma))
        fns[f"{isa}_xx"] = under(isa, lambda: ops.rbf_matvec(X, None, v, gamma))
    try:
        for isa in isas:
            ops.set_cpu_isa(isa)
            torch.testing.assert_close(ops.rbf_matvec(X, Y, v, gamma), reference, rtol=1e-4, atol=1e-3)
        t = _interleaved(fns, 3, settle=0.3)
    finally:
        ops.set_cpu_isa(active)
    flops = 2 * 6000 * 6000 * 512
    gflops = {k: (flops / 2 if k.endswith("_xx") else flops) / s / 1e9 for k, s in t.items()}
    benchmark.extra_info.update({f"gflops_{k}": round(g, 1) for k, g in gflops.items()})
    print("\nrbf_matvec N6000-d512 GFLOP/s: " + ", ".join(f"{k} {g:.0f}" for k, g in gflops.items()))
    benchmark.pedantic(lambda: None, rounds=1)  # the timings above are the measurement
