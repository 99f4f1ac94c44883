"""median_sq_distance against scipy's pdist."""

import numpy as np
import torch
from scipy.spatial.distance import pdist

from dlmsvdd_ext import ops


def test_median_of_all_pairs_matches_pdist():
    rng = np.random.default_rng(0)
    X = rng.standard_normal((301, 13))
    ref = np.median(pdist(X, "sqeuclidean"))
    assert abs(ops.median_sq_distance(X, max_samples=1000) - ref) <= 1e-10 * ref
    assert abs(ops.median_sq_distance(torch.from_numpy(X)) - ref) <= 1e-10 * ref


def test_subsample_is_seeded_and_drawn_without_replacement():
    rng = np.random.default_rng(1)
    X = rng.standard_normal((500, 8)).astype(np.float32)
    a = ops.median_sq_distance(X, max_samples=100, seed=7)
    assert a == ops.median_sq_distance(X, max_samples=100, seed=7)
    rows = np.sort(np.random.default_rng(7).choice(500, size=100, replace=False))
    ref = np.median(pdist(X[rows].astype(np.float64), "sqeuclidean"))
    assert abs(a - ref) <= 1e-5 * ref
    assert a != ops.median_sq_distance(X, max_samples=100, seed=8)
