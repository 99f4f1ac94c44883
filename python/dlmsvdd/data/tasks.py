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
    """Items (image tensor, target) of a split of a source's pool."""

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
        return self.split.targets

    def augmented(self) -> "TaskImages":
        """The same images under the training augmentation (itself when there is none)."""
        return self if self.augment is None else TaskImages(self.pool, self.split, self.augment,
                                                            preprocessing=self.preprocessing)


@dataclass
class Task:
    train: TaskImages
    val: TaskImages
    test: TaskImages
    normal_class: int
    class_name: str

    def summary(self) -> dict:
        count = lambda s, t: int((s.targets == t).sum())  # noqa: E731
        return {"normal_class": self.normal_class, "class_name": str(self.class_name),
                **{f"{name}_{kind}": count(s, t) for name, s in (("train", self.train), ("val", self.val),
                                                                  ("test", self.test))
                   for kind, t in (("normal", 1), ("anomalous", -1))}}


def preprocessing_for(source: sources.Source, channels: int, image_size: int | None,
                      imagenet_stats: bool) -> Preprocessing:
    """How the source's raw images become the network's input. imagenet_stats:
    normalise as the pretrained backbone expects; otherwise the data set's own
    statistics (ImageNet's for sources without them)."""
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
    """(eval transform, training augmentation or None), from ``preprocessing_for``."""
    return _transforms(source, preprocessing_for(source, channels, image_size, imagenet_stats))


def make_task(source: sources.Source, normal_class: int, ratio: float | None = 0.1, rho: float | None = None,
              seed: int = 0, val_fraction: float = 0.2, channels: int | None = None, image_size: int | None = None,
              imagenet_stats: bool = False) -> Task:
    """One-vs-rest task on a source. ratio: labelled anomalies per normal training
    sample (None: all other classes, as in the long-tailed protocol); rho: build
    the long-tailed pool first (then ratio is ignored: the pool's other classes
    are the anomalies). Validation is a stratified val_fraction of the pool."""
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
    """The raw pixels (in [0, 1]) of a digits split, flattened, and its targets."""
    return split.pool.images[split.split.indices].flatten(1).double().numpy(), split.targets
