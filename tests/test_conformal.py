"""Conformal p-values and the fpr / fdr decisions (issue 29), on data where the truth is known:
Gaussian normals, anomalies shifted away from them."""

import copy
import warnings

import numpy as np
import pytest
import scipy.stats
import torch

from dlmsvdd import DLMSVDD, protocols
from dlmsvdd_ext import LpSVDD
from dlmsvdd_ext.conformal import Calibration

D = 2
SHIFT = 3.0  # anomalies' mean, along the first axis; far enough to be found, near enough to be missed at times


def normals(rng, n):
    return rng.standard_normal((n, D))


def anomalies(rng, n):
    return rng.standard_normal((n, D)) + np.r_[SHIFT, np.zeros(D - 1)]


@pytest.fixture(scope="module")
def model():
    return LpSVDD(random_state=0).fit(normals(np.random.default_rng(0), 200))


@pytest.fixture(scope="module")
def pool(model):
    """Fresh normals (never trained on) and anomalies, scored once; splits draw from them."""
    rng = np.random.default_rng(1)
    X_normal, X_anomaly = normals(rng, 20000), anomalies(rng, 2000)
    return X_normal, X_anomaly


def reference_p_values(f_cal, f):
    """The definition, one sample at a time."""
    return np.array([(1 + sum(1 for c in f_cal if c >= x)) / (len(f_cal) + 1) for x in f])


def test_p_values_match_a_plain_loop(model, pool):
    X_normal, X_anomaly = pool
    X_cal, X = X_normal[:57], np.vstack([X_normal[57:157], X_anomaly[:20]])
    model.calibrate(X_cal)
    f_cal, f = model.dissimilarity(X_cal), model.dissimilarity(X)
    np.testing.assert_allclose(model.p_values(X), reference_p_values(f_cal, f), rtol=0, atol=1e-15)
    # ties count as "at least as large": a calibration sample scored again gets its rank's p-value
    np.testing.assert_allclose(model.p_values(X_cal), reference_p_values(f_cal, f_cal), rtol=0, atol=1e-15)
    assert model.n_calibration_ == 57 and model.calibration_source_ == "calibrate(X_cal)"
    proba = model.predict_proba(X)
    np.testing.assert_allclose(proba[:, 0], model.p_values(X))
    np.testing.assert_allclose(proba.sum(1), 1.0)


@pytest.fixture(scope="module")
def pool_scores(model, pool):
    """The pool's dissimilarities: random splits of them are what calibrate and
    predict would see, drawn thousands of times without scoring again."""
    return tuple(model.dissimilarity(X) for X in pool)


@pytest.mark.parametrize("level, n_cal", [(0.05, 99), (0.1, 58), (0.1, 200)])
def test_false_positive_rate_is_at_most_the_level(pool_scores, level, n_cal):
    """Over many random calibration / test splits, normals are flagged at the rate
    floor(level (n_cal + 1)) / (n_cal + 1) <= level (the exact marginal rate), within
    four standard errors of the mean over splits. An off-by-one in the p-value
    (n_cal or n_cal + 2 in place of n_cal + 1, > in place of >=) moves it by more."""
    f_normal, _ = pool_scores
    rng = np.random.default_rng(2)
    n_test, reps = 200, 2000
    rates = []
    for _ in range(reps):
        rows = rng.choice(len(f_normal), n_cal + n_test, replace=False)
        rates.append(np.mean(Calibration(f_normal[rows[:n_cal]], "split").flags(f_normal[rows[n_cal:]], fpr=level)))
    exact = np.floor(level * (n_cal + 1)) / (n_cal + 1)
    assert exact <= level
    mean, se = np.mean(rates), np.std(rates, ddof=1) / np.sqrt(reps)
    assert abs(mean - exact) <= 4 * se, (mean, exact, se)


