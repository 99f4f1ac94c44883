"""Issue 34's adversarial findings in the Python API, each with the case that
broke (items 3, 8, 9 and 11 of the issue; the CLI's are in test_adversarial_cli.py)."""

import numpy as np
import pytest
import torch
from sklearn.metrics import roc_auc_score
from sklearn.preprocessing import StandardScaler

from dlmsvdd import DLMSVDD
from dlmsvdd.data.vectors import VectorPreprocessing

FAST = {"epochs": 2, "verbose": 0}


def _signal_in_column_0(n, n_anomalous, seed):
    """Rows of 4 standard normal columns; the anomalies are 6 away in column 0 only."""
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 4))
    y = np.ones(n, int)
    y[:n_anomalous] = -1
    X[:n_anomalous, 0] += 6
    return X, y


# ---- item 3: small units keep their signal


@pytest.mark.parametrize("unit", [1e-13, 1e-30])
def test_a_column_in_small_units_is_standardised_not_dropped(unit):
    """Before: std below 1e-12 (absolute) was 'constant', scale 1: the 1e-13 column's signal was lost."""
    X, _ = _signal_in_column_0(200, 0, 0)
    X[:, 0] *= unit
    X[:, 2] = 3.0  # a constant column still keeps scale 1
    record = VectorPreprocessing.fit(X)
    np.testing.assert_allclose(record.scale[0], X[:, 0].std(), rtol=1e-12)
    assert record.scale[2] == 1.0
    out = record.module()(torch.from_numpy(X)).numpy()
    reference = StandardScaler().fit_transform(X)  # scikit-learn's standardisation (it too keeps scale 1 there)
    np.testing.assert_allclose(out, reference, rtol=1e-5, atol=1e-5)


def test_the_signal_of_a_small_unit_column_reaches_the_detector():
    """The report's reproducer: test AUROC 1.0 at unit 1, 0.49 at 1e-13 before the fix."""
    X, y = _signal_in_column_0(400, 20, 0)
    T, t = _signal_in_column_0(600, 60, 1)
    aurocs = {}
    for unit in (1.0, 1e-13):
        Xs, Ts = X.copy(), T.copy()
        Xs[:, 0] *= unit
        Ts[:, 0] *= unit
        aurocs[unit] = roc_auc_score(t < 0, DLMSVDD(**FAST).fit(Xs, y).dissimilarity(Ts))
    assert aurocs[1.0] > 0.95 and abs(aurocs[1e-13] - aurocs[1.0]) < 0.02, aurocs


def test_data_entirely_at_1e_minus_30_trains():
    """Before: 'the initial network's the training features collapsed'."""
    X, y = _signal_in_column_0(400, 20, 0)
    T, t = _signal_in_column_0(600, 60, 1)
    model = DLMSVDD(**FAST).fit(X * 1e-30, y)
    assert roc_auc_score(t < 0, model.dissimilarity(T * 1e-30)) > 0.95


@pytest.mark.parametrize("value", [0.0, 7.5, 1e-30])
def test_identical_rows_are_refused_as_such(value):
    with pytest.raises(ValueError, match=r"the \d+ training rows are all identical") as caught:
        DLMSVDD(**FAST, nu=1).fit(np.full((100, 4), value))
    assert type(caught.value) is ValueError  # a data mistake, not a training breakdown (TrainingDiverged)


# ---- item 8: too few rows refused before torch's BatchNorm sees them


def test_too_few_rows_to_train_are_refused_with_how_many_are_needed():
    """Before: torch's 'Expected more than 1 value per channel when training'."""
    X = np.random.default_rng(0).normal(size=(3, 5))
    with pytest.raises(ValueError, match=r"X has 2 rows, and 1 of them train once the validation share "
                                         r"\(val_fraction=0.2\) is held out; training needs at least 2: give 3 "):
        DLMSVDD(**FAST, nu=1).fit(X[:2])
    assert DLMSVDD(**FAST, nu=1).fit(X).n_train_ == 2  # the 3 the message asks for train


# ---- item 9: tampered model files are refused when loaded


@pytest.fixture(scope="module")
def fitted():
    """A small vector model."""
    X, y = _signal_in_column_0(120, 6, 0)
    return DLMSVDD(epochs=1, verbose=0).fit(X, y)


@pytest.fixture(scope="module")
def saved(fitted, tmp_path_factory):
    """The small vector model's file."""
    path = tmp_path_factory.mktemp("saved") / "m.pt"
    fitted.save(path)
    return path


def _tampered(saved, tmp_path, edit):
    state = torch.load(saved, weights_only=True)
    edit(state)
    torch.save(state, tmp_path / "t.pt")
    return tmp_path / "t.pt"


def _set(part, key, change):
    def edit(state):
        state[part][key] = change(state[part][key])
    return edit


