"""The CUDA kernels on a GPU (issue 18): each op on CUDA tensors against the CPU
kernels and a float64 reference, at small sizes whose tiles do not divide them and
at large ones, on a non-default stream; the Frank-Wolfe loop and LpSVDD end to end.

Skipped where torch sees no CUDA device or the build has no CUDA code. With
DLMSVDD_GPU_TEST_DEVICE=cpu the same comparisons run on CPU tensors (the large
sizes excepted): that is how the tests' own logic is checked on machines without
a GPU.
"""

import os

import numpy as np
import pytest
import torch
from scipy.linalg import hadamard

import dlmsvdd_ext
from dlmsvdd_ext import LpSVDD, kernels, ops
from dlmsvdd_ext.dual import DualProblem

from conftest import rbf_reference, rel_err

DEVICE = os.environ.get("DLMSVDD_GPU_TEST_DEVICE", "cuda")
ON_GPU = DEVICE == "cuda"
if ON_GPU:
    pytestmark = pytest.mark.skipif(
        not (torch.cuda.is_available() and dlmsvdd_ext.build_info()["cuda_architectures"]),
        reason="needs a CUDA device and a build with CUDA code")
large = pytest.mark.skipif(not ON_GPU, reason="large sizes only on the GPU (hours on a CPU)")
# On CPU tensors the ops' CUDA code runs through the emulation, so that the
# comparisons set the CUDA kernels against the CPU ones there too.
CUDA_CODE = {} if ON_GPU else {"cuda_emulation": True}

TOL = {torch.float32: 2e-5, torch.float64: 1e-12}
DTYPES = [torch.float32, torch.float64]


def points(n, d, dtype, seed=0):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(n, d, generator=g, dtype=torch.float64).to(dtype)


def on_device(*arrays):
    return [a.to(DEVICE) for a in arrays]


def cpu(a):
    return a.cpu() if isinstance(a, torch.Tensor) else torch.as_tensor(a)


# ---- RBF kernel products: tiles of 64 and 128 do not divide these sizes

SMALL = [(1, 1, 1), (67, 131, 33), (300, 257, 512)]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("nx,ny,d", SMALL)
def test_rbf_matvec_and_gram(dtype, nx, ny, d):
    X, Y, V = points(nx, d, dtype, 0), points(ny, d, dtype, 1), points(ny, 3, dtype, 2)
    gamma = 1.0 / d
    ref = rbf_reference(X.numpy(), Y.numpy(), gamma)
    Xd, Yd, Vd = on_device(X, Y, V)
    assert rel_err(cpu(ops.rbf_matvec(Xd, Yd, Vd, gamma, **CUDA_CODE)), ref @ V.double().numpy()) < TOL[dtype] * 10
    assert rel_err(cpu(ops.rbf_gram(Xd, Yd, gamma, **CUDA_CODE)), ref) < TOL[dtype]
    assert rel_err(cpu(ops.rbf_columns(Xd, Yd[:5], gamma, **CUDA_CODE)), ref[:, :5]) < TOL[dtype]
    np.testing.assert_allclose(cpu(ops.sq_distances(Xd, Yd, **CUDA_CODE)).double(), cpu(ops.sq_distances(X, Y)).double(),
                               rtol=TOL[dtype] * 10, atol=TOL[dtype] * d)
    # symmetric: each tile once and mirrored
    Vx = points(nx, 2, dtype, 3)
    sym = cpu(ops.rbf_matvec(Xd, None, Vx.to(DEVICE), gamma, **CUDA_CODE))
    assert rel_err(sym, rbf_reference(X.numpy(), X.numpy(), gamma) @ Vx.double().numpy()) < TOL[dtype] * 10


@large
@pytest.mark.parametrize("dtype", DTYPES)
def test_rbf_matvec_at_a_hundred_thousand_rows(dtype):
    """N = 100,000, d = 2048, symmetric: rows checked against the CPU kernels."""
    n, d = 100_000, 2048
    X = points(n, d, dtype, 0) / np.sqrt(d)
    V = points(n, 1, dtype, 1)
    out = cpu(ops.rbf_matvec(X.to(DEVICE), None, V.to(DEVICE), 0.5))
    rows = torch.randperm(n, generator=torch.Generator().manual_seed(0))[:256]
    expected = cpu(ops.rbf_matvec(X[rows], X, V, 0.5))
    assert rel_err(out[rows], expected.double().numpy()) < TOL[dtype] * 100


