"""Non-finite input to every compiled op, on every CPU instruction set and the
emulated CUDA kernels (issue 14, item 5).

A kernel value, distance, product or feature that involves a row holding a
NaN or an infinity is NaN: never a number that could pass for a real one (the
old distance clamp `d > 0 ? d : 0` turned a NaN row into a perfect match, all
ones; an infinity gave ones or zeros). The other entries still match numpy
references. The ops that cannot return such a NaN meaningfully refuse the
input: median_sq_distance and rpcholesky (ValueError naming the row).
"""

import math

import numpy as np
import pytest
import scipy.linalg
import torch

from dlmsvdd_ext import kernels, ops
from dlmsvdd_ext.dual import DualProblem

from conftest import TOL, rbf_reference, rel_err

DTYPES = [np.float32, np.float64]
BAD = [0, 5, 7]  # rows holding a NaN, +inf and -inf


def poisoned(n, d, dtype, seed=0):
    """Standard normal rows (over sqrt(d)), with rows BAD made non-finite."""
    X = (np.random.default_rng(seed).standard_normal((n, d)) / math.sqrt(d)).astype(dtype)
    X[0, 3], X[5, 1], X[7, d - 1] = np.nan, np.inf, -np.inf
    return X


def good_rows(n):
    return np.setdiff1d(np.arange(n), BAD)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("n,d", [(40, 20), (70, 300)])  # d = 300: more than one depth chunk of the tiles
def test_gram_nan_for_nonfinite_rows(backend, dtype, n, d):
    X = poisoned(n, d, dtype)
    ok = good_rows(n)
    gamma = 0.7
    for K in (ops.rbf_gram(X, None, gamma, **backend),  # symmetric tiles, mirrored
              ops.rbf_gram(X, X.copy(), gamma, **backend)):  # every tile
        K = np.asarray(K)
        assert np.isnan(K[BAD]).all() and np.isnan(K[:, BAD]).all()  # not 1 (NaN) or 0 (inf)
        assert rel_err(K[np.ix_(ok, ok)], rbf_reference(X[ok], X[ok], gamma)) <= TOL[dtype]


@pytest.mark.parametrize("dtype", DTYPES)
def test_distances_and_columns_nan_for_nonfinite_rows(backend, dtype):
    n = 40
    X = poisoned(n, 20, dtype)
    ok = good_rows(n)
    D = ops.sq_distances(X, **backend)
    assert np.isnan(D[BAD]).all() and np.isnan(D[:, BAD]).all()
    ref = ((X[ok, None, :].astype(np.float64) - X[None, ok, :]) ** 2).sum(-1)
    assert np.abs(D[np.ix_(ok, ok)] - ref).max() <= 50 * TOL[dtype] * ref.max()
    # A few columns: the streaming path (a bad and two good columns).
    cols = [BAD[1], ok[0], ok[1]]
    C = ops.rbf_columns(X, X[cols].copy(), 0.5, **backend)
    assert np.isnan(C[:, 0]).all() and np.isnan(C[BAD]).all()
    assert rel_err(C[np.ix_(ok, [1, 2])], rbf_reference(X[ok], X[cols[1:]], 0.5)) <= TOL[dtype]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("k", [None, 3, 11])  # a vector, fused columns, wider than the fused path
def test_matvec_nan_for_nonfinite_rows(backend, dtype, k):
    n = 60
    X = poisoned(n, 20, dtype)
    ok = good_rows(n)
    rng = np.random.default_rng(1)
    V = rng.standard_normal(n if k is None else (n, k)).astype(dtype)
    gamma = 0.5
    # Bad rows of X: their outputs are NaN, the others K(x_i, Y) V.
    Y = X[ok].copy()
    VY = V[ok].copy()
    out = np.asarray(ops.rbf_matvec(X, Y, VY, gamma, **backend))
    assert np.isnan(out[BAD]).all()
    ref = rbf_reference(X[ok], Y, gamma) @ VY.astype(np.float64)
    assert rel_err(out[ok], ref) <= 10 * TOL[dtype]
    # Bad rows of Y reach every output (K(x, y_bad) v is NaN): all NaN, in the
    # symmetric product (its transposed contributions included) and the plain one.
    assert np.isnan(np.asarray(ops.rbf_matvec(X, None, V, gamma, **backend))).all()
    assert np.isnan(np.asarray(ops.rbf_matvec(Y, X, V, gamma, **backend))).all()


