"""DLMSVDD's score: the deep model's, plus the consensus of views of the input (feature vectors;
images without labelled anomalies).

Why (issues 38 and 49; measured on ADBench's development sets, docs/results/adbench.md): without
labelled anomalies the deep model has nothing to push away and trails the plain detectors, while
``dlmsvdd_ext.consensus.Consensus`` (views of the input chosen by what the rows are: ``LpSVDD()``
one-class plus an isolation forest on tables, the nearest fit row's distance on embeddings) scored
above every peer on sets it was not chosen on. With labels the deep model leads, and the consensus
beside it keeps the unlabelled view of the input, which the learned representation can forget.

What: a fitted ``Consensus`` on the training rows (without their labels: what a user without labels
holds), and the score

    score(x) = weight * (f(x) - median) / (1.4826 MAD) + consensus(x) / (number of its members),

the deep model's f as a robust z-score by the training rows' f, and the consensus's mean member
z-score (each member as heavy as the deep model). ``weight`` (``deep_weight``) is 0 without labelled
anomalies (the network is then not trained: its score would weigh nothing); with them 1 on tables,
and on embeddings min(1, n_A / 20), n_A the labelled anomalies: a network pushed away from a handful
of labelled rows in hundreds of dimensions adds less than the nearest-row view loses by sharing the
score (issue 49: chosen on the development sets' validation rows by leaving whole sets out, in every
fold; tests/benchmarks/adbench_leave_sets_out.py, docs/results/adbench.md). A
training row is scored with its own row left out of its neighbours (``given_scores``, PyOD's
``decision_scores_``). The validation rows are not among the consensus's rows: they are scored as
new rows are, and set the threshold and the calibration (``training.thresholds``). Until issue 46
the consensus took them too, and its ``LpSVDD`` member scored them in-sample, lower than any new
row: on 300 rows of N(0, I_32) 96% of new normal rows scored above that member's 0.9 quantile of
them (kNN 13%, LOF 15%), and the default model called 58% of new normal rows anomalous. A table
given with named columns or categories keeps the table's members however wide its encoding makes it.

Images without labelled anomalies (issue 50): the network trained one-class trailed a kNN distance on
the pixels on grey images (digits, Fashion-MNIST), while on natural images (CIFAR-10) the pixels'
neighbours were near chance and the network led; the network beside two views of the image
(``image_views``: its pixels and its contrast-normalised pixels, pooled; one consensus of
``IMAGE_MEMBERS``, the nearest fit image's distance, on each, unscaled: pixels share one unit) led on
all three (the development protocols of ``tests/benchmarks/one_class_images.py``, each image set's
training pool split again; docs/results/paper-protocol.md). The parts are summed as asinh of their
z-scores (``total``), the network's at ``IMAGE_DEEP_WEIGHT`` of the views' mean. With labelled
anomalies an image model keeps the deep score alone: the paper's protocol, where the network leads
every pixel view by far.
"""

from __future__ import annotations

import copy

import numpy as np
import torch
import torch.nn as nn

from dlmsvdd_ext.consensus import EMBEDDING_MEMBERS, Consensus, PortableConsensus, members_for, robust_centre_and_spread
from dlmsvdd_ext.svdd import FULL_WEIGHT_ANOMALIES

from .image_views import VIEWS, ImageView

TRAINING, VALIDATION = 0, 1  # the parts of the rows fit was given (decision_scores_ takes both)
IMAGE_MEMBERS = EMBEDDING_MEMBERS  # images: the nearest fit image's distance in each view (the docstring says why)
IMAGE_DEEP_WEIGHT = 0.25  # an image model's deep part's weight beside its views' mean, without labels


def labelled_anomalies(data) -> bool:
    """Whether a dataset of (input, target) has a row labelled anomalous (target -1)."""
    targets = getattr(data, "targets", None)
    if targets is None and hasattr(data, "split"):  # protocols.SplitRows
        targets = data.split.targets
    if targets is None:  # a dataset that gives its targets row by row
        targets = [int(t) for _, t in data]
    return bool((np.asarray(targets) < 0).any())


def scores_alone(enabled: bool, train) -> bool:
    """Whether the consensus alone scores a fit on ``train``: feature vectors without labelled
    anomalies, with the input consensus on (then the deep model's score weighs 0)."""
    return enabled and train[0][0].dim() == 1 and not labelled_anomalies(train)


def applies(enabled: bool, vectors: bool, n_labelled: int) -> bool:
    """Whether a fit with the input consensus ``enabled`` gets one: on feature vectors always, on
    images without labelled anomalies (``n_labelled`` rows labelled anomalous by the user)."""
    return enabled and (vectors or n_labelled == 0)


