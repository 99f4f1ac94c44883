"""ops.matvec64 (A v) and ops.rmatvec64 (A^T u): a float32 or float64 A, float64
vectors, every sum in float64. Against numpy's float64 products of the same
(widened) A, on every CPU instruction set and the emulated CUDA kernels (the
`backend` fixture), within 1e-12 of each entry's sum of |A| |v| (the error of a
float64 sum of k products is below k * 2^-53 of it)."""

import hashlib
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest
import torch

from dlmsvdd_ext import _C, ops

DTYPES = [np.float32, np.float64]
RTOL = 1e-12
# (n, k): single rows and columns; segment widths 1 to 32 and rows past a
# warp's; 2100 rows: several CPU row slices and emulated CUDA slices.
SHAPES = [(1, 1), (1, 37), (37, 1), (5, 3), (67, 131), (300, 33), (2100, 5)]


def sample(rng, shape, dtype):
    return rng.standard_normal(shape).astype(dtype)


def check_matvec(out, A, v):
    """out against A v in float64, entry by entry, relative to sum_j |A_ij| |v_j|."""
    A64 = np.asarray(A, dtype=np.float64)
    v = np.asarray(v, dtype=np.float64)
    out = np.asarray(out)
    assert out.dtype == np.float64 and out.shape == (A64.shape[0],)
    scale = np.abs(A64) @ np.abs(v)
    np.testing.assert_array_less(np.abs(out - A64 @ v), RTOL * scale + 1e-300)


def check_rmatvec(out, A, u):
    check_matvec(out, np.asarray(A).T, u)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("n,k", SHAPES)
def test_against_float64_products(backend, dtype, n, k):
    rng = np.random.default_rng(n * 1000 + k)
    A, v, u = sample(rng, (n, k), dtype), rng.standard_normal(k), rng.standard_normal(n)
    check_matvec(ops.matvec64(A, v, **backend), A, v)
    check_rmatvec(ops.rmatvec64(A, u, **backend), A, u)


@pytest.mark.parametrize("dtype", DTYPES)
def test_float32_storage_float64_accumulation(backend, dtype):
    """Entries a float32 sum would lose: 1 + 2^-30 - 1, exact in float64."""
    A = np.array([[1.0, 1.0, -1.0], [2.0 ** 20, 1.0, -(2.0 ** 20)]], dtype=dtype)
    v = np.array([1.0, 2.0 ** -30, -1.0])
    np.testing.assert_array_equal(ops.matvec64(A, np.array([1.0, 2.0 ** -30, 1.0]), **backend),
                                  [2.0 ** -30, 2.0 ** -30])
    np.testing.assert_array_equal(ops.matvec64(A, v, **backend), [2.0 + 2.0 ** -30, 2.0 ** 21 + 2.0 ** -30])
    u = np.array([1.0, 2.0 ** -40])
    np.testing.assert_array_equal(ops.rmatvec64(A, u, **backend),
                                  [1.0 + 2.0 ** -20, 1.0 + 2.0 ** -40, -1.0 - 2.0 ** -20])


def test_large_cpu_products(cpu_isa):
    """Above the CPU's column block (2048) and several row slices, in threads."""
    rng = np.random.default_rng(1)
    for dtype in DTYPES:
        A, v, u = sample(rng, (4500, 2100), dtype), rng.standard_normal(2100), rng.standard_normal(4500)
        check_matvec(ops.matvec64(A, v), A, v)
        check_rmatvec(ops.rmatvec64(A, u), A, u)


@pytest.mark.parametrize("dtype", DTYPES)
def test_strided_rows(backend, dtype):
    """A column slice of a wider matrix: rows of k elements, row stride k + 9."""
    rng = np.random.default_rng(2)
    wide = sample(rng, (70, 50), dtype)
    A, v, u = wide[:, 4:45], rng.standard_normal(41), rng.standard_normal(70)
    assert not A.flags.c_contiguous
    check_matvec(ops.matvec64(A, v, **backend), A, v)
    check_rmatvec(ops.rmatvec64(A, u, **backend), A, u)
    At = torch.from_numpy(wide)[:, 4:45]  # a torch view too
    check_matvec(ops.matvec64(At, torch.from_numpy(v), **backend).numpy(), A, v)
    check_rmatvec(ops.rmatvec64(At, torch.from_numpy(u), **backend).numpy(), A, u)


