"""Image sources: scikit-learn's digits (embedded), Fashion-MNIST, CIFAR-10, CIFAR-100
through torchvision, ImageNet-LT from its split files, any ImageFolder.

A source is a pair of labelled pools (train and test) of raw images (PIL images
or tensors) with their class labels as numpy arrays; the protocols pick indices
from them and the tasks attach transforms. Nothing is downloaded: a missing
root raises an error that says which files are expected where.
"""

from __future__ import annotations

import os
import pickle
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
from torch.utils.data import Dataset

DATASETS = ("digits", "fashion_mnist", "cifar10", "cifar100", "imagenet_lt", "image_folder", "table")
IMAGE_DATASETS = DATASETS[:-1]  # "table": feature vectors from a file (dlmsvdd.data.tables)

# Channel statistics of the training sets, for backbones trained from scratch.
STATS = {
    "digits": ((0.30,), (0.38,)),
    "fashion_mnist": ((0.2860,), (0.3530,)),
    "cifar10": ((0.4914, 0.4822, 0.4465), (0.2470, 0.2435, 0.2616)),
    "cifar100": ((0.5071, 0.4865, 0.4409), (0.2673, 0.2564, 0.2762)),
}
IMAGENET_STATS = ((0.485, 0.456, 0.406), (0.229, 0.224, 0.225))


def vision(module: str, purpose: str):
    """A torchvision module (the optional ``vision`` extra).

    Parameters
    ----------
    module : str
        The module's name, such as "torchvision.datasets".
    purpose : str
        What needs it, for the error message.

    Returns
    -------
    module
        The imported module.

    Raises
    ------
    ImportError
        torchvision is missing, with the command that installs it.
    """
    import importlib

    try:
        return importlib.import_module(module)
    except ImportError as err:
        raise ImportError(f"{purpose} needs torchvision, which cannot be imported ({err}); "
                          'install it with: pip install "dlmsvdd[vision]"') from None


@dataclass
class Source:
    """A data set of images: train and test pools of (raw image, class).

    Parameters
    ----------
    name : str
        The data set's name (a ``TrainConfig.data`` value).
    train, test : torch.utils.data.Dataset
        The pools; items are (raw image, class).
    train_labels, test_labels : numpy.ndarray
        Their classes.
    classes : list
        The class names.
    channels : int
        The raw images' channels.
    image_size : int or None
        Their size (None: natural images of varying size).
    """

    name: str
    train: Dataset  # items: (raw image, class)
    test: Dataset
    train_labels: np.ndarray
    test_labels: np.ndarray
    classes: list
    channels: int  # of the raw images
    image_size: int | None  # None: natural images of varying size


class TensorImages(Dataset):
    """Images held as one (n, c, h, w) float tensor in [0, 1].

    Parameters
    ----------
    images : torch.Tensor
        (n, c, h, w), in [0, 1].
    labels : array-like
        Their classes.
    """

    def __init__(self, images: torch.Tensor, labels: np.ndarray):
        self.images, self.labels = images, np.asarray(labels)

    def __len__(self):
        return len(self.labels)

    def __getitem__(self, i):
        return self.images[i], int(self.labels[i])


def _missing(name: str, root, expected: str) -> ValueError:
    return ValueError(f"{name}: no data at {root!r}; expected {expected} (nothing is downloaded: put the files there)")


