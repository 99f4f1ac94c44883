"""The fast Walsh-Hadamard transform against scipy.linalg.hadamard, on every CPU
instruction set and the emulated CUDA kernels (the `backend` fixture)."""

import functools

import numpy as np
import pytest
import scipy.linalg
import torch

from dlmsvdd_ext import ops

from conftest import rel_err

DTYPES = [np.float32, np.float64]
# Against a float64 reference of the same (rounded) inputs; errors grow like
# log2(L) roundings, here below 2e-7 and 2e-15.
TOL = {np.float32: 1e-6, np.float64: 1e-13}
# Every length the Hadamard matrix reference covers; 2^13 is 64 MB of int8.
LENGTHS = [2 ** n for n in range(1, 14)]
# Beyond a CPU chunk (16 KB) and the CUDA tile (4096): the second pass over the row.
LONG_LENGTHS = [2 ** 14, 2 ** 15]


@functools.lru_cache(maxsize=None)
def _hadamard(L):
    return scipy.linalg.hadamard(L, dtype=np.int8)


def hadamard_reference(X):
    """float64 X @ H (H is symmetric, so each row is H x), H converted in column blocks."""
    X = np.asarray(X, dtype=np.float64)
    H = _hadamard(X.shape[-1])
    out = np.empty_like(X)
    for j in range(0, H.shape[1], 1024):
        out[..., j:j + 1024] = X @ H[:, j:j + 1024].astype(np.float64)
    return out


