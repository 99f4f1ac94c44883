"""The rows one epoch trains on: on big tables, a fresh seeded draw each epoch.

Why (issue 35): an epoch's feature pass, alpha-step and omega-step each cost O(N); on a table of
433,528 rows, 15 full epochs of the MLP took minutes where XGBoost takes seconds, although a
10-column table's representation is learnt from far fewer rows. On a big table (more training rows
than ``epoch_rows`` = R > 0 and than the exact kernel takes whole, ``kernel_choice.EXACT_MAX_ROWS``),
each epoch draws R of them (every labelled anomaly, up to half of R, and normal rows for the rest;
seeded by the run's seed and the epoch, so a resumed run draws the same) and runs its three steps on
those; the final boundary is then fitted on every training row (``DLMSVDD._refit``). Each epoch sees
other rows, so over the epochs the network sees many more than R. Smaller tables, and R = 0: every
row, every epoch, as the paper trains (so the results measured on ADBench's development sets, at
most 5,600 training rows, are those of full epochs).

R = ``config.EPOCH_ROWS`` = 4096 for the MLP was chosen on the two big tables by AUROC on rows held
out of their training splits (never the test split): 4096, 6144, 8192 rows gave 0.9998, 0.9995,
0.9997 (cover) and 0.9476, 0.9443, 0.9371 (celeba), and epochs of 0.27, 0.60, 0.92 s.
"""

from __future__ import annotations

import numpy as np
from torch.utils.data import Dataset

from dlmsvdd_ext import kernel_choice

from . import batches


class EpochRows(Dataset):
    """The rows ``indices`` of ``base``, with its targets, preprocessing record and augmented view."""

    def __init__(self, base: Dataset, indices: np.ndarray):
        self.base, self.indices = base, np.asarray(indices, dtype=np.int64)
        self.preprocessing = getattr(base, "preprocessing", None)

    def __len__(self):
        return len(self.indices)

    def __getitem__(self, i):
        return self.base[int(self.indices[i])]

    @property
    def targets(self) -> np.ndarray:
        return np.asarray(self.base.targets)[self.indices]

    def take(self, indices):
        return batches.take(self.base, self.indices[indices])

    def augmented(self) -> Dataset:
        """The base's augmented view (the omega-step's), on the same rows."""
        return EpochRows(self.base.augmented(), self.indices) if hasattr(self.base, "augmented") else self


def draw(train: Dataset, rows: int, seed: int, epoch: int) -> Dataset:
    """The rows epoch ``epoch`` trains on: ``train`` itself when ``rows`` is 0 or it has no more
    than ``rows`` or ``kernel_choice.EXACT_MAX_ROWS``, else a seeded draw of ``rows`` of them that keeps the labelled anomalies
    (at most half of the draw, unless the normal rows are fewer than the other half)."""
    if rows == 0 or len(train) <= max(rows, kernel_choice.EXACT_MAX_ROWS):
        return train
    targets = np.asarray(train.targets)
    rng = np.random.default_rng([seed, epoch])
    anomalies, normals = np.flatnonzero(targets < 0), np.flatnonzero(targets > 0)
    count = min(len(anomalies), max(rows // 2, rows - len(normals)))  # more when the normals are too few
    if count < len(anomalies):
        anomalies = rng.choice(anomalies, count, replace=False)
    normals = rng.choice(normals, rows - len(anomalies), replace=False)
    return EpochRows(train, np.sort(np.concatenate([anomalies, normals])))
