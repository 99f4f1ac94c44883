"""explain (issue 36): per-feature attributions of f for LpSVDD and DLMSVDD, and ``score --explain K``."""

import csv
import io

import numpy as np
import pandas as pd
import pytest
import torch
from sklearn.exceptions import NotFittedError

from dlmsvdd_ext import LpSVDD, explain

from dlmsvdd import DLMSVDD
from dlmsvdd.cli import main


def _normal(n=300, d=4, seed=0):
    return np.random.default_rng(seed).normal(size=(n, d))


@pytest.fixture(scope="module")
def lpsvdd():
    return LpSVDD(random_state=0).fit(_normal())


@pytest.fixture(scope="module")
def dlm_vectors():
    return DLMSVDD(seed=0, verbose=0, epochs=1).fit(_normal().astype(np.float32))


# ---- the method against independent references

def _plain_ranges(X, reference, neighbours, pool):
    """[lo, hi] per row and feature by a plain loop: for each row, its ``pool`` nearest reference rows; for
    each feature, their distances to the row without it, and feature j's range over the ``neighbours``
    nearest."""
    lo, hi = np.zeros_like(X), np.zeros_like(X)
    for i, x in enumerate(X):
        pooled = reference[np.argsort(((reference - x) ** 2).sum(1), kind="stable")[:pool]]
        for j in range(X.shape[1]):
            others = np.delete(np.arange(X.shape[1]), j)
            near = pooled[np.argsort(((pooled[:, others] - x[others]) ** 2).sum(1), kind="stable")[:neighbours], j]
            lo[i, j], hi[i, j] = near.min(), near.max()
    return lo, hi


def _plain_repairs(f, X, reference, neighbours, pool):
    """The one-feature repairs by a plain loop over ``_plain_ranges``: clip feature j alone, re-score."""
    lo, hi = _plain_ranges(X, reference, neighbours, pool)
    A = np.zeros_like(X)
    for i, x in enumerate(X):
        for j in range(X.shape[1]):
            repaired = x.copy()
            repaired[j] = np.clip(x[j], lo[i, j], hi[i, j])
            A[i, j] = f(x[None])[0] - f(repaired[None])[0]
    return A


@pytest.mark.parametrize("pool", [300, explain.feature_ranges.POOL, 40])
def test_lpsvdd_vector_attributions_match_a_plain_loop_of_repairs(lpsvdd, pool):
    """Against the plain loop, scored by ``dissimilarity`` (the fused path): the whole reference (300 rows)
    searched and the pooled searches; ``explain`` is the default pool's."""
    rng = np.random.default_rng(2)
    X = rng.normal(size=(6, 4)) * 1.5
    X[0, 1] += 6.0
    reference = lpsvdd.reference_.numpy()
    A = explain.feature_ranges.attribute(lpsvdd._dissimilarity, torch.as_tensor(X), lpsvdd.reference_, pool=pool)
    np.testing.assert_allclose(A.numpy(), _plain_repairs(lpsvdd.dissimilarity, X, reference, 16, pool),
                               rtol=1e-9, atol=1e-12)
    if pool == explain.feature_ranges.POOL:
        np.testing.assert_allclose(lpsvdd.explain(X, method="repair"), A.numpy(), rtol=1e-12, atol=1e-15)


def _plain_outside(X, reference, neighbours, pool):
    """How far each feature lies outside ``_plain_ranges``, over numpy's standard deviation of the
    reference's columns (a constant column: the smallest positive one)."""
    std = reference.std(0)
    lo, hi = _plain_ranges(X, reference, neighbours, pool)
    return np.maximum(np.maximum(lo - X, X - hi), 0.0) / np.where(std > 0, std, std[std > 0].min())


