"""Deep SAD's objective (Ruff et al., "Deep Semi-Supervised Anomaly Detection", ICLR 2020) on a
network's outputs: the centre c is the mean output of the training normals under the network as it
starts (coordinates within CENTRE_MIN of 0 pushed out to +-CENTRE_MIN, as its code does, so that no
coordinate's target is the trivial 0); a normal's loss is ||phi(x) - c||^2, a labelled anomaly's
ETA / (||phi(x) - c||^2 + EPS); the anomaly score is ||phi(x) - c||^2.

One owner for the objective: the step 0 ``pretrain="deep_sad"`` (``pretrain.deep_sad``) trains the
network with it before the joint epochs, and the benchmarks' Deep SAD peer (tests/benchmarks/
image_peers.py) trains with it throughout."""

from __future__ import annotations

import numpy as np
import torch

ETA, EPS, CENTRE_MIN = 1.0, 1e-6, 0.1


def centre(outputs: torch.Tensor, targets) -> torch.Tensor:
    """c: the mean of the normals' rows (target > 0) of ``outputs``, each coordinate at least
    CENTRE_MIN from 0 (one within it pushed out on its own side; exactly 0 to +CENTRE_MIN)."""
    normal = torch.as_tensor(np.asarray(targets) > 0, device=outputs.device)
    if not bool(normal.any()):
        raise ValueError("Deep SAD's centre needs normal training rows (target +1); none were given")
    c = outputs[normal].mean(0)
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
