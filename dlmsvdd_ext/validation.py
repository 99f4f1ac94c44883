"""Checks of the inputs every layer of dlmsvdd_ext shares: features and the
numeric bandwidth. Imports nothing of the package, so ``ops`` can use it too."""

from __future__ import annotations

import math

import numpy as np
import torch
from sklearn.utils.validation import check_array


def overflowing_rows(X) -> torch.Tensor | None:
    """Which rows of a 2-D float array (tensor or numpy) have a squared norm
    that overflows their dtype: the RBF kernels compute ||x||^2, which is then
    inf (and a distance inf - inf = NaN), so such a row is non-finite input
    like a NaN (dlmsvdd_ext's rule: refused where inputs are validated, NaN
    from the compiled ops). A boolean tensor on X's device, or None when no
    row can overflow (d max|x|^2 fits: one pass, no copy; the common case)."""
    T = torch.as_tensor(X).detach()
    if T.numel() == 0:
        return None
    lo, hi = torch.aminmax(T)
    amax = max(-float(lo), float(hi))
    fmax = float(torch.finfo(T.dtype).max)
    if not amax * amax * T.shape[1] > fmax:  # NaN entries: not this check's concern
        return None
    A = T.to(torch.float64)
    r = A.abs().amax(1)
    s = ((A / r.clamp_min(1e-300)[:, None]) ** 2).sum(1)
    return torch.log(s) + 2.0 * torch.log(r) > math.log(fmax)  # ||x||^2 = s r^2, in logs (float64 overflows too)


def all_finite(T: torch.Tensor) -> bool:
    """Whether every entry of a float tensor is finite (True when it is empty). Its min and
    max are NaN or infinite exactly when an entry is: one pass, without the n x d mask that
    ``torch.isfinite(T)`` allocates."""
    return T.numel() == 0 or bool(torch.isfinite(torch.stack(torch.aminmax(T.detach()))).all())


def check_features(X, name: str = "X") -> torch.Tensor:
    """X as a float32/float64 2-D torch tensor of finite values, not empty,
    each row's squared norm within its dtype (``overflowing_rows``).
    numpy-like input goes through scikit-learn's ``check_array`` (its messages,
    no copy when it is already a C-contiguous float array); a tensor stays
    itself (same device, autograd intact)."""
    T = _checked_features(X, name)
    overflow = overflowing_rows(T)
    if overflow is not None and bool(overflow.any()):
        row = int(overflow.nonzero()[0][0])
        raise ValueError(f"{name}: row {row}'s squared norm overflows {T.dtype} (largest "
                         f"{float(torch.finfo(T.dtype).max):.3g}), so the RBF kernel cannot compare it with other "
                         "rows; scale the features (or pass float64)")
    return T


def _checked_features(X, name: str) -> torch.Tensor:
    if isinstance(X, torch.Tensor):
        if X.ndim != 2:
            raise ValueError(f"{name} must be 2-D (n_samples, n_features), got shape {tuple(X.shape)}")
        if X.dtype not in (torch.float32, torch.float64):
            raise ValueError(f"{name} must be float32 or float64, got {X.dtype}")
        if X.shape[0] == 0 or X.shape[1] == 0:
            raise ValueError(f"{name} is empty: shape {tuple(X.shape)}")
        if not all_finite(X):
            raise ValueError(f"{name} contains NaN or infinity")
        return X
    arr = np.ascontiguousarray(check_array(X, dtype=[np.float64, np.float32], input_name=name))
    if not arr.flags.writeable:  # torch wants writable memory (we never write to it)
        arr = arr.copy()
    return torch.from_numpy(arr)


def check_gamma(gamma, dtype=None) -> float:
    """A numeric bandwidth: positive, finite, and (with ``dtype``, torch's or
    numpy's) representable in that dtype, where the kernels use it: not above
    its largest value and not rounding to 0 (gamma times a squared distance
    may still overflow to inf; exp(-inf) = 0 is then the right kernel value)."""
    try:
        value = float(gamma)
    except (TypeError, ValueError):
        raise ValueError(f"gamma must be a positive finite number, got {gamma!r}") from None
    if not (value > 0 and math.isfinite(value)):
        raise ValueError(f"gamma must be a positive finite number, got {gamma!r}")
    if dtype is not None:
        finfo = torch.finfo(dtype) if isinstance(dtype, torch.dtype) else np.finfo(dtype)
        if value > float(finfo.max):
            raise ValueError(f"gamma = {value:g} does not fit in {dtype} (largest {float(finfo.max):g}); "
                             "use float64 features or a smaller gamma")
        as_dtype = np.dtype(_numpy_dtype(dtype))
        if np.asarray(value, dtype=as_dtype) == 0:
            raise ValueError(f"gamma = {value:g} rounds to 0 in {dtype} (smallest "
                             f"{float(np.finfo(as_dtype).smallest_subnormal):g}); use float64 features or a larger gamma")
    return value


def _numpy_dtype(dtype):
    return {torch.float32: np.float32, torch.float64: np.float64, torch.float16: np.float16}.get(dtype, dtype)
