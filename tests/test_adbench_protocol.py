"""The ADBench protocol of tests/benchmarks (README of ../shared/data/adbench-dev) on constructed
arrays: sizes, stratification, scaling from the training rows, the labelled count and seeding."""

import math

import numpy as np
import pytest

from benchmarks import adbench_protocol as protocol


def constructed(n_normal=180, n_anomaly=20, d=3, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n_normal + n_anomaly, d)) * np.array([1.0, 10.0, 100.0])[:d] + 5.0
    y = np.r_[np.zeros(n_normal, int), np.ones(n_anomaly, int)]
    return X, y


def test_split_is_stratified_70_30_and_keeps_every_row_once():
    X, y = constructed()
    task = protocol.make_task(X, y, seed=0, la=0.25)
    assert len(task.y_train) == 140 and len(task.y_test) == 60
    assert task.y_train.sum() == 14 and task.y_test.sum() == 6  # 10% anomalies on both sides
    # no copying or dropping: the rows, in scaled form, are as many distinct rows as the set has
    assert len(np.unique(np.r_[task.X_train, task.X_test], axis=0)) == len(X)


def test_min_max_scaling_uses_the_training_rows_only():
    X, y = constructed()
    X[0, 0] = 1e4  # one extreme row: scaled with the training rows' range only when it lands in the test set
    for seed in range(20):
        task = protocol.make_task(X, y, seed=seed, la=0.05)
        np.testing.assert_allclose(task.X_train.min(axis=0), 0.0, atol=1e-12)
        np.testing.assert_allclose(task.X_train.max(axis=0), 1.0, atol=1e-12)
        if task.X_test[:, 0].max() > 1:
            break
    else:
        pytest.fail("the extreme row never landed in a test set")
    # the test rows go through the training rows' map: the extreme row (1e4 where the other raw values of
    # column 0 span about 10) lands far above 1
    assert task.X_test[:, 0].max() > 100  # with all rows' range the extreme would be 1 and every training value near 0


@pytest.mark.parametrize("la, n_anomalies, expected", [(0.05, 14, 1), (0.25, 14, 4), (0.05, 60, 3), (0.05, 7, 1),
                                                      (0.25, 4, 1), (0.25, 8, 2), (0.05, 1, 1)])
def test_labelled_count_is_ceil_and_at_least_one(la, n_anomalies, expected):
    assert protocol.n_labelled(la, n_anomalies) == expected


def test_labelled_rows_are_training_anomalies_and_the_rest_stay_unlabelled():
    X, y = constructed(n_normal=300, n_anomaly=100)
    for la in (0.05, 0.25):
        task = protocol.make_task(X, y, seed=3, la=la)
        n_train_anomalies = int(task.y_train.sum())
        assert task.labelled.sum() == math.ceil(la * n_train_anomalies)
        assert np.all(task.y_train[task.labelled] == 1)  # only anomalies are labelled
        assert task.s.sum() == task.labelled.sum()
        assert (task.y_train[~task.labelled] == 1).sum() == n_train_anomalies - task.labelled.sum()  # contamination


def test_seeded_same_seed_same_task_other_seed_other_split():
    X, y = constructed()
    a, b, c = (protocol.make_task(X, y, seed=s, la=0.25) for s in (7, 7, 8))
    np.testing.assert_array_equal(a.X_train, b.X_train)
    np.testing.assert_array_equal(a.labelled, b.labelled)
    assert not np.array_equal(a.X_test, c.X_test)


def test_large_sets_are_subsampled_without_replacement(monkeypatch):
    monkeypatch.setattr(protocol, "MAX_ROWS", 100)
    X, y = constructed(n_normal=270, n_anomaly=30)
    X[:, 0] = np.arange(len(X))  # distinct rows
    task = protocol.make_task(X, y, seed=0, la=0.25)
    assert len(task.y_train) + len(task.y_test) == 100
    assert len(np.unique(np.r_[task.X_train, task.X_test][:, 0])) == 100