# ---- fast Walsh-Hadamard transform and the structured feature maps

@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("log2", [1, 5, 10, 12])
def test_fwht(dtype, log2):
    x = points(7, 2 ** log2, dtype)
    expected = x.double().numpy() @ hadamard(2 ** log2).T
    assert rel_err(cpu(ops.fwht(x.to(DEVICE), **CUDA_CODE)), expected) < TOL[dtype] * log2


@large
@pytest.mark.parametrize("log2", [13, 14, 15])
def test_fwht_long_rows(log2):
    x = points(64, 2 ** log2, torch.float32)
    np.testing.assert_allclose(cpu(ops.fwht(x.to(DEVICE), **CUDA_CODE)), cpu(ops.fwht(x)), rtol=1e-4, atol=1e-3 * 2 ** (log2 / 2))


@pytest.mark.parametrize("kernel", ["rff", "orf", "sorf", "fastfood", "nystrom", "rpcholesky"])
def test_feature_maps_match_the_cpu(kernel):
    X = points(500, 100, torch.float32) / 10
    cpu_map = kernels.make(kernel, gamma=0.5, n_components=200, random_state=0).fit(X)
    gpu_map = kernels.make(kernel, gamma=0.5, n_components=200, random_state=0).fit(X.to(DEVICE))
    Z_gpu, Z_cpu = cpu(gpu_map.transform(X.to(DEVICE))), cpu_map.transform(X)
    if kernel in ("nystrom", "rpcholesky"):  # a landmark map is unique up to a rotation (eigh's signs): Z Z^T is
        Z_gpu, Z_cpu = Z_gpu @ Z_gpu.T, Z_cpu @ Z_cpu.T
    np.testing.assert_allclose(Z_gpu, Z_cpu, rtol=1e-4, atol=2e-5)


def test_rpcholesky_same_pivots_as_the_cpu():
    X = points(2000, 64, torch.float64) / 4
    L, pivots = ops.rpcholesky(X, 0.5, 100, seed=3, block_size=16)
    Ld, pivots_d = ops.rpcholesky(X.to(DEVICE), 0.5, 100, seed=3, block_size=16, **CUDA_CODE)
    np.testing.assert_array_equal(cpu(pivots_d), pivots)
    np.testing.assert_allclose(cpu(Ld), L, rtol=1e-10, atol=1e-12)


# ---- float64 products of a float32 or float64 matrix (ops.matvec64, ops.rmatvec64)

def _within_float64_sums(out, A, v):
    """out against A v in float64, each entry within 1e-12 of its sum of |A| |v|."""
    A, v = A.double().cpu().numpy(), v.cpu().numpy()
    out = cpu(out).numpy()
    assert out.dtype == np.float64
    assert (np.abs(out - A @ v) <= 1e-12 * (np.abs(A) @ np.abs(v))).all()


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("n,k", [(1, 1), (37, 1), (67, 131), (300, 33), (2100, 5)])
def test_matvec64(dtype, n, k):
    """A column slice of a wider matrix (strided rows), on the device."""
    wide = points(n, k + 7, dtype).to(DEVICE)
    A = wide[:, 3:3 + k]
    v, u = points(k, 1, torch.float64, 1)[:, 0], points(n, 1, torch.float64, 2)[:, 0]
    _within_float64_sums(ops.matvec64(A, v.to(DEVICE), **CUDA_CODE), A, v)
    _within_float64_sums(ops.rmatvec64(A, u.to(DEVICE), **CUDA_CODE), A.T, u)
    out = torch.full((k,), float("nan"), dtype=torch.float64, device=DEVICE)
    assert ops.rmatvec64(A, u.to(DEVICE), out=out, **CUDA_CODE) is out
    _within_float64_sums(out, A.T, u)


