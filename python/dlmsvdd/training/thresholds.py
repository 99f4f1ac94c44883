"""DLMSVDD's decision threshold and conformal calibration, from scores of rows the model did not fit.

Why (issue 46): a model scores the rows it was fitted on lower than new rows, so a threshold drawn
from them flags more new normal rows than it promises. ``DLMSVDD`` holds such rows already: its
validation normals, held out of the network's and the boundary's training. Nothing that scores them
may have been fitted on them either: the input consensus and the distance guard are fitted on the
training rows alone (``trainer.DLMSVDD._refit`` and ``_start``), and self-labelling relabels
training rows only. (Before, the consensus was fitted on the validation rows too: its ``LpSVDD``
member then scored them in-sample, and on 300 rows of N(0, I_32) the default model called 58% of
new normal rows anomalous at ``contamination=0.1``.)

What: the rule, in order (``decide``):

* ``contamination="radius"``: the sphere's r^2;
* validation with both classes: the balanced-accuracy threshold on the validation scores (a
  better decision with labelled anomalies, no rate promised);
* validation normals: the conformal rule p-value <= contamination against them
  (``from_calibration``), the rule ``predict(X, fpr=contamination)`` applies, so the share of new
  normal rows flagged is at most contamination, and close to it;
* no validation normals (``fit(train)`` without a validation set): the training normals' quantile,
  in-sample, with a warning that it flags more than that; ``calibrate(X_cal)`` then draws the
  threshold from held-out normals (``from_calibration``).
"""

from __future__ import annotations

import warnings

import numpy as np

from dlmsvdd_ext import conformal

from . import metrics

VALIDATION = "validation normals"  # the calibration source of a fit's validation normals
MORE = "more rows, a larger val_fraction, or calibrate(X_cal) with more normals the model never trained on"


class InSampleThreshold(UserWarning):
    """The threshold was drawn from scores of the rows the model was fitted on."""


def from_calibration(calibration: conformal.Calibration, contamination: float, stacklevel: int = 3) -> tuple[float, str]:
    """The threshold on f (an anomaly when f >= it) of the rule p-value <= contamination against the
    calibration normals, and its name.

    Parameters
    ----------
    calibration : dlmsvdd_ext.conformal.Calibration
        Scores of normal rows the model never trained on.
    contamination : float
        The level.
    stacklevel : int
        Where a ``TooFewCalibrationRows`` warning points, counted from here (``warnings.warn``'s).

    Returns
    -------
    tuple of (float, str)
        The threshold, just above the calibration score ``Calibration.threshold`` gives (so that
        f >= threshold is f > that score, in float64: what p-value <= contamination flags), and
        ``threshold_rule_``.
    """
    score = calibration.threshold(contamination, "contamination", MORE, stacklevel + 1)
    return float(np.nextafter(score, np.inf)), calibration.rule(contamination)


def decide(contamination, radius: float, f_val, t_val, train_scores) -> tuple[float, str, conformal.Calibration | None]:
    """The threshold, its rule and the calibration of a fit (the module docstring's order).

    Parameters
    ----------
    contamination : float or "radius"
        ``TrainConfig.contamination``.
    radius : float
        The boundary's r^2.
    f_val, t_val : numpy.ndarray or None
        The validation rows' scores and targets (None: no validation set).
    train_scores : callable
        Gives the training rows' (scores, targets), when needed.

    Returns
    -------
    tuple
        The threshold on f, ``threshold_rule_``, and the calibration (the validation normals'
        scores; None without them).
    """
    has_normals = f_val is not None and (np.asarray(t_val) > 0).any()
    calibration = conformal.Calibration(np.asarray(f_val)[np.asarray(t_val) > 0], VALIDATION) if has_normals else None
    if contamination == "radius":
        return float(radius), "radius", calibration
    if f_val is not None and metrics.has_both_classes(t_val):
        return metrics.best_threshold(t_val, f_val), "validation balanced accuracy", calibration
    if calibration is not None:  # warnings name fit's caller: decide, _refit, _fit, fit, the caller
        return (*from_calibration(calibration, contamination, 6), calibration)
    f, targets = train_scores()
    threshold = float(np.percentile(np.asarray(f, dtype=np.float64)[np.asarray(targets) > 0],
                                    100.0 * (1.0 - contamination)))
    warnings.warn(f"no validation normals: the threshold is the training normals' {1 - contamination:g} quantile, "
                  "scores of rows the model was fitted on, which are lower than new rows', so it flags more than "
                  f"contamination={contamination:g} of new normal rows; pass a validation set, or "
                  "calibrate(X_cal) with normal rows the model never trained on (it then sets the threshold)",
                  InSampleThreshold, stacklevel=5)
    return threshold, f"training normals' {1 - contamination:g} quantile (in-sample)", None


def recalibrated(rule: str, contamination, calibration: conformal.Calibration) -> tuple[float, str] | None:
    """The threshold and rule after ``calibrate(X_cal)`` replaced the calibration normals: a
    contamination threshold follows them; the sphere's and the balanced-accuracy one stay (None).

    Parameters
    ----------
    rule : str
        The model's ``threshold_rule_``.
    contamination : float or "radius"
        ``TrainConfig.contamination``.
    calibration : dlmsvdd_ext.conformal.Calibration
        The new calibration normals.

    Returns
    -------
    tuple of (float, str) or None
        The new threshold and rule, or None to keep the present ones.
    """
    if contamination == "radius" or rule == "validation balanced accuracy":
        return None
    return from_calibration(calibration, contamination, 4)  # recalibrated, calibrate, the caller
