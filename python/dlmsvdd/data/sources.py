"""Image sources: scikit-learn's digits (embedded), Fashion-MNIST, CIFAR-10, CIFAR-100
through torchvision, ImageNet-LT from its split files, any ImageFolder, and images held
as arrays (``image_arrays``: an ``.npz`` file or a folder of ``.npy`` files; CIFAR-10 from
the ``cifar10.npz`` such a file holds, which torchvision's CIFAR10 class does not read).

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

DATASETS = ("digits", "fashion_mnist", "cifar10", "cifar100", "imagenet_lt", "image_folder", "image_arrays", "table")
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
    stats : tuple or None
        (mean, std), per channel, of the training pool's pixels in [0, 1]: the
        normalisation of a backbone from scratch, for sources ``STATS`` does not
        know (``image_arrays`` measures them). None: ``STATS``, else ImageNet's.
    """

    name: str
    train: Dataset  # items: (raw image, class)
    test: Dataset
    train_labels: np.ndarray
    test_labels: np.ndarray
    classes: list
    channels: int  # of the raw images
    image_size: int | None  # None: natural images of varying size
    stats: tuple | None = None  # (mean, std) per channel of the training pool, where STATS has none


class TensorImages(Dataset):
    """Images held as one (n, c, h, w) tensor: uint8 pixels, or floats in [0, 1].

    Items are raw images, as the tensor pipeline's ``Preprocess`` takes them (uint8 scaled
    to [0, 1] there): a data set of 50,000 colour images stays in its bytes (150 MB for
    CIFAR-10) instead of four times that as floats.

    Parameters
    ----------
    images : torch.Tensor
        (n, c, h, w), uint8 or float in [0, 1].
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


FASHION_MNIST_CLASSES = ["T-shirt/top", "Trouser", "Pullover", "Dress", "Coat", "Sandal", "Shirt", "Sneaker", "Bag",
                         "Ankle boot"]


def _array_file(name: str, root, torchvision_folder: str) -> Path | None:
    """The data set's array file (``ARRAY_FILES``) in ``root`` when torchvision's folder is not there."""
    file = Path(root) / ARRAY_FILES[name]
    return file if not (Path(root) / torchvision_folder).is_dir() and file.is_file() else None


def _torchvision_pair(name: str, cls: str, root, expected: str):
    """The train and test sets of torchvision's data set ``cls`` from ``root`` (never downloaded)."""
    dataset = getattr(vision("torchvision.datasets", f"the {name} data set"), cls)
    try:
        return tuple(dataset(root, train=flag, download=False) for flag in (True, False))
    except RuntimeError:
        raise _missing(name, root, expected) from None


def fashion_mnist(root) -> Source:
    """Fashion-MNIST as torchvision stores it (never downloaded), or as arrays.

    Parameters
    ----------
    root : str or pathlib.Path
        The folder holding ``FashionMNIST/raw`` (read by torchvision), or without it
        ``fashion_mnist.npz`` (read by ``image_arrays``).

    Returns
    -------
    Source
        The train and test pools with their labels.
    """
    arrays = _array_file("fashion_mnist", root, "FashionMNIST")
    if arrays is not None:
        return image_arrays(arrays, "fashion_mnist", FASHION_MNIST_CLASSES)
    train, test = _torchvision_pair("fashion_mnist", "FashionMNIST", root,
                                    "FashionMNIST/raw/{train,t10k}-{images-idx3,labels-idx1}-ubyte")
    return Source("fashion_mnist", train, test, train.targets.numpy(), test.targets.numpy(), list(train.classes), 1, 28)


def cifar10(root) -> Source:
    """CIFAR-10 as torchvision stores it (never downloaded), or as arrays.

    Parameters
    ----------
    root : str or pathlib.Path
        The folder holding ``cifar-10-batches-py`` (read by torchvision), or without it
        ``cifar10.npz`` (read by ``image_arrays``: torchvision's CIFAR10 class checks the
        md5 of its own pickles and refuses other copies of the same images).

    Returns
    -------
    Source
        The train and test pools with their labels.
    """
    arrays = _array_file("cifar10", root, "cifar-10-batches-py")
    if arrays is not None:
        return image_arrays(arrays, "cifar10", CIFAR10_CLASSES)
    train, test = _torchvision_pair("cifar10", "CIFAR10", root, "cifar-10-batches-py/ (the python version of CIFAR-10, "
                                    "or cifar10.npz: image_arrays)")
    return Source("cifar10", train, test, np.asarray(train.targets), np.asarray(test.targets), list(train.classes), 3, 32)


# the arrays an image_arrays file holds: images and labels of the train and test pools
ARRAY_NAMES = ("X_train", "y_train", "X_test", "y_test")
CIFAR10_CLASSES = ["airplane", "automobile", "bird", "cat", "deer", "dog", "frog", "horse", "ship", "truck"]
# the fetch script's file names (../shared/data/images): a data root holding one is read as arrays
ARRAY_FILES = {"cifar10": "cifar10.npz", "fashion_mnist": "fashion_mnist.npz"}


