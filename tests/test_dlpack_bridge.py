"""The binding layer reads both DLPack capsule kinds zero-copy, from torch and numpy."""

import numpy as np
import pytest
import torch

from dlmsvdd_ext import _C

from conftest import rbf_reference, rel_err


def _inputs():
    g = torch.Generator().manual_seed(1)
    X = torch.randn(12, 5, generator=g, dtype=torch.float64)
    V = torch.randn(12, generator=g, dtype=torch.float64)
    return X, V, rbf_reference(X.numpy(), X.numpy(), 0.2) @ V.numpy()


@pytest.mark.parametrize("kind", ["legacy", "versioned"])
def test_capsule_kinds(kind):
    X, V, ref = _inputs()
    out = torch.empty(12, dtype=torch.float64)
    if kind == "legacy":
        caps = [t.__dlpack__() for t in (X, X, V, out)]
    else:
        caps = [t.__dlpack__(max_version=(1, 0)) for t in (X, X, V, out)]
    _C.rbf_matvec(*caps, gamma=0.2)
    assert rel_err(out.numpy(), ref) <= 1e-12  # written in place: zero-copy output


def test_numpy_arrays_are_read_and_written_in_place():
    X, V, ref = _inputs()
    out = np.full(12, np.nan)
    _C.rbf_matvec(X.numpy(), X.numpy(), V.numpy(), out, gamma=0.2)
    assert rel_err(out, ref) <= 1e-12


def test_read_only_output_is_refused():
    X, V, _ = _inputs()
    out = np.zeros(12)
    out.flags.writeable = False
    with pytest.raises((ValueError, BufferError)):
        _C.rbf_matvec(X.numpy(), X.numpy(), V.numpy(), out, gamma=0.2)


def test_consumed_capsule_is_refused():
    X, V, _ = _inputs()
    cap = X.__dlpack__()
    torch.from_dlpack(cap)  # consumes it
    with pytest.raises(ValueError, match="not an unconsumed DLPack capsule"):
        _C.rbf_gram(cap, X, torch.empty(12, 12, dtype=torch.float64), gamma=1.0)


def test_output_aliasing_an_input_is_refused():
    X, _, _ = _inputs()
    G = torch.zeros(12, 12, dtype=torch.float64)
    with pytest.raises(ValueError, match="out: must not share memory with X"):
        _C.rbf_gram(G, G, G, gamma=1.0)


def test_output_overlapping_an_input_is_refused():
    """Not just the same start: any overlap (the kernel would read entries it
    has already overwritten)."""
    X, V, _ = _inputs()
    buf = torch.zeros(18, dtype=torch.float64)
    buf[:12] = V
    with pytest.raises(ValueError, match="out: must not share memory with V"):
        _C.rbf_matvec(X, X, buf[:12], buf[6:18], gamma=1.0)
    G = torch.zeros(20, 12, dtype=torch.float64)
    G[8:] = X @ torch.ones(5, 12, dtype=torch.float64)
    with pytest.raises(ValueError, match="out: must not share memory with X"):
        _C.rbf_gram(G[8:], G[8:], G[:12], gamma=1.0)
    alpha = torch.full((13,), 1 / 12, dtype=torch.float64)
    t = torch.ones(12, dtype=torch.float64)
    hist = torch.empty(3, dtype=torch.float64)
    K = torch.eye(12, dtype=torch.float64)
    with pytest.raises(ValueError, match="alpha: must not share memory with Ka"):
        _C.fw_solve(alpha[:12], alpha[1:], t, {"q": 2.0, "pen_normal": 1.0, "pen_anomaly": 1.0, "mu_normal": 1.0,
                                                 "mu_anomaly": 0.0}, "pairwise", 2, 0.0, 0, hist, hist.clone(),
                    "dense", K)


def test_symmetric_flag_requires_the_same_array():
    X, V, _ = _inputs()
    with pytest.raises(ValueError, match="symmetric=True requires Y to be the same array as X"):
        _C.rbf_matvec(X, X.clone(), V, torch.empty(12, dtype=torch.float64), gamma=1.0, symmetric=True)


def test_empty_numpy_arrays_have_no_layout_to_refuse():
    """numpy exports an empty (0, d) array with strides 0: not a non-contiguous layout."""
    X = np.zeros((0, 5), dtype=np.float32)
    out = np.empty((0, 2), dtype=np.float32)
    _C.rbf_gram(X, np.ones((2, 5), dtype=np.float32), out, gamma=1.0)
