"""benchmarks.feature_probe reads a fitted model's final features; its comparison of the boundary
with other read-outs rests on re-solving the model's own boundary on them."""

import numpy as np
import pytest
import torch
from sklearn.metrics import roc_auc_score

from benchmarks import feature_probe, image_peers
from dlmsvdd import DLMSVDD, TrainConfig, datasets, tasks


def test_the_boundary_resolved_at_the_models_bandwidth_scores_as_the_model_does():
    torch.manual_seed(0)
    task = tasks.make_task(datasets.digits(), 9, ratio=0.1, seed=0)
    model = DLMSVDD(TrainConfig(epochs=2, verbose=0, seed=0)).fit(task.train, task.val)
    train_feats, train_t = model._features(task.train)
    val_feats, _ = model._features(task.val)
    train_feats, val_feats = train_feats.double(), val_feats.double()
    expected = np.asarray(model.svdd_.dissimilarity(val_feats))
    gamma = float(model.svdd_.gamma_)
    same = np.asarray(feature_probe.refit_boundary(model, train_feats, train_t, gamma).dissimilarity(val_feats))
    np.testing.assert_allclose(same, expected, rtol=1e-3, atol=1e-3 * np.abs(expected).max())
    narrower = feature_probe.refit_boundary(model, train_feats, train_t, 4.0 * gamma)
    narrower = np.asarray(narrower.dissimilarity(val_feats))
    assert not np.allclose(narrower, expected, rtol=1e-3)  # the multiple reaches the kernel

    row = feature_probe.probe(model, task, [1, 4])
    assert set(row) == {"model", "gamma", "boundary_gamma_x1", "boundary_gamma_x4", "logistic_C1", "logistic_C0.01",
                        "knn_normals"}
    assert abs(row["boundary_gamma_x1"] - row["model"]) < 1e-6


def test_the_peers_probe_trains_the_peer_as_the_protocol_does():
    task = tasks.make_task(datasets.digits(), 9, ratio=0.1, seed=0)
    config = TrainConfig(epochs=2, verbose=0, seed=0, normal_class=9, ratio=0.1)
    model = DLMSVDD(config).fit(task.train, task.val)
    row = feature_probe.probe_peer(model, task, config, "classifier")
    assert row["classifier"] == image_peers.fit_peer("classifier", task, config)["val_auroc"]  # seeded alike
    assert 0.5 < row["boundary_on_classifier_features"] <= 1.0


def test_the_centre_read_outs_use_the_anchor_the_fit_fixed():
    task = tasks.make_task(datasets.digits(), 9, ratio=0.1, seed=0)
    config = TrainConfig(epochs=2, verbose=0, seed=0, normal_class=9, ratio=0.1)
    model, reference = feature_probe.fit_keeping_anchor(config, task)
    plain = DLMSVDD(config).fit(task.train, task.val)  # the watch changes nothing of the fit
    np.testing.assert_array_equal(model.scores(task.val)[0], plain.scores(task.val)[0])
    assert reference is not None and model.deep_sad_weight_ > 0

    train_feats, train_t = model._features(task.train)
    val_feats, val_t = model._features(task.val)
    train_feats, val_feats = train_feats.double(), val_feats.double()
    row = feature_probe.centre_read_outs(model, reference, train_feats, train_t, val_feats, val_t)
    # an independent reference in numpy: squared distances, z-scores over the training normals
    c = reference.centre.double().numpy()
    d_train = ((train_feats.numpy() - c) ** 2).sum(1)
    d_val = ((val_feats.numpy() - c) ** 2).sum(1)
    f_train = np.asarray(model.svdd_.dissimilarity(train_feats))
    f_val = np.asarray(model.svdd_.dissimilarity(val_feats))
    normal = train_t > 0
    blend = ((f_val - f_train[normal].mean()) / f_train[normal].std()
             + (d_val - d_train[normal].mean()) / d_train[normal].std())
    assert row["centre_distance"] == pytest.approx(roc_auc_score(val_t < 0, d_val))
    assert row["blend"] == pytest.approx(roc_auc_score(val_t < 0, blend))
    assert row["boundary"] == pytest.approx(roc_auc_score(val_t < 0, model.scores(task.val)[0]), abs=1e-4)
