"""Kernel approximations: speed of the feature maps and error against the exact kernel.

    pytest tests/benchmarks/test_bench_kernels.py -o addopts="" --benchmark-only -s
"""

import warnings

import numpy as np
import pytest
import torch
from sklearn.kernel_approximation import Nystroem, RBFSampler

from dlmsvdd import baselines
from dlmsvdd.bench import time_interleaved, unit_rows
from dlmsvdd_ext import kernels, ops

N, D = 6000, 2048


@pytest.fixture(scope="module")
def features():
    X = unit_rows(N, D, 0)
    return X, 1.0 / ops.median_sq_distance(X, max_samples=2000, seed=0)


def _rel_error(Z, K):
    Z = torch.as_tensor(Z).double()
    return float(torch.linalg.norm(Z @ Z.T - K) / torch.linalg.norm(K))


def test_structured_maps_against_dense_rff(benchmark, features):
    """SORF / Fastfood feature maps at m = 4096 (the fused compiled map, as
    transform runs without gradients) against scikit-learn's RBFSampler and a
    torch RFF (x @ Omega^T, then cos), timed interleaved in this process; and
    the relative Frobenius error of Z Z^T on 1000 of the points for each, so
    that the comparison at equal m is one at no worse error."""
    X, gamma = features
    m = 4096
    maps = {name: kernels.make(name, gamma, m, random_state=0).fit(X[:10]) for name in ("sorf", "fastfood", "rff")}
    sampler = RBFSampler(gamma=gamma, n_components=m, random_state=0).fit(X[:10].numpy())
    Xn = X.numpy()
    with torch.no_grad():
        t = time_interleaved({**{k: (lambda b=b: b.transform(X)) for k, b in maps.items()},
                              "sklearn_rbfsampler": lambda: sampler.transform(Xn)}, 7)
        sub = X[:1000]
        K = ops.rbf_gram(sub.double(), None, gamma)
        err = {k: _rel_error(b.transform(sub), K) for k, b in maps.items()}
        err["sklearn_rbfsampler"] = _rel_error(sampler.transform(sub.numpy()), K)
    ratios = {f"{k}_vs_{base}": t[base] / t[k] for k in ("sorf", "fastfood") for base in ("rff", "sklearn_rbfsampler")}
    benchmark.extra_info.update({**{f"s_{k}": v for k, v in t.items()}, **{f"err_{k}": v for k, v in err.items()}, **ratios})
    print(f"\nfeature maps, {N} x {D} -> {m} (median of 7 interleaved rounds):")
    for k, v in t.items():
        print(f"  {k:>18}: {1e3 * v:8.1f} ms   rel. Frobenius error of Z Z^T {err[k]:.4f}")
    print("  speed-ups: " + ", ".join(f"{k} {v:.1f}x" for k, v in ratios.items()))
    benchmark.pedantic(lambda: None, rounds=1)


def test_nystrom_against_torch_and_sklearn(benchmark, features):
    X, gamma = features
    m = 1024
    ours = kernels.make("nystrom", gamma, m, random_state=0)
    t = time_interleaved({"ours": lambda: ours.fit_transform(X),
                          "torch": lambda: baselines.nystrom_torch(X, gamma, m, seed=0)}, 3)
    sub = slice(0, 1000)
    K = ops.rbf_gram(X[sub].double(), None, gamma)
    sk = Nystroem(gamma=gamma, n_components=m, random_state=0).fit(X.numpy())
    err = {"ours": _rel_error(ours.fit_transform(X)[sub], K),
           "torch": _rel_error(baselines.nystrom_torch(X, gamma, m, seed=0)[sub], K),
           "sklearn": _rel_error(sk.transform(X[sub].numpy()), K)}
    benchmark.extra_info.update({**{f"s_{k}": v for k, v in t.items()}, **{f"err_{k}": v for k, v in err.items()}})
    print(f"\nnystrom m={m}: ours {t['ours']:.3f}s torch {t['torch']:.3f}s -> {t['torch'] / t['ours']:.2f}x; "
          f"errors {err}")
    benchmark.pedantic(lambda: None, rounds=1)


def test_error_versus_m_table(benchmark):
    """Relative Frobenius error of Z Z^T on 500 Gaussian points (d = 64), mean of 3 seeds."""
    rng = np.random.default_rng(0)
    X = torch.from_numpy(rng.standard_normal((500, 64)))
    gamma = 1.0 / ops.median_sq_distance(X)
    K = ops.rbf_gram(X, None, gamma)
    table = {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for name, ms in [("rff", (256, 1024, 4096)), ("qmc_rff", (256, 1024, 4096)), ("orf", (256, 1024, 4096)),
                         ("sorf", (256, 1024, 4096)), ("fastfood", (256, 1024, 4096)),
                         ("nystrom", (32, 64, 128, 250)), ("rpcholesky", (32, 64, 128, 250))]:
            table[name] = {m: float(np.mean([_rel_error(kernels.make(name, gamma, m, random_state=s).fit_transform(X), K)
                                             for s in range(3)])) for m in ms}
    for name, row in table.items():
        print(f"\n{name:>10}: " + "  ".join(f"m={m}: {e:.4f}" for m, e in row.items()), end="")
    print()
    benchmark.extra_info.update({f"{k}_m{m}": e for k, row in table.items() for m, e in row.items()})
    benchmark.pedantic(lambda: None, rounds=1)
