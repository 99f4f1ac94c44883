"""A detector for rows without any label: views of the input chosen by what the rows are.

Why (issue 49; measured on ADBench's 37 development sets under the unsupervised protocol, choosing
on validation rows and scoring each rule on sets it was not chosen on: docs/results/adbench.md). No
one detector leads on both kinds of feature vectors, and the sum of ``LpSVDD``, kNN and LOF that led
on 18 of these sets (issue 38) fell 0.09 below its own ``LpSVDD`` member on 17 held-out tables:

* **tables** (fewer than ``EMBEDDING_WIDTH`` columns): ``LpSVDD()`` one-class plus an isolation
  forest. A table's columns each mean something, and its anomalies are often a value out of its
  column's range or a rare combination of a few columns, and often come in groups (the same fault,
  the same duplicated record): a row's nearest neighbours can then be other anomalies, and columns
  with few distinct values tie distances. The kernel density over all the rows (``LpSVDD``) and the
  forest's random axis-parallel cuts weigh a row against the bulk of the data, each in its own way.
* **embeddings** (``EMBEDDING_WIDTH`` columns or more: a pretrained network's features, 512 for a
  ResNet-18, 768 for a ViT-B or BERT): the distance to the nearest fit row. There the normal class
  is compact (near neighbours of the same kind), an anomaly (another class, a defect) lies apart
  from all of them, and a kernel density or a forest over hundreds of columns blurs that (the
  k-th-neighbour distance of pretrained features: Bergman, Cohen and Hoshen 2020, small k).

Each column is first min-max scaled by the fit rows (``scale``; ADBench's protocol scales the same
way before every detector, so the measurements saw such rows). Each member is scored higher = more
anomalous and becomes a robust z-score, ``(s - median) / (1.4826 MAD)``, with the median and MAD
of its scores of the fit rows (a fit row's neighbours leave the row itself out, as kNN and LOF
score their training rows); the score is their sum. Members:

* ``"LpSVDD"``: ``LpSVDD()`` one-class at its defaults (its f);
* ``"kNN"``: the distance to the ``k_distance``-th nearest fit row;
* ``"LOF"``: the local outlier factor of ``k_lof`` neighbours (scikit-learn's ``LocalOutlierFactor``);
* ``"IsolationForest"``: scikit-learn's ``IsolationForest()`` at its defaults, scored in torch
  (``dlmsvdd_ext.forest``).

``members="auto"`` picks them by the rows' width as above; a tuple names them (issue 38's rule was
``ISSUE_38_MEMBERS`` with ``k_distance=5``). The neighbour searches and the ``LpSVDD`` member use at
most ``MAX_REFERENCE`` fit rows (a seeded draw beyond that, which bounds the cost of a large fit),
in blocks of query rows: nearest candidates found by one float32 matrix product a block, their
Euclidean distances then taken exactly; so scoring also runs on a GPU and is differentiable in the
rows (the forest, a step function, adds no gradient).

Rows beyond the data: a kernel's and a forest's scores stop growing far from the data, and a row
just beyond the farthest fit row could score below the most unusual fit rows. So a row farther from
the fit rows' mean than every fit row (scaled rows) scores at least ``floor + e / r_med``: above
every fit row's score (``floor``, the largest), higher the farther out (``e`` its distance beyond the
farthest fit row, ``r_med`` the median fit row's distance from the mean); its members' sum stands
where it is higher, and rows within keep their sum. The rule only raises scores: until 2026-11-29 it
replaced the sum, and a row beyond the data that its members put far above floor + e / r_med fell
below rows within it, ranked by its distance from the mean alone. Few rows in many columns put many
rows beyond (digits' 8 x 8 images, 69 fit rows: half of the test images), and there the replaced
score cost the nearest-image view 0.008 AUROC (0.9873 against 0.9952 on digits' development
protocol) and a lone ``LpSVDD`` member nearly all of it (0.57 against 0.99). The fit rows are
exchangeable with a new normal row, so it lands beyond all n of them with probability at most
1 / (n + 1): that is all the rule can cost in false alarms (as the deep model's distance guard,
``dlmsvdd.training.guard``, which also keeps the higher of the two). ``PortableConsensus`` is the
same score in plain torch operations, for ONNX and TorchScript.
"""