def test_contamination_quantile_promises_no_rate(pool):
    """What the test above guards against: a quantile of the training normals' own scores
    (the default rule until issue 46), on a small training set, flags fresh normals at a
    rate that is not its level (so the conformal test's tolerance is seen to tell the two
    apart)."""
    X_normal, _ = pool
    small = LpSVDD(random_state=0, contamination=0.05).fit(X_normal[:30])
    in_sample = np.percentile(small.dissimilarity(X_normal[:30]), 95)
    rate = np.mean(small.dissimilarity(X_normal[30:10030]) > in_sample)
    se = np.sqrt(0.05 * 0.95 / 10000)
    assert abs(rate - 0.05) > 4 * se, rate


def test_benjamini_hochberg_controls_the_false_discovery_rate(pool_scores):
    """The false-discovery proportion averaged over batches is at most fdr (within
    four standard errors), and BH finds anomalies; the same p-values compared with
    the level one by one (no correction) exceed it."""
    f_normal, f_anomaly = pool_scores
    rng = np.random.default_rng(3)
    level, n_cal, n_normal, n_anomaly, reps = 0.1, 499, 180, 20, 1000
    fdp, fdp_uncorrected, power = [], [], []
    is_normal = np.arange(n_normal + n_anomaly) < n_normal
    for _ in range(reps):
        rows = rng.choice(len(f_normal), n_cal + n_normal, replace=False)
        calibration = Calibration(f_normal[rows[:n_cal]], "split")
        f = np.r_[f_normal[rows[n_cal:]], f_anomaly[rng.choice(len(f_anomaly), n_anomaly, replace=False)]]
        bh = calibration.flags(f, fdr=level)
        for flagged, out in ((bh, fdp), (calibration.flags(f, fpr=level), fdp_uncorrected)):
            out.append(np.sum(flagged & is_normal) / max(1, np.sum(flagged)))
        power.append(np.mean(bh[~is_normal]))
    mean, se = np.mean(fdp), np.std(fdp, ddof=1) / np.sqrt(reps)
    assert mean <= level + 4 * se, (mean, se)
    assert np.mean(fdp_uncorrected) > level + 4 * se
    assert np.mean(power) > 0.3  # not vacuous: BH finds anomalies (0.46 measured)


def test_predict_uses_the_calibration(model, pool):
    """The estimator's decisions are its calibration's on its own scores."""
    X_normal, X_anomaly = pool
    model.calibrate(X_normal[:199])
    X = np.vstack([X_normal[200:400], X_anomaly[:20]])
    flags = Calibration(model.dissimilarity(X_normal[:199]), "x").flags(model.dissimilarity(X), fpr=0.05)
    np.testing.assert_array_equal(model.predict(X, fpr=0.05), np.where(flags, -1, 1))
    assert (model.predict(X, fpr=0.05) == -1).sum() > 10


def test_bh_matches_a_plain_step_up(model, pool):
    """scipy's BH against the step-up rule written out: flag the k smallest p-values,
    k the largest with p_(k) <= k fdr / m."""
    X_normal, X_anomaly = pool
    model.calibrate(X_normal[:999])
    X = np.vstack([X_normal[1000:1300], X_anomaly[:40]])
    p, level = model.p_values(X), 0.1
    order = np.argsort(p)
    below = np.nonzero(p[order] <= level * np.arange(1, len(p) + 1) / len(p))[0]
    expected = np.zeros(len(p), dtype=bool)
    if below.size:
        expected[order[:below[-1] + 1]] = True
    assert expected.any()
    np.testing.assert_array_equal(model.predict(X, fdr=level) == -1, expected)


def test_p_values_of_normals_are_uniform(model, pool):
    X_normal, X_anomaly = pool
    model.calibrate(X_normal[:1999])
    p = model.p_values(X_normal[2000:2500])
    assert scipy.stats.kstest(p, "uniform").pvalue > 0.01
    # the test has power: the anomalies' p-values are not uniform
    assert scipy.stats.kstest(model.p_values(X_anomaly[:500]), "uniform").pvalue < 1e-6


