"""``DLMSVDD.explain``: per-feature (per-pixel) attributions by the methods of ``dlmsvdd_ext.explain``
on the network's input: for vectors and tables, by default how far each input column lies outside the
range its training look-alikes hold (``"range"``; ``"repair"``: f's fall when it is put back); for images
integrated gradients of f through the network from the nearest training normal.

What f is, where a method reads it: f of the network's input, ``svdd_(network_(x))``, the squared RKHS
distance to the centre before the distance guard's floor (``dlmsvdd.training.guard``: that floor is a
step, which no gradient sees and which would hide a repair's fall; the guard's own coordinate, a smooth
function of the input, is attributed as any feature is). The input is the one the network takes: for
vectors the standardised columns (the ranges are in standard deviations and the repairs in units of f,
so that scale does not matter), a table's encoded columns summed back into the columns they encode;
for images the pixels the network sees. A model with an input consensus
(``dlmsvdd.training.input_consensus``) is explained by the score it ranks rows by: f's robust z-score
times its weight plus the consensus's mean member z-score, a function of the same input.
"""

from __future__ import annotations

import numpy as np
import torch
from torch.utils.data import Dataset

from dlmsvdd_ext import explain as attribution

from .inputs import is_array


def reference_inputs(train: Dataset, seed: int) -> torch.Tensor:
    """The network inputs of the training normals kept as baselines: the dataset read in a seeded
    order until ``dlmsvdd_ext.explain.reference_rows``' count of normals is met (reading every
    item of a large image set for its target alone would cost a pass over it).

    Parameters
    ----------
    train : torch.utils.data.Dataset
        The training dataset of (input, target), without augmentation.
    seed : int
        Seeds the order.

    Returns
    -------
    torch.Tensor
        (m, ...) inputs of normal rows (target +1).
    """
    first = train[0][0]
    wanted = len(attribution.reference_rows(len(train), int(first.numel())))
    rows = []
    for i in np.random.default_rng(seed).permutation(len(train)):
        x, t = train[int(i)]
        if int(t) > 0:
            rows.append(torch.as_tensor(x).detach().cpu())
            if len(rows) == wanted:
                break
    return torch.stack(rows) if rows else first.new_zeros((0, *first.shape))


def explain(model, X, reference=None, method: str = "auto", steps: int = attribution.STEPS) -> np.ndarray:
    """``DLMSVDD.explain`` (see there): attributions of f for an array of raw inputs.

    Parameters
    ----------
    model : dlmsvdd.DLMSVDD
        A fitted model.
    X : array-like
        Raw inputs as ``fit`` takes them.
    reference : array-like or None
        Normal raw inputs to take baselines from (None: the kept training normals).
    method : str
        One of ``dlmsvdd_ext.explain.METHODS``.
    steps : int
        Midpoint steps of the ``"integrated"`` path integral.

    Returns
    -------
    numpy.ndarray
        Attributions of X's shape (a table's: its columns).
    """
    model._check_fitted("threshold_")
    if not is_array(X):
        raise ValueError("explain takes an array of raw inputs (images, feature vectors or a table) as fit does, "
                         f"not a {type(X).__name__}; for a dataset, stack its inputs into an array")
    inputs = model._images(X).to(model.device)
    if reference is not None:
        reference = model._images(reference).to(model.device)
    elif getattr(model, "reference_", None) is None:
        raise attribution.no_reference(type(model).__name__)
    else:
        reference = model.reference_.to(model.device)
    network, svdd = model.network_.eval(), model.svdd_
    dtype = svdd.dual_coef_.dtype

    combination = getattr(model, "input_consensus_", None)

    def score(x):
        f = svdd._dissimilarity(network(x).to(dtype))
        return f if combination is None else combination.combine(f, x).to(f.dtype)

    spec = model.preprocessing_
    encoding = getattr(spec, "encoding", None)
    groups = None if encoding is None else attribution.column_groups(encoding)
    A = attribution.attribute(score, inputs, reference, method=method, steps=steps, groups=groups).cpu().numpy()
    # grey images (N, H, W) come back as they were given, not as the network's (N, 1, H, W)
    return A.reshape(np.shape(X)) if A.ndim > 2 and A.size == np.prod(np.shape(X)) else A
