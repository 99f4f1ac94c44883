"""What the network is given of an image: the raw image's channels and size,
the channel conversion, the resize and the normalisation, as one record.

A task builds its transforms from it, a trained model stores it (so scoring raw
images and the exported scorer need no training code to know how the training
images were prepared), and ``Preprocess`` runs it on batches of raw images in
plain torch operations that TorchScript and ONNX export.

Raw images are uint8 (0..255) or floating point in [0, 1], (N, C, H, W), or
(N, H, W) for grey images.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import Dataset

from .sources import vision

PIPELINES = ("tensor", "pil")


@dataclass(frozen=True)
class Preprocessing:
    """channels_in, size_in: the raw images' channels and (H, W) (None: any
    size, natural images, resized); channels, size: what the network takes
    (size None: the raw size); mean, std: per network channel; pipeline:
    "tensor" (torch operations on float images, as ``Preprocess``) or "pil"
    (torchvision on PIL images: the resize runs on uint8 pixels)."""

    channels_in: int
    size_in: tuple[int, int] | None
    channels: int
    size: tuple[int, int] | None
    mean: tuple[float, ...]
    std: tuple[float, ...]
    pipeline: str = "tensor"

    input_dtypes = ("float32", "uint8")  # what an export may take

    def __post_init__(self):
        if self.pipeline not in PIPELINES:
            raise ValueError(f"pipeline must be one of {PIPELINES}, got {self.pipeline!r}")
        if self.channels != self.channels_in and (self.channels_in, self.channels) != (1, 3):
            raise ValueError(f"only grey images are converted (to RGB), not {self.channels_in} channels to "
                             f"{self.channels}")
        if len(self.mean) != self.channels or len(self.std) != self.channels:
            raise ValueError(f"mean and std need {self.channels} values, got {self.mean} and {self.std}")
        if self.size_in is None and self.size is None:
            raise ValueError("images of any size must be resized to one size (size=(H, W))")

    @classmethod
    def identity(cls, shape) -> "Preprocessing":
        """Images (C, H, W) given to the network as they are (uint8 scaled to [0, 1])."""
        c, h, w = (int(s) for s in shape)
        return cls(c, (h, w), c, None, (0.0,) * c, (1.0,) * c)

    @property
    def any_size(self) -> bool:
        """Whether raw images of any size are taken (and resized)."""
        return self.size_in is None

    @property
    def float_range(self) -> tuple[float, float]:
        """The values raw float images may hold: [0, 1] (ToTensor's range, what a
        task's images are), or any for the identity record (a model fitted on
        arrays: its floats went to the network as they were, whatever their range)."""
        identity = self.size_in is not None and self == Preprocessing.identity((self.channels_in, *self.size_in))
        return (-float("inf"), float("inf")) if identity else (0.0, 1.0)

    @property
    def input_shape(self) -> tuple[int, ...]:
        """The network's input (C, H, W)."""
        return (self.channels, *(self.size or self.size_in))

    def expects(self) -> str:
        """What raw images must look like, in words (error messages, --help, ONNX metadata)."""
        if self.size_in is None:
            shape, size = f"(N, {self.channels_in}, H, W)", f" of any size (resized to {self.size[0]}x{self.size[1]})"
        else:
            shape, size = f"(N, {self.channels_in}, {self.size_in[0]}, {self.size_in[1]})", ""
            if self.channels_in == 1:
                shape += f" or (N, {self.size_in[0]}, {self.size_in[1]})"
        kind = {1: "grey", 3: "RGB"}.get(self.channels_in, f"{self.channels_in}-channel")
        values = "uint8 or float in [0, 1]" if self.float_range == (0.0, 1.0) else "uint8 or any finite float"
        return f"{kind} images {shape}{size}, {values}"

    def check_size(self, height: int, width: int, name: str = "image") -> None:
        """ValueError when a raw image of this size does not fit."""
        if self.size_in is not None and (height, width) != tuple(self.size_in):
            raise ValueError(f"{name} is {height}x{width} pixels; the model expects {self.expects()}")

    def example(self, batch: int, dtype: torch.dtype) -> torch.Tensor:
        """A batch of raw images of a size the model takes (for tracing an export)."""
        height, width = self.size_in or self.size
        return torch.zeros(batch, self.channels_in, height, width, dtype=dtype)

    def module(self) -> "Preprocess":
        return Preprocess(self)

    def transform(self):
        """The evaluation transform of one raw image: a PIL image for the "pil"
        pipeline (torchvision), a (C, H, W) tensor for the "tensor" one."""
        if self.pipeline == "tensor":
            return TensorTransform(self)
        return self.pil_transform()

    def pil_transform(self, augmentation: list | None = None):
        """torchvision's channel conversion, resize, ToTensor and Normalize,
        after the given augmentation (a list of PIL transforms)."""
        T = vision("torchvision.transforms", "images read through Pillow")
        grey = [T.Grayscale(self.channels)] if self.channels != self.channels_in else []
        resize = [T.Resize(tuple(self.size))] if self.size is not None else []
        return T.Compose([*(augmentation or []), *grey, *resize, T.ToTensor(), T.Normalize(self.mean, self.std)])

    def load_image(self, path):
        """A raw image file (PNG, JPEG, anything Pillow reads) as the model's
        pipeline takes it: a PIL image (grey or RGB, as the training images
        were) or a uint8 (C, H, W) tensor."""
        from PIL import Image

        with Image.open(path) as img:
            img = img.convert("L" if self.channels_in == 1 else "RGB")
        if self.pipeline == "pil":
            return img
        pixels = torch.from_numpy(np.array(img, dtype=np.uint8))
        return pixels[None] if pixels.ndim == 2 else pixels.permute(2, 0, 1).contiguous()

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, values: dict) -> "Preprocessing":
        values = dict(values)
        for key in ("size_in", "size", "mean", "std"):
            if values.get(key) is not None:
                values[key] = tuple(values[key])
        return cls(**values)


