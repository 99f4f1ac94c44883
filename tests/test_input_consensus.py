"""DLMSVDD's score on feature vectors with the input consensus (dlmsvdd.training.input_consensus),
against a Consensus and a deep model fitted on their own and a numpy robust z-score."""

import numpy as np
import pytest
import torch
from torch.utils.data import TensorDataset

from dlmsvdd import DLMSVDD
from dlmsvdd.cli import main as cli_main
from dlmsvdd.data import protocols
from dlmsvdd_ext import consensus
from dlmsvdd_ext.consensus import Consensus

FAST = dict(epochs=2, batch_size=64, verbose=0, seed=3)


def rows(seed=0, n=260, d=5, anomalies=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d)).astype(np.float32)
    X[:anomalies] += 5.0
    return X


def dataset(X, targets):
    return TensorDataset(torch.from_numpy(X), torch.as_tensor(targets))


def numpy_robust_z(fit, scores):
    centre = np.median(fit)
    return (scores - centre) / (1.4826 * np.median(np.abs(fit - centre)))


@pytest.fixture(scope="module")
def split():
    """Training rows (5 labelled anomalies among them), validation normals and new rows, as network inputs."""
    X = rows(0, anomalies=5)
    t = np.ones(len(X), dtype=int)
    t[:5] = -1
    return X, t, rows(1, n=60), np.r_[rows(2, n=40), rows(3, n=20) + 4.0]


def test_without_labels_the_score_is_the_consensus_of_the_given_rows_and_nothing_trains(split):
    X, _, V, Z = split
    model = DLMSVDD(**FAST).fit(dataset(X, np.ones(len(X), int)), dataset(V, np.ones(len(V), int)))
    assert model.input_consensus_.weight == 0.0
    assert len(model.history_) == 1 and "omega_loss" not in model.history_[0]  # the network is not trained
    assert model.self_labelled_ == 0
    reference = Consensus(random_state=3).fit(X.astype(np.float64))  # the training rows alone
    assert reference.members_ == consensus.TABLE_MEMBERS  # 5 columns: a table's members, each weighing a half
    np.testing.assert_allclose(model.dissimilarity(Z), reference.dissimilarity(Z.astype(np.float64)) / 2,
                               rtol=1e-6, atol=1e-6)
    # the training rows are scored without themselves; the validation rows as new rows, and they calibrate
    np.testing.assert_allclose(model.decision_scores_, reference.fit_scores_ / 2, rtol=1e-6, atol=1e-6)
    validation = reference.dissimilarity(V.astype(np.float64)) / 2
    np.testing.assert_allclose(model.calibration_.scores, np.sort(validation), rtol=1e-6, atol=1e-6)
    # the threshold: p-value <= 0.1 over the 60 validation scores, 6 of 61: above the 6th highest
    assert model.threshold_ == pytest.approx(np.sort(validation)[-6], rel=1e-6)


def test_with_labels_the_deep_models_robust_z_score_joins_the_consensus(split):
    X, t, V, Z = split
    train, val = dataset(X, t), dataset(V, np.ones(len(V), int))
    model = DLMSVDD(**FAST).fit(train, val)
    deep = DLMSVDD(**FAST, input_consensus=False).fit(train, val)  # the same training: the consensus comes after
    assert model.input_consensus_.weight == 1.0 and deep.input_consensus_ is None
    assert len(model.history_) == FAST["epochs"] + 1
    consensus = Consensus(random_state=3).fit(X.astype(np.float64))
    expected = numpy_robust_z(deep.dissimilarity(train), deep.dissimilarity(Z)) \
        + consensus.dissimilarity(Z.astype(np.float64)) / 2
    np.testing.assert_allclose(model.dissimilarity(Z), expected, rtol=1e-5, atol=1e-5)
    assert model.decision_function(Z) == pytest.approx(model.threshold_ - expected, rel=1e-5, abs=1e-5)


