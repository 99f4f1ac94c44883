"""Images without labelled anomalies (issue 50, dlmsvdd.training.input_consensus): the score is
IMAGE_DEEP_WEIGHT times asinh of the network's robust z-score plus the mean asinh of the nearest fit
image's distance's z-score in two views (training.image_views: the pixels, and the pixels after
global contrast normalisation, average-pooled to at most IMAGE_SIDE a side); with labels the
network's score alone. Against
torch's adaptive pooling, a Consensus and a network fitted on their own, and a numpy z-score."""

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from dlmsvdd import DLMSVDD
from dlmsvdd.data import protocols
from dlmsvdd.training import image_views, input_consensus
from dlmsvdd_ext.consensus import Consensus

IMAGES = dict(epochs=2, batch_size=16, verbose=0, seed=3, backbone="small_cnn", weights=None)


def numpy_robust_z(fit, scores):
    centre = np.median(fit)
    return (scores - centre) / (1.4826 * np.median(np.abs(fit - centre)))


def grey_images(seed, n, side=20, bright=0.0):
    """Noise images with a bright square in the middle; ``bright`` lights a corner too."""
    rng = np.random.default_rng(seed)
    X = 0.3 * rng.random((n, side, side))
    X[:, 6:14, 6:14] += 0.6
    X[:, :5, :5] += bright
    return X.clip(0, 1).astype(np.float32)


@pytest.mark.parametrize("shape", [(1, 28, 28), (3, 32, 20), (1, 8, 8), (3, 5, 40)])
def test_pixels_pool_as_torchs_adaptive_average_pooling(shape):
    x = torch.randn(4, *shape, dtype=torch.float64)
    side = (min(shape[1], image_views.IMAGE_SIDE), min(shape[2], image_views.IMAGE_SIDE))
    expected = F.adaptive_avg_pool2d(x, side).flatten(1)
    np.testing.assert_allclose(image_views.ImageView("pixels", *shape[1:])(x).numpy(), expected.numpy(), rtol=1e-12,
                               atol=1e-12)


def numpy_contrast_normalised(images):
    flat = images.reshape(len(images), -1)
    centred = flat - flat.mean(1, keepdims=True)
    return (centred / np.linalg.norm(centred, axis=1, keepdims=True)).reshape(images.shape)


def test_the_contrast_view_normalises_each_image_then_pools():
    x = np.random.default_rng(5).normal(3.0, 2.0, size=(4, 3, 20, 12))
    expected = F.adaptive_avg_pool2d(torch.as_tensor(numpy_contrast_normalised(x)), (16, 12)).flatten(1)
    np.testing.assert_allclose(image_views.ImageView("contrast", 20, 12)(torch.as_tensor(x)).numpy(), expected.numpy(),
                               rtol=1e-12, atol=1e-12)
    flat = image_views.ImageView("contrast", 4, 4)(torch.full((1, 1, 4, 4), 0.7, dtype=torch.float64))
    assert torch.equal(flat, torch.zeros(1, 16, dtype=torch.float64))  # a constant image: all 0s, not NaN
    with pytest.raises(ValueError, match="view must be one of"):
        image_views.ImageView("edges", 4, 4)


@pytest.fixture(scope="module")
def unlabelled():
    """A model fitted on grey images without labels, the same network without the consensus, new images."""
    X = grey_images(0, 90)
    Z = np.concatenate([grey_images(1, 12), grey_images(2, 6, bright=0.7)])
    return X, Z, DLMSVDD(**IMAGES).fit(X), DLMSVDD(**IMAGES, input_consensus=False).fit(X)


