"""The simplex projection in O(N) passes (``dual.simplex_threshold``, issue 25)
against the sorting algorithm (Duchi et al. 2008, in numpy here) and the
KKT conditions: random vectors, ties, zero and large budgets, a class empty."""

import numpy as np
import pytest
import torch

from dlmsvdd_ext.dual import DualProblem, project_simplex, simplex_threshold


def sorted_projection(v: np.ndarray, mass: float) -> np.ndarray:
    """The sort-based projection (the package's before issue 25)."""
    if mass == 0.0 or v.size == 0:
        return np.zeros_like(v)
    u = np.sort(v)[::-1]
    css = np.cumsum(u) - mass
    rho = np.flatnonzero(u - css / np.arange(1, v.size + 1) > 0)[-1]
    return np.maximum(v - css[rho] / (rho + 1), 0.0)


def check_projection(v: np.ndarray, mass: float):
    x = project_simplex(torch.from_numpy(v), mass).numpy()
    scale = max(1.0, float(np.abs(v).max()), mass)
    np.testing.assert_allclose(x, sorted_projection(v, mass), rtol=0, atol=8 * np.finfo(float).eps * scale)
    assert x.min() >= 0 and abs(x.sum() - mass) <= 8 * np.finfo(float).eps * scale * max(1, v.size) ** 0.5
    if mass > 0:  # KKT: x = max(v - theta, 0) with the returned threshold
        theta = simplex_threshold(torch.from_numpy(v), mass)
        np.testing.assert_array_equal(x, np.maximum(v - theta, 0.0))
    return x


@pytest.mark.parametrize("seed", range(10))
@pytest.mark.parametrize("n", [1, 2, 7, 100, 5000])
def test_random_vectors_match_the_sort(seed, n):
    rng = np.random.default_rng(seed)
    v = rng.standard_normal(n) * 10 ** rng.uniform(-6, 3)
    for mass in (1e-9, 0.1, 1.1, 100.0):
        check_projection(v, mass)


@pytest.mark.parametrize("v", [
    np.full(50, 0.3),                                # every entry tied
    np.r_[np.full(10, 1.0), np.full(40, 0.5)],       # two tied levels
    np.r_[np.full(3, 2.0), np.zeros(20), np.full(5, -1.0)],
    np.repeat(np.arange(10.0), 7)[::-1].copy(),      # ties at every level
])
@pytest.mark.parametrize("mass", [0.0, 0.5, 1.0, 3.0, 1e6])
def test_ties_and_budgets(v, mass):
    """mass 0: all zeros; 1e6: every entry in the support (theta below the smallest)."""
    x = check_projection(v, mass)
    if mass == 1e6:
        assert (x > 0).all()


def test_ties_exactly_at_the_threshold():
    """v = (3, 1, 1, 1) with mass 2 puts theta at exactly 1: the tied entries get 0."""
    x = check_projection(np.array([3.0, 1.0, 1.0, 1.0]), 2.0)
    np.testing.assert_array_equal(x, [2.0, 0.0, 0.0, 0.0])


def test_heavy_tails_and_a_tiny_support():
    """Support sizes from 1 to a few: the cases where Newton takes most steps."""
    rng = np.random.default_rng(1)
    for v, mass in [(rng.standard_normal(100000), 1.0), (rng.exponential(size=100000), 1.0),
                    (rng.uniform(size=100000) ** -2.0, 1.0), (0.5 ** np.arange(200.0), 1e-3),
                    (np.linspace(0, 1, 100000), 1.0)]:
        check_projection(v, mass)


def test_empty_and_dtype():
    assert project_simplex(torch.zeros(0, dtype=torch.float64), 1.0).numel() == 0
    v = torch.tensor([0.2, 0.7, -0.1], dtype=torch.float32)
    x = project_simplex(v, 1.0)
    assert x.dtype == torch.float32
    np.testing.assert_allclose(x.numpy(), sorted_projection(v.double().numpy(), 1.0), atol=1e-7)


def test_non_finite_input_gives_nan_not_an_error():
    x = project_simplex(torch.tensor([1.0, float("nan"), 0.5], dtype=torch.float64), 1.0)
    assert torch.isnan(x).all()


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