def deep_weight(n_anomalies: int, members: tuple) -> float:
    """The deep model's weight beside a consensus of ``members`` after a fit with ``n_anomalies``
    labelled anomalies: 0 without any; 1 beside a table's members; beside the embeddings' nearest-row
    view ``min(1, n_anomalies / FULL_WEIGHT_ANOMALIES)`` (the module's docstring says why)."""
    if n_anomalies <= 0:
        return 0.0
    if tuple(members) == EMBEDDING_MEMBERS:
        return min(1.0, n_anomalies / FULL_WEIGHT_ANOMALIES)
    return 1.0


def fit(inputs: torch.Tensor, deep_scores: np.ndarray, n_labelled: int, seed, device,
        preprocessing=None) -> "InputConsensus":
    """The input consensus of a fit: its consensus on the network inputs of the training rows
    (of images, one on each of ``image_views.VIEWS``), and the deep model's weight (``deep_weight``
    of the ``n_labelled`` rows the user labelled anomalous; ``IMAGE_DEEP_WEIGHT`` on images), with
    its robust scale from ``deep_scores`` (f of the training rows).
    ``preprocessing``: the model's vector record; a table's encoding in it makes the rows a table."""
    if inputs.dim() > 2:
        return InputConsensus(IMAGE_DEEP_WEIGHT, random_state=seed, members=IMAGE_MEMBERS, scale=False,
                              compress=True).fit(inputs.to(device), deep_scores)
    table = getattr(preprocessing, "encoding", None) is not None
    members = members_for(int(inputs.shape[1]), table=table)
    return InputConsensus(deep_weight(n_labelled, members), random_state=seed, members=members).fit(
        inputs.to(device), deep_scores)


def total(f: torch.Tensor, views: list[torch.Tensor], weight: float, centre: float, spread: float, member_weight: float,
          compress: bool) -> torch.Tensor:
    """The combined score: ``weight`` times the deep model's robust z-score ``(f - centre) / spread``
    plus ``member_weight`` times the sum of the ``views``' scores (each a consensus's sum of member
    z-scores); with ``compress``, of the asinh of each instead (about log(2 z) far out), so that no
    part's heavy tail outweighs the others' ranking (images: a network that maps a few normal images
    far out, as on digits' ones in the development protocol, no longer decides their rank alone)."""
    z = (f - centre) / spread
    score = weight * (asinh(z) if compress else z)
    for view in views:
        score = score + member_weight * (asinh(view) if compress else view)
    return score


def asinh(x: torch.Tensor) -> torch.Tensor:
    """torch.asinh in the operations ONNX Runtime runs in float64 (it has no double Asinh kernel)."""
    return torch.sign(x) * torch.log(x.abs() + torch.sqrt(x * x + 1.0))


