"""A detector for rows without any label: the consensus of three views of the input.

Why (issue 38, goal 3; measured on ADBench's 18 development sets under the unsupervised protocol,
docs/results/adbench.md): without labels no single detector leads. ``LpSVDD()`` one-class, kNN and
LOF tie on the mean AUROC (about 0.757), kNN holds the best average rank, and the deep model trails
them: without anomalies its omega-step has nothing to push away. They err on different sets, and the
sum of their robust z-scores was the best of the score ensembles measured on validation rows (held
out of each task's training rows; the test rows were not read): mean 0.772 against kNN's 0.757, and
the best average rank among the ensemble and the seven peers.

What: the rows are first min-max scaled per column by the fit rows (``scale``; ADBench's protocol
scales the same way before every detector, so the measurements above saw such rows; a distance on
columns in their own units would follow the widest). Three members, each at the defaults its peer runs
at, each scored higher = more anomalous:

* the large-margin lp-SVDD boundary, ``LpSVDD()`` one-class at its defaults (its f);
* the distance to the ``k_distance``-th (5) nearest fit row (PyOD's kNN, "largest");
* the local outlier factor of ``k_lof`` (20) neighbours (scikit-learn's ``LocalOutlierFactor``).

Each member's score becomes a robust z-score, ``(s - median) / (1.4826 MAD)``, with the median and
MAD of its scores of the fit rows (a fit row's neighbours leave the row itself out, as kNN and LOF
score their training rows), and the consensus is their sum. The neighbour searches run in torch
against at most ``MAX_REFERENCE`` fit rows (a seeded draw beyond that; the ``LpSVDD`` member is
fitted on the same rows, which bounds the cost of a large fit), in blocks of query rows: nearest
candidates found by one float32 matrix product a block, their Euclidean distances then taken
exactly; so scoring also runs on a GPU and is differentiable in the rows.
``PortableConsensus`` is the same score in plain torch operations, for ONNX and TorchScript.
"""

from __future__ import annotations

import numpy as np
import torch
import torch.nn as nn

from .placement import move_tensors
from .portable import PortableBoundary
from .svdd import LpSVDD, _features

MAX_REFERENCE = 4096  # fit rows the neighbour searches use (a seeded draw of a larger fit): bounds the cost of scoring
BLOCK_BYTES = 64 * 2**20  # the distance block of one step of scoring: rows x reference x 4 bytes
CANDIDATES = 4  # nearest candidates beyond k found in float32, then measured exactly
MAD_TO_SIGMA = 1.4826  # a normal sample's standard deviation per median absolute deviation
LRD_EPSILON = 1e-10  # scikit-learn's: a reachability of 0 (duplicated rows) keeps lrd finite


def robust_centre_and_spread(scores) -> tuple[float, float]:
    """The median and 1.4826 MAD of ``scores``; a zero MAD (most scores equal) falls back to the
    mean absolute deviation from the median, then to 1."""
    scores = torch.as_tensor(scores).detach().cpu().double().numpy()
    centre = float(np.median(scores))
    deviation = np.abs(scores - centre)
    for spread in (MAD_TO_SIGMA * float(np.median(deviation)), float(deviation.mean())):
        if spread > 0:
            return centre, spread
    return centre, 1.0