@large
@pytest.mark.parametrize("dtype", DTYPES)
def test_matvec64_at_two_hundred_thousand_rows(dtype):
    """The benchmark's shape: against float64 numpy, and the same bits on a second call."""
    A = points(200_000, 256, dtype).to(DEVICE)
    v, u = points(256, 1, torch.float64, 1)[:, 0].to(DEVICE), points(200_000, 1, torch.float64, 2)[:, 0].to(DEVICE)
    first, transposed = ops.matvec64(A, v), ops.rmatvec64(A, u)
    _within_float64_sums(first, A, v)
    _within_float64_sums(transposed, A.T, u)
    assert torch.equal(ops.matvec64(A, v), first) and torch.equal(ops.rmatvec64(A, u), transposed)


def test_matvec64_refuses_a_vector_on_another_device():
    if not ON_GPU:
        pytest.skip("needs a CUDA device")
    A = points(10, 4, torch.float32).to(DEVICE)
    with pytest.raises(ValueError, match="v: on a different device than A"):
        ops.matvec64(A, torch.ones(4, dtype=torch.float64))
    with pytest.raises(ValueError, match="out: on a different device than A"):
        ops.rmatvec64(A, torch.ones(10, dtype=torch.float64, device=DEVICE), out=torch.empty(4, dtype=torch.float64))


# ---- the Frank-Wolfe loop and LpSVDD

