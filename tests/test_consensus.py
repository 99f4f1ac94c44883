"""The consensus detector (dlmsvdd_ext.consensus) against scikit-learn's neighbour searches, LOF and
IsolationForest, LpSVDD itself, and a numpy robust z-score."""

import numpy as np
import pytest
import torch
from sklearn.ensemble import IsolationForest
from sklearn.neighbors import LocalOutlierFactor, NearestNeighbors
from sklearn.preprocessing import MinMaxScaler

from dlmsvdd_ext import LpSVDD
from dlmsvdd_ext import consensus
from dlmsvdd_ext.consensus import Consensus

ISSUE_38 = dict(members=consensus.ISSUE_38_MEMBERS, k_distance=5)  # LpSVDD + the 5th neighbour + LOF
EVERY_MEMBER = dict(members=consensus.KNOWN_MEMBERS, k_distance=3)
# the member sets the tests run on: the two that "auto" picks, issue 38's, and all four together
MEMBER_SETS = [dict(members=consensus.TABLE_MEMBERS), dict(members=consensus.EMBEDDING_MEMBERS), ISSUE_38,
               EVERY_MEMBER]
SET_IDS = ["table", "embedding", "issue-38", "every-member"]


def rows(seed=0, n=300, d=4):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d))
    X[:10] += 4.0  # a few outliers in the fit rows, as without labels
    return X, rng.normal(size=(80, d)) * 1.5


def numpy_robust_z(fit, scores):
    centre = np.median(fit)
    return (scores - centre) / (1.4826 * np.median(np.abs(fit - centre)))


def reference_members(X, Z, seed, k=1, k_lof=20, scale=True, forest_rows=None):
    """Each member by scikit-learn / LpSVDD on the rows min-max scaled by X (scikit-learn's
    MinMaxScaler): (scores of the fit rows, scores of Z). ``forest_rows``: the rows the forest
    grows on (default X: every fit row, where the others may use a draw of them)."""
    forest_rows = X if forest_rows is None else forest_rows
    if scale:
        scaler = MinMaxScaler().fit(forest_rows)
        X, Z, forest_rows = scaler.transform(X), scaler.transform(Z), scaler.transform(forest_rows)
    nn = NearestNeighbors(n_neighbors=k + 1).fit(X)
    knn = nn.kneighbors(None, k)[0][:, -1], nn.kneighbors(Z, k)[0][:, -1]  # fit rows: themselves left out
    lof = LocalOutlierFactor(n_neighbors=k_lof, novelty=True).fit(X)
    lp = LpSVDD(random_state=seed).fit(X)
    forest = IsolationForest(random_state=seed).fit(forest_rows)
    return {"LpSVDD": (lp.dissimilarity(X), lp.dissimilarity(Z)), "kNN": knn,
            "LOF": (-lof.negative_outlier_factor_, -lof.score_samples(Z)),
            "IsolationForest": (-forest.score_samples(forest_rows), -forest.score_samples(Z))}


@pytest.mark.parametrize("params", MEMBER_SETS, ids=SET_IDS)
@pytest.mark.parametrize("seed, scale", [(0, True), (1, True), (2, False)])
def test_members_and_their_sum_match_scikit_learn_and_lpsvdd(seed, scale, params):
    X, Z = rows(seed)
    X[:, 1] *= 50.0  # a column in other units
    model = Consensus(random_state=seed, scale=scale, **params).fit(X)
    assert model.members_ == tuple(params["members"])
    ref = reference_members(X, Z, seed, k=params.get("k_distance", 1), scale=scale)
    got = model.member_scores(Z)
    assert tuple(got) == model.members_
    for m in model.members_:
        np.testing.assert_allclose(got[m], ref[m][1], rtol=1e-9, atol=1e-12, err_msg=m)
    if "LpSVDD" in model.members_:
        np.testing.assert_allclose(model.member_scores(X)["LpSVDD"], ref["LpSVDD"][0], rtol=1e-9, atol=1e-12)
    expected = sum(numpy_robust_z(*ref[m]) for m in model.members_)
    np.testing.assert_allclose(model.dissimilarity(Z), expected, rtol=1e-9, atol=1e-9)
    np.testing.assert_allclose(model.score_samples(Z), -expected, rtol=1e-9, atol=1e-9)


@pytest.mark.parametrize("width, members", [(4, consensus.TABLE_MEMBERS), (255, consensus.TABLE_MEMBERS),
                                            (256, consensus.EMBEDDING_MEMBERS), (512, consensus.EMBEDDING_MEMBERS)])