class Consensus:
    """The sum of the robust z-scores of ``LpSVDD()`` one-class, the kNN distance and the LOF.

    Parameters
    ----------
    k_distance : int
        The kNN member's neighbour: the distance to the k-th nearest fit row (PyOD's default 5).
    k_lof : int
        The LOF member's neighbours (scikit-learn's default 20).
    random_state : int or None
        Seeds ``LpSVDD`` and the draw of reference rows beyond ``MAX_REFERENCE``.
    scale : bool
        Min-max scale each column by the fit rows first (a constant column: by 1).
    device : str or torch.device or None
        Where the rows are scored (None: where ``fit`` got them).
    """

    MEMBERS = ("LpSVDD", "kNN", "LOF")

    def __init__(self, k_distance: int = 5, k_lof: int = 20, random_state=None, scale: bool = True, device=None):
        self.k_distance = k_distance
        self.k_lof = k_lof
        self.random_state = random_state
        self.scale = scale
        self.device = device

    def fit(self, X):
        """Fit every member on the rows ``X``, none of them labelled.

        Parameters
        ----------
        X : numpy.ndarray or torch.Tensor
            Rows (n, d), n >= 2, on the CPU or a CUDA device.

        Returns
        -------
        Consensus
            This detector, fitted; ``fit_scores_`` holds the consensus score of each fit row,
            its own row left out of its neighbours (as kNN and LOF score their training rows).
        """
        X_t, _ = _features(X, device=self.device)
        X_t = X_t.double()
        n = X_t.shape[0]
        if n < 2:
            raise ValueError(f"Consensus needs at least 2 rows to fit, got {n}")
        self.low_ = X_t.min(0).values if self.scale else torch.zeros_like(X_t[0])
        span = X_t.max(0).values - self.low_ if self.scale else torch.ones_like(X_t[0])
        self.span_ = torch.where(span > 0, span, torch.ones_like(span))
        X_t = self._scaled(X_t)
        keep = torch.arange(n, device=X_t.device)
        if n > MAX_REFERENCE:
            draw = np.sort(np.random.default_rng(self.random_state).permutation(n)[:MAX_REFERENCE])
            keep = torch.as_tensor(draw, device=X_t.device)
        self.reference_ = X_t[keep]
        # its f is a member's score, never thresholded alone: no calibration of its own (calibration=None)
        self.boundary_ = LpSVDD(random_state=self.random_state, device=X_t.device, calibration=None).fit(
            self.reference_)
        # each fit row's position among the reference rows (-1: not one): its own neighbours leave it out
        itself = torch.full((n,), -1, dtype=torch.long, device=X_t.device)
        itself[keep] = torch.arange(len(keep), device=X_t.device)
        self.k_lof_ = min(self.k_lof, len(keep) - 1)
        self.k_distance_ = min(self.k_distance, len(keep) - 1)
        # the reference rows' k-distances and local reachability densities, for the LOF of any row
        distances, indices = self._neighbours(self.reference_, self.k_lof_, itself[keep])
        self.lof_radius_ = distances[:, -1]
        self.lrd_ = self._lrd(distances, indices)
        self.n_features_in_ = X_t.shape[1]
        self.centres_, self.spreads_ = {}, {}
        # the fit rows' own scores set each member's scale
        members = self._member_scores(X_t, itself)
        for name, scores in members.items():
            self.centres_[name], self.spreads_[name] = robust_centre_and_spread(scores)
        self.fit_scores_ = self._total(members).detach().cpu().numpy()
        return self

    def _scaled(self, X: torch.Tensor) -> torch.Tensor:
        return (X - self.low_) / self.span_

    def _neighbours(self, X: torch.Tensor, k: int, itself: torch.Tensor | None = None):
        """Distances (ascending) and reference indices of the k nearest reference rows of each row
        of X; ``itself`` gives each row's own position among the reference rows (-1: none), which
        its neighbours leave out.

        Candidates are found in float32 on ``|r|^2 - 2 x.r`` (the squared distance less the row's
        own ``|x|^2``: one matrix product a block, the cost of a big table's fit), ``CANDIDATES``
        more than k so that float32's rounding cannot miss one of the k; their distances are then
        taken exactly, ``|x - r|`` in the rows' dtype, and the k nearest kept."""
        reference = self.reference_.float()
        reference_sq = (reference * reference).sum(1)
        wanted = min(k + CANDIDATES, self.reference_.shape[0])
        block = max(1, BLOCK_BYTES // (4 * self.reference_.shape[0]))
        distances, indices = [], []
        X32 = X.detach().float()
        for start in range(0, X.shape[0], block):
            rows = X[start:start + block]
            with torch.no_grad():  # which rows are nearest: no gradient flows through a choice
                partial = torch.addmm(reference_sq, X32[start:start + block], reference.T, beta=1.0, alpha=-2.0)
                if itself is not None:
                    own = itself[start:start + block]
                    mine = torch.nonzero(own >= 0).flatten()
                    partial[mine, own[mine]] = float("inf")
                i = torch.topk(partial, wanted, dim=1, largest=False).indices
            d = torch.linalg.vector_norm(rows[:, None, :] - self.reference_[i], dim=2)
            if itself is not None:  # with no more reference rows than candidates, its own (masked) one is among them
                d = torch.where(i == itself[start:start + block, None], torch.full_like(d, float("inf")), d)
            d, order = torch.topk(d, k, dim=1, largest=False)
            distances.append(d)
            indices.append(torch.gather(i, 1, order))
        return torch.cat(distances), torch.cat(indices)

    def _lrd(self, distances: torch.Tensor, indices: torch.Tensor) -> torch.Tensor:
        """Local reachability density: 1 / the mean of max(d(x, o), k-distance(o)) over x's neighbours o."""
        reach = torch.maximum(distances, self.lof_radius_[indices])
        return 1.0 / (reach.mean(1) + LRD_EPSILON)

    def _member_scores(self, X: torch.Tensor, itself: torch.Tensor | None = None) -> dict:
        distances, indices = self._neighbours(X, max(self.k_lof_, self.k_distance_), itself)
        near, near_index = distances[:, :self.k_lof_], indices[:, :self.k_lof_]
        lof = self.lrd_[near_index].mean(1) / self._lrd(near, near_index)
        return {"LpSVDD": self.boundary_.torch_dissimilarity(X), "kNN": distances[:, self.k_distance_ - 1],
                "LOF": lof}

    def _members_of(self, X: torch.Tensor) -> dict:
        """Each member's score of new rows X (a torch tensor as ``fit`` took them), checked and scaled."""
        if not isinstance(X, torch.Tensor) or X.ndim != 2 or X.shape[1] != self.n_features_in_:
            raise ValueError(f"X must be a 2-D torch tensor with {self.n_features_in_} features")
        return self._member_scores(self._scaled(X.to(self.reference_)))

    def torch_dissimilarity(self, X: torch.Tensor) -> torch.Tensor:
        """The consensus score of every row of a torch tensor, differentiable in X.

        Parameters
        ----------
        X : torch.Tensor
            Rows (n, d).

        Returns
        -------
        torch.Tensor
            One score per row, with its autograd graph.
        """
        return self._total(self._members_of(X))

    def _total(self, members: dict) -> torch.Tensor:
        """The sum of the members' robust z-scores."""
        return sum((members[m] - self.centres_[m]) / self.spreads_[m] for m in self.MEMBERS)

    def dissimilarity(self, X):
        """The consensus score: higher = more anomalous; 0 is a typical fit row.

        Parameters
        ----------
        X : numpy.ndarray or torch.Tensor
            Rows (n, d) as ``fit`` took them.

        Returns
        -------
        numpy.ndarray or torch.Tensor
            One score per row, the same kind of array as X.
        """
        X_t, numpy_like = _features(X, device=self.reference_.device)
        with torch.no_grad():
            scores = self.torch_dissimilarity(X_t)
        return scores.cpu().numpy() if numpy_like else scores

    def member_scores(self, X) -> dict:
        """Each member's own score of the rows, before its z-scaling.

        Parameters
        ----------
        X : numpy.ndarray or torch.Tensor
            Rows (n, d) as ``fit`` took them.

        Returns
        -------
        dict
            ``{"LpSVDD": f, "kNN": distance to the k-th nearest reference row,
            "LOF": local outlier factor}``, numpy arrays of one score per row.
        """
        X_t, _ = _features(X, device=self.reference_.device)
        with torch.no_grad():
            return {m: s.cpu().numpy() for m, s in self._members_of(X_t).items()}

    def score_samples(self, X):
        """Minus ``dissimilarity``: higher = more normal (scikit-learn's convention).

        Parameters
        ----------
        X : numpy.ndarray or torch.Tensor
            Rows (n, d) as ``fit`` took them.

        Returns
        -------
        numpy.ndarray or torch.Tensor
            One score per row, the same kind of array as X.
        """
        return -self.dissimilarity(X)

    # ---- persistence: plain tensors and numbers (torch.load(weights_only=True) reads them)

    _TENSORS = ("low_", "span_", "reference_", "lof_radius_", "lrd_")
    _NUMBERS = ("k_distance_", "k_lof_", "n_features_in_", "centres_", "spreads_")

    def state_dict(self) -> dict:
        """The parameters and the fitted members, as plain tensors and numbers.

        Returns
        -------
        dict
            ``params``, the scaling, the reference rows with their k-distances and
            densities, each member's centre and spread, and the ``LpSVDD`` member's
            own ``state_dict``.
        """
        return {"params": {"k_distance": self.k_distance, "k_lof": self.k_lof, "random_state": self.random_state,
                           "scale": self.scale},
                **{k: getattr(self, k).cpu() for k in self._TENSORS}, **{k: getattr(self, k) for k in self._NUMBERS},
                "boundary": self.boundary_.state_dict()}

    def to(self, device) -> "Consensus":
        """Score on ``device``: the reference rows, their statistics and the ``LpSVDD`` member move there.

        Parameters
        ----------
        device : str or torch.device
            Where the detector lives from now on.

        Returns
        -------
        Consensus
            This detector.
        """
        move_tensors(self, device)
        self.boundary_.to(device)
        self.device = torch.device(device)
        return self

    @classmethod
    def from_state_dict(cls, state: dict, device=None) -> "Consensus":
        """The fitted detector a ``state_dict`` describes.

        Parameters
        ----------
        state : dict
            A ``state_dict``.
        device : str, torch.device or None
            Where to score.

        Returns
        -------
        Consensus
            The detector; it scores as the one that was saved.
        """
        model = cls(**state["params"], device=device)
        for k in cls._TENSORS:
            setattr(model, k, state[k].to(device) if device is not None else state[k])
        for k in cls._NUMBERS:
            setattr(model, k, state[k])
        model.boundary_ = LpSVDD.from_state_dict(state["boundary"], device=device)
        return model


class PortableConsensus(nn.Module):
    """A fitted ``Consensus`` in plain torch operations (matrix products, top-k, gather; float32):
    rows (N, d) -> scores (N,), the form TorchScript and ONNX export. Distances come from the norm
    expansion (clamped at 0), so scores equal ``Consensus.dissimilarity`` up to float32 rounding."""

    def __init__(self, model: Consensus):
        super().__init__()
        self.boundary = PortableBoundary(model.boundary_)
        self.register_buffer("low", model.low_.detach().float().cpu().contiguous())
        self.register_buffer("span", model.span_.detach().float().cpu().contiguous())
        self.register_buffer("reference", model.reference_.detach().float().cpu().contiguous())
        self.register_buffer("lof_radius", model.lof_radius_.detach().float().cpu().contiguous())
        self.register_buffer("lrd", model.lrd_.detach().float().cpu().contiguous())
        self.k_distance, self.k_lof = int(model.k_distance_), int(model.k_lof_)
        self.k_max, self.epsilon = max(self.k_distance, self.k_lof), LRD_EPSILON
        self.centres = [float(model.centres_[m]) for m in Consensus.MEMBERS]
        self.spreads = [float(model.spreads_[m]) for m in Consensus.MEMBERS]

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = (x - self.low) / self.span
        sq = (x * x).sum(1, keepdim=True) + (self.reference * self.reference).sum(1)[None] \
            - 2.0 * (x @ self.reference.T)
        distances, indices = torch.topk(sq.clamp_min(0.0).sqrt(), self.k_max, dim=1, largest=False)
        near, near_index = distances[:, :self.k_lof], indices[:, :self.k_lof]
        reach = torch.maximum(near, self.lof_radius[near_index])
        lof = self.lrd[near_index].mean(1) * (reach.mean(1) + self.epsilon)  # = mean lrd(o) / lrd(x)
        members = [self.boundary(x), distances[:, self.k_distance - 1], lof]
        total = torch.zeros_like(members[0])
        for score, centre, spread in zip(members, self.centres, self.spreads):
            total = total + (score - centre) / spread
        return total
