"""LpSVDD, the scikit-learn estimator."""

import re
import warnings
from pathlib import Path

import numpy as np
import pytest
import torch
from sklearn.datasets import load_digits
from sklearn.exceptions import ConvergenceWarning
from sklearn.metrics import roc_auc_score
from sklearn.metrics.pairwise import rbf_kernel
from sklearn.utils.estimator_checks import check_estimator

from dlmsvdd_ext import LpSVDD, params
from benchmarks.features import clustered_features


class _FitsWithoutLabels(LpSVDD):
    """scikit-learn's generic checks pass arbitrary class labels (0, 1, 2, ...) as y;
    LpSVDD's y is the +1/-1 anomaly supervision and it refuses anything else.
    This adapter only drops y (fits one-class); every parameter is LpSVDD's own."""

    def fit(self, X, y=None):
        return super().fit(X)


Y_REFUSED = "y must hold \\+1 \\(normal\\) or -1 \\(anomaly\\); found"
# The checks that count the training rows called outliers at contamination = 0.1 and expect 30 of 300:
# LpSVDD's contamination is the share of new normal rows (issue 46), drawn from out-of-sample scores,
# so it calls fewer of the rows it was fitted on outliers (27 of these 300), by design.
TRAINING_COUNT = {"check_outliers_train", "check_outliers_fit_predict"}
TRAINING_COUNT_MESSAGE = "The number of predicted outliers is not equal to the expected number of outliers"


def counted_training_outliers(result) -> bool:
    return result["check_name"] in TRAINING_COUNT and str(result["exception"]).startswith(TRAINING_COUNT_MESSAGE)


def test_plain_check_estimator_fails_only_where_it_passes_class_labels_as_y():
    """What the user guide (docs/user-guide/solver.md, once the README) says of
    check_estimator(LpSVDD()): every check passes
    except those that fit on class labels (0, 1, 2, ...) as y, which fail on
    LpSVDD's own refusal of such a y and on nothing else (24 of 47 in
    scikit-learn 1.9). No scikit-learn tag makes the checks pass +1/-1 labels
    (target_tags only say whether y is required; classifier tags give 0/1),
    and ignoring or reinterpreting class labels would fit a wrong model
    silently."""
    with warnings.catch_warnings():
        warnings.simplefilter("error", ConvergenceWarning)
        results = check_estimator(LpSVDD(), on_fail=None)
    failed = [r for r in results if r["status"] == "failed"]

    def refused_y(error):  # some checks re-raise the refusal inside their own AssertionError
        return any(isinstance(e, ValueError) and re.match(Y_REFUSED, str(e)) for e in (error, error.__cause__))

    counted = [r for r in failed if counted_training_outliers(r)]
    refused = [r for r in failed if refused_y(r["exception"])]
    assert [(r["check_name"], str(r["exception"])[:200]) for r in failed if r not in counted + refused] == []
    assert 0 < len(refused) < sum(r["status"] == "passed" for r in results) + len(failed)
    # the user guide says exactly this (before, the README said that LpSVDD() passes check_estimator)
    page = Path(__file__).resolve().parents[1] / "docs" / "user-guide" / "solver.md"
    readme = " ".join(page.read_text().split())
    said = re.search(r"`check_estimator\(LpSVDD\(\)\)` checks \(([\d.]+): (\d+)\) the (\d+) that fit on class labels"
                     r".*? and the (\d+) that count", readme)
    assert said is not None, "docs/user-guide/solver.md no longer says which check_estimator checks fail and why"
    assert (int(said.group(2)), int(said.group(3)), int(said.group(4))) == (len(results), len(refused), len(counted))
    dropped = {r["check_name"]: r["status"] for r in check_estimator(_FitsWithoutLabels(), on_fail=None)}
    # each refusal passes once y is omitted (or is skipped: the pandas check without pandas)
    assert all(dropped[r["check_name"]] in ("passed", "skipped") for r in refused)