def test_auto_takes_the_table_members_below_the_embedding_width_and_the_nearest_row_from_it(width, members):
    X = np.random.default_rng(0).normal(size=(60, width))
    model = Consensus(random_state=0).fit(X)
    assert model.members_ == members and consensus.members_for(width) == members
    assert consensus.members_for(width, table=True) == consensus.TABLE_MEMBERS  # an encoded table stays a table
    if members == consensus.EMBEDDING_MEMBERS:  # the distance to the nearest fit row
        scaled = MinMaxScaler().fit(X)
        Z = np.random.default_rng(1).normal(size=(5, width))
        np.testing.assert_allclose(model.member_scores(Z)["kNN"],
                                   NearestNeighbors(n_neighbors=1).fit(scaled.transform(X))
                                   .kneighbors(scaled.transform(Z))[0][:, 0], rtol=1e-9)


def test_fit_rows_leave_themselves_out_of_their_neighbours():
    X, _ = rows(2)
    model = Consensus(random_state=0, **ISSUE_38).fit(X)
    ref = reference_members(X, X[:5], 0, k=5)
    for m in ("kNN", "LOF"):  # the scales come from the fit rows' scores without themselves
        centre = np.median(ref[m][0])
        assert model.centres_[m] == pytest.approx(centre, rel=1e-9)
        assert model.spreads_[m] == pytest.approx(1.4826 * np.median(np.abs(ref[m][0] - centre)), rel=1e-9)


def test_beyond_max_reference_the_neighbours_are_a_seeded_draw(monkeypatch):
    monkeypatch.setattr(consensus, "MAX_REFERENCE", 120)
    X, Z = rows(3)
    model = Consensus(random_state=4, scale=False, **EVERY_MEMBER).fit(X)
    draw = np.sort(np.random.default_rng(4).permutation(len(X))[:120])
    np.testing.assert_array_equal(model.reference_.numpy(), X[draw])
    # every member, LpSVDD too, on the drawn rows; the forest's trees draw from every fit row
    ref = reference_members(X[draw], Z, 4, k=3, scale=False, forest_rows=X)
    for m in model.members_:
        np.testing.assert_allclose(model.member_scores(Z)[m], ref[m][1], rtol=1e-9, err_msg=m)
    # a fit row outside the draw keeps all its k neighbours among the drawn rows
    outside = np.setdiff1d(np.arange(len(X)), draw)[:5]
    nn = NearestNeighbors(n_neighbors=3).fit(X[draw])
    np.testing.assert_allclose(model.member_scores(X[outside])["kNN"], nn.kneighbors(X[outside])[0][:, -1])
    again = Consensus(random_state=4, scale=False, **EVERY_MEMBER).fit(X)
    assert again.dissimilarity(Z) == pytest.approx(model.dissimilarity(Z))


@pytest.mark.parametrize("params", MEMBER_SETS, ids=SET_IDS)
def test_scores_do_not_depend_on_the_columns_units(params):
    X, Z = rows(9)
    units = np.array([1.0, 1e3, 1e-2, 7.0])
    plain = Consensus(random_state=0, **params).fit(X).dissimilarity(Z)
    moved = Consensus(random_state=0, **params).fit(X * units + 5.0).dissimilarity(Z * units + 5.0)
    np.testing.assert_allclose(moved, plain, rtol=1e-6, atol=1e-8)


@pytest.mark.parametrize("params", MEMBER_SETS, ids=SET_IDS)
def test_rows_far_from_the_data_score_higher_the_farther_they_lie(params):
    X, Z = rows(5)
    model = Consensus(random_state=0, **params).fit(X)
    fit_top = model.dissimilarity(X).max()
    centre = X.mean(0)
    scores = [model.dissimilarity(centre + (Z - centre) * s) for s in (10, 100, 1000)]
    # (at 10 times, a row near the centre can still lie among the contaminated fit rows)
    assert (scores[1] > fit_top).all() and (scores[2] > fit_top).all()
    assert (scores[1] > scores[0]).all() and (scores[2] > scores[1]).all()


@pytest.mark.parametrize("params", MEMBER_SETS, ids=SET_IDS)
def test_torch_scores_are_differentiable_and_match_numpy(params):
    X, Z = rows(6)
    model = Consensus(random_state=0, **params).fit(X)
    Zt = torch.tensor(Z, requires_grad=True)
    s = model.torch_dissimilarity(Zt)
    s.sum().backward()
    assert torch.isfinite(Zt.grad).all() and Zt.grad.abs().sum() > 0
    np.testing.assert_allclose(s.detach().numpy(), model.dissimilarity(Z), rtol=1e-12)


