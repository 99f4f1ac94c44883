"""RPCholesky of a 6000 x 2048 float32 set at rank 1024: the compiled block
variant (ops.rpcholesky) against a block RPCholesky written in numpy
(dlmsvdd.baselines.block_rpcholesky_numpy), in the same process.

Run: pytest tests/benchmarks/test_bench_rpcholesky.py -o addopts="" --benchmark-only -s
Both take the same block size. The interleaved comparison alternates the two
each round, so that machine noise hits both alike; its times, ratio and the
factors' residual traces are printed and stored in extra_info.
"""

import time

import numpy as np
import pytest

from dlmsvdd.baselines import block_rpcholesky_numpy
from dlmsvdd.bench import clustered_features
from dlmsvdd.bench import time_interleaved as _interleaved
from dlmsvdd_ext import ops

N, D, RANK = 6000, 2048, 1024
BLOCK = 128  # candidates per round, for both implementations


@pytest.fixture(scope="module")
def data():
    """Clustered unit-norm float32 features (like CNN features of a one-vs-rest
    task) and the median-heuristic gamma: a kernel whose spectrum decays."""
    X, _ = clustered_features(N // 2, N - N // 2, D, seed=0)
    X = X.numpy()
    return X, 1.0 / ops.median_sq_distance(X)


def _ours(X, gamma):
    return ops.rpcholesky(X, gamma, RANK, seed=0, block_size=BLOCK)


def _numpy(X, gamma):
    return block_rpcholesky_numpy(X, gamma, RANK, seed=0, block_size=BLOCK)


def _pause():
    """Lets each library's idle threads go to sleep before the other runs:
    OpenBLAS's spin for ~0.1 s after a call (its THREAD_TIMEOUT) and would
    take one of the two cores from whatever runs next."""
    time.sleep(0.3)


def _residual_trace(L):
    """tr(K - L L^T) / tr K; the RBF kernel's diagonal is 1."""
    return 1.0 - float(np.einsum("ij,ij->", L, L, dtype=np.float64)) / L.shape[0]


@pytest.mark.parametrize("impl", ["dlmsvdd", "numpy"])
def test_rpcholesky(benchmark, data, impl):
    benchmark.group = f"rpcholesky N{N}-d{D} rank {RANK} block {BLOCK}"
    benchmark.pedantic(_ours if impl == "dlmsvdd" else _numpy, args=data, rounds=3, warmup_rounds=1)


def test_rpcholesky_interleaved(benchmark, data):
    X, gamma = data
    t = _interleaved({"ours": lambda: _ours(X, gamma), "pause": _pause,
                      "numpy": lambda: _numpy(X, gamma), "pause_": _pause}, 5)
    del t["pause"], t["pause_"]
    (L, piv), (F, _) = _ours(X, gamma), _numpy(X, gamma)
    assert L.shape == (N, RANK) and len(np.unique(piv)) == RANK
    info = {**t, "speedup_vs_numpy": t["numpy"] / t["ours"],
            "residual_trace_ours": _residual_trace(L), "residual_trace_numpy": _residual_trace(F)}
    benchmark.extra_info.update({k: round(v, 6) for k, v in info.items()})
    print(f"\nrpcholesky N{N} d{D} rank {RANK} block {BLOCK}: ours {t['ours']:.3f}s numpy {t['numpy']:.3f}s "
          f"-> {info['speedup_vs_numpy']:.2f}x; residual trace ours {info['residual_trace_ours']:.4f} "
          f"numpy {info['residual_trace_numpy']:.4f}")
    benchmark.pedantic(lambda: None, rounds=1)  # the timings above are the measurement
