"""LpSVDD, the scikit-learn estimator."""

import numpy as np
import pytest
import torch
from sklearn.datasets import load_digits
from sklearn.metrics import roc_auc_score
from sklearn.metrics.pairwise import rbf_kernel
from sklearn.utils.estimator_checks import check_estimator

from dlmsvdd_ext import LpSVDD


class _FitsWithoutLabels(LpSVDD):
    """scikit-learn's generic checks pass arbitrary class labels (0, 1, 2, ...) as y;
    LpSVDD's y is the +1/-1 anomaly supervision and it refuses anything else.
    This adapter fits without labels (one-class) so every other check runs on
    the real estimator."""

    def fit(self, X, y=None):
        return super().fit(X)


def test_scikit_learn_check_estimator():
    """All 46 checks of check_estimator pass (pandas and array-API ones are
    skipped when those are not installed), with two documented adjustments:
    y is dropped (see _FitsWithoutLabels), and c1 = 0.5 instead of 1/n,
    because with c1 = 1/n the fitted sphere can exclude every training sample
    (b_N < 0, a valid solution) while the outlier checks expect some inliers."""
    results = check_estimator(_FitsWithoutLabels(nu=1.0, c1=0.5), on_fail=None)
    failed = [(r["check_name"], str(r["exception"])[:200]) for r in results if r["status"] == "failed"]
    assert not failed
    assert sum(r["status"] == "passed" for r in results) >= 40


