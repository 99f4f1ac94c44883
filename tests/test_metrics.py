"""dlmsvdd.training.metrics: thresholds and predictions."""

import warnings

import numpy as np

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
