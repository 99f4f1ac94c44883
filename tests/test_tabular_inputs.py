"""Tables as users hold them (dlmsvdd_ext.tabular): pandas DataFrames and Series, lists of rows
and CSV cells in every entry point of LpSVDD, DLMSVDD and the CLI; column names checked;
categorical columns and missing cells encoded by the recorded rule, which save/load and the
exports keep (issue 34). References: numpy arrays of the same numbers, and scikit-learn's
OneHotEncoder and SimpleImputer."""

import numpy as np
import pandas as pd
import pytest
import scipy.sparse as sp
import torch
from sklearn.compose import ColumnTransformer
from sklearn.impute import SimpleImputer
from sklearn.preprocessing import OneHotEncoder

from dlmsvdd import DLMSVDD
from dlmsvdd.training.config import typed
from dlmsvdd_ext import LpSVDD
from dlmsvdd_ext.tabular import TableEncoding, fit_encoding

EPOCHS = dict(epochs=2, verbose=0, seed=0)


def _vectors(n=200, d=5, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d))
    y = np.ones(n, dtype=int)
    y[:10] = -1
    X[:10] += 4
    return X, y


def _mixed(n=240, seed=0):
    """A table with two numeric columns, a text column and an integer column, anomalies shifted."""
    rng = np.random.default_rng(seed)
    frame = pd.DataFrame({"a": rng.normal(size=n), "color": rng.choice(["red", "blue", "green"], n),
                          "b": rng.normal(size=n), "size": rng.integers(1, 4, n)})
    y = np.ones(n, dtype=int)
    y[:12] = -1
    frame.loc[:11, "a"] += 4
    frame.loc[:11, "color"] = "black"
    return frame, y


@pytest.fixture(scope="module")
def numeric_model():
    X, y = _vectors()
    return DLMSVDD(**EPOCHS).fit(X, y), X, y


def test_a_dataframe_a_list_and_a_series_score_as_the_array(numeric_model):
    model, X, y = numeric_model
    f = model.dissimilarity(X)
    np.testing.assert_array_equal(model.dissimilarity(pd.DataFrame(X)), f)  # was KeyError: 5
    np.testing.assert_array_equal(model.dissimilarity(X.tolist()), f)  # was "too many values to unpack"
    np.testing.assert_array_equal(model.predict(pd.DataFrame(X)), model.predict(X))
    np.testing.assert_array_equal(model.decision_function(X.tolist()), model.decision_function(X))
    np.testing.assert_array_equal(model.score_samples(pd.DataFrame(X)), -f)
    np.testing.assert_array_equal(model.p_values(X.tolist()), model.p_values(X))
    np.testing.assert_array_equal(model.predict_proba(pd.DataFrame(X)), model.predict_proba(X))
    again = DLMSVDD(**EPOCHS).fit(pd.DataFrame(X), pd.Series(y))  # was KeyError: 0
    np.testing.assert_array_equal(again.dissimilarity(X), f)
    np.testing.assert_array_equal(DLMSVDD(**EPOCHS).fit(X.tolist(), y.tolist()).dissimilarity(X), f)
    calibrated = DLMSVDD(**EPOCHS).fit(pd.DataFrame(X), y).calibrate(pd.DataFrame(X[y > 0][:50]))
    assert calibrated.n_calibration_ == 50
    # the training rows' labels (decision_scores_: each row without itself among its neighbours)
    np.testing.assert_array_equal(DLMSVDD(**EPOCHS).fit_predict(pd.DataFrame(X), pd.Series(y)), 1 - 2 * model.labels_)


def test_lpsvdd_takes_the_same_tables():
    X, y = _vectors()
    model = LpSVDD().fit(pd.DataFrame(X), pd.Series(y)).calibrate(pd.DataFrame(X[y > 0][:50]))
    reference = LpSVDD().fit(X, y).calibrate(X[y > 0][:50])
    for method in ("dissimilarity", "score_samples", "decision_function", "predict", "p_values", "predict_proba"):
        np.testing.assert_array_equal(getattr(model, method)(X.tolist()), getattr(reference, method)(X))
    np.testing.assert_array_equal(LpSVDD().fit_predict(X.tolist()), LpSVDD().fit(X).predict(X))  # OutlierMixin's: no y