def test_strided_vectors_are_read(backend):
    rng = np.random.default_rng(3)
    A, v, u = sample(rng, (6, 4), np.float32), rng.standard_normal(8)[::2], rng.standard_normal(12)[::2]
    check_matvec(ops.matvec64(A, v, **backend), A, v)
    check_rmatvec(ops.rmatvec64(A, u, **backend), A, u)


@pytest.mark.parametrize("dtype", DTYPES)
def test_empty(backend, dtype):
    A0, Ak = np.zeros((0, 5), dtype=dtype), np.ones((4, 0), dtype=dtype)
    assert ops.matvec64(A0, np.ones(5), **backend).shape == (0,)
    np.testing.assert_array_equal(ops.rmatvec64(A0, np.ones(0), **backend), np.zeros(5))  # an empty sum
    np.testing.assert_array_equal(ops.matvec64(Ak, np.ones(0), **backend), np.zeros(4))
    assert ops.rmatvec64(Ak, np.ones(4), **backend).shape == (0,)


@pytest.mark.parametrize("kind", ["numpy", "torch"])
def test_out_is_written_and_returned(backend, kind):
    rng = np.random.default_rng(4)
    A, v, u = sample(rng, (40, 9), np.float32), rng.standard_normal(9), rng.standard_normal(40)
    wrap = torch.from_numpy if kind == "torch" else np.asarray
    out_n, out_k = wrap(np.full(40, np.nan)), wrap(np.full(9, np.nan))  # every entry must be overwritten
    assert ops.matvec64(wrap(A), wrap(v), out=out_n, **backend) is out_n
    assert ops.rmatvec64(wrap(A), wrap(u), out=out_k, **backend) is out_k
    check_matvec(np.asarray(out_n), A, v)
    check_rmatvec(np.asarray(out_k), A, u)


def test_result_follows_a():
    A = np.ones((3, 2), dtype=np.float32)
    assert isinstance(ops.matvec64(A, np.ones(2)), np.ndarray)
    out = ops.rmatvec64(torch.from_numpy(A), torch.ones(3, dtype=torch.float64))
    assert isinstance(out, torch.Tensor) and out.dtype == torch.float64
    # torch A with a numpy vector: both on the CPU, the result torch's
    assert isinstance(ops.matvec64(torch.from_numpy(A), np.ones(2)), torch.Tensor)


def test_non_finite_entries_give_nan(backend):
    """A NaN or an infinity reaches its row (A v) or column (A^T u) as NaN,
    never as an infinity; the other entries stay exact."""
    A = np.ones((4, 3), dtype=np.float32)
    A[1, 2], A[3, 0] = np.inf, np.nan
    out = ops.matvec64(A, np.ones(3), **backend)
    assert np.isnan(out[[1, 3]]).all() and (out[[0, 2]] == 3).all()
    col = ops.rmatvec64(A, np.ones(4), **backend)
    assert np.isnan(col[[0, 2]]).all() and col[1] == 4
    assert np.isnan(ops.matvec64(np.ones((2, 2), np.float32), np.array([1.0, np.inf]), **backend)).all()
    assert np.isnan(ops.rmatvec64(np.full((2, 2), 1e300), np.full(2, 1e300), **backend)).all()  # overflow


def test_repeat_exactly(backend):
    rng = np.random.default_rng(5)
    A, v, u = sample(rng, (3000, 40), np.float32), rng.standard_normal(40), rng.standard_normal(3000)
    np.testing.assert_array_equal(ops.matvec64(A, v, **backend), ops.matvec64(A, v, **backend))
    np.testing.assert_array_equal(ops.rmatvec64(A, u, **backend), ops.rmatvec64(A, u, **backend))


SAME_BITS = textwrap.dedent("""
    import hashlib
    import numpy as np
    from dlmsvdd_ext import ops
    rng = np.random.default_rng(0)
    A = rng.standard_normal((70000, 300)).astype(np.float32)
    u, v = rng.standard_normal(70000), rng.standard_normal(300)
    digest = hashlib.sha256()
    for isa in ops.supported_cpu_isas():
        ops.set_cpu_isa(isa)
        digest.update(ops.rmatvec64(A, u).tobytes())
        digest.update(ops.matvec64(A, v).tobytes())
    print(digest.hexdigest())
""")


