"""DLMSVDD's score on feature vectors: the deep model's, plus the consensus of views of the input.

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
"""

from __future__ import annotations

import numpy as np
import torch
import torch.nn as nn

from dlmsvdd_ext.consensus import EMBEDDING_MEMBERS, Consensus, PortableConsensus, members_for, robust_centre_and_spread
from dlmsvdd_ext.svdd import FULL_WEIGHT_ANOMALIES

TRAINING, VALIDATION = 0, 1  # the parts of the rows fit was given (decision_scores_ takes both)


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


def deep_weight(n_anomalies: int, members: tuple) -> float:
    """The deep model's weight beside a consensus of ``members`` after a fit with ``n_anomalies``
    labelled anomalies: 0 without any; 1 beside a table's members; beside the embeddings' nearest-row
    view ``min(1, n_anomalies / FULL_WEIGHT_ANOMALIES)`` (the module's docstring says why)."""
    if n_anomalies <= 0:
        return 0.0
    if tuple(members) == EMBEDDING_MEMBERS:
        return min(1.0, n_anomalies / FULL_WEIGHT_ANOMALIES)
    return 1.0


def fit(inputs: torch.Tensor, deep_scores: np.ndarray, targets: np.ndarray, seed, device,
        preprocessing=None) -> "InputConsensus":
    """The input consensus of a fit: its consensus on the network inputs of the training rows, and
    the deep model's weight (``deep_weight`` of the rows labelled anomalous, ``targets`` -1), with its
    robust scale from ``deep_scores`` (f of the training rows).
    ``preprocessing``: the model's vector record; a table's encoding in it makes the rows a table."""
    table = getattr(preprocessing, "encoding", None) is not None
    members = members_for(int(inputs.shape[1]), table=table)
    weight = deep_weight(int((np.asarray(targets) < 0).sum()), members)
    return InputConsensus(weight, random_state=seed, members=members).fit(inputs.to(device), deep_scores)


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
    """

    def __init__(self, weight: float, random_state=None, members="auto"):
        self.weight = float(weight)
        self.random_state = random_state
        self.members = members

    def fit(self, inputs: torch.Tensor, deep_scores: np.ndarray) -> "InputConsensus":
        """Fit the consensus on the training rows, and the deep model's robust scale.

        Parameters
        ----------
        inputs : torch.Tensor
            Network inputs (n, d) of the training rows ``DLMSVDD.fit`` was given, unlabelled.
        deep_scores : numpy.ndarray
            The deep model's f of those rows (its median and 1.4826 MAD scale f).

        Returns
        -------
        InputConsensus
            This combination, fitted.
        """
        self.consensus_ = Consensus(members=self.members, random_state=self.random_state).fit(inputs)
        self.centre_, self.spread_ = robust_centre_and_spread(deep_scores)
        return self

    def _deep_z(self, f: torch.Tensor) -> torch.Tensor:
        return self.weight * (f - self.centre_) / self.spread_

    @property
    def member_weight(self) -> float:
        """Each member's weight: the consensus enters as its mean member z-score."""
        return 1.0 / len(self.consensus_.members_)

    def combine(self, f: torch.Tensor, inputs: torch.Tensor) -> torch.Tensor:
        """The score of new rows, differentiable in ``inputs``.

        Parameters
        ----------
        f : torch.Tensor
            The deep model's f of the rows (n,).
        inputs : torch.Tensor
            Their network inputs (n, d).

        Returns
        -------
        torch.Tensor
            One score per row (float64), higher = more anomalous.
        """
        consensus = self.consensus_.torch_dissimilarity(inputs.to(self.consensus_.reference_))
        return self._deep_z(f.to(consensus)) + self.member_weight * consensus

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
        own = torch.as_tensor(self.consensus_.fit_scores_)
        return self._deep_z(f.double().cpu()) + self.member_weight * own

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
        self.consensus_.to(device)
        return self

    def state_dict(self) -> dict:
        """The fitted combination as plain tensors and numbers.

        Returns
        -------
        dict
            The weight, the deep model's centre and spread, and the consensus's ``state_dict``.
        """
        return {"weight": self.weight, "random_state": self.random_state, "members": list(self.consensus_.members_),
                "centre": self.centre_,
                "spread": self.spread_, "consensus": self.consensus_.state_dict()}

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
        model = cls(state["weight"], state["random_state"], state.get("members", "auto"))
        model.centre_, model.spread_ = state["centre"], state["spread"]
        model.consensus_ = Consensus.from_state_dict(state["consensus"], device=device)
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
        self.consensus = PortableConsensus(model.consensus_)
        self.weight, self.centre, self.spread = model.weight, float(model.centre_), float(model.spread_)
        self.member_weight = model.member_weight

    def forward(self, inputs: torch.Tensor, f: torch.Tensor) -> torch.Tensor:
        deep = self.weight * (f.double() - self.centre) / self.spread
        return (deep + self.member_weight * self.consensus(inputs).double()).float()
