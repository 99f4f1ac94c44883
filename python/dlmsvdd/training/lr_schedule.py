"""The omega-step's learning rate over a fit's epochs (``TrainConfig.lr_schedule``).

"constant" keeps the recipe's rate (Adam's step size) for every epoch. "cosine" lowers it along half a
cosine, epoch by epoch, from the rate towards zero at the last omega-step: a fit that stops after few
epochs (the scratch recipe's ``budget_rows`` on large training sets) then ends on small steps instead of
in the middle of the large ones. The rate of an epoch is a function of the epoch alone, so a resumed fit
trains as an uninterrupted one does.
"""

from __future__ import annotations

import math

SCHEDULES = ("constant", "cosine")


def rate(base: float, schedule: str, epoch: int, epochs: int) -> float:
    """The learning rate of the omega-step of ``epoch`` (0-based) in a fit of ``epochs`` omega-steps.

    Parameters
    ----------
    base : float
        The recipe's rate.
    schedule : str
        One of ``SCHEDULES``.
    epoch, epochs : int
        The epoch and the fit's omega-steps.

    Returns
    -------
    float
        ``base`` ("constant"); base * (1 + cos(pi (epoch + 1/2) / epochs)) / 2 ("cosine": the
        half cosine read at the middle of the epoch, so that no epoch trains at zero).
    """
    if schedule not in SCHEDULES:
        raise ValueError(f"unknown learning-rate schedule {schedule!r}; choose from {SCHEDULES}")
    if schedule == "constant" or epochs <= 0:
        return base
    return base * 0.5 * (1.0 + math.cos(math.pi * (epoch + 0.5) / epochs))


def apply(optimizer, base: float, schedule: str, epoch: int, epochs: int) -> float:
    """Set every parameter group of ``optimizer`` to the rate of ``epoch``; the rate."""
    lr = rate(base, schedule, epoch, epochs)
    for group in optimizer.param_groups:
        group["lr"] = lr
    return lr