def _fw_problem(n=700, d=16):
    rng = np.random.default_rng(0)
    X = torch.from_numpy(np.vstack([rng.standard_normal((n - n // 10, d)), rng.standard_normal((n // 10, d)) + 1.5]))
    t = torch.cat([torch.ones(n - n // 10), -torch.ones(n // 10)]).double()
    return X, t, 1.0 / d


@pytest.mark.parametrize("source", ["dense", "features", "factor"])
@pytest.mark.parametrize("method", ["vanilla", "pairwise"])
def test_fw_solve_matches_the_cpu_loop(source, method):
    """The compiled loop with its passes as CUDA kernels against the CPU loop: the
    same iterates up to reductions' rounding (float64 state)."""
    X, t, gamma = _fw_problem()
    K = cpu(ops.rbf_gram(X, None, gamma))
    Z = torch.linalg.cholesky(K + 1e-6 * torch.eye(len(K)))[:, :64].contiguous()  # a factor: columns Z Z[i]^T
    matrix = {"dense": K, "features": X, "factor": Z}[source]
    K_used = Z @ Z.T if source == "factor" else K
    prob = DualProblem.from_labels(t, p=2.0, nu=1.2)
    results = []
    for device in ("cpu", DEVICE):  # on CPU tensors: the CPU loop, then the emulated CUDA passes
        alpha = prob.uniform_alpha().to(device)
        Ka = (K_used @ (prob.uniform_alpha() * prob.t)).to(device)
        info = ops.fw_solve(alpha, Ka, prob.t.to(device), prob.coefs(), method=method, max_iter=200, tol=0.0,
                            source=source, matrix=matrix.to(device), gamma=gamma, cache_slots=8,
                            **(CUDA_CODE if device == DEVICE else {}))
        results.append((cpu(alpha), info))
    (alpha_cpu, info_cpu), (alpha_dev, info_dev) = results
    assert info_dev["n_iter"] == info_cpu["n_iter"] == 200
    np.testing.assert_allclose(info_dev["history_objective"], info_cpu["history_objective"], rtol=1e-9)
    np.testing.assert_allclose(alpha_dev, alpha_cpu, rtol=1e-7, atol=1e-12)


@pytest.mark.parametrize("n", [700, 100_003])
def test_apg_passes_match_the_cpu(n):
    """APG's compiled step (gradient step and two-class projection) and the
    pass after the product on the device against the CPU's: the same iterate
    and sums up to reductions' rounding. 100,003 elements take several blocks
    and a grid-stride loop."""
    rng = np.random.default_rng(n)
    t = torch.from_numpy(np.where(rng.uniform(size=n) < 0.1, -1.0, 1.0))
    t[0] = 1.0
    prob = DualProblem.from_labels(t, p=2.0, nu=1.2)
    x, x_prev = (prob.project(torch.from_numpy(rng.uniform(size=n)) / n) for _ in range(2))
    Kx, Kx_prev, Kx_new = (torch.from_numpy(rng.uniform(size=n)) for _ in range(3))
    args = (prob.coefs(), 0.6, (float(n), 0.3 * n))
    step = [cpu(ops.apg_step(*on_device(x, x_prev, Kx, Kx_prev, t) if device == DEVICE else (x, x_prev, Kx, Kx_prev, t),
                             *args, **(CUDA_CODE if device == DEVICE else {}))) for device in ("cpu", DEVICE)]
    np.testing.assert_allclose(step[1], step[0], rtol=0, atol=1e-14 * float(step[0].max()))
    x_new = step[0]
    arrays = (x, x_prev, Kx, Kx_prev, x_new, Kx_new, t)
    checks = [ops.apg_check(*arrays, *args), ops.apg_check(*on_device(*arrays), *args, **CUDA_CODE)]
    for key in ("objective", "gap", "objective_y", "g_dot_d", "step_d2", "restart"):
        assert checks[1][key] == pytest.approx(checks[0][key], rel=1e-11, abs=1e-14), key
    v = torch.from_numpy(rng.standard_normal(n))
    projected = [cpu(ops.simplex_project(v, t, 1.1, 0.1)),
                 cpu(ops.simplex_project(*on_device(v, t), 1.1, 0.1, **CUDA_CODE))]
    np.testing.assert_allclose(projected[1], projected[0], rtol=0, atol=1e-14)


@pytest.mark.parametrize("kernel", ["exact", "nystrom", "sorf"])
@pytest.mark.parametrize("solver", ["apg", "pairwise"])
def test_lpsvdd_fits_the_same_boundary(kernel, solver):
    rng = np.random.default_rng(0)
    X = np.vstack([rng.standard_normal((600, 32)), rng.standard_normal((60, 32)) + 1.5]).astype(np.float32)
    y = np.r_[np.ones(600), -np.ones(60)]
    params = dict(kernel=kernel, n_components=128, solver=solver, random_state=0, tol=1e-8, max_iter=20000)
    on_cpu = LpSVDD(**params, device="cpu").fit(X, y)
    on_gpu = LpSVDD(**params, device=DEVICE).fit(X, y)
    assert on_cpu.converged_ and on_gpu.converged_
    np.testing.assert_allclose(on_gpu.objective_, on_cpu.objective_, rtol=1e-6)
    f_cpu = on_cpu.dissimilarity(X)  # two certified solves (gap 1e-8), not necessarily the same path
    np.testing.assert_allclose(on_gpu.dissimilarity(X), f_cpu, rtol=0, atol=1e-4 * np.abs(f_cpu).max())


def test_ops_run_on_the_current_stream():
    """Input written on a busy side stream and the op queued there, no synchronisation
    in between: a kernel on another stream would read Y before it is written."""
    if not ON_GPU:
        pytest.skip("streams exist only on the GPU")
    X = points(4096, 256, torch.float32).to(DEVICE)
    V = torch.ones(4096, 1, device=DEVICE)
    expected = ops.rbf_matvec(X, None, V, 0.01)
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        assert ops._stream(X) == side.cuda_stream
        torch.cuda._sleep(100_000_000)  # the side stream busy for a while: Y is written late
        Y = X * 1.0  # queued on the side stream, after the sleep
        out = ops.rbf_matvec(Y, None, V, 0.01)
    side.synchronize()
    torch.testing.assert_close(out, expected, rtol=1e-5, atol=1e-5)


def test_inputs_on_two_devices_are_refused():
    if not ON_GPU or torch.cuda.device_count() < 2:
        pytest.skip("needs two GPUs")
    X = points(10, 4, torch.float32)
    with pytest.raises(ValueError, match="different device"):
        ops.rbf_matvec(X.to("cuda:0"), X.to("cuda:1"), torch.ones(10, 1, device="cuda:0"), 1.0)
