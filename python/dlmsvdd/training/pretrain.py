"""Step 0 for a backbone that starts from random weights, on the task's own
training images: the BatchNorm statistics the features are computed with, and
optionally before them an autoencoder (as Deep SAD pretrains its network: phi(x)
with a linear decoder learns to reconstruct x; the decoder is then dropped) or
Deep SAD's own training (``deep_sad``: the network trained for Deep SAD's
distance to a centre, normals pulled in, labelled anomalies pushed out).

Why the statistics: the features pass runs in eval mode, where BatchNorm
normalises with its running statistics. A network from scratch still holds their
initial values (mean 0, variance 1), so the first epochs' features, and the
median bandwidth taken from them, are those of a network whose BatchNorm layers
do nothing; each omega-step then moves the statistics a tenth of the way towards
the data's, and the features the boundary is fitted on drift for tens of epochs
for no reason the loss chose."""

from __future__ import annotations

import itertools
from collections.abc import Iterator

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader

from . import deep_sad as deep_sad_objective

# The reconstruction target is the image average-pooled to at most this many pixels a side:
# the coarse shape is what phi must keep, and the decoder stays small for large images.
TARGET_SIDE = 16


def target(x: torch.Tensor) -> torch.Tensor:
    """What the decoder reconstructs: an image pooled to at most TARGET_SIDE pixels a side,
    flattened; a feature vector as it is."""
    if x.dim() == 2:
        return x
    side = (min(x.shape[-2], TARGET_SIDE), min(x.shape[-1], TARGET_SIDE))
    return F.adaptive_avg_pool2d(x, side).flatten(1)


def calibrate_batchnorm(network: nn.Module, loader: DataLoader, device: torch.device | str = "cpu") -> int:
    """Sets every BatchNorm layer's running mean and variance to their averages over
    one pass of the loader (train-mode forward passes, no gradients, no other change);
    the number of BatchNorm layers calibrated."""
    layers = [m for m in network.modules() if isinstance(m, nn.modules.batchnorm._BatchNorm) and m.track_running_stats]
    if not layers or len(loader) == 0:
        return 0
    momenta = [m.momentum for m in layers]
    for m in layers:
        m.reset_running_stats()
        m.momentum = None  # a cumulative average over the pass's batches
    network.train()
    with torch.no_grad():
        for x, _ in loader:
            if len(x) > 1:  # a last batch of one row has no batch statistics (BatchNorm refuses it)
                network(x.to(device))
    for m, momentum in zip(layers, momenta):
        m.momentum = momentum
    return len(layers)


def _batches(loader: DataLoader) -> Iterator:
    """The loader's batches pass after pass (each pass reshuffled, unlike itertools.cycle)."""
    while True:
        yield from loader


def autoencoder(network: nn.Module, loader: DataLoader, steps: int, lr: float, weight_decay: float = 0.0,
                device: torch.device | str = "cpu") -> list[float]:
    """``steps`` Adam steps of the mean squared reconstruction error of
    ``Linear(network(x))`` against ``target(x)``, cycling over the loader's
    (image, target) batches, the network in train mode; the loss of each step."""
    network.train()
    decoder, optimizer, losses = None, None, []
    if len(loader) == 0:
        return losses
    for x, _ in itertools.islice(_batches(loader), steps):
        x = x.to(device)
        phi = network(x)
        if decoder is None:  # the feature dimension is known after the first forward pass
            decoder = nn.Linear(phi.shape[1], target(x).shape[1]).to(device)
            optimizer = torch.optim.Adam([*network.parameters(), *decoder.parameters()], lr=lr,
                                         weight_decay=weight_decay)
        loss = F.mse_loss(decoder(phi), target(x))
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
        losses.append(float(loss.detach()))
    return losses


def outputs(network: nn.Module, loader: DataLoader, device) -> tuple[torch.Tensor, np.ndarray]:
    """The network's eval-mode outputs on every row of the loader, and the targets."""
    network.eval()
    outs, targets = [], []
    with torch.no_grad():
        for x, t in loader:
            outs.append(network(x.to(device)))
            targets.append(np.asarray(t))
    return torch.cat(outs), np.concatenate(targets)


def deep_sad(network: nn.Module, loader: DataLoader, rows: DataLoader, steps: int, lr: float,
             weight_decay: float = 0.0, grad_clip: float | None = None,
             device: torch.device | str = "cpu") -> list[float]:
    """Deep SAD's training of ``network`` (``dlmsvdd.training.deep_sad``): the centre from its
    eval-mode outputs on the normals of ``rows`` (the training rows in order, without
    augmentation), then ``steps`` Adam steps of the loss, cycling over the loader's
    (image, target) batches, the network in train mode, the gradient's norm clipped to
    ``grad_clip`` (None: not clipped); the loss of each step."""
    losses = []
    if steps == 0 or len(loader) == 0:
        return losses
    c = deep_sad_objective.centre(*outputs(network, rows, device))
    optimizer = torch.optim.Adam(network.parameters(), lr=lr, weight_decay=weight_decay)
    network.train()
    for x, t in itertools.islice(_batches(loader), steps):
        loss = deep_sad_objective.loss(network(x.to(device)), t.to(device), c)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        if grad_clip is not None:
            nn.utils.clip_grad_norm_(network.parameters(), grad_clip)
        optimizer.step()
        losses.append(float(loss.detach()))
    return losses
