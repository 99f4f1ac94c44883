"""The dual solvers against an independent QP solver (scipy SLSQP), and the boundary recovery."""

import itertools

import numpy as np
import pytest
import torch
from scipy.optimize import minimize

from dlmsvdd_ext import kernel_operator, ops
from dlmsvdd_ext.dual import DualProblem
from dlmsvdd_ext.kernel_operator import DenseKernel, LowRankKernel, RbfOnTheFly, exact_rbf_operator
from dlmsvdd_ext.solver import StoppingRule, recover_boundary, solve

from conftest import rbf_reference


def make_problem(seed, n, with_anomalies, d=5):
    """Points around a few random centres; roughly a third anomalous."""
    rng = np.random.default_rng(seed)
    centres = rng.standard_normal((3, d)) * 2
    X = centres[rng.integers(0, 3, n)] + rng.standard_normal((n, d))
    t = np.ones(n)
    if with_anomalies:
        t[rng.permutation(n)[: n // 3]] = -1
    gamma = 1.0 / np.median(((X[:, None] - X[None]) ** 2).sum(-1)[np.triu_indices(n, 1)])
    return torch.from_numpy(X), torch.from_numpy(t), gamma


def qp_reference(K, t, prob: DualProblem):
    """The dual solved by SLSQP with analytic gradients, to high accuracy."""
    c = prob.coefs()
    pen = np.where(t > 0, c["pen_normal"], c["pen_anomaly"])
    q = prob.q

    def f(al):
        a = al * t
        return float(pen @ np.maximum(al, 0) ** q + a @ K @ a)

    def grad(al):
        return 2 * t * (K @ (al * t)) + q * pen * np.maximum(al, 0) ** (q - 1)

    normal = t > 0
    cons = [{"type": "eq", "fun": lambda al: al[normal].sum() - prob.mu_normal, "jac": lambda al: normal * 1.0}]
    if (~normal).any():
        cons.append({"type": "eq", "fun": lambda al: al[~normal].sum() - prob.mu_anomaly, "jac": lambda al: (~normal) * 1.0})
    x0 = prob.uniform_alpha().numpy()
    res = minimize(f, x0, jac=grad, constraints=cons, bounds=[(0, None)] * len(t), method="SLSQP",
                   options={"ftol": 1e-15, "maxiter": 2000})
    return res.x, f(res.x)


CASES = [(seed, p, nu, True) for seed, (p, nu) in enumerate(itertools.product([1.2, 2.0, 5.0], [1.0, 1.2, 2.0, 5.0]))]
CASES += [(100 + seed, p, nu, True) for seed, (p, nu) in enumerate(itertools.product([1.2, 2.0, 5.0], [1.2, 2.0]))]
CASES += [(200 + seed, p, 1.0, False) for seed, p in enumerate([1.2, 2.0, 5.0])]


@pytest.mark.parametrize("method", ["apg", "pairwise"])
@pytest.mark.parametrize("seed,p,nu,with_anomalies", CASES)
def test_solvers_match_slsqp(seed, p, nu, with_anomalies, method):
    n = 20 + (seed * 7) % 41  # 20 .. 60
    X, t, gamma = make_problem(seed, n, with_anomalies)
    prob = DualProblem.from_labels(t, p=p, nu=nu)
    K = rbf_reference(X.numpy(), X.numpy(), gamma)
    _, f_ref = qp_reference(K, t.numpy(), prob)

    res = solve(exact_rbf_operator(X, gamma), prob, method=method, max_iter=20000, tol=1e-9)
    alpha = res.alpha.numpy()
    # Feasible.
    assert alpha.min() >= 0
    assert abs(alpha[t.numpy() > 0].sum() - prob.mu_normal) <= 1e-12
    if with_anomalies:
        assert abs(alpha[t.numpy() < 0].sum() - prob.mu_anomaly) <= 1e-12
    # The reported objective is the true one at the returned alpha.
    a = alpha * t.numpy()
    pen = np.where(t.numpy() > 0, prob.coefs()["pen_normal"], prob.coefs()["pen_anomaly"])
    f_true = pen @ alpha ** prob.q + a @ K @ a
    assert abs(res.objective - f_true) <= 1e-10 * f_true
    # Optimal: matches the QP solver within 1e-6 relative ...
    assert res.converged
    assert abs(f_true - f_ref) <= 1e-6 * f_ref
    # ... and the gap bounds the suboptimality: F* <= f_ref, so f_true - f_ref <= gap.
    assert f_true - f_ref <= res.gap + 1e-12
    assert res.gap <= 1e-9 * f_true


@pytest.mark.parametrize("seed,p,nu,with_anomalies", CASES[:6])
def test_paper_solver_is_bounded_by_its_gap(seed, p, nu, with_anomalies):
    X, t, gamma = make_problem(seed, 40, with_anomalies)
    prob = DualProblem.from_labels(t, p=p, nu=nu)
    K = rbf_reference(X.numpy(), X.numpy(), gamma)
    _, f_ref = qp_reference(K, t.numpy(), prob)
    res = solve(exact_rbf_operator(X, gamma), prob, method="paper", max_iter=1000, tol=0.0)
    assert res.n_iter == 1000 and not res.converged
    assert res.objective >= f_ref - 1e-9 * f_ref  # never below the optimum
    assert res.objective - f_ref <= res.gap + 1e-12
    # Its first step (lambda = 1) jumps to a vertex; from there it descends on the whole.
    hist = np.array(res.history["objective"])
    assert hist[-1] < hist[1]


@pytest.mark.parametrize("p", [1.2, 2.0, 5.0])
def test_kkt_recovery_makes_margins_constant(p):
    """At a certified optimum f_i - eps_i is the same for every normal support
    vector (= b_N) and f_l + eps_l for every anomalous one (= b_A), with the slack
    the dual implies, eps = penalty'(alpha)."""
    X, t, gamma = make_problem(7, 50, True)
    prob = DualProblem.from_labels(t, p=p, nu=1.2)
    op = exact_rbf_operator(X, gamma)
    res = solve(op, prob, method="pairwise", max_iter=50000, tol=1e-12)
    b = recover_boundary(prob, res.alpha, res.Ka)
    K = torch.from_numpy(rbf_reference(X.numpy(), X.numpy(), gamma))
    Ka = K @ (res.alpha * t)
    aKa = float((res.alpha * t) @ Ka)
    f = 1 - 2 * Ka + aKa
    eps = prob.penalty_derivative(res.alpha)
    normal = t > 0
    sv = res.alpha > 1e-9 * res.alpha.max()
    inner = (f - eps)[normal & sv]
    outer = (f + eps)[~normal & sv]
    assert len(inner) > 5 and len(outer) > 2
    assert float(inner.max() - inner.min()) <= 1e-6
    assert float(outer.max() - outer.min()) <= 1e-6
    assert abs(float(inner.mean()) - b.b_normal) <= 1e-6
    assert abs(float(outer.mean()) - b.b_anomaly) <= 1e-6
    assert abs(b.r2 - (b.b_normal + b.b_anomaly) / 2) <= 1e-12
    assert abs(b.rho2 - (b.b_anomaly - b.b_normal) / 2) <= 1e-12


def test_paper_recovery_differs_by_the_slack_factor():
    """At p = 2 the paper's slack is half the dual's: its averaged boundaries are biased."""
    X, t, gamma = make_problem(3, 50, True)
    prob = DualProblem.from_labels(t, p=2.0, nu=1.2)
    res = solve(exact_rbf_operator(X, gamma), prob, method="pairwise", max_iter=50000, tol=1e-12)
    kkt = recover_boundary(prob, res.alpha, res.Ka, "kkt")
    paper = recover_boundary(prob, res.alpha, res.Ka, "paper")
    eps = prob.penalty_derivative(res.alpha)  # the dual's slack; the paper uses eps / 2
    for mask, kkt_b, paper_b, sign in ((t > 0, kkt.b_normal, paper.b_normal, 1), (t < 0, kkt.b_anomaly, paper.b_anomaly, -1)):
        w = res.alpha[mask]
        support = w > 1e-6 * w.max()  # the averaging runs over the support vectors
        assert paper_b == pytest.approx(kkt_b + sign * float(eps[mask][support].mean()) / 2, abs=1e-6)


def test_one_class_recovery():
    X, t, gamma = make_problem(5, 40, False)
    prob = DualProblem.from_labels(t, p=2.0, nu=1.0)
    res = solve(exact_rbf_operator(X, gamma), prob, tol=1e-10)
    b = recover_boundary(prob, res.alpha, res.Ka)
    assert b.rho2 == 0.0 and b.b_normal == b.b_anomaly == b.r2


@pytest.mark.parametrize("method", ["apg", "pairwise", "paper"])
def test_kernel_operators_agree(method):
    """Dense, on-the-fly (with a 3-column cache) and an exact factor give the same solution."""
    X, t, gamma = make_problem(11, 45, True)
    prob = DualProblem.from_labels(t, p=2.0, nu=1.2)
    K = ops.rbf_gram(X, None, gamma)
    w, U = torch.linalg.eigh(K)
    Z = U * w.clamp_min(0).sqrt()  # K = Z Z^T exactly
    tiny = 3 * 45 * 8  # bytes for 3 columns
    results = [solve(op, prob, method=method, max_iter=300, tol=1e-10)
               for op in (DenseKernel(K), RbfOnTheFly(X, gamma, tiny), LowRankKernel(Z, tiny))]
    for r in results[1:]:
        assert abs(r.objective - results[0].objective) <= 1e-9 * results[0].objective
        assert torch.allclose(r.alpha, results[0].alpha, atol=1e-7)


def test_warm_start_from_the_optimum_stops_at_once():
    X, t, gamma = make_problem(2, 50, True)
    prob = DualProblem.from_labels(t, p=2.0, nu=1.2)
    op = exact_rbf_operator(X, gamma)
    first = solve(op, prob, tol=1e-9)
    again = solve(op, prob, method="pairwise", tol=1e-8, alpha0=first.alpha)
    assert again.n_iter == 0 and again.converged


def test_float32_reaches_the_default_tolerance():
    X, t, gamma = make_problem(4, 300, True)
    prob64 = DualProblem.from_labels(t, p=2.0, nu=1.2)
    ref = solve(exact_rbf_operator(X, gamma), prob64, tol=1e-10)
    prob32 = DualProblem.from_labels(t.float(), p=2.0, nu=1.2)
    assert prob32.t.dtype == torch.float64  # the state is float64 whatever the labels came as
    for method in ("apg", "pairwise"):
        r = solve(exact_rbf_operator(X.float(), gamma), prob32, method=method, max_iter=5000, tol=1e-6)
        assert r.converged, method
        assert abs(r.objective - ref.objective) <= 2e-6 * ref.objective


# ---- float64 products and certificates over float32 kernels (issue 14, items 2 and 3)

def test_products_are_float64_sums_whatever_the_kernels_dtype():
    """K, Z and X in float32; v in float64: K v accumulated in float64 (the
    float32 entries exactly as stored), against numpy in float64."""
    X, t, gamma = make_problem(12, 300, True)
    X32 = X.float()
    v = torch.from_numpy(np.random.default_rng(0).standard_normal(300))
    K32 = ops.rbf_gram(X32, None, gamma)
    ref = K32.double().numpy() @ v.numpy()
    out = DenseKernel(K32).matvec(v)
    assert out.dtype == torch.float64
    np.testing.assert_allclose(out.numpy(), ref, rtol=1e-13, atol=1e-13)
    Z32 = torch.from_numpy(np.random.default_rng(1).standard_normal((300, 17))).float()
    Z = Z32.double().numpy()
    np.testing.assert_allclose(LowRankKernel(Z32).matvec(v).numpy(), Z @ (Z.T @ v.numpy()), rtol=1e-12, atol=1e-12)
    # on the fly: the exact kernel of the float32 features, computed in float64
    K_ref = rbf_reference(X32.double().numpy(), X32.double().numpy(), gamma)
    np.testing.assert_allclose(RbfOnTheFly(X32, gamma, 1 << 16).matvec(v).numpy(), K_ref @ v.numpy(),
                               rtol=1e-12, atol=1e-12)


def test_a_float32_kernels_frank_wolfe_is_certified_in_float64():
    """The compiled loop runs a float64 state over a float32 K's columns; the
    certificate it reports is the float64 one at the returned (feasible)
    alpha, and it reaches a tol below float32's resolution (a float32 state
    stalled above 1e-9 here)."""
    X, t, gamma = make_problem(13, 200, True)
    prob = DualProblem.from_labels(t, p=2.0, nu=1.2)
    K32 = ops.rbf_gram(X.float(), None, gamma)
    for tol in (1e-4, 1e-9):
        r = solve(DenseKernel(K32), prob, method="pairwise", max_iter=20000, tol=tol)
        alpha, tt = r.alpha.numpy(), t.numpy()
        assert r.alpha.dtype == torch.float64
        assert abs(alpha[tt > 0].sum() - prob.mu_normal) <= 1e-14 and abs(alpha[tt < 0].sum() - prob.mu_anomaly) <= 1e-14
        K = K32.double().numpy()
        pen = np.where(tt > 0, prob.coefs()["pen_normal"], prob.coefs()["pen_anomaly"])
        g = 2 * tt * (K @ (alpha * tt)) + 2 * pen * alpha
        gap = alpha @ g - prob.mu_normal * g[tt > 0].min() - prob.mu_anomaly * g[tt < 0].min()
        F = pen @ alpha ** 2 + (alpha * tt) @ K @ (alpha * tt)
        # the gap is a difference of O(alpha @ g) terms: float64 rounding of the solver's running
        # gradient (updated over thousands of steps) leaves about 1e-15 of alpha @ g (2.0 here)
        assert r.gap == pytest.approx(gap, rel=1e-6, abs=1e-14 * abs(alpha @ g))
        assert r.objective == pytest.approx(F, rel=1e-12)
        assert r.converged and 0 <= r.gap <= tol * r.objective


# ---- the stopping rule

def _replay(gaps, tol=1e-6, max_iter=10**6, window=None):
    return StoppingRule.replay({"objective": [1.0] * len(gaps), "gap": list(gaps)}, max_iter, tol, window)


def test_negative_or_non_finite_gaps_never_certify():
    for bad in (-1e-12, -40.0, float("nan"), float("inf")):
        rule = _replay([1e-2, 1e-3, bad, 1e-9])
        assert rule.n_iter == 2 and not rule.converged and rule.stalled, bad
    rule = StoppingRule(10, 1e-6)
    assert rule.done({"objective": float("inf"), "gap": 0.0}) and not rule.converged
    assert _replay([1e-2, 0.0]).converged and _replay([1e-2, 1e-6]).converged  # the tolerance itself passes


def test_a_gap_within_rounding_of_zero_certifies():
    """A gap of -1.25e-16 (a trivially solved problem's) is zero to float64's
    rounding: a certificate, at any tol, tol = 0 included; -1e-12 is not."""
    for gap in (-1.25e-16, -0.9 * StoppingRule.ROUNDING, 0.9 * StoppingRule.ROUNDING):
        for tol in (1e-6, 0.0):
            assert _replay([1e-2, gap], tol=tol).converged, (gap, tol)
            assert StoppingRule.certifies(1e6, gap * 1e6, tol)  # relative to the objective
    assert not _replay([1e-2, 1.1 * StoppingRule.ROUNDING], tol=0.0).converged
    assert not StoppingRule.certifies(1.0, -1.1 * StoppingRule.ROUNDING, 1e-6)


def test_a_gap_that_stops_falling_stalls():
    flat = [1e-3 * 0.5 ** k for k in range(20)] + [1.5e-9 * (1 + 0.01 * np.sin(k)) for k in range(500)]
    rule = _replay(flat, tol=1e-10)
    assert rule.stalled and not rule.converged and "stopped falling" in rule.status
    assert rule.n_iter <= 2 * 20 + StoppingRule.WINDOW  # stops within the window after the floor
    # slow but steady rates go on: vanilla Frank-Wolfe's 1/t; pairwise Frank-Wolfe's
    # linear rate close to 1 (two of n = 1000 weights move per step: its window is n)
    for gaps, window in (([1.0 / (k + 1) for k in range(5000)], None),
                         ([0.9995 ** k for k in range(5000)], StoppingRule.frank_wolfe_window(1000))):
        rule = _replay(gaps, tol=1e-12, max_iter=4999, window=window)
        assert not rule.stalled and rule.n_iter == 4999 and rule.status == "max_iter = 4999 reached"
    assert _replay([0.9995 ** k for k in range(5000)], tol=1e-12).stalled  # as APG iterations: stalled


@pytest.mark.parametrize("method", ["apg", "pairwise"])
def test_tol_zero_means_to_float64_rounding(method):
    """tol = 0: the solver runs until the gap is within rounding of zero and
    says converged (it stalled there before, with a ConvergenceWarning)."""
    X, t, gamma = make_problem(14, 60, True)
    prob = DualProblem.from_labels(t, p=2.0, nu=1.2)
    r = solve(exact_rbf_operator(X, gamma), prob, method=method, tol=0.0, max_iter=20000)
    assert r.converged and not r.stalled
    assert method != "apg" or r.n_iter < 1000  # the compiled loop's own test (0 <= gap <= 0) runs on
    assert abs(r.gap) <= StoppingRule.ROUNDING * r.objective


# ---- the memory budget (item 9)

def test_cache_size_auto_is_half_the_free_memory():
    with open("/proc/meminfo") as f:
        free = next(int(line.split()[1]) * 1024 for line in f if line.startswith("MemAvailable:"))
    try:  # a container's limit (cgroup v2) caps it
        limit = open("/sys/fs/cgroup/memory.max").read().strip()
        if limit != "max":
            free = min(free, int(limit) - int(open("/sys/fs/cgroup/memory.current").read()))
    except OSError:
        pass
    assert kernel_operator.cache_bytes("auto") == pytest.approx(0.5 * free, rel=0.2)  # memory moves meanwhile
    assert kernel_operator.cache_bytes(3) == 3 << 20


def test_the_budget_picks_the_kernels_form(monkeypatch):
    """K in the features' dtype when its n^2 entries fit, else on the fly;
    "auto" follows the free memory."""
    X, _, gamma = make_problem(15, 100, False)
    n2 = 100 * 100
    forms = {}
    for features in (X.double(), X.float()):
        size = features.element_size()
        for free in (2 * size * n2, 2 * size * n2 - 1):
            monkeypatch.setattr(kernel_operator, "available_memory", lambda device="cpu", free=free: free)
            op = exact_rbf_operator(features, gamma, "auto")
            forms[(features.dtype, free)] = (type(op).__name__, op.dtype)
    assert list(forms.values()) == [("DenseKernel", torch.float64), ("RbfOnTheFly", torch.float64),
                                    ("DenseKernel", torch.float32), ("RbfOnTheFly", torch.float64)]


def test_project_simplex_matches_a_qp():
    rng = np.random.default_rng(0)
    for _ in range(20):
        v = rng.standard_normal(rng.integers(1, 30))
        mass = float(rng.uniform(0.1, 3))
        x = ops.simplex_project(torch.from_numpy(v), torch.ones(len(v), dtype=torch.float64), mass, 0.0).numpy()
        res = minimize(lambda z: 0.5 * ((z - v) ** 2).sum(), np.full_like(v, mass / len(v)), jac=lambda z: z - v,
                       constraints=[{"type": "eq", "fun": lambda z: z.sum() - mass}], bounds=[(0, None)] * len(v),
                       method="SLSQP", options={"ftol": 1e-14})
        np.testing.assert_allclose(x, res.x, atol=1e-6)
        assert abs(x.sum() - mass) <= 1e-12 and x.min() >= 0


@pytest.mark.parametrize("kwargs,match", [
    ({"p": 1.0}, "p must be >= 1.1"),
    ({"nu": 0.5}, "nu must be >= 1"),
    ({"c1": 0.0}, "c1 must be a positive"),
    ({"c2": -1.0}, "c2 must be a positive"),
])
def test_bad_hyper_parameters(kwargs, match):
    t = torch.tensor([1.0, 1.0, -1.0])
    with pytest.raises(ValueError, match=match):
        DualProblem.from_labels(t, **kwargs)


def test_bad_labels():
    with pytest.raises(ValueError, match=r"labels must be \+1"):
        DualProblem.from_labels(torch.tensor([1.0, 0.0]))
    with pytest.raises(ValueError, match="no normal samples"):
        DualProblem.from_labels(torch.tensor([-1.0, -1.0]))
    with pytest.raises(ValueError, match="without anomalies nu must be 1"):
        DualProblem.from_labels(torch.tensor([1.0, 1.0]), nu=1.2)