class InputConsensus:
    """The consensus of the model's inputs and the weight of the deep model's score beside it.

    Parameters
    ----------
    weight : float
        The deep model's z-score's weight (``deep_weight``: 0 without labelled anomalies).
    random_state : int or None
        Seeds the consensus (its ``LpSVDD`` member, its forest and its draw of reference rows).
    members : "auto" or tuple of str
        The consensus's members (``Consensus``'s parameter).
    scale : bool
        Min-max scale each column first (``Consensus``'s parameter; False for images).
    compress : bool
        Sum the asinh of the z-scores rather than the z-scores (``total``; True for images).
    """

    def __init__(self, weight: float, random_state=None, members="auto", scale: bool = True, compress: bool = False):
        self.weight = float(weight)
        self.random_state = random_state
        self.members = members
        self.scale = scale
        self.compress = compress
        self.image_size_ = None  # (h, w) of an image model's inputs, seen in each of image_views.VIEWS

    def _view_modules(self) -> list:
        """What each consensus takes of the network inputs: feature vectors as they are; images each
        of ``image_views.VIEWS`` (built once per image size: their pooling matrices)."""
        if self.image_size_ is None:
            return [nn.Identity()]
        if getattr(self, "_built_views", (None,))[0] != self.image_size_:
            self._built_views = (self.image_size_, [ImageView(view, *self.image_size_) for view in VIEWS])
        return self._built_views[1]

    def _views(self, inputs: torch.Tensor) -> list:
        """Each consensus's score of rows of network inputs."""
        return [consensus.torch_dissimilarity(view.to(inputs.device)(inputs.to(consensus.reference_)))
                for consensus, view in zip(self.consensuses_, self._view_modules())]

    @property
    def consensus_(self) -> Consensus:
        """The consensus of the inputs as they are (of an image model: of its pixels)."""
        return self.consensuses_[0]

    def fit(self, inputs: torch.Tensor, deep_scores: np.ndarray) -> "InputConsensus":
        """Fit the consensus on the training rows, and the deep model's robust scale.

        Parameters
        ----------
        inputs : torch.Tensor
            Network inputs (n, d) or images (n, c, h, w) of the training rows ``DLMSVDD.fit`` was
            given, unlabelled (images: a consensus on each of ``image_views.VIEWS``).
        deep_scores : numpy.ndarray
            The deep model's f of those rows (its median and 1.4826 MAD scale f).

        Returns
        -------
        InputConsensus
            This combination, fitted.
        """
        self.image_size_ = None if inputs.dim() == 2 else tuple(int(v) for v in inputs.shape[-2:])
        self.consensuses_ = [Consensus(members=self.members, random_state=self.random_state, scale=self.scale).fit(
            view.to(inputs.device)(inputs)) for view in self._view_modules()]
        self.centre_, self.spread_ = robust_centre_and_spread(deep_scores)
        return self

    def _total(self, f: torch.Tensor, views: list) -> torch.Tensor:
        return total(f, views, self.weight, self.centre_, self.spread_, self.member_weight, self.compress)

    @property
    def member_weight(self) -> float:
        """Each member's weight: the views enter as their mean member z-score."""
        return 1.0 / sum(len(consensus.members_) for consensus in self.consensuses_)

    def combine(self, f: torch.Tensor, inputs: torch.Tensor) -> torch.Tensor:
        """The score of new rows, differentiable in ``inputs``.

        Parameters
        ----------
        f : torch.Tensor
            The deep model's f of the rows (n,).
        inputs : torch.Tensor
            Their network inputs (n, d), or images (n, c, h, w).

        Returns
        -------
        torch.Tensor
            One score per row (float64), higher = more anomalous.
        """
        views = self._views(inputs)
        return self._total(f.to(views[0]), views)

    def given_scores(self, f: torch.Tensor) -> torch.Tensor:
        """The score of the rows ``fit`` took, each with its own row left out of its neighbours
        (during the fit only: those scores are not saved).

        Parameters
        ----------
        f : torch.Tensor
            The deep model's f of those rows, in the same order.

        Returns
        -------
        torch.Tensor
            One score per row (float64, on the CPU).
        """
        return self._total(f.double().cpu(), [torch.as_tensor(c.fit_scores_) for c in self.consensuses_])

    def to(self, device) -> "InputConsensus":
        """Score on ``device`` (the consensus moves there; the deep score's scale is two numbers).

        Parameters
        ----------
        device : str or torch.device
            Where the combination lives from now on.

        Returns
        -------
        InputConsensus
            This combination.
        """
        for consensus in self.consensuses_:
            consensus.to(device)
        return self

    def state_dict(self) -> dict:
        """The fitted combination as plain tensors and numbers.

        Returns
        -------
        dict
            The weight, the deep model's centre and spread, and the consensuses' ``state_dict``.
        """
        return {"weight": self.weight, "random_state": self.random_state, "members": list(self.consensus_.members_),
                "scale": self.scale, "compress": self.compress, "image_size": self.image_size_,
                "centre": self.centre_, "spread": self.spread_, "consensus": self.consensus_.state_dict(),
                "other_views": [c.state_dict() for c in self.consensuses_[1:]]}

    @classmethod
    def from_state_dict(cls, state: dict, device=None) -> "InputConsensus":
        """The fitted combination a ``state_dict`` describes.

        Parameters
        ----------
        state : dict
            A ``state_dict``.
        device : str, torch.device or None
            Where to score.

        Returns
        -------
        InputConsensus
            The combination; it scores as the one that was saved.
        """
        model = cls(state["weight"], state["random_state"], state.get("members", "auto"), state.get("scale", True),
                    state.get("compress", False))
        model.image_size_ = state.get("image_size")
        model.centre_, model.spread_ = state["centre"], state["spread"]
        model.consensuses_ = [Consensus.from_state_dict(s, device=device)
                              for s in (state["consensus"], *state.get("other_views", []))]
        return model


class DeepScore(nn.Module):
    """The exported score of a model without an input consensus: the deep model's f as it is."""

    def forward(self, inputs: torch.Tensor, f: torch.Tensor) -> torch.Tensor:
        return f


class PortableCombination(nn.Module):
    """``InputConsensus.combine`` in plain torch operations, for ONNX and TorchScript (float32
    inputs and f; the sum in float64, so the z-scores' offsets cost no precision)."""

    def __init__(self, model: InputConsensus):
        super().__init__()
        self.consensuses = nn.ModuleList([PortableConsensus(c) for c in model.consensuses_])
        self.views = nn.ModuleList([copy.deepcopy(view).float() for view in model._view_modules()])
        self.weight, self.centre, self.spread = model.weight, float(model.centre_), float(model.spread_)
        self.member_weight, self.compress = model.member_weight, model.compress

    def forward(self, inputs: torch.Tensor, f: torch.Tensor) -> torch.Tensor:
        views = [consensus(view(inputs)).double() for consensus, view in zip(self.consensuses, self.views)]
        return total(f.double(), views, self.weight, self.centre, self.spread, self.member_weight,
                     self.compress).float()