def test_an_array_fits_decision_scores_are_every_row_in_order_without_itself():
    X = rows(4, n=300, anomalies=6)
    model = DLMSVDD(**FAST).fit(X)
    train, val = protocols.train_val_split(protocols.Split(np.arange(300), np.ones(300, int)), 0.2, 3,
                                           anomalies=False)  # the array's split (vectors: validation normals)
    inputs = model.preprocess(X).double()
    reference = Consensus(random_state=3).fit(inputs[train.indices])
    # the training rows are the consensus's fit rows, each without itself; the validation rows new rows
    np.testing.assert_allclose(model.decision_scores_[train.indices], reference.fit_scores_ / 2, rtol=1e-6,
                               atol=1e-6)
    np.testing.assert_allclose(model.decision_scores_[val.indices],
                               reference.dissimilarity(inputs[val.indices]) / 2, rtol=1e-6, atol=1e-6)
    assert model.decision_scores_[:6].min() > np.percentile(model.decision_scores_, 90)  # the shifted rows
    assert (model.labels_ == (model.decision_scores_ >= model.threshold_)).all()


@pytest.mark.parametrize("labelled", [False, True])
def test_save_load_and_exports_score_as_the_model(split, labelled, tmp_path):
    onnxruntime = pytest.importorskip("onnxruntime")
    X, t, V, Z = split
    model = DLMSVDD(**FAST).fit(X, t if labelled else None)
    model.save(tmp_path / "model.pt")
    loaded = DLMSVDD.load(tmp_path / "model.pt")
    np.testing.assert_array_equal(loaded.dissimilarity(Z), model.dissimilarity(Z))
    session = onnxruntime.InferenceSession(str(model.export(tmp_path / "m.onnx")))
    f, decision, _ = session.run(None, {"images": Z})
    np.testing.assert_allclose(f, model.dissimilarity(Z), rtol=1e-4, atol=1e-4)
    scripted = torch.jit.load(str(model.export(tmp_path / "m.pt", format="torchscript")))
    f_ts, decision_ts, _ = scripted(torch.from_numpy(Z))
    np.testing.assert_allclose(f_ts.numpy(), model.dissimilarity(Z), rtol=1e-4, atol=1e-4)
    clear = np.abs(model.decision_function(Z)) > 1e-3  # float32 rounding can flip a row at the threshold
    np.testing.assert_array_equal(decision[clear], model.predict(Z)[clear])
    np.testing.assert_array_equal(decision_ts.numpy()[clear], model.predict(Z)[clear])


def test_explain_attributes_the_combined_score(split):
    X, t, V, Z = split
    model = DLMSVDD(**FAST).fit(X, t)
    # the "repair" method's attributions are falls of the score the model ranks by
    A = model.explain(Z[-3:], method="repair")
    assert A.shape == (3, X.shape[1]) and np.isfinite(A).all() and (A.sum(1) > 0).all()


@pytest.mark.parametrize("switch", [[], ["--no-input-consensus"]])
def test_the_cli_fits_it_unless_switched_off(tmp_path, switch):
    X = rows(5, n=200)
    with open(tmp_path / "t.csv", "w") as handle:
        handle.write(",".join(f"x{j}" for j in range(X.shape[1])) + ",label\n")
        handle.writelines(",".join(map(str, row)) + ",0\n" for row in X)
    assert cli_main(["train", "--data", "table", "--path", str(tmp_path / "t.csv"), "--labelled-fraction", "0",
                     "--epochs", "1", "--verbose", "0", "--output", str(tmp_path / "run"), *switch]) == 0
    model = DLMSVDD.load(tmp_path / "run" / "model.pt")
    assert (model.input_consensus_ is None) == bool(switch) and model.config.input_consensus == (not switch)
    assert DLMSVDD(**FAST, input_consensus=False).fit(X).input_consensus_ is None


