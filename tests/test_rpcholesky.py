"""RPCholesky of the RBF kernel (ops.rpcholesky) against a numpy reference that
replays the same random stream, on every CPU instruction set and under the
CUDA emulation.

The reference is the algorithm of csrc/common/rpcholesky_driver.h in float64:
SplitMix64 uniforms; per round c = min(block_size, rank - k) sampling uniforms
then c acceptance uniforms; a candidate is the first index whose running sum of
the residual diagonal exceeds u * total; the candidates' residual block gets a
Cholesky with rejection (accept j when v_j H0_jj < H_jj, drop it when
H_jj <= 100 eps(dtype)); the accepted pivots' columns are solved against R; the
residual diagonal is downdated, and zeroed at the pivots and dropped candidates.
"""

import numpy as np
import pytest
import torch
from scipy.linalg import solve_triangular

from dlmsvdd_ext import _C, ops

from conftest import rbf_reference

GOLDEN = 0x9E3779B97F4A7C15
NEGLIGIBLE = {np.float32: 100 * np.finfo(np.float32).eps, np.float64: 100 * np.finfo(np.float64).eps}
# Entry-wise agreement of L with the float64 reference.
L_TOL = {np.float32: 2e-4, np.float64: 1e-10}


def splitmix_uniforms(seed, start, count):
    """Uniforms start + 1 .. start + count of the stream for `seed`: draw t is
    mix(seed + t * golden) in wrapping uint64 arithmetic, the uniform its top 53 bits."""
    t = np.arange(start + 1, start + count + 1, dtype=np.uint64)
    z = np.uint64(seed) + t * np.uint64(GOLDEN)
    z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    z = z ^ (z >> np.uint64(31))
    return (z >> np.uint64(11)).astype(np.float64) * 2.0 ** -53


def reference_rpcholesky(X, gamma, rank, seed, block_size, negligible, stop_tol=1e-12):
    """float64 numpy replay of the compiled algorithm: (L, pivots)."""
    K = rbf_reference(X, X, gamma)
    n = K.shape[0]
    resid = np.ones(n)
    F = np.zeros((n, rank))
    pivots, drawn, k, trace0 = [], 0, 0, None
    while k < rank:
        w = np.maximum(resid, 0.0)
        cum = np.cumsum(w)
        total = cum[-1]
        trace0 = total if trace0 is None else trace0
        if total <= stop_tol * trace0 or w.max() <= negligible:
            break
        c = min(block_size, rank - k)
        u = splitmix_uniforms(seed, drawn, 2 * c)
        drawn += 2 * c
        cand = np.searchsorted(cum, u[:c] * total, side="right")
        cand[cand == n] = np.searchsorted(cum, total, side="left")
        H = K[np.ix_(cand, cand)] - F[cand, :k] @ F[cand, :k].T
        h0 = np.diag(H).copy()
        accepted, dropped, cols = [], [], []
        for j in range(c):
            if not H[j, j] > negligible:
                dropped.append(j)
            elif u[c + j] * h0[j] < H[j, j]:
                col = H[:, j] / np.sqrt(H[j, j])
                H -= np.outer(col, col)
                accepted.append(j)
                cols.append(col)
        chosen = cand[accepted]
        if len(chosen):
            R = np.tril(np.array(cols).T[accepted])
            G = K[:, chosen] - F[:, :k] @ F[chosen, :k].T
            new = solve_triangular(R, G.T, lower=True).T
            F[:, k:k + len(chosen)] = new
            resid = np.maximum(resid - (new ** 2).sum(1), 0.0)
            pivots.extend(chosen.tolist())
            k += len(chosen)
        resid[np.concatenate([chosen, cand[dropped]]).astype(np.int64)] = 0.0
    return F[:, :k], np.array(pivots, dtype=np.int64)


def clustered(rng, n, d, dtype, clusters=4):
    """Points around a few centres: a kernel whose spectrum decays, like real features."""
    centres = 3.0 * rng.standard_normal((clusters, d))
    X = centres[rng.integers(0, clusters, n)] + 0.7 * rng.standard_normal((n, d))
    return X.astype(dtype)


def kernel_error(X, gamma, L):
    """Trace of the residual K - L L^T, relative to tr K = N (the RPCholesky error measure)."""
    L = np.asarray(L, dtype=np.float64)
    return float(np.trace(rbf_reference(X, X, gamma) - L @ L.T)) / X.shape[0]


