"""The distance guard: a row far from the training data scores as anomalous, whatever the network
makes of it.

Why: the network's features are L2-normalised (the paper's choice for pretrained image features),
so on their own they see a row's direction, not its magnitude. A row 1000 standard deviations from
the data can map to the features of a normal row and score as normal (issue 38: 4.5% of rows
scaled by 1000 were called normal), and rows of 1e20 overflowed float32 to f = 0.5, "normal".

What: the network's output gets one more coordinate, ``w * e(x)``, where ``e(x) = max(0, |u(x)| -
R)`` is how far the row lies beyond the training data: ``u`` is the network's input (feature
vectors: standardised per column; images: average-pooled to at most ``pretrain.TARGET_SIDE``
pixels a side, the coarse picture the autoencoder of step 0 reconstructs) minus the mean of the training rows, and ``R`` the largest ``|u|`` among them. The
boundary's RBF kernel on ``[features, w e]`` is then the product of the kernel on the features
and ``exp(-gamma w^2 (e - e')^2)``: a multiple-kernel boundary whose second kernel is on the input.
Every training row has ``e = 0``, so the training kernel, the boundary, the bandwidth and the
omega-step are exactly those without the guard, and rows within the data's radius score as
before. Beyond it, every kernel value of the row is multiplied by ``exp(-gamma w^2 e^2)`` and
``f`` rises with the distance towards its largest value ``1 + a^T K a``. ``w`` is set after each
alpha-step from the boundary's ``gamma`` so that a row one median radius ``r_med`` (the median
``|u|`` of the training rows) beyond ``R`` keeps ``exp(-STRENGTH)`` = 1% of its kernel values:
``gamma w^2 r_med^2 = STRENGTH``.

The kernel alone lets such a row's f approach the boundary's largest value; models whose normal rows
already score near that value need more. So the score of a row more than one median radius beyond
the data (``e > r_med``) is set above every score within it: ``max(f, floor) + w e``, with ``floor``
the largest f of the training, validation and calibration rows (``floor_scores``, set when the
boundary is refitted and at ``calibrate``). ``R`` and the mean are taken over the training rows
alone: the validation normals that calibrate the p-values and the threshold meet the guard as new
rows do (until issue 46 they were among its rows, so none of them could lie beyond the data while a
new normal row could; the conformal ``fpr`` was then at most ``fpr + 1 / (n + 1)``). Every row well
beyond the data is flagged, at the default threshold and at any ``fpr`` the calibration set can
reach, and scored higher the farther out it lies. Rows less than a median radius beyond ``R`` keep the kernel's
score: test images of a class that lie just outside its training images (as on digits) would
otherwise all rank above every anomaly within the data.

The network's input and the guard's coordinate are clipped at ``LIMIT`` (orders of magnitude beyond
any training row), so a row of 1e20 stays finite through the network and the kernel in float32 and
scores as the farthest row, never as NaN or, after an overflow, as normal.
"""

from __future__ import annotations

import math

import torch
import torch.nn as nn
import torch.nn.functional as F

from ..data.vectors import INPUT_LIMIT
from .pretrain import TARGET_SIDE

LIMIT = INPUT_LIMIT  # the network's input and the guard's coordinate are clipped to [-LIMIT, LIMIT]
RADIUS_MARGIN = 1e-4  # R is the farthest given row's distance times 1 + RADIUS_MARGIN
STRENGTH = math.log(100.0)  # a row one median radius beyond the data keeps 1% of its kernel values