def _read_arrays(path: Path) -> dict:
    """The four arrays of an ``.npz`` file or of a folder's ``.npy`` files (never pickles)."""
    if path.is_dir():
        files = {name: path / f"{name}.npy" for name in ARRAY_NAMES}
        absent = [f.name for f in files.values() if not f.is_file()]
        if absent:
            raise _missing("image_arrays", str(path), f"the .npy files {', '.join(f.name for f in files.values())} "
                           f"(absent: {', '.join(absent)}), or an .npz file holding those arrays")
        load = {name: (lambda f=f: np.load(f, allow_pickle=False)) for name, f in files.items()}
    elif path.is_file() and path.suffix == ".npz":
        try:
            held = np.load(path, allow_pickle=False)
        except (OSError, ValueError) as err:
            raise ValueError(f"image_arrays: cannot read {str(path)!r} as an .npz file: {err}") from None
        absent = [name for name in ARRAY_NAMES if name not in held.files]
        if absent:
            raise ValueError(f"image_arrays: {str(path)!r} lacks the arrays {absent}; it holds {held.files}, and an "
                             f"image_arrays file holds {list(ARRAY_NAMES)}")
        load = {name: (lambda name=name: held[name]) for name in ARRAY_NAMES}
    else:
        raise _missing("image_arrays", str(path), "an .npz file holding X_train, y_train, X_test, y_test, or a folder "
                       "of those four .npy files")
    try:
        return {name: read() for name, read in load.items()}
    except ValueError as err:  # an object array (a pickle) in an .npy file
        raise ValueError(f"image_arrays: cannot read the arrays of {str(path)!r} without pickles: {err}") from None


def image_layout(shape: tuple, name: str = "X") -> str:
    """How an array of images is laid out: "NHW" (grey), "NHWC" or "NCHW" (1 or 3 channels).

    Channels first or last is told by which axis holds 1 or 3 values; when both could,
    by which layout makes the images square, channels first when both do (3x3 images
    of 3 channels).

    Parameters
    ----------
    shape : tuple
        The array's shape.
    name : str
        The array's name, for the error message.

    Returns
    -------
    str
        "NHW", "NHWC" or "NCHW".

    Raises
    ------
    ValueError
        A shape that is none of those, or that both channel layouts fit.
    """
    if len(shape) == 3 and min(shape[1:]) > 0:
        return "NHW"
    if len(shape) != 4 or 0 in shape[1:]:
        raise ValueError(f"{name} must hold images (N, H, W), (N, H, W, C) or (N, C, H, W) with C 1 or 3, got shape "
                         f"{tuple(shape)}")
    last, first = shape[3] in (1, 3), shape[1] in (1, 3)
    if last and first:  # both fit: the layout whose images are square (both square: torch's, channels first)
        first = shape[2] == shape[3]
        last = not first and shape[1] == shape[2]
    if last == first:
        raise ValueError(f"{name} has shape {tuple(shape)}: channels first (N, C, H, W) or last (N, H, W, C) cannot be "
                         "told apart (C must be 1 or 3); transpose it to (N, C, H, W) with square images")
    return "NHWC" if last else "NCHW"


def array_pool(images: np.ndarray, labels: np.ndarray, name: str = "X") -> tuple[torch.Tensor, np.ndarray]:
    """Images as a pool holds them: (N, C, H, W) uint8, or float32 in [0, 1], and int64 labels.

    Parameters
    ----------
    images : numpy.ndarray
        (N, H, W), (N, H, W, C) or (N, C, H, W), C 1 or 3; uint8 or floating point in [0, 1].
    labels : numpy.ndarray
        (N,) integer classes.
    name : str
        The images' name, for error messages (the labels' is its ``y_`` counterpart).

    Returns
    -------
    images : torch.Tensor
        (N, C, H, W), uint8 or float32.
    labels : numpy.ndarray
        (N,) int64.

    Raises
    ------
    ValueError
        A layout ``image_layout`` refuses, another dtype, floats outside [0, 1] or not finite,
        labels that are not N integers.
    """
    images, labels = np.asarray(images), np.asarray(labels)
    label_name = name.replace("X", "y", 1)
    layout = image_layout(images.shape, name)
    if images.dtype != np.uint8 and not np.issubdtype(images.dtype, np.floating):
        raise ValueError(f"{name} holds {images.dtype} values; images are uint8 (0..255) or floating point in [0, 1]: "
                         f"convert it (e.g. {name}.astype(numpy.uint8) for pixels 0..255)")
    if images.dtype != np.uint8:
        if not np.isfinite(images).all():
            raise ValueError(f"{name} holds NaN or infinite values")
        low, high = float(images.min()), float(images.max())
        if low < 0 or high > 1:
            raise ValueError(f"{name} holds floats in [{low:g}, {high:g}]; float images must lie in [0, 1] "
                             "(divide pixels 0..255 by 255, or give them as uint8)")
        images = images.astype(np.float32, copy=False)
    if labels.ndim != 1 or len(labels) != len(images):
        raise ValueError(f"{label_name} must hold one class per image of {name} ({len(images)}), got shape "
                         f"{labels.shape}")
    if not np.issubdtype(labels.dtype, np.integer) or (labels < 0).any():
        raise ValueError(f"{label_name} must hold classes as non-negative integers, got {labels.dtype} values"
                         + ("" if not np.issubdtype(labels.dtype, np.integer) else " below 0"))
    tensor = torch.from_numpy(np.ascontiguousarray(images))
    tensor = {"NHW": lambda t: t[:, None], "NHWC": lambda t: t.permute(0, 3, 1, 2),
              "NCHW": lambda t: t}[layout](tensor).contiguous()
    return tensor, labels.astype(np.int64)