@pytest.mark.parametrize("pool", [300, explain.feature_ranges.POOL, 40])
def test_the_default_ranges_match_a_plain_loop(lpsvdd, pool):
    """``explain``'s default for vectors against the plain loop, a constant reference column included."""
    rng = np.random.default_rng(2)
    X = rng.normal(size=(6, 4)) * 1.5
    X[0, 1] += 6.0
    reference = lpsvdd.reference_.numpy().copy()
    reference[:, 3] = 0.5  # constant: its scale is the smallest positive standard deviation
    O = explain.feature_ranges.outside(torch.as_tensor(X), torch.as_tensor(reference), pool=pool)
    np.testing.assert_allclose(O.numpy(), _plain_outside(X, reference, 16, pool), rtol=1e-9, atol=1e-12)
    if pool == explain.feature_ranges.POOL:
        np.testing.assert_allclose(lpsvdd.explain(X, reference=reference), O.numpy(), rtol=1e-12, atol=1e-15)
        np.testing.assert_allclose(lpsvdd.explain(X), lpsvdd.explain(X, method="range"), rtol=0, atol=0)


@pytest.mark.parametrize("shape, k", [((50, 64), 16), ((7, 5, 64), 16), ((3, 2000), 64), ((4, 16), 16)])
def test_both_selections_pick_the_k_smallest(shape, k):
    """numpy's introselect (the CPU path) and torch.topk (the GPU path) pick the same set of positions,
    the k smallest by a full sort."""
    values = torch.as_tensor(np.random.default_rng(3).normal(size=shape))
    expected = values.argsort(dim=-1)[..., :k].sort(dim=-1).values
    for picked in (explain.feature_ranges.smallest(values, k), explain.feature_ranges.smallest_by_topk(values, k)):
        torch.testing.assert_close(picked.sort(dim=-1).values, expected, rtol=0, atol=0)


def test_a_moved_feature_of_small_spread_is_named():
    """What made the repairs of f miss on the development sets: 6 standard deviations of a column with a
    small spread (0.01 here, the others 1) are a small step in the kernel's geometry, while a wide column
    just outside its range is a larger one (the repairs named feature 0 in 27 of these 40 rows). In its
    own standard deviations the moved feature stands out."""
    rng = np.random.default_rng(0)
    scale = np.array([0.01, 1.0, 1.0, 1.0])
    model = LpSVDD(random_state=0).fit(rng.normal(size=(300, 4)) * scale)
    rows = rng.normal(size=(40, 4)) * scale
    rows[:, 0] += 6 * 0.01
    assert np.mean(model.explain(rows).argmax(1) == 0) >= 0.9


def test_a_constructed_range_is_known_exactly():
    """Normal rows (i, i), i = 0 .. 99 (standard deviation sqrt(9999 / 12) per column); the row
    (50.5, 62.5). Without feature 1 its 16 nearest rows are i = 43 .. 58, so x_1 = 62.5 is 4.5 above
    their range; without feature 0 they are i = 55 .. 70, x_0 = 50.5 is 4.5 below. The row (20, 20)
    lies on the data: 0, 0."""
    reference = torch.arange(100, dtype=torch.float64)[:, None].repeat(1, 2)
    x = torch.tensor([[50.5, 62.5], [20.0, 20.0]], dtype=torch.float64)
    O = explain.feature_ranges.outside(x, reference)
    s = (9999 / 12) ** 0.5
    torch.testing.assert_close(O, torch.tensor([[4.5 / s, 4.5 / s], [0.0, 0.0]], dtype=torch.float64),
                               rtol=1e-12, atol=1e-12)


