"""APG's compiled iteration (``ops.apg_step``, ``ops.apg_check``; issue 25)
against the torch iteration it replaced (``reference.TorchApgSteps``), on the
CPU and through the CUDA emulation: one step from random points, and whole
solves from the same start (same iterates to float64 rounding, same
iteration count, same certificate)."""

import numpy as np
import pytest
import torch

from dlmsvdd_ext import ops, reference
from dlmsvdd_ext.dual import DualProblem
from dlmsvdd_ext.kernel_operator import DenseKernel, LowRankKernel
from dlmsvdd_ext.solver import CompiledApgSteps, _apg

from conftest import rbf_reference

EPS = np.finfo(np.float64).eps


def _problem(seed, n=300, anomalies=0.1, p=2.0, nu=1.2):
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, 4)) + np.where(rng.uniform(size=(n, 1)) < anomalies, 2.5, 0.0)
    t = np.where(X[:, :1].sum(1) > 1.5, -1.0, 1.0) if anomalies else np.ones(n)
    t[0] = 1.0
    K = rbf_reference(X, X, 10 ** rng.uniform(-1.5, 0))
    prob = DualProblem.from_labels(torch.from_numpy(t), p=p, nu=nu if (t < 0).any() else 1.0)
    return DenseKernel(torch.from_numpy(K)), prob


def _random_state(prob, op, seed):
    """x and x_prev feasible, their kernel products exact."""
    g = torch.Generator().manual_seed(seed)
    x = prob.project(torch.rand(prob.t.numel(), generator=g, dtype=torch.float64) * 0.05)
    x_prev = prob.project(torch.rand(prob.t.numel(), generator=g, dtype=torch.float64) * 0.05)
    return x, x_prev, op.matvec(x * prob.t), op.matvec(x_prev * prob.t)


@pytest.mark.parametrize("cuda_emulation", [False, True])
@pytest.mark.parametrize("p", [2.0, 1.5, 1.2, 3.0])
@pytest.mark.parametrize("beta", [0.0, 0.7, 1.3])
def test_one_step_matches_torch(cuda_emulation, p, beta):
    """The fused step (projection included) and the pass after the product
    equal the torch operations to float64 rounding; beta > 1 sends y below
    zero, where q != 2 penalties are taken at max(y, 0)."""
    op, prob = _problem(1, p=p)
    x, x_prev, Kx, Kx_prev = _random_state(prob, op, 2)
    steps = (3.7, 0.45)
    ours, torch_steps = CompiledApgSteps(prob, cuda_emulation=cuda_emulation), reference.TorchApgSteps(prob)
    new = ours.step(x, x_prev, Kx, Kx_prev, beta, steps)
    expected = torch_steps.step(x, x_prev, Kx, Kx_prev, beta, steps)
    np.testing.assert_allclose(new.numpy(), expected.numpy(), rtol=0, atol=64 * EPS * float(expected.abs().max()))
    Knew = op.matvec(new * prob.t)
    got = ours.check(x, x_prev, Kx, Kx_prev, new, Knew, beta, steps)
    want = torch_steps.check(x, x_prev, Kx, Kx_prev, new, Knew, beta, steps)
    for key in ("objective", "gap", "objective_y", "g_dot_d", "step_d2", "restart", "quadratic", "penalty"):
        scale = max(abs(want[key]), abs(want["objective"]), 1e-300)
        assert abs(got[key] - want[key]) <= 1e-12 * scale, (key, got[key], want[key])
    for key in ("fw_normal", "fw_anomaly"):
        assert got[key] == want[key]


CASES = [  # (seed, n, anomaly share, p, nu)
    (0, 300, 0.1, 2.0, 1.2),
    (1, 400, 0.3, 1.5, 2.0),
    (2, 250, 0.0, 2.0, 1.0),   # one class
    (3, 300, 0.1, 2.0, 1.0),   # anomalies without mass
    (4, 200, 0.05, 3.0, 1.2),
    (5, 300, 0.2, 1.2, 1.5),
]


@pytest.mark.parametrize("cuda_emulation", [False, True])
@pytest.mark.parametrize("case", CASES)
def test_whole_solves_follow_the_torch_iteration(cuda_emulation, case):
    seed, n, share, p, nu = case
    op, prob = _problem(seed, n, share, p, nu)
    alpha = prob.uniform_alpha()
    Ka = op.matvec(alpha * prob.t)
    tol = 1e-9
    ours = _apg(op, prob, alpha, Ka, 3000, tol, steps=CompiledApgSteps(prob, cuda_emulation=cuda_emulation))
    torch_run = reference.apg_torch(op, prob, max_iter=3000, tol=tol)
    assert ours.converged and torch_run.converged
    assert ours.n_iter == torch_run.n_iter and ours.n_matvec == torch_run.n_matvec
    assert 0 <= ours.gap <= tol * ours.objective or abs(ours.gap) <= 1e-13 * ours.objective
    np.testing.assert_allclose(ours.alpha.numpy(), torch_run.alpha.numpy(), rtol=0,
                               atol=1e-9 * float(torch_run.alpha.max()))
    np.testing.assert_allclose(ours.history["objective"], torch_run.history["objective"], rtol=1e-11)


def test_a_factor_kernel_solve_matches_too():
    """The factor operator (the backends' form at scale) through the same comparison."""
    rng = np.random.default_rng(7)
    Z = torch.from_numpy(rng.standard_normal((2000, 32)) / 6)
    t = torch.from_numpy(np.where(rng.uniform(size=2000) < 0.1, -1.0, 1.0))
    prob = DualProblem.from_labels(t)
    op = LowRankKernel(Z)
    alpha = prob.uniform_alpha()
    ours = _apg(op, prob, alpha, op.matvec(alpha * prob.t), 2000, 1e-9)
    torch_run = reference.apg_torch(op, prob, max_iter=2000, tol=1e-9)
    assert ours.converged and ours.n_iter == torch_run.n_iter
    np.testing.assert_allclose(ours.alpha.numpy(), torch_run.alpha.numpy(), rtol=0, atol=1e-12)


def _args(n=5):
    z = torch.zeros(n, dtype=torch.float64)
    t = torch.ones(n, dtype=torch.float64)
    coefs = DualProblem.from_labels(t, nu=1.0).coefs()
    return z, t, coefs


@pytest.mark.parametrize("call,match", [
    (lambda z, t, c: ops.apg_step(z, z.clone(), z.clone(), z.clone(), t, c, 0.5, (1.0, 1.0), out=z),
     "out: must not share memory with x"),
    (lambda z, t, c: ops.apg_step(z, z, z, z, t, c, 0.5, (0.0, 1.0)), "step_normal must be > 0"),
    (lambda z, t, c: ops.apg_step(z, z, z, z, t, c, float("inf"), (1.0, 1.0)), "beta must be finite"),
    (lambda z, t, c: ops.apg_step(z, z[:4], z, z, t, c, 0.5, (1.0, 1.0)), "x_prev: length 4 differs"),
    (lambda z, t, c: ops.apg_step(z, z, z.float(), z, t, c, 0.5, (1.0, 1.0)), "Kx: must be float64"),
    (lambda z, t, c: ops.apg_check(z, z, z, z, z, z, t * 2, c, 0.5, (1.0, 1.0)), "neither \\+1"),
    (lambda z, t, c: ops.apg_check(z, z, z, z, z, z, -t, c, 0.5, (1.0, 1.0)), "no label is \\+1"),
])
def test_bad_arguments_say_what_is_wrong(call, match):
    with pytest.raises((ValueError, TypeError), match=match):
        call(*_args())
