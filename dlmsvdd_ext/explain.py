"""Why a row is anomalous: per-feature attributions, shared by ``LpSVDD.explain`` and
``DLMSVDD.explain`` (each hands in its f and the training normals it keeps).

Three methods (``METHODS``); ``method="auto"`` takes the one measured best for the input's kind
(ADBench's development sets and digits, ``tests/benchmarks/explain_study.py``; the numbers are in
``docs/user-guide/explain.md``):

* ``"range"`` (feature vectors and tables, the default): how far x_j lies outside the range that the 16
  training normals nearest to x in the *other* features hold, in standard deviations of feature j
  (``feature_ranges.outside``): 0 for a value such rows hold too. It reads the model through the
  normals it was fitted on, not through f: which feature is out of place for this row, and by how
  much. It named a feature moved by 6 standard deviations more often than any attribution of f
  measured (integrated gradients, gradient times deviation, occlusion, the repairs below), and more
  often than the largest absolute z-score, which cannot see a contextual anomaly (a value normal for the column, wrong
  for the row); it costs the neighbour search alone.
* ``"repair"``: f(x) minus f of x with x_j alone clipped into that range (``feature_ranges.attribute``),
  in the units of f: how much of the model's own dissimilarity putting the feature back removes. It
  names contextual anomalies about as often and moved features less often (f barely responds to one
  of 512 embedding coordinates, and several features just outside their range compete); it costs a
  scoring pass per feature out of its range on top of the search.
* ``"integrated"`` (images, the default there): integrated gradients (Sundararajan, Taly and Yan, 2017)
  of f from the row's nearest kept training normal b (Euclidean over the pixels the network sees):

      A_j(x) = (x_j - b_j) * mean over k of df/dx_j (b + (k + 1/2) / S * (x - b)),   k = 0 .. S - 1,

  the midpoint rule for the path integral of the gradient along the line from b to x: shares of
  f(x) - f(b) in the units of f, summing to it up to the rule's error; a pixel x shares with b gets 0.
  Its cost does not grow with the pixels (S gradients, about 2 S + 1 scoring passes); on digits its
  maps find a bright patch (pixel AUROC above 0.99). The RBF kernel's gradient vanishes far from the
  data, which is why the gradient is integrated from a normal row rather than taken at x.

``"range"`` and ``"repair"`` take images too (over their flattened pixels), ``"integrated"`` vectors.
"""

from __future__ import annotations

import numpy as np
import torch

from . import feature_ranges

METHODS = ("auto", "range", "repair", "integrated")  # explain(method=...): see above

STEPS = 2  # S: midpoint steps of the path integral (1, 2, 4, 8 named the same feature within 0.04 on every set: the study)
REFERENCE_ROWS = 2000  # training normals kept as baselines (a seeded subset of them)
REFERENCE_VALUES = 1 << 23  # ... and at most this many numbers (8 Mi: 32 MiB in float32, for large images)
BATCH = 256  # rows explained at once (the exact kernel's gradient holds a batch x training-rows block)