def test_a_constructed_repair_is_known_exactly():
    """Normal rows (i, i, i), i = 0 .. 19, and a separable quadratic f = sum (x_j - 9.5)^2; the row
    (7, 7, 30) has feature 2 moved. Without feature 2, its 3 nearest rows are i = 6, 7, 8: x_2 = 30 is
    clipped to 8, A_2 = 20.5^2 - 1.5^2. Without feature 0 (or 1) they are i = 17, 18, 19 (nearest to
    (7, 30) on the diagonal): x_0 = 7 is clipped to 17, which raises f: A_0 = A_1 = 2.5^2 - 7.5^2."""
    reference = torch.arange(20, dtype=torch.float64)[:, None].repeat(1, 3)
    x = torch.tensor([[7.0, 7.0, 30.0], [5.0, 5.0, 5.0]], dtype=torch.float64)
    A = explain.feature_ranges.attribute(lambda r: ((r - 9.5) ** 2).sum(1), x, reference, neighbours=3)
    expected = torch.tensor([[2.5 ** 2 - 7.5 ** 2] * 2 + [20.5 ** 2 - 1.5 ** 2], [0.0, 0.0, 0.0]], dtype=torch.float64)
    torch.testing.assert_close(A, expected, rtol=0, atol=1e-12)  # a normal row: nothing to repair


def test_the_midpoint_rule_is_exact_for_a_quadratic_score():
    """Images' method. Along a line a quadratic's gradient is linear in t: the midpoint rule integrates it
    exactly, so the attributions are the per-feature differences w_j ((x_j - c_j)^2 - (b_j - c_j)^2), b the
    nearest reference row."""
    rng = np.random.default_rng(1)
    w, c = torch.as_tensor(rng.random(5)), torch.as_tensor(rng.normal(size=5))
    X, reference = torch.as_tensor(rng.normal(size=(7, 5))), torch.as_tensor(rng.normal(size=(20, 5)))
    A = explain.integrated(lambda x: ((x - c) ** 2 * w).sum(1), X, reference, steps=1)
    distances = ((X[:, None, :] - reference[None]) ** 2).sum(2)  # a plain all-pairs nearest row
    b = reference[distances.argmin(1)]
    torch.testing.assert_close(A, w * ((X - c) ** 2 - (b - c) ** 2), rtol=1e-12, atol=1e-12)


def test_integrated_gradients_match_finite_differences_of_lpsvdd_scores(lpsvdd):
    """The path integral of f's gradient, with the gradient by central differences of ``dissimilarity``
    (the fused scoring path, not autograd) at the same midpoints: a plain loop."""
    rng = np.random.default_rng(2)
    X, b = rng.normal(size=(3, 4)) * 2, rng.normal(size=(1, 4))
    steps, h = 3, 1e-5
    A = explain.integrated(lpsvdd._dissimilarity, torch.as_tensor(X), torch.as_tensor(b), steps=steps).numpy()
    expected = np.zeros_like(X)
    for i in range(len(X)):
        for k in range(steps):
            point = b[0] + (k + 0.5) / steps * (X[i] - b[0])
            for j in range(X.shape[1]):
                up, down = point.copy(), point.copy()
                up[j] += h
                down[j] -= h
                expected[i, j] += (lpsvdd.dissimilarity(up[None])[0] - lpsvdd.dissimilarity(down[None])[0]) / (2 * h)
        expected[i] *= (X[i] - b[0]) / steps
    np.testing.assert_allclose(A, expected, rtol=1e-5, atol=1e-9)


def test_integrated_gradients_sum_to_the_change_of_f_and_name_the_only_feature_that_moved(lpsvdd):
    """A row that differs from its baseline in feature 2 only: every other attribution is 0 exactly, and
    feature 2's is f(x) - f(b) (the path integral, to the rule's error at 64 steps)."""
    b = lpsvdd.reference_[:1]
    x = b.clone()
    x[0, 2] += 3.0
    A = explain.integrated(lpsvdd._dissimilarity, x, b, steps=64).numpy()
    assert np.all(A[0, [0, 1, 3]] == 0.0)
    f = lpsvdd.dissimilarity
    np.testing.assert_allclose(A[0, 2], f(x.numpy())[0] - f(b.numpy())[0], rtol=1e-3)


@pytest.mark.parametrize("method", ["auto", "repair", "integrated"])
def test_a_shifted_feature_gets_the_largest_attribution(lpsvdd, dlm_vectors, method):
    rows = _normal(40, seed=3)
    j = np.arange(40) % 4
    rows[np.arange(40), j] += 6.0
    for model in (lpsvdd, dlm_vectors):
        A = model.explain(rows.astype(np.float32) if model is dlm_vectors else rows, method=method)
        assert np.mean(A.argmax(1) == j) >= 0.9, type(model).__name__


