"""Which epoch's weights the trained model keeps (step 5's selection).

"best": the epoch of the best validation metric, ties to the later one (the
paper). "latest": the latest epoch whose metric is within what one validation
anomaly can change of the best. With the 2-3 validation anomalies of a digits
task at ratio 0.1 the AUROC moves in steps of 1/75, and "best" kept an early,
worse epoch on the strength of one anomaly-normal pair; with hundreds of
validation anomalies the two rules agree up to a small tolerance.
"""

from __future__ import annotations

from typing import Callable

import numpy as np

RULES = ("best", "latest")


def tolerance(rule: str, metric: str, n_anomalous: int) -> float:
    """How far below the best validation value a kept epoch may be: 0 for "best";
    for "latest" one validation anomaly's share of the metric: 1/n_A of the AUROC
    (its anomaly-normal pairs), 1/(2 n_A) of the balanced accuracy (half of the
    anomaly class's accuracy)."""
    if rule not in RULES:
        raise ValueError(f"selection rule must be one of {RULES}, got {rule!r}")
    if rule == "best" or n_anomalous < 1:
        return 0.0
    return 1.0 / n_anomalous if metric == "auroc" else 0.5 / n_anomalous


# What is kept, as the trainer (and its checkpoints) hold it: (top, epoch, weights): the best
# validation value so far, and the kept epoch with its weights.
START = (-np.inf, 0, None)


def offer(kept: tuple, epoch: int, row: dict, metric: str, rule: str, weights: Callable[[], dict]) -> tuple:
    """``kept`` after this epoch's validation ``row``: this epoch (its ``weights()``)
    when it is the latest within the tolerance of the best so far (it then stays
    within it: a later, higher best is kept itself). Without a validation metric
    (validation lacks a class) the epoch number stands in for it: the last epoch stays."""
    key = row.get(f"val_{metric}", epoch)
    top = max(kept[0], key)
    if key >= top - tolerance(rule, metric, row.get("val_n_anomalous", 0)):
        return top, epoch, weights()
    return top, kept[1], kept[2]
