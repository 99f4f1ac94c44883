"""A one-vs-rest task: train / validation / test image sets with targets +1
(normal) and -1 (anomaly), their transforms and augmentation."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch
import torch.nn.functional as F
from torch.utils.data import Dataset

from . import protocols, sources
from .protocols import Split

# Augmentation as in the paper: random crop with padding and horizontal flip for
# CIFAR, none for the grey-scale sets, flips for natural images.
AUGMENTATION = {"cifar10": "crop_flip", "cifar100": "crop_flip", "imagenet_lt": "flip", "image_folder": "flip"}


class TaskImages(Dataset):
    """Items (image tensor, target) of a split of a source's pool."""

    def __init__(self, pool: Dataset, split: Split, transform, augment=None):
        self.pool, self.split, self.transform, self.augment = pool, split, transform, augment

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
        return self if self.augment is None else TaskImages(self.pool, self.split, self.augment)


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


class TensorTransform:
    """For tensor sources: normalise, repeat grey to RGB, resize; no torchvision needed."""

    def __init__(self, mean, std, channels: int, size: int | None):
        self.mean = torch.tensor(mean).view(-1, 1, 1)
        self.std = torch.tensor(std).view(-1, 1, 1)
        self.channels, self.size = channels, size

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        x = x.expand(self.channels, -1, -1) if x.shape[0] != self.channels else x
        if self.size is not None and x.shape[-1] != self.size:
            x = F.interpolate(x[None], size=(self.size, self.size), mode="bilinear", align_corners=False)[0]
        return (x - self.mean.expand(self.channels, 1, 1)) / self.std.expand(self.channels, 1, 1)


def _pil_transforms(source: sources.Source, mean, std, channels: int, size: int | None):
    T = sources.vision("torchvision.transforms", f"the {source.name} data set's image transforms")

    resize = [T.Resize((size, size))] if size is not None else []
    grey = [T.Grayscale(channels)] if source.channels != channels else []
    finish = [*grey, *resize, T.ToTensor(), T.Normalize(mean, std)]
    kind = AUGMENTATION.get(source.name)
    augment = None
    if kind == "crop_flip":
        augment = T.Compose([T.RandomCrop(source.image_size, padding=4), T.RandomHorizontalFlip(), *finish])
    elif kind == "flip":
        augment = T.Compose([T.RandomHorizontalFlip(), *finish])
    return T.Compose(finish), augment


def transforms_for(source: sources.Source, channels: int, image_size: int | None, imagenet_stats: bool):
    """(eval transform, training augmentation or None). imagenet_stats: normalise
    as the pretrained backbone expects; otherwise the data set's own statistics."""
    mean, std = sources.IMAGENET_STATS if imagenet_stats or source.name not in sources.STATS else sources.STATS[source.name]
    if len(mean) != channels:
        mean, std = (mean * channels)[:channels], (std * channels)[:channels]
    size = image_size or (224 if source.image_size is None else None)  # natural images need one size to batch
    if isinstance(source.train, sources.TensorImages):
        return TensorTransform(mean, std, channels, size), None
    return _pil_transforms(source, mean, std, channels, size)


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
    transform, augment = transforms_for(source, channels or source.channels, image_size, imagenet_stats)
    name = source.classes[normal_class] if 0 <= normal_class < len(source.classes) else normal_class
    return Task(TaskImages(source.train, train, transform, augment), TaskImages(source.train, val, transform),
                TaskImages(source.test, test, transform), normal_class, name)


def pixels(split: TaskImages) -> tuple[np.ndarray, np.ndarray]:
    """The raw pixels (in [0, 1]) of a digits split, flattened, and its targets."""
    return split.pool.images[split.split.indices].flatten(1).double().numpy(), split.targets
