"""The omega-step's objective: the paper's margin-violation loss, and how many rows violate their margin.

A normal row violates its margin when its dissimilarity f exceeds b_N, an anomalous one when f falls
short of b_A. The shares of each, per epoch, are in the fit's history ("violating_normal",
"violating_anomalous"): with the paper's slack penalties b_N can lie below every normal row's f (the
dual's valid solution, every normal row carrying slack), and then the loss pulls every normal row in
every step, never letting a well-placed one go (on CIFAR-10 from scratch at the defaults every normal
row violated its margin in every epoch; docs/results/paper-protocol.md, "paper-protocol-weight-decay").
"""

from __future__ import annotations

import torch
import torch.nn.functional as F


def margin_violation_loss(f: torch.Tensor, t: torch.Tensor, b_normal: float, b_anomaly: float,
                          power: float = 1.0, scale: float = 1.0) -> torch.Tensor:
    """The paper's eq. (cnn_softplus_loss): mean softplus^power(f - b_N) over the
    normal samples plus mean softplus^power(b_A - f) over the anomalous ones; with
    ``scale`` s, softplus(s x) / s (s = 1: the paper's)."""
    # masked means, not f[normal]: boolean indexing waits for the device to know the count (a
    # synchronisation per batch on a GPU); a class absent from the batch adds 0, as it did
    normal = (t > 0).to(f.dtype)
    anomalous = 1.0 - normal
    def violation(x):
        return (F.softplus(scale * x) / scale).pow(power)

    loss_normal = (violation(f - b_normal) * normal).sum() / normal.sum().clamp_min(1.0)
    loss_anomalous = (violation(b_anomaly - f) * anomalous).sum() / anomalous.sum().clamp_min(1.0)
    return loss_normal + loss_anomalous


def violation_counts(f: torch.Tensor, t: torch.Tensor, b_normal: float, b_anomaly: float) -> torch.Tensor:
    """[normal rows, those with f > b_N, anomalous rows, those with f < b_A] of a batch, as float64 on
    f's device (summed over batches without waiting for the device)."""
    with torch.no_grad():
        normal = t > 0
        return torch.stack([normal.sum(), (normal & (f > b_normal)).sum(),
                            (~normal).sum(), (~normal & (f < b_anomaly)).sum()]).double()


def violation_shares(counts: torch.Tensor) -> dict:
    """The history's "violating_normal" and "violating_anomalous" from summed ``violation_counts``
    (None for a class no batch held)."""
    n_normal, normal, n_anomalous, anomalous = counts.tolist()
    return {"violating_normal": normal / n_normal if n_normal else None,
            "violating_anomalous": anomalous / n_anomalous if n_anomalous else None}
