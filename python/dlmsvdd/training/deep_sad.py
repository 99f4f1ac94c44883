"""Deep SAD's objective (Ruff et al., "Deep Semi-Supervised Anomaly Detection", ICLR 2020) on a
network's outputs: the centre c is the mean output of the training normals under the network as it
starts (coordinates within CENTRE_MIN of 0 pushed out to +-CENTRE_MIN, as its code does, so that no
coordinate's target is the trivial 0); a normal's loss is ||phi(x) - c||^2, a labelled anomaly's
ETA / (||phi(x) - c||^2 + EPS); the anomaly score is ||phi(x) - c||^2.

One owner for the objective: the step 0 ``pretrain="deep_sad"`` (``pretrain.deep_sad``) trains the
network with it before the joint epochs, the joint epochs add it to the margin loss at
``deep_sad_weight`` (``anchor``, ``anchored_loss``; its centre the normals' mean without the push, as
their features have unit norm), and the benchmarks' Deep SAD peer
(tests/benchmarks/image_peers.py) trains with it throughout."""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
import torch

ETA, EPS, CENTRE_MIN = 1.0, 1e-6, 0.1


def _normals_mean(values: torch.Tensor, normal: torch.Tensor, group=None) -> torch.Tensor:
    """The mean of ``values``' normal rows (over every rank's rows with a process ``group``)."""
    sums = torch.cat([values[normal].sum(0).reshape(-1), normal.sum().reshape(1).to(values.dtype)])
    if group is not None:
        group.sum_(sums)
    if not bool(sums[-1] > 0):
        raise ValueError("Deep SAD's centre needs normal training rows (target +1); none were given")
    mean = sums[:-1] / sums[-1]
    return mean if values.dim() > 1 else mean[0]


def centre(outputs: torch.Tensor, targets, group=None, push: bool = True) -> torch.Tensor:
    """c: the mean of the normals' rows (target > 0) of ``outputs`` (every rank's with a process
    ``group``); with ``push`` (Deep SAD's, for a network's raw outputs) each coordinate at least
    CENTRE_MIN from 0 (one within it pushed out on its own side; exactly 0 to +CENTRE_MIN)."""
    normal = torch.as_tensor(np.asarray(targets) > 0, device=outputs.device)
    c = _normals_mean(outputs, normal, group)
    if not push:
        return c
    small = c.abs() < CENTRE_MIN
    return torch.where(small & (c < 0), -CENTRE_MIN, torch.where(small, CENTRE_MIN, c))


def distance(outputs: torch.Tensor, c: torch.Tensor) -> torch.Tensor:
    """The score: each row's squared distance to the centre."""
    return (outputs - c).square().sum(1)


def loss(outputs: torch.Tensor, targets: torch.Tensor, c: torch.Tensor) -> torch.Tensor:
    """The batch's mean loss: the squared distance for normals (target > 0), its inverse
    (ETA / (d + EPS)) for labelled anomalies."""
    d = distance(outputs, c)
    return torch.where(targets > 0, d, ETA / (d + EPS)).mean()


class Anchor(NamedTuple):
    """The joint epochs' Deep SAD term's reference, fixed as they start: the centre c and the scale
    s, the root mean squared distance of the training normals to c then."""
    centre: torch.Tensor
    scale: float


def anchor(outputs: torch.Tensor, targets, group=None) -> Anchor:
    """The ``Anchor`` of the training rows' ``outputs`` (every rank's with a process ``group``): the
    normals' mean itself, without Deep SAD's push. The features it reads have unit norm, so they
    cannot collapse to zero, which the push guards against; their coordinates are small (about
    1 / sqrt(dimension)), so the push would move most of them and set the centre off the sphere
    (issue 50, docs/results/paper-protocol.md, "paper-protocol-anchor-centre")."""
    outputs = outputs.float()
    c = centre(outputs, targets, group, push=False)
    normal = torch.as_tensor(np.asarray(targets) > 0, device=outputs.device)
    mean_squared = _normals_mean(distance(outputs, c), normal, group)
    return Anchor(c, max(float(mean_squared.sqrt()), EPS))  # EPS: outputs that all sit on c


def anchored_loss(outputs: torch.Tensor, targets: torch.Tensor, reference: Anchor) -> torch.Tensor:
    """``loss`` of the outputs and centre divided by the anchor's scale: scale-free, so that its
    weight beside the margin loss means the same whatever the features' scale (as the joint epochs
    start a normal's part is about 1, an anomaly's ETA over its squared distance in units of s)."""
    return loss(outputs / reference.scale, targets, reference.centre.to(outputs.device) / reference.scale)
