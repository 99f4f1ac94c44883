"""Mini-batches of rows held in memory, sliced whole rather than gathered row by row.

Why: torch's ``DataLoader`` calls a dataset once per row and then stacks the rows; on a table of
433,528 rows that Python loop, not the network, was most of an epoch (issue 35). A dataset that can
hand over many rows at once has a method ``take(indices) -> (inputs, targets)``: ``SplitRows``,
``self_labels.Relabelled``, ``epoch_rows.EpochRows`` and torch's ``TensorDataset`` (its tensors).
``loader`` then lets the ``DataLoader`` draw index batches (the same order, from the same seeded
generator, as its row-by-row path) and slices each batch in one call; other datasets (image folders,
augmented views) keep the row-by-row path.
"""

from __future__ import annotations

import numpy as np
import torch
from torch.utils.data import BatchSampler, DataLoader, Dataset, RandomSampler, SequentialSampler, TensorDataset

# the features pass (no gradients) on feature vectors: rows per batch (a 64-wide float32 feature
# row is 256 bytes: 2 MB a batch), so that a pass over hundreds of thousands of rows is a few
# hundred calls of the network, not thousands
VECTOR_EVAL_BATCH = 8192


def can_take(data: Dataset) -> bool:
    """Whether ``data`` hands over many rows in one call."""
    return isinstance(data, TensorDataset) or callable(getattr(data, "take", None))


def take(data: Dataset, indices) -> tuple[torch.Tensor, torch.Tensor]:
    """The rows ``indices`` of ``data`` (``can_take``) and their targets, as tensors."""
    if isinstance(data, TensorDataset):
        index = torch.as_tensor(np.asarray(indices, dtype=np.int64))
        inputs, targets = data.tensors[0][index], data.tensors[1][index]
        return inputs, targets
    return data.take(np.asarray(indices, dtype=np.int64))


class _Slices(Dataset):
    """A dataset whose items are whole batches: ``self[list of indices]`` is ``take`` of them."""

    def __init__(self, data: Dataset):
        self.data = data

    def __len__(self):
        return len(self.data)

    def __getitem__(self, indices):
        return take(self.data, indices)


def loader(data: Dataset, batch_size: int, shuffle: bool, seed: int = 0, num_workers: int = 0,
           drop_last: bool = False) -> DataLoader:
    """Mini-batches of ``data`` in a seeded order (``shuffle``) or in order: sliced whole where the
    dataset can (``can_take``), else row by row; the batches are the same either way."""
    generator = torch.Generator().manual_seed(seed)
    if not can_take(data):
        return DataLoader(data, batch_size=batch_size, shuffle=shuffle, generator=generator,
                          num_workers=num_workers, drop_last=drop_last)
    order = RandomSampler(data, generator=generator) if shuffle else SequentialSampler(data)
    # the generator also seeds the loader's workers, as on the row-by-row path: the same draws from it,
    # and none from torch's global generator
    return DataLoader(_Slices(data), sampler=BatchSampler(order, batch_size, drop_last), batch_size=None,
                      generator=generator, num_workers=num_workers)


def eval_batch_size(batch_size: int, vectors: bool) -> int:
    """The features pass's batch: the configured one for images (their activations bound it), at
    least ``VECTOR_EVAL_BATCH`` rows for feature vectors."""
    return max(batch_size, VECTOR_EVAL_BATCH) if vectors else batch_size

