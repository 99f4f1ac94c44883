"""The CLI's CSV tables as spreadsheets write them (issue 34): a byte-order mark, a duplicated
column name, text (categorical) columns and empty cells, through train, score --csv and export."""

import csv
import io
import json

import numpy as np
import pandas as pd
import pytest
import torch

from dlmsvdd import DLMSVDD
from dlmsvdd.cli import main
from dlmsvdd.data.tables import make_table_task, read_table

TRAIN = ["--epochs", "2", "--verbose", "0"]


def _rows(n=300, seed=0):
    """Features a, color (text), b and a label first; anomalies shifted in a and of their own colour."""
    rng = np.random.default_rng(seed)
    label = (np.arange(n) < 40).astype(int)
    a = rng.normal(size=n) + 4 * label
    color = np.where(label == 1, "black", rng.choice(["red", "blue"], n))
    return pd.DataFrame({"label": label, "a": a, "color": color, "b": rng.normal(size=n)})


def _write(path, frame, bom=False, header=None):
    text = io.StringIO()
    writer = csv.writer(text, lineterminator="\n")
    writer.writerow(header or list(frame.columns))
    writer.writerows(["" if isinstance(v, float) and np.isnan(v) else v for v in row]
                     for row in frame.itertuples(index=False))
    path.write_bytes((b"\xef\xbb\xbf" if bom else b"") + text.getvalue().encode())
    return path


def test_a_csv_with_a_byte_order_mark_and_the_label_first_trains(tmp_path):
    path = _write(tmp_path / "excel.csv", _rows().drop(columns="color"), bom=True)
    assert main(["train", "--data", "table", "--path", str(path), *TRAIN, "--output", str(tmp_path / "run")]) == 0
    X, y = read_table(path)
    assert y.sum() == 40 and np.asarray(X).shape == (300, 2)  # was "no label column 'label' (... '\ufefflabel')"


def test_a_duplicated_column_name_is_refused(tmp_path, capsys):
    frame = _rows().drop(columns="color")
    frame["copy"] = frame["label"]
    path = _write(tmp_path / "dup.csv", frame, header=["label", "a", "b", "label"])
    assert main(["train", "--data", "table", "--path", str(path), *TRAIN, "--output", str(tmp_path / "run")]) == 2
    assert "two or more columns are named ['label']" in capsys.readouterr().err  # was: trained on it, AUROC 1.0
    assert not (tmp_path / "run").exists()


def test_text_columns_and_empty_cells_train_score_and_export(tmp_path, capsys):
    frame = _rows()
    frame["a"] = frame["a"].astype(object)
    frame.loc[60, "a"] = np.nan
    path = _write(tmp_path / "mixed.csv", frame)
    run = tmp_path / "run"
    assert main(["train", "--data", "table", "--path", str(path), *TRAIN, "--output", str(run)]) == 2
    assert "1 missing cell(s) (empty, None or NaN); first: data row 61, column 'a'" in capsys.readouterr().err
    assert main(["train", "--data", "table", "--path", str(path), *TRAIN, "--missing", "impute",
                 "--output", str(run)]) == 0
    assert json.loads((run / "metrics.json").read_text())["test"]["auroc"] > 0.9
    model = DLMSVDD.load(run / "model.pt")
    encoding = model.preprocessing_.encoding
    assert encoding.columns == ("a", "color", "b") and encoding.missing == "impute" and encoding.indicators == (0,)
    # new rows by name, in another order, with an unseen colour and an empty cell: scored as Python scores them
    new = pd.DataFrame({"b": [0.1, -0.3, 0.0], "color": ["red", "purple", "blue"], "a": [0.2, 5.0, np.nan]})
    capsys.readouterr()
    assert main(["score", str(run), "--csv", str(_write(tmp_path / "new.csv", new))]) == 0
    rows = list(csv.DictReader(capsys.readouterr().out.splitlines()))
    np.testing.assert_allclose([float(r["dissimilarity"]) for r in rows], model.dissimilarity(new), rtol=1e-6)
    assert main(["score", str(run), "--csv", str(_write(tmp_path / "short.csv", new.drop(columns="b")))]) == 2
    assert "lacks column(s) ['b']" in capsys.readouterr().err
    assert main(["export", str(run), "--format", "torchscript"]) == 0
    f, decision, _ = torch.jit.load(str(run / "model.torchscript.pt"))(torch.from_numpy(
        encoding.codes(new).astype(np.float32)))
    np.testing.assert_allclose(f.numpy(), model.dissimilarity(new), rtol=1e-5, atol=5e-6)
    np.testing.assert_array_equal(decision.numpy(), model.predict(new))


def test_a_numeric_column_is_categorical_when_the_flag_names_it(tmp_path):
    frame = _rows().drop(columns="color")
    frame["grade"] = np.random.default_rng(1).integers(1, 4, len(frame))
    path = _write(tmp_path / "grades.csv", frame)
    run = tmp_path / "run"
    assert main(["train", "--data", "table", "--path", str(path), *TRAIN, "--categorical", "grade",
                 "--output", str(run)]) == 0
    encoding = DLMSVDD.load(run / "model.pt").preprocessing_.encoding
    assert encoding.categories == (None, None, ("1", "2", "3")) and encoding.feature_names()[-3:] == [
        "grade=1", "grade=2", "grade=3"]
    with pytest.raises(ValueError, match=r"categorical names \['grades'\]"):
        make_table_task(path, categorical=["grades"])
