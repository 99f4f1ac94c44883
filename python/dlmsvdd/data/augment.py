"""The training augmentation of images held as tensors, on whole batches of network inputs.

The Pillow pipeline augments one image at a time with torchvision (``tasks._transforms``); images
held as arrays (``sources.TensorImages``: digits, ``sources.image_arrays``) go through the tensor
pipeline, whose batches are sliced whole (``dlmsvdd.training.batches``) and may live on a GPU. A
``BatchAugment`` augments such a batch in a few tensor operations, with no Python loop over its
images, on whatever device the batch is: the same augmentation as torchvision's
``RandomCrop(size, padding=4)`` then ``RandomHorizontalFlip()`` on the raw image, but applied to the
normalised network input, so the padding is the normalised value of a black pixel (``-mean / std``
per channel), which is what torchvision's zero padding becomes after ``Normalize``.

Each image gets its own crop offsets (top and left, each uniform in 0 .. 2 x padding, as
``RandomCrop``) and its own flip (probability 0.5), drawn from the generator given (on the batch's
device) so that a seeded run repeats. "flip" is the flip alone.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

KINDS = ("crop_flip", "flip")
PADDING = 4  # torchvision's RandomCrop(padding=4), as the CIFAR recipes (and the paper) crop
FLIP_PROBABILITY = 0.5


@dataclass(frozen=True)
class BatchAugment:
    """Random crop with padding and horizontal flip of a batch of network inputs.

    Parameters
    ----------
    kind : str
        "crop_flip" (a random crop of the image padded by ``padding`` on every side, then a random
        horizontal flip) or "flip" (the flip alone).
    fill : tuple of float
        The padding's value per channel: the network input of a black pixel, ``-mean / std``
        (``for_normalisation``); one value is used for every channel.
    padding : int
        Pixels of padding on each side (torchvision's RandomCrop ``padding``).
    """

    kind: str
    fill: tuple[float, ...] = (0.0,)
    padding: int = PADDING

    def __post_init__(self):
        if self.kind not in KINDS:
            raise ValueError(f"augmentation kind must be one of {KINDS}, got {self.kind!r}")
        if not isinstance(self.padding, int) or self.padding < 0:
            raise ValueError(f"padding must be a non-negative integer, got {self.padding!r}")
        object.__setattr__(self, "fill", tuple(float(v) for v in self.fill))
        if not self.fill:
            raise ValueError("fill needs one value, or one per channel")

    @classmethod
    def for_normalisation(cls, kind: str, mean, std, padding: int = PADDING) -> "BatchAugment":
        """The augmentation of inputs normalised as ``(x - mean) / std``: black pixels pad the crop.

        Parameters
        ----------
        kind : str
            "crop_flip" or "flip".
        mean, std : sequence of float
            The normalisation's per-channel values.
        padding : int
            Pixels of padding on each side.

        Returns
        -------
        BatchAugment
            The augmentation.
        """
        return cls(kind, tuple(-m / s for m, s in zip(mean, std)), padding)

    def draw(self, n: int, generator: torch.Generator | None = None, device=None) -> tuple[torch.Tensor, ...]:
        """Each image's crop offsets and flip: (top, left, flip), int64, int64 and bool tensors of
        length n on ``device`` (offsets 0 for "flip").

        Parameters
        ----------
        n : int
            The batch's images.
        generator : torch.Generator or None
            The random generator, on ``device`` (None: torch's default).
        device : torch.device or None
            Where the draws are made.

        Returns
        -------
        tuple of torch.Tensor
            top, left, flip.
        """
        span = 2 * self.padding + 1 if self.kind == "crop_flip" else 1
        top = torch.randint(0, span, (n,), generator=generator, device=device)
        left = torch.randint(0, span, (n,), generator=generator, device=device)
        flip = torch.rand(n, generator=generator, device=device) < FLIP_PROBABILITY
        return top, left, flip

    def apply(self, x: torch.Tensor, top: torch.Tensor, left: torch.Tensor, flip: torch.Tensor) -> torch.Tensor:
        """The batch cropped at the given offsets (in the padded image) and flipped where asked.

        Parameters
        ----------
        x : torch.Tensor
            (N, C, H, W) network inputs.
        top, left : torch.Tensor
            (N,) crop offsets, 0 .. 2 x padding ("flip": 0).
        flip : torch.Tensor
            (N,) bool, which images are flipped.

        Returns
        -------
        torch.Tensor
            (N, C, H, W), on x's device.
        """
        n, c, h, w = x.shape
        pad = self.padding if self.kind == "crop_flip" else 0
        if pad:
            fill = torch.as_tensor(self.fill, dtype=x.dtype, device=x.device)
            if fill.numel() not in (1, c):
                raise ValueError(f"fill has {fill.numel()} values for images of {c} channels")
            # the fill everywhere, the images in the middle (F.pad's constant is one value for every channel)
            padded = fill.view(1, -1, 1, 1).expand(n, c, h + 2 * pad, w + 2 * pad).clone()
            padded[:, :, pad:pad + h, pad:pad + w] = x
        else:
            padded = x
        rows = top.view(n, 1) + torch.arange(h, device=x.device)  # (N, H): the padded rows each image keeps
        columns = torch.arange(w, device=x.device).expand(n, w)
        columns = left.view(n, 1) + torch.where(flip.view(n, 1), w - 1 - columns, columns)  # flipped: read backwards
        batch = torch.arange(n, device=x.device).view(n, 1, 1)
        # (N, H, W, C) by advanced indexing over the batch, rows and columns at once; back to (N, C, H, W)
        return padded.permute(0, 2, 3, 1)[batch, rows.view(n, h, 1), columns.view(n, 1, w)].permute(0, 3, 1, 2)

    def __call__(self, x: torch.Tensor, generator: torch.Generator | None = None) -> torch.Tensor:
        """The batch augmented: each image's own random crop (padding 4, black) and flip (p = 0.5).

        Parameters
        ----------
        x : torch.Tensor
            (N, C, H, W) network inputs (already normalised), on any device.
        generator : torch.Generator or None
            A generator on x's device (None: torch's default for that device).

        Returns
        -------
        torch.Tensor
            The augmented batch, (N, C, H, W) on x's device.
        """
        if x.dim() != 4:
            raise ValueError(f"BatchAugment takes a batch of images (N, C, H, W), got shape {tuple(x.shape)}")
        return self.apply(x, *self.draw(x.shape[0], generator, x.device)).contiguous()