def reference_rows(n_normal: int, row_size: int, seed: int = 0) -> np.ndarray:
    """Which of ``n_normal`` training normals to keep as baselines: all of them up to ``REFERENCE_ROWS``
    (and ``REFERENCE_VALUES`` numbers of ``row_size`` each), else a seeded subset, in order.

    Parameters
    ----------
    n_normal : int
        The training normals there are.
    row_size : int
        Numbers per row (features, or pixels times channels).
    seed : int
        Seeds the subset.

    Returns
    -------
    numpy.ndarray
        Sorted positions among the normals.
    """
    keep = max(1, min(REFERENCE_ROWS, REFERENCE_VALUES // max(1, row_size)))
    if n_normal <= keep:
        return np.arange(n_normal)
    return np.sort(np.random.default_rng(seed).choice(n_normal, keep, replace=False))


def kept_normals(X: torch.Tensor, normal: torch.Tensor, seed=None) -> torch.Tensor:
    """The training normals an estimator keeps as baselines (``reference_rows`` of the rows where
    ``normal`` is True), detached and contiguous.

    Parameters
    ----------
    X : torch.Tensor
        The training rows (n, ...).
    normal : torch.Tensor
        (n,) bool: the rows fitted as normal.
    seed : int or None
        Seeds the subset (None: 0).

    Returns
    -------
    torch.Tensor
        (m, ...) rows of X.
    """
    rows = torch.nonzero(normal).flatten()
    picked = reference_rows(len(rows), int(np.prod(X.shape[1:])), 0 if seed is None else seed)
    return X[rows[torch.as_tensor(picked, device=rows.device)]].detach().contiguous()


def nearest(X: torch.Tensor, reference: torch.Tensor) -> torch.Tensor:
    """The nearest reference row of each row of X (Euclidean, over all trailing dimensions).

    Parameters
    ----------
    X : torch.Tensor
        (n, ...) rows.
    reference : torch.Tensor
        (m, ...) rows of the same trailing shape.

    Returns
    -------
    torch.Tensor
        (n, ...): for each row of X, its nearest reference row.
    """
    flat, ref = X.flatten(1), reference.to(X.device, X.dtype).flatten(1)
    # ||x||^2 is the same for every candidate: the argmin needs ||r||^2 - 2 x.r only
    closest = ((ref * ref).sum(1) - 2.0 * flat @ ref.T).argmin(1)
    return reference.to(X.device, X.dtype)[closest]


def integrated_gradients(score, X: torch.Tensor, baseline: torch.Tensor, steps: int = STEPS) -> torch.Tensor:
    """(x - b) times the mean gradient of ``score`` at the midpoints of ``steps`` equal pieces of the line b -> x.

    Parameters
    ----------
    score : callable
        A tensor of rows (n, ...) -> f of each row (n,), differentiable.
    X, baseline : torch.Tensor
        Rows and their baselines, the same shape.
    steps : int
        Pieces of the path (1: the gradient at the midpoint).

    Returns
    -------
    torch.Tensor
        The attributions, X's shape; row sums approximate ``score(X) - score(baseline)``.
    """
    delta = X - baseline
    total = torch.zeros_like(X)
    for k in range(steps):
        point = (baseline + (k + 0.5) / steps * delta).detach().requires_grad_(True)
        total += torch.autograd.grad(score(point).sum(), point)[0]
    return delta * total / steps


def integrated(score, X: torch.Tensor, reference: torch.Tensor, *, steps: int = STEPS,
               batch: int = BATCH) -> torch.Tensor:
    """Integrated gradients of ``score`` from each row's nearest ``reference`` row, in batches: the
    method for images.

    Parameters
    ----------
    score : callable
        Rows (n, ...) -> f (n,), differentiable.
    X : torch.Tensor
        The rows (n, ...), in the dtype and on the device ``score`` takes.
    reference : torch.Tensor
        Training normals (m, ...), the baselines' candidates.
    steps, batch : int
        Pieces of the path; rows at once.

    Returns
    -------
    torch.Tensor
        (n, ...) attributions; row sums approximate ``score(X) - score(baseline)``.
    """
    parts = []
    for rows in X.split(batch):
        with torch.no_grad():
            baseline = nearest(rows, reference)
        parts.append(integrated_gradients(score, rows, baseline, int(steps)).detach())
    return torch.cat(parts) if parts else torch.zeros_like(X)


def chosen_method(method: str, ndim: int) -> str:
    """The method ``attribute`` runs: ``method`` itself, or for ``"auto"`` ``"range"`` on vectors (ndim 2)
    and ``"integrated"`` on images.

    Parameters
    ----------
    method : str
        One of ``METHODS``.
    ndim : int
        The rows' number of dimensions (2: vectors).

    Returns
    -------
    str
        ``"range"``, ``"repair"`` or ``"integrated"``.
    """
    if method not in METHODS:
        raise ValueError(f"method must be one of {', '.join(map(repr, METHODS))}; got {method!r}")
    if method != "auto":
        return method
    return "range" if ndim == 2 else "integrated"


def attribute(score, X: torch.Tensor, reference: torch.Tensor, *, method: str = "auto", steps: int = STEPS,
              batch: int = BATCH, groups: torch.Tensor | None = None) -> torch.Tensor:
    """The attributions of ``explain`` by ``method`` (see the module): how far each feature lies outside
    its look-alikes' range (``"range"``), f's fall when it is put back (``"repair"``), or integrated
    gradients from the nearest reference row (``"integrated"``); ``"auto"``: range for vectors (n, d),
    integrated gradients for images.

    Parameters
    ----------
    score : callable
        Rows (n, ...) -> f (n,), differentiable for ``"integrated"``.
    X : torch.Tensor
        The rows (n, ...), in the dtype and on the device ``score`` takes.
    reference : torch.Tensor
        Training normals (m, ...).
    method : str
        One of ``METHODS``.
    steps, batch : int
        Pieces of the path and rows at once, for ``"integrated"``.
    groups : torch.Tensor or None
        For vectors: the output column of each of X's columns (a table's one-hot and indicator
        columns summed into the column they encode); None: X's shape.

    Returns
    -------
    torch.Tensor
        (n, ...) attributions, or (n, groups.max() + 1) with ``groups``.
    """
    if steps < 1 or int(steps) != steps:
        raise ValueError(f"steps must be a whole number >= 1, got {steps!r}")
    method = chosen_method(method, X.ndim)
    if method == "integrated":
        out = integrated(score, X, reference, steps=int(steps), batch=batch)
    else:
        rows, ref = X.flatten(1), reference.to(X.device, X.dtype).flatten(1)
        if method == "range":
            out = feature_ranges.outside(rows, ref)
        else:
            out = feature_ranges.attribute(lambda r: score(r.reshape(-1, *X.shape[1:])), rows, ref)
        out = out.reshape(X.shape)
    if groups is None:
        return out
    summed = out.new_zeros(out.shape[0], int(groups.max()) + 1)
    return summed.index_add_(1, groups.to(out.device), out)


def column_groups(encoding) -> torch.Tensor:
    """The input column each encoded column of a table reads, the ``groups`` of ``attribute``.

    Parameters
    ----------
    encoding : dlmsvdd_ext.tabular.TableEncoding
        The table's rule.

    Returns
    -------
    torch.Tensor
        (n_features,) long: a one-hot or indicator column gives the column it encodes.
    """
    return encoding.module().source


def no_reference(owner: str) -> ValueError:
    """The error of explain on a model that keeps no training normals.

    Parameters
    ----------
    owner : str
        The estimator's class name.

    Returns
    -------
    ValueError
        The error, saying what to do.
    """
    return ValueError(f"this {owner} keeps no training normals to explain from (saved before explain existed, or "
                      "fitted by fit_sharded with an approximate kernel): pass normal rows as reference=, or refit")


def top_columns(attributions, k: int, names=None) -> tuple[np.ndarray, np.ndarray]:
    """The k columns with the largest attributions of each row, largest first.

    Parameters
    ----------
    attributions : array-like
        (n, d) attributions of vectors.
    k : int
        How many, 1 <= k <= d.
    names : list of str or None
        The columns' names (None: their positions).

    Returns
    -------
    names : numpy.ndarray
        (n, k) the columns' names (object array of str).
    values : numpy.ndarray
        (n, k) their attributions.
    """
    A = np.asarray(attributions, dtype=np.float64)
    if A.ndim != 2:
        raise ValueError(f"the K most responsible columns are those of feature vectors (N, D); these "
                         f"attributions have shape {A.shape}")
    check_k(k, A.shape[1])
    order = np.argsort(-A, axis=1, kind="stable")[:, :k]
    labels = np.asarray([str(j) for j in range(A.shape[1])] if names is None else list(map(str, names)), dtype=object)
    return labels[order], np.take_along_axis(A, order, axis=1)


def check_k(k, n_columns: int) -> None:
    """K of ``top_columns`` (the CLI's ``--explain K``): a whole number from 1 to the columns there are.

    Parameters
    ----------
    k : int
        The number asked for.
    n_columns : int
        The columns there are.

    Raises
    ------
    ValueError
        K out of range or not a whole number.
    """
    if isinstance(k, bool) or not isinstance(k, (int, np.integer)) or not 1 <= k <= n_columns:
        raise ValueError(f"explain K must be a whole number from 1 to the {n_columns} column(s) of the input; "
                         f"got {k!r}")