def test_sparse_input_is_refused_with_what_to_do(numeric_model):
    model, X, y = numeric_model
    with pytest.raises(ValueError, match=r"sparse matrix .*pass X.toarray\(\)"):
        model.predict(sp.csr_matrix(X))  # was "sparse array length is ambiguous"
    with pytest.raises(ValueError, match=r"X.toarray\(\)"):
        DLMSVDD(**EPOCHS).fit(sp.csr_matrix(X), y)  # was "fit(train, val) takes a validation dataset"
    with pytest.raises(ValueError, match=r"X.toarray\(\)"):
        LpSVDD().fit(sp.csr_array(X))


def test_column_names_are_recorded_and_checked():
    X, y = _vectors()
    frame = pd.DataFrame(X, columns=list("vwxyz"))
    model = LpSVDD().fit(frame, y)
    assert model.encoding_.columns == tuple("vwxyz")
    f = model.dissimilarity(frame)
    np.testing.assert_allclose(f, LpSVDD().fit(X, y).dissimilarity(X), rtol=1e-12)
    np.testing.assert_array_equal(model.dissimilarity(frame[list("zyxwv")]), f)  # by name, in any order
    np.testing.assert_array_equal(model.dissimilarity(X), f)  # without names: by position
    with pytest.raises(ValueError, match=r"lacks column\(s\) \['x'\]"):
        model.predict(frame.drop(columns="x"))
    with pytest.raises(ValueError, match=r"has column\(s\) \['extra'\] the model was not fitted on"):
        model.predict(frame.assign(extra=1.0))
    with pytest.raises(ValueError, match=r"has 4 column\(s\); the model was fitted on 5 \(v, w, x, y, z\)"):
        model.predict(X[:, :4])
    with pytest.raises(ValueError, match=r"two or more columns named \['v'\]"):
        model.predict(frame.rename(columns={"w": "v"}))


def _reference(frame, fit_rows, impute):
    """scikit-learn's encoding of ``frame`` fitted on ``fit_rows``, columns in tabular's order."""
    text = ["color"]
    numeric = [c for c in frame.columns if c not in text]
    parts = [("numeric", SimpleImputer(strategy="median") if impute else "passthrough", numeric),
             ("text", OneHotEncoder(handle_unknown="ignore", sparse_output=False), text)]
    encoder = ColumnTransformer(parts).fit(fit_rows.assign(color=fit_rows.color.fillna("__gap__")))
    encoded = encoder.transform(frame.assign(color=frame.color.fillna("__gap__")))
    width = len(numeric)
    hot = encoder.named_transformers_["text"].categories_[0]
    keep = [k for k, c in enumerate(hot) if c != "__gap__"]  # a missing category: all zeros, and its indicator
    at = {c: k for k, c in enumerate(numeric)}
    columns = []
    for c in frame.columns:
        columns += [encoded[:, width + k] for k in keep] if c in text else [encoded[:, at[c]]]
    if impute:
        columns += [frame[c].isna().to_numpy(float) for c in frame.columns if fit_rows[c].isna().any()]
    return np.column_stack(columns)