def test_embeddings_are_scored_by_the_nearest_given_rows_distance():
    """Rows of 256 columns or more (a network's embedding): the robust z-score of the distance to the
    nearest row the fit was given (scikit-learn's neighbour search on the rows min-max scaled by them)."""
    from sklearn.neighbors import NearestNeighbors
    from sklearn.preprocessing import MinMaxScaler

    rng = np.random.default_rng(7)
    X = rng.normal(size=(120, 300)).astype(np.float32)
    Z = np.vstack([rng.normal(size=(20, 300)), 1.0 + rng.normal(size=(5, 300))]).astype(np.float32)
    model = DLMSVDD(**FAST).fit(X)
    assert model.input_consensus_.consensus_.members_ == consensus.EMBEDDING_MEMBERS
    train, _ = protocols.train_val_split(protocols.Split(np.arange(len(X)), np.ones(len(X), int)),
                                         model.config.val_fraction, model.config.seed, anomalies=False)
    given = model.preprocess(X[train.indices]).double().numpy()  # the training rows alone (issue 46)
    scaler = MinMaxScaler().fit(given)
    nn = NearestNeighbors(n_neighbors=2).fit(scaler.transform(given))
    fit_distance = nn.kneighbors(None, 1)[0][:, 0]  # each given row without itself
    new = scaler.transform(model.preprocess(Z).double().numpy())
    z = numpy_robust_z(fit_distance, nn.kneighbors(new, 1)[0][:, 0])
    # rows beyond every given row (from their mean, scaled): at least the largest given row's score + the excess
    spread = np.linalg.norm(scaler.transform(given) - scaler.transform(given).mean(0), axis=1)
    beyond = (np.linalg.norm(new - scaler.transform(given).mean(0), axis=1) - spread.max() * (1 + 1e-4)) \
        / np.median(spread)
    expected = np.where(beyond > 0, np.maximum(z, numpy_robust_z(fit_distance, fit_distance).max() + beyond), z)
    assert (beyond > 0).sum() >= 5 and (beyond <= 0).sum() >= 10
    np.testing.assert_allclose(model.dissimilarity(Z), expected, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("n_labelled", [4, 30])
def test_on_embeddings_the_deep_weight_grows_with_the_labels_up_to_20(n_labelled):
    """Issue 49: beside the embeddings' nearest-row view the deep model weighs min(1, n_A / 20); the
    score is that times the deep model's robust z-score plus the view's, whatever the weight."""
    rng = np.random.default_rng(11)
    X = rng.normal(size=(160, 300)).astype(np.float32)
    X[:n_labelled] += 1.5
    t = np.ones(len(X), dtype=int)
    t[:n_labelled] = -1
    V = rng.normal(size=(40, 300)).astype(np.float32)
    Z = np.vstack([rng.normal(size=(20, 300)), 0.3 + rng.normal(size=(5, 300))]).astype(np.float32)
    train, val = dataset(X, t), dataset(V, np.ones(len(V), int))
    model = DLMSVDD(**FAST).fit(train, val)
    deep = DLMSVDD(**FAST, input_consensus=False).fit(train, val)
    assert model.input_consensus_.consensus_.members_ == consensus.EMBEDDING_MEMBERS
    weight = min(1.0, n_labelled / 20)
    assert model.input_consensus_.weight == pytest.approx(weight)
    view = Consensus(random_state=3).fit(X.astype(np.float64)).dissimilarity(Z.astype(np.float64))
    expected = weight * numpy_robust_z(deep.dissimilarity(train), deep.dissimilarity(Z)) + view
    np.testing.assert_allclose(model.dissimilarity(Z), expected, rtol=1e-5, atol=1e-5)


def test_on_tables_the_deep_model_weighs_fully_from_one_label():
    from dlmsvdd.training.input_consensus import deep_weight

    assert deep_weight(1, consensus.TABLE_MEMBERS) == 1.0 and deep_weight(0, consensus.TABLE_MEMBERS) == 0.0
    assert deep_weight(0, consensus.EMBEDDING_MEMBERS) == 0.0 and deep_weight(5, consensus.EMBEDDING_MEMBERS) == 0.25


def test_a_table_wide_from_its_categories_keeps_the_table_members():
    pd = pytest.importorskip("pandas")
    rng = np.random.default_rng(8)
    table = pd.DataFrame({"a": rng.normal(size=1200), "b": rng.normal(size=1200),
                          "kind": [f"k{i}" for i in rng.integers(0, 400, size=1200)]})
    model = DLMSVDD(**FAST).fit(table)
    assert model.input_shape_[0] >= consensus.EMBEDDING_WIDTH  # one-hot encoded: wide, yet a table
    assert model.input_consensus_.consensus_.members_ == consensus.TABLE_MEMBERS

