"""Issue 46: decisions keep their promise on new rows. On small cases where the rate is known (normal
rows of N(0, I), new rows of the same law), the share of fresh normal rows each rule flags, averaged
over independent fits, is the conformal rule's exact rate floor(level (n_cal + 1)) / (n_cal + 1)
within four standard errors of that mean (the spread over fits measured, not assumed). Before issue 46
these were 0.9-1.0 for ``LpSVDD()`` at contamination 0.1 (its ``predict(fpr=)`` refused without a
separate calibration) and 0.6 for ``DLMSVDD()``."""

import math
import warnings

import numpy as np
import pytest
import torch

from dlmsvdd import DLMSVDD, protocols
from dlmsvdd_ext import LpSVDD, calibration_scores, kernels
from dlmsvdd_ext.conformal import TooFewCalibrationRows


def exact_rate(level, n_cal):
    return math.floor(level * (n_cal + 1) + 1e-9) / (n_cal + 1)


def fresh_rates(fit, n, d, fits, level_of_default=0.1, fpr=0.05, n_new=2000):
    """Per fit: the share of n_new fresh N(0, I_d) rows flagged at the default threshold and at fpr,
    and the model's calibration size."""
    default, at_fpr, n_cal = [], [], []
    for seed in range(fits):
        rng = np.random.default_rng([46, seed])
        model = fit(rng.standard_normal((n, d)).astype(np.float32), seed)
        new = rng.standard_normal((n_new, d)).astype(np.float32)
        default.append(np.mean(model.predict(new) == -1))
        at_fpr.append(np.mean(model.predict(new, fpr=fpr) == -1))
        n_cal.append(model.n_calibration_)
    return np.array(default), np.array(at_fpr), n_cal


def assert_rate(rates, level, n_cal):
    expected = np.mean([exact_rate(level, n) for n in n_cal])
    se = np.std(rates, ddof=1) / np.sqrt(len(rates))
    assert abs(rates.mean() - expected) <= 4 * se + 1e-3, (rates.mean(), expected, se)


@pytest.mark.parametrize("n,d", [(100, 32), (300, 128)])
def test_lpsvdd_default_and_fpr_keep_their_rate_on_fresh_normals(n, d):
    default, at_fpr, n_cal = fresh_rates(lambda X, seed: LpSVDD(random_state=seed).fit(X), n, d, fits=16)
    assert set(n_cal) == {n}  # every training normal cross-fitted (fewer than 1000)
    assert_rate(default, 0.1, n_cal)
    assert_rate(at_fpr, 0.05, n_cal)


def test_dlmsvdd_default_and_fpr_keep_their_rate_on_fresh_normals():
    """Feature vectors without labels: the input consensus scores, fitted on the training rows; the
    validation normals (60 of 300) calibrate."""
    default, at_fpr, n_cal = fresh_rates(lambda X, seed: DLMSVDD(seed=seed, verbose=0).fit(X), 300, 32, fits=10)
    assert set(n_cal) == {60}
    assert_rate(default, 0.1, n_cal)
    assert_rate(at_fpr, 0.05, n_cal)


def test_lpsvdd_false_discovery_proportion_is_at_most_the_level():
    """BH at 0.1 over batches of 180 new normals and 20 anomalies (shifted by 4 along one axis): the
    mean false-discovery proportion is at most 0.1 (within four standard errors) and BH finds them."""
    fdp, power = [], []
    for seed in range(12):
        rng = np.random.default_rng([47, seed])
        model = LpSVDD(random_state=seed).fit(rng.standard_normal((400, 4)))
        for _ in range(5):
            batch = np.r_[rng.standard_normal((180, 4)), rng.standard_normal((20, 4)) + np.r_[4.0, 0, 0, 0]]
            flagged = model.predict(batch, fdr=0.1) == -1
            fdp.append(flagged[:180].sum() / max(1, flagged.sum()))
            power.append(flagged[180:].mean())
    assert np.mean(fdp) <= 0.1 + 4 * np.std(fdp, ddof=1) / np.sqrt(len(fdp)), np.mean(fdp)
    assert np.mean(power) > 0.3