def test_refusals(pool):
    X_normal, _ = pool
    model = LpSVDD(random_state=0, calibration=None).fit(X_normal[:100])  # no cross-fitted calibration
    with pytest.raises(ValueError, match="no calibration normals.*calibrate"):
        model.p_values(X_normal[:5])
    with pytest.raises(ValueError, match="no calibration normals"):
        model.predict(X_normal[:5], fpr=0.1)
    with pytest.raises(ValueError, match="no calibration normals"):
        model.predict_proba(X_normal[:5])
    with pytest.raises(ValueError, match=r"no calibration normals and so no threshold: none \(calibration=None\)"):
        model.predict(X_normal[:5])
    with pytest.raises(ValueError, match="no threshold"):
        model.decision_function(X_normal[:5])
    assert model.n_calibration_ == 0 and model.calibration_source_ is None
    # as scikit-learn's available_if: its generic checks call predict_proba where hasattr finds it
    assert not hasattr(model, "predict_proba")
    with pytest.raises(ValueError, match="1 sample.*not labelled normal"):
        model.calibrate(X_normal[100:110], y=np.r_[np.ones(9), -1])
    with pytest.warns(UserWarning, match=r"contamination=0.1 is below 1/\(n_cal \+ 1\) = 0.125.*highest.*needs at "
                                         r"least 9 calibration normals"):
        model.calibrate(X_normal[100:107])  # 7: the default threshold flags above all of them, and says so
    assert model.threshold_rule_ == "calibrate(X_cal): above all 7 (too few for p-value <= 0.1)"
    assert -model.offset_ == model.dissimilarity(X_normal[100:107]).max()
    model.calibrate(X_normal[100:119], y=np.ones(19))
    assert model.threshold_rule_ == "calibrate(X_cal): p-value <= 0.1"  # 2 of 20 below it: reached
    # 19 calibration samples: p >= 1/20, so 0.01 cannot be reached; it needs 99
    with pytest.raises(ValueError, match=r"fpr=0.01 is below 1/\(n_cal \+ 1\) = 0.05.*at least 99 calibration"):
        model.predict(X_normal[:5], fpr=0.01)
    with pytest.raises(ValueError, match="fdr=0.01 is below"):
        model.predict(X_normal[:5], fdr=0.01)
    assert (model.predict(X_normal[:5], fpr=0.05) != 0).all()  # exactly 1/(n_cal + 1): allowed
    with pytest.raises(ValueError, match="one of fpr"):
        model.predict(X_normal[:5], fpr=0.1, fdr=0.1)
    for bad in (0, 1, 1.5, float("nan"), "x"):
        with pytest.raises(ValueError, match=r"fpr must be"):
            model.predict(X_normal[:5], fpr=bad)
    model.fit(X_normal[:50])  # a new boundary: the old calibration scores mean nothing for it
    assert model.n_calibration_ == 0
    model.set_params(calibration="auto").fit(X_normal[:50])  # the default: its own cross-fitted ones
    assert (model.n_calibration_, model.calibration_source_) == (50, "cross-fitted training normals")


def test_calibration_survives_state_dict(model, pool):
    X_normal, X_anomaly = pool
    model.calibrate(X_normal[:99], source="held-out normals")
    state = model.state_dict()
    assert state["calibration"]["scores"].dtype == torch.float64
    loaded = LpSVDD.from_state_dict(state)
    X = np.vstack([X_normal[100:150], X_anomaly[:10]])
    np.testing.assert_array_equal(loaded.p_values(X), model.p_values(X))
    np.testing.assert_array_equal(loaded.predict(X, fpr=0.1), model.predict(X, fpr=0.1))
    assert (loaded.n_calibration_, loaded.calibration_source_) == (99, "held-out normals")
    assert loaded.threshold_rule_ == model.threshold_rule_
    # states saved before calibration was kept load without it
    old = {k: v for k, v in state.items() if k != "calibration"}
    old["scalars"] = {k: v for k, v in state["scalars"].items() if k != "threshold_rule_"}
    older = LpSVDD.from_state_dict(old)
    assert older.n_calibration_ == 0 and older.threshold_rule_ == "training normals' 0.9 quantile"


