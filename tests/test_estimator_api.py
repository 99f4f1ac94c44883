"""DLMSVDD as a scikit-learn / PyOD estimator on arrays of images."""

import numpy as np
import pytest
import sklearn.base
import torch
from sklearn.exceptions import NotFittedError

from dlmsvdd import DLMSVDD, datasets, metrics, protocols, tasks

PARAMS = dict(backbone="small_cnn", epochs=3, lr=1e-3, batch_size=64, n_components=64, verbose=0)


NORMAL, RATIO, SEED = 4, 0.5, 0


def assert_same_scores(model, given, scored):
    """decision_scores_ (the fit's scores of its rows) against dissimilarity of the same rows: the same
    bits on the CPU; on a GPU within float32 rounding, as cuDNN and cuBLAS pick their kernels (and a
    row's order of sums) by the batch's shape and layout, which differ between the two passes (an H200
    parted them by up to 1.2e-6, with or without every batch padded to one shape)."""
    if model.device.type == "cpu":
        np.testing.assert_array_equal(given, scored)
    else:
        np.testing.assert_allclose(given, scored, rtol=1e-5, atol=1e-6)


@pytest.fixture(scope="module")
def source():
    return datasets.digits()


@pytest.fixture(scope="module")
def task(source):
    return tasks.make_task(source, normal_class=NORMAL, ratio=RATIO, seed=SEED)


@pytest.fixture(scope="module")
def pool_arrays(source, task):
    """The task's training pool (before its train/validation split) as the arrays the network is given."""
    pool = protocols.one_vs_rest(source.train_labels, NORMAL, RATIO, seed=SEED)
    images = torch.stack([task.train.transform(source.train.images[i]) for i in pool.indices])
    return images.numpy(), pool.targets


@pytest.fixture(scope="module")
def by_arrays(pool_arrays):
    X, y = pool_arrays
    return DLMSVDD(**PARAMS).fit(X, y)


def test_arrays_give_the_dataset_apis_model(by_arrays, task):
    """Same seed, same pool: the array API's stratified split is the task's, so
    training, threshold and test AUROC are the dataset API's."""
    by_dataset = DLMSVDD(**PARAMS).fit(task.train, task.val)
    assert [row["val_auroc"] for row in by_arrays.history_] == [row["val_auroc"] for row in by_dataset.history_]
    assert by_arrays.evaluate(task.test)["auroc"] == by_dataset.evaluate(task.test)["auroc"]
    assert by_arrays.threshold_ == by_dataset.threshold_
    np.testing.assert_array_equal(by_arrays.dissimilarity(task.test), by_dataset.dissimilarity(task.test))


def test_pyod_attributes_and_scikit_learn_scores(by_arrays, pool_arrays):
    X, _ = pool_arrays
    f = by_arrays.dissimilarity(X)
    assert_same_scores(by_arrays, by_arrays.decision_scores_, f)  # every row given to fit
    np.testing.assert_array_equal(by_arrays.labels_, (by_arrays.decision_scores_ >= by_arrays.threshold_).astype(int))
    np.testing.assert_array_equal(by_arrays.score_samples(X), -f)
    np.testing.assert_array_equal(by_arrays.decision_function(X), by_arrays.threshold_ - f.astype(np.float64))
    assert by_arrays.offset_ == -by_arrays.threshold_
    np.testing.assert_array_equal(by_arrays.predict(torch.as_tensor(X)), np.where(f >= by_arrays.threshold_, -1, 1))


def test_one_class_fit_on_uint8_grey_arrays(source):
    """y=None: all normal (one-class, nu = 1); (N, H, W) uint8 images are scaled to [0, 1] and given one channel."""
    images = (source.train.images[source.train_labels == 0, 0] * 255).round().to(torch.uint8).numpy()
    with pytest.raises(ValueError, match="needs nu=1"):  # an explicit margin weight other than 1 is refused
        DLMSVDD(**PARAMS, nu=1.2).fit(images)
    # the deep score alone: the input consensus scores its fit rows without themselves (decision_scores_)
    model = DLMSVDD(**{**PARAMS, "epochs": 1}, validation_fraction=0.25, nu=1.0, input_consensus=False)
    labels = model.fit_predict(images)
    assert model.config.val_fraction == 0.25 and model.preprocessing_.input_shape == (1, 8, 8)
    assert "val_auroc" not in model.history_[0]  # validation without anomalies has no AUROC
    np.testing.assert_array_equal(labels, model.predict(images))
    assert_same_scores(model, model.decision_scores_, model.dissimilarity(images.astype(np.float32) / 255))
    assert set(np.unique(model.labels_)) <= {0, 1}


def test_get_set_params_and_clone():
    model = DLMSVDD(**PARAMS)
    params = model.get_params()
    assert params["backbone"] == "small_cnn" and params["epochs"] == 3 and params["val_fraction"] == 0.2
    copy = sklearn.base.clone(model)
    assert copy.get_params() == params and copy is not model
    assert model.set_params(epochs=5, validation_fraction=0.3) is model
    assert model.config.epochs == 5 and model.config.val_fraction == 0.3
    assert "epochs=5" in repr(model)
    with pytest.raises(ValueError, match="unknown configuration keys"):
        model.set_params(learning_rate=0.1)
    with pytest.raises(ValueError, match="nu must be"):
        model.set_params(nu=0.5)


def test_not_fitted_before_fit(tmp_path):
    model = DLMSVDD(**PARAMS)
    X = np.zeros((4, 1, 8, 8), np.float32)
    for call in (model.dissimilarity, model.predict, model.decision_function, model.score_samples):
        with pytest.raises(NotFittedError):
            call(X)
    with pytest.raises(NotFittedError):
        model.export(tmp_path / "m.onnx")


def test_bad_arrays_are_refused(by_arrays):
    model = DLMSVDD(**PARAMS)
    X = np.random.default_rng(0).random((40, 1, 8, 8)).astype(np.float32)
    for bad_X, bad_y, message in ((X[:, 0, 0, 0], None, r"must hold feature vectors \(N, D\), images"), (X, np.zeros(40), r"\+1 \(normal\) or -1"),
                                  (X, np.ones(30), "one target per image"),
                                  (np.full_like(X, np.nan), None, "NaN")):
        with pytest.raises(ValueError, match=message):
            model.fit(bad_X, bad_y)
    with pytest.raises(ValueError, match="takes a validation dataset"):
        model.fit(by_arrays, np.ones(40))
    with pytest.raises(ValueError, match=r"the model expects grey images \(N, 1, 8, 8\)"):
        by_arrays.dissimilarity(np.zeros((3, 3, 8, 8), np.float32))
    assert metrics.auroc(np.r_[np.ones(5), -np.ones(5)], np.r_[np.zeros(5), np.ones(5)]) == 1.0
