"""Table files of feature vectors (.npz, .csv) and ADBench's semi-supervised
protocol on them (dlmsvdd.data.tables), through the API and the CLI."""

import csv
import json
import math

import numpy as np
import pytest
import torch

from dlmsvdd import DLMSVDD
from dlmsvdd.cli import main
from dlmsvdd.data.tables import TEST_FRACTION, make_table_task, read_table
from dlmsvdd.data.vectors import VectorPreprocessing
from dlmsvdd.training import checkpoints


def _table(n_normal=120, n_anomalous=20, d=5, seed=0):
    rng = np.random.default_rng(seed)
    X = np.vstack([rng.normal(size=(n_normal, d)), rng.normal(size=(n_anomalous, d)) + 3])
    X[:, 1] = 2.5  # a constant column
    return X, np.r_[np.zeros(n_normal, int), np.ones(n_anomalous, int)]


def _write_csv(path, X, y, label="label", cells=None):
    with path.open("w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow([f"f{j}" for j in range(X.shape[1])] + [label])
        for i, (row, target) in enumerate(zip(X, y)):
            values = [repr(float(v)) for v in row] + [str(int(target))]
            if cells and i in cells:
                values[cells[i][0]] = cells[i][1]
            writer.writerow(values)


def test_npz_and_csv_read_the_same_table(tmp_path):
    X, y = _table()
    np.savez(tmp_path / "t.npz", X=X, y=y)
    _write_csv(tmp_path / "t.csv", X, y, label="is_anomaly")
    for path, column in ((tmp_path / "t.npz", "label"), (tmp_path / "t.csv", "is_anomaly")):
        X_read, y_read = read_table(path, column)
        np.testing.assert_array_equal(X_read, X)
        np.testing.assert_array_equal(y_read, y)


@pytest.mark.parametrize("case, message", [
    ("missing", "is not a file"), ("suffix", "table files are .npz"), ("no_y", r"missing \['y'\]"),
    ("labels", r"labels must be 0 \(normal\) or 1 \(anomaly\); found \[0, 2\]"),
    ("nan_npz", r"1 cell\(s\) are NaN, empty or infinite \(first: row 4, column 2\)"),
    ("column", r"no label column 'label' \(columns: \['f0', 'f1', 'f2', 'f3', 'f4', 'y'\]\)"),
    ("empty_cell", r"1 missing cell\(s\) \(empty, None or NaN\); first: data row 8, column 'f0'"),
    ("text_label", r"data row 3, column 'label' holds 'abc', not a number"),  # text in a feature: a category
])
def test_bad_tables_are_clear_errors(case, message, tmp_path):
    X, y = _table()
    path, column = tmp_path / "t.npz", "label"
    if case == "missing":
        path = tmp_path / "nowhere.npz"
    elif case == "suffix":
        path = tmp_path / "t.txt"
        path.write_text("1,2\n")
    elif case == "no_y":
        np.savez(path, X=X)
    elif case == "labels":
        np.savez(path, X=X, y=np.where(y == 1, 2, 0))
    elif case == "nan_npz":
        X[4, 2] = np.nan
        np.savez(path, X=X, y=y)
    else:
        path = tmp_path / "t.csv"
        cells = {"empty_cell": {7: (0, "")}, "text_label": {2: (5, "abc")}}.get(case)
        _write_csv(path, X, y, label="y" if case == "column" else "label", cells=cells)
    with pytest.raises(ValueError, match=message):
        read_table(path, column)


def test_the_protocol_splits_labels_and_scales_as_adbench(tmp_path):
    X, y = _table(n_normal=200, n_anomalous=40)
    np.savez(tmp_path / "t.npz", X=X, y=y)
    task = make_table_task(tmp_path / "t.npz", labelled_fraction=0.05, seed=3, val_fraction=0.2)
    test = task.test.split
    assert len(test) == math.ceil(TEST_FRACTION * 240) and (test.targets == -1).sum() == 12  # stratified 70/30
    train_rows = np.r_[task.train.split.indices, task.val.split.indices]
    assert not set(train_rows) & set(test.indices) and len(train_rows) + len(test) == 240
    n_train_anomalies = int((y[train_rows] == 1).sum())
    labelled = task.train.split.indices[task.train.targets == -1]
    assert len(labelled) == math.ceil(0.05 * n_train_anomalies) and (y[labelled] == 1).all()
    assert (task.val.targets == 1).all()  # validation: normal rows only; unlabelled anomalies stay in
    # standardised with the training rows' statistics (not validation's, not test's); the constant column kept
    record = task.train.preprocessing
    assert record == VectorPreprocessing.fit(X[task.train.split.indices]) and record.scale[1] == 1.0
    x0, _ = task.test[0]
    np.testing.assert_allclose(x0.numpy(), (X[test.indices[0]] - record.center) / record.scale, rtol=1e-5, atol=1e-6)
    again = make_table_task(tmp_path / "t.npz", labelled_fraction=0.05, seed=3, val_fraction=0.2)
    np.testing.assert_array_equal(again.train.split.indices, task.train.split.indices)
    everything = make_table_task(tmp_path / "t.npz", seed=3)  # None: every training anomaly labelled
    assert (everything.train.targets == -1).sum() == n_train_anomalies


def test_cli_trains_scores_and_exports_a_table(tmp_path, capsys):
    X, y = _table()
    _write_csv(tmp_path / "t.csv", X, y, label="outlier")
    run = tmp_path / "run"
    assert main(["train", "--data", "table", "--path", str(tmp_path / "t.csv"), "--label-column", "outlier",
                 "--labelled-fraction", "0.25", "--epochs", "2", "--verbose", "0", "--output", str(run)]) == 0
    result = json.loads((run / "metrics.json").read_text())
    assert result["test"]["auroc"] > 0.9 and result["val"]["auroc"] is None  # validation: normal rows only
    model = DLMSVDD.load(run / "model.pt")
    assert model.config.backbone == "mlp" and isinstance(model.preprocessing_, VectorPreprocessing)
    np.save(tmp_path / "x.npy", X[:10])
    capsys.readouterr()
    assert main(["score", str(run), "--npy", str(tmp_path / "x.npy")]) == 0
    rows = list(csv.DictReader(capsys.readouterr().out.splitlines()))
    np.testing.assert_allclose([float(r["dissimilarity"]) for r in rows], model.dissimilarity(X[:10]), rtol=1e-6)
    assert main(["score", str(run), "--images", str(tmp_path)]) == 2
    assert "takes feature vectors" in capsys.readouterr().err
    assert main(["export", str(run), "--format", "torchscript"]) == 0
    scripted = torch.jit.load(str(run / "model.torchscript.pt"))
    np.testing.assert_allclose(scripted(torch.from_numpy(X[:10]).float())[0].numpy(), model.dissimilarity(X[:10]),
                               rtol=1e-4, atol=1e-5)
    assert main(["train", "--data", "table", "--path", str(tmp_path / "t.csv"), "--epochs", "1",
                 "--output", str(tmp_path / "bad")]) == 2
    assert "no label column 'label'" in capsys.readouterr().err


def test_a_table_run_stopped_mid_way_resumes_to_the_uninterrupted_result(tmp_path):
    """Checkpoints and resume work for vectors as for images: stopped after epoch 2 and resumed, the
    run ends with the same weights and scores as the run left alone."""
    X, y = _table()
    np.savez(tmp_path / "t.npz", X=X, y=y)
    task = make_table_task(tmp_path / "t.npz", labelled_fraction=0.25, seed=1)
    settings = dict(epochs=5, verbose=0, seed=1)
    whole = DLMSVDD(**settings).fit(task.train, task.val)

    def stop(row):
        if row["epoch"] == 2:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        DLMSVDD(**settings).fit(task.train, task.val, checkpoint=tmp_path / "state.pt", callback=stop)
    # as written before the small CNN's cnn_branch_norm existed, which the MLP's run leaves None
    state = checkpoints.read(tmp_path / "state.pt", checkpoints.TRAINING)
    assert state["resolved"].pop("cnn_branch_norm") is None and state["config"].pop("cnn_branch_norm") is None
    checkpoints.write(tmp_path / "state.pt", {k: v for k, v in state.items() if k not in ("format", "kind")},
                      checkpoints.TRAINING)
    resumed = DLMSVDD(**settings).fit(task.train, task.val, checkpoint=tmp_path / "state.pt", resume=True)
    for key, value in whole.network_.state_dict().items():
        assert torch.equal(resumed.network_.state_dict()[key], value), key
    np.testing.assert_array_equal(resumed.dissimilarity(task.test), whole.dissimilarity(task.test))
    assert resumed.threshold_ == whole.threshold_


def test_a_sweep_and_its_report_over_a_table(tmp_path):
    """Sweeps and reports take table runs as they take image runs: a grid over seeds and labelled
    fractions, every task done, re-running skips them, the report tables them."""
    from dlmsvdd.experiments.sweep import Sweep, run_sweep

    X, y = _table()
    np.savez(tmp_path / "t.npz", X=X, y=y)
    sweep = Sweep({"data": "table", "path": str(tmp_path / "t.npz"), "epochs": 1, "verbose": 0},
                  {"seed": [0, 1], "labelled_fraction": [0.05, 0.25]})
    records = run_sweep(sweep, tmp_path / "sweep", progress=False)
    assert [r["status"] for r in records] == ["done"] * 4
    assert all(r["resolved"]["backbone"] == "mlp" and r["test"]["auroc"] > 0.8 for r in records)
    stamps = {p: p.stat().st_mtime_ns for p in (tmp_path / "sweep").glob("*/result.json")}
    run_sweep(sweep, tmp_path / "sweep", progress=False)  # nothing left to do
    assert stamps == {p: p.stat().st_mtime_ns for p in (tmp_path / "sweep").glob("*/result.json")}
    assert main(["report", str(tmp_path / "sweep"), "--output", str(tmp_path / "report")]) == 0
    assert any((tmp_path / "report").iterdir())