def test_cpu_results_do_not_depend_on_the_thread_count():
    """A^T u's row slices are fixed by the shape, not by the threads: the same
    bits with 1 and 3 OpenMP threads (a subprocess each: the runtime reads
    OMP_NUM_THREADS at its first use)."""
    digests = []
    for threads in ("1", "3"):
        env = dict(os.environ, OMP_NUM_THREADS=threads, PYTHONPATH=os.pathsep.join(p for p in sys.path if p))
        env.pop("DLMSVDD_CPU_ISA", None)
        proc = subprocess.run([sys.executable, "-c", SAME_BITS], capture_output=True, text=True, timeout=300,
                              env=env, cwd=os.path.dirname(os.path.abspath(__file__)))
        assert proc.returncode == 0, proc.stderr[-3000:]
        digests.append(proc.stdout.strip().splitlines()[-1])
    assert digests[0] == digests[1]


# ---- errors: each a ValueError or TypeError naming what is wrong

A32 = np.ones((4, 3), dtype=np.float32)


@pytest.mark.parametrize("call,error,match", [
    (lambda: ops.matvec64(np.ones(3, np.float32), np.ones(3)), ValueError, "A must be 2-D"),
    (lambda: ops.rmatvec64(np.ones((2, 2, 2)), np.ones(2)), ValueError, "A must be 2-D"),
    (lambda: ops.matvec64(A32, np.ones(4)), ValueError, r"v: expected shape \(3,\) \(A's columns\)"),
    (lambda: ops.rmatvec64(A32, np.ones(3)), ValueError, r"u: expected shape \(4,\) \(A's rows\)"),
    (lambda: ops.matvec64(A32, np.ones((3, 1))), ValueError, r"v: expected shape \(3,\)"),
    (lambda: ops.matvec64(A32, np.ones(3, np.float32)), TypeError, "v: dtype float32, expected float64"),
    (lambda: ops.rmatvec64(A32, torch.ones(4)), TypeError, "u: dtype float32, expected float64"),
    (lambda: ops.matvec64(np.ones((4, 3), np.int64), np.ones(3)), TypeError, "A: expected dtype float32 or float64"),
    (lambda: ops.matvec64(np.ones((4, 3), np.float16), np.ones(3)), TypeError, "A: expected dtype float32 or float64"),
    (lambda: ops.matvec64(np.ones((3, 4), np.float32).T, np.ones(3)), ValueError, "A: columns must be contiguous"),
    (lambda: ops.rmatvec64(torch.ones(3, 4).T, torch.ones(4, dtype=torch.float64)), ValueError,
     "A: columns must be contiguous"),
    (lambda: ops.matvec64([[1.0]], np.ones(1)), TypeError, "A: expected a torch.Tensor or numpy.ndarray"),
    (lambda: ops.matvec64(A32, [1.0, 2.0, 3.0]), TypeError, "v: expected a torch.Tensor or numpy.ndarray"),
    (lambda: ops.matvec64(torch.ones(4, 3, requires_grad=True), torch.ones(3, dtype=torch.float64)), ValueError,
     "A: requires grad"),
    (lambda: ops.matvec64(A32, np.ones(3), out=np.ones(3)), ValueError, r"out: expected shape \(4,\) \(A's rows\)"),
    (lambda: ops.rmatvec64(A32, np.ones(4), out=np.ones(4)), ValueError, r"out: expected shape \(3,\) \(A's columns\)"),
    (lambda: ops.matvec64(A32, np.ones(3), out=np.ones(4, np.float32)), TypeError, "out: dtype float32, expected float64"),
    (lambda: ops.matvec64(A32, np.ones(3), out=np.ones(8)[::2]), ValueError, r"out: must be contiguous \(stride 1\)"),
])
def test_errors(call, error, match):
    with pytest.raises(error, match=match):
        call()


def test_out_sharing_memory_is_refused():
    A = np.ones((3, 3))
    v = np.ones(3)
    with pytest.raises(ValueError, match="out: must not share memory with v"):
        ops.matvec64(A, v, out=v)
    with pytest.raises(ValueError, match="out: must not share memory with A"):
        ops.rmatvec64(A, np.ones(3), out=A[1])
    out = np.ones(3)
    out.flags.writeable = False
    with pytest.raises(ValueError, match="out: is read-only"):
        ops.matvec64(A, v, out=out)


def test_the_emulated_kernels_need_their_workspace():
    A, u, out = np.ones((4, 3), np.float32), np.ones(4), np.empty(3)
    with pytest.raises(ValueError, match=r"workspace: .*rmatvec64_workspace_bytes\(n, k\)"):
        _C.rmatvec64(A, u, out, None, 0, True)
    small = np.empty(0)
    with pytest.raises(ValueError, match="workspace: must be"):
        _C.rmatvec64(A, u, out, small, 0, True)
    with pytest.raises(ValueError, match="n and k must be >= 0"):
        _C.rmatvec64_workspace_bytes(-1, 3)