from __future__ import annotations

import numpy as np
import torch
import torch.nn as nn

from .forest import Forest, PortableForest
from .placement import move_tensors
from .portable import PortableBoundary
from .svdd import LpSVDD, _features

MAX_REFERENCE = 4096  # fit rows the neighbour searches use (a seeded draw of a larger fit): bounds the cost of scoring
BLOCK_BYTES = 64 * 2**20  # the distance block of one step of scoring: rows x reference x 4 bytes
CANDIDATES = 4  # nearest candidates beyond k found in float32, then measured exactly
MAD_TO_SIGMA = 1.4826  # a normal sample's standard deviation per median absolute deviation
LRD_EPSILON = 1e-10  # scikit-learn's: a reachability of 0 (duplicated rows) keeps lrd finite
# Rows this wide or wider are taken as a network's embedding, narrower ones as a table: the development
# sets' tables have 5-64 columns, their embeddings 512; pretrained backbones give 384 (MiniLM) to 2048.
EMBEDDING_WIDTH = 256
TABLE_MEMBERS = ("LpSVDD", "IsolationForest")
EMBEDDING_MEMBERS = ("kNN",)
ISSUE_38_MEMBERS = ("LpSVDD", "kNN", "LOF")  # the rule before issue 49 (with k_distance=5), and of files saved then
KNOWN_MEMBERS = ("LpSVDD", "kNN", "LOF", "IsolationForest")
RADIUS_MARGIN = 1e-4  # the farthest fit row's distance times 1 + this: rounding keeps fit rows within the data


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


def members_for(width: int, table: bool = False) -> tuple[str, ...]:
    """The members ``members="auto"`` takes for rows of ``width`` columns: ``TABLE_MEMBERS`` below
    ``EMBEDDING_WIDTH`` columns or for a ``table`` (named columns, categories one-hot encoded: wide
    because of its encoding, not an embedding), ``EMBEDDING_MEMBERS`` otherwise."""
    return TABLE_MEMBERS if table or width < EMBEDDING_WIDTH else EMBEDDING_MEMBERS


def beyond_the_data(total: torch.Tensor, distance: torch.Tensor, radius: float, median_radius: float,
                    floor: float) -> torch.Tensor:
    """Rows beyond the farthest fit row (``distance`` from the fit rows' mean above ``radius``) score
    ``max(total, floor + e / r_med)`` (``e = distance - radius``): above every fit row, higher the
    farther out, never below their members' sum; the others keep ``total``."""
    beyond = (distance - radius) / median_radius
    return torch.where(beyond > 0.0, torch.maximum(total, floor + beyond.to(total.dtype)), total)


