"""Pareto efficiency: the points no other point dominates."""

from __future__ import annotations

import numpy as np


def efficient(values, maximize) -> np.ndarray:
    """Mask of the Pareto-efficient rows of ``values`` (points x objectives).
    ``maximize[k]`` says whether objective k is maximised (else minimised). A
    point is dominated when another is at least as good in every objective and
    strictly better in one; equal points do not dominate each other."""
    values = np.asarray(values, dtype=float)
    maximize = np.asarray(maximize, dtype=bool)
    if values.ndim != 2 or values.shape[1] != maximize.size:
        raise ValueError(f"values must be (points, {maximize.size}) for {maximize.size} objectives, "
                         f"got shape {values.shape}")
    if not np.isfinite(values).all():
        raise ValueError("values must be finite (a missing measurement cannot be ranked)")
    better = np.where(maximize, values, -values)  # larger is better in every column
    at_least = (better[:, None, :] >= better[None, :, :]).all(-1)  # [j, i]: j at least as good as i everywhere
    strictly = (better[:, None, :] > better[None, :, :]).any(-1)  # [j, i]: j better than i somewhere
    return ~(at_least & strictly).any(0)
