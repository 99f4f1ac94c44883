"""The paper's protocol on its own image sets (issue 50): placeholder, filled in below."""

from __future__ import annotations

from pathlib import Path

from dlmsvdd import datasets


def load_source(data: str, root):
    """The image source of ``data``: the fetch script's array file when the root holds it (the
    tensor pipeline, batches sliced whole; the same pixels as torchvision's files), else
    ``datasets.load``."""
    file = Path(root) / datasets.ARRAY_FILES[data] if data in datasets.ARRAY_FILES and root else None
    if file is not None and file.is_file():
        classes = {"cifar10": datasets.CIFAR10_CLASSES, "fashion_mnist": datasets.FASHION_MNIST_CLASSES}[data]
        return datasets.image_arrays(file, data, classes)
    return datasets.load(data, root)