def test_the_encoding_is_scikit_learns_one_hot_and_median_imputation():
    frame, _ = _mixed()
    frame.loc[20, "a"], frame.loc[30, "color"], frame.loc[40, "b"] = np.nan, None, np.nan
    fit_rows = frame.iloc[:200]
    encoding = fit_encoding(frame, missing="impute", rows=np.arange(200))
    assert encoding.categories[1] == ("black", "blue", "green", "red")
    assert encoding.feature_names() == ["a", "color=black", "color=blue", "color=green", "color=red", "b", "size",
                                        "missing(a)", "missing(color)", "missing(b)"]
    new = frame.iloc[200:].copy()
    new.loc[new.index[0], "color"] = "purple"  # unseen: all zeros, scored
    new.loc[new.index[1], "size"] = np.nan  # missing where training had none: the median, no indicator
    for table in (fit_rows, new):
        np.testing.assert_array_equal(encoding.transform(table), _reference(table, fit_rows, impute=True))
    assert encoding.transform(new)[0, 1:5].tolist() == [0, 0, 0, 0]
    plain = fit_encoding(frame.dropna())
    np.testing.assert_array_equal(plain.transform(frame.dropna()), _reference(frame.dropna(), frame.dropna(), False))


def test_missing_cells_are_refused_with_row_and_column_by_default():
    frame, y = _mixed()
    frame.loc[7, "b"] = np.nan
    for fit in (lambda: LpSVDD().fit(frame), lambda: DLMSVDD(**EPOCHS).fit(frame, y)):
        with pytest.raises(ValueError, match=r"1 missing cell\(s\) .*first: row 7, column 'b'.*missing='impute'"):
            fit()
    model = LpSVDD().fit(frame.dropna())
    with pytest.raises(ValueError, match=r"row 7, column 'b'"):
        model.predict(frame)
    with pytest.raises(ValueError, match=r"row 0, column 'a' is inf"):
        model.predict(frame.dropna().assign(a=np.inf))


def test_lpsvdd_on_a_mixed_table_equals_lpsvdd_on_scikit_learns_encoding():
    frame, y = _mixed()
    frame.loc[3, "color"], frame.loc[50, "a"] = None, np.nan
    model = LpSVDD(missing="impute").fit(frame, y)
    reference = LpSVDD().fit(_reference(frame, frame, impute=True), y)
    np.testing.assert_allclose(model.dissimilarity(frame), reference.dissimilarity(_reference(frame, frame, True)),
                               rtol=1e-10, atol=1e-12)
    rows = [list(row) for row in frame.itertuples(index=False)]  # a list of rows, text and None inside
    np.testing.assert_array_equal(LpSVDD(missing="impute").fit(rows, y).dissimilarity(rows),
                                  LpSVDD(missing="impute").fit(frame.to_numpy(object), y).dissimilarity(frame.to_numpy(
                                      object)))
    state = LpSVDD.from_state_dict(model.state_dict())
    np.testing.assert_array_equal(state.dissimilarity(frame), model.dissimilarity(frame))


def test_a_numeric_column_named_categorical_is_one_hot_encoded():
    frame, y = _mixed()
    encoding = fit_encoding(frame, categorical=["size"])
    assert encoding.categories[3] == ("1", "2", "3")
    assert encoding.transform(frame.assign(size=frame["size"].astype(float)))[:, -3:].sum(1).tolist() == [1] * len(y)
    assert fit_encoding(frame.to_numpy(), categorical=[3]).categories[3] == ("1", "2", "3")
    assert fit_encoding(frame.to_numpy(), categorical=["3"]).categories[3] == ("1", "2", "3")  # a flag's text
    with pytest.raises(ValueError, match=r"categorical names \['shape'\], which X does not have"):
        fit_encoding(frame, categorical=["shape"])
    assert typed("categorical", "size, color") == ["size", "color"]  # --categorical size,color


@pytest.fixture(scope="module")
def mixed_model():
    frame, y = _mixed()
    frame.loc[30, "a"], frame.loc[40, "color"] = np.nan, None
    return DLMSVDD(**EPOCHS, missing="impute").fit(frame, y), frame, y


