"""Evaluation protocols on class labels: one-vs-rest tasks, long-tailed pools,
stratified train/validation splits. Index arithmetic only, every draw seeded."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch
from sklearn.model_selection import train_test_split
from torch.utils.data import Dataset


def _labels(labels) -> np.ndarray:
    labels = np.asarray(labels)
    if labels.ndim != 1 or labels.size == 0:
        raise ValueError("labels must be a non-empty 1-D array of class indices")
    return labels


def check_class(labels, normal_class: int) -> None:
    """Refuse a normal class the labels do not hold.

    Parameters
    ----------
    labels : array-like
        Class indices, 1-D.
    normal_class : int
        The normal class.

    Raises
    ------
    ValueError
        An unknown class, naming the classes there are.
    """
    classes = np.unique(_labels(labels))
    if normal_class not in classes:
        raise ValueError(f"unknown normal class {normal_class!r}; the data set has classes {classes.tolist()}")


def long_tailed_counts(n_head: int, rho: float, n_classes: int) -> list[int]:
    """The class sizes of a long-tailed pool: ``n_c = round(n_0 rho^(-c / (C - 1)))``.

    As the paper writes it (Cao et al.'s code truncates instead, which differs
    by one for some classes).

    Parameters
    ----------
    n_head : int
        n_0, the largest class's size.
    rho : float
        The imbalance ratio, at least 1.
    n_classes : int
        C, at least 2.

    Returns
    -------
    list of int
        n_c for c = 0 .. C - 1.
    """
    if not rho >= 1:
        raise ValueError(f"the imbalance ratio rho must be >= 1, got {rho}")
    if n_classes < 2:
        raise ValueError(f"a long-tailed pool needs at least 2 classes, got {n_classes}")
    return [int(round(n_head * rho ** (-c / (n_classes - 1)))) for c in range(n_classes)]


def long_tailed_pool(labels, rho: float, seed: int = 0) -> np.ndarray:
    """Indices of a long-tailed subset of a labelled pool.

    Class c (in sorted order) keeps n_c of its samples (``long_tailed_counts``),
    drawn at random, n_0 being the smallest class size (balanced sets: the
    class size).

    Parameters
    ----------
    labels : array-like
        Class indices, 1-D.
    rho : float
        The imbalance ratio.
    seed : int
        Seeds the draw.

    Returns
    -------
    numpy.ndarray
        The kept indices, sorted.
    """
    labels = _labels(labels)
    classes, sizes = np.unique(labels, return_counts=True)
    counts = long_tailed_counts(int(sizes.min()), rho, len(classes))
    rng = np.random.default_rng(seed)
    keep = [rng.choice(np.flatnonzero(labels == c), n, replace=False) for c, n in zip(classes, counts)]
    return np.sort(np.concatenate(keep))


@dataclass(frozen=True)
class Split:
    """Indices into a labelled pool and their targets.

    Parameters
    ----------
    indices : numpy.ndarray
        Indices into the pool.
    targets : numpy.ndarray
        +1 normal, -1 anomaly, one per index.
    """

    indices: np.ndarray
    targets: np.ndarray

    def __len__(self) -> int:
        return len(self.indices)


class SplitRows(Dataset):
    """A dataset of (row, target): the rows of a tensor that a split picks.

    Parameters
    ----------
    rows : torch.Tensor
        Images or feature vectors.
    split : Split
        The rows picked and their targets.
    preprocessing : object or None
        The preprocessing record the rows went through (None: the identity).
    """

    def __init__(self, rows, split: Split, preprocessing=None):
        self.rows, self.split, self.preprocessing = rows, split, preprocessing

    def __len__(self):
        return len(self.split)

    def __getitem__(self, i):
        return self.rows[int(self.split.indices[i])], int(self.split.targets[i])

    def take(self, positions: np.ndarray) -> tuple[torch.Tensor, torch.Tensor]:
        """Many rows in one call, and their targets: a batch without a Python call per row
        (``dlmsvdd.training.batches``).

        Parameters
        ----------
        positions : numpy.ndarray
            Positions in the split (0 to ``len(self) - 1``), int64.

        Returns
        -------
        rows : torch.Tensor
            The rows, in the order of ``positions``.
        targets : torch.Tensor
            Their targets, +1 / -1, int64.
        """
        rows = torch.as_tensor(np.asarray(self.split.indices)[positions], dtype=torch.long)
        return self.rows[rows], torch.as_tensor(np.asarray(self.split.targets)[positions], dtype=torch.long)

    @property
    def targets(self) -> np.ndarray:
        """The split's targets, +1 / -1."""
        return self.split.targets


