"""The one-class image benchmark's protocol (tests/benchmarks/one_class_images.py) on constructed
rows and on digits: the kNN distance against a plain loop, the rows every method fits, which
images a protocol reads, and the goal row."""

import numpy as np
import pytest

from dlmsvdd import datasets, tasks

from benchmarks import one_class_images


def test_knn_distance_is_the_kth_smallest_distance_to_the_fit_rows():
    rng = np.random.default_rng(0)
    fit_rows, rows = rng.normal(size=(30, 4)), rng.normal(size=(7, 4))
    expected = [sorted(np.sqrt(((fit_rows - r) ** 2).sum(1)))[4] for r in rows]  # the 5th nearest
    np.testing.assert_allclose(one_class_images.knn_distance(fit_rows, rows), expected, rtol=1e-12)


def test_flat_inputs_are_the_network_inputs_of_every_image_in_order():
    task = tasks.make_task(datasets.digits(), 3, ratio=0.0, seed=0)
    rows = one_class_images.flat_inputs(task.val)
    assert rows.shape == (len(task.val), 64) and rows.dtype == np.float64
    for i in (0, len(task.val) - 1):
        np.testing.assert_array_equal(rows[i], task.val[i][0].flatten().double().numpy())


def test_the_development_protocol_never_reads_the_test_pool():
    full, development = datasets.digits(), one_class_images.image_source("digits", protocol="development")
    held_out = development.test.images.flatten(1).numpy()
    test_pool = full.test.images.flatten(1).numpy()
    train_pool = {row.tobytes() for row in full.train.images.flatten(1).numpy()}
    assert all(row.tobytes() in train_pool for row in held_out)
    assert len(held_out) + len(development.train) == len(full.train)
    assert not {row.tobytes() for row in test_pool} <= train_pool  # the two pools differ
    with pytest.raises(ValueError, match="'development' on digits"):
        one_class_images.image_source("cifar10", "/nowhere", protocol="development")


def test_goal_row_holds_only_when_dlmsvdd_is_at_or_above_the_knn_distance():
    def records(own, peer):
        return [{"method": "DLMSVDD()", "auroc": own, "seed": 0}, {"method": "kNN (k=5)", "auroc": peer, "seed": 0}]
    assert one_class_images.goal_row(records(0.99, 0.99))[1]
    assert not one_class_images.goal_row(records(0.98, 0.99))[1]