def _split_pool(labels: np.ndarray, test_fraction: float, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Stratified, seeded train/test pools of a data set that ships without a test split."""
    from sklearn.model_selection import train_test_split

    return tuple(np.sort(part) for part in train_test_split(np.arange(len(labels)), test_size=test_fraction,
                                                              stratify=labels, random_state=seed))


def digits(test_fraction: float = 0.3, seed: int = 0) -> Source:
    """scikit-learn's 1797 8x8 digits, split once (stratified, seeded) into train and test pools.

    Embedded in scikit-learn: nothing is downloaded.

    Parameters
    ----------
    test_fraction : float
        The test pool's share.
    seed : int
        Seeds the split.

    Returns
    -------
    Source
        The train and test pools with their labels.
    """
    from sklearn.datasets import load_digits

    data = load_digits()
    images = torch.as_tensor(data.images / 16.0, dtype=torch.float32)[:, None]
    train, test = _split_pool(data.target, test_fraction, seed)
    return Source("digits", TensorImages(images[train], data.target[train]),
                  TensorImages(images[test], data.target[test]), data.target[train], data.target[test],
                  list(range(10)), channels=1, image_size=8)


def _torchvision_pair(name: str, cls: str, root, expected: str):
    """The train and test sets of torchvision's data set ``cls`` from ``root`` (never downloaded)."""
    dataset = getattr(vision("torchvision.datasets", f"the {name} data set"), cls)
    try:
        return tuple(dataset(root, train=flag, download=False) for flag in (True, False))
    except RuntimeError:
        raise _missing(name, root, expected) from None


def fashion_mnist(root) -> Source:
    """Fashion-MNIST as torchvision stores it (never downloaded).

    Parameters
    ----------
    root : str or pathlib.Path
        The folder holding ``FashionMNIST/raw``.

    Returns
    -------
    Source
        The train and test pools with their labels.
    """
    train, test = _torchvision_pair("fashion_mnist", "FashionMNIST", root,
                                    "FashionMNIST/raw/{train,t10k}-{images-idx3,labels-idx1}-ubyte")
    return Source("fashion_mnist", train, test, train.targets.numpy(), test.targets.numpy(), list(train.classes), 1, 28)


def cifar10(root) -> Source:
    """CIFAR-10 as torchvision stores it (never downloaded).

    Parameters
    ----------
    root : str or pathlib.Path
        The folder holding ``cifar-10-batches-py``.

    Returns
    -------
    Source
        The train and test pools with their labels.
    """
    train, test = _torchvision_pair("cifar10", "CIFAR10", root, "cifar-10-batches-py/ (the python version of CIFAR-10)")
    return Source("cifar10", train, test, np.asarray(train.targets), np.asarray(test.targets), list(train.classes), 3, 32)


def cifar100(root, fine_labels: bool = False) -> Source:
    """CIFAR-100 with its 20 coarse superclasses or, on request, the 100 fine classes.

    The superclasses are the one-vs-rest literature's choice.

    Parameters
    ----------
    root : str or pathlib.Path
        The folder holding ``cifar-100-python``.
    fine_labels : bool
        The 100 fine classes.

    Returns
    -------
    Source
        The train and test pools with their labels.
    """
    train, test = _torchvision_pair("cifar100", "CIFAR100", root, "cifar-100-python/ (the python version of CIFAR-100)")
    classes = list(train.classes)
    if not fine_labels:  # torchvision exposes the fine labels only; the coarse ones are in the same pickles
        folder = Path(root) / train.base_folder
        for ds, file in ((train, "train"), (test, "test")):
            with open(folder / file, "rb") as f:
                ds.targets = list(pickle.load(f, encoding="latin1")["coarse_labels"])
        with open(folder / "meta", "rb") as f:
            classes = list(pickle.load(f, encoding="latin1")["coarse_label_names"])
    return Source("cifar100", train, test, np.asarray(train.targets), np.asarray(test.targets), classes, 3, 32)


class ImageList(Dataset):
    """Images named by a list of (path relative to root, label), loaded with PIL as RGB.

    Parameters
    ----------
    root : str or pathlib.Path
        The folder the paths are relative to.
    items : list of tuple
        (path, label) pairs.
    """

    def __init__(self, root, items: list[tuple[str, int]]):
        self.root = Path(root)
        self.paths = [p for p, _ in items]
        self.labels = np.asarray([label for _, label in items], dtype=np.int64)

    def __len__(self):
        return len(self.paths)

    def __getitem__(self, i):
        from PIL import Image

        with Image.open(self.root / self.paths[i]) as img:
            return img.convert("RGB"), int(self.labels[i])


def read_split_file(path) -> list[tuple[str, int]]:
    """Read a split file of ImageNet-LT's format: one ``relative/path.JPEG label`` per line.

    Parameters
    ----------
    path : str or pathlib.Path
        The file.

    Returns
    -------
    list of tuple
        (path, label) pairs.

    Raises
    ------
    ValueError
        A malformed line (with its number) or an empty list.
    """
    items = []
    with open(path) as f:
        for number, line in enumerate(f, 1):
            if not line.strip():
                continue
            parts = line.split()
            if len(parts) != 2 or not parts[1].lstrip("-").isdigit():
                raise ValueError(f"{path}:{number}: expected 'path label', got {line.strip()!r}")
            items.append((parts[0], int(parts[1])))
    if not items:
        raise ValueError(f"{path} lists no images")
    return items


def imagenet_lt(root, split_dir=None) -> Source:
    """ImageNet-LT (Liu et al. 2019): its split files over an ImageNet root.

    Parameters
    ----------
    root : str or pathlib.Path
        The ImageNet root, holding ``train/`` and ``val/``.
    split_dir : str, pathlib.Path or None
        The folder of ``ImageNet_LT_train.txt`` and ``ImageNet_LT_test.txt``
        (default: ``root``).

    Returns
    -------
    Source
        The train and test pools with their labels.
    """
    split_dir = Path(split_dir or root)
    lists = {}
    for split in ("train", "test"):
        file = split_dir / f"ImageNet_LT_{split}.txt"
        if not file.is_file():
            raise _missing("imagenet_lt", str(split_dir), f"ImageNet_LT_{split}.txt")
        lists[split] = read_split_file(file)
    first = Path(root) / lists["train"][0][0]
    if not first.is_file():
        raise _missing("imagenet_lt", root, f"the ImageNet images the split files name (e.g. {lists['train'][0][0]})")
    train, test = ImageList(root, lists["train"]), ImageList(root, lists["test"])
    classes = sorted(set(train.labels.tolist()) | set(test.labels.tolist()))
    return Source("imagenet_lt", train, test, train.labels, test.labels, classes, 3, None)


def image_folder(root, test_fraction: float = 0.3, seed: int = 0) -> Source:
    """Images in torchvision's ImageFolder layout.

    ``root/train/<class>/...`` and ``root/test/<class>/...``, or a single
    ``root/<class>/...`` split once (stratified, seeded) into train and test.

    Parameters
    ----------
    root : str or pathlib.Path
        The folder.
    test_fraction : float
        The test pool's share of a single folder.
    seed : int
        Seeds that split.

    Returns
    -------
    Source
        The train and test pools with their labels.
    """
    from torch.utils.data import Subset

    ImageFolder = vision("torchvision.datasets", "the image_folder data set").ImageFolder

    root = Path(root)
    if not root.is_dir():
        raise _missing("image_folder", str(root), "a folder of class subfolders (or train/ and test/ of them)")
    if (root / "train").is_dir() and (root / "test").is_dir():
        train, test = ImageFolder(root / "train"), ImageFolder(root / "test")
        if train.classes != test.classes:
            raise ValueError(f"image_folder: train and test have different classes: {train.classes} vs {test.classes}")
        return Source("image_folder", train, test, np.asarray(train.targets), np.asarray(test.targets),
                      train.classes, 3, None)
    pool = ImageFolder(root)
    labels = np.asarray(pool.targets)
    train, test = _split_pool(labels, test_fraction, seed)
    return Source("image_folder", Subset(pool, train), Subset(pool, test), labels[train], labels[test],
                  pool.classes, 3, None)


def load(name: str, root=None, fine_labels: bool = False, split_dir=None) -> Source:
    """The image source of a name.

    Parameters
    ----------
    name : str
        "digits", "fashion_mnist", "cifar10", "cifar100", "imagenet_lt" or "image_folder".
    root : str, pathlib.Path or None
        The data root (every source but digits needs one).
    fine_labels : bool
        CIFAR-100's fine classes.
    split_dir : str, pathlib.Path or None
        ImageNet-LT's split files' folder.

    Returns
    -------
    Source
        The train and test pools with their labels.
    """
    if name not in IMAGE_DATASETS:
        raise ValueError(f"unknown data set {name!r}; choose one of {IMAGE_DATASETS} (tables of feature "
                         "vectors: data 'table', dlmsvdd.data.tables)")
    if name == "digits":
        return digits()
    if root is None:
        raise ValueError(f"{name} needs a data root (--root)")
    if not os.path.isdir(root):
        raise ValueError(f"{name}: the data root {str(root)!r} does not exist")
    if name == "cifar100":
        return cifar100(root, fine_labels)
    if name == "imagenet_lt":
        return imagenet_lt(root, split_dir)
    return {"fashion_mnist": fashion_mnist, "cifar10": cifar10, "image_folder": image_folder}[name](root)