@pytest.mark.parametrize("dtype", DTYPES)
def test_fwht_nonfinite_as_numpy(backend, dtype):
    """The transform is linear: NaN rows stay NaN, a single infinity gives
    infinities of either sign, two of opposite signs NaN: as the dense product."""
    L = 64
    X = np.random.default_rng(2).standard_normal((6, L)).astype(dtype)
    X[1, 5] = np.nan
    X[2, 0] = np.inf
    X[3, 7], X[3, 9] = np.inf, -np.inf
    out = np.asarray(ops.fwht(X, **backend))
    with np.errstate(invalid="ignore"):
        ref = X.astype(np.float64) @ scipy.linalg.hadamard(L).T.astype(np.float64)
    assert np.isnan(out[1]).all()
    assert (np.isnan(out) == np.isnan(ref)).all() and (np.isinf(out) == np.isinf(ref)).all()
    assert (np.sign(out[2]) == np.sign(ref[2])).all()
    finite = np.isfinite(ref)
    assert np.abs(out[finite] - ref[finite]).max() <= 50 * TOL[dtype] * np.abs(ref[finite]).max()


def _structured_features(name, b, X, backend):
    """The fused SORF or Fastfood op on X with the fitted map b's parameters."""
    dp = b.d_pad_
    if name == "sorf":
        return ops.sorf_features(X, b.signs_.flip(0), b.offset_, math.sqrt(2 * b.gamma * dp) / dp ** 1.5, **backend)
    return ops.fastfood_features(X, b.signs_, b.perm_, b.gauss_, b.scale_, b.offset_, math.sqrt(2 * b.gamma / dp),
                                 **backend)


@pytest.mark.parametrize("name", ["sorf", "fastfood"])
@pytest.mark.parametrize("dtype", DTYPES)
def test_structured_features_nan_for_nonfinite_rows(backend, name, dtype):
    n, d, m = 10, 17, 40
    X = torch.from_numpy(poisoned(n, d, dtype))
    ok = good_rows(n)
    b = kernels.make(name, 0.8, m, random_state=3).fit(X[ok])
    out = _structured_features(name, b, X, backend)
    out = out.numpy()
    assert np.isnan(out[BAD]).all()
    assert np.isfinite(out[ok]).all()
    assert rel_err(out[ok], b.transform(X[ok]).numpy()) <= TOL[dtype]


@pytest.mark.parametrize("dtype", DTYPES)
def test_vector_cos_nan_for_nonfinite(cpu_isa, dtype):
    x = np.linspace(-10, 10, 37).astype(dtype)
    x[[0, 9, 20]] = [np.nan, np.inf, -np.inf]  # in the vector part and the tail
    out = ops.vector_cos(x)
    assert np.isnan(out[[0, 9, 20]]).all()
    ok = np.isfinite(x)
    assert np.abs(out[ok] - np.cos(x[ok].astype(np.float64))).max() <= 10 * TOL[dtype]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("block_size", [1, 4])
@pytest.mark.parametrize("bad", BAD)
def test_rpcholesky_refuses_nonfinite_rows(backend, dtype, block_size, bad):
    """Refused naming the row, whether it is sampled as a pivot or not (its
    residual weight starts at 1 like every row's)."""
    X = poisoned(30, 6, dtype)
    X[[b for b in BAD if b != bad]] = 0.5  # only `bad` is non-finite
    for seed in range(3):
        with pytest.raises(ValueError, match=f"X: row {bad} holds a NaN or an infinity"):
            ops.rpcholesky(X, 0.5, rank=10, seed=seed, block_size=block_size, **backend)