def test_lpsvdd_predicts_at_a_level_without_a_calibration_call():
    """Goal 3: fit, then predict(X_new, fpr=0.05): the cross-fitted training normals calibrate."""
    rng = np.random.default_rng(0)
    model = LpSVDD(random_state=0).fit(rng.standard_normal((200, 5)))
    assert (model.n_calibration_, model.calibration_source_) == (200, "cross-fitted training normals")
    new = rng.standard_normal((50, 5))
    np.testing.assert_array_equal(model.predict(new, fpr=0.05), np.where(model.p_values(new) <= 0.05, -1, 1))
    assert model.threshold_rule_ == "cross-fitted training normals: p-value <= 0.1"
    np.testing.assert_array_equal(model.predict(new), model.predict(new, fpr=0.1))


def test_fold_scores_are_on_the_whole_fits_scale():
    """Each fold model's f less its a^T K a, plus the whole fit's: taken as they come, the fold scores
    of 300 rows of N(0, I_128) lie above every fresh row's (the fold centre's norm is larger by about
    1/240 - 1/300), and the threshold would flag none of them."""
    rng = np.random.default_rng(3)
    X, new = rng.standard_normal((300, 128)), rng.standard_normal((2000, 128))
    model = LpSVDD(random_state=0).fit(X)
    f_new = model.dissimilarity(new)
    normal = np.arange(300)
    from sklearn.model_selection import KFold

    raw = []
    for _, held in KFold(5, shuffle=True, random_state=0).split(normal):
        keep = np.setdiff1d(normal, held)
        fold = LpSVDD(gamma=model.gamma_, nu=1.0, kernel="exact", calibration=None).fit(X[keep])
        raw.append(fold.dissimilarity(X[held]))
    raw = np.concatenate(raw)
    assert np.median(raw) > np.quantile(f_new, 0.99)  # unaligned: far above the new rows
    flagged = np.mean(f_new > -model.offset_)
    assert 0.05 < flagged < 0.15, flagged  # aligned: about the contamination


@pytest.mark.parametrize("kernel", ["nystrom", "rpcholesky"])
def test_landmark_rows_are_left_out_of_the_calibration(kernel):
    """A held-out landmark row is represented exactly by the map, a new row is not: the landmark
    rows are not calibration rows, unless every row is one (then the map is the exact kernel's)."""
    X = np.random.default_rng(0).standard_normal((120, 6))
    model = LpSVDD(kernel=kernel, n_components=20, random_state=0).fit(X)
    landmarks = model.backend_.landmark_rows_ if hasattr(model.backend_, "landmark_rows_") else None
    assert landmarks is not None and len(landmarks) == model.backend_.rank_ <= 20
    assert model.n_calibration_ == 120 - len(landmarks)
    every = LpSVDD(kernel=kernel, n_components=120, random_state=0).fit(X)
    assert every.n_calibration_ == 120


def test_a_folds_map_is_the_whole_fits_map():
    X = torch.randn(200, 5, dtype=torch.float64, generator=torch.Generator().manual_seed(0))
    for name in ("nystrom", "rff", "sorf"):
        backend = kernels.make(name, 0.3, 16, 0)
        backend.fit(X)
        fold = backend.on_rows(X[:150])
        torch.testing.assert_close(fold.Z_, backend.transform(X[:150]))
        torch.testing.assert_close(fold.transform(X[150:]), backend.transform(X[150:]))


def test_the_folds_stop_once_enough_normals_are_scored(monkeypatch):
    monkeypatch.setattr(calibration_scores, "CALIBRATION_ROWS", 50)
    X = np.random.default_rng(0).standard_normal((200, 3))
    model = LpSVDD(random_state=0).fit(X)
    assert model.n_calibration_ == 80  # folds of 40 normals: two reach 50


