"""rbf_matvec, rbf_columns, rbf_gram and sq_distances against a float64 numpy reference."""

import numpy as np
import pytest
import torch
from scipy.spatial.distance import cdist
from sklearn.metrics.pairwise import rbf_kernel

from dlmsvdd_ext import ops

from conftest import TOL, rbf_reference, rel_err, sample_points

DTYPES = [np.float32, np.float64]
# 1, 3, 17 and tile sizes plus one: the CPU register tile is 14 x 32 (AVX-512,
# float), 6 x 16 (AVX2) and so on; the CUDA tile is 64 x 64.
SIZES = [1, 3, 15, 17, 33, 65]
DEPTHS = [1, 3, 17, 2049]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("d", DEPTHS)
@pytest.mark.parametrize("nx,ny", [(1, 1), (3, 17), (17, 3), (15, 33), (65, 7), (33, 65)])
def test_matvec_matches_reference(backend, dtype, d, nx, ny):
    rng = np.random.default_rng(nx * 1000 + ny * 10 + d)
    Y = sample_points(rng, ny, d, dtype)
    X = sample_points(rng, nx, d, dtype, duplicate_from=Y)
    gamma = 1.0 / (2 * d)
    K = rbf_reference(X, Y, gamma)
    for k in (None, 1, 2, 5, 8):
        V = rng.standard_normal((ny,) if k is None else (ny, k)).astype(dtype)
        out = ops.rbf_matvec(X, Y, V, gamma, **backend)
        assert out.shape == ((nx,) if k is None else (nx, k))
        assert out.dtype == dtype
        assert rel_err(out, K @ V.astype(np.float64)) <= TOL[dtype]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("d", [1, 17, 2049])
@pytest.mark.parametrize("n", SIZES + [130])
def test_symmetric_matvec_matches_reference(backend, dtype, d, n):
    rng = np.random.default_rng(n * 7 + d)
    X = sample_points(rng, n, d, dtype)
    gamma = 1.0 / (2 * d)
    K = rbf_reference(X, X, gamma)
    for k in (None, 1, 3, 8):
        V = rng.standard_normal((n,) if k is None else (n, k)).astype(dtype)
        out = ops.rbf_matvec(X, None, V, gamma, **backend)
        assert rel_err(out, K @ V.astype(np.float64)) <= TOL[dtype]
        # Y given as the same array takes the symmetric path too and agrees.
        same = ops.rbf_matvec(X, X, V, gamma, **backend)
        assert rel_err(same, K @ V.astype(np.float64)) <= TOL[dtype]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("symmetric", [False, True])
def test_matvec_with_many_columns(backend, dtype, symmetric):
    """V wider than the fused register path (k = 20, like the score gradient's [a, a*Z])."""
    rng = np.random.default_rng(3)
    X = sample_points(rng, 37, 19, dtype)
    Y = X if symmetric else sample_points(rng, 29, 19, dtype)
    V = rng.standard_normal((Y.shape[0], 20)).astype(dtype)
    out = ops.rbf_matvec(X, Y, V, 0.05, **backend)
    assert rel_err(out, rbf_reference(X, Y, 0.05) @ V.astype(np.float64)) <= TOL[dtype]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("d", DEPTHS)
@pytest.mark.parametrize("m", [1, 2, 3, 8, 9])
def test_columns_match_reference(backend, dtype, d, m):
    rng = np.random.default_rng(m + d)
    X = sample_points(rng, 67, d, dtype)
    Y = X[[5, 0, 66, 2, 9, 11, 13, 17, 19][:m]].copy()
    gamma = 1.0 / d
    out = ops.rbf_columns(X, Y, gamma, **backend)
    assert out.shape == (67, m)
    assert rel_err(out, rbf_reference(X, Y, gamma)) <= TOL[dtype]
    # Each column point is a row of X: its own kernel value is exactly representable 1.
    assert abs(float(out[5, 0]) - 1.0) <= TOL[dtype]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("d", [1, 3, 17, 2049])
@pytest.mark.parametrize("nx,ny", [(1, 1), (17, 33), (65, 15), (70, 70)])
def test_gram_matches_sklearn(backend, dtype, d, nx, ny):
    rng = np.random.default_rng(nx + ny + d)
    X = sample_points(rng, nx, d, dtype)
    Y = sample_points(rng, ny, d, dtype, duplicate_from=X)
    gamma = 1.0 / (2 * d)
    ref = rbf_kernel(X.astype(np.float64), Y.astype(np.float64), gamma=gamma)
    assert rel_err(ops.rbf_gram(X, Y, gamma, **backend), ref) <= TOL[dtype]
    sym = ops.rbf_gram(X, None, gamma, **backend)
    assert rel_err(sym, rbf_kernel(X.astype(np.float64), gamma=gamma)) <= TOL[dtype]
    assert np.array_equal(sym, sym.T)


@pytest.mark.parametrize("dtype", DTYPES)
def test_sq_distances_match_scipy(backend, dtype):
    rng = np.random.default_rng(11)
    X = sample_points(rng, 40, 23, dtype)
    Y = sample_points(rng, 31, 23, dtype, duplicate_from=X)
    ref = cdist(X.astype(np.float64), Y.astype(np.float64), "sqeuclidean")
    out = ops.sq_distances(X, Y, **backend)
    # Distances go through the norm expansion: error relative to the norms' scale.
    assert np.max(np.abs(out - ref)) <= 50 * np.finfo(dtype).eps * np.max(ref)
    assert np.all(out >= 0)


def test_torch_inputs_and_strided_rows(backend):
    """torch tensors in, torch tensors out; row-strided views need no copy."""
    g = torch.Generator().manual_seed(0)
    big = torch.randn(50, 40, generator=g, dtype=torch.float64)
    X = big[3:40, :17]  # rows strided by 40
    Y = big[::2, 5:22]  # every other row
    V = torch.randn(Y.shape[0], 3, generator=g, dtype=torch.float64)
    assert not X.is_contiguous() and not Y.is_contiguous()
    out = ops.rbf_matvec(X, Y, V, 0.1, **backend)
    assert isinstance(out, torch.Tensor) and out.dtype == torch.float64
    ref = rbf_reference(X.numpy(), Y.numpy(), 0.1) @ V.numpy()
    assert rel_err(out.numpy(), ref) <= 1e-12
    V1 = V[:, 1]  # a strided 1-D V
    out1 = ops.rbf_matvec(X, Y, V1, 0.1, **backend)
    assert rel_err(out1.numpy(), rbf_reference(X.numpy(), Y.numpy(), 0.1) @ V1.numpy()) <= 1e-12


def test_isa_paths_agree_to_rounding():
    """Every instruction set computes the same thing (to float32 rounding)."""
    rng = np.random.default_rng(5)
    X = rng.standard_normal((300, 70)).astype(np.float32)
    V = rng.standard_normal(300).astype(np.float32)
    before = ops.cpu_isa()
    try:
        results = []
        for isa in ops.supported_cpu_isas():
            ops.set_cpu_isa(isa)
            results.append(ops.rbf_matvec(X, None, V, 1 / 140))
    finally:
        ops.set_cpu_isa(before)
    for r in results[1:]:
        np.testing.assert_allclose(r, results[0], rtol=2e-5, atol=2e-5 * np.abs(results[0]).max())
