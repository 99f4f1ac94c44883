"""The trained detector's scores: f(x) of datasets and raw arrays, the preprocessing that turns raw
inputs into the network's, attributions, and the exported scorer.

A mixin of ``DLMSVDD`` (the trainer owns the network, the boundary and the feature pass): scoring
runs the feature pass (``_features``) and the boundary's ``dissimilarity``, floors rows beyond the
data (``training.guard``), gathers the shards of several processes, and adds the input consensus
(``training.input_consensus``) when the fit made one. Its decisions from these scores are
``decisions``.
"""

from __future__ import annotations

import numpy as np
import torch
from sklearn.utils.validation import check_is_fitted
from torch.utils.data import Dataset

from ..data.preprocessing import Preprocessing
from ..data.vectors import VectorPreprocessing
from . import batches, explain, guard, inputs, precision


class Scoring:
    """Scores of a fitted detector: ``scores``, ``dissimilarity``, ``score_samples``, ``kernel_``,
    ``explain``, ``preprocess``, ``stored_preprocessing``, ``export``.

    The class it is mixed into provides ``_features``, ``_loader``, ``config``, ``network_``,
    ``svdd_``, ``group_``, ``input_shape_``, ``in_channels_``, ``preprocessing_`` and
    ``input_consensus_``.
    """

    def _inputs(self, data: Dataset) -> torch.Tensor:
        """The network inputs of every row of a dataset (all of it, in every process), in order."""
        size = batches.eval_batch_size(self.config.batch_size, len(self.input_shape_) == 1)
        return torch.cat([x for x, _ in self._loader(data, shuffle=False, batch_size=size)])

    def _raw_scores(self, data) -> np.ndarray:
        """f of a dataset's rows without the guard's floor."""
        return self._gathered_scores(*self._features(data), len(data), guarded=False)[0]

    def _check_fitted(self, *attributes: str) -> None:
        check_is_fitted(self, attributes or ("svdd_",))  # scikit-learn's NotFittedError

    def _images(self, X) -> torch.Tensor:
        """An array of raw inputs as the network takes them: through the model's
        preprocessing record (images: uint8 or float in [0, 1]; vectors: real
        numbers), which checks the shape; a model without one (a custom network
        on inputs that are not images, or saved before records were kept) takes
        network inputs (``array_images``), shape-checked."""
        if self.preprocessing_ is None:
            images = inputs.array_images(X)
            self._check_images(images)
            return images
        network_inputs = self.preprocess(X)
        if not torch.isfinite(network_inputs).all():  # vectors: finite rows stay finite (clipped far out)
            raise ValueError("X holds NaN or infinite values")
        return network_inputs

    def scores(self, data) -> tuple[np.ndarray, np.ndarray]:
        """Score a dataset: f(x) and the targets in one pass.

        Every process scores its shard; all get all the scores.

        Parameters
        ----------
        data : torch.utils.data.Dataset or array-like
            A dataset of (input, target), or an array of raw inputs as ``fit``
            takes them (run through ``preprocessing_``).

        Returns
        -------
        f : numpy.ndarray
            f(x) of every sample.
        targets : numpy.ndarray
            The dataset's targets (+1 for every row of an array).
        """
        self._check_fitted()
        data = self._dataset(data)
        with precision.scoring():
            f, targets = self._gathered_scores(*self._features(data), len(data))
            if getattr(self, "input_consensus_", None) is not None:
                with torch.no_grad():
                    f = self.input_consensus_.combine(torch.as_tensor(f), self._inputs(data)).cpu().numpy()
        return f, targets

    def _dataset(self, data) -> Dataset:
        """A dataset as it is; an array of raw inputs as a dataset of network inputs (targets +1)."""
        if not inputs.is_array(data):
            return data
        images = self._images(data)
        return torch.utils.data.TensorDataset(images, torch.ones(len(images), dtype=torch.long))

    def _gathered_scores(self, feats: torch.Tensor, targets: np.ndarray, n: int,
                         guarded: bool = True) -> tuple[np.ndarray, np.ndarray]:
        """f and the targets of this process's features, gathered over the processes (n in all);
        rows beyond the data scored above it (``guard.floor_scores``) unless ``guarded`` is False."""
        f, targets = torch.as_tensor(self.svdd_.dissimilarity(feats)), torch.as_tensor(targets)
        if guarded and self.network_.guard is not None:
            distance_guard = self.network_.guard
            f = guard.floor_scores(f, feats[:, -1].to(f.device), float(distance_guard.floor),
                                   distance_guard.floor_start())
        if self.group_ is not None:
            f, targets = self.group_.gather(f, n), self.group_.gather(targets.to(f.device), n)
        return f.cpu().numpy(), targets.cpu().numpy()

    def _check_images(self, images: torch.Tensor) -> None:
        """Images as the network was trained on: (N, C, H, W) with its channels
        and size (the task's evaluation transform already applied)."""
        shape = tuple(getattr(self, "input_shape_", ()))  # () in models saved before it was recorded
        channels = shape[0] if shape else self.in_channels_
        if images.ndim != 4 or images.shape[1] != channels or (shape and tuple(images.shape[1:]) != shape):
            expected = ", ".join(map(str, shape)) if shape else f"{channels}, H, W"
            raise ValueError(f"this model takes images of shape (N, {expected}), preprocessed as its task's "
                             f"evaluation transform; got shape {tuple(images.shape)}")

    def dissimilarity(self, data) -> np.ndarray:
        """f(x), the squared RKHS distance to the centre; higher = more anomalous.

        Parameters
        ----------
        data : torch.utils.data.Dataset or array-like
            A dataset of (input, target), or an array of raw inputs as ``fit``
            takes them (run through ``preprocessing_``).

        Returns
        -------
        numpy.ndarray
            f(x) of every sample.
        """
        return self.scores(data)[0]

    def score_samples(self, data) -> np.ndarray:
        """-f(x): higher = more normal (scikit-learn's convention).

        Parameters
        ----------
        data : torch.utils.data.Dataset or array-like
            A dataset of (input, target), or an array of raw inputs as ``fit``
            takes them (run through ``preprocessing_``).

        Returns
        -------
        numpy.ndarray
            -f(x) of every sample.
        """
        return -self.dissimilarity(data)

    @property
    def kernel_(self) -> str:
        """The final boundary's kernel: ``kernel`` as configured, or what "auto" chose for
        every training row (each epoch's choice is in ``history_``, for the rows it trained on)."""
        self._check_fitted()
        return self.svdd_.kernel_

    def explain(self, X, *, reference=None, method: str = "auto",
                steps: int = explain.attribution.STEPS) -> np.ndarray:
        """Per-feature (per-pixel) attributions: larger = more responsible for the row's dissimilarity.

        ``method="auto"``: for vectors and tables ``"range"``, how far x_j
        lies outside the range that the 16 training normals nearest to x in
        the other features hold, in standard deviations of the network's
        input column j (0 inside it); for images ``"integrated"``, integrated
        gradients of f through the network from the nearest training normal
        b, summing to f(x) - f(b) up to the ``steps``-point rule's error.
        ``"repair"``: f(x) minus f with x_j alone clipped into that range.
        f is attributed before the distance guard's floor
        (``dlmsvdd.training.explain``, ``dlmsvdd_ext.explain``).

        Parameters
        ----------
        X : array-like
            Raw inputs as ``fit`` takes them: feature vectors (N, D), a table,
            or images (N, C, H, W) or (N, H, W).
        reference : array-like or None
            Normal raw inputs to take the ranges or baselines from (None: the
            training normals the fit kept, ``reference_``).
        method : {"auto", "range", "repair", "integrated"}
            The attribution (``dlmsvdd_ext.explain``).
        steps : int
            Midpoint steps of the ``"integrated"`` path integral.

        Returns
        -------
        numpy.ndarray
            Attributions of X's shape (a table's: one per column).
        """
        with precision.scoring():
            return explain.explain(self, X, reference=reference, method=method, steps=steps)

    def preprocess(self, images) -> torch.Tensor:
        """Raw inputs as the network takes them: the preprocessing the model was trained with.

        ``preprocessing_``, in the torch operations an export runs. Scoring an
        array does this itself.

        Parameters
        ----------
        images : array-like
            Images, uint8 or float in [0, 1], (N, C, H, W) or grey (N, H, W);
            or feature vectors (N, D).

        Returns
        -------
        torch.Tensor
            The network's input.
        """
        spec = self.stored_preprocessing()
        if isinstance(spec, VectorPreprocessing):
            raw = inputs.array_vectors(images, encoding=spec.encoding)
        else:
            raw = images.detach().cpu() if isinstance(images, torch.Tensor) else torch.as_tensor(np.asarray(images))
            if not (raw.dtype == torch.uint8 or raw.is_floating_point()):  # int64 pixels 0-255 are not [0, 1]
                raise ValueError(f"X holds {raw.dtype} values; this model takes {spec.expects()} "
                                 "(integer pixels as uint8, e.g. X.astype(np.uint8))")
        with torch.no_grad():
            return spec.module()(raw)

    def stored_preprocessing(self) -> Preprocessing:
        """The model's preprocessing record.

        Returns
        -------
        dlmsvdd.data.preprocessing.Preprocessing or dlmsvdd.data.vectors.VectorPreprocessing
            ``preprocessing_``.

        Raises
        ------
        ValueError
            The model has none (saved before records were kept, or a custom
            network on inputs that are not images), with why.
        """
        self._check_fitted("preprocessing_")
        if self.preprocessing_ is None:
            raise ValueError("this model holds no preprocessing record (trained on inputs that are not images, or "
                             "saved by a dlmsvdd that did not keep one): it cannot take raw images")
        return self.preprocessing_

    def export(self, path, format: str = "onnx", input_dtype: str = "float32"):
        """Write one self-contained scorer: raw images in, (dissimilarity, decision, p_value) out.

        ``p_value`` comes from the calibration normals (NaN for a model without
        them). A float image out of range or not finite gets f NaN, and any
        non-finite f decision -1 (``dlmsvdd.training.export``).

        Parameters
        ----------
        path : str or pathlib.Path
            The file to write.
        format : str
            "onnx" (needs the ``export`` extra: onnx, onnxscript, onnxruntime)
            or "torchscript".
        input_dtype : str
            What the ONNX graph takes: "float32" (in [0, 1]) or "uint8"
            (TorchScript takes both, and refuses other dtypes).

        Returns
        -------
        pathlib.Path
            The file written.
        """
        from . import export

        self._check_fitted("threshold_")
        return export.export(self, path, format=format, input_dtype=input_dtype)