@pytest.mark.parametrize("value", [np.nan, np.inf, -np.inf])
@pytest.mark.parametrize("torch_input", [False, True])
def test_median_sq_distance_refuses_nonfinite(value, torch_input):
    X = np.random.default_rng(4).standard_normal((50, 5))
    X[37, 2] = value
    with pytest.raises(ValueError, match="row 37 holds a NaN or an infinity"):
        ops.median_sq_distance(torch.from_numpy(X) if torch_input else X, max_samples=10)  # row 37 outside the subset or not
    X[37, 2] = 0.0
    D = ((X[:, None] - X[None]) ** 2).sum(-1)
    assert ops.median_sq_distance(X) == pytest.approx(np.median(D[np.triu_indices(50, 1)]), rel=1e-12)


def test_median_sq_distance_refuses_overflow():
    X = np.array([[0.0, 0.0], [3e19, 0.0], [1.0, 1.0]], dtype=np.float32)  # squares overflow float32
    with pytest.raises(ValueError, match="overflow"):
        ops.median_sq_distance(X)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_dual_oracle_nan_state_gives_nan_certificate(backend, dtype):
    n = 20
    t = torch.ones(n, dtype=dtype)
    t[::4] = -1
    prob = DualProblem.from_labels(t, p=2.0, nu=1.2)
    alpha = prob.uniform_alpha().to(dtype)
    Ka = torch.linspace(-1, 1, n, dtype=dtype)
    Ka[3] = float("nan")
    r = ops.dual_oracle(alpha, Ka, t.to(dtype), prob.coefs(), **backend)
    assert math.isnan(r["objective"]) and math.isnan(r["gap"])


@pytest.mark.parametrize("method", ["vanilla", "pairwise"])
def test_fw_solve_stops_unconverged_on_nan(backend, method):
    """A NaN in the kernel matrix: the loop stops at once, unconverged, where it
    ran to max_iter before (a NaN gap is never <= tol)."""
    n = 30
    X = np.random.default_rng(5).standard_normal((n, 4))
    X[2, 1] = np.nan
    X = torch.from_numpy(X)
    K = ops.rbf_gram(X, None, 0.5)
    t = torch.ones(n, dtype=torch.float64)
    t[::3] = -1
    prob = DualProblem.from_labels(t, p=2.0, nu=1.2)
    alpha = prob.uniform_alpha()
    Ka = K @ (alpha * t)
    info = ops.fw_solve(alpha, Ka, t, prob.coefs(), method=method, max_iter=50, tol=1e-6, source="dense", matrix=K,
                        **backend)
    assert info["stop"] == "not_finite" and not info["converged"] and info["n_iter"] == 0


# ---- issue 24, item 9: one rule for every layer. Non-finite input is a NaN or an
# infinity, or a row whose squared norm overflows its dtype (the kernels compute
# ||x||^2). The compiled ops answer NaN for every output it reaches; the layers
# that validate their input (the kernel backends' fit and transform, LpSVDD)
# refuse it with a ValueError naming the row.

