"""A one-vs-rest task: train / validation / test image sets with targets +1
(normal) and -1 (anomaly), their transforms and augmentation."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch
from torch.utils.data import Dataset

from . import protocols, sources
from .augment import BatchAugment
from .preprocessing import Preprocessing, TensorTransform, float_images  # noqa: F401 - TensorTransform: tasks' public name
from .protocols import Split

# Augmentation as in the paper: random crop with padding and horizontal flip for
# CIFAR, none for the grey-scale sets, flips for natural images; none for images a
# user holds as arrays (image_arrays: nothing says what their content allows).
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

    def augmented(self) -> Dataset:
        """The same images under the training augmentation.

        Returns
        -------
        TaskImages or AugmentedImages
            The augmented view (this dataset when there is no augmentation): for a tensor
            pool an ``AugmentedImages`` (batches augmented whole by a ``BatchAugment``).
        """
        if self.augment is None:
            return self
        if isinstance(self.augment, BatchAugment):
            return AugmentedImages(self)
        return TaskImages(self.pool, self.split, self.augment, preprocessing=self.preprocessing)


class TensorTaskImages(TaskImages):
    """A split of a tensor pool (``sources.TensorImages``): besides row by row, many rows in one
    call (``take``), preprocessed as one batch, so that the trainer slices batches whole
    (``dlmsvdd.training.batches``).

    Parameters
    ----------
    pool : dlmsvdd.data.sources.TensorImages
        The source's pool, its images one tensor.
    split : dlmsvdd.data.protocols.Split
        The indices taken and their targets (+1 / -1).
    transform : callable
        Raw images to network inputs; its ``module`` takes a whole batch.
    augment : dlmsvdd.data.augment.BatchAugment or None
        The training augmentation, on whole batches (None: none).
    preprocessing : dlmsvdd.data.preprocessing.Preprocessing or None
        What ``transform`` does, as the record a trained model keeps.
    """

    def take(self, positions) -> tuple[torch.Tensor, torch.Tensor]:
        """The network inputs of the rows at ``positions`` (0 to ``len(self) - 1``) and their targets.

        Parameters
        ----------
        positions : array-like
            Positions in the split, int64.

        Returns
        -------
        inputs : torch.Tensor
            (n, C, H, W) float32, as ``self[i]`` gives each.
        targets : torch.Tensor
            +1 / -1, int64.
        """
        positions = np.asarray(positions, dtype=np.int64)
        rows = torch.as_tensor(np.asarray(self.split.indices)[positions], dtype=torch.long)
        return (self.transform.module(self.pool.images[rows]),
                torch.as_tensor(np.asarray(self.split.targets)[positions], dtype=torch.long))


class AugmentedImages(Dataset):
    """The training view of a tensor task's images: their network inputs under ``batch_augment``.

    Parameters
    ----------
    unaugmented : TensorTaskImages
        The same rows without augmentation; its ``augment`` is the ``BatchAugment``.

    Attributes
    ----------
    batch_augment : dlmsvdd.data.augment.BatchAugment
        The augmentation, which a trainer may also run on its device on batches of
        ``unaugmented.take``.
    unaugmented : TensorTaskImages
        The rows without augmentation.
    """

    def __init__(self, unaugmented: TensorTaskImages):
        if not isinstance(unaugmented.augment, BatchAugment):
            raise ValueError("AugmentedImages needs a tensor task whose augment is a BatchAugment")
        self.unaugmented, self.batch_augment = unaugmented, unaugmented.augment
        self.preprocessing = unaugmented.preprocessing

    def __len__(self):
        return len(self.unaugmented)

    def __getitem__(self, i):
        inputs, targets = self.take(np.array([i]))
        return inputs[0], int(targets[0])

    @property
    def targets(self) -> np.ndarray:
        """The targets, +1 normal and -1 anomaly."""
        return self.unaugmented.targets

    def take(self, positions, generator: torch.Generator | None = None) -> tuple[torch.Tensor, torch.Tensor]:
        """The rows at ``positions``, augmented on the CPU, and their targets.

        Parameters
        ----------
        positions : array-like
            Positions in the split, int64.
        generator : torch.Generator or None
            The CPU generator of the crops and flips (None: torch's default).

        Returns
        -------
        inputs : torch.Tensor
            (n, C, H, W), each row cropped and flipped at random.
        targets : torch.Tensor
            +1 / -1, int64.
        """
        inputs, targets = self.unaugmented.take(positions)
        return self.batch_augment(inputs, generator), targets

    def augmented(self) -> "AugmentedImages":
        """This view: it is already the augmented one.

        Returns
        -------
        AugmentedImages
            ``self``.
        """
        return self


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
        set's own statistics (``source.stats``, else ``sources.STATS``;
        ImageNet's for sources without either).

    Returns
    -------
    dlmsvdd.data.preprocessing.Preprocessing
        The preprocessing record.
    """
    if imagenet_stats:
        mean, std = sources.IMAGENET_STATS
    else:
        mean, std = source.stats or sources.STATS.get(source.name, sources.IMAGENET_STATS)
    if len(mean) != channels:
        mean, std = (mean * channels)[:channels], (std * channels)[:channels]
    size = image_size or (224 if source.image_size is None else None)  # natural images need one size to batch
    native = None if source.image_size is None else (source.image_size, source.image_size)
    pipeline = "tensor" if isinstance(source.train, sources.TensorImages) else "pil"
    return Preprocessing(source.channels, native, channels, None if size is None else (size, size), tuple(mean),
                         tuple(std), pipeline)


def _transforms(source: sources.Source, preprocessing: Preprocessing):
    """(eval transform, training augmentation or None): a torchvision transform of PIL images,
    or for the tensor pipeline a ``BatchAugment`` of batches of network inputs."""
    kind = AUGMENTATION.get(source.name)
    if kind is None:
        return preprocessing.transform(), None
    if preprocessing.pipeline == "tensor":
        return preprocessing.transform(), BatchAugment.for_normalisation(kind, preprocessing.mean, preprocessing.std)
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
        The training augmentation: a torchvision transform of PIL images, a
        ``dlmsvdd.data.augment.BatchAugment`` for tensor sources, or None (grey-scale sets).
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
    images = TensorTaskImages if preprocessing.pipeline == "tensor" else TaskImages
    return Task(*(images(pool, split, transform, augment if split is train else None, preprocessing)
                  for pool, split in ((source.train, train), (source.train, val), (source.test, test))),
                normal_class, name)


def pixels(split: TaskImages) -> tuple[np.ndarray, np.ndarray]:
    """The raw pixels of a split of a tensor source (digits, image arrays), flattened, and its targets.

    Parameters
    ----------
    split : TaskImages
        A set of a task on a tensor source.

    Returns
    -------
    X : numpy.ndarray
        (n, C x H x W) pixels in [0, 1], float64 (digits: (n, 64)).
    targets : numpy.ndarray
        +1 / -1.
    """
    images = split.pool.images[split.split.indices]
    return float_images(images, images.shape[1]).flatten(1).double().numpy(), split.targets