def test_calibration_refuses_non_finite_scores():
    with pytest.raises(ValueError, match="NaN or infinite"):
        Calibration([0.1, np.nan], "x")
    with pytest.raises(ValueError, match="empty"):
        Calibration([], "x")


# ---- DLMSVDD: a small fixed model on digits (one-class, no training epochs: the decisions' guarantees
# hold for any fixed model, so the network need not be good, only the calibration held out)

DIGITS_PARAMS = dict(backbone="small_cnn", epochs=0, batch_size=64, verbose=0, seed=0, nu=1.0, val_fraction=0.2)


@pytest.fixture(scope="module")
def digits():
    """Grey images in [0, 1]: normals are the digits 0-4, anomalies 5-9, shuffled once."""
    from sklearn.datasets import load_digits

    data = load_digits()
    order = np.random.default_rng(0).permutation(len(data.target))
    images, labels = (data.images[order] / 16.0).astype(np.float32), data.target[order]
    return images[labels < 5], images[labels >= 5]


@pytest.fixture(scope="module")
def deep(digits):
    normal, _ = digits
    return DLMSVDD(**DIGITS_PARAMS).fit(normal[:300])


def test_dlmsvdd_is_calibrated_on_its_validation_normals(deep, digits):
    normal, anomalous = digits
    # the arrays API's split, drawn again: the validation rows of the 300 given to fit
    _, val = protocols.train_val_split(protocols.Split(np.arange(300), np.ones(300, int)), 0.2, 0)
    assert (deep.n_calibration_, deep.calibration_source_) == (len(val), "validation normals") and len(val) == 60
    X = np.concatenate([normal[300:400], anomalous[:30]])
    np.testing.assert_allclose(deep.p_values(X), reference_p_values(deep.dissimilarity(normal[val.indices]),
                                                                    deep.dissimilarity(X)), rtol=0, atol=1e-15)
    np.testing.assert_array_equal(deep.predict(X, fpr=0.1), np.where(deep.p_values(X) <= 0.1, -1, 1))
    proba = deep.predict_proba(X)
    np.testing.assert_allclose(proba, np.column_stack([deep.p_values(X), 1 - deep.p_values(X)]))
    assert deep.threshold_rule_ == "validation normals: p-value <= 0.1"
    # the default threshold is the rule fpr=contamination applies, on the same calibration normals
    np.testing.assert_array_equal(deep.predict(X), deep.predict(X, fpr=0.1))
    np.testing.assert_array_equal(deep.predict(X), np.where(deep.dissimilarity(X) >= deep.threshold_, -1, 1))
    with pytest.raises(ValueError, match=r"fpr=0.01 is below 1/\(n_cal \+ 1\).*60 calibration samples.*at least 99"):
        deep.predict(X, fpr=0.01)


def test_dlmsvdd_false_positive_rate_on_digits(deep, digits):
    """The fixed model's scores of the normals it never saw; random calibration / test
    splits of them flag test normals at floor(level (n + 1)) / (n + 1) <= level."""
    normal, _ = digits
    f = deep.dissimilarity(normal[300:])
    rng = np.random.default_rng(4)
    for level, n_cal in ((0.05, 99), (0.1, 150)):
        rates = []
        for _ in range(2000):
            rows = rng.permutation(len(f))
            rates.append(np.mean(Calibration(f[rows[:n_cal]], "split").flags(f[rows[n_cal:n_cal + 300]], fpr=level)))
        exact = np.floor(level * (n_cal + 1)) / (n_cal + 1)
        mean, se = np.mean(rates), np.std(rates, ddof=1) / np.sqrt(len(rates))
        assert abs(mean - exact) <= 4 * se, (level, mean, exact, se)


