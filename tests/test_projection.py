"""The simplex projection in O(N) passes (issue 25): the compiled
``ops.simplex_project`` on the CPU and through the CUDA emulation, and the
torch reference (``reference.project_simplex``), against the sorting
algorithm (Duchi et al. 2008, in numpy here) and the KKT conditions: random
vectors, ties, zero and large budgets, a class empty, two classes at once."""

import numpy as np
import pytest
import torch

from dlmsvdd_ext import ops
from dlmsvdd_ext.dual import DualProblem
from dlmsvdd_ext.reference import project_simplex, simplex_threshold


def compiled(cuda_emulation):
    """One class (t = 1) through ops.simplex_project."""
    def project(v, mass):
        return ops.simplex_project(v, torch.ones_like(v), mass, 0.0, cuda_emulation=cuda_emulation)
    return project


IMPLEMENTATIONS = {"torch": project_simplex, "cpu": compiled(False), "emulated": compiled(True)}


@pytest.fixture(params=list(IMPLEMENTATIONS))
def project(request):
    return IMPLEMENTATIONS[request.param]


def sorted_projection(v: np.ndarray, mass: float) -> np.ndarray:
    """The sort-based projection (the package's before issue 25)."""
    if mass == 0.0 or v.size == 0:
        return np.zeros_like(v)
    u = np.sort(v)[::-1]
    css = np.cumsum(u) - mass
    rho = np.flatnonzero(u - css / np.arange(1, v.size + 1) > 0)[-1]
    return np.maximum(v - css[rho] / (rho + 1), 0.0)


def check_projection(project, v: np.ndarray, mass: float):
    x = project(torch.from_numpy(v), mass).numpy()
    scale = max(1.0, float(np.abs(v).max()), mass)
    np.testing.assert_allclose(x, sorted_projection(v, mass), rtol=0, atol=8 * np.finfo(float).eps * scale)
    # The mass to a recursive sum's rounding over the support (the compiled
    # passes sum in index order; torch's pairwise sums round less).
    assert x.min() >= 0 and abs(x.sum() - mass) <= 4 * np.finfo(float).eps * scale * max(1, v.size)
    if mass > 0:  # KKT: x = max(v - theta, 0) with one threshold (the support's v - x)
        support = x > 0
        theta = float(np.median(v[support] - x[support]))
        np.testing.assert_allclose(x, np.maximum(v - theta, 0.0), rtol=0, atol=4 * np.finfo(float).eps * scale)
    return x


@pytest.mark.parametrize("seed", range(10))
@pytest.mark.parametrize("n", [1, 2, 7, 100, 5000])
def test_random_vectors_match_the_sort(project, seed, n):
    rng = np.random.default_rng(seed)
    v = rng.standard_normal(n) * 10 ** rng.uniform(-6, 3)
    for mass in (1e-9, 0.1, 1.1, 100.0):
        check_projection(project, v, mass)


@pytest.mark.parametrize("v", [
    np.full(50, 0.3),                                # every entry tied
    np.r_[np.full(10, 1.0), np.full(40, 0.5)],       # two tied levels
    np.r_[np.full(3, 2.0), np.zeros(20), np.full(5, -1.0)],
    np.repeat(np.arange(10.0), 7)[::-1].copy(),      # ties at every level
])
@pytest.mark.parametrize("mass", [0.0, 0.5, 1.0, 3.0, 1e6])
def test_ties_and_budgets(project, v, mass):
    """mass 0: all zeros; 1e6: every entry in the support (theta below the smallest)."""
    x = check_projection(project, v, mass)
    if mass == 1e6:
        assert (x > 0).all()


def test_ties_exactly_at_the_threshold(project):
    """v = (3, 1, 1, 1) with mass 2 puts theta at exactly 1: the tied entries get 0."""
    x = check_projection(project, np.array([3.0, 1.0, 1.0, 1.0]), 2.0)
    np.testing.assert_array_equal(x, [2.0, 0.0, 0.0, 0.0])


def test_heavy_tails_and_a_tiny_support(project):
    """Support sizes from 1 to a few: the cases where Newton takes most steps."""
    rng = np.random.default_rng(1)
    for v, mass in [(rng.standard_normal(100000), 1.0), (rng.exponential(size=100000), 1.0),
                    (rng.uniform(size=100000) ** -2.0, 1.0), (0.5 ** np.arange(200.0), 1e-3),
                    (np.linspace(0, 1, 100000), 1.0)]:
        check_projection(project, v, mass)


def test_the_reference_threshold_is_exact():
    """The torch reference's threshold reproduces its projection exactly."""
    v = np.random.default_rng(3).standard_normal(1000)
    theta = simplex_threshold(torch.from_numpy(v), 1.5)
    np.testing.assert_array_equal(project_simplex(torch.from_numpy(v), 1.5).numpy(), np.maximum(v - theta, 0.0))


