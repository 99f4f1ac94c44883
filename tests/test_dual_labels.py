"""The compiled dual's entry points check their labels and arguments before
touching memory (issue 14, item 6), on the CPU and the emulated CUDA kernels.

The reproducer: fw_solve with no +1 label took the oracle's -1 (an empty
normal class) as an atom and wrote alpha[-1]: "double free or corruption",
the interpreter aborted. It runs in a subprocess here so that an abort fails
the test instead of killing pytest.
"""

import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest
import torch

from dlmsvdd_ext import _C, ops
from dlmsvdd_ext.dual import DualProblem

COEFS = {"q": 2.0, "pen_normal": 0.5, "pen_anomaly": 0.5, "mu_normal": 1.1, "mu_anomaly": 0.1}
ONE_CLASS = dict(COEFS, mu_normal=1.0, mu_anomaly=0.0)
EMULATION = [False, True]


def problem(n=30, seed=0):
    X = torch.from_numpy(np.random.default_rng(seed).standard_normal((n, 3)))
    K = ops.rbf_gram(X, None, 0.5)
    return X, K


def state(K, t):
    n = t.shape[0]
    alpha = torch.full((n,), 1.0 / n, dtype=torch.float64)
    return alpha, K @ (alpha * t)


@pytest.mark.parametrize("cuda_emulation", EMULATION)
@pytest.mark.parametrize("method", ["vanilla", "pairwise"])
@pytest.mark.parametrize("source", ["dense", "features"])
def test_fw_solve_without_normal_label_is_refused_in_a_subprocess(cuda_emulation, method, source):
    code = textwrap.dedent(f"""
        import numpy as np, torch
        from dlmsvdd_ext import ops
        X = torch.from_numpy(np.random.default_rng(0).standard_normal((50, 3)))
        K = ops.rbf_gram(X, None, 0.5)
        t = -torch.ones(50, dtype=torch.float64)  # no +1 label
        alpha = torch.full((50,), 0.02, dtype=torch.float64)
        Ka = K @ (alpha * t)
        coefs = {ONE_CLASS!r}
        try:
            ops.fw_solve(alpha, Ka, t, coefs, method={method!r}, max_iter=50, tol=0.0, source={source!r},
                         matrix=K if {source!r} == "dense" else X, gamma=0.5, cuda_emulation={cuda_emulation})
            print("no error")
        except ValueError as e:
            print("ValueError:", e)
        assert bool((alpha == 0.02).all()), "alpha was written"
    """)
    assert "ValueError: t: no label is +1" in run_isolated(code)


def run_isolated(code: str) -> str:
    """Runs code in a fresh interpreter (an out-of-bounds write or read can
    abort it) and returns its output; fails the test when it crashed."""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in sys.path if p))
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, env=env,
                          cwd=os.path.dirname(os.path.abspath(__file__)))  # not the checkout: its dlmsvdd_ext has no _C
    assert proc.returncode == 0, f"exit status {proc.returncode}: {proc.stderr[-2000:]}"
    return proc.stdout


@pytest.mark.parametrize("cuda_emulation", EMULATION)
@pytest.mark.parametrize("bad", [0.0, 0.5, 2.0, float("nan"), float("inf")])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_labels_other_than_plus_or_minus_one_are_refused(cuda_emulation, bad, dtype):
    _, K = problem()
    t = torch.ones(30, dtype=torch.float64)
    t[::3] = -1
    t[17] = bad
    t[23] = bad  # the first bad index is named, on either back end
    alpha, Ka = state(K, t.nan_to_num(posinf=1.0))
    alpha, Ka, t, K = (a.to(dtype) for a in (alpha, Ka, t, K))
    with pytest.raises(ValueError, match="t: entry 17 is neither"):
        ops.dual_oracle(alpha, Ka, t, COEFS, cuda_emulation=cuda_emulation)
    with pytest.raises(ValueError, match="t: entry 17 is neither"):
        ops.dual_oracle(alpha, Ka, t, COEFS, cuda_emulation=cuda_emulation, shard=True)
    before = alpha.clone()
    for method in ("vanilla", "pairwise"):
        with pytest.raises(ValueError, match="t: entry 17 is neither"):
            ops.fw_solve(alpha, Ka, t, COEFS, method=method, max_iter=5, tol=0.0, source="dense", matrix=K,
                         cuda_emulation=cuda_emulation)
    assert torch.equal(alpha, before)


