"""An isolation forest scored in torch: scikit-learn's ``IsolationForest`` grows the trees, and its
score (``-score_samples``: 2^(-mean path length / c(max_samples)), higher = more anomalous) is then
taken with tensors only (the trees as padded arrays, one gather per level), so that it runs on the
rows' device, inside a model's torch score and in TorchScript and ONNX exports.

Why (issue 49): on tables a row is often anomalous in a few of its columns (a value out of its
column's range, a rare combination of two), which random axis-parallel cuts isolate quickly and a
distance over all the columns dilutes. The score is a step function of the rows: it has no gradient
(integrated-gradient explanations see the other members of a sum only).
"""

from __future__ import annotations

import numpy as np
import torch
import torch.nn as nn
from sklearn.ensemble import IsolationForest

from .placement import move_tensors

LEAF = -1  # scikit-learn's children index of a leaf


def average_path_length(n: torch.Tensor) -> torch.Tensor:
    """c(n), the mean path length of an unsuccessful search in a binary search tree of n rows
    (Liu, Ting and Zhou 2008): 0 for n <= 1, 1 for n = 2, 2 (ln(n - 1) + Euler's gamma) - 2 (n - 1) / n above."""
    n = n.double()
    longer = 2.0 * (torch.log((n - 1.0).clamp_min(1.0)) + float(np.euler_gamma)) - 2.0 * (n - 1.0) / n.clamp_min(1.0)
    return torch.where(n <= 1, torch.zeros_like(n), torch.where(n == 2, torch.ones_like(n), longer))


def tree_arrays(forest: IsolationForest) -> dict:
    """The fitted trees as (trees, nodes) tensors padded to the largest tree: each node's column and
    threshold, its two children (a leaf is its own child: descending past it stays there), and each
    node's path length as a leaf (its depth plus c(its training rows)); with the scale c(max_samples)."""
    trees = [t.tree_ for t in forest.estimators_]
    width = max(t.node_count for t in trees)
    arrays = {k: np.zeros((len(trees), width), dtype) for k, dtype in
              (("feature", np.int64), ("threshold", np.float64), ("left", np.int64), ("right", np.int64),
               ("path", np.float64))}
    for i, t in enumerate(trees):
        n = t.node_count
        leaf = t.children_left == LEAF
        own = np.arange(n)
        arrays["feature"][i, :n] = np.where(leaf, 0, t.feature)
        arrays["threshold"][i, :n] = np.where(leaf, np.inf, t.threshold)
        arrays["left"][i, :n] = np.where(leaf, own, t.children_left)
        arrays["right"][i, :n] = np.where(leaf, own, t.children_right)
        depth = np.zeros(n)
        for node in range(n):  # scikit-learn numbers a node's children after it
            if not leaf[node]:
                depth[t.children_left[node]] = depth[t.children_right[node]] = depth[node] + 1
        arrays["path"][i, :n] = depth + average_path_length(torch.as_tensor(t.n_node_samples)).numpy()
    out = {k: torch.as_tensor(v) for k, v in arrays.items()}
    out["levels"] = max(int(t.max_depth) for t in trees)
    out["scale"] = float(average_path_length(torch.tensor([forest.max_samples_])).item())
    return out


def forest_score(X: torch.Tensor, feature, threshold, left, right, path, levels: int, scale: float) -> torch.Tensor:
    """2^(-mean path length / scale) of every row of X (n, d): each row descends every tree ``levels``
    times (a row at a leaf stays there), compared in float32 as scikit-learn compares."""
    rows = X.detach().float().double()  # scikit-learn's trees take float32 rows, thresholds in float64
    node = torch.zeros(rows.shape[0], feature.shape[0], dtype=torch.long, device=rows.device)
    trees = torch.arange(feature.shape[0], device=rows.device)[None, :]
    for _ in range(levels):
        column = feature[trees, node]
        goes_left = torch.gather(rows, 1, column) <= threshold[trees, node]
        node = torch.where(goes_left, left[trees, node], right[trees, node])
    depth = path[trees, node].mean(1)
    return torch.pow(2.0, -depth / scale) if scale > 0 else torch.ones_like(depth)


class Forest:
    """scikit-learn's ``IsolationForest`` at its defaults (100 trees of ``min(256, n)`` rows), scored
    in torch (``dissimilarity``: scikit-learn's ``-score_samples``).

    Parameters
    ----------
    random_state : int or None
        Seeds the trees' draws.
    """

    BLOCK_ROWS = 8192  # rows scored at once: (rows, trees) node indices

    def __init__(self, random_state=None):
        self.random_state = random_state

    def fit(self, X: torch.Tensor) -> "Forest":
        """Grow the trees on the rows X (n, d), which stay where they are; the trees go there too."""
        forest = IsolationForest(random_state=self.random_state).fit(X.detach().cpu().double().numpy())
        arrays = tree_arrays(forest)
        self.levels_, self.scale_ = arrays.pop("levels"), arrays.pop("scale")
        for k, v in arrays.items():
            setattr(self, f"{k}_", v.to(X.device))
        return self

    def dissimilarity(self, X: torch.Tensor) -> torch.Tensor:
        """The forest's score of every row of X (float64; no gradient: a step function)."""
        return torch.cat([forest_score(X[start:start + self.BLOCK_ROWS], *self._tensors(), self.levels_, self.scale_)
                          for start in range(0, X.shape[0], self.BLOCK_ROWS)])

    def _tensors(self):
        return tuple(getattr(self, f"{k}_") for k in self.TENSORS)

    TENSORS = ("feature", "threshold", "left", "right", "path")

    def state_dict(self) -> dict:
        """The trees as plain tensors (on the CPU) and numbers."""
        return {"random_state": self.random_state, "levels": self.levels_, "scale": self.scale_,
                **{k: getattr(self, f"{k}_").cpu() for k in self.TENSORS}}

    @classmethod
    def from_state_dict(cls, state: dict, device=None) -> "Forest":
        model = cls(state["random_state"])
        model.levels_, model.scale_ = state["levels"], state["scale"]
        for k in cls.TENSORS:
            setattr(model, f"{k}_", state[k] if device is None else state[k].to(device))
        return model

    def to(self, device) -> "Forest":
        move_tensors(self, device)
        return self


class PortableForest(nn.Module):
    """A fitted ``Forest`` as buffers and a fixed number of gathers, for TorchScript and ONNX (the
    rows compared in float32 against float32 thresholds: equal to the forest up to a row within
    float32 rounding of a cut)."""

    def __init__(self, model: Forest):
        super().__init__()
        self.register_buffer("feature", model.feature_.cpu())
        self.register_buffer("threshold", model.threshold_.float().cpu())
        self.register_buffer("left", model.left_.cpu())
        self.register_buffer("right", model.right_.cpu())
        self.register_buffer("path", model.path_.float().cpu())
        self.levels, self.scale = int(model.levels_), float(model.scale_)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        n, trees = x.shape[0], self.feature.shape[0]
        tree = torch.arange(trees, device=x.device)[None, :].expand(n, trees)
        node = torch.zeros(n, trees, dtype=torch.long, device=x.device)
        for _ in range(self.levels):
            goes_left = torch.gather(x, 1, self.feature[tree, node]) <= self.threshold[tree, node]
            node = torch.where(goes_left, self.left[tree, node], self.right[tree, node])
        depth = self.path[tree, node].mean(1)
        return torch.pow(torch.full_like(depth, 2.0), -depth / self.scale)
