"""Training rows held on the model's device for the whole fit: no host copy and no
synchronisation per batch.

Why (issue 47): a DataLoader hands every batch from host memory, and on a GPU each batch
then waits for its copy; with the per-batch checks of the loss, the GPU idled while Python
queued the next batch. When a fit's rows fit in a share of the device's memory
(``budget_bytes``), their network inputs are computed once (the evaluation transform of every
row, in order) and kept on the device; the features pass slices them, and the omega-step
draws its batches from them. The batches are the data loader's: the same seeded order (drawn
by a DataLoader over the row numbers, so that torch's own draws are reproduced), hence on the
CPU the same numbers as the loader path. A training set whose augmentation is a batch
transform (``batch_augment``, e.g. crop and flip of tensor images) is augmented on the device;
one augmented image by image (PIL transforms) keeps the loader path, as do datasets too big for
the budget and runs under torchrun.
"""

from __future__ import annotations

import numpy as np
import torch
from torch.utils.data import DataLoader, Dataset

from . import batches

CPU_BUDGET_BYTES = 1 << 30  # host memory: the inputs are a second copy of the rows
DEVICE_SHARE = 0.25  # of the GPU memory free when the fit starts


def budget_bytes(device: torch.device) -> int:
    """The most bytes of inputs held on ``device``."""
    if device.type == "cuda":
        free, _ = torch.cuda.mem_get_info(device)
        return int(DEVICE_SHARE * free)
    return CPU_BUDGET_BYTES


def _wraps(data: Dataset) -> bool:
    """An epoch's draw or relabelled targets: a view whose augmentation is its base's."""
    return hasattr(data, "base") and not hasattr(data, "batch_augment")


def augmentation_of(train: Dataset):
    """(holdable, batch_augment): whether the omega-step's view of ``train`` can be drawn from
    held inputs, and the batch transform that augments them (None: no augmentation)."""
    if not hasattr(train, "augmented"):
        return True, None
    if _wraps(train):
        return augmentation_of(train.base)
    augmented = train.augmented()
    if augmented is train:
        return True, None
    augment = getattr(augmented, "batch_augment", None)
    return augment is not None, augment


def held(holding: dict, data: Dataset) -> "ResidentRows | None":
    """The held rows of ``data``: itself held, or an epoch's draw of a held set."""
    if id(data) in holding:
        return holding[id(data)]
    base = getattr(data, "base", None)
    if base is not None and id(base) in holding and hasattr(data, "indices"):
        return holding[id(base)].rows(data.indices)
    return None


class ResidentRows:
    """The network inputs (on the device) and targets of a dataset's rows, in order.

    Parameters
    ----------
    inputs : torch.Tensor
        (n, ...) network inputs, on the device they are used on.
    targets : torch.Tensor
        (n,) targets +1 / -1, on the same device.
    augment : callable or None
        ``augment(x, generator) -> x``: the training augmentation of a batch (None: none).
    """

    def __init__(self, inputs: torch.Tensor, targets: torch.Tensor, augment=None):
        self.inputs, self.targets, self.augment = inputs, targets, augment

    @classmethod
    def hold(cls, data: Dataset, device: torch.device, batch_size: int, augment=None) -> "ResidentRows | None":
        """``data``'s rows on ``device``, or None when they exceed ``budget_bytes``."""
        if len(data) == 0:
            return None
        example = data[0][0]
        if not isinstance(example, torch.Tensor) or example.numel() * example.element_size() * len(data) > \
                budget_bytes(device):
            return None
        inputs, targets = [], []
        for x, t in batches.loader(data, batch_size, shuffle=False):
            inputs.append(x.to(device))
            targets.append(torch.as_tensor(t))
        return cls(torch.cat(inputs), torch.cat(targets).to(device), augment)

    def __len__(self) -> int:
        return self.inputs.shape[0]

    def rows(self, indices) -> "ResidentRows":
        """The rows ``indices`` (an epoch's draw), as their own set."""
        index = torch.as_tensor(np.asarray(indices, dtype=np.int64), device=self.inputs.device)
        return ResidentRows(self.inputs[index], self.targets[index], self.augment)

    def in_order(self, batch_size: int):
        """(inputs, targets) batches in row order: the features pass."""
        for start in range(0, len(self), batch_size):
            yield self.inputs[start:start + batch_size], self.targets[start:start + batch_size]

    def shuffled(self, batch_size: int, seed: int, drop_last: bool):
        """(inputs, targets) of the omega-step's batches, augmented if the set is: the order of
        ``batches.loader(data, batch_size, shuffle=True, seed)``, moved to the device at once."""
        order = DataLoader(range(len(self)), batch_size=batch_size, shuffle=True, drop_last=drop_last,
                           generator=torch.Generator().manual_seed(seed))
        order = torch.cat(list(order)).to(self.inputs.device)
        generator = None
        if self.augment is not None:
            generator = torch.Generator(device=self.inputs.device).manual_seed(seed)
        for start in range(0, order.shape[0], batch_size):
            index = order[start:start + batch_size]
            x = self.inputs[index]
            yield (x if self.augment is None else self.augment(x, generator)), self.targets[index]
