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


class EpochSelection:
    """Offered every epoch's validation row in order, keeps one epoch's weights."""

    def __init__(self, rule: str, metric: str):
        tolerance(rule, metric, 0)  # checks the rule
        self.rule, self.metric = rule, metric
        self.top, self.epoch, self.state = -np.inf, None, None

    def offer(self, epoch: int, row: dict, state: Callable[[], dict]) -> bool:
        """Keeps ``state()`` when this epoch is the latest within the tolerance of the
        best so far (it then stays within it: a later, higher best is itself kept).
        Without a validation metric (validation lacks a class) every epoch is kept:
        the last one stays."""
        value = row.get(f"val_{self.metric}")
        if value is not None:
            self.top = max(self.top, value)
            if value < self.top - tolerance(self.rule, self.metric, row.get("val_n_anomalous", 0)):
                return False
        self.epoch, self.state = epoch, state()
        return True
