"""A fitted LpSVDD's score f(z) = k(z, z) - 2 k(z)^T a + a^T K a in plain torch
operations (matrix products, exp, cos), with no call into the compiled
extension: the form TorchScript and ONNX export, and that runs wherever torch
or an ONNX runtime does.

* exact kernel: the support features and their weights a, f through
  exp(-gamma ||z - s||^2) by the norm expansion;
* Nystrom, RPCholesky: the landmarks and the m x r map, then ``Z^T a``;
* RFF, QMC-RFF, ORF, SORF, Fastfood: the frequencies as one dense (d, m)
  matrix (the structured ones applied to the identity), the offsets, ``Z^T a``;
  f is ||z(x) - Z^T a||^2, as ``LpSVDD.dissimilarity`` computes it for them.

Scores equal ``LpSVDD.dissimilarity`` up to float32 rounding.
"""

from __future__ import annotations

import math

import torch
import torch.nn as nn
from sklearn.utils.validation import check_is_fitted


def rbf(z: torch.Tensor, centres: torch.Tensor, gamma: float) -> torch.Tensor:
    """exp(-gamma ||z_i - c_j||^2), the squared distance by the norm expansion (clamped at 0)."""
    sq = (z * z).sum(1, keepdim=True) + (centres * centres).sum(1)[None] - 2.0 * (z @ centres.T)
    return torch.exp(-gamma * sq.clamp_min(0.0))


class RbfWeights(nn.Module):
    """k(z)^T w = exp(-gamma ||z - c||^2) @ (map @ w): the exact kernel (the
    support features, map = identity folded away) and the landmark maps."""

    def __init__(self, centres: torch.Tensor, weights: torch.Tensor, gamma: float):
        super().__init__()
        self.gamma = float(gamma)
        self.register_buffer("centres", centres.detach().float().contiguous())
        self.register_buffer("weights", weights.detach().float().contiguous())

    def forward(self, z: torch.Tensor) -> torch.Tensor:
        return rbf(z, self.centres, self.gamma) @ self.weights


class LandmarkWeights(RbfWeights):
    """z(x) = K(x, U) M, then z(x)^T (Z^T a)."""

    def __init__(self, centres, feature_map: torch.Tensor, weights, gamma):
        super().__init__(centres, weights, gamma)
        self.register_buffer("feature_map", feature_map.detach().float().contiguous())

    def forward(self, z: torch.Tensor) -> torch.Tensor:
        return (rbf(z, self.centres, self.gamma) @ self.feature_map) @ self.weights


class CosineWeights(nn.Module):
    """z(x) = sqrt(2/m) cos(x W + b), then z(x)^T (Z^T a)."""

    def __init__(self, frequencies: torch.Tensor, offset: torch.Tensor, weights: torch.Tensor):
        super().__init__()
        self.scale = math.sqrt(2.0 / frequencies.shape[1])
        self.register_buffer("frequencies", frequencies.detach().float().contiguous())
        self.register_buffer("offset", offset.detach().float().contiguous())
        self.register_buffer("weights", weights.detach().float().contiguous())

    def features(self, z: torch.Tensor) -> torch.Tensor:
        return self.scale * torch.cos(z @ self.frequencies + self.offset)

    def forward(self, z: torch.Tensor) -> torch.Tensor:
        return self.features(z) @ self.weights


class CosineDistance(CosineWeights):
    """The same map, then f = ||z(x) - Z^T a||^2."""

    def forward(self, z: torch.Tensor) -> torch.Tensor:
        return (self.features(z) - self.weights).square().sum(1)


class PortableBoundary(nn.Module):
    """Features (N, d) -> f (N,), float32, from a fitted LpSVDD; see the module docstring."""

    def __init__(self, svdd):
        super().__init__()
        check_is_fitted(svdd, "dual_coef_")
        backend, gamma = svdd.backend_, float(svdd.gamma_)
        if svdd.feature_weights_ is None:
            self.kernel_weights = RbfWeights(svdd.support_vectors_.cpu(), svdd.dual_coef_.cpu(), gamma)
        elif backend.unit_diagonal:  # the landmark maps
            self.kernel_weights = LandmarkWeights(backend.landmarks_.cpu(), backend.map_.cpu(),
                                                  svdd.feature_weights_.cpu(), gamma)
        elif svdd.distance_scores_:  # a spectral map's scores: distances in its feature space (k(z, z) = z'z)
            self.kernel_weights = CosineDistance(backend.frequencies().cpu(), backend.offset_.cpu(),
                                                 svdd.feature_weights_.cpu())
        else:
            self.kernel_weights = CosineWeights(backend.frequencies().cpu(), backend.offset_.cpu(),
                                                svdd.feature_weights_.cpu())
        self.distance_scores = bool(svdd.distance_scores_)  # a state saved before it: k(z, z) = 1
        self.aKa = float(svdd.aKa_)

    def forward(self, z: torch.Tensor) -> torch.Tensor:
        out = self.kernel_weights(z)
        return out if self.distance_scores else 1.0 - 2.0 * out + self.aKa
