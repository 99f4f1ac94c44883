"""The epoch the trained model keeps (training.selection), on constructed validation curves."""

import numpy as np
import pytest

from dlmsvdd.training.selection import START, offer, tolerance


def _run(rule, values, n_anomalous, metric="auroc"):
    kept = START
    for epoch, value in enumerate(values):
        row = {} if value is None else {f"val_{metric}": value, "val_n_anomalous": n_anomalous}
        kept = offer(kept, epoch, row, metric, rule, lambda epoch=epoch: {"weights of epoch": epoch})
    assert kept[2] == {"weights of epoch": kept[1]}  # the weights kept are the epoch's own
    return kept[1]


def _reference(values, tol):
    """The latest epoch within tol of the best, by looking at the whole curve."""
    top = max(values)
    return max(i for i, v in enumerate(values) if v >= top - tol)


def test_three_validation_anomalies_do_not_pick_an_early_epoch():
    """Digits class 5, ratio 0.1, seed 2 (issue 16): validation AUROC over 25 normals and 3
    anomalies was 1.0 at the untrained epoch 0 and one or two pairs lower later, while the
    test AUROC rose from 0.946 to 0.9997; "best" kept epoch 0."""
    curve = [1.0, 0.987, 0.96] + [0.973] * 3 + [0.987] * 5 + [0.973] * 5 + [0.987] + [0.973] * 14
    assert _run("best", curve, 3) == 0
    assert _run("latest", curve, 3) == len(curve) - 1


def test_many_validation_anomalies_keep_the_best_up_to_one_anomaly():
    curve = [0.90, 0.95, 0.93, 0.9489]
    assert _run("best", curve, 1000) == 1
    assert _run("latest", curve, 1000) == 1  # 0.93 and 0.9489 are more than 1/1000 below 0.95
    assert _run("latest", curve, 10) == 3  # within 1/10


@pytest.mark.parametrize("rule", ["best", "latest"])
def test_against_the_whole_curve(rule):
    rng = np.random.default_rng(0)
    for _ in range(200):
        n = int(rng.integers(1, 12))
        values = list(np.round(rng.uniform(0.8, 1.0, n), 2))  # rounded: ties happen
        n_anomalous = int(rng.integers(1, 40))
        assert _run(rule, values, n_anomalous) == _reference(values, tolerance(rule, "auroc", n_anomalous))


def test_tolerances_and_the_last_epoch_without_a_metric():
    assert tolerance("best", "auroc", 3) == 0.0
    assert tolerance("latest", "auroc", 4) == 0.25
    assert tolerance("latest", "balanced_accuracy", 4) == 0.125
    assert _run("best", [None, None, None], 0) == 2  # validation without anomalies: the last epoch
    with pytest.raises(ValueError, match="selection rule must be one of"):
        offer(START, 0, {"val_auroc": 0.9, "val_n_anomalous": 3}, "auroc", "median", dict)