def _two_blobs(seed=0, n=120, d=6):
    rng = np.random.default_rng(seed)
    normal = rng.standard_normal((n, d))
    anomalies = rng.standard_normal((n // 3, d)) + 3.0
    X = np.vstack([normal, anomalies])
    y = np.r_[np.ones(n), -np.ones(n // 3)]
    return X, y


def test_scores_follow_the_definitions():
    X, y = _two_blobs()
    m = LpSVDD(tol=1e-9).fit(X, y)
    assert m.converged_ and m.gap_ <= 1e-9 * m.objective_
    assert m.gamma_ > 0 and m.n_features_in_ == X.shape[1]
    # f(x) = 1 - 2 k(x)^T a + a^T K a, computed independently with scikit-learn.
    a = m.alpha_ * y
    K = rbf_kernel(X, X, gamma=m.gamma_)
    Xt = np.random.default_rng(1).standard_normal((25, X.shape[1])) * 2
    f_ref = 1 - 2 * rbf_kernel(Xt, X, gamma=m.gamma_) @ a + a @ K @ a
    np.testing.assert_allclose(m.dissimilarity(Xt), f_ref, rtol=1e-10, atol=1e-10)
    np.testing.assert_allclose(m.score_samples(Xt), -f_ref, rtol=1e-10, atol=1e-10)
    np.testing.assert_allclose(m.decision_function(Xt), m.r2_ - f_ref, rtol=1e-10, atol=1e-10)
    np.testing.assert_array_equal(m.predict(Xt), np.where(m.r2_ - f_ref >= 0, 1, -1))
    assert m.offset_ == -m.r2_
    assert m.b_normal_ <= m.r2_ <= m.b_anomaly_
    assert m.rho2_ == pytest.approx((m.b_anomaly_ - m.b_normal_) / 2)
    # Weights: feasible, the support holds every positive weight.
    assert abs(m.alpha_[y > 0].sum() - 1.1) < 1e-12 and abs(m.alpha_[y < 0].sum() - 0.1) < 1e-12
    np.testing.assert_array_equal(m.support_, np.flatnonzero(m.alpha_ > 0))
    # Separates the blobs on its training data.
    assert roc_auc_score(y < 0, m.dissimilarity(X)) > 0.99


def test_torch_inputs_give_torch_outputs():
    X, y = _two_blobs()
    Xt = torch.from_numpy(X).float()
    m = LpSVDD().fit(Xt, torch.from_numpy(y))
    out = m.score_samples(Xt)
    assert isinstance(out, torch.Tensor) and out.dtype == torch.float32
    np.testing.assert_allclose(out.numpy(), LpSVDD().fit(X.astype(np.float32), y).score_samples(X.astype(np.float32)),
                               rtol=1e-5, atol=1e-5)
    assert isinstance(m.predict(Xt), torch.Tensor)


@pytest.mark.parametrize("solver", ["apg", "pairwise"])
def test_solvers_agree_in_the_estimator(solver):
    X, y = _two_blobs(3)
    ref = LpSVDD(solver="apg", tol=1e-10).fit(X, y)
    m = LpSVDD(solver=solver, tol=1e-9, max_iter=20000).fit(X, y)
    assert m.objective_ == pytest.approx(ref.objective_, rel=1e-8)
    np.testing.assert_allclose(m.score_samples(X), ref.score_samples(X), atol=1e-5)


def test_small_cache_uses_on_the_fly_kernel_and_agrees():
    X, y = _two_blobs(4)
    ref = LpSVDD(tol=1e-10).fit(X, y)
    tiny = LpSVDD(tol=1e-10, cache_size=0.01).fit(X, y)  # 10 kB: K (160 x 160 x 8 B) does not fit
    assert tiny.objective_ == pytest.approx(ref.objective_, rel=1e-9)


def test_digits_one_vs_rest_is_a_good_detector():
    X, labels = load_digits(return_X_y=True)
    normal = labels == 0
    rng = np.random.default_rng(0)
    anomalies = rng.choice(np.flatnonzero(~normal), size=normal.sum() // 2, replace=False)
    train = np.r_[np.flatnonzero(normal)[::2], anomalies[::2]]
    test = np.setdiff1d(np.arange(len(X)), train)
    y = np.where(labels[train] == 0, 1, -1)
    m = LpSVDD().fit(X[train], y)
    assert roc_auc_score(labels[test] != 0, m.dissimilarity(X[test])) > 0.98


@pytest.mark.parametrize("kwargs,y,match", [
    ({}, [1, 1, 0, 1], r"y must hold \+1 \(normal\) or -1"),
    ({}, [-1, -1, -1, -1], "no normal samples"),
    ({"nu": 0.9}, [1, 1, -1, 1], "nu must be >= 1"),
    ({}, [1, 1, 1, 1], "without anomalies nu must be 1"),
    ({"p": 1.0}, [1, 1, -1, 1], "p must be a finite number > 1"),
    ({"gamma": 0.0}, [1, 1, -1, 1], "gamma must be 'median' or a positive number"),
    ({"gamma": -2.0}, [1, 1, -1, 1], "gamma must be 'median' or a positive number"),
    ({"c1": 0.0}, [1, 1, -1, 1], "c1 must be a positive"),
    ({"c2": -1.0}, [1, 1, -1, 1], "c2 must be a positive"),
    ({"solver": "newton"}, [1, 1, -1, 1], "solver must be one of"),
    ({"kernel": "laplace"}, [1, 1, -1, 1], "kernel must be one of"),
])
def test_bad_input(kwargs, y, match):
    X = np.random.default_rng(0).standard_normal((4, 3))
    with pytest.raises(ValueError, match=match):
        LpSVDD(**kwargs).fit(X, np.array(y))


def test_non_finite_features_are_refused():
    X = np.random.default_rng(0).standard_normal((4, 3))
    X[1, 2] = np.nan
    with pytest.raises(ValueError, match="NaN"):
        LpSVDD(nu=1.0).fit(X)
    T = torch.from_numpy(X)
    with pytest.raises(ValueError, match="NaN or infinity"):
        LpSVDD(nu=1.0).fit(T)
    m = LpSVDD(nu=1.0).fit(np.random.default_rng(1).standard_normal((6, 3)))
    with pytest.raises(ValueError, match="NaN or infinity"):
        m.predict(torch.from_numpy(X))


@pytest.mark.parametrize("kernel", ["exact", "nystrom", "rpcholesky", "rff", "qmc_rff", "orf", "sorf", "fastfood"])
def test_state_dict_round_trip_scores_identically(kernel, tmp_path):
    X, y = _two_blobs(2)
    X = torch.from_numpy(X).float()
    model = LpSVDD(kernel=kernel, n_components=32, random_state=0).fit(X, y)
    torch.save(model.state_dict(), tmp_path / "b.pt")
    loaded = LpSVDD.from_state_dict(torch.load(tmp_path / "b.pt", weights_only=True))
    assert torch.equal(loaded.dissimilarity(X), model.dissimilarity(X))
    assert loaded.get_params() == {**model.get_params(), "device": None}
    assert (loaded.b_normal_, loaded.b_anomaly_, loaded.gamma_) == (model.b_normal_, model.b_anomaly_, model.gamma_)


@pytest.mark.parametrize("kernel", ["exact", "rff", "nystrom"])
def test_torch_dissimilarity_is_differentiable_and_equals_the_scores(kernel):
    X, y = _two_blobs(3)
    model = LpSVDD(kernel=kernel, n_components=24, random_state=0).fit(X, y)
    x = torch.from_numpy(X[:5]).clone().requires_grad_(True)
    f = model.torch_dissimilarity(x)
    np.testing.assert_allclose(f.detach().numpy(), model.dissimilarity(X[:5]), rtol=1e-10)
    f.sum().backward()
    # central differences of the scoring path (which has no autograd)
    h, grad = 1e-6, np.zeros_like(X[:5])
    for i in range(5):
        for j in range(X.shape[1]):
            up, down = X[:5].copy(), X[:5].copy()
            up[i, j] += h
            down[i, j] -= h
            grad[i, j] = (model.dissimilarity(up)[i] - model.dissimilarity(down)[i]) / (2 * h)
    np.testing.assert_allclose(x.grad.numpy(), grad, rtol=1e-5, atol=1e-7)


def test_warm_start_resumes_from_the_previous_optimum():
    X, y = _two_blobs(4)
    model = LpSVDD(warm_start=True, tol=1e-8).fit(X, y)
    first = model.n_iter_
    model.fit(X, y)
    assert first > 3 and model.n_iter_ <= 1
    y_other = y.copy()
    y_other[0] = -y_other[0]  # other labels: a cold start
    assert LpSVDD(warm_start=True, tol=1e-8).fit(X, y).fit(X, y_other).n_iter_ > 1
