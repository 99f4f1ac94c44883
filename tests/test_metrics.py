"""dlmsvdd.training.metrics: thresholds and predictions."""

import warnings

import numpy as np
import pytest

from dlmsvdd import metrics


def test_threshold_above_every_score_flags_nothing_in_float32():
    """roc_curve's first threshold (+inf) becomes float64's largest value;
    float32 scores compare with it without an overflow (under numpy 2's
    promotion, which casts a Python float to the array's float32)."""
    targets = np.array([1, 1, -1, -1])
    scores = np.array([0.1, 0.2, 0.3, 0.4], dtype=np.float32)
    threshold = float(np.finfo(np.float64).max)  # a Python float, as best_threshold returns
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        np.testing.assert_array_equal(metrics.predict(scores, threshold), [1, 1, 1, 1])
        assert metrics.balanced_accuracy(targets, scores, threshold) == 0.5


def _brute_force_best_balanced_accuracy(targets, scores):
    """Maximal balanced accuracy over every threshold (a plain loop over cut points)."""
    cuts = np.concatenate([np.unique(scores), [np.inf]])
    return max(metrics.balanced_accuracy(targets, scores, c) for c in cuts)


def test_threshold_lies_in_the_middle_of_the_best_gap():
    """With 2 validation anomalies the threshold was the lowest anomaly's score,
    so a new anomaly scoring a little below it was called normal; now the middle
    of the gap to the highest normal score, at the same validation balanced accuracy."""
    targets = np.array([1, 1, 1, 1, -1, -1])
    scores = np.array([0.1, 0.2, 0.3, 0.25, 0.9, 1.0])
    threshold = metrics.best_threshold(targets, scores)
    assert threshold == pytest.approx(0.6)
    assert metrics.balanced_accuracy(targets, scores, threshold) == 1.0
    np.testing.assert_array_equal(metrics.predict([0.8, 0.4], threshold), [-1, 1])


def test_best_threshold_reaches_the_best_balanced_accuracy():
    rng = np.random.default_rng(0)
    for trial in range(50):
        n_anomalies = int(rng.integers(1, 6))
        targets = np.array([1] * 30 + [-1] * n_anomalies)
        scores = np.concatenate([rng.normal(0, 1, 30), rng.normal(1.5, 1, n_anomalies)]).round(1)  # ties too
        threshold = metrics.best_threshold(targets, scores)
        assert metrics.balanced_accuracy(targets, scores, threshold) == _brute_force_best_balanced_accuracy(
            targets, scores)
        assert not np.any(scores == threshold) or threshold == scores[targets < 0].min()  # strictly inside a gap
    # adjacent floats leave no middle: the upper end
    edge = np.nextafter(0.5, 1.0)
    assert metrics.best_threshold(np.array([1, -1]), np.array([0.5, edge])) == edge