def test_validation_task_uses_training_rows_only_and_keeps_every_label():
    X, y = constructed(n_normal=360, n_anomaly=40)
    task = protocol.make_task(X, y, seed=3, la=0.25)
    inner = protocol.validation_task(task)
    train_rows = {r.tobytes() for r in task.X_train}
    inner_rows = [r.tobytes() for r in np.r_[inner.X_train, inner.X_test]]
    assert set(inner_rows) == train_rows and len(inner_rows) == len(train_rows)  # a partition, no test row
    assert inner.labelled.sum() == task.labelled.sum()  # every labelled anomaly is a fit row
    assert np.all(inner.y_train[inner.labelled] == 1)
    # the held-out rows are unlabelled training rows, stratified: the 70/30 split of 252 normals and 21 anomalies
    n_unlabelled_anomalies = int(task.y_train.sum() - task.labelled.sum())
    assert len(inner.y_test) == math.ceil(0.3 * (~task.labelled).sum())
    assert abs(inner.y_test.sum() - 0.3 * n_unlabelled_anomalies) <= 1
    again = protocol.validation_task(task)
    assert np.array_equal(again.X_test, inner.X_test)  # seeded by the task's seed


def _record(method, set_, la, auroc, fit=1.0):
    return {"set": set_, "seed": 0, "la": la, "method": method, "auroc": auroc, "fit_seconds": fit}


GOAL_METHODS = ("DLM-SVDD (default)", "LpSVDD with labels (defaults)", "LpSVDD one-class", "IsolationForest",
                "OneClassSVM", "RBF SVC", "XGBoost", "Deep SAD", "DevNet")


def test_goal_rows_hold_when_the_package_leads_and_fail_where_it_does_not():
    # two sets x two fractions; AUROC by method index (DLM-SVDD best, then LpSVDD with labels, ...)
    def run(aurocs, fits=None):
        fits = fits or {}
        return [_record(m, s, la, aurocs[m] + (0.05 if la == 0.25 and m.startswith("LpSVDD with") else 0.0),
                        fits.get(m, 1.0))
                for m in GOAL_METHODS for s in ("a", "b") for la in (0.05, 0.25)]

    leading = {m: 0.9 - 0.02 * i for i, m in enumerate(GOAL_METHODS)}
    rows = protocol.goal_rows(run(leading))
    assert len(rows) == 8 and all(ok for _, ok in rows), rows
    # Deep SAD above DLM-SVDD: its mean and rank rows fail; a slow DLM-SVDD fails the time row
    behind = {**leading, "Deep SAD": 0.95}
    failed = [row for row, ok in protocol.goal_rows(run(behind, {"DLM-SVDD (default)": 3.5})) if not ok]
    assert len(failed) == 4 and all("DLM-SVDD" in row for row in failed), failed


def test_unsupervised_goal_rows_rank_each_candidate_among_the_peers_alone():
    from benchmarks import adbench_unsupervised as unsupervised

    # three sets; the consensus leads everywhere, DLM-SVDD trails kNN; the ablation is never a peer
    aurocs = {"DLM-SVDD (defaults, fit(X))": 0.70, "DLM-SVDD deep model alone (ablation)": 0.99,
              "Consensus (members by the rows' width; dlmsvdd_ext.consensus)": 0.80, "kNN (PyOD)": 0.75,
              "LOF (PyOD)": 0.72, "IsolationForest (scikit-learn)": 0.71}
    records = [{**_record(m, s, 0.0, a + 0.01 * i), "family": "tabular"} for m, a in aurocs.items()
               for i, s in enumerate("abc")]
    goal = unsupervised.goal_rows(records)
    assert [ok for _, ok in goal] == [False, False], goal
    assert "kNN (PyOD)" in goal[0][0] and "0.7600" in goal[0][0]  # the best peer, not the ablation or consensus
    lead = unsupervised.candidate_rows(records, "Consensus")
    assert [ok for _, ok in lead] == [True, True], lead
    assert "average rank 1.00" in lead[1][0]