def test_few_rows_and_wrong_widths_are_refused_with_a_message():
    with pytest.raises(ValueError, match="at least 2 rows"):
        Consensus().fit(np.zeros((1, 3)))
    model = Consensus(random_state=0).fit(rows(7)[0])
    with pytest.raises(ValueError, match="4 features"):
        model.torch_dissimilarity(torch.zeros(2, 3, dtype=torch.float64))
    for members in ("all", ("kNN", "Mahalanobis"), (), ("kNN", "kNN")):
        with pytest.raises(ValueError, match="members must"):
            Consensus(members=members).fit(rows(7)[0])
    for k in (0, 2.5, True):
        with pytest.raises(ValueError, match="k_distance must be a positive integer"):
            Consensus(k_distance=k).fit(rows(7)[0])


def test_a_zero_mad_falls_back_to_the_mean_deviation_then_one():
    assert consensus.robust_centre_and_spread(torch.tensor([1.0, 1.0, 1.0, 5.0])) == (1.0, 1.0)
    assert consensus.robust_centre_and_spread(torch.tensor([2.0, 2.0, 2.0])) == (2.0, 1.0)
    centre, spread = consensus.robust_centre_and_spread(torch.tensor([0.0, 0.0, 0.0, 0.0, 8.0]))
    assert (centre, spread) == (0.0, pytest.approx(1.6))


@pytest.fixture(scope="module", params=MEMBER_SETS, ids=SET_IDS)
def portable_case(request):
    X, Z = rows(8, n=400, d=6)
    model = Consensus(random_state=0, **request.param).fit(X)
    Z = np.vstack([Z, X.mean(0) + 50.0 * (Z[:5] - X.mean(0))])  # and rows far beyond the data
    return model, consensus.PortableConsensus(model).eval(), Z.astype(np.float32)


def test_portable_scores_match_the_detector_in_float32(portable_case):
    model, portable, Z = portable_case
    with torch.no_grad():
        got = portable(torch.from_numpy(Z)).numpy()
    expected = model.dissimilarity(Z.astype(np.float64))
    np.testing.assert_allclose(got, expected, rtol=1e-4, atol=1e-4 * np.abs(expected).max())


def test_portable_scores_through_onnx_and_torchscript(portable_case, tmp_path):
    ort = pytest.importorskip("onnxruntime")  # the export extra; the test extra installs it
    model, portable, Z = portable_case
    expected = model.dissimilarity(Z.astype(np.float64))
    example = torch.from_numpy(Z[:2])
    program = torch.onnx.export(portable, (example,), input_names=["x"], output_names=["score"],
                                dynamic_shapes=({0: torch.export.Dim("batch")},), dynamo=True, verbose=False)
    program.save(str(tmp_path / "c.onnx"))
    onnx_scores = ort.InferenceSession(str(tmp_path / "c.onnx")).run(None, {"x": Z})[0]
    scripted = torch.jit.script(portable)
    scripted.save(str(tmp_path / "c.pt"))
    with torch.no_grad():
        script_scores = torch.jit.load(str(tmp_path / "c.pt"))(torch.from_numpy(Z)).numpy()
    for got in (onnx_scores, script_scores):
        np.testing.assert_allclose(got, expected, rtol=1e-4, atol=1e-4 * np.abs(expected).max())


@pytest.mark.parametrize("params", MEMBER_SETS, ids=SET_IDS)
def test_a_saved_detector_scores_as_the_one_that_was_saved(params, tmp_path):
    X, Z = rows(10)
    model = Consensus(random_state=3, **params).fit(X)
    torch.save(model.state_dict(), tmp_path / "c.pt")
    loaded = Consensus.from_state_dict(torch.load(tmp_path / "c.pt", weights_only=True))
    np.testing.assert_array_equal(loaded.dissimilarity(Z), model.dissimilarity(Z))
    assert loaded.member_scores(Z).keys() == model.member_scores(Z).keys()


@pytest.mark.parametrize("params", MEMBER_SETS, ids=SET_IDS)
def test_fit_scores_are_each_fit_rows_consensus_without_itself(params):
    X, _ = rows(3)
    model = Consensus(random_state=0, **params).fit(X)
    ref = reference_members(X, X[:1], 0, k=params.get("k_distance", 1))
    expected = sum(numpy_robust_z(ref[m][0], ref[m][0]) for m in model.members_)
    np.testing.assert_allclose(model.fit_scores_, expected, rtol=1e-7, atol=1e-7)