@pytest.mark.parametrize("cuda_emulation", EMULATION)
def test_empty_normal_class_refused_unless_a_shard(cuda_emulation):
    _, K = problem()
    t = -torch.ones(30, dtype=torch.float64)
    alpha, Ka = state(K, t)
    with pytest.raises(ValueError, match="no label is \\+1"):
        ops.dual_oracle(alpha, Ka, t, COEFS, cuda_emulation=cuda_emulation)
    # A shard of a larger problem may hold anomalies only: -1 for its empty class.
    r = ops.dual_oracle(alpha, Ka, t, COEFS, cuda_emulation=cuda_emulation, shard=True)
    assert r["fw_normal"] == r["away_normal"] == -1
    g = (2 * t * Ka + 2 * 0.5 * alpha).numpy()
    assert r["fw_anomaly"] == int(np.argmin(g)) and r["away_anomaly"] == int(np.argmax(g))
    # No samples at all.
    empty = torch.empty(0, dtype=torch.float64)
    with pytest.raises(ValueError, match="no label is \\+1"):
        ops.dual_oracle(empty, empty, empty, ONE_CLASS, cuda_emulation=cuda_emulation)
    with pytest.raises(ValueError, match="no label is \\+1"):
        ops.fw_solve(empty, empty.clone(), empty.clone(), ONE_CLASS, method="pairwise", max_iter=3, tol=0.0,
                     source="dense", matrix=torch.empty(0, 0, dtype=torch.float64), cuda_emulation=cuda_emulation)


@pytest.mark.parametrize("cuda_emulation", EMULATION)
def test_no_anomalies_need_mu_anomaly_zero(cuda_emulation):
    _, K = problem()
    t = torch.ones(30, dtype=torch.float64)
    alpha, Ka = state(K, t)
    with pytest.raises(ValueError, match="no label is -1 but mu_anomaly = 0.1"):
        ops.dual_oracle(alpha, Ka, t, COEFS, cuda_emulation=cuda_emulation)
    with pytest.raises(ValueError, match="without anomalies nu must be 1"):
        ops.fw_solve(alpha, Ka, t, COEFS, method="vanilla", max_iter=3, tol=0.0, source="dense", matrix=K,
                     cuda_emulation=cuda_emulation)


def one_class_reference(K, pen, iters=20000):
    """min pen |alpha|^2 + alpha^T K alpha over the simplex, by projected
    gradient in numpy (the objective is strongly convex: pen > 0)."""
    K = np.asarray(K, dtype=np.float64)
    n = K.shape[0]
    step = 1.0 / (2 * (np.linalg.eigvalsh(K)[-1] + pen))
    alpha = np.full(n, 1.0 / n)
    for _ in range(iters):
        y = alpha - step * (2 * K @ alpha + 2 * pen * alpha)
        u = np.sort(y)[::-1]  # Euclidean projection onto the simplex (Duchi et al. 2008)
        css = np.cumsum(u) - 1
        rho = np.nonzero(u - css / np.arange(1, n + 1) > 0)[0][-1]
        alpha = np.maximum(y - css[rho] / (rho + 1), 0)
    return alpha, float(pen * alpha @ alpha + alpha @ K @ alpha)


@pytest.mark.parametrize("cuda_emulation", EMULATION)
@pytest.mark.parametrize("method", ["vanilla", "pairwise"])
def test_one_class_fw_solve_against_reference(cuda_emulation, method):
    """No -1 label (an empty anomaly class) with nu = 1: both loops solve it,
    and the certificate is honest: the objective exceeds the optimum by at
    most the reported gap."""
    X, K = problem(40, seed=1)
    t = torch.ones(40, dtype=torch.float64)
    prob = DualProblem.from_labels(t, p=2.0, nu=1.0)
    coefs = prob.coefs()
    alpha = prob.uniform_alpha()
    Ka = K @ alpha
    info = ops.fw_solve(alpha, Ka, t, coefs, method=method, max_iter=300, tol=1e-9, source="features", matrix=X,
                        gamma=0.5, cache_slots=8, cuda_emulation=cuda_emulation)
    ref_alpha, ref_obj = one_class_reference(K, coefs["pen_normal"])
    obj, gap = float(info["history_objective"][-1]), float(info["history_gap"][-1])
    assert 0 <= gap and -1e-12 <= obj - ref_obj <= gap + 1e-12
    assert abs(float(alpha.sum()) - 1.0) < 1e-12 and float(alpha.min()) >= 0
    if method == "pairwise":  # linear convergence
        assert info["converged"] and info["stop"] == "converged"
        assert np.abs(alpha.numpy() - ref_alpha).max() < 1e-4
    else:  # the 2/(t+2) steps: O(1/t)
        assert info["stop"] == "max_iter" and gap < 0.1 * float(info["history_gap"][10])


