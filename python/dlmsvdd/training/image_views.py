"""The views of an image the input consensus measures distances in (``training.input_consensus``):
its pixels, and its pixels after global contrast normalisation, each average-pooled to at most
``IMAGE_SIDE`` pixels a side and flattened.

Why two (issue 50; the development protocols of ``tests/benchmarks/one_class_images.py``, each image
set's training pool split again, fitted on 1000 images of a class): on grey images (digits,
Fashion-MNIST) the nearest fit image's distance on the pixels leads, and stays near it after contrast
normalisation; on natural images (CIFAR-10) the pixels' distance is dominated by brightness and
colour, 0.47 AUROC on automobiles, where the contrast-normalised view scored 0.66 (the preprocessing
of Ruff et al.'s one-class Deep SVDD, ICML 2018), while it lost on birds, deer and frogs, whose
backgrounds' colour tells them apart. Each view led where the other failed; the two together led on
all three sets. Pooling bounds the cost on large images and leaves small shifts less weight; the
operations are matrix products, which ONNX exports (it refuses adaptive pooling to a size that does
not divide the image's).
"""

from __future__ import annotations

import torch
import torch.nn as nn

IMAGE_SIDE = 16  # images are average-pooled to at most this many pixels a side
VIEWS = ("pixels", "contrast")  # the views an image model's consensus takes, in order
CONTRAST_EPSILON = 1e-8  # a constant image's norm after centring is 0: its view is all 0s


def pool_matrix(length: int, side: int) -> torch.Tensor:
    """(length, side) float64: ``x @ P`` average-pools a row of ``length`` pixels to ``side`` cells as
    ``torch.nn.functional.adaptive_avg_pool1d`` does (cell i: pixels floor(i L / s) to ceil((i + 1) L / s))."""
    P = torch.zeros(length, side, dtype=torch.float64)
    for i in range(side):
        start, end = (i * length) // side, -((-(i + 1) * length) // side)
        P[start:end, i] = 1.0 / (end - start)
    return P


def contrast_normalised(images: torch.Tensor, epsilon: float = CONTRAST_EPSILON) -> torch.Tensor:
    """Each image less its mean pixel (over channels too), divided by its Euclidean norm then (at
    least ``epsilon``)."""
    centred = images - images.flatten(1).mean(1)[:, None, None, None]
    norm = centred.flatten(1).pow(2).sum(1).sqrt()
    return centred / norm.clamp_min(epsilon)[:, None, None, None]


class ImageView(nn.Module):
    """Images (n, c, h, w) -> rows (n, c x min(h, IMAGE_SIDE) x min(w, IMAGE_SIDE)) of one of ``VIEWS``.

    Parameters
    ----------
    view : str
        "pixels" (as they are) or "contrast" (``contrast_normalised`` first).
    height, width : int
        The images' size.
    """

    def __init__(self, view: str, height: int, width: int):
        super().__init__()
        if view not in VIEWS:
            raise ValueError(f"view must be one of {VIEWS}, got {view!r}")
        self.contrast = view == "contrast"
        self.register_buffer("down", pool_matrix(height, min(height, IMAGE_SIDE)).T.contiguous())
        self.register_buffer("across", pool_matrix(width, min(width, IMAGE_SIDE)))

    def forward(self, images: torch.Tensor) -> torch.Tensor:
        if self.contrast:
            images = contrast_normalised(images)
        return torch.matmul(torch.matmul(self.down.to(images), images), self.across.to(images)).flatten(1)