def butterfly_reference(X):
    """float64 FWHT by numpy butterflies, for rows too long for a Hadamard matrix."""
    Y = np.array(X, dtype=np.float64)
    rows, L = Y.shape
    h = 1
    while h < L:
        pairs = Y.reshape(rows, L // (2 * h), 2, h)
        a, b = pairs[:, :, 0, :].copy(), pairs[:, :, 1, :].copy()
        pairs[:, :, 0, :], pairs[:, :, 1, :] = a + b, a - b
        h *= 2
    return Y


def sample(rng, shape, dtype):
    return rng.standard_normal(shape).astype(dtype)


def test_butterfly_reference_is_hadamard():
    X = np.random.default_rng(0).standard_normal((3, 256))
    np.testing.assert_allclose(butterfly_reference(X), hadamard_reference(X), rtol=0, atol=1e-12)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("L", LENGTHS)
def test_matches_hadamard(backend, dtype, L):
    X = sample(np.random.default_rng(L), (5, L), dtype)
    ref = hadamard_reference(X)
    out = ops.fwht(X, **backend)
    assert out.shape == X.shape and out.dtype == dtype
    assert rel_err(out, ref) <= TOL[dtype]
    normalized = ops.fwht(X, normalized=True, **backend)
    assert rel_err(normalized, ref / np.sqrt(L)) <= TOL[dtype]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("L", LONG_LENGTHS)
def test_long_rows(backend, dtype, L):
    X = sample(np.random.default_rng(L), (2, L), dtype)
    out = ops.fwht(X, **backend)
    assert rel_err(out, butterfly_reference(X)) <= TOL[dtype]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("L", [2, 4, 8, 16, 32, 64])
def test_many_short_rows(backend, dtype, L):
    """Rows shorter than (or one) SIMD vector: the CPU packs several per vector,
    and a CUDA tile holds many rows; 101 rows leave a partial vector and tile."""
    X = sample(np.random.default_rng(L + 1), (101, L), dtype)
    assert rel_err(ops.fwht(X, **backend), hadamard_reference(X)) <= TOL[dtype]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("L", [2, 64, 2048])
def test_many_rows_in_threads(dtype, L):
    """Enough rows for the OpenMP team on the CPU."""
    X = sample(np.random.default_rng(7), (40000 // L * 4 + 3, L), dtype)
    assert rel_err(ops.fwht(X), hadamard_reference(X)) <= TOL[dtype]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("L", [2, 16, 512, 8192])
def test_twice(backend, dtype, L):
    """H H = L I, so the normalised transform is its own inverse."""
    X = sample(np.random.default_rng(3), (3, L), dtype)
    twice = ops.fwht(ops.fwht(X, **backend), **backend)
    assert rel_err(twice, L * X.astype(np.float64)) <= TOL[dtype]
    back = ops.fwht(ops.fwht(X, normalized=True, **backend), normalized=True, **backend)
    assert rel_err(back, X.astype(np.float64)) <= TOL[dtype]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("L", [4, 128, 16384])
def test_in_place(backend, dtype, L):
    X = sample(np.random.default_rng(4), (3, L), dtype)
    expected = ops.fwht(X, normalized=True, **backend)
    Y = X.copy()
    result = ops.fwht(Y, normalized=True, out=Y, **backend)
    assert result is Y
    np.testing.assert_array_equal(Y, expected)  # the same operations in the same order


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("L", [8, 256, 16384])
def test_strided_rows(backend, dtype, L):
    """x and out are column slices of wider matrices; nothing outside them is touched."""
    rng = np.random.default_rng(5)
    wide = sample(rng, (4, L + 9), dtype)
    x = wide[:, 3:3 + L]
    target = np.full((4, L + 5), 7.0, dtype=dtype)
    out = target[:, 1:1 + L]
    assert ops.fwht(x, out=out, **backend) is out
    assert rel_err(out, butterfly_reference(x)) <= TOL[dtype]
    assert np.all(target[:, 0] == 7.0) and np.all(target[:, 1 + L:] == 7.0)
    # In place on a strided view.
    before = x.copy()
    ops.fwht(x, out=x, **backend)
    np.testing.assert_array_equal(x, out)
    assert rel_err(x, butterfly_reference(before)) <= TOL[dtype]


def test_torch_tensors_and_one_row(backend):
    X = torch.randn(3, 64, dtype=torch.float64, generator=torch.Generator().manual_seed(0))
    out = ops.fwht(X, **backend)
    assert isinstance(out, torch.Tensor) and out.dtype == torch.float64
    assert rel_err(out.numpy(), hadamard_reference(X.numpy())) <= TOL[np.float64]
    v = ops.fwht(X[1], normalized=True, **backend)  # 1-D: one row
    assert v.shape == (64,)
    assert rel_err(v.numpy(), hadamard_reference(X[1:2].numpy())[0] / 8) <= TOL[np.float64]


def test_no_rows(backend):
    # torch: numpy exports a size-0 array with column stride 0, which the DLPack bridge refuses.
    assert ops.fwht(torch.empty((0, 8)), **backend).shape == (0, 8)
    with pytest.raises(ValueError, match="power of two"):
        ops.fwht(torch.empty((0, 6)), **backend)


@pytest.mark.parametrize("L", [0, 1, 3, 6, 12, 100, 3 * 1024, 2 ** 16])
def test_bad_lengths_raise(backend, L):
    with pytest.raises(ValueError, match="power of two from 2 to 32768"):
        ops.fwht(np.ones((2, L), dtype=np.float32), **backend)


def test_bad_arguments():
    X = np.ones((3, 8), dtype=np.float32)
    with pytest.raises(ValueError, match="shape"):
        ops.fwht(X, out=np.empty((3, 16), dtype=np.float32))
    with pytest.raises(TypeError):
        ops.fwht(X, out=np.empty((3, 8), dtype=np.float64))
    with pytest.raises(TypeError):
        ops.fwht(np.ones((3, 8), dtype=np.int32))
    with pytest.raises(ValueError, match="1-D"):
        ops.fwht(np.ones((2, 3, 8), dtype=np.float32))
    wide = np.ones((3, 12), dtype=np.float32)
    with pytest.raises(ValueError, match="overlaps"):
        ops.fwht(wide[:, :8], out=wide[:, 4:])
    frozen = np.ones((3, 8), dtype=np.float32)
    frozen.flags.writeable = False
    with pytest.raises(ValueError, match="read-only"):
        ops.fwht(X, out=frozen)