@pytest.mark.parametrize("cuda_emulation", EMULATION)
def test_fw_solve_never_certifies_a_negative_gap(cuda_emulation):
    """A state whose gap is negative (here an infeasible one; in practice
    rounding): stopped, not converged; it used to count as converged."""
    _, K = problem()
    t = torch.ones(30, dtype=torch.float64)
    alpha = torch.zeros(30, dtype=torch.float64)
    Ka = torch.ones(30, dtype=torch.float64)  # gap = 0 - mu_normal * min g = -2
    info = ops.fw_solve(alpha, Ka, t, ONE_CLASS, method="vanilla", max_iter=10, tol=1e-3, source="dense", matrix=K,
                        cuda_emulation=cuda_emulation)
    assert info["history_gap"][-1] < 0
    assert not info["converged"] and info["stop"] == "negative_gap"


def test_fw_solve_argument_refusals():
    X, K = problem()
    t = torch.ones(30, dtype=torch.float64)
    alpha, Ka = state(K, t)
    base = dict(method="pairwise", max_iter=5, tol=0.0, source="dense", matrix=K)
    for change, message in [({"tol": -1.0}, "tol must be >= 0"), ({"tol": float("nan")}, "tol must be >= 0"),
                            ({"step_offset": -2}, "step_offset must be >= 0"),
                            ({"source": "features", "matrix": X, "gamma": float("inf")}, "gamma must be a positive"),
                            ({"source": "features", "matrix": X[:, :0].contiguous(), "gamma": 1.0},
                             "X: has no columns")]:
        with pytest.raises(ValueError, match=message):
            ops.fw_solve(alpha, Ka, t, ONE_CLASS, **dict(base, **change))
    hist = torch.empty(6, dtype=torch.float64)
    with pytest.raises(ValueError, match="max_iter must be >= 0"):
        _C.fw_solve(alpha, Ka, t, ONE_CLASS, "pairwise", -1, 0.0, 0, hist, hist.clone(), "dense", K)


@pytest.mark.parametrize("change,message", [
    ({"alpha_a": -0.1}, "alpha_s and alpha_a must be >= 0"),
    ({"alpha_s": -1e-9}, "alpha_s and alpha_a must be >= 0"),
    ({"q": 1.0}, "q = p / \\(p - 1\\) must be > 1"),
    ({"pen": -1.0}, "pen must be >= 0"),
    ({"curvature": float("nan")}, "curvature must be finite"),
    ({"g_s": float("inf")}, "g_s must be finite"),
])
def test_pairwise_step_refusals(change, message):
    args = dict(g_s=-1.0, g_a=1.0, alpha_s=0.2, alpha_a=0.3, curvature=1.5, pen=0.5, q=3.0)
    assert 0 < ops.pairwise_step(**args) <= 0.3  # the line search itself, for reference
    with pytest.raises(ValueError, match=message):
        ops.pairwise_step(**dict(args, **change))


@pytest.mark.parametrize("cuda_emulation", EMULATION)
def test_fastfood_permutation_checked_by_the_binding(cuda_emulation):
    """ops checks the permutation in Python; the binding must too (the kernels
    index with it; an entry out of range read outside the block), called
    directly here, in a subprocess (the old binding crashed)."""
    code = textwrap.dedent(f"""
        import torch
        from dlmsvdd_ext import _C
        d_pad, blocks, m = 8, 2, 12
        x = torch.randn(3, 5, dtype=torch.float64)
        diag = torch.ones(3 * blocks, d_pad, dtype=torch.float64)
        offset = torch.zeros(m, dtype=torch.float64)
        out = torch.empty(3, m, dtype=torch.float64)
        for bad in (None, 8.0, -1.0, 2.5, float("nan"), 1e9):
            perm = torch.arange(d_pad, dtype=torch.float64).repeat(blocks, 1)
            if bad is not None:
                perm[1, 6] = bad
            try:
                _C.structured_features("fastfood", x, diag, perm, offset, out, 1.0, 1.0, 0, {cuda_emulation})
                print("ran")
            except ValueError as e:
                print("ValueError:", e)
    """)
    lines = run_isolated(code).splitlines()
    assert lines[0] == "ran"  # a valid permutation
    assert len(lines) == 6
    for line in lines[1:]:
        assert line.startswith("ValueError: structured feature map: perm[1, 6] = ")
        assert line.endswith("is not a whole number in [0, d_pad = 8)")
