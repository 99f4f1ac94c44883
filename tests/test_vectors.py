"""Feature vectors (N, D) as first-class inputs of DLMSVDD: the standardisation
record, the MLP, scoring through the record, save/load, export parity, and the
errors a user of vectors can make."""

import numpy as np
import pytest
import torch
from sklearn.metrics import roc_auc_score

from dlmsvdd import DLMSVDD
from dlmsvdd.data import protocols
from dlmsvdd.data.preprocessing import record_from_dict
from dlmsvdd.data.vectors import VectorPreprocessing
from dlmsvdd.training.models import MLP

FAST = dict(epochs=2, batch_size=64, verbose=0, seed=0)


def _blobs(n_normal=160, n_anomalous=16, d=6, seed=0):
    """Normals around 0 with columns on very different scales, anomalies shifted
    by 4 standard deviations in every column: any sensible detector separates them."""
    rng = np.random.default_rng(seed)
    scales = np.logspace(-2, 3, d)
    normal = rng.normal(size=(n_normal, d)) * scales + 10 * scales
    anomalous = (rng.normal(size=(n_anomalous, d)) + 4) * scales + 10 * scales
    return np.vstack([normal, anomalous]), np.r_[np.ones(n_normal, int), -np.ones(n_anomalous, int)]


@pytest.fixture(scope="module")
def fitted():
    X, y = _blobs()
    return DLMSVDD(**FAST).fit(X, y), X, y


def test_record_is_numpy_standardisation_with_constant_columns_kept():
    rng = np.random.default_rng(1)
    X = rng.normal(size=(50, 4)) * [1, 100, 1e-3, 1] + [0, 5, 1, 0]
    X[:, 3] = 7.0  # constant: no information, scale 1
    record = VectorPreprocessing.fit(X)
    np.testing.assert_allclose(record.center, X.mean(axis=0), rtol=1e-12)
    np.testing.assert_allclose(record.scale[:3], X[:, :3].std(axis=0), rtol=1e-12)
    assert record.scale[3] == 1.0
    out = record.module()(torch.from_numpy(X)).numpy()
    expected = (X - X.mean(axis=0)) / np.r_[X[:, :3].std(axis=0), 1.0]
    np.testing.assert_allclose(out, expected, rtol=1e-5, atol=1e-5)
    assert record_from_dict(record.to_dict()) == record
    with pytest.raises(ValueError, match=r"feature vectors \(N, 4\)"):
        record.module()(torch.zeros(3, 5))


def test_validation_of_vectors_holds_normals_only():
    targets = np.r_[np.ones(50, int), -np.ones(3, int)]
    train, val = protocols.train_val_split(protocols.Split(np.arange(53), targets), 0.2, 0, anomalies=False)
    assert (val.targets == 1).all() and len(val) == 10
    assert (train.targets == -1).sum() == 3 and len(train) == 43
    assert set(train.indices) | set(val.indices) == set(range(53)) and not set(train.indices) & set(val.indices)


def test_fit_on_vectors_uses_the_mlp_and_the_training_rows_statistics(fitted):
    model, X, y = fitted
    assert model.training_params_["backbone"] == "mlp"
    assert isinstance(model.network_.backbone, MLP)
    assert model.input_shape_ == (X.shape[1],)
    train, _ = protocols.train_val_split(protocols.Split(np.arange(len(y)), y), 0.2, 0, anomalies=False)
    assert model.preprocessing_ == VectorPreprocessing.fit(X[train.indices])
    f = model.dissimilarity(X)
    assert roc_auc_score(y < 0, f) > 0.95
    # the rows fit was given, each scored without itself among its neighbours (tests/test_input_consensus.py)
    assert model.decision_scores_.shape == f.shape and roc_auc_score(y < 0, model.decision_scores_) > 0.95