class Consensus:
    """The sum of the robust z-scores of views of the input: ``LpSVDD()`` one-class and an isolation
    forest on tables, the nearest fit row's distance on embeddings (``members="auto"``).

    Parameters
    ----------
    members : "auto" or tuple of str
        "auto": ``members_for`` the rows' width (``TABLE_MEMBERS`` or ``EMBEDDING_MEMBERS``); or
        names among ``KNOWN_MEMBERS`` ("LpSVDD", "kNN", "LOF", "IsolationForest").
    k_distance : int
        The kNN member's neighbour: the distance to the k-th nearest fit row (1: the nearest).
    k_lof : int
        The LOF member's neighbours (scikit-learn's default 20).
    random_state : int or None
        Seeds ``LpSVDD``, the forest and the draw of reference rows beyond ``MAX_REFERENCE``.
    scale : bool
        Min-max scale each column by the fit rows first (a constant column: by 1).
    device : str or torch.device or None
        Where the rows are scored (None: where ``fit`` got them).
    """

    def __init__(self, members="auto", k_distance: int = 1, k_lof: int = 20, random_state=None, scale: bool = True,
                 device=None):
        self.members = members
        self.k_distance = k_distance
        self.k_lof = k_lof
        self.random_state = random_state
        self.scale = scale
        self.device = device

    def _chosen_members(self, width: int) -> tuple[str, ...]:
        if isinstance(self.members, str):
            if self.members != "auto":
                raise ValueError(f"members must be 'auto' or a tuple of names among {KNOWN_MEMBERS}, "
                                 f"got {self.members!r}")
            return members_for(width)
        chosen = tuple(self.members)
        unknown = [m for m in chosen if m not in KNOWN_MEMBERS]
        if not chosen or unknown or len(set(chosen)) != len(chosen):
            raise ValueError(f"members must name one or more of {KNOWN_MEMBERS}, each once; got {self.members!r}")
        return chosen

    def fit(self, X):
        """Fit every member on the rows ``X``, none of them labelled.

        Parameters
        ----------
        X : numpy.ndarray or torch.Tensor
            Rows (n, d), n >= 2, on the CPU or a CUDA device.

        Returns
        -------
        Consensus
            This detector, fitted; ``members_`` names its members and ``fit_scores_`` holds the
            score of each fit row, its own row left out of its neighbours (as kNN and LOF score
            their training rows).
        """
        X_t, _ = _features(X, device=self.device)
        X_t = X_t.double()
        n = X_t.shape[0]
        if n < 2:
            raise ValueError(f"Consensus needs at least 2 rows to fit, got {n}")
        for name, k in (("k_distance", self.k_distance), ("k_lof", self.k_lof)):
            if not isinstance(k, (int, np.integer)) or isinstance(k, bool) or k < 1:
                raise ValueError(f"{name} must be a positive integer, got {k!r}")
        self.members_ = self._chosen_members(X_t.shape[1])
        self.low_ = X_t.min(0).values if self.scale else torch.zeros_like(X_t[0])
        span = X_t.max(0).values - self.low_ if self.scale else torch.ones_like(X_t[0])
        self.span_ = torch.where(span > 0, span, torch.ones_like(span))
        X_t = self._scaled(X_t)
        keep = torch.arange(n, device=X_t.device)
        if n > MAX_REFERENCE:
            draw = np.sort(np.random.default_rng(self.random_state).permutation(n)[:MAX_REFERENCE])
            keep = torch.as_tensor(draw, device=X_t.device)
        self.reference_ = X_t[keep]
        self.boundary_ = self.forest_ = self.lof_radius_ = self.lrd_ = None
        if "LpSVDD" in self.members_:
            # its f is a member's score, never thresholded alone: no calibration of its own (calibration=None)
            self.boundary_ = LpSVDD(random_state=self.random_state, device=X_t.device, calibration=None).fit(
                self.reference_)
        if "IsolationForest" in self.members_:  # its trees draw 256 rows each: every fit row may be one
            self.forest_ = Forest(random_state=self.random_state).fit(X_t)
        # each fit row's position among the reference rows (-1: not one): its own neighbours leave it out
        itself = torch.full((n,), -1, dtype=torch.long, device=X_t.device)
        itself[keep] = torch.arange(len(keep), device=X_t.device)
        self.k_lof_ = min(self.k_lof, len(keep) - 1)
        self.k_distance_ = min(self.k_distance, len(keep) - 1)
        if "LOF" in self.members_:  # the reference rows' k-distances and densities, for the LOF of any row
            distances, indices = self._neighbours(self.reference_, self.k_lof_, itself[keep])
            self.lof_radius_ = distances[:, -1]
            self.lrd_ = self._lrd(distances, indices)
        self.n_features_in_ = X_t.shape[1]
        self.centres_, self.spreads_ = {}, {}
        # the fit rows' own scores set each member's scale
        members = self._member_scores(X_t, itself)
        for name, scores in members.items():
            self.centres_[name], self.spreads_[name] = robust_centre_and_spread(scores)
        # the data's extent: a row well beyond it scores above every fit row (beyond_the_data)
        self.centre_ = X_t.mean(0)
        distance = torch.linalg.vector_norm(X_t - self.centre_, dim=1)
        self.radius_ = float(distance.max()) * (1.0 + RADIUS_MARGIN)
        self.median_radius_ = float(np.median(distance.cpu().numpy())) or 1.0  # identical rows: any unit will do
        fit_scores = self._total(members)
        self.floor_ = float(fit_scores.max())
        self.fit_scores_ = fit_scores.detach().cpu().numpy()
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
        """Each member's score of the scaled rows X, in ``members_``'s order."""
        scores = {}
        wanted = {"kNN": self.k_distance_, "LOF": self.k_lof_}
        k = max((wanted[m] for m in self.members_ if m in wanted), default=0)  # the neighbours either member reads
        if k:
            distances, indices = self._neighbours(X, k, itself)
        for m in self.members_:
            if m == "LpSVDD":
                scores[m] = self.boundary_.torch_dissimilarity(X)
            elif m == "kNN":
                scores[m] = distances[:, self.k_distance_ - 1]
            elif m == "LOF":
                near, near_index = distances[:, :self.k_lof_], indices[:, :self.k_lof_]
                scores[m] = self.lrd_[near_index].mean(1) / self._lrd(near, near_index)
            else:
                scores[m] = self.forest_.dissimilarity(X)
        return scores

    def _members_of(self, X: torch.Tensor) -> tuple[dict, torch.Tensor]:
        """Each member's score of new rows X (a torch tensor as ``fit`` took them), checked and
        scaled, and the scaled rows."""
        if not isinstance(X, torch.Tensor) or X.ndim != 2 or X.shape[1] != self.n_features_in_:
            raise ValueError(f"X must be a 2-D torch tensor with {self.n_features_in_} features")
        scaled = self._scaled(X.to(self.reference_))
        return self._member_scores(scaled), scaled

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
        members, scaled = self._members_of(X)
        distance = torch.linalg.vector_norm(scaled - self.centre_, dim=1)
        return beyond_the_data(self._total(members), distance, self.radius_, self.median_radius_, self.floor_)

    def _total(self, members: dict) -> torch.Tensor:
        """The sum of the members' robust z-scores."""
        return sum((members[m] - self.centres_[m]) / self.spreads_[m] for m in self.members_)

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
            Member name -> numpy array of one score per row: ``"LpSVDD"`` f, ``"kNN"`` the distance
            to the k-th nearest reference row, ``"LOF"`` the local outlier factor,
            ``"IsolationForest"`` scikit-learn's ``-score_samples``.
        """
        X_t, _ = _features(X, device=self.reference_.device)
        with torch.no_grad():
            return {m: s.cpu().numpy() for m, s in self._members_of(X_t)[0].items()}

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

    _TENSORS = ("low_", "span_", "reference_", "centre_", "lof_radius_", "lrd_")
    _NUMBERS = ("members_", "k_distance_", "k_lof_", "n_features_in_", "centres_", "spreads_", "radius_",
                "median_radius_", "floor_")

    def state_dict(self) -> dict:
        """The parameters and the fitted members, as plain tensors and numbers.

        Returns
        -------
        dict
            ``params``, the scaling, the reference rows (with their k-distances and densities
            for LOF), each member's centre and spread, the data's extent, and the ``LpSVDD``
            member's and the forest's own state dicts.
        """
        params = {"members": self.members if isinstance(self.members, str) else list(self.members),
                  "k_distance": self.k_distance, "k_lof": self.k_lof, "random_state": self.random_state,
                  "scale": self.scale}
        state = {k: getattr(self, k).cpu() for k in self._TENSORS if getattr(self, k, None) is not None}
        state.update({k: getattr(self, k) for k in self._NUMBERS})
        state["members_"] = list(self.members_)
        for part in ("boundary", "forest"):
            model = getattr(self, f"{part}_")
            state[part] = None if model is None else model.state_dict()
        return {"params": params, **state}

    def to(self, device) -> "Consensus":
        """Score on ``device``: the reference rows, their statistics and the members move there.

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
        for model in (self.boundary_, self.forest_):
            if model is not None:
                model.to(device)
        self.device = torch.device(device)
        return self

    @classmethod
    def from_state_dict(cls, state: dict, device=None) -> "Consensus":
        """The fitted detector a ``state_dict`` describes.

        Parameters
        ----------
        state : dict
            A ``state_dict`` (one saved before issue 49 is issue 38's three members, without the
            rule for rows beyond the data).
        device : str, torch.device or None
            Where its tensors go (None: where the state's are).

        Returns
        -------
        Consensus
            The detector; it scores as the one that was saved.
        """
        params = dict(state["params"])
        params.setdefault("members", list(ISSUE_38_MEMBERS))
        model = cls(**params, device=device)
        for k in cls._TENSORS:
            value = state.get(k)
            setattr(model, k, value.to(device) if value is not None and device is not None else value)
        for k in cls._NUMBERS:
            setattr(model, k, state.get(k))
        if "members_" not in state:  # saved before issue 49: no extent rule
            model.members_, model.radius_, model.median_radius_, model.floor_ = ISSUE_38_MEMBERS, float("inf"), 1.0, 0.0
            model.centre_ = torch.zeros_like(model.low_)
        model.members_ = tuple(model.members_)
        model.boundary_ = None if state.get("boundary") is None else LpSVDD.from_state_dict(state["boundary"],
                                                                                           device=device)
        model.forest_ = None if state.get("forest") is None else Forest.from_state_dict(state["forest"], device=device)
        return model


