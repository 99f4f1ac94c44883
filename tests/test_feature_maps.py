"""The fused SORF and Fastfood feature maps (ops.sorf_features, ops.fastfood_features)
against explicit dense matrices built with scipy.linalg.hadamard and against the
torch composition of kernels.py, on every CPU instruction set and the emulated
CUDA kernel; and the vectorised cosine they use against numpy."""

import math

import numpy as np
import pytest
import scipy.linalg
import torch

from dlmsvdd_ext import kernels, ops

from conftest import TOL, rel_err

DTYPES = [np.float32, np.float64]
# (d, m): d not a power of two except 2048; m not a multiple of d_p (the last
# block is cut), and one m below d_p (a single partial block).
SIZES = [(3, 10), (17, 100), (100, 300), (100, 50), (2048, 2500)]


def dense_frequencies(backend) -> np.ndarray:
    """Omega (m, d) of a fitted SORF or Fastfood backend as explicit float64
    matrices: Omega x = the projection, from its drawn parameters only."""
    dp, d, m = backend.d_pad_, backend.n_features_in_, backend.n_components
    H = scipy.linalg.hadamard(dp).astype(np.float64)
    blocks = []
    for b in range(backend.n_blocks_):
        if backend.name == "sorf":
            D = [np.diag(backend.signs_[k][b].double().numpy()) for k in range(3)]
            Hn = H / math.sqrt(dp)
            omega = math.sqrt(2 * backend.gamma * dp) * Hn @ D[0] @ Hn @ D[1] @ Hn @ D[2]
        else:
            B = np.diag(backend.signs_[b].double().numpy())
            P = np.eye(dp)[backend.perm_[b].numpy()]  # (P u)_j = u[perm[j]]
            G = np.diag(backend.gauss_[b].double().numpy())
            S = np.diag(backend.scale_[b].double().numpy())
            omega = math.sqrt(2 * backend.gamma / dp) * S @ H @ G @ P @ H @ B
        blocks.append(omega[:, :d])  # padded inputs are zero
    return np.vstack(blocks)[:m]


def dense_reference(backend, X) -> np.ndarray:
    Omega = dense_frequencies(backend)
    z = np.asarray(X, dtype=np.float64) @ Omega.T + backend.offset_.double().numpy()
    return math.sqrt(2.0 / backend.n_components) * np.cos(z)


def fused(backend, X, **kw):
    """The fused map called through ops directly, with the backend's parameters."""
    dp = backend.d_pad_
    if backend.name == "sorf":
        return ops.sorf_features(X, backend.signs_.flip(0), backend.offset_,
                                 math.sqrt(2 * backend.gamma * dp) / dp ** 1.5, **kw)
    return ops.fastfood_features(X, backend.signs_, backend.perm_, backend.gauss_, backend.scale_, backend.offset_,
                                 math.sqrt(2 * backend.gamma / dp), **kw)


@pytest.mark.parametrize("name", ["sorf", "fastfood"])
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("d,m", SIZES)
def test_fused_map_matches_dense_and_torch(backend, name, dtype, d, m):
    rng = np.random.default_rng(d * 1000 + m)
    rows = 3 if backend else 6  # the emulation is slow
    X = torch.from_numpy((rng.standard_normal((rows, d)) / math.sqrt(d)).astype(dtype))
    b = kernels.make(name, 0.8, m, random_state=d).fit(X)
    out = fused(b, X, **backend)
    assert out.shape == (rows, m) and out.dtype == X.dtype
    assert rel_err(out, dense_reference(b, X)) <= TOL[dtype]
    with torch.enable_grad():
        composed = b.transform(X.clone().requires_grad_(True))  # the torch composition
    assert composed.grad_fn is not None
    assert rel_err(out, composed.detach().numpy()) <= TOL[dtype]