DTYPES = [np.float32, np.float64]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("block_size", [1, 3, 8])
def test_matches_reference(backend, dtype, block_size):
    rng = np.random.default_rng(block_size)
    n = 530 if "cuda_emulation" not in backend else 70  # the emulation is slow: few rows there
    X = clustered(rng, n, 5, dtype)
    gamma, rank, seed = 0.2, 24, 12345
    L, piv = ops.rpcholesky(X, gamma, rank, seed=seed, block_size=block_size, **backend)
    L_ref, piv_ref = reference_rpcholesky(X, gamma, rank, seed, block_size, NEGLIGIBLE[dtype])
    assert isinstance(L, np.ndarray) and L.dtype == dtype and piv.dtype == np.int64
    np.testing.assert_array_equal(piv, piv_ref)
    assert L.shape == (n, rank)
    np.testing.assert_allclose(L, L_ref, rtol=0, atol=L_TOL[dtype])


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("block_size", [16, 32])
def test_matches_reference_through_the_tiled_columns(cpu_isa, dtype, block_size):
    """More than 8 columns a round and d past one depth chunk (256): the pivot
    columns come from the tiled Gram kernel over X packed once (prefetched
    row panels, partial tiles kept between chunks), not the streaming path."""
    rng = np.random.default_rng(block_size)
    X = clustered(rng, 400, 300, dtype)
    gamma, rank, seed = 0.5 / 300, 64, 99
    L, piv = ops.rpcholesky(X, gamma, rank, seed=seed, block_size=block_size)
    L_ref, piv_ref = reference_rpcholesky(X, gamma, rank, seed, block_size, NEGLIGIBLE[dtype])
    np.testing.assert_array_equal(piv, piv_ref)
    np.testing.assert_allclose(L, L_ref, rtol=0, atol=L_TOL[dtype])


@pytest.mark.parametrize("dtype", DTYPES)
def test_emulated_grid_stride_matches_cpu(dtype):
    """More rows than the emulation's 2 blocks of 256 threads: the kernels' grid-stride loops."""
    rng = np.random.default_rng(7)
    X = clustered(rng, 600, 3, dtype)
    L_cpu, piv_cpu = ops.rpcholesky(X, 0.5, 10, seed=3, block_size=4)
    L_emu, piv_emu = ops.rpcholesky(X, 0.5, 10, seed=3, block_size=4, cuda_emulation=True)
    np.testing.assert_array_equal(piv_emu, piv_cpu)
    np.testing.assert_allclose(L_emu, L_cpu, rtol=0, atol=L_TOL[dtype])


@pytest.mark.parametrize("block_size", [1, 5])
def test_error_falls_with_rank_and_vanishes_at_full_rank(block_size):
    rng = np.random.default_rng(11)
    X = clustered(rng, 60, 3, np.float64)
    gamma = 0.3
    errors = []
    for rank in (2, 5, 10, 20, 40):
        L, _ = ops.rpcholesky(X, gamma, rank, seed=1, block_size=block_size)
        errors.append(kernel_error(X, gamma, L))
    assert all(a > b for a, b in zip(errors, errors[1:])), errors
    L, piv = ops.rpcholesky(X, gamma, 60, seed=1, block_size=block_size)
    assert L.shape[1] <= 60 and len(piv) == L.shape[1]
    K = rbf_reference(X, X, gamma)
    assert np.abs(K - L @ L.T).max() < 1e-8