@pytest.mark.parametrize("params", MEMBER_SETS, ids=SET_IDS)
def test_rows_beyond_the_data_score_above_every_fit_row_as_documented(params):
    """Beyond the farthest fit row (distances from the fit rows' mean, scaled rows): the largest fit
    score plus the distance beyond it in median radii; the sum elsewhere."""
    X, Z = rows(11)
    model = Consensus(random_state=0, **params).fit(X)
    scaler = MinMaxScaler().fit(X)
    A = scaler.transform(X)
    distance = np.linalg.norm(A - A.mean(0), axis=1)
    radius, median_radius = distance.max() * (1 + consensus.RADIUS_MARGIN), np.median(distance)
    far = X.mean(0) + np.outer([1.001, 1.01, 1.2, 2.0, 5.0, 40.0], X[np.argmax(distance)] - X.mean(0))
    rows_ = np.vstack([Z, far])
    ref = reference_members(X, rows_, 0, k=params.get("k_distance", 1))
    total = sum(numpy_robust_z(*ref[m]) for m in model.members_)
    beyond = (np.linalg.norm(scaler.transform(rows_) - A.mean(0), axis=1) - radius) / median_radius
    floor = model.fit_scores_.max()
    expected = np.where(beyond > 0.0, np.maximum(total, floor + beyond), total)
    assert (beyond[len(Z):] > 0.0).all() and (beyond <= 0.0).sum() >= len(Z) // 2
    np.testing.assert_allclose(model.dissimilarity(rows_), expected, rtol=1e-9, atol=1e-9)
    far_scores = model.dissimilarity(far)
    assert (far_scores > floor).all() and (np.diff(far_scores) > 0).all()


def two_clusters(seed=0, n=100, d=5):
    """Fit rows in two tight clusters at -e0 and +e0 (their mean near 0, every row about 1 from it),
    and two rows off them along e1: one inside the fit rows' radius (0.7 e1), one just beyond it
    (1.05 R e1) and farther from every fit row."""
    rng = np.random.default_rng(seed)
    X = rng.normal(scale=0.01, size=(n, d))
    X[: n // 2, 0] -= 1.0
    X[n // 2:, 0] += 1.0
    radius = np.linalg.norm(X - X.mean(0), axis=1).max()
    off = X.mean(0) + np.outer([0.7, 1.05 * radius], np.eye(d)[1])
    return X, off


@pytest.mark.parametrize("params", MEMBER_SETS, ids=SET_IDS)
def test_a_row_beyond_the_data_never_scores_below_its_members_sum(params):
    """The rule for rows beyond the data only raises scores. Before 2026-11-29 it replaced the sum
    with floor + e / r_med: a row just beyond the radius but far from every fit row scored below a
    row within it nearer the data (the nearest fit row's distance: 1.45 against 1.22), and on digits'
    images, where half of the test rows lie beyond, a lone LpSVDD member's AUROC fell to 0.57."""
    X, off = two_clusters()
    model = Consensus(random_state=0, scale=False, **params).fit(X)
    rows_ = np.vstack([off, np.random.default_rng(1).normal(scale=0.02, size=(40, X.shape[1])) + X[:40]])
    scores = model.dissimilarity(rows_)
    members = model.member_scores(rows_)
    total = sum((members[m] - model.centres_[m]) / model.spreads_[m] for m in model.members_)
    assert scores[1] > model.floor_  # the row beyond: above every fit row, as before
    np.testing.assert_array_less(total - 1e-9, scores)
    if "kNN" in model.members_:  # the distance to the data decides: the row beyond ranks above the row within
        assert scores[1] > scores[0]


def test_a_detector_saved_before_issue_49_loads_as_issue_38s_sum(tmp_path):
    """A state without the members' names or the data's extent (written before issue 49): the three
    members of issue 38 at the 5th neighbour, summed, with no rule for rows beyond the data."""
    X, Z = rows(12)
    state = Consensus(random_state=2, **ISSUE_38).fit(X).state_dict()
    for key in ("members_", "centre_", "radius_", "median_radius_", "floor_", "forest"):
        del state[key]
    del state["params"]["members"]
    loaded = Consensus.from_state_dict(state)
    assert loaded.members_ == consensus.ISSUE_38_MEMBERS
    far = np.vstack([Z, X.mean(0) + 100.0 * (Z[:3] - X.mean(0))])
    ref = reference_members(X, far, 2, k=5)
    np.testing.assert_allclose(loaded.dissimilarity(far), sum(numpy_robust_z(*ref[m]) for m in ISSUE_38["members"]),
                               rtol=1e-9, atol=1e-9)
