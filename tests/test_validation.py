"""Bad input is refused with a TypeError or ValueError naming the argument."""

import re

import numpy as np
import pytest
import torch

import dlmsvdd_ext
from dlmsvdd_ext import ops

rng = np.random.default_rng(0)
X = rng.standard_normal((10, 4))
V = rng.standard_normal(10)


def test_wrong_dtype_is_a_type_error():
    with pytest.raises(TypeError, match="X: expected dtype float32 or float64"):
        ops.rbf_matvec(X.astype(np.int64), X.astype(np.int64), V, 1.0)
    with pytest.raises(TypeError, match="V: dtype float32 does not match X"):
        ops.rbf_matvec(X, X, V.astype(np.float32), 1.0)
    with pytest.raises(TypeError, match="X: expected a torch.Tensor or numpy.ndarray, got list"):
        ops.rbf_gram(X.tolist(), None, 1.0)
    with pytest.raises(TypeError, match="float16"):
        ops.rbf_gram(torch.zeros(3, 2, dtype=torch.float16), None, 1.0)


def test_wrong_shapes_are_value_errors():
    with pytest.raises(ValueError, match="Y has 3 features but X has 4"):
        ops.rbf_gram(X, X[:, :3], 1.0)
    with pytest.raises(ValueError, match="V has 9 rows but Y has 10"):
        ops.rbf_matvec(X, X, V[:9], 1.0)
    with pytest.raises(ValueError, match="X: expected 2 dimensions, got 1"):
        ops.rbf_matvec(V, None, V, 1.0)
    with pytest.raises(ValueError, match="no features"):
        ops.rbf_gram(np.zeros((3, 0)), None, 1.0)


@pytest.mark.parametrize("gamma", [0.0, -1.0, float("nan"), float("inf")])
def test_bad_gamma(gamma):
    with pytest.raises(ValueError, match="gamma must be a positive finite number"):
        ops.rbf_matvec(X, None, V, gamma)


@pytest.mark.parametrize("gamma,match", [(1e39, "does not fit in"), (1e-50, "rounds to 0 in")])
def test_gamma_is_checked_in_the_features_dtype(gamma, match):
    """LpSVDD(gamma=1e39) on float32 features ended in an IndexError; 1e-50
    became 0 in float32 (a kernel of ones). Both are fine in float64."""
    X32 = X.astype(np.float32)
    for call in (lambda A: ops.rbf_gram(A, None, gamma), lambda A: ops.rbf_matvec(A, None, A[:, 0], gamma),
                 lambda A: ops.rpcholesky(A, gamma, 2), lambda A: dlmsvdd_ext.LpSVDD(gamma=gamma).fit(A)):
        for A in (X32, torch.from_numpy(X32)):
            with pytest.raises(ValueError, match=re.escape(f"gamma = {gamma:g} {match}") + ".*float32"):
                call(A)
    assert dlmsvdd_ext.LpSVDD(gamma=gamma).fit(X).converged_


def test_layouts_that_cannot_be_read_in_place_are_refused():
    Xt = np.asfortranarray(X)  # columns strided
    with pytest.raises(ValueError, match="columns must be contiguous.*contiguous\\(\\)"):
        ops.rbf_gram(Xt, None, 1.0)
    T = torch.from_numpy(X).t()  # transposed view
    with pytest.raises(ValueError, match="X: columns must be contiguous"):
        ops.rbf_gram(T, None, 1.0)


def test_requires_grad_is_refused():
    t = torch.zeros(3, 2, dtype=torch.float64, requires_grad=True)
    with pytest.raises(ValueError, match="X: requires grad"):
        ops.rbf_gram(t, None, 1.0)


def test_median_bad_input():
    with pytest.raises(ValueError, match="at least 2 rows"):
        ops.median_sq_distance(X[:1])
    with pytest.raises(ValueError, match="max_samples must be at least 2"):
        ops.median_sq_distance(X, max_samples=1)


def test_unknown_isa():
    with pytest.raises(ValueError, match="unknown instruction set"):
        ops.set_cpu_isa("sse9")


def test_cuda_queries_do_not_fail_without_a_gpu():
    assert isinstance(dlmsvdd_ext.built_with_cuda(), bool)
    assert isinstance(dlmsvdd_ext.cuda_available(), bool)
    if not torch.cuda.is_available():
        assert dlmsvdd_ext.cuda_available() is False