class DistanceGuard(nn.Module):
    """x -> w * max(0, |u(x)| - R), one column (see the module docstring), for inputs of shape
    ``input_shape`` (one sample's: (D,) or (C, H, W)). Its numbers are buffers, saved with the
    network: ``center`` (the training rows' mean view), ``radius`` (R), ``median_radius`` (r_med)
    and ``weight`` (w)."""

    def __init__(self, input_shape: tuple[int, ...]):
        super().__init__()
        # images: pooled to at most TARGET_SIDE a side (pretrain.target's view); vectors as they are
        self.limit = LIMIT  # an attribute, not the global: TorchScript takes no global numbers
        self.images = len(input_shape) == 3
        self.side = [min(int(n), TARGET_SIDE) for n in input_shape[-2:]] if self.images else [0, 0]
        width = input_shape[0] * self.side[0] * self.side[1] if self.images else int(input_shape[0])
        self.register_buffer("center", torch.zeros(width))
        self.register_buffer("radius", torch.zeros(()))
        self.register_buffer("median_radius", torch.ones(()))
        self.register_buffer("weight", torch.zeros(()))
        self.register_buffer("floor", torch.zeros((), dtype=torch.float64))  # set with the final boundary

    def view(self, x: torch.Tensor) -> torch.Tensor:
        """u + mean: the network's input as the guard measures it, clipped, one row per sample."""
        x = x.clamp(-self.limit, self.limit)
        if self.images:
            x = F.adaptive_avg_pool2d(x, self.side)
        return x.flatten(1)

    def distance(self, x: torch.Tensor) -> torch.Tensor:
        """|u(x)|: the distance of each row's view from the training mean."""
        return (self.view(x) - self.center).pow(2).sum(1).sqrt()  # at most sqrt(D) LIMIT: finite in float32

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        beyond = (self.distance(x) - self.radius).clamp(min=0.0)
        return (self.weight * beyond).clamp(max=self.limit).unsqueeze(1)

    @torch.no_grad()
    def fit(self, inputs) -> dict:
        """Centre and radii from the training rows' network inputs: ``inputs()`` iterates over
        their batches (two passes: the mean, then the distances)."""
        total, count = None, 0
        for x in inputs():
            v = self.view(x).double()
            total = v.sum(0) if total is None else total + v.sum(0)
            count += len(v)
        self.center.copy_((total / count).to(self.center.dtype))
        distances = torch.cat([self.distance(x).double() for x in inputs()])
        # a margin over the farthest row: float32 rounding of its distance at scoring time (another
        # batch, the export) must not move a row the fit was given beyond the data
        self.radius.fill_(float(distances.max()) * (1.0 + RADIUS_MARGIN))
        self.median_radius.fill_(float(distances.median()) or 1.0)  # identical rows: any unit will do
        return {"radius": float(self.radius), "median_radius": float(self.median_radius)}

    def floor_start(self) -> float:
        """The coordinate ``w r_med`` of a row one median radius beyond ``R``, where the floor starts."""
        return float(self.weight) * float(self.median_radius)

    @torch.no_grad()
    def set_bandwidth(self, gamma: float) -> None:
        """w for the boundary's gamma: gamma w^2 r_med^2 = STRENGTH (training rows are unaffected:
        their coordinate is 0)."""
        self.weight.fill_(math.sqrt(STRENGTH / gamma) / float(self.median_radius))


def floor_scores(f: torch.Tensor, column: torch.Tensor, floor: float, start: float) -> torch.Tensor:
    """The score of a row well beyond the data (guard coordinate ``column`` above ``start``, one
    median radius beyond ``R``): above every score within it, ``max(f, floor) + column``, so higher
    the farther out; other rows keep ``f``."""
    above = torch.clamp(f, min=floor) + column.to(f.dtype)
    return torch.where(column > start, above, f)


class GuardedScore(nn.Module):
    """``boundary(z)`` with ``floor_scores`` applied (z's last column is the guard's), for exports."""

    def __init__(self, boundary: nn.Module, floor: float, start: float):
        super().__init__()
        self.boundary, self.floor, self.start = boundary, float(floor), float(start)

    def forward(self, z: torch.Tensor) -> torch.Tensor:
        return floor_scores(self.boundary(z), z[:, -1], self.floor, self.start)
