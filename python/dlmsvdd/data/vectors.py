"""What the network is given of a feature vector (a table's row, an embedding of
a pretrained network): the raw vector standardised per column with the mean and
standard deviation of the training rows, as one record.

The record plays the part ``Preprocessing`` plays for images: a trained model
stores it, every scoring entry point runs raw vectors through it, and
``VectorPreprocess`` is plain torch operations that TorchScript and ONNX export.
Why standardise: the MLP's first layer and the median bandwidth of the kernel
then see columns on one scale, whatever units the table was written in.

A table with names, categorical columns or imputed cells has a
``dlmsvdd_ext.tabular.TableEncoding`` too: the record then takes the table's
codes, encodes them (``TableEncode``) and standardises the encoded columns.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import numpy as np
import torch
import torch.nn as nn

from dlmsvdd_ext.tabular import TableEncoding

KIND = "vectors"  # the ``kind`` of a vector record's dict (image records have none)
INPUT_LIMIT = 1e6  # standardised values are clipped to [-INPUT_LIMIT, INPUT_LIMIT] (training.guard.LIMIT)


@dataclass(frozen=True)
class VectorPreprocessing:
    """features: the raw vectors' length; center, scale: per column, x -> (x - center) / scale;
    encoding: a table's rule in front (None: the vectors are numbers as they are), whose
    encoded columns are the ``features`` standardised."""

    features: int
    center: tuple[float, ...]
    scale: tuple[float, ...]
    encoding: TableEncoding | None = None

    def __post_init__(self):
        if len(self.center) != self.features or len(self.scale) != self.features:
            raise ValueError(f"center and scale need {self.features} values, got {len(self.center)} and "
                             f"{len(self.scale)}")
        if not all(np.isfinite(self.center)) or not all(np.isfinite(s) and s > 0 for s in self.scale):
            raise ValueError("a vector record's center must be finite and its scale finite and positive")

    @classmethod
    def identity(cls, features: int) -> "VectorPreprocessing":
        """Vectors given to the network as they are."""
        return cls(int(features), (0.0,) * features, (1.0,) * features)

    @classmethod
    def fit(cls, rows) -> "VectorPreprocessing":
        """Standardisation fitted on training rows (N, D), in float64.

        A constant column keeps scale 1: it carries no information, and dividing
        by ~0 would turn rounding into signal. Constant is relative to the
        column's own magnitude (a spread of at most 1e-12 of its largest
        absolute value, zero included), so that a column measured in small units
        (1e-13 farads) keeps its signal. Rows that are all identical are
        refused: there is nothing to learn a boundary from."""
        x = torch.as_tensor(rows).detach().cpu().double().numpy()
        if x.ndim != 2 or x.shape[0] == 0:
            raise ValueError(f"a vector record is fitted on rows (N, D), got shape {x.shape}")
        center = x.mean(axis=0)
        std = x.std(axis=0)
        constant = std <= 1e-12 * np.abs(x).max(axis=0)
        if x.shape[0] > 1 and constant.all():
            raise ValueError(f"the {x.shape[0]} training rows are all identical (every column constant, up to "
                             "rounding): there is nothing to learn a boundary from; give rows that differ")
        scale = np.where(constant, 1.0, std)
        return cls(x.shape[1], tuple(float(c) for c in center), tuple(float(s) for s in scale))

    @classmethod
    def fit_table(cls, codes, encoding: TableEncoding | None) -> "VectorPreprocessing":
        """``fit`` on a table's training rows given as codes (``TableEncoding.codes``): the
        standardisation of their encoded columns, with the encoding in front (None: ``fit``)."""
        if encoding is None:
            return cls.fit(codes)
        return dataclasses.replace(cls.fit(encoding.encode(torch.as_tensor(codes).numpy())), encoding=encoding)

    any_size = False  # one length, as Preprocessing.any_size says of image sizes
    input_dtypes = ("float32",)  # what an export may take (images: uint8 too)
    float_range = (-float("inf"), float("inf"))  # any finite value (an export turns others into f = NaN)

    @property
    def width(self) -> int:
        """The raw input's columns (a table's, before encoding)."""
        return self.features if self.encoding is None else self.encoding.width

    @property
    def missing_taken(self) -> bool:
        """Whether a NaN cell is a missing cell the record imputes (an export then takes it)."""
        return self.encoding is not None and self.encoding.missing == "impute"

    @property
    def input_shape(self) -> tuple[int, ...]:
        """The network's input (D,)."""
        return (self.features,)

    def expects(self) -> str:
        """What raw vectors must look like, in words (error messages, --help, export metadata)."""
        if self.encoding is not None:
            return self.encoding.expects()
        return f"feature vectors (N, {self.features}), float32, finite"

    def example(self, batch: int, dtype: torch.dtype) -> torch.Tensor:
        """A batch of raw inputs of the right shape (for tracing an export)."""
        return torch.zeros(batch, self.width, dtype=dtype)

    def module(self) -> nn.Module:
        if self.encoding is None:
            return VectorPreprocess(self)
        return nn.Sequential(self.encoding.module(), VectorPreprocess(self))

    def to_dict(self) -> dict:
        values = {"kind": KIND, "features": self.features, "center": self.center, "scale": self.scale}
        return values if self.encoding is None else {**values, "encoding": self.encoding.to_dict()}

    @classmethod
    def from_dict(cls, values: dict) -> "VectorPreprocessing":
        values = {k: v for k, v in values.items() if k != "kind"}
        encoding = values.get("encoding")  # absent: vectors without a table's rule
        return cls(int(values["features"]), tuple(map(float, values["center"])), tuple(map(float, values["scale"])),
                   None if encoding is None else TableEncoding.from_dict(encoding))


class VectorPreprocess(nn.Module):
    """Raw vectors -> the network's input: checks the shape, standardises (in float64), gives float32."""

    def __init__(self, spec: VectorPreprocessing):
        super().__init__()
        self.features = spec.features
        self.expects = spec.expects()
        self.limit = INPUT_LIMIT  # an attribute, not the global: TorchScript takes no global numbers
        # float64: a column far from zero with a small spread (1 +- 1e-3) would lose its digits to
        # float32 cancellation in x - center; the network then takes the result in float32
        self.register_buffer("center", torch.tensor(spec.center, dtype=torch.float64).view(1, -1))
        self.register_buffer("scale", torch.tensor(spec.scale, dtype=torch.float64).view(1, -1))

    def forward(self, vectors: torch.Tensor) -> torch.Tensor:
        if vectors.dim() != 2 or vectors.shape[1] != self.features:
            raise ValueError("got an array of shape " + str(list(vectors.shape)) + "; the model expects "
                             + self.expects)
        # clipped in float64 before float32: a finite row however far out (1e200) stays finite, beyond
        # every training row (the distance guard scores it as the farthest, training.guard)
        return ((vectors.double() - self.center) / self.scale).clamp(-self.limit, self.limit).float()
