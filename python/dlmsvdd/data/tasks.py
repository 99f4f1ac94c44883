"""A one-vs-rest task: train / validation / test image sets with targets +1
(normal) and -1 (anomaly), their transforms and augmentation."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from torch.utils.data import Dataset

from . import protocols, sources
from .preprocessing import Preprocessing, TensorTransform  # noqa: F401 - TensorTransform: tasks' public name
from .protocols import Split

# Augmentation as in the paper: random crop with padding and horizontal flip for
# CIFAR, none for the grey-scale sets, flips for natural images.
AUGMENTATION = {"cifar10": "crop_flip", "cifar100": "crop_flip", "imagenet_lt": "flip", "image_folder": "flip"}


class TaskImages(Dataset):
    """A dataset of (image tensor, target): a split of a source's pool, transformed.

    Parameters
    ----------
    pool : torch.utils.data.Dataset
        The source's pool of (raw image, class).
    split : dlmsvdd.data.protocols.Split
        The indices taken and their targets (+1 / -1).
    transform : callable
        Raw image to network input.
    augment : callable or None
        The training augmentation's transform (None: none).
    preprocessing : dlmsvdd.data.preprocessing.Preprocessing or None
        What ``transform`` does, as the record a trained model keeps.
    """

    def __init__(self, pool: Dataset, split: Split, transform, augment=None, preprocessing: Preprocessing | None = None):
        self.pool, self.split, self.transform, self.augment = pool, split, transform, augment
        self.preprocessing = preprocessing  # what transform does, as a record the trained model keeps

    def __len__(self):
        return len(self.split)

    def __getitem__(self, i):
        image, _ = self.pool[int(self.split.indices[i])]
        return self.transform(image), int(self.split.targets[i])

    @property
    def targets(self) -> np.ndarray:
        """The targets, +1 normal and -1 anomaly."""
        return self.split.targets

    def augmented(self) -> "TaskImages":
        """The same images under the training augmentation.

        Returns
        -------
        TaskImages
            The augmented view (this dataset when there is no augmentation).
        """
        return self if self.augment is None else TaskImages(self.pool, self.split, self.augment,
                                                            preprocessing=self.preprocessing)


@dataclass
class Task:
    """A one-vs-rest task: training, validation and test sets with targets +1 / -1.

    Parameters
    ----------
    train, val, test : TaskImages
        The three sets (``train`` with the augmentation).
    normal_class : int
        The normal class.
    class_name : str
        Its name.
    """

    train: TaskImages
    val: TaskImages
    test: TaskImages
    normal_class: int
    class_name: str

    def summary(self) -> dict:
        """The task's sizes.

        Returns
        -------
        dict
            ``normal_class``, ``class_name`` and the normal and anomalous counts
            of each set (``train_normal``, ``train_anomalous``, ...).
        """
        count = lambda s, t: int((s.targets == t).sum())  # noqa: E731
        return {"normal_class": self.normal_class, "class_name": str(self.class_name),
                **{f"{name}_{kind}": count(s, t) for name, s in (("train", self.train), ("val", self.val),
                                                                  ("test", self.test))
                   for kind, t in (("normal", 1), ("anomalous", -1))}}


def preprocessing_for(source: sources.Source, channels: int, image_size: int | None,
                      imagenet_stats: bool) -> Preprocessing:
    """How the source's raw images become the network's input.

    Parameters
    ----------
    source : dlmsvdd.data.sources.Source
        The data set.
    channels : int
        The network's input channels.
    image_size : int or None
        Resize to this size (None: the native size, or 224 for natural images).
    imagenet_stats : bool
        Normalise as a pretrained backbone expects; otherwise with the data
        set's own statistics (ImageNet's for sources without them).

    Returns
    -------
    dlmsvdd.data.preprocessing.Preprocessing
        The preprocessing record.
    """
    mean, std = sources.IMAGENET_STATS if imagenet_stats or source.name not in sources.STATS else sources.STATS[source.name]
    if len(mean) != channels:
        mean, std = (mean * channels)[:channels], (std * channels)[:channels]
    size = image_size or (224 if source.image_size is None else None)  # natural images need one size to batch
    native = None if source.image_size is None else (source.image_size, source.image_size)
    pipeline = "tensor" if isinstance(source.train, sources.TensorImages) else "pil"
    return Preprocessing(source.channels, native, channels, None if size is None else (size, size), tuple(mean),
                         tuple(std), pipeline)


def _transforms(source: sources.Source, preprocessing: Preprocessing):
    """(eval transform, training augmentation or None: the tensor sources have none)."""
    kind = AUGMENTATION.get(source.name)
    if preprocessing.pipeline != "pil" or kind is None:
        return preprocessing.transform(), None
    T = sources.vision("torchvision.transforms", f"the {source.name} data set's augmentation")
    steps = [T.RandomCrop(source.image_size, padding=4)] if kind == "crop_flip" else []
    return preprocessing.transform(), preprocessing.pil_transform([*steps, T.RandomHorizontalFlip()])


def transforms_for(source: sources.Source, channels: int, image_size: int | None, imagenet_stats: bool):
    """The evaluation transform and the training augmentation, from ``preprocessing_for``.

    Parameters
    ----------
    source : dlmsvdd.data.sources.Source
        The data set.
    channels : int
        The network's input channels.
    image_size : int or None
        As in ``preprocessing_for``.
    imagenet_stats : bool
        As in ``preprocessing_for``.

    Returns
    -------
    transform : callable
        Raw image to network input.
    augment : callable or None
        The training augmentation (None for tensor sources and grey-scale sets).
    """
    return _transforms(source, preprocessing_for(source, channels, image_size, imagenet_stats))


def make_task(source: sources.Source, normal_class: int, ratio: float | None = 0.1, rho: float | None = None,
              seed: int = 0, val_fraction: float = 0.2, channels: int | None = None, image_size: int | None = None,
              imagenet_stats: bool = False) -> Task:
    """A one-vs-rest task on a source: training, validation and test sets.

    Parameters
    ----------
    source : dlmsvdd.data.sources.Source
        The data set, such as ``datasets.digits()``.
    normal_class : int
        The normal class.
    ratio : float or None
        Labelled anomalies per normal training sample (None: all other
        classes, as in the long-tailed protocol).
    rho : float or None
        Build the long-tailed pool first (then ``ratio`` is ignored: the
        pool's other classes are the anomalies).
    seed : int
        Seeds every draw and split.
    val_fraction : float
        Validation is a stratified share of the pool.
    channels : int or None
        The network's input channels (None: the source's).
    image_size : int or None
        As in ``preprocessing_for``.
    imagenet_stats : bool
        As in ``preprocessing_for``.

    Returns
    -------
    Task
        The task; its test set is the whole test pool.
    """
    protocols.check_class(source.train_labels, normal_class)
    if rho is not None:
        pool = protocols.long_tailed_pool(source.train_labels, rho, seed)
        task = protocols.one_vs_rest(source.train_labels[pool], normal_class, None, seed)
        task = Split(pool[task.indices], task.targets)
    else:
        task = protocols.one_vs_rest(source.train_labels, normal_class, ratio, seed)
    train, val = protocols.train_val_split(task, val_fraction, seed)
    test = protocols.evaluation_task(source.test_labels, normal_class)
    preprocessing = preprocessing_for(source, channels or source.channels, image_size, imagenet_stats)
    transform, augment = _transforms(source, preprocessing)
    name = source.classes[normal_class] if 0 <= normal_class < len(source.classes) else normal_class
    return Task(*(TaskImages(pool, split, transform, augment if split is train else None, preprocessing)
                  for pool, split in ((source.train, train), (source.train, val), (source.test, test))),
                normal_class, name)


def pixels(split: TaskImages) -> tuple[np.ndarray, np.ndarray]:
    """The raw pixels of a digits split, flattened, and its targets.

    Parameters
    ----------
    split : TaskImages
        A set of a digits task.

    Returns
    -------
    X : numpy.ndarray
        (n, 64) pixels in [0, 1], float64.
    targets : numpy.ndarray
        +1 / -1.
    """
    return split.pool.images[split.split.indices].flatten(1).double().numpy(), split.targets