@pytest.mark.parametrize("name", ["sorf", "fastfood"])
def test_transform_fused_without_grad_differentiable_with(name):
    rng = np.random.default_rng(1)
    X = torch.from_numpy(rng.standard_normal((40, 30)))
    b = kernels.make(name, 0.5, 200, random_state=0).fit(X)
    ref = dense_reference(b, X)
    assert rel_err(b.Z_, ref) <= 1e-12  # fit ran the fused map
    with torch.no_grad():
        assert rel_err(b.transform(X), ref) <= 1e-12
    x = X[:5].clone().requires_grad_(True)
    z = b.transform(x)
    assert rel_err(z.detach(), ref[:5]) <= 1e-12
    # d z_j / dx = -sqrt(2/m) sin(omega_j x + b_j) omega_j, from the dense matrices
    Omega = dense_frequencies(b)
    w = rng.standard_normal(z.shape)
    (z * torch.from_numpy(w)).sum().backward()
    s = -math.sqrt(2.0 / b.n_components) * np.sin(X[:5].numpy() @ Omega.T + b.offset_.numpy())
    assert rel_err(x.grad, (w * s) @ Omega) <= 1e-10


def test_numpy_inputs_and_out_argument():
    rng = np.random.default_rng(2)
    X = rng.standard_normal((4, 20)).astype(np.float32)
    b = kernels.make("fastfood", 0.5, 40, random_state=0).fit(X)
    out = np.full((4, 40), np.nan, dtype=np.float32)
    res = ops.fastfood_features(X, b.signs_.numpy(), b.perm_.numpy(), b.gauss_.numpy(), b.scale_.numpy(),
                                b.offset_.numpy(), math.sqrt(2 * b.gamma / b.d_pad_), out=out)
    assert res is out
    assert rel_err(out, dense_reference(b, X)) <= 1e-5


def test_bad_arguments_are_value_errors():
    X = torch.randn(4, 20)
    b = kernels.make("fastfood", 0.5, 40, random_state=0).fit(X)  # d_pad 32, 2 blocks
    s = b.signs_
    args = dict(x=X, signs=s, perm=b.perm_, gauss=b.gauss_, row_scale=b.scale_, offset=b.offset_, scale=1.0)
    ops.fastfood_features(**args)
    bad = [dict(x=torch.randn(4, 33)),  # d > d_pad
           dict(offset=torch.zeros(70)),  # m beyond the blocks
           dict(offset=torch.zeros(30)),  # m leaves a block empty
           dict(perm=b.perm_.flip(0)[:1]),  # wrong shape
           dict(perm=torch.zeros_like(b.perm_)),  # not a permutation
           dict(gauss=b.gauss_[:, :16]),
           dict(scale=float("nan"))]
    for change in bad:
        with pytest.raises(ValueError):
            ops.fastfood_features(**{**args, **change})
    with pytest.raises(ValueError):
        ops.sorf_features(X, s, b.offset_, 1.0)  # signs must be (3, blocks, d_pad)
    with pytest.raises(ValueError):
        ops.sorf_features(torch.randn(2, 3), torch.ones(3, 1, 3), torch.zeros(3), 1.0)  # d_pad not a power of two
    with pytest.raises(ValueError, match="dtype"):
        ops.sorf_features(X, torch.ones(3, 2, 32, dtype=torch.float64), b.offset_, 1.0)
    with pytest.raises(TypeError):
        ops.sorf_features(X, np.ones((3, 2, 32), dtype=np.float32), b.offset_, 1.0)
    with pytest.raises(ValueError, match="4096"):  # the CUDA kernel's limit
        big = torch.randn(1, 5000)
        ops.sorf_features(big, torch.ones(3, 1, 8192), torch.zeros(100), 1.0, cuda_emulation=True)


@pytest.mark.parametrize("dtype", DTYPES)
def test_vector_cos_matches_numpy(cpu_isa, dtype):
    """Within an ulp of 1 (absolute) over the vector range, at quadrant edges, and
    beyond it (the scalar fallback); inf and nan give nan."""
    rng = np.random.default_rng(3)
    limit = 8192.0 if dtype == np.float32 else 2.0 ** 20
    edges = (np.arange(-3000, 3000) * (np.pi / 2)).astype(dtype)
    x = np.concatenate([rng.uniform(-4, 4, 10001), rng.uniform(-limit, limit, 10001), edges,
                        np.nextafter(edges, np.inf), np.nextafter(edges, -np.inf),
                        rng.uniform(limit, 1e7, 101), [0.0, -0.0, 1e-30]]).astype(dtype)
    err = np.abs(ops.vector_cos(x).astype(np.float64) - np.cos(x.astype(np.float64)))
    assert err.max() <= np.finfo(dtype).eps
    special = ops.vector_cos(np.array([np.inf, -np.inf, np.nan] * 11, dtype=dtype))
    assert np.isnan(special).all()