# ---- shapes, kinds of arrays, tables

def test_shapes_and_kinds(lpsvdd, dlm_vectors):
    X = _normal(5, seed=4)
    assert isinstance(lpsvdd.explain(X), np.ndarray) and lpsvdd.explain(X).shape == (5, 4)
    T = lpsvdd.explain(torch.as_tensor(X))
    assert isinstance(T, torch.Tensor) and T.shape == (5, 4)
    np.testing.assert_allclose(T.numpy(), lpsvdd.explain(X))
    assert dlm_vectors.explain(X.astype(np.float32)).shape == (5, 4)


@pytest.mark.parametrize("grey", [True, False])
def test_images_come_back_in_the_shape_given(grey):
    rng = np.random.default_rng(5)
    images = rng.random((40, 8, 8) if grey else (40, 1, 8, 8)).astype(np.float32)
    model = DLMSVDD(seed=0, verbose=0, epochs=0, backbone="small_cnn", weights=None).fit(images)
    for method in explain.METHODS:  # the vectors' methods over the flattened pixels
        assert model.explain(images[:3], method=method).shape == images[:3].shape


def test_a_tables_encoded_columns_are_summed_into_its_columns():
    rng = np.random.default_rng(6)
    table = pd.DataFrame({"a": rng.normal(size=200), "color": rng.choice(["red", "blue", "green"], 200),
                          "b": rng.normal(size=200)})
    model = LpSVDD(random_state=0).fit(table)
    new = table.iloc[:6]
    A = model.explain(new)
    assert A.shape == (6, 3)
    encoded = model.explain(torch.as_tensor(model.encoding_.transform(new)))  # a tensor: the encoded columns
    groups = explain.column_groups(model.encoding_).numpy()
    np.testing.assert_allclose(A, np.stack([encoded.numpy()[:, groups == j].sum(1) for j in range(3)], 1),
                               rtol=1e-12, atol=1e-15)


# ---- errors

def test_bad_input_is_refused_with_what_to_do(lpsvdd):
    with pytest.raises(NotFittedError):
        LpSVDD().explain(_normal(2))
    with pytest.raises(NotFittedError):
        DLMSVDD().explain(_normal(2))
    with pytest.raises(ValueError, match="4 features as input"):
        lpsvdd.explain(_normal(2, d=3))
    with pytest.raises(ValueError, match="steps must be a whole number"):
        lpsvdd.explain(_normal(2), steps=0)
    with pytest.raises(ValueError, match="method must be one of 'auto', 'range', 'repair', 'integrated'"):
        lpsvdd.explain(_normal(2), method="shap")
    with pytest.raises(ValueError, match=r"from 1 to the 4 column"):
        explain.top_columns(np.zeros((2, 4)), 5)
    with pytest.raises(ValueError, match=r"from 1 to the 4 column"):
        explain.check_k(0, 4)
    state = lpsvdd.state_dict()
    state.pop("reference")  # a state saved before explain existed
    with pytest.raises(ValueError, match="pass normal rows as reference="):
        LpSVDD.from_state_dict(state).explain(_normal(2))


# ---- save and load

def test_a_saved_and_reloaded_lpsvdd_explains_the_same(lpsvdd, tmp_path):
    torch.save(lpsvdd.state_dict(), tmp_path / "m.pt")
    loaded = LpSVDD.from_state_dict(torch.load(tmp_path / "m.pt", weights_only=True))
    X = _normal(6, seed=7)
    np.testing.assert_array_equal(loaded.explain(X), lpsvdd.explain(X))


def test_a_saved_and_reloaded_dlmsvdd_explains_the_same(dlm_vectors, tmp_path):
    dlm_vectors.save(tmp_path / "model.pt")
    loaded = DLMSVDD.load(tmp_path / "model.pt")
    X = _normal(6, seed=8).astype(np.float32)
    np.testing.assert_array_equal(loaded.explain(X), dlm_vectors.explain(X))