class _PortableNearest(nn.Module):
    """The distance to the k-th nearest reference row: as ``Consensus`` finds it, the nearest
    ``k + CANDIDATES`` candidates by the norm expansion, then their distances from the differences
    (the expansion's float32 cancellation grows with the rows' norms: unscaled pixels of 0-255 lost
    1e-3 of a z-score to it)."""

    def __init__(self, reference: torch.Tensor, k: int):
        super().__init__()
        self.register_buffer("reference", reference)
        self.k = k
        self.candidates = min(k + CANDIDATES, reference.shape[0])

    def distances(self, x: torch.Tensor):
        sq = (x * x).sum(1, keepdim=True) + (self.reference * self.reference).sum(1)[None] \
            - 2.0 * (x @ self.reference.T)
        candidates = torch.topk(sq, self.candidates, dim=1, largest=False)[1]
        exact = (x[:, None, :] - self.reference[candidates]).pow(2).sum(2).sqrt()
        distance, order = torch.topk(exact, self.k, dim=1, largest=False)
        return distance, candidates.gather(1, order)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.distances(x)[0][:, self.k - 1]


class _PortableLOF(_PortableNearest):
    """The local outlier factor of k neighbours among the reference rows."""

    def __init__(self, reference: torch.Tensor, k: int, lof_radius: torch.Tensor, lrd: torch.Tensor):
        super().__init__(reference, k)
        self.register_buffer("lof_radius", lof_radius)
        self.register_buffer("lrd", lrd)
        self.epsilon = LRD_EPSILON

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        near, near_index = self.distances(x)
        reach = torch.maximum(near, self.lof_radius[near_index])
        return self.lrd[near_index].mean(1) * (reach.mean(1) + self.epsilon)  # = mean lrd(o) / lrd(x)