@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("k", [None, 3, 11])
@pytest.mark.parametrize("symmetric", [False, True])
def test_matvec_nan_for_nonfinite_weights(backend, dtype, k, symmetric):
    """An infinity in V gave inf (NaN on the symmetric path at k <= 8): every
    output of its column is NaN now, the other columns are K V."""
    rng = np.random.default_rng(6)
    X = (rng.standard_normal((40, 7)) / 3).astype(dtype)
    Y = X if symmetric else (rng.standard_normal((50, 7)) / 3).astype(dtype)
    V = rng.standard_normal(len(Y) if k is None else (len(Y), k)).astype(dtype)
    V[4] = np.inf  # every column: +inf in row 4
    if k is not None:
        V[4, 1:] = 1.0
        V[9, 2] = -np.inf  # columns 0 and 2 non-finite, the others finite
    out = np.asarray(ops.rbf_matvec(X, None if symmetric else Y, V, 0.5, **backend))
    if k is None:
        assert np.isnan(out).all()
        return
    assert np.isnan(out[:, [0, 2]]).all()
    good = [1] + list(range(3, k))
    ref = rbf_reference(X, Y, 0.5) @ V[:, good].astype(np.float64)
    assert rel_err(out[:, good], ref) <= 10 * TOL[dtype]


def _overflowing(dtype=np.float32):
    """Finite rows, row 3 = 1e30 (its squared norm overflows float32, not float64)."""
    X = (np.random.default_rng(7).standard_normal((30, 6)) / 3).astype(dtype)
    X[3] = 1e30
    return X


@pytest.mark.parametrize("name", ["sorf", "fastfood"])
def test_structured_features_nan_for_overflowing_rows(backend, name):
    """The fused maps gave the 1e30 row finite-looking features."""
    X = torch.from_numpy(_overflowing())
    ok = np.setdiff1d(np.arange(30), [3])
    b = kernels.make(name, 0.8, 16, random_state=3).fit(X[ok])
    out = _structured_features(name, b, X, backend)
    assert np.isnan(out[3].numpy()).all() and np.isfinite(out[ok].numpy()).all()
    assert rel_err(out[ok].numpy(), b.transform(X[ok]).numpy()) <= TOL[np.float32]


def test_kernel_ops_nan_for_overflowing_rows(backend):
    X = _overflowing()
    ok = np.setdiff1d(np.arange(30), [3])
    K = np.asarray(ops.rbf_gram(X, None, 0.5, **backend))
    assert np.isnan(K[3]).all() and np.isnan(K[:, 3]).all()
    assert rel_err(K[np.ix_(ok, ok)], rbf_reference(X[ok], X[ok], 0.5)) <= TOL[np.float32]
    v = np.ones(len(ok), dtype=np.float32)
    out = np.asarray(ops.rbf_matvec(X, X[ok].copy(), v, 0.5, **backend))
    assert np.isnan(out[3]) and np.isfinite(out[ok]).all()


@pytest.mark.parametrize("name", kernels.BACKENDS)
def test_backends_refuse_nonfinite_and_overflowing_rows(name):
    """fit and transform refuse what the ops answer NaN for: NaN and infinite
    entries (as before), and now a float32 row of 1e30 (Nystrom raised numpy's
    LinAlgError from the eigensolver; the spectral maps gave it features)."""
    X = torch.from_numpy(_overflowing())
    ok = np.setdiff1d(np.arange(30), [3])
    with pytest.raises(ValueError, match=r"X: row 3's squared norm overflows torch.float32"):
        kernels.make(name, 0.5, 8, random_state=0).fit(X)
    fitted = kernels.make(name, 0.5, 8, random_state=0).fit(X[ok])
    for bad in (X, torch.from_numpy(poisoned(30, 6, np.float32))):
        with pytest.raises(ValueError, match=r"x: row \d+|x contains NaN or infinity"):
            fitted.transform(bad)
    Z = fitted.fit_transform(X.double()) if name != "exact" else None  # 1e60 fits float64: a far point
    if Z is not None:
        assert torch.isfinite(Z).all()


def test_lpsvdd_refuses_an_overflowing_row():
    from dlmsvdd_ext import LpSVDD

    X = _overflowing()
    with pytest.raises(ValueError, match=r"X: row 3's squared norm overflows"):
        LpSVDD().fit(X)
    model = LpSVDD().fit(np.delete(X, 3, axis=0))
    with pytest.raises(ValueError, match=r"X: row 3's squared norm overflows"):
        model.score_samples(X)
