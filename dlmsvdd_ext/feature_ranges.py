"""Per-feature attributions on feature vectors from the range that normal rows like x hold for each
feature: how far x_j lies outside it (``outside``, the package's default for vectors), or how much a
score f falls when x_j alone is put back into it (``attribute``, the repairs).

For a row x and each feature j: the ``NEIGHBOURS`` reference (training normal) rows nearest to x in the
*other* features (Euclidean, leaving j out) hold feature j in a range [lo_j, hi_j]. Then

    outside:  O_j(x) = dist(x_j, [lo_j, hi_j]) / s_j   (s_j: feature j's standard deviation over the
                                                        reference rows),
    repairs:  A_j(x) = f(x) - f(x with x_j := clip(x_j, lo_j, hi_j)).

Both are exactly 0 for a value that normal rows like x also hold. ``outside`` is in standard deviations
of the feature and reads the model only through its reference rows (the normals it was fitted on): it
says which feature is out of place for this row and by how much. The repairs are in the units of f and
say how much of the model's dissimilarity putting that feature back alone removes; where f barely
responds to a feature (one of 512 embedding coordinates, a column of small spread in the kernel's
geometry) they cannot single it out, and many features slightly outside their range compete.
Measured on ADBench's development sets (``tests/benchmarks/explain_study.py``): a feature moved by 6
standard deviations is named 0.914 (LpSVDD's reference rows) and 0.906 (DLMSVDD's) of the time by
``outside``, 0.842 and 0.735 by the repairs of their f, 0.861 by the largest absolute z-score; a contextual anomaly (a
value normal for the column, wrong for the row) 0.590 / 0.712 against the repairs' 0.651 / 0.730 and
the z-score's 0.311 / 0.270. Neither sums to anything: each number is a separate one-feature comparison.

Why leave j out: a row with one feature moved far is far from every normal row in that feature, so its
nearest rows over all features are pulled towards rows extreme in it; without j they are the rows like
x in everything else, and their range is where x_j should be. A contextual anomaly is outside the range
its look-alikes hold, which a column-wise rule (the absolute z-score) cannot see. Why a range and not a
neighbour's value: a feature inside the range is left alone (0), so typical values do not compete.
Why standard deviations: the features' scales differ (a min-max-scaled column of small spread, a
heavy-tailed embedding coordinate), and a distance in the input's own units would let the widest
columns win.

Cost: the search runs among the ``POOL`` reference rows nearest over all features (a distance per row
and reference row, then ``POOL`` x D leave-one-out distances per row and the ``NEIGHBOURS`` nearest of
each feature; the study measured the shift hit rates within 0.007 of the search over all 2,000 rows).
``outside`` costs that search alone; the repairs add a scoring pass per row and per (row, feature out
of its range): about 6 of 50 Gaussian features at 16 neighbours.
"""

from __future__ import annotations

import numpy as np
import torch

NEIGHBOURS = 16  # rows whose range of x_j counts as normal (the study: 8 named contextual anomalies better, 32 shifts)
POOL = 64  # reference rows nearest over all features among which the leave-one-out search runs (the study)
VALUES = 1 << 22  # numbers held at once by the search's rows x D x POOL block


def smallest(values: torch.Tensor, k: int) -> torch.Tensor:
    """Indices of the k smallest entries along the last dimension, in no particular order.

    On the CPU numpy's introselect (``argpartition``): it took 0.05 s and 0.12 s where ``torch.topk`` took
    0.18 s and 0.33 s for this module's two selections on 10,000 rows of 50 features (1 thread), and the
    search is the whole cost of ``outside``; elsewhere ``torch.topk``.

    Parameters
    ----------
    values : torch.Tensor
        (..., m), not requiring gradients.
    k : int
        1 <= k <= m.

    Returns
    -------
    torch.Tensor
        (..., k) long indices into the last dimension.
    """
    if values.device.type == "cpu":
        return torch.from_numpy(np.argpartition(values.numpy(), k - 1, axis=-1)[..., :k])
    return smallest_by_topk(values, k)


def smallest_by_topk(values: torch.Tensor, k: int) -> torch.Tensor:
    """``smallest`` by ``torch.topk``, on any device (the path of GPU tensors).

    Parameters
    ----------
    values : torch.Tensor
        (..., m).
    k : int
        1 <= k <= m.

    Returns
    -------
    torch.Tensor
        (..., k) long indices into the last dimension, in no particular order.
    """
    return values.topk(k, dim=-1, largest=False, sorted=False).indices