def test_every_entry_point_takes_raw_vectors(fitted):
    model, X, _ = fitted
    inputs = model.preprocess(X)
    by_network = model.scores(torch.utils.data.TensorDataset(inputs, torch.ones(len(X), dtype=torch.long)))[0]
    # the input consensus sees the inputs as given: float32 rows round them (1e-6 of a score)
    np.testing.assert_allclose(model.dissimilarity(X), by_network, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(model.dissimilarity(torch.from_numpy(X)), by_network, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(model.decision_function(X), model.threshold_ - by_network.astype(np.float64),
                               rtol=1e-5, atol=1e-5)
    clear = np.abs(by_network - model.threshold_) > 1e-4  # a row at the threshold may fall either side
    np.testing.assert_array_equal(model.predict(X)[clear], np.where(by_network >= model.threshold_, -1, 1)[clear])
    np.testing.assert_allclose(model.score_samples(X.astype(np.float32)), -by_network, rtol=1e-5, atol=1e-5)


def test_save_load_and_export_parity(fitted, tmp_path):
    model, X, _ = fitted
    model.save(tmp_path / "model.pt")
    loaded = DLMSVDD.load(tmp_path / "model.pt")
    np.testing.assert_array_equal(loaded.dissimilarity(X), model.dissimilarity(X))
    assert loaded.preprocessing_ == model.preprocessing_
    f = model.dissimilarity(X)
    scripted = torch.jit.load(str(model.export(tmp_path / "m.pt", format="torchscript")))
    f_ts, decision, p_ts = scripted(torch.from_numpy(X).float())
    np.testing.assert_allclose(f_ts.numpy(), f, rtol=1e-4, atol=1e-5)
    np.testing.assert_array_equal(p_ts.numpy(), model.calibration_.p_values(f_ts.numpy()))  # from its validation normals
    np.testing.assert_array_equal(decision.numpy(), model.predict(X))
    ort = pytest.importorskip("onnxruntime")
    session = ort.InferenceSession(str(model.export(tmp_path / "m.onnx")))
    f_onnx, decision, _ = session.run(None, {"images": X.astype(np.float32)})
    np.testing.assert_allclose(f_onnx, f, rtol=1e-4, atol=1e-5)
    with pytest.raises(ValueError, match="takes feature vectors"):
        model.export(tmp_path / "u.onnx", input_dtype="uint8")


def test_mistakes_with_vectors_are_clear_errors(fitted):
    model, X, y = fitted
    with pytest.raises(ValueError, match=r"feature vectors \(N, 6\)"):
        model.dissimilarity(X[:, :5])
    bad = X.copy()
    bad[3, 2] = np.nan
    with pytest.raises(ValueError, match="NaN"):
        model.dissimilarity(bad)
    with pytest.raises(ValueError, match="NaN"):
        DLMSVDD(**FAST).fit(bad, y)
    with pytest.raises(ValueError, match="backbone 'small_cnn' takes images"):
        DLMSVDD(backbone="small_cnn", **FAST).fit(X, y)
    with pytest.raises(ValueError, match="cnn_width shapes the small CNN"):
        DLMSVDD(cnn_width=16, **FAST).fit(X, y)
    images = np.random.default_rng(0).random((40, 1, 8, 8)).astype(np.float32)
    with pytest.raises(ValueError, match="backbone 'mlp' takes feature vectors"):
        DLMSVDD(backbone="mlp", nu=1, **FAST).fit(images)


def test_mlp_shape_fields():
    X, y = _blobs(n_normal=60, n_anomalous=6)
    model = DLMSVDD(mlp_width=16, mlp_layers=1, **{**FAST, "epochs": 0}).fit(X, y)
    linears = [m for m in model.network_.backbone.modules() if isinstance(m, torch.nn.Linear)]
    assert [(m.in_features, m.out_features) for m in linears] == [(6, 16), (16, 8)]


def test_the_mlp_from_scratch_trains_the_vector_recipe_epochs():
    # BACKBONE_RECIPES: 15 epochs for the MLP from scratch (chosen on ADBench's validation rows, issue 28);
    # images keep the recipe's 30, and a given value wins for both
    from dlmsvdd.training.config import BACKBONE_RECIPES, RECIPES, TrainConfig

    assert TrainConfig().training_params(vectors=True)["epochs"] == BACKBONE_RECIPES["scratch", "mlp"]["epochs"] == 15
    assert TrainConfig().training_params(vectors=False)["epochs"] == RECIPES["scratch"]["epochs"] == 30
    assert TrainConfig(epochs=4).training_params(vectors=True)["epochs"] == 4
    assert TrainConfig(recipe="paper").training_params(vectors=True)["epochs"] == 30
    X = np.random.default_rng(0).normal(size=(120, 5)).astype(np.float32)
    model = DLMSVDD(verbose=0, nu=1.0, val_fraction=0.25, input_consensus=False).fit(X)  # unlabelled: else untrained
    assert model.training_params_["epochs"] == 15
    assert len(model.history_) == 16  # epochs 0 (the first boundary) to 15