def test_float32_full_rank_reaches_rounding_level():
    rng = np.random.default_rng(12)
    X = clustered(rng, 60, 3, np.float32)
    L, _ = ops.rpcholesky(X, 0.3, 60, seed=2, block_size=4)
    L = L.astype(np.float64)
    assert np.abs(rbf_reference(X, X, 0.3) - L @ L.T).max() < 1e-3


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("block_size", [1, 4])
def test_stops_early_at_the_kernels_rank(dtype, block_size):
    """Five distinct points, each repeated: K has rank 5, so the factor stops there."""
    rng = np.random.default_rng(5)
    X = np.repeat(rng.standard_normal((5, 3)), 8, axis=0).astype(dtype)
    L, piv = ops.rpcholesky(X, 0.5, 20, seed=0, block_size=block_size)
    assert L.shape == (40, 5) and len(piv) == 5
    assert len({int(p) // 8 for p in piv}) == 5  # one pivot per distinct point
    assert np.abs(rbf_reference(X, X, 0.5) - L.astype(np.float64) @ L.T.astype(np.float64)).max() < 1e-4


@pytest.mark.parametrize("block_size", [1, 6, 64])
def test_pivots_distinct_and_deterministic(block_size):
    rng = np.random.default_rng(9)
    X = clustered(rng, 300, 4, np.float64)
    L1, p1 = ops.rpcholesky(X, 0.4, 50, seed=77, block_size=block_size)
    L2, p2 = ops.rpcholesky(X, 0.4, 50, seed=77, block_size=block_size)
    assert len(set(p1.tolist())) == len(p1) == 50
    np.testing.assert_array_equal(p1, p2)
    np.testing.assert_array_equal(L1, L2)
    _, p3 = ops.rpcholesky(X, 0.4, 50, seed=78, block_size=block_size)
    assert not np.array_equal(p1, p3)


def test_simple_variant_is_a_prefix():
    """block_size 1 draws the same per step whatever the rank: rank 10 is a prefix of rank 30."""
    rng = np.random.default_rng(4)
    X = clustered(rng, 200, 4, np.float64)
    L10, p10 = ops.rpcholesky(X, 0.4, 10, seed=5)
    L30, p30 = ops.rpcholesky(X, 0.4, 30, seed=5)
    np.testing.assert_array_equal(p30[:10], p10)
    np.testing.assert_allclose(L30[:, :10], L10, rtol=0, atol=1e-12)


def test_torch_tensors_and_strided_rows():
    rng = np.random.default_rng(8)
    base = torch.from_numpy(clustered(rng, 100, 6, np.float32))
    X = base[:, :4]  # rows 6 apart: a strided view
    L, piv = ops.rpcholesky(X, 0.3, 12, seed=4, block_size=3)
    assert isinstance(L, torch.Tensor) and L.dtype == torch.float32 and L.shape == (100, 12)
    assert isinstance(piv, torch.Tensor) and piv.dtype == torch.int64
    L_ref, piv_ref = reference_rpcholesky(X.numpy(), 0.3, 12, 4, 3, NEGLIGIBLE[np.float32])
    np.testing.assert_array_equal(piv.numpy(), piv_ref)
    np.testing.assert_allclose(L.numpy(), L_ref, rtol=0, atol=L_TOL[np.float32])


def test_block_larger_than_rank():
    rng = np.random.default_rng(10)
    X = clustered(rng, 50, 3, np.float64)
    L, piv = ops.rpcholesky(X, 0.3, 7, seed=9, block_size=100)
    L_ref, piv_ref = reference_rpcholesky(X, 0.3, 7, 9, 7, NEGLIGIBLE[np.float64])
    np.testing.assert_array_equal(piv, piv_ref)
    np.testing.assert_allclose(L, L_ref, rtol=0, atol=L_TOL[np.float64])


@pytest.mark.parametrize("kwargs", [
    {"rank": 0}, {"rank": -1}, {"rank": 11}, {"gamma": 0.0}, {"gamma": -1.0}, {"gamma": float("nan")},
    {"block_size": 0}, {"seed": -1},
])
def test_bad_input_raises(kwargs):
    X = np.zeros((10, 2))
    args = {"gamma": 1.0, "rank": 3, **kwargs}
    with pytest.raises(ValueError):
        ops.rpcholesky(X, args.pop("gamma"), args.pop("rank"), **args)


@pytest.mark.parametrize("case", ["rank0", "rank_gt_n", "gamma", "block", "pivots_short", "pivots_dtype",
                                  "workspace_missing", "L_rows"])
def test_binding_validates(case):
    """The compiled entry point checks on its own (ValueError), not only the wrapper."""
    X = np.random.default_rng(0).standard_normal((10, 2))
    L = np.empty((10, 3))
    piv = np.empty(3, dtype=np.int64)
    args = dict(X=X, L=L, pivots=piv, gamma=1.0, seed=0, block_size=1)
    if case == "rank0":
        args["L"] = np.empty((10, 0))
    elif case == "rank_gt_n":
        args["L"], args["pivots"] = np.empty((10, 11)), np.empty(11, dtype=np.int64)
    elif case == "gamma":
        args["gamma"] = 0.0
    elif case == "block":
        args["block_size"] = 0
    elif case == "pivots_short":
        args["pivots"] = np.empty(2, dtype=np.int64)
    elif case == "pivots_dtype":
        args["pivots"] = np.empty(3, dtype=np.int32)
    elif case == "workspace_missing":
        args["cuda_emulation"] = True
    elif case == "L_rows":
        args["L"] = np.empty((9, 3))
    with pytest.raises(ValueError):
        _C.rpcholesky(**args)