def test_dlmsvdd_calibrate_save_load(deep, digits, tmp_path):
    normal, anomalous = digits
    model = copy.deepcopy(deep)
    X = np.concatenate([normal[500:600], anomalous[:30]])
    with pytest.raises(ValueError, match="1 sample.*not labelled normal"):
        model.calibrate(normal[300:400], y=np.r_[np.ones(99), -1])
    model.calibrate((normal[300:500] * 255).round().astype(np.uint8))  # raw inputs, through the preprocessing
    assert (model.n_calibration_, model.calibration_source_) == (200, "calibrate(X_cal)")
    f_cal = model.dissimilarity((normal[300:500] * 255).round().astype(np.uint8))
    np.testing.assert_allclose(model.p_values(X), reference_p_values(f_cal, model.dissimilarity(X)), atol=1e-15)
    model.save(tmp_path / "model.pt")
    loaded = DLMSVDD.load(tmp_path / "model.pt")
    np.testing.assert_array_equal(loaded.p_values(X), model.p_values(X))
    np.testing.assert_array_equal(loaded.predict(X, fdr=0.1), model.predict(X, fdr=0.1))
    assert (loaded.n_calibration_, loaded.calibration_source_) == (200, "calibrate(X_cal)")
    # model files written before calibration was kept load without it
    state = torch.load(tmp_path / "model.pt", weights_only=True)
    del state["boundary"]["calibration"]
    torch.save(state, tmp_path / "old.pt")
    old = DLMSVDD.load(tmp_path / "old.pt")
    assert old.n_calibration_ == 0
    with pytest.raises(ValueError, match="no calibration normals.*calibrate"):
        old.p_values(X)


def test_dlmsvdd_without_validation_normals_refuses_and_points_to_calibrate(digits):
    normal, _ = digits
    targets = np.ones(100, int)
    train = protocols.SplitRows(torch.from_numpy(normal[:100, None]), protocols.Split(np.arange(100), targets))
    model = DLMSVDD(**DIGITS_PARAMS).fit(train)  # fit(train): no validation set
    assert model.n_calibration_ == 0 and not hasattr(model, "predict_proba")
    with pytest.raises(ValueError, match="no calibration normals.*call calibrate"):
        model.predict(normal[100:110], fdr=0.1)
    # a dataset with anomalies is no calibration set
    mixed = protocols.SplitRows(torch.from_numpy(normal[100:130, None]), protocols.Split(np.arange(30), np.r_[np.ones(28, int),
                                                                                                    -1, -1]))
    with pytest.raises(ValueError, match="2 sample.*not labelled normal"):
        model.calibrate(mixed)
    model.calibrate(normal[100:200])
    assert model.predict(normal[200:210], fpr=0.05).shape == (10,)


def test_dlmsvdd_dataset_api_calibrates_on_the_validation_sets_normals(digits):
    """fit(train, val) with anomalies in both: the validation normals calibrate, its anomalies do not."""
    normal, anomalous = digits
    images = torch.from_numpy(np.concatenate([normal[:130], anomalous[:20]])[:, None])
    targets = np.r_[np.ones(130, int), -np.ones(20, int)]
    rows_train, rows_val = np.r_[0:100, 130:140], np.r_[100:130, 140:150]
    train = protocols.SplitRows(images, protocols.Split(rows_train, targets[rows_train]))
    val = protocols.SplitRows(images, protocols.Split(rows_val, targets[rows_val]))
    model = DLMSVDD(**{**DIGITS_PARAMS, "nu": "auto"}).fit(train, val)
    assert (model.n_calibration_, model.calibration_source_) == (30, "validation normals")
    assert model.threshold_rule_ == "validation balanced accuracy"  # the default rule stays
    X = np.concatenate([normal[200:260], anomalous[100:110]])[:, None]
    f_cal = model.dissimilarity(images[100:130])
    np.testing.assert_allclose(model.p_values(X), reference_p_values(f_cal, model.dissimilarity(X)), atol=1e-15)