def record_from_dict(values: dict):
    """The preprocessing record a model stored: a vector record (``kind``
    "vectors", ``dlmsvdd.data.vectors``) or an image one (no kind)."""
    from .vectors import KIND, VectorPreprocessing

    kind = values.get("kind")
    if kind not in (None, KIND):
        raise ValueError(f"unknown preprocessing kind {kind!r}: this dlmsvdd knows {KIND!r} (feature vectors) and "
                         "records without a kind (images)")
    return VectorPreprocessing.from_dict(values) if kind == KIND else Preprocessing.from_dict(values)


class ImageFiles(Dataset):
    """Items (network input, +1) of image files, through a model's stored
    preprocessing (the transform its training images went through)."""

    def __init__(self, paths, spec: Preprocessing):
        from PIL import Image, UnidentifiedImageError

        self.paths, self.spec, self.transform = [Path(p) for p in paths], spec, spec.transform()
        for path in self.paths:  # the headers only: every file readable and of a size the model takes
            try:
                with Image.open(path) as img:
                    spec.check_size(img.height, img.width, str(path))
            except (UnidentifiedImageError, OSError) as err:
                raise ValueError(f"cannot read {str(path)!r} as an image: {err}") from None

    def __len__(self):
        return len(self.paths)

    def __getitem__(self, i):
        return self.transform(self.spec.load_image(self.paths[i])), 1


def image_files(names) -> list[Path]:
    """The image files named: files as given, folders searched (recursively,
    sorted) for the files Pillow reads by their extension."""
    try:
        from PIL import Image
    except ImportError:
        raise ValueError("reading image files needs Pillow: pip install pillow") from None

    extensions = {e.lower() for e in Image.registered_extensions()}
    files = []
    for name in names:
        path = Path(name)
        if path.is_dir():
            found = sorted(p for p in path.rglob("*") if p.is_file() and p.suffix.lower() in extensions)
            if not found:
                raise ValueError(f"no image files in {str(path)!r}")
            files += found
        elif path.is_file():
            files.append(path)
        else:
            raise ValueError(f"{str(path)!r} is neither an image file nor a folder")
    return files


