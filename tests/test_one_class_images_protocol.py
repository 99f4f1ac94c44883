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
    with pytest.raises(ValueError, match="'test' or 'development'"):
        one_class_images.image_source("digits", protocol="validation")
    capped = one_class_images.image_source("digits", fit_per_class=10)  # the test protocol: the test pool whole
    assert np.bincount(capped.train_labels).tolist() == [10] * 10
    np.testing.assert_array_equal(capped.test.images, full.test.images)


def test_the_development_protocol_of_an_array_source_caps_each_class_and_holds_out_its_training_pool(tmp_path):
    rng = np.random.default_rng(0)
    X_train = rng.integers(0, 256, size=(200, 6, 6), dtype=np.uint8)
    X_test = rng.integers(0, 256, size=(20, 6, 6), dtype=np.uint8)
    y_train = np.repeat(np.arange(4), 50)
    np.savez(tmp_path / "fashion_mnist.npz", X_train=X_train, y_train=y_train, X_test=X_test, y_test=np.arange(20) % 4)
    development = one_class_images.image_source("fashion_mnist", tmp_path, "development", fit_per_class=7)
    assert np.bincount(development.train_labels).tolist() == [7, 7, 7, 7]
    assert np.bincount(development.test_labels).tolist() == [15, 15, 15, 15]  # 30% of each class held out
    train_rows = {row.tobytes(): label for row, label in zip(X_train.reshape(200, -1), y_train)}
    for pool, labels in ((development.train, development.train_labels), (development.test, development.test_labels)):
        rows = pool.images.flatten(1).numpy()
        assert [train_rows[row.tobytes()] for row in rows] == labels.tolist()  # training-pool images, labels kept
    kept = {row.tobytes() for row in development.train.images.flatten(1).numpy()}
    assert not kept & {row.tobytes() for row in development.test.images.flatten(1).numpy()}


def test_goal_row_holds_only_when_dlmsvdd_is_at_or_above_the_knn_distance():
    def records(own, peer):
        return [{"method": "DLMSVDD()", "auroc": own, "seed": 0}, {"method": "kNN (k=5)", "auroc": peer, "seed": 0}]
    assert one_class_images.goal_row(records(0.99, 0.99))[1]
    assert not one_class_images.goal_row(records(0.98, 0.99))[1]
