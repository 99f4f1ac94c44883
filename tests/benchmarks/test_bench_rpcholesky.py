"""RPCholesky of a 6000 x 2048 float32 set at rank 1024: the compiled block
variant (ops.rpcholesky) against a block RPCholesky written in numpy
(dlmsvdd.baselines.block_rpcholesky_numpy), in the same process.

Run: pytest tests/benchmarks/test_bench_rpcholesky.py -o addopts="" --benchmark-only -s
The interleaved comparison alternates, each round, ours and the numpy version
in float32 and in float64 (numpy's default, and the reference code's dtype)
at the same block size, each at the block size where it is fastest here, and
the floor: the bare matrix product X X_S^T of the rank pivot columns
(torch), which any implementation has to compute. Each call starts after a
0.3 s settle (see time_interleaved). Its times, ratios and the factors'
residual traces are printed and stored in extra_info.
"""

import numpy as np
import pytest
import torch

from dlmsvdd.baselines import block_rpcholesky_numpy
from dlmsvdd.bench import clustered_features
from dlmsvdd.bench import time_interleaved as _interleaved
from dlmsvdd_ext import ops

N, D, RANK = 6000, 2048, 1024
BLOCK = 128  # candidates per round, for both implementations
# Each one's fastest of 32, 64, 100, 128, 256 here: numpy's larger products
# amortise its per-round passes; ours has the least rejection work at 32.
NUMPY_BEST_BLOCK, OURS_BEST_BLOCK = 256, 32


@pytest.fixture(scope="module")
def data():
    """Clustered unit-norm float32 features (like CNN features of a one-vs-rest
    task) and the median-heuristic gamma: a kernel whose spectrum decays."""
    X, _ = clustered_features(N // 2, N - N // 2, D, seed=0)
    X = X.numpy()
    return X, 1.0 / ops.median_sq_distance(X)


def _ours(X, gamma, block_size=BLOCK):
    return ops.rpcholesky(X, gamma, RANK, seed=0, block_size=block_size)


def _numpy(X, gamma, block_size=BLOCK):
    return block_rpcholesky_numpy(X, gamma, RANK, seed=0, block_size=block_size)


def _pivot_columns(X, pivots):
    """The bare product behind the pivot columns, X X_S^T (N x rank): the floor."""
    return X @ X[pivots].T


def _residual_trace(L):
    """tr(K - L L^T) / tr K; the RBF kernel's diagonal is 1."""
    return 1.0 - float(np.einsum("ij,ij->", L, L, dtype=np.float64)) / L.shape[0]


@pytest.mark.parametrize("impl", ["dlmsvdd", "numpy"])
def test_rpcholesky(benchmark, data, impl):
    benchmark.group = f"rpcholesky N{N}-d{D} rank {RANK} block {BLOCK}"
    benchmark.pedantic(_ours if impl == "dlmsvdd" else _numpy, args=data, rounds=3, warmup_rounds=1)


def test_rpcholesky_interleaved(benchmark, data):
    X, gamma = data
    X64 = X.astype(np.float64)
    Xt, piv_t = torch.from_numpy(X), torch.from_numpy(_ours(X, gamma)[1])
    t = _interleaved({
        "ours": lambda: _ours(X, gamma),
        "ours_best_block": lambda: _ours(X, gamma, OURS_BEST_BLOCK),
        "numpy_f32": lambda: _numpy(X, gamma),
        "numpy_f64": lambda: _numpy(X64, gamma),
        "numpy_f32_best_block": lambda: _numpy(X, gamma, NUMPY_BEST_BLOCK),
        "pivot_columns_matmul": lambda: _pivot_columns(Xt, piv_t),
    }, 5, settle=0.3)
    (L, piv), (F, _), (F64, _) = _ours(X, gamma), _numpy(X, gamma), _numpy(X64, gamma)
    assert L.shape == (N, RANK) and len(np.unique(piv)) == RANK
    info = {**t, **{f"speedup_vs_{k}": t[k] / t["ours"] for k in t if k.startswith("numpy")},
            "best_block_speedup_vs_numpy_f32_best_block": t["numpy_f32_best_block"] / t["ours_best_block"],
            "ours_over_matmul_floor": t["ours"] / t["pivot_columns_matmul"],
            "residual_trace_ours": _residual_trace(L), "residual_trace_numpy_f32": _residual_trace(F),
            "residual_trace_numpy_f64": _residual_trace(F64)}
    benchmark.extra_info.update({k: round(v, 6) for k, v in info.items()})
    print(f"\nrpcholesky N{N} d{D} rank {RANK}, block {BLOCK} unless said (median of 5, seconds):")
    for k in t:
        ratio = f" -> ours {t[k] / t['ours']:.2f}x faster" if k.startswith("numpy") else ""
        print(f"  {k:22s} {t[k]:.3f}{ratio}")
    print(f"  each at its fastest block: ours {OURS_BEST_BLOCK} {t['ours_best_block']:.3f}, numpy f32 {NUMPY_BEST_BLOCK} "
          f"-> {info['best_block_speedup_vs_numpy_f32_best_block']:.2f}x")
    print(f"  ours / floor {info['ours_over_matmul_floor']:.2f}; residual trace ours {info['residual_trace_ours']:.4f}"
          f" numpy f32 {info['residual_trace_numpy_f32']:.4f} f64 {info['residual_trace_numpy_f64']:.4f}")
    benchmark.pedantic(lambda: None, rounds=1)  # the timings above are the measurement
