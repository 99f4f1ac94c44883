"""The arrays ``fit`` and the scoring methods take: images, feature vectors or a
table's codes, checked and converted to tensors on the CPU, and the rows a fit
needs."""

from __future__ import annotations

import itertools

import numpy as np
import torch

from dlmsvdd_ext import tabular

from ..data.preprocessing import float_images


def is_array(data) -> bool:
    """numpy arrays, torch tensors and tables (``dlmsvdd_ext.tabular.is_table``: pandas, lists
    of rows; sparse matrices refused) rather than datasets."""
    return isinstance(data, (np.ndarray, torch.Tensor)) or tabular.is_table(data)


def array_images(X, name: str = "X") -> torch.Tensor:
    """An array of images, (N, C, H, W) or (N, H, W) for grey ones, as float32
    (N, C, H, W) on the CPU: uint8 scaled to [0, 1], floats as they are."""
    images = X.detach().cpu() if isinstance(X, torch.Tensor) else torch.as_tensor(np.asarray(X))
    if images.dim() not in (3, 4) or images.shape[0] == 0:
        raise ValueError(f"{name} must hold images (N, C, H, W) or grey (N, H, W), got shape {tuple(images.shape)}")
    images = float_images(images, 1 if images.dim() == 3 else images.shape[1])
    if not torch.isfinite(images).all():
        raise ValueError(f"{name} holds NaN or infinite values")
    return images


def array_vectors(X, name: str = "X", encoding=None) -> torch.Tensor:
    """An array of feature vectors (N, D) of real numbers as float64 on the CPU (the
    preprocessing record standardises them in float64 and gives the network float32);
    a table with an encoding (``dlmsvdd_ext.tabular``) as its codes, which it checks."""
    if encoding is not None:
        return torch.from_numpy(encoding.codes(X.detach().cpu().numpy() if isinstance(X, torch.Tensor) else X, name))
    X = tabular.numeric(X, name)
    vectors = X.detach().cpu() if isinstance(X, torch.Tensor) else torch.as_tensor(np.asarray(X))
    if vectors.dim() != 2 or 0 in vectors.shape:
        raise ValueError(f"{name} must hold feature vectors (N, D), got shape {tuple(vectors.shape)}")
    if vectors.dtype == torch.bool or vectors.is_complex():
        raise ValueError(f"{name} holds {vectors.dtype} values, not real numbers")
    vectors = vectors.double()
    if not torch.isfinite(vectors).all():
        raise ValueError(f"{name} holds NaN or infinite values")
    return vectors


def array_inputs(X, name: str = "X", encoding=None) -> torch.Tensor:
    """An array given to fit: feature vectors (N, D) or a table's codes (``array_vectors``) or images
    (``array_images``)."""
    dims = X.dim() if isinstance(X, torch.Tensor) else 2 if encoding is not None else np.ndim(X)
    if dims not in (2, 3, 4):
        raise ValueError(f"{name} must hold feature vectors (N, D), images (N, C, H, W) or grey images (N, H, W), "
                         f"got {dims} dimension(s)")
    return array_vectors(X, name, encoding) if dims == 2 else array_images(X, name)


# training needs 2 samples: BatchNorm's batch statistics, the kernel's median bandwidth
MIN_TRAIN = 2


def enough_rows(n: int, n_train: int, val_fraction: float) -> None:
    """An array of n rows leaves n_train to train once validation is held out: at least MIN_TRAIN."""
    if n_train >= MIN_TRAIN:
        return
    needed = next(m for m in itertools.count(MIN_TRAIN) if m - int(np.ceil(val_fraction * m)) >= MIN_TRAIN)
    raise ValueError(f"X has {n} rows, and {n_train} of them train once the validation share (val_fraction="
                     f"{val_fraction:g}) is held out; training needs at least {MIN_TRAIN}: give {needed} normal rows "
                     "or more")