def float_images(images: torch.Tensor, channels: int) -> torch.Tensor:
    """uint8 pixels to [0, 1] as torchvision's ToTensor (x / 255), other
    dtypes to float32; (N, H, W) to (N, 1, H, W) when the images are grey."""
    if images.dtype == torch.uint8:
        images = images.float().div(255)
    elif images.dtype != torch.float32:
        images = images.float()
    if images.dim() == 3 and channels == 1:
        images = images.unsqueeze(1)
    return images


def _round_to_pixels(x: torch.Tensor) -> torch.Tensor:
    """What Pillow's 8-bit resample stores of a [0, 1] value: the nearest
    pixel level, halves rounded up (its fixed-point sums; the 1e-3 absorbs
    float32 rounding of exact halves)."""
    return torch.floor(x * 255.0 + (0.5 + 1e-4)) / 255.0


class Preprocess(nn.Module):
    """Raw images -> the network's input, in plain torch operations (scriptable
    and exportable): checks the shape, scales uint8 to [0, 1], converts grey to
    RGB, resizes (bilinear) and normalises. Under the "pil" pipeline the
    resize runs like Pillow's: antialiased, width first, each pass rounded to
    uint8 pixels."""

    def __init__(self, spec: Preprocessing):
        super().__init__()
        self.channels_in = spec.channels_in
        self.channels = spec.channels
        self.any_size = spec.size_in is None
        self.height_in, self.width_in = spec.size_in or (0, 0)
        self.height, self.width = spec.size or spec.size_in
        # decided here, not on the input's shape, so that exports hold no shape-dependent branch:
        # images of any size are always resized (to their own size it changes nothing)
        self.resize_height = self.any_size or self.height != self.height_in
        self.resize_width = self.any_size or self.width != self.width_in
        self.pil = spec.pipeline == "pil"
        self.expects = spec.expects()
        self.register_buffer("mean", torch.tensor(spec.mean, dtype=torch.float32).view(1, -1, 1, 1))
        self.register_buffer("std", torch.tensor(spec.std, dtype=torch.float32).view(1, -1, 1, 1))

    def _check(self, x: torch.Tensor) -> None:
        shape = str(list(x.shape))
        if x.dim() != 4:
            raise ValueError("got an array of shape " + shape + "; the model expects " + self.expects)
        if x.shape[1] != self.channels_in:
            raise ValueError("got images of shape " + shape + " (" + str(x.shape[1]) + " channels); the model "
                             "expects " + self.expects)
        if not self.any_size and (x.shape[2] != self.height_in or x.shape[3] != self.width_in):
            raise ValueError("got images of shape " + shape + "; the model expects " + self.expects)

    def _resize(self, x: torch.Tensor) -> torch.Tensor:
        if not self.pil:
            return F.interpolate(x, size=(self.height, self.width), mode="bilinear", align_corners=False)
        if self.resize_width:
            x = _round_to_pixels(F.interpolate(x, size=(x.shape[2], self.width), mode="bilinear",
                                               align_corners=False, antialias=True))
        if self.resize_height:
            x = _round_to_pixels(F.interpolate(x, size=(self.height, self.width), mode="bilinear",
                                               align_corners=False, antialias=True))
        return x

    def forward(self, images: torch.Tensor) -> torch.Tensor:
        x = float_images(images, self.channels_in)
        self._check(x)
        if self.channels != self.channels_in:  # grey to RGB, the one conversion there is
            x = x.expand(-1, self.channels, -1, -1)
        if self.resize_height or self.resize_width:
            x = self._resize(x)
        return (x - self.mean) / self.std


class TensorTransform:
    """One raw (C, H, W) image tensor through ``Preprocess`` (the "tensor" pipeline's transform)."""

    def __init__(self, spec: Preprocessing):
        self.spec = spec
        self.module = Preprocess(spec)

    def __call__(self, image: torch.Tensor) -> torch.Tensor:
        return self.module(image[None])[0]
