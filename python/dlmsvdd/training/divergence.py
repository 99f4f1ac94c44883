"""When training has broken down: non-finite features or loss, or features that
collapsed so far that every score is the same.

The trainer checks the training features of every epoch before its alpha-step
and every omega-step loss. At the first problem it stops: with
``on_divergence="rollback"`` (the default) it keeps the best epoch so far, as
selected by validation (or the last healthy one), warns (``DivergenceWarning``)
and records the problem in ``DLMSVDD.warnings_`` (a run folder's metrics.json
has it under ``warnings``); with ``"error"``, or when the initial network's
features are already broken, it raises ``TrainingDiverged`` (a ValueError).
"""

from __future__ import annotations

from collections import deque

import torch
import torch.distributed as dist

# Collapsed: gamma * max_i ||x_i - mean||^2 at most this. Then every kernel entry
# k(x_i, x_j) = exp(-gamma ||x_i - x_j||^2) >= exp(-4e-6), so the scores agree to
# about 1e-5 and their order is float32 rounding (a healthy run sits near 1).
COLLAPSE = 1e-6


class DivergenceWarning(RuntimeWarning):
    """Training stopped early on a broken epoch; the best earlier epoch was kept."""


class TrainingDiverged(ValueError):
    """Training broke down where there is nothing to roll back to, or rollback was not asked for."""


def feature_problem(feats: torch.Tensor, gamma: float | None, group=None) -> str | None:
    """What is wrong with a training set's features (this process's shard under
    torchrun; the verdict is the whole set's on every rank), or None.

    ``gamma``: the RBF bandwidth these features will be scored with, or None
    when it is estimated from them (then 1, the scale of the L2-normalised
    features, stands in for it: the features lie on the unit sphere or at 0).
    """
    x = feats.detach().to(torch.float64)
    stats = torch.stack([(~torch.isfinite(x)).sum().to(torch.float64), torch.tensor(float(len(x)), device=x.device)])
    total = torch.nan_to_num(x, nan=0.0, posinf=0.0, neginf=0.0).sum(0)
    if group is not None:
        dist.all_reduce(stats)
        dist.all_reduce(total)
    if stats[0] > 0:
        return f"{int(stats[0])} training feature values are not finite (NaN or Inf)"
    spread = (x - total / stats[1]).pow(2).sum(1).max() if len(x) else x.new_zeros(())
    if group is not None:
        dist.all_reduce(spread, op=dist.ReduceOp.MAX)
    scale = 1.0 if gamma is None else gamma
    if scale * float(spread) <= COLLAPSE:
        return (f"the training features collapsed (all lie within {float(spread) ** 0.5:.3g} of their mean, "
                f"gamma {scale:.3g}), so every sample gets the same score")
    return None


class FiniteChecks:
    """Whether each omega-step batch's features and loss were finite, read without stalling the device.

    On a CPU each batch is checked as it comes; under torchrun too (every rank must stop at
    the same batch: an all-reduce). On a GPU a batch's flag is copied to pinned host memory
    behind the batch's work and read once the device has got there (``torch.cuda.Event``),
    so that Python keeps queueing batches instead of waiting for each one (issue 47); the
    flags still pending are read at the end of the epoch (``first_bad(wait=True)``).
    """

    def __init__(self, device: torch.device, group=None):
        self.device, self.group = device, group
        self.count, self.pending = 0, deque()

    def add(self, *tensors: torch.Tensor) -> int | None:
        """Check a batch's tensors; the index of the first batch found not finite so far, or None."""
        index, self.count = self.count, self.count + 1
        finite = torch.stack([torch.isfinite(x.detach()).all() for x in tensors]).all()
        if self.group is not None:
            flag = finite.to(torch.float32)
            dist.all_reduce(flag, op=dist.ReduceOp.MIN)
            return None if bool(flag) else index
        if self.device.type != "cuda":
            return None if bool(finite) else index
        host = torch.empty((), dtype=torch.bool, pin_memory=True)
        host.copy_(finite, non_blocking=True)
        event = torch.cuda.Event()
        event.record()
        self.pending.append((index, host, event))
        return self.first_bad(wait=False)

    def first_bad(self, wait: bool) -> int | None:
        """The first batch read as not finite among those whose flags arrived (all of them with ``wait``)."""
        while self.pending and (wait or self.pending[0][2].query()):
            index, host, event = self.pending.popleft()
            event.synchronize()
            if not bool(host):
                self.pending.clear()
                return index
        return None