def test_dlmsvdd_scores_categories_missing_and_unseen_cells(mixed_model, tmp_path):
    model, frame, y = mixed_model
    encoding = model.preprocessing_.encoding
    assert encoding.categories[1] == ("black", "blue", "green", "red") and encoding.indicators == (0, 1)
    assert model.input_shape_ == (len(encoding.feature_names()),)
    f = model.dissimilarity(frame)
    assert np.isfinite(f).all() and f[y < 0].mean() > f[y > 0].mean()
    new = pd.DataFrame({"size": [2, 2], "b": [0.0, 0.0], "color": ["purple", None], "a": [0.0, np.nan]})
    assert np.isfinite(model.dissimilarity(new)).all()  # unseen and missing: scored, not refused
    model.save(tmp_path / "model.pt")
    loaded = DLMSVDD.load(tmp_path / "model.pt")
    assert loaded.preprocessing_.encoding == encoding
    np.testing.assert_array_equal(loaded.dissimilarity(frame), f)
    np.testing.assert_array_equal(loaded.predict(new), model.predict(new))


def test_the_exports_take_the_codes_and_agree_with_python(mixed_model, tmp_path):
    ort = pytest.importorskip("onnxruntime")
    model, frame, _ = mixed_model
    encoding = model.preprocessing_.encoding
    rows = pd.concat([frame.iloc[:40], pd.DataFrame({"a": [0.1, np.nan], "color": ["purple", None],
                                                     "b": [0.0, 0.2], "size": [1, 3]})])
    codes = encoding.codes(rows).astype(np.float32)
    assert codes[-2, 1] == -1 and np.isnan(codes[-1, [0, 1]]).all()  # unseen, and missing cells
    f, decision = model.dissimilarity(rows), model.predict(rows)
    onnx_f, onnx_decision, _ = ort.InferenceSession(str(model.export(tmp_path / "m.onnx"))).run(None, {"images": codes})
    script = torch.jit.load(str(model.export(tmp_path / "m.ts.pt", format="torchscript")))
    script_f, script_decision, _ = script(torch.from_numpy(codes))
    for got_f, got_decision in ((onnx_f, onnx_decision), (script_f.numpy(), script_decision.numpy())):
        np.testing.assert_allclose(got_f, f, rtol=1e-4, atol=1e-4)  # the exported consensus runs in float32
        np.testing.assert_array_equal(got_decision, decision)


def test_an_export_without_imputation_calls_a_missing_cell_unreadable(tmp_path):
    frame, y = _mixed()
    model = DLMSVDD(**EPOCHS).fit(frame, y)
    codes = model.preprocessing_.encoding.codes(frame.iloc[:3]).astype(np.float32)
    codes[0, 0] = codes[1, 1] = np.nan
    f, decision, _ = torch.jit.load(str(model.export(tmp_path / "m.ts.pt", format="torchscript")))(
        torch.from_numpy(codes))
    assert np.isnan(f[:2].numpy()).all() and decision[:2].tolist() == [-1, -1] and np.isfinite(float(f[2]))


def test_a_tampered_encoding_is_refused():
    encoding = fit_encoding(_mixed()[0], missing="impute")
    values = encoding.to_dict()
    assert TableEncoding.from_dict(values) == encoding
    for key, bad in (("fill", [float("nan")] * 4), ("indicators", [9]), ("missing", "guess"), ("categories", [None])):
        with pytest.raises(ValueError, match="does not hold together"):
            TableEncoding.from_dict({**values, key: bad})
    with pytest.raises(ValueError, match="lacks or garbles"):
        TableEncoding.from_dict({k: v for k, v in values.items() if k != "width"})


def test_tensors_and_plain_arrays_keep_no_encoding():
    X, y = _vectors()
    assert fit_encoding(X) is None and fit_encoding(torch.from_numpy(X)) is None
    assert fit_encoding(X.reshape(200, 5, 1, 1)) is None  # images
    assert LpSVDD().fit(X, y).encoding_ is None


def test_a_cell_neither_text_nor_number_is_refused_with_its_column():
    frame = pd.DataFrame({"a": [1.0, 2.0], "when": pd.to_datetime(["2026-01-01", "2026-02-01"])})
    with pytest.raises(TypeError, match=r"X: column 'when': a cell holds a Timestamp; .*convert it to a number"):
        LpSVDD().fit(frame)