@pytest.mark.parametrize("edit, message", [
    (_set("boundary", "alpha", lambda a: a[:-1].clone()), r"has \d+ alpha values for \d+ labels"),
    (_set("boundary", "alpha", lambda a: -a), "holds a negative alpha"),
    (_set("boundary", "labels", lambda t: t * 2), "a label other than"),
    (_set("boundary", "support", lambda s: s[1:].clone()), "'support' is not where alpha > 0"),
    (_set("boundary", "dual_coef", lambda c: c[:-1].clone()), r"for 'dual_coef', one per support index"),
    (_set("boundary", "support_vectors", lambda v: v[:-1].clone()), r"for 'support_vectors', one per support"),
    (_set("boundary", "alpha", lambda a: a.view(1, -1)), r"'alpha' is not a flat tensor \(shape \(1, \d+\)\)"),
    (_set("boundary", "calibration", lambda c: {**c, "scores": c["scores"].view(-1, 1)}),
     "calibration scores are not a flat tensor"),
    (_set("preprocessing", "kind", lambda k: "evil"), "unknown preprocessing kind 'evil'"),
    (_set("preprocessing", "scale", lambda s: [0.0] * len(s)), "its preprocessing record is not one this dlmsvdd"),
])
def test_a_tampered_model_file_is_refused_naming_the_file(edit, message, saved, tmp_path):
    """Before: the boundary edits loaded silently; an unknown kind gave a TypeError; a scale of 0 did not name
    the file."""
    path = _tampered(saved, tmp_path, edit)
    with pytest.raises(ValueError, match=message) as caught:
        DLMSVDD.load(path)
    assert str(path) in str(caught.value) and "the file is damaged or was edited" in str(caught.value)


def test_an_untampered_file_still_loads(saved):
    assert DLMSVDD.load(saved).n_calibration_ > 0


# ---- item 11: rough edges


def test_finite_rows_that_overflow_float32_are_scored_as_the_farthest_rows(fitted):
    """Before: 'X holds NaN or infinite values' of finite rows of 1e200. Now such a row is clipped
    far beyond the data (``training.guard.LIMIT`` standard deviations) and flagged, with a finite f,
    as the exports score it (issue 38: refused or flagged, never normal; issue 34, item 10: Python
    and the exports agree on every finite input)."""
    X, _ = _signal_in_column_0(4, 0, 3)
    X[2] *= 1e200
    f = fitted.dissimilarity(X)
    assert np.isfinite(f).all() and fitted.predict(X)[2] == -1
    assert f[2] >= fitted.dissimilarity(X[[0, 1, 3]] * 1e3).max() - 1e-6  # at least as far as rows of 1e3
    X[2] = np.nan
    with pytest.raises(ValueError, match="X holds NaN or infinite values"):
        fitted.predict(X)


def _bh_reference(p, q):
    """Benjamini-Hochberg written out: flag the k smallest, k the largest with p_(k) <= k q / m."""
    order = np.argsort(p, kind="stable")
    passing = np.flatnonzero(p[order] <= q * np.arange(1, len(p) + 1) / len(p))
    flagged = np.zeros(len(p), bool)
    if passing.size:
        flagged[order[:passing[-1] + 1]] = True
    return flagged


def test_fdr_says_why_too_few_calibration_normals_flag_nothing():
    """The report's case: 39 calibration normals, 500 rows of which 50 score above all of them, fdr=0.1:
    nothing flagged, silently (BH needs 125 rows at p = 1/40)."""
    from dlmsvdd_ext.conformal import Calibration

    rng = np.random.default_rng(0)
    f = np.r_[np.full(50, 1e3), rng.uniform(0, 37, 450)]
    small = Calibration(np.arange(39.0), "test")
    with pytest.warns(UserWarning, match=r"fdr=0.1 flagged none of 500 samples, although 50 score above all 39 "
                                         r"calibration normals: .* at least 125 samples share it\. With 99 or more "
                                         r"calibration normals 50 such samples could be flagged"):
        flagged = small.flags(f, fdr=0.1)
    assert not flagged.any() and not _bh_reference(small.p_values(f), 0.1).any()
    enough = Calibration(np.arange(99.0) * 39 / 99, "test")  # the 99 the warning asks for
    flagged = enough.flags(f, fdr=0.1)
    np.testing.assert_array_equal(flagged, _bh_reference(enough.p_values(f), 0.1))
    assert flagged[:50].all()


def test_saving_to_a_folder_or_a_missing_folder_says_so(fitted, tmp_path):
    """Before: an OSError naming the hidden temporary file."""
    with pytest.raises(IsADirectoryError, match=f"cannot write '{tmp_path}': it is a folder; give a file name"):
        fitted.save(tmp_path)
    with pytest.raises(FileNotFoundError, match="the folder '.*nowhere' does not exist"):
        fitted.save(tmp_path / "nowhere" / "m.pt")
    assert list(tmp_path.iterdir()) == []  # no temporary file left


def test_predict_proba_takes_pyods_method_keyword(fitted):
    """Before: TypeError: unexpected keyword argument 'method'."""
    X, _ = _signal_in_column_0(20, 2, 4)
    proba = fitted.predict_proba(X, method="conformal")
    p = fitted.p_values(X)
    np.testing.assert_array_equal(proba, np.column_stack([p, 1 - p]))
    np.testing.assert_array_equal(proba, fitted.predict_proba(X))
    with pytest.raises(ValueError, match=r"predict_proba\(method='unify'\): PyOD's 'linear' and 'unify' rescale"):
        fitted.predict_proba(X, method="unify")


def test_a_loaded_model_has_pyods_fitted_attributes(fitted, saved):
    """Before: a loaded model lacked decision_scores_ and labels_."""
    loaded = DLMSVDD.load(saved)
    np.testing.assert_array_equal(loaded.decision_scores_, fitted.decision_scores_)
    np.testing.assert_array_equal(loaded.labels_, fitted.labels_)
    assert set(np.unique(loaded.labels_)) <= {0, 1}