def one_vs_rest(labels, normal_class: int, ratio: float | None, seed: int = 0) -> Split:
    """A one-vs-rest task: all samples of the normal class, plus anomalies drawn from the others.

    Parameters
    ----------
    labels : array-like
        Class indices, 1-D.
    normal_class : int
        The normal class.
    ratio : float or None
        round(ratio x normal count) anomalies (None: all of them).
    seed : int
        Seeds the draw.

    Returns
    -------
    Split
        The normal samples, then the anomalies.
    """
    labels = _labels(labels)
    check_class(labels, normal_class)
    normal = np.flatnonzero(labels == normal_class)
    others = np.flatnonzero(labels != normal_class)
    if ratio is None:
        anomalies = others
    else:
        if not 0 <= ratio:
            raise ValueError(f"the anomaly ratio must be >= 0, got {ratio}")
        n_anomalies = int(round(ratio * len(normal)))
        if n_anomalies > len(others):
            raise ValueError(f"ratio {ratio} asks for {n_anomalies} anomalies but the other classes have only "
                             f"{len(others)} samples")
        anomalies = np.sort(np.random.default_rng(seed).choice(others, n_anomalies, replace=False))
    indices = np.concatenate([normal, anomalies])
    return Split(indices, np.where(labels[indices] == normal_class, 1, -1))


def train_val_split(split: Split, val_fraction: float = 0.2, seed: int = 0,
                    anomalies: bool = True) -> tuple[Split, Split]:
    """A stratified (normal / anomaly) split of a task's pool into training and validation.

    Parameters
    ----------
    split : Split
        The task's pool.
    val_fraction : float
        The validation share, in (0, 1).
    seed : int
        Seeds the split.
    anomalies : bool
        False: every anomaly trains and validation is a share of the normal
        samples alone (feature vectors: their few labelled anomalies are worth
        more to the boundary than to the validation).

    Returns
    -------
    train : Split
        The training samples.
    val : Split
        The validation samples.
    """
    if not 0 < val_fraction < 1:
        raise ValueError(f"val_fraction must be in (0, 1), got {val_fraction}")
    if not anomalies:
        normal = np.flatnonzero(split.targets > 0)
        train, val = train_val_split(Split(normal, split.targets[normal]), val_fraction, seed)
        keep = np.sort(np.concatenate([train.indices, np.flatnonzero(split.targets < 0)]))
        return Split(split.indices[keep], split.targets[keep]), Split(split.indices[val.indices], val.targets)
    for name, t in (("normal", 1), ("anomalous", -1)):
        count = int((split.targets == t).sum())
        if 0 < count < 2 or (t == 1 and count == 0):
            raise ValueError(f"the {name} class has {count} sample(s); a stratified train/validation split needs "
                             "at least 2")
    try:
        train, val = train_test_split(np.arange(len(split)), test_size=val_fraction, stratify=split.targets,
                                      random_state=seed)
    except ValueError as err:  # too few samples for the requested fraction
        raise ValueError(f"cannot split {len(split)} samples into train/validation: {err}") from None
    train, val = np.sort(train), np.sort(val)
    return (Split(split.indices[train], split.targets[train]), Split(split.indices[val], split.targets[val]))


def evaluation_task(labels, normal_class: int) -> Split:
    """The whole test set: +1 for the normal class, -1 for every other class.

    Parameters
    ----------
    labels : array-like
        Class indices, 1-D.
    normal_class : int
        The normal class.

    Returns
    -------
    Split
        Every index, in order.
    """
    labels = _labels(labels)
    check_class(labels, normal_class)
    return Split(np.arange(len(labels)), np.where(labels == normal_class, 1, -1))