def test_empty(project):
    assert project(torch.zeros(0, dtype=torch.float64), 1.0).numel() == 0


def test_float32_in_the_reference():
    v = torch.tensor([0.2, 0.7, -0.1], dtype=torch.float32)
    x = project_simplex(v, 1.0)
    assert x.dtype == torch.float32
    np.testing.assert_allclose(x.numpy(), sorted_projection(v.double().numpy(), 1.0), atol=1e-7)


def test_non_finite_input_gives_nan_not_an_error(project):
    x = project(torch.tensor([1.0, float("nan"), 0.5], dtype=torch.float64), 1.0)
    assert torch.isnan(x).all()


@pytest.mark.parametrize("cuda_emulation", [False, True])
@pytest.mark.parametrize("seed", range(4))
def test_two_classes_at_once(cuda_emulation, seed):
    """Each class onto its own simplex in the same passes, interleaved labels,
    classes of very different sizes; a class with no mass gets zeros; out may be v."""
    rng = np.random.default_rng(seed)
    n = int(rng.integers(2, 3000))
    t = np.where(rng.uniform(size=n) < rng.uniform(0.01, 0.5), -1.0, 1.0)
    t[0] = 1.0
    v = rng.standard_normal(n) * 10 ** rng.uniform(-3, 2)
    for mu_n, mu_a in ((1.1, 0.1), (1.0, 0.0), (1e-9, 50.0)):
        x = ops.simplex_project(torch.from_numpy(v), torch.from_numpy(t), mu_n, mu_a,
                                cuda_emulation=cuda_emulation).numpy()
        for mask, mass in ((t > 0, mu_n), (t < 0, mu_a)):
            np.testing.assert_allclose(x[mask], sorted_projection(v[mask], mass), rtol=0,
                                       atol=8 * np.finfo(float).eps * max(1.0, np.abs(v).max(), mass))
    inplace = torch.from_numpy(v.copy())
    ops.simplex_project(inplace, torch.from_numpy(t), 1.1, 0.1, out=inplace, cuda_emulation=cuda_emulation)
    expected = ops.simplex_project(torch.from_numpy(v), torch.from_numpy(t), 1.1, 0.1)
    np.testing.assert_allclose(inplace.numpy(), expected.numpy(), rtol=0, atol=1e-15)


@pytest.mark.parametrize("call,match", [
    (lambda v, t: ops.simplex_project(v.float(), t, 1.0, 0.0), "v: must be float64"),
    (lambda v, t: ops.simplex_project(v, t[:-1], 1.0, 0.0), "t: length 4 differs from v's 5"),
    (lambda v, t: ops.simplex_project(v, t, -1.0, 0.0), "mu_normal must be >= 0"),
    (lambda v, t: ops.simplex_project(v, t, float("nan"), 0.0), "mu_normal must be finite"),
    (lambda v, t: ops.simplex_project(v, t, 1.0, 0.0, out=t), "out: must not share memory with t"),
    (lambda v, t: ops.simplex_project(v[::2], t[::2], 1.0, 0.0), "v: must be contiguous"),
])
def test_bad_arguments_say_what_is_wrong(call, match):
    v, t = torch.zeros(5, dtype=torch.float64), torch.ones(5, dtype=torch.float64)
    with pytest.raises((ValueError, TypeError), match=match):
        call(v, t)


@pytest.mark.parametrize("labels,nu", [
    ([1] * 6, 1.0),                   # no anomalies (one class: no gather)
    ([1, 1, 1, -1, 1, -1, -1], 1.4),  # both classes
    ([1, -1, -1, -1], 2.0),           # one normal sample
    ([1, 1, 1, -1], 1.0),             # anomalies without mass
])
def test_dual_problem_projects_each_class(labels, nu):
    t = torch.tensor(labels, dtype=torch.float64)
    prob = DualProblem.from_labels(t, nu=nu)
    v = torch.from_numpy(np.random.default_rng(0).standard_normal(len(labels)))
    x = prob.project(v).numpy()
    normal = t.numpy() > 0
    np.testing.assert_allclose(x[normal], sorted_projection(v.numpy()[normal], prob.mu_normal), atol=1e-15)
    np.testing.assert_allclose(x[~normal], sorted_projection(v.numpy()[~normal], prob.mu_anomaly), atol=1e-15)


@pytest.mark.parametrize("cuda_emulation", [False, True])
def test_a_mass_below_the_rounding_of_v_gives_zeros_not_nan(cuda_emulation):
    """mass 1e-20 beside entries of order 1 puts theta on the largest entry
    (1 - 1e-20 rounds to 1): no entry stays above it. The projection is then
    zeros (the mass is below v's rounding), not NaN as when v holds NaN."""
    v = torch.tensor([1.0, 0.5, -2.0], dtype=torch.float64)
    x = compiled(cuda_emulation)(v, 1e-20)
    assert torch.isfinite(x).all() and float(x.sum()) <= 1e-15
