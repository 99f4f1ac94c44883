"""Self-labelling: a fit without labelled anomalies labels its own, so the omega-step has
something to push away.

Why (issue 38, measured on ADBench's development sets): without anomalies the omega-step's loss,
mean softplus(f - b_N) over normal rows, is lowest when every row maps to the centre, and the
network does that: on letter the median squared distance between the training rows' features fell
from 1.46 to 0.004 in 15 epochs (Deep SVDD's "hypersphere collapse"), and the boundary on the
collapsed features scored a mean test AUROC of 0.69 against 0.74 for ``LpSVDD`` one-class on the
inputs themselves. With a few labelled anomalies the same model is the package's best detector.

What: before training, ``LpSVDD()`` one-class at its defaults (nu = 1, the "local" bandwidth of a
fit without anomalies) is fitted on the training rows' network inputs (feature vectors as the
network takes them, standardised; images average-pooled to at most ``pretrain.TARGET_SIDE``
pixels a side), on a seeded subset of at most ``SUBSET`` rows, and the ``fraction`` of training
rows it scores as most anomalous become labelled anomalies (-1); the fit then runs as a semi-supervised one
(``nu`` "auto": the paper's 1.2). Validation rows are not relabelled. The count is recorded on the
model (``self_labelled_``). The labeller never sees a label, so nothing is chosen on test data.
"""

from __future__ import annotations

import numpy as np
import torch
from torch.utils.data import Dataset

from dlmsvdd_ext import LpSVDD, ops

from . import batches
from .pretrain import target

SUBSET = 4096  # rows the labeller is fitted on (a seeded draw); every training row is scored


class Relabelled(Dataset):
    """``base`` with other targets (its inputs, preprocessing record and augmented view kept)."""

    def __init__(self, base: Dataset, targets: np.ndarray):
        self.base, self._targets = base, np.asarray(targets, dtype=int)
        self.preprocessing = getattr(base, "preprocessing", None)

    def __len__(self):
        return len(self.base)

    def __getitem__(self, i):
        return self.base[i][0], int(self._targets[i])

    def take(self, indices: np.ndarray) -> tuple[torch.Tensor, torch.Tensor]:
        """Many rows in one call (``dlmsvdd.training.batches``), with these targets."""
        return batches.take(self.base, indices)[0], torch.as_tensor(self._targets[indices], dtype=torch.long)

    @property
    def targets(self) -> np.ndarray:
        return self._targets

    def augmented(self) -> Dataset:
        """The base's augmented view (the omega-step's), with these targets."""
        return Relabelled(self.base.augmented(), self._targets) if hasattr(self.base, "augmented") else self


def _inputs_and_targets(data: Dataset, batch_size: int) -> tuple[torch.Tensor, np.ndarray]:
    """Every sample's labeller input (``pretrain.target``) and target, in order, on the CPU."""
    views, targets = [], []
    for x, t in batches.loader(data, batch_size, shuffle=False):
        views.append(target(x).flatten(1).double())
        targets.append(torch.as_tensor(t))
    return torch.cat(views), torch.cat(targets).numpy()


def targets_of(data: Dataset) -> np.ndarray | None:
    """The dataset's targets when it holds them as an array (None: they come with each sample)."""
    targets = getattr(data, "targets", None)
    return None if targets is None else np.asarray(targets)


def pseudo_anomalies(views: torch.Tensor, count: int, seed: int) -> np.ndarray:
    """Indices of the ``count`` rows that LpSVDD one-class, fitted on a seeded subset of at most
    SUBSET of them, scores as most anomalous."""
    subset = np.sort(np.random.default_rng(seed).permutation(len(views))[:SUBSET])
    if count < 1 or not ops.median_sq_distance(views[subset], seed=seed) > 0:  # identical rows: no ranking
        return np.arange(0)
    # SUBSET rows: exact; it ranks, it draws no threshold (calibration=None)
    labeller = LpSVDD(nu=1.0, kernel="exact", random_state=seed, calibration=None).fit(views[subset])
    scores = np.asarray(labeller.dissimilarity(views))
    return np.sort(np.argsort(-scores, kind="stable")[:count])


def relabel(train: Dataset, fraction: float, seed: int, batch_size: int = 256) -> tuple[Dataset, int]:
    """``train`` with the ``fraction`` of its rows most anomalous to the labeller labelled -1 when it
    has no labelled anomaly (else as it is: topping a few labels up with self-labels scored lower on
    the development sets' validation rows, 0.8400 against 0.8464), and how many were labelled."""
    targets = targets_of(train)
    if fraction <= 0 or (targets is not None and (targets < 0).any()):
        return train, 0
    views, targets = _inputs_and_targets(train, batch_size)
    if (targets < 0).any() or len(targets) < 3:  # labelled already, or too few rows to rank
        return train, 0
    chosen = pseudo_anomalies(views, max(1, int(round(fraction * len(targets)))), seed)
    if len(chosen) == 0:
        return train, 0
    relabelled = targets.copy()
    relabelled[chosen] = -1
    return Relabelled(train, relabelled), len(chosen)