def image_arrays(path, name: str = "image_arrays", classes: list | None = None) -> Source:
    """Images held as arrays: an ``.npz`` file, or a folder of ``.npy`` files, of
    ``X_train``, ``y_train``, ``X_test`` and ``y_test``.

    Images are (N, H, W) grey, (N, H, W, C) or (N, C, H, W) with C 1 or 3 (``image_layout``),
    uint8 pixels or floats in [0, 1]; labels integer classes. They go through the tensor
    pipeline, whose batches are sliced whole. The fetch script's ``cifar10.npz`` and
    ``fashion_mnist.npz`` are such files (``cifar10(root)`` reads the first).

    Parameters
    ----------
    path : str or pathlib.Path
        The ``.npz`` file or the folder.
    name : str
        The source's name: "image_arrays", or a data set's whose statistics and
        augmentation apply ("cifar10").
    classes : list or None
        The class names (None: the class indices, 0 to the largest label).

    Returns
    -------
    Source
        The train and test pools with their labels.

    Raises
    ------
    ValueError
        A missing file or array, or arrays ``array_pool`` refuses; train and test images of
        different channels or sizes.
    """
    arrays = _read_arrays(Path(path))
    train, train_labels = array_pool(arrays["X_train"], arrays["y_train"], "X_train")
    test, test_labels = array_pool(arrays["X_test"], arrays["y_test"], "X_test")
    if train.shape[1:] != test.shape[1:]:
        raise ValueError(f"image_arrays: X_train holds images of shape {tuple(train.shape[1:])} and X_test of "
                         f"{tuple(test.shape[1:])} (C, H, W); both pools need the same")
    channels, height, width = train.shape[1:]
    if channels not in (1, 3):
        raise ValueError(f"image_arrays: images of {channels} channels; grey (1) or RGB (3) are taken")
    if height != width:
        raise ValueError(f"image_arrays: images of {height}x{width} pixels; square images are taken")
    if classes is None:
        classes = list(range(int(max(train_labels.max(), test_labels.max())) + 1))
    return Source(name, TensorImages(train, train_labels), TensorImages(test, test_labels), train_labels, test_labels,
                  list(classes), int(channels), int(height), None if name in STATS else channel_stats(train))


def channel_stats(images: torch.Tensor, chunk: int = 4096) -> tuple[tuple[float, ...], tuple[float, ...]]:
    """The mean and standard deviation per channel of images' pixels in [0, 1] (uint8 scaled by
    1/255), over every image and pixel, as ``STATS`` holds them (a constant image: std 1).

    Parameters
    ----------
    images : torch.Tensor
        (N, C, H, W), uint8 or float in [0, 1].
    chunk : int
        Images summed at a time (float64 sums; the images are not copied whole).

    Returns
    -------
    tuple
        (mean, std), each a tuple of C floats.
    """
    total = torch.zeros(images.shape[1], dtype=torch.float64)
    squares = torch.zeros_like(total)
    for start in range(0, len(images), chunk):
        part = images[start:start + chunk].double()
        part = part / 255 if images.dtype == torch.uint8 else part
        total += part.sum((0, 2, 3))
        squares += part.square().sum((0, 2, 3))
    count = images.numel() / images.shape[1]
    mean = total / count
    std = (squares / count - mean.square()).clamp_min(0).sqrt()
    std = torch.where(std > 1e-6, std, torch.ones_like(std))
    return tuple(float(m) for m in mean), tuple(float(s) for s in std)


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
        "digits", "fashion_mnist", "cifar10", "cifar100", "imagenet_lt", "image_folder" or
        "image_arrays".
    root : str, pathlib.Path or None
        The data root (every source but digits needs one; for "image_arrays" the ``.npz``
        file or the folder of ``.npy`` files).
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
        raise ValueError(f"{name} needs a data root (--root)" + (": an .npz file or a folder of .npy files"
                                                                  if name == "image_arrays" else ""))
    if name == "image_arrays":
        return image_arrays(root)
    if not os.path.isdir(root):
        raise ValueError(f"{name}: the data root {str(root)!r} does not exist")
    if name == "cifar100":
        return cifar100(root, fine_labels)
    if name == "imagenet_lt":
        return imagenet_lt(root, split_dir)
    return {"fashion_mnist": fashion_mnist, "cifar10": cifar10, "image_folder": image_folder}[name](root)
