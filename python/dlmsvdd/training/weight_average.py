"""An exponential moving average (EMA) of the network's weights: what each epoch is judged on.

With ``ema_half_life`` h > 0 (in epochs) every epoch's features, boundary (steps 1-3), validation
and selection (step 5) read the averaged weights, and the kept epoch's weights are the average's;
the omega-step (step 4) trains the network's own weights against that boundary, and the average
follows them after every optimiser step t with the decay

    d_t = min(0.5 ** (1 / (h n)), (1 + t) / (10 + t)),   average <- d_t average + (1 - d_t) weights

n the optimiser steps of an epoch: a step's weight halves in h epochs; the second term lets the
first steps move the average, which starts at the weights step 0 left. BatchNorm's running
statistics are averaged alike (integer buffers take the latest value). At a constant rate the
network's weights wander from step to step, and its validation AUROC from epoch to epoch (on
Fashion-MNIST's look-alike classes the kept epoch's was 0.005 above what it scored on validation
rows it was not kept on); the average is a steadier network to fit a boundary on and to keep.
Chosen on validation AUROC (docs/results/paper-protocol.md, "paper-protocol-ema").
"""

from __future__ import annotations

import contextlib
import copy

import torch
from torch import nn

WARM_UP = 10  # the decay's first steps: (1 + t) / (WARM_UP + t)


class WeightAverage:
    """The running average of a network's state (``state``), ``steps`` updates in."""

    def __init__(self, network: nn.Module, half_life: float, steps: int = 0, state: dict | None = None):
        if half_life <= 0:
            raise ValueError(f"the average's half-life is a number of epochs > 0, got {half_life}")
        self.half_life, self.steps = float(half_life), int(steps)
        own = network.state_dict()
        self.state = {k: (own[k] if state is None else state[k].to(own[k].device)).detach().clone() for k in own}

    def decay(self, steps_per_epoch: int) -> float:
        """The next update's decay (the module's formula; ``steps`` already counts it)."""
        halving = 0.5 ** (1.0 / (self.half_life * max(steps_per_epoch, 1)))
        return min(halving, (1 + self.steps) / (WARM_UP + self.steps))

    def update(self, network: nn.Module, steps_per_epoch: int) -> None:
        """One optimiser step's update towards ``network``'s weights."""
        self.steps += 1
        decay = self.decay(steps_per_epoch)
        with torch.no_grad():
            for key, value in network.state_dict().items():
                if value.is_floating_point():
                    self.state[key].lerp_(value, 1 - decay)
                else:
                    self.state[key].copy_(value)

    @contextlib.contextmanager
    def applied(self, network: nn.Module):
        """``network`` holds the averaged weights inside the block, its own again after it."""
        own = copy.deepcopy(network.state_dict())
        network.load_state_dict(self.state)
        try:
            yield network
        finally:
            network.load_state_dict(own)

    def state_dict(self) -> dict:
        """What a training state stores of it (``from_state_dict`` reads it back)."""
        return {"half_life": self.half_life, "steps": self.steps, "state": self.state}

    @classmethod
    def from_state_dict(cls, saved: dict, network: nn.Module) -> "WeightAverage":
        """The average ``state_dict`` wrote, on ``network``'s device."""
        return cls(network, saved["half_life"], saved["steps"], saved["state"])


def judged_on(average: WeightAverage | None, network: nn.Module):
    """A context in which ``network`` holds the weights an epoch is judged on: the average's, or
    without one (None) its own."""
    return contextlib.nullcontext(network) if average is None else average.applied(network)
