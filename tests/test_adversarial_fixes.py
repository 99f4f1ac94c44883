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