def test_scikit_learn_check_estimator():
    """The checks of check_estimator pass with the default parameters
    (pandas and array-API ones are skipped when those are not installed)
    but the count of training rows called outliers at contamination (see
    TRAINING_COUNT); only y is dropped (see _FitsWithoutLabels)."""
    estimator = _FitsWithoutLabels()
    assert estimator.get_params() == LpSVDD().get_params()
    with warnings.catch_warnings():
        warnings.simplefilter("error", ConvergenceWarning)  # every fit of the checks is certified
        results = check_estimator(estimator, on_fail=None)
    failed = [r for r in results if r["status"] == "failed"]
    assert [(r["check_name"], str(r["exception"])[:200]) for r in failed if not counted_training_outliers(r)] == []
    assert sorted(r["check_name"] for r in failed) == ["check_outliers_fit_predict", "check_outliers_train",
                                                      "check_outliers_train"]  # the second: a read-only copy
    assert sum(r["status"] == "passed" for r in results) >= 40


def _two_blobs(seed=0, n=120, d=6):
    rng = np.random.default_rng(seed)
    normal = rng.standard_normal((n, d))
    anomalies = rng.standard_normal((n // 3, d)) + 3.0
    X = np.vstack([normal, anomalies])
    y = np.r_[np.ones(n), -np.ones(n // 3)]
    return X, y


def cross_fitted_reference(m, X, y, folds=5):
    """The cross-fitted scores of the training normals written out with the public API: 5-fold
    KFold over the normals (sklearn, shuffled by the model's seed), each fold's normals scored by an
    exact LpSVDD fitted on every other row at the whole fit's gamma and nu, plus the whole fit's
    a^T K a less the fold's (every fold: fewer than 1000 normals)."""
    from sklearn.model_selection import KFold

    normal = np.flatnonzero(y > 0)
    scores = []
    for _, held in KFold(folds, shuffle=True, random_state=m.random_state).split(normal):
        held = normal[held]
        keep = np.setdiff1d(np.arange(len(y)), held)
        fold = LpSVDD(gamma=m.gamma_, nu=m.nu_, kernel="exact", calibration=None, contamination="radius",
                      tol=m.tol).fit(X[keep], y[keep])
        scores.append(fold.dissimilarity(X[held]) - fold.aKa_ + m.aKa_)
    return np.concatenate(scores)


def conformal_threshold_reference(scores, level):
    """The smallest calibration score t such that a new score just above it has the p-value
    (1 + #{scores > t}) / (n + 1) <= level: a plain loop over the sorted scores."""
    n = len(scores)
    for t in sorted(scores):
        if (1 + sum(1 for s in scores if s > t)) / (n + 1) <= level:
            return t
    raise AssertionError("unreachable level")


def test_scores_follow_the_definitions():
    X, y = _two_blobs()
    m = LpSVDD(tol=1e-9, random_state=0).fit(X, y)
    assert m.converged_ and m.gap_ <= 1e-9 * m.objective_
    assert m.gamma_ > 0 and m.n_features_in_ == X.shape[1]
    # f(x) = 1 - 2 k(x)^T a + a^T K a, computed independently with scikit-learn.
    a = m.alpha_ * y
    K = rbf_kernel(X, X, gamma=m.gamma_)
    Xt = np.random.default_rng(1).standard_normal((25, X.shape[1])) * 2
    f_ref = 1 - 2 * rbf_kernel(Xt, X, gamma=m.gamma_) @ a + a @ K @ a
    np.testing.assert_allclose(m.dissimilarity(Xt), f_ref, rtol=1e-10, atol=1e-10)
    np.testing.assert_allclose(m.score_samples(Xt), -f_ref, rtol=1e-10, atol=1e-10)
    np.testing.assert_allclose(m.decision_function(Xt), -f_ref - m.offset_, rtol=1e-10, atol=1e-10)
    np.testing.assert_array_equal(m.predict(Xt), np.where(-f_ref - m.offset_ >= 0, 1, -1))
    # offset_: the conformal threshold at contamination 0.1 of the training normals' cross-fitted scores
    cross_fitted = cross_fitted_reference(m, X, y)
    np.testing.assert_allclose(m.calibration_.scores, np.sort(cross_fitted), rtol=1e-9, atol=1e-9)
    assert -m.offset_ == pytest.approx(conformal_threshold_reference(cross_fitted, 0.1), abs=1e-9)
    assert m.b_normal_ <= m.r2_ <= m.b_anomaly_
    assert m.rho2_ == pytest.approx((m.b_anomaly_ - m.b_normal_) / 2)
    # Weights: feasible, the support holds every positive weight.
    assert abs(m.alpha_[y > 0].sum() - (m.nu_ + 1) / 2) < 1e-12 and abs(m.alpha_[y < 0].sum() - (m.nu_ - 1) / 2) < 1e-12
    np.testing.assert_array_equal(m.support_, np.flatnonzero(m.alpha_ > 0))
    # Separates the blobs on its training data.
    assert roc_auc_score(y < 0, m.dissimilarity(X)) > 0.99


SPECTRAL = ["rff", "qmc_rff", "orf", "sorf", "fastfood"]


@pytest.mark.parametrize("kernel", SPECTRAL + ["nystrom", "rpcholesky"])
def test_approximate_scores_are_non_negative_squared_distances(kernel):
    """A spectral map's f is ||z(x) - Z^T a||^2, its feature space's squared
    distance (with k(x, x) = 1 it went down to -0.37: z(x)'z(x) ranges over
    [0, 2]); the landmark maps keep k(x, x) = 1, phi(x)'s exact RKHS distance
    to a centre in the landmarks' span. The boundary satisfies the KKT
    conditions on average: the alpha-weighted mean over the normals of f_i
    minus the slack term d/d alpha_i of the penalty is b_N (f_l plus it over
    the anomalies: b_A)."""
    X, y = _two_blobs(5)
    m = LpSVDD(kernel=kernel, n_components=4, random_state=0, tol=1e-10).fit(X, y)
    assert m.converged_
    Xt = np.vstack([X, np.random.default_rng(2).standard_normal((400, X.shape[1])) * 3])
    a = m.alpha_ * y
    if kernel in SPECTRAL:  # numpy's cosine map from the dense frequencies
        W, b = m.backend_.frequencies().numpy(), m.backend_.offset_.double().numpy()
        z = lambda x: np.sqrt(2.0 / W.shape[1]) * np.cos(x @ W + b)
        w = z(X).T @ a
        f_ref = ((z(Xt) - w) ** 2).sum(1)
        d = (z(X) ** 2).sum(1)
    else:  # z(x) = k(x, U) M; k(x, x) = 1
        U, M = m.backend_.landmarks_.numpy(), m.backend_.map_.numpy()
        z = lambda x: rbf_kernel(x, U, gamma=m.gamma_) @ M
        w = z(X).T @ a
        f_ref = 1 - 2 * z(Xt) @ w + w @ w
        d = np.ones(len(X))
    f = m.dissimilarity(Xt)
    np.testing.assert_allclose(f, f_ref, rtol=1e-9, atol=1e-9)
    assert f.min() >= 0
    # the KKT conditions: g_i = 2 t_i (K a)_i + q cbar 2^q alpha_i^(q-1) (q = 2)
    Ka = z(X) @ w
    f_train = d - 2 * Ka + w @ w
    for cls, sign, b_ref in ((y > 0, -1, m.b_normal_), (y < 0, +1, m.b_anomaly_)):
        cbar = 0.5 * (2.0 / cls.sum()) ** -1 * 0.5  # c = 1/|class|, p = 2
        slack = 2 * cbar * 4 * m.alpha_[cls]
        mean = np.average(f_train[cls] + sign * slack, weights=m.alpha_[cls])
        assert mean == pytest.approx(b_ref, abs=1e-7)


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
    ({"nu": 1.2}, [1, 1, 1, 1], "without anomalies nu must be 1"),
    ({"p": 1.0}, [1, 1, -1, 1], "p must be >= 1.1"),
    ({"contamination": 0.0}, [1, 1, -1, 1], r"contamination must be a number in \(0, 0.5\] or 'radius'"),
    ({"contamination": 0.6}, [1, 1, -1, 1], "contamination must be"),
    ({"cache_size": "all"}, [1, 1, -1, 1], "cache_size must be 'auto' or a positive number"),
    ({"gamma": 0.0}, [1, 1, -1, 1], "gamma must be one of \\('local', 'median'\\) or a positive number"),
    ({"gamma": -2.0}, [1, 1, -1, 1], "gamma must be one of \\('local', 'median'\\) or a positive number"),
    ({"c1": 0.0}, [1, 1, -1, 1], "c1 must be a positive"),
    ({"c2": -1.0}, [1, 1, -1, 1], "c2 must be a positive"),
    ({"slack_scale": 0.0}, [1, 1, -1, 1], "slack_scale must be a positive"),
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


# ---- decisions without labelled anomalies (issue 14, item 1)

def _readme_data():
    """The user guide's five-line LpSVDD example (docs/user-guide/solver.md): 400 normal, 100 anomalous in 16-d."""
    rng = np.random.default_rng(0)
    X = rng.standard_normal((500, 16))
    X[400:] += 3
    return X, np.r_[np.ones(400), -np.ones(100)]


def test_readme_example_calls_about_the_contamination_of_new_normals_normal():
    """It flagged 172 of its 400 training normals (the sphere's r^2 = 0.575
    as the threshold); the contamination threshold, drawn from out-of-sample
    scores, calls about 90% of new normals normal and still flags every anomaly."""
    X, y = _readme_data()
    model = LpSVDD(p=2.0, nu=1.2).fit(X, y)
    assert roc_auc_score(y < 0, model.dissimilarity(X)) == 1.0
    fresh = np.random.default_rng(1).standard_normal((4000, 16))
    assert (model.predict(fresh) == -1).mean() == pytest.approx(0.1, abs=0.04)
    assert (model.predict(X[400:]) == -1).all()


def test_one_class_fit_calls_most_of_new_normal_data_normal():
    """LpSVDD(nu=1).fit(X).predict(X) was -1 everywhere (r^2 = -0.38 at c1 = 1/n)."""
    X, _ = _readme_data()
    fresh = np.random.default_rng(1).standard_normal((4000, 16))
    for model in (LpSVDD(nu=1).fit(X[:400]), LpSVDD().fit(X[:400])):
        assert model.nu_ == 1.0
        assert (model.predict(fresh) == 1).mean() == pytest.approx(0.9, abs=0.04)
        assert (model.predict(X[400:]) == -1).mean() >= 0.95  # anomalies it never saw


@pytest.mark.parametrize("contamination", [0.02, 0.1, 0.5])
@pytest.mark.parametrize("kernel,dtype,n", [("exact", np.float64, 120), ("exact", np.float32, 3000),
                                            ("rff", np.float32, 3000), ("nystrom", np.float64, 3000)])
def test_offset_is_the_conformal_threshold_of_the_cross_fitted_normals(contamination, kernel, dtype, n):
    """offset_ is minus the threshold of p-value <= contamination over the calibration scores
    (a plain loop), so predict is predict(fpr=contamination); the folds stop once 1000 normals
    are scored (3000 normals: two folds of 600), and Nystrom's landmark rows are left out."""
    X, y = _two_blobs(5, n=n)
    X = X.astype(dtype)
    m = LpSVDD(contamination=contamination, kernel=kernel, n_components=32, random_state=0).fit(X, y)
    scores = m.calibration_.scores
    assert m.calibration_source_ == "cross-fitted training normals"
    assert -m.offset_ == conformal_threshold_reference(scores, contamination)
    expected = n if n < 1000 else 1200
    if kernel == "nystrom":
        assert expected - 32 <= m.n_calibration_ < expected
    else:
        assert m.n_calibration_ == expected
    fresh = np.random.default_rng(7).standard_normal((500, X.shape[1])).astype(dtype)
    np.testing.assert_array_equal(m.predict(fresh), m.predict(fresh, fpr=contamination))
    np.testing.assert_array_equal(m.predict(X), np.where(m.decision_function(X) >= 0, 1, -1))
    if kernel == "exact" and n < 1000:
        np.testing.assert_allclose(scores, np.sort(cross_fitted_reference(m, X, y)), rtol=1e-9, atol=1e-9)


def test_radius_threshold_is_the_sphere_on_request():
    X, y = _readme_data()
    m = LpSVDD(contamination="radius", nu=1.2, gamma="median").fit(X, y)  # the user guide's example (172 of 400)
    assert m.offset_ == -m.r2_
    f = m.dissimilarity(X)
    np.testing.assert_array_equal(m.predict(X), np.where(f <= m.r2_, 1, -1))
    assert 0 < (m.predict(X[:400]) == 1).sum() < 400  # the paper's boundary: many normals carry slack


def test_slack_scale_multiplies_the_default_penalties_and_moves_b_normal_into_the_normals():
    """slack_scale s is c1 = s / |I_N|, c2 = s / |I_A| given by hand (the same dual, the same solution);
    at the paper's s = 1 on the user guide's data b_N lies below every normal sample's f (each carries
    slack), at s = 10 among them."""
    X, y = _readme_data()
    n_normal, n_anomaly = int((y > 0).sum()), int((y < 0).sum())
    scaled = LpSVDD(nu=5.0, slack_scale=10.0, gamma="median").fit(X, y)
    by_hand = LpSVDD(nu=5.0, c1=10.0 / n_normal, c2=10.0 / n_anomaly, gamma="median").fit(X, y)
    np.testing.assert_array_equal(scaled.alpha_, by_hand.alpha_)
    assert (scaled.b_normal_, scaled.b_anomaly_) == (by_hand.b_normal_, by_hand.b_anomaly_)
    paper = LpSVDD(nu=5.0, gamma="median").fit(X, y)
    f_paper, f_scaled = paper.dissimilarity(X[y > 0]), scaled.dissimilarity(X[y > 0])
    assert paper.b_normal_ < f_paper.min()
    assert f_scaled.min() < scaled.b_normal_ < f_scaled.max()
    assert LpSVDD(slack_scale=10.0, c1=0.5, c2=0.5, nu=5.0, gamma="median").fit(X, y).objective_ == \
        LpSVDD(c1=0.5, c2=0.5, nu=5.0, gamma="median").fit(X, y).objective_  # given penalties win


def test_nu_auto_with_anomalies_is_the_chosen_value():
    # NU_WITH_ANOMALIES (20, chosen on ADBench's development sets, issue 28), not the paper's 1.2
    X, y = _two_blobs(6)
    with_labels = LpSVDD().fit(X, y)
    assert with_labels.nu_ == 20.0 and with_labels.alpha_[y > 0].sum() == pytest.approx(10.5)
    assert with_labels.objective_ == LpSVDD(nu=20.0).fit(X, y).objective_


# ---- certificates (items 2, 3, 4) and bad values (item 7)

@pytest.mark.parametrize("cache_size", ["auto", 2.0])  # K in float64; K in float32 (2 MB holds 600^2 x 4 B only)
def test_float32_features_reach_the_float64_certificate(cache_size):
    """float32 features and a tolerance below float32's rounding: the float32
    state 'converged' on a negative gap (-7.6e-8 of the objective) before; a
    float64 state reaches 1e-9 in the float64 iteration count."""
    X, t = clustered_features(400, 200, 256, seed=0)
    ref = LpSVDD(tol=1e-9, max_iter=300, gamma=0.51).fit(X.double(), t)
    m = LpSVDD(tol=1e-9, max_iter=300, gamma=0.51, cache_size=cache_size).fit(X, t)
    assert m.converged_ and not m.stalled_
    assert 0 <= m.gap_ <= 1e-9 * m.objective_
    assert m.n_iter_ <= ref.n_iter_ + 3
    assert m.objective_ == pytest.approx(ref.objective_, rel=1e-6)  # float32 vs float64 kernel entries


def test_a_fit_stopped_short_warns():
    X, y = _two_blobs(7)
    with pytest.warns(ConvergenceWarning, match="max_iter = 2 reached"):
        m = LpSVDD(max_iter=2).fit(X, y)
    assert not m.converged_ and not m.stalled_
    with warnings.catch_warnings():
        warnings.simplefilter("error", ConvergenceWarning)
        assert LpSVDD().fit(X, y).converged_  # a certified fit is silent


@pytest.mark.parametrize("solver", ["apg", "pairwise", "paper"])
@pytest.mark.parametrize("p", [1.5, 2.0, 3.0])
def test_a_trivially_solved_problem_is_certified(solver, p):
    """One normal and one anomalous sample: the feasible set is one point
    (alpha = (mu_N, mu_A)), and with gamma = 1e-30 K is all ones. Its gap came
    out as -1.1e-16 (rounding) and the fit warned, converged_ False."""
    X = np.array([[0.3, -1.2], [2.0, 0.5]])
    with warnings.catch_warnings():
        warnings.simplefilter("error", ConvergenceWarning)
        m = LpSVDD(gamma=1e-30, p=p, nu=1.2, solver=solver).fit(X, [1, -1])
    assert m.converged_ and not m.stalled_
    q, mu = p / (p - 1), np.array([1.1, 0.1])
    cbar = 0.5 * (1.0 * p) ** (-1 / (p - 1)) * (1 - 1 / p)  # c1 = c2 = 1
    assert m.objective_ == pytest.approx(cbar * np.sum((2 * mu) ** q) + (mu[0] - mu[1]) ** 2, rel=1e-14)
    np.testing.assert_allclose(m.alpha_, mu, rtol=1e-15)


@pytest.mark.parametrize("p", [1.02, 1.001, 1.0999])
def test_p_near_one_is_refused_naming_the_smallest_supported(p):
    """p = 1.02 certified a gap of -40 with r^2 = -2.5e16; p = 1.001 raised OverflowError."""
    X, y = _readme_data()
    with pytest.raises(ValueError, match=r"p must be >= 1\.1, .*smallest supported"):
        LpSVDD(p=p).fit(X, y)
    assert params.P_MIN == 1.1
    params.check({"p": 1.1})  # the bound itself is supported


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("kwargs", [{"nu": 1e300}, {"nu": 1e160}, {"p": 1.1, "c1": 1e-300}])
def test_values_that_overflow_the_dual_are_refused(kwargs, dtype):
    """nu = 1e300 ended in an IndexError (float64) or a RuntimeError (float32)."""
    X, y = _two_blobs(8)
    with pytest.raises(ValueError, match="overflow torch.float64"):
        LpSVDD(**kwargs).fit(X.astype(dtype), y)


def test_a_large_nu_is_checked_in_the_features_dtype():
    """Scores (up to nu^2) are computed in the features' dtype: nu = 1e20 fits
    float64 but not float32, where the scores became inf."""
    X, y = _two_blobs(8)
    m = LpSVDD(nu=1e20).fit(X, y)
    assert m.converged_ and np.isfinite(m.objective_) and np.isfinite(m.offset_)
    assert m.alpha_[y < 0].sum() == pytest.approx(0.5e20 - 0.5)
    with pytest.raises(ValueError, match="overflow torch.float32 .* or float64 features"):
        LpSVDD(nu=1e20).fit(X.astype(np.float32), y)


def test_a_state_saved_before_contamination_keeps_deciding_by_the_sphere():
    X, y = _two_blobs(9)
    state = LpSVDD(contamination="radius").fit(X, y).state_dict()
    del state["params"]["contamination"]  # the format before issue 14
    for key in ("stalled_", "nu_"):
        del state["scalars"][key]
    old = LpSVDD.from_state_dict(state)
    assert old.contamination == "radius" and old.offset_ == -old.r2_ and not old.stalled_
    np.testing.assert_array_equal(old.predict(X), np.where(old.dissimilarity(X) <= old.r2_, 1, -1))


def test_a_spectral_state_saved_before_distance_scores_keeps_its_scores():
    """A spectral model saved with k(x, x) = 1 scores (and its offset_ from
    them) keeps scoring so when loaded: its decisions do not shift; a new
    state scores by the distance."""
    X, y = _two_blobs(10)
    model = LpSVDD(kernel="rff", n_components=8, random_state=0).fit(X, y)
    state = model.state_dict()
    np.testing.assert_array_equal(LpSVDD.from_state_dict(state).dissimilarity(X), model.dissimilarity(X))
    del state["scalars"]["distance_scores_"]  # the format before issue 24
    old = LpSVDD.from_state_dict(state)
    w = model.feature_weights_.numpy()
    z = model.backend_.transform(torch.from_numpy(X)).numpy()
    np.testing.assert_allclose(old.dissimilarity(X), 1 - 2 * z @ w + model.aKa_, rtol=1e-12, atol=1e-12)