def test_cli_score_p_values_and_levels(deep, digits, tmp_path, capsys):
    from dlmsvdd.cli import main

    normal, anomalous = digits
    X = np.concatenate([normal[300:400], anomalous[:30]])
    np.save(tmp_path / "x.npy", X)
    deep.save(tmp_path / "model.pt")

    def score(*flags):
        assert main(["score", str(tmp_path / "model.pt"), "--npy", str(tmp_path / "x.npy"), *flags]) == 0
        rows = capsys.readouterr().out.splitlines()
        assert rows[0] == "index,dissimilarity,p_value,prediction"  # raw rows: no target column
        cells = [row.split(",") for row in rows[1:]]
        return np.array([c[2] for c in cells], dtype=float), np.array([c[3] for c in cells], dtype=int)

    p, default = score()
    np.testing.assert_allclose(p, deep.p_values(X), rtol=1e-8)
    np.testing.assert_array_equal(default, deep.predict(X))
    np.testing.assert_array_equal(score("--fpr", "0.1")[1], deep.predict(X, fpr=0.1))
    np.testing.assert_array_equal(score("--fdr", "0.2")[1], deep.predict(X, fdr=0.2))
    assert main(["score", str(tmp_path / "model.pt"), "--npy", str(tmp_path / "x.npy"), "--fpr", "0.001"]) == 2
    err = capsys.readouterr().err
    assert "error: fpr=0.001 is below 1/(n_cal + 1)" in err and "at least 999 calibration normals" in err
    with pytest.raises(SystemExit):  # argparse: one rule at a time
        main(["score", str(tmp_path / "model.pt"), "--fpr", "0.1", "--fdr", "0.1"])
    # a model without calibration normals: the column is blank and the levels are refused, saying why
    state = torch.load(tmp_path / "model.pt", weights_only=True)
    del state["boundary"]["calibration"]
    torch.save(state, tmp_path / "old.pt")
    assert main(["score", str(tmp_path / "old.pt"), "--npy", str(tmp_path / "x.npy")]) == 0
    assert all(row.split(",")[2] == "" for row in capsys.readouterr().out.splitlines()[1:])
    assert main(["score", str(tmp_path / "old.pt"), "--npy", str(tmp_path / "x.npy"), "--fdr", "0.1"]) == 2
    assert "error: DLMSVDD has no calibration normals" in capsys.readouterr().err


@pytest.mark.parametrize("fmt", ["onnx", "torchscript"])
def test_export_outputs_p_values(fmt, deep, digits, tmp_path):
    normal, anomalous = digits
    X = np.concatenate([normal[300:400], anomalous[:30]])[:, None]  # (N, 1, H, W)
    path = deep.export(tmp_path / "m", format=fmt)
    if fmt == "onnx":
        ort = pytest.importorskip("onnxruntime")
        f, decision, p = ort.InferenceSession(str(path)).run(None, {"images": X})
    else:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", FutureWarning)  # torch.jit is marked deprecated in torch
            scorer = torch.jit.load(str(path))
        f, decision, p = (t.numpy() for t in scorer(torch.from_numpy(X)))
    assert p.dtype == np.float64
    np.testing.assert_allclose(p, reference_p_values(deep.calibration_.scores, f), atol=1e-15)
    # the exported float32 f and DLMSVDD's agree to rounding: p-values then agree but for ties at that rounding
    assert np.mean(p == deep.p_values(X)) > 0.95


def test_export_of_an_uncalibrated_model_gives_nan_p_values(deep, digits, tmp_path):
    from dlmsvdd.training.export import build_scorer

    normal, _ = digits
    model = copy.deepcopy(deep)
    model.svdd_.calibration_ = None
    f, decision, p = build_scorer(model)(torch.from_numpy(normal[300:310, None]))
    assert torch.isnan(p).all() and torch.isfinite(f).all()
