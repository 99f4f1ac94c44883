"""One-vs-rest tasks, long-tailed pools and stratified splits."""

import numpy as np
import pytest

from dlmsvdd import protocols


def test_long_tailed_counts_follow_the_formula():
    # CIFAR-10-LT with rho = 100: n_c = round(5000 * 100^(-c/9)); (Cao et al.'s code floors: 1796 and 645)
    assert protocols.long_tailed_counts(5000, 100, 10) == [5000, 2997, 1797, 1077, 646, 387, 232, 139, 83, 50]
    for n0, rho, C in ((500, 10, 100), (5000, 50, 10), (1300, 1, 5)):
        counts = protocols.long_tailed_counts(n0, rho, C)
        expected = [round(n0 * rho ** (-c / (C - 1))) for c in range(C)]
        assert counts == expected and counts[0] == n0 and abs(counts[-1] - n0 / rho) <= 0.5


def test_long_tailed_pool_draws_the_counts_per_class():
    labels = np.repeat(np.arange(10), 200)
    np.random.default_rng(0).shuffle(labels)
    pool = protocols.long_tailed_pool(labels, rho=10, seed=3)
    counts = np.bincount(labels[pool], minlength=10)
    assert counts.tolist() == protocols.long_tailed_counts(200, 10, 10)
    assert len(np.unique(pool)) == len(pool)
    np.testing.assert_array_equal(pool, protocols.long_tailed_pool(labels, rho=10, seed=3))
    assert not np.array_equal(pool, protocols.long_tailed_pool(labels, rho=10, seed=4))


@pytest.mark.parametrize("ratio", [0.1, 0.5, 0.75])
def test_one_vs_rest_ratio(ratio):
    labels = np.repeat(np.arange(5), 100)
    task = protocols.one_vs_rest(labels, 2, ratio, seed=1)
    normal = task.indices[task.targets == 1]
    anomalies = task.indices[task.targets == -1]
    assert sorted(normal) == list(np.flatnonzero(labels == 2))
    assert len(anomalies) == round(ratio * 100) and np.all(labels[anomalies] != 2)
    again = protocols.one_vs_rest(labels, 2, ratio, seed=1)
    np.testing.assert_array_equal(task.indices, again.indices)


def test_stratified_split_keeps_proportions_and_is_disjoint():
    labels = np.repeat(np.arange(4), 250)
    task = protocols.one_vs_rest(labels, 0, 0.5, seed=0)
    train, val = protocols.train_val_split(task, 0.2, seed=0)
    assert set(train.indices).isdisjoint(val.indices)
    assert len(train) + len(val) == len(task)
    for t, total in ((1, 250), (-1, 125)):
        assert (val.targets == t).sum() == pytest.approx(0.2 * total, abs=1)
    for split in (train, val):  # targets still describe the labels
        np.testing.assert_array_equal(split.targets, np.where(labels[split.indices] == 0, 1, -1))


def test_evaluation_task_is_the_whole_test_set():
    labels = np.array([0, 1, 2, 1, 0])
    task = protocols.evaluation_task(labels, 1)
    np.testing.assert_array_equal(task.indices, np.arange(5))
    np.testing.assert_array_equal(task.targets, [-1, 1, -1, 1, -1])


def test_bad_input_is_refused():
    labels = np.repeat(np.arange(3), 10)
    with pytest.raises(ValueError, match="unknown normal class 7"):
        protocols.one_vs_rest(labels, 7, 0.1)
    with pytest.raises(ValueError, match="only 20"):
        protocols.one_vs_rest(labels, 0, 2.5)
    with pytest.raises(ValueError, match=">= 0"):
        protocols.one_vs_rest(labels, 0, -0.1)
    with pytest.raises(ValueError, match="rho must be >= 1"):
        protocols.long_tailed_counts(100, 0.5, 10)
    tiny = protocols.one_vs_rest(np.array([0, 0, 0, 1]), 0, 1 / 3)  # one anomaly
    with pytest.raises(ValueError, match="anomalous class has 1 sample"):
        protocols.train_val_split(tiny)


def test_long_tailed_task_on_digits_follows_the_formula():
    from dlmsvdd import datasets, tasks

    source = datasets.digits()
    task = tasks.make_task(source, normal_class=9, ratio=None, rho=10, seed=0)
    indices = np.concatenate([task.train.split.indices, task.val.split.indices])
    counts = np.bincount(source.train_labels[indices], minlength=10)
    n0 = np.bincount(source.train_labels).min()
    assert counts.tolist() == protocols.long_tailed_counts(n0, 10, 10)
    assert (task.train.targets == 1).sum() + (task.val.targets == 1).sum() == counts[9]  # the tail class is normal