class PortableConsensus(nn.Module):
    """A fitted ``Consensus`` in plain torch operations (matrix products, top-k, gather; float32):
    rows (N, d) -> scores (N,), the form TorchScript and ONNX export. Distances come from the norm
    expansion (clamped at 0), so scores equal ``Consensus.dissimilarity`` up to float32 rounding."""

    def __init__(self, model: Consensus):
        super().__init__()
        def buffer(t):
            return t.detach().float().cpu().contiguous()

        self.register_buffer("low", buffer(model.low_))
        self.register_buffer("span", buffer(model.span_))
        self.register_buffer("centre", buffer(model.centre_))
        members = []
        for m in model.members_:
            if m == "LpSVDD":
                members.append(PortableBoundary(model.boundary_))
            elif m == "kNN":
                members.append(_PortableNearest(buffer(model.reference_), int(model.k_distance_)))
            elif m == "LOF":
                members.append(_PortableLOF(buffer(model.reference_), int(model.k_lof_), buffer(model.lof_radius_),
                                            buffer(model.lrd_)))
            else:
                members.append(PortableForest(model.forest_))
        self.members = nn.ModuleList(members)
        self.centres = [float(model.centres_[m]) for m in model.members_]
        self.spreads = [float(model.spreads_[m]) for m in model.members_]
        self.radius, self.median_radius, self.floor = float(model.radius_), float(model.median_radius_), \
            float(model.floor_)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = (x - self.low) / self.span
        total = torch.zeros_like(x[:, 0])
        for i, member in enumerate(self.members):
            total = total + (member(x) - self.centres[i]) / self.spreads[i]
        distance = (x - self.centre).pow(2).sum(1).sqrt()
        return beyond_the_data(total, distance, self.radius, self.median_radius, self.floor)