def test_from_enough_normals_a_held_out_share_calibrates(monkeypatch):
    """From HOLD_OUT_FROM normals on, CALIBRATION_ROWS of them (seeded) are held out of the fit and
    scored by the boundary fitted on the others: split conformal, no fold model."""
    monkeypatch.setattr(calibration_scores, "HOLD_OUT_FROM", 200)
    monkeypatch.setattr(calibration_scores, "CALIBRATION_ROWS", 50)
    X = np.random.default_rng(0).standard_normal((300, 3))
    y = np.r_[np.ones(280), -np.ones(20)]
    X[280:] += 3
    model = LpSVDD(random_state=0).fit(X, y)
    held = model.calibration_rows_
    assert len(held) == 50 and len(set(held)) == 50 and (y[held] > 0).all()
    assert len(model.alpha_) == 250 and model.labels_.sum() == 230 - 20  # 230 normals, 20 anomalies fitted
    assert (model.n_calibration_, model.calibration_source_) == (50, "held-out training normals")
    np.testing.assert_allclose(model.calibration_.scores, np.sort(model.dissimilarity(X[held])), rtol=1e-12)
    kept = np.setdiff1d(np.arange(300), held)
    alone = LpSVDD(random_state=0, gamma=model.gamma_, calibration=None).fit(X[kept], y[kept])
    np.testing.assert_allclose(alone.alpha_, model.alpha_, rtol=1e-9, atol=1e-12)
    assert LpSVDD(random_state=0).fit(X[:150]).calibration_rows_ is None  # 150 normals: cross-fitted


def test_too_few_calibration_rows_for_the_level_are_said_at_fit():
    """Goal 4: 8 training normals cross-fitted cannot give a p-value at or below 0.1 (1/9 = 0.11):
    the fit says so, with the count 0.1 needs, and flags the rows above every calibration score."""
    X = np.random.default_rng(0).standard_normal((8, 3))
    with pytest.warns(TooFewCalibrationRows, match=r"contamination=0.1 is below 1/\(n_cal \+ 1\) = 0.111.*8 "
                                                   r"calibration normals \(cross-fitted training normals\).*at least 9"):
        model = LpSVDD(random_state=0).fit(X)
    assert -model.offset_ == model.calibration_.scores.max()
    assert model.threshold_rule_ == "cross-fitted training normals: above all 8 (too few for p-value <= 0.1)"
    with pytest.raises(ValueError, match=r"fpr=0.01 is below.*8 calibration samples.*at least 99"):
        model.predict(X, fpr=0.01)
    with warnings.catch_warnings():
        warnings.simplefilter("error", TooFewCalibrationRows)
        LpSVDD(random_state=0).fit(np.random.default_rng(0).standard_normal((9, 3)))  # 1/10: reached


def test_dlmsvdd_says_when_its_validation_normals_are_too_few():
    X = np.random.default_rng(0).standard_normal((40, 4)).astype(np.float32)  # 8 validation normals
    with pytest.warns(TooFewCalibrationRows, match=r"8 calibration normals \(validation normals\).*at least 9.*"
                                                   r"val_fraction"):
        model = DLMSVDD(seed=0, verbose=0).fit(X)
    assert model.n_calibration_ == 8 and model.threshold_rule_.startswith("validation normals: above all 8")


def test_dlmsvdd_calibrate_moves_a_contamination_threshold_and_keeps_the_others():
    rng = np.random.default_rng(0)
    X = rng.standard_normal((200, 4)).astype(np.float32)
    model = DLMSVDD(seed=0, verbose=0).fit(X)
    fresh = rng.standard_normal((400, 4)).astype(np.float32)
    model.calibrate(fresh[:199])
    assert model.threshold_rule_ == "calibrate(X_cal): p-value <= 0.1"
    np.testing.assert_array_equal(model.predict(fresh[199:]), model.predict(fresh[199:], fpr=0.1))
    radius = DLMSVDD(seed=0, verbose=0, contamination="radius").fit(X)
    before = radius.threshold_
    radius.calibrate(fresh[:199])
    assert radius.threshold_ == before and radius.threshold_rule_ == "radius"


def test_the_guard_and_the_consensus_never_saw_the_validation_rows():
    """The validation normals calibrate, so they meet the guard and the consensus as new rows do: the
    guard's radius is the farthest training row's, and the consensus holds the training rows only."""
    X = np.random.default_rng(0).standard_normal((300, 4)).astype(np.float32)
    X[-1] *= 30  # a far row: it lands in validation or training, and counts only in training
    model = DLMSVDD(seed=0, verbose=0).fit(X)
    train, val = protocols.train_val_split(protocols.Split(np.arange(300), np.ones(300, int)), 0.2, 0,
                                           anomalies=False)
    inputs = model.preprocess(X)
    guard = model.network_.guard
    distances = guard.distance(inputs)
    assert float(guard.radius) == pytest.approx(float(distances[train.indices].max()) * (1 + 1e-4), rel=1e-6)
    assert model.input_consensus_.consensus_.reference_.shape[0] == len(train.indices)
