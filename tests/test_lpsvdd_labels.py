"""LpSVDD's defaults for labelled anomalies (issue 28), on constructed data where the effect is known:
the "local" bandwidth (LOCAL_GAMMA_SCALE / median squared distance) and nu="auto" with anomalies
(NU_WITH_ANOMALIES: the labelled anomalies' share of the weights)."""

import numpy as np
import pytest
from scipy.spatial.distance import pdist
from sklearn.metrics import roc_auc_score

from dlmsvdd_ext import LpSVDD
from dlmsvdd_ext import svdd


def test_local_gamma_is_the_scaled_median_and_kept_by_warm_starts():
    X = np.random.default_rng(0).normal(size=(300, 4))
    y = np.ones(len(X))
    y[:5] = -1
    median = np.median(pdist(X, "sqeuclidean"))  # 300 rows: below MEDIAN_SAMPLES, the exact median
    model = LpSVDD(warm_start=True).fit(X, y)
    assert model.gamma_ == pytest.approx(svdd.LOCAL_GAMMA_SCALE / median, rel=1e-10)
    assert LpSVDD(gamma="median").fit(X).gamma_ == pytest.approx(1.0 / median, rel=1e-10)
    assert model.fit(X * 3.0, y).gamma_ == pytest.approx(svdd.LOCAL_GAMMA_SCALE / median, rel=1e-10)  # estimated once
    # without anomalies (one-class SVDD) the narrower kernel chosen for the unsupervised protocol
    assert LpSVDD().fit(X).gamma_ == pytest.approx(svdd.LOCAL_GAMMA_SCALE_ONE_CLASS / median, rel=1e-10)


def two_clusters_and_anomalies_between(seed=0):
    """Normal data in two tight clusters at (-3, 0) and (3, 0); anomalies at the origin, between them."""
    rng = np.random.default_rng(seed)
    normal = np.r_[rng.normal((-3, 0), 0.3, size=(150, 2)), rng.normal((3, 0), 0.3, size=(150, 2))]
    anomalies = rng.normal((0, 0), 0.3, size=(30, 2))
    return normal, anomalies


def test_local_bandwidth_finds_anomalies_between_clusters_that_the_median_smooths_over():
    # At the median bandwidth (median squared distance about 18: a kernel of width about 3 per axis) the
    # one-class centre's kernel mean of two clusters 6 apart peaks between them, at the anomalies;
    # at LOCAL_GAMMA_SCALE (2) times the median's gamma it dips there, below its value at the clusters.
    normal, anomalies = two_clusters_and_anomalies_between()
    test_normal, _ = two_clusters_and_anomalies_between(seed=1)
    X_test = np.r_[test_normal, anomalies]
    is_anomaly = np.r_[np.zeros(len(test_normal)), np.ones(len(anomalies))]
    median = np.median(pdist(normal, "sqeuclidean"))
    auroc = {g: roc_auc_score(is_anomaly, LpSVDD(gamma=g).fit(normal).dissimilarity(X_test))
             for g in ("median", svdd.LOCAL_GAMMA_SCALE / median, "local")}
    assert auroc["median"] < 0.5 and min(list(auroc.values())[1:]) > 0.95, auroc


def anomalies_inside_the_normal_data(seed):
    """Normal rows N(0, I) in 2-d; anomalies a tight cluster at the normal data's densest point."""
    rng = np.random.default_rng(seed)
    return rng.normal(size=(400, 2)), rng.normal(0.0, 0.05, size=(30, 2))


@pytest.mark.parametrize("n_anomalies", [1, 2, 10, 19, 20, 45])
def test_auto_nu_grows_with_the_labelled_anomalies_up_to_its_full_weight(n_anomalies):
    """nu = 1 + (NU_WITH_ANOMALIES - 1) min(1, n_A / FULL_WEIGHT_ANOMALIES): one or two labels get a
    small share of the weights (issue 38: with the full share they scored below the one-class fit)."""
    rng = np.random.default_rng(0)
    X = np.r_[rng.normal(size=(200, 3)), rng.normal(size=(n_anomalies, 3)) + 3]
    y = np.r_[np.ones(200), -np.ones(n_anomalies)]
    model = LpSVDD().fit(X, y)
    expected = 1 + (svdd.NU_WITH_ANOMALIES - 1) * min(1.0, n_anomalies / svdd.FULL_WEIGHT_ANOMALIES)
    assert model.nu_ == pytest.approx(expected, rel=1e-12)
    assert model.alpha_[y < 0].sum() == pytest.approx((expected - 1) / 2)
    assert model.alpha_[y > 0].sum() == pytest.approx((expected + 1) / 2)


def test_auto_nu_gives_labelled_anomalies_the_weight_to_flag_anomalies_inside_the_normal_data():
    # The centre is about (nu + 1)/2 times the normals' kernel mean minus (nu - 1)/2 times the labelled
    # anomalies': at the paper's nu = 1.2 (0.1 against 1.1) the anomalies at the normals' mode still
    # score as the most normal rows; at NU_WITH_ANOMALIES = 20 (9.5 against 10.5) the labels outweigh the
    # density there.
    normal, anomalies = anomalies_inside_the_normal_data(0)
    X = np.r_[normal, anomalies[:20]]  # FULL_WEIGHT_ANOMALIES labelled: nu reaches NU_WITH_ANOMALIES
    y = np.r_[np.ones(len(normal)), -np.ones(20)]
    test_normal, _ = anomalies_inside_the_normal_data(1)
    X_test = np.r_[test_normal, anomalies[20:]]
    is_anomaly = np.r_[np.zeros(len(test_normal)), np.ones(10)]
    paper = LpSVDD(nu=1.2, gamma=0.5).fit(X, y)
    auto = LpSVDD(gamma=0.5).fit(X, y)
    assert auto.nu_ == svdd.NU_WITH_ANOMALIES
    assert auto.alpha_[y < 0].sum() == pytest.approx((svdd.NU_WITH_ANOMALIES - 1) / 2)
    assert roc_auc_score(is_anomaly, paper.dissimilarity(X_test)) < 0.5
    assert roc_auc_score(is_anomaly, auto.dissimilarity(X_test)) > 0.9