# ---- the command line

def test_score_explain_names_the_k_most_responsible_columns(tmp_path, capsys):
    rng = np.random.default_rng(9)
    label = (np.arange(300) < 20).astype(int)  # a few labelled anomalies, shifted in a
    frame = pd.DataFrame({"label": label, "a": rng.normal(size=300) + 4 * label, "b": rng.normal(size=300),
                          "c": rng.normal(size=300)})
    frame.to_csv(tmp_path / "train.csv", index=False)
    run = tmp_path / "run"
    assert main(["train", "--data", "table", "--path", str(tmp_path / "train.csv"), "--epochs", "1", "--verbose",
                 "0", "--output", str(run)]) == 0
    new = pd.DataFrame({"a": [0.1, 0.0], "b": [8.0, 0.2], "c": [0.0, -9.0]})
    new.to_csv(tmp_path / "new.csv", index=False)
    capsys.readouterr()
    assert main(["score", str(run), "--csv", str(tmp_path / "new.csv"), "--explain", "2"]) == 0
    rows = list(csv.DictReader(io.StringIO(capsys.readouterr().out)))
    model = DLMSVDD.load(run / "model.pt")
    A = model.explain(new)
    assert [r["top1"] for r in rows] == ["b", "c"]  # the moved columns, by name
    for r, a in zip(rows, A):
        order = np.argsort(-a, kind="stable")  # ties (columns inside their range: 0) in column order
        assert [r["top1"], r["top2"]] == [new.columns[order[0]], new.columns[order[1]]]
        np.testing.assert_allclose([float(r["top1_attribution"]), float(r["top2_attribution"])], a[order[:2]],
                                   rtol=1e-5)
    assert main(["score", str(run), "--csv", str(tmp_path / "new.csv"), "--explain", "1", "--explain-method",
                 "repair"]) == 0
    rows = list(csv.DictReader(io.StringIO(capsys.readouterr().out)))
    repairs = model.explain(new, method="repair")
    np.testing.assert_allclose([float(r["top1_attribution"]) for r in rows], repairs.max(1), rtol=1e-5)
    assert main(["score", str(run), "--csv", str(tmp_path / "new.csv"), "--explain", "4"]) == 2
    assert "from 1 to the 3 column(s)" in capsys.readouterr().err
    assert main(["score", str(run), "--split", "test", "--explain", "1"]) == 2
    assert "--explain explains the rows given with --npy or --csv" in capsys.readouterr().err


def test_score_explain_writes_image_maps(tmp_path, capsys):
    run = tmp_path / "run"
    assert main(["train", "--data", "digits", "--backbone", "small_cnn", "--weights", "none", "--epochs", "0",
                 "--verbose", "0", "--output", str(run)]) == 0
    raw = np.random.default_rng(10).random((3, 1, 8, 8)).astype(np.float32)
    np.save(tmp_path / "x.npy", raw)
    capsys.readouterr()
    assert main(["score", str(run), "--npy", str(tmp_path / "x.npy"), "--explain", "1"]) == 2
    assert "give --output FILE" in capsys.readouterr().err
    out = tmp_path / "s.csv"
    assert main(["score", str(run), "--npy", str(tmp_path / "x.npy"), "--explain", "3", "--output", str(out)]) == 0
    rows = list(csv.DictReader(out.open()))
    maps = np.load(tmp_path / "s.csv.explain.npy")
    model = DLMSVDD.load(run / "model.pt")
    np.testing.assert_allclose(maps, model.explain(raw), rtol=1e-5, atol=1e-9)
    for r, a in zip(rows, maps):
        c, y, x = np.unravel_index(np.argmax(a), a.shape)
        assert r["top1"] == f"[{c},{y},{x}]"
        assert (tmp_path / "s.csv.explain" / f"{rows.index(r)}.png").is_file() and r["map"].endswith(".png")