def ranges(X: torch.Tensor, reference: torch.Tensor, neighbours: int = NEIGHBOURS, pool: int = POOL):
    """[lo_j, hi_j] per row and feature: the range of feature j over the ``neighbours`` rows of
    ``reference`` nearest to x leaving j out, among its ``pool`` rows nearest over all features.

    Parameters
    ----------
    X : torch.Tensor
        (n, d) rows.
    reference : torch.Tensor
        (m, d) normal rows, X's dtype and device.
    neighbours, pool : int
        Rows of the range; rows searched.

    Returns
    -------
    lo, hi : torch.Tensor
        (n, d) each.
    """
    pool = min(pool, len(reference))
    neighbours = min(neighbours, pool)
    # the search ranks distances in float32 (half the memory traffic of float64; the explain benchmark's
    # cost is this search) on rows centred at the reference's mean, so that large offsets do not cancel
    # away the differences; the range's values come from the rows as given
    centre = reference.mean(0)
    x, r = (X - centre).float(), (reference - centre).float()
    # ||x||^2 is the same for every candidate: it cancels in the argmin and is added back below for
    # the leave-one-out distances, which need the full squared distance
    d2 = (r * r).sum(1) - 2.0 * x @ r.T + (x * x).sum(1, keepdim=True)
    candidates = smallest(d2, pool)  # (n, P)
    pooled = r[candidates].transpose(1, 2)  # (n, d, P)
    leave_out = d2.gather(1, candidates)[:, None, :] - (x[:, :, None] - pooled).square()  # (n, d, P)
    nearest = smallest(leave_out, neighbours)
    values = reference[candidates].transpose(1, 2).gather(2, nearest)  # (n, d, K): x's K look-alikes without j
    return values.min(2).values, values.max(2).values


def _ranged_batches(X: torch.Tensor, reference: torch.Tensor, neighbours: int, pool: int):
    """(rows, lo, hi) for consecutive batches of X, each batch's search block within ``VALUES``."""
    batch = max(1, VALUES // (X.shape[1] * min(pool, len(reference))))
    for rows in X.split(batch):
        yield (rows, *ranges(rows, reference, neighbours, pool))


def column_scale(reference: torch.Tensor) -> torch.Tensor:
    """s_j of ``outside``: each feature's standard deviation over the reference rows; a feature constant
    there takes the smallest positive one (so leaving its value is far out of place), and 1 if every
    feature is constant.

    Parameters
    ----------
    reference : torch.Tensor
        (m, d) normal rows.

    Returns
    -------
    torch.Tensor
        (d,) positive scales.
    """
    s = reference.std(0, correction=0) if len(reference) > 1 else reference.new_zeros(reference.shape[1])
    positive = s > 0
    floor = s[positive].min() if positive.any() else s.new_tensor(1.0)
    return torch.where(positive, s, floor)


def outside(X: torch.Tensor, reference: torch.Tensor, *, neighbours: int = NEIGHBOURS,
            pool: int = POOL) -> torch.Tensor:
    """O_j = how far x_j lies outside ``ranges``' [lo_j, hi_j], in ``column_scale`` units; 0 inside.

    Parameters
    ----------
    X : torch.Tensor
        (n, d) rows.
    reference : torch.Tensor
        (m, d) training normals.
    neighbours, pool : int
        As ``ranges``.

    Returns
    -------
    torch.Tensor
        (n, d) non-negative numbers.
    """
    reference = reference.to(X.device, X.dtype)
    scale = column_scale(reference)
    with torch.no_grad():
        parts = [(torch.relu(lo - rows) + torch.relu(rows - hi)) / scale
                 for rows, lo, hi in _ranged_batches(X, reference, neighbours, pool)]
    return torch.cat(parts) if parts else torch.zeros_like(X)


def attribute(score, X: torch.Tensor, reference: torch.Tensor, *, neighbours: int = NEIGHBOURS,
              pool: int = POOL) -> torch.Tensor:
    """A_j = f(x) - f(x with x_j clipped into ``ranges``), 0 where x_j lies inside; in batches.

    Parameters
    ----------
    score : callable
        (n, d) rows -> f (n,).
    X, reference : torch.Tensor
        As ``outside``; X in the dtype and on the device ``score`` takes.
    neighbours, pool : int
        As ``ranges``.

    Returns
    -------
    torch.Tensor
        (n, d) attributions.
    """
    reference = reference.to(X.device, X.dtype)
    parts = []
    with torch.no_grad():
        for rows, lo, hi in _ranged_batches(X, reference, neighbours, pool):
            repaired = torch.minimum(torch.maximum(rows, lo), hi)
            r, j = torch.nonzero(repaired != rows, as_tuple=True)  # only these need a scoring pass
            A = torch.zeros_like(rows)
            if len(r):
                moved = rows[r].clone()
                moved[torch.arange(len(r), device=rows.device), j] = repaired[r, j]
                A[r, j] = score(rows)[r] - score(moved)
            parts.append(A)
    return torch.cat(parts) if parts else torch.zeros_like(X)
