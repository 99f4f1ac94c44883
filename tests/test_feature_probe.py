"""benchmarks.feature_probe reads a fitted model's final features; its comparison of the boundary
with other read-outs rests on re-solving the model's own boundary on them."""

import numpy as np
import torch

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
