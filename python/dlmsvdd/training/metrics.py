"""Detection metrics on dissimilarity scores f (higher = more anomalous) and
targets t (+1 normal, -1 anomaly); the anomaly is the positive class."""

from __future__ import annotations

import numpy as np
from sklearn.metrics import balanced_accuracy_score, roc_auc_score, roc_curve


def _is_anomaly(targets) -> np.ndarray:
    return np.asarray(targets) < 0


def has_both_classes(targets) -> bool:
    return len(np.unique(_is_anomaly(targets))) == 2


def auroc(targets, scores) -> float:
    return float(roc_auc_score(_is_anomaly(targets), np.asarray(scores)))


def best_threshold(targets, scores) -> float:
    """The threshold on f (anomaly when f >= threshold) of maximal balanced accuracy."""
    fpr, tpr, thresholds = roc_curve(_is_anomaly(targets), np.asarray(scores))
    best = int(np.argmax(tpr - fpr))  # balanced accuracy = (tpr + 1 - fpr) / 2
    return float(min(thresholds[best], np.finfo(np.float64).max))  # roc_curve's first threshold is +inf


def predict(scores, threshold: float) -> np.ndarray:
    """+1 normal (f < threshold), -1 anomaly. Compared in float64: the threshold
    may be float64's largest value (roc_curve's +inf), which float32 cannot hold."""
    return np.where(np.asarray(scores, dtype=np.float64) >= threshold, -1, 1)


def balanced_accuracy(targets, scores, threshold: float) -> float:
    return float(balanced_accuracy_score(np.asarray(targets), predict(scores, threshold)))


def summary(targets, scores, threshold: float) -> dict:
    return {"auroc": auroc(targets, scores), "balanced_accuracy": balanced_accuracy(targets, scores, threshold),
            "threshold": threshold}