def test_without_labels_the_score_is_the_asinh_sum_of_the_deep_z_and_two_views_nearest_distances(unlabelled):
    X, Z, model, deep = unlabelled
    combination = model.input_consensus_
    assert combination.weight == input_consensus.IMAGE_DEEP_WEIGHT > 0 and deep.input_consensus_ is None
    assert [c.members_ for c in combination.consensuses_] == [input_consensus.IMAGE_MEMBERS] * 2
    assert len(model.history_) == IMAGES["epochs"] + 1  # the network trains, as without the consensus
    train, _ = protocols.train_val_split(protocols.Split(np.arange(len(X)), np.ones(len(X), int)),
                                         model.config.val_fraction, model.config.seed, anomalies=False)

    def pooled(images, contrast):  # the network inputs (20 x 20), contrast-normalised or not, pooled to 16 x 16
        inputs = model.preprocess(images).double().numpy()
        inputs = numpy_contrast_normalised(inputs) if contrast else inputs
        return F.adaptive_avg_pool2d(torch.as_tensor(inputs), 16).flatten(1).numpy()

    views = [Consensus(members=("kNN",), scale=False, random_state=3).fit(pooled(X[train.indices], contrast))
             .dissimilarity(pooled(Z, contrast)) for contrast in (False, True)]
    z = numpy_robust_z(deep.dissimilarity(X[train.indices]), deep.dissimilarity(Z))
    expected = input_consensus.IMAGE_DEEP_WEIGHT * np.arcsinh(z) + np.mean(np.arcsinh(views), axis=0)
    np.testing.assert_allclose(model.dissimilarity(Z), expected, rtol=1e-5, atol=1e-5)
    assert model.dissimilarity(Z)[12:].min() > np.median(model.dissimilarity(Z)[:12])  # the lit corners
    # decision_scores_: the validation images scored as new ones; the training images each without itself
    val = np.setdiff1d(np.arange(len(X)), train.indices)
    np.testing.assert_allclose(model.decision_scores_[val], model.dissimilarity(X[val]), rtol=1e-6, atol=1e-6)
    assert (model.decision_scores_[train.indices] > model.dissimilarity(X[train.indices]) + 1e-3).all()


def test_the_exported_asinh_is_numpys():
    x = torch.as_tensor(np.r_[-1e6, -3.0, -1e-9, 0.0, 1e-9, 0.5, 40.0, 1e12], dtype=torch.float64)
    np.testing.assert_allclose(input_consensus.asinh(x).numpy(), np.arcsinh(x.numpy()), rtol=1e-12, atol=1e-15)


def test_save_load_exports_and_explain_score_as_the_model(unlabelled, tmp_path):
    onnxruntime = pytest.importorskip("onnxruntime")
    X, Z, model, _ = unlabelled
    model.save(tmp_path / "model.pt")
    np.testing.assert_array_equal(DLMSVDD.load(tmp_path / "model.pt").dissimilarity(Z), model.dissimilarity(Z))
    # float32 exports: the network's f differs by ~1e-5 from the model's, and its z-score divides
    # that by f's robust spread (~0.007 here): ~1e-3 in units of that spread
    session = onnxruntime.InferenceSession(str(model.export(tmp_path / "m.onnx")))
    f, _, _ = session.run(None, {"images": Z[:, None]})
    np.testing.assert_allclose(f, model.dissimilarity(Z), rtol=1e-4, atol=5e-3)
    scripted = torch.jit.load(str(model.export(tmp_path / "m.pt", format="torchscript")))
    np.testing.assert_allclose(scripted(torch.from_numpy(Z[:, None]))[0].numpy(), model.dissimilarity(Z),
                               rtol=1e-4, atol=5e-3)
    A = model.explain(Z[-2:], method="repair")  # through the pooling too
    assert A.shape == (2, 20, 20) and np.isfinite(A).all()


def test_with_labelled_anomalies_images_keep_the_deep_score():
    X = np.concatenate([grey_images(3, 60), grey_images(4, 8, bright=0.7)])
    y = np.r_[np.ones(60, int), -np.ones(8, int)]
    model = DLMSVDD(**IMAGES).fit(X, y)
    assert model.input_consensus_ is None
    assert DLMSVDD(**IMAGES, input_consensus=False).fit(X).input_consensus_ is None
