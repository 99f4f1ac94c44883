"""Detection metrics on dissimilarity scores f (higher = more anomalous) and
targets t (+1 normal, -1 anomaly); the anomaly is the positive class."""

from __future__ import annotations

import numpy as np
from sklearn.metrics import balanced_accuracy_score, roc_auc_score, roc_curve


def _is_anomaly(targets) -> np.ndarray:
    return np.asarray(targets) < 0


def has_both_classes(targets) -> bool:
    """Whether the targets hold both a normal sample and an anomaly.

    Parameters
    ----------
    targets : array-like
        +1 normal, -1 anomaly.

    Returns
    -------
    bool
        True when both classes are present.
    """
    return len(np.unique(_is_anomaly(targets))) == 2


def auroc(targets, scores) -> float:
    """The area under the ROC curve, the anomaly the positive class.

    Parameters
    ----------
    targets : array-like
        +1 normal, -1 anomaly.
    scores : array-like
        Dissimilarities f (higher = more anomalous).

    Returns
    -------
    float
        The AUROC.
    """
    return float(roc_auc_score(_is_anomaly(targets), np.asarray(scores)))


def best_threshold(targets, scores) -> float:
    """The threshold on f of maximal balanced accuracy, in the middle of the gap that achieves it.

    An anomaly when f >= threshold. Every threshold
    between the lowest score called anomalous and the highest score below it gives
    the same balanced accuracy on these scores. The gap's upper end (roc_curve's
    threshold, used before) calls normal every new anomaly that scores a little
    below the lowest labelled one; with 2-3 validation anomalies that was most of
    them (digits, ratio 0.1: test balanced accuracy 0.68-0.97 where the middle
    gives 0.97-0.99).

    Parameters
    ----------
    targets : array-like
        +1 normal, -1 anomaly.
    scores : array-like
        Dissimilarities f (higher = more anomalous).

    Returns
    -------
    float
        The threshold (float64's largest value when every sample is best called normal).
    """
    scores = np.asarray(scores, dtype=np.float64)
    fpr, tpr, thresholds = roc_curve(_is_anomaly(targets), scores)
    edge = thresholds[int(np.argmax(tpr - fpr))]  # balanced accuracy = (tpr + 1 - fpr) / 2
    if not np.isfinite(edge):  # roc_curve's first threshold is +inf: everything normal
        return float(np.finfo(np.float64).max)
    below = scores[scores < edge]
    if below.size == 0:
        return float(edge)
    middle = below.max() / 2 + edge / 2  # halves first: no overflow near float64's largest values
    return float(middle if middle > below.max() else edge)  # adjacent floats: no middle


def predict(scores, threshold: float) -> np.ndarray:
    """+1 normal (f < threshold), -1 anomaly.

    Compared in float64: the threshold may be float64's largest value
    (roc_curve's +inf), which float32 cannot hold.

    Parameters
    ----------
    scores : array-like
        Dissimilarities f.
    threshold : float
        The threshold on f.

    Returns
    -------
    numpy.ndarray
        +1 or -1 per score.
    """
    return np.where(np.asarray(scores, dtype=np.float64) >= threshold, -1, 1)


def balanced_accuracy(targets, scores, threshold: float) -> float:
    """The balanced accuracy of ``predict(scores, threshold)``.

    Parameters
    ----------
    targets : array-like
        +1 normal, -1 anomaly.
    scores : array-like
        Dissimilarities f (higher = more anomalous).
    threshold : float
        The threshold on f.

    Returns
    -------
    float
        The mean of the two classes' accuracies.
    """
    return float(balanced_accuracy_score(np.asarray(targets), predict(scores, threshold)))


def summary(targets, scores, threshold: float) -> dict:
    """AUROC and balanced accuracy at a threshold.

    Parameters
    ----------
    targets : array-like
        +1 normal, -1 anomaly.
    scores : array-like
        Dissimilarities f (higher = more anomalous).
    threshold : float
        The threshold on f.

    Returns
    -------
    dict
        ``auroc``, ``balanced_accuracy`` (None for both on a set with one class,
        where neither is defined: a table task's validation holds normal rows
        only) and ``threshold``.
    """
    if not has_both_classes(targets):
        return {"auroc": None, "balanced_accuracy": None, "threshold": threshold}
    return {"auroc": auroc(targets, scores), "balanced_accuracy": balanced_accuracy(targets, scores, threshold),
            "threshold": threshold}
