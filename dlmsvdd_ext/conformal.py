"""Conformal p-values and the decisions they give, with error-rate guarantees.

Calibration: the dissimilarities f of normal samples the fit never trained on.
A new sample's p-value is ``(1 + #{f_cal >= f(x)}) / (n_cal + 1)`` (Bates,
Candes, Lei, Romano, Sesia, "Testing for outliers with conformal p-values",
Ann. Statist. 2023). When the calibration normals and a new normal sample are
exchangeable, P(p <= level) <= level for every level, in finite samples:

* ``fpr``: flag p <= fpr; each normal sample is flagged with probability at
  most fpr (marginal over the calibration draw).
* ``fdr``: Benjamini-Hochberg on a batch's p-values; the expected share of
  normal samples among the flagged ones is at most fdr (the conformal p-values
  of one batch share the calibration set, and are positively dependent, PRDS,
  which BH needs: see the paper).

* the default threshold at ``contamination`` is the same rule, p <= contamination
  (``Calibration.threshold``): a threshold on f that flags exactly the samples
  ``fpr=contamination`` flags, so about that share of new normal samples.

Both estimators (``dlmsvdd_ext.LpSVDD``, ``dlmsvdd.DLMSVDD``) keep a
``Calibration`` and hand it the dissimilarities they compute. Its scores are
out of sample (a model scores the rows it was fitted on lower than any new
row): ``LpSVDD``'s are its training normals' cross-fitted scores
(``dlmsvdd_ext.calibration_scores``), ``DLMSVDD``'s its validation normals',
and ``calibrate(X_cal)`` takes normal samples the fit never trained on.
"""

from __future__ import annotations

import warnings

import numpy as np
import scipy.stats
import torch


class TooFewCalibrationRows(UserWarning):
    """A default threshold asked for a level below ``1 / (n_cal + 1)``: no p-value of the
    calibration set can reach it, so the threshold flags more than the level asked."""


def rows_needed(level: float) -> int:
    """The fewest calibration normals whose smallest p-value, ``1 / (n + 1)``, is at most ``level``.

    Parameters
    ----------
    level : float
        A level in (0, 1).

    Returns
    -------
    int
        The smallest n with ``1 / (n + 1) <= level`` (99 for 0.01).
    """
    n = max(0, int(np.ceil(1.0 / level)) - 2)
    while 1.0 / (n + 1) > level:  # the p-values' own float arithmetic decides, not 1 / level's rounding
        n += 1
    return n


def _scores(values, name: str) -> np.ndarray:
    """Dissimilarities as a 1-D float64 array of finite values."""
    if isinstance(values, torch.Tensor):
        values = values.detach().cpu().numpy()
    scores = np.asarray(values, dtype=np.float64).ravel()
    if not np.isfinite(scores).all():
        raise ValueError(f"{name} holds NaN or infinite scores")
    return scores


class Calibration:
    """The calibration normals' dissimilarities (sorted, float64) and where they came from.

    Parameters
    ----------
    scores : array-like
        The dissimilarities f of normal samples the fit never trained on; finite, at least one.
    source : str
        Where they came from ("validation normals", "calibrate(X_cal)").
    """

    def __init__(self, scores, source: str):
        scores = _scores(scores, "the calibration set")
        if scores.size == 0:
            raise ValueError("the calibration set is empty: calibrate with normal samples the fit never trained on")
        self.scores = np.sort(scores)
        self.source = str(source)

    @property
    def n(self) -> int:
        """The number of calibration normals."""
        return int(self.scores.size)

    @property
    def min_level(self) -> float:
        """The smallest p-value there is, 1 / (n + 1): no conformal test reaches a lower level."""
        return 1.0 / (self.n + 1)

    def p_values(self, f) -> np.ndarray:
        """The conformal p-values of dissimilarities: ``(1 + #{calibration scores >= f}) / (n + 1)``.

        Parameters
        ----------
        f : array-like
            Dissimilarities of new samples.

        Returns
        -------
        numpy.ndarray
            One p-value per score; small = anomalous.
        """
        f = _scores(f, "X")
        at_least = self.n - np.searchsorted(self.scores, f, side="left")  # scores >= f: the sorted tail
        return (1.0 + at_least) / (self.n + 1)

    def check_level(self, level, name: str) -> float:
        """Check a level this calibration set can reach.

        Parameters
        ----------
        level : float
            A level in (0, 1), at least ``min_level``.
        name : str
            The level's name for the message ("fpr", "fdr").

        Returns
        -------
        float
            The level.

        Raises
        ------
        ValueError
            A level out of (0, 1), or below ``1 / (n + 1)`` with how many
            calibration normals it needs.
        """
        try:
            value = float(level)
        except (TypeError, ValueError):
            raise ValueError(f"{name} must be a number in (0, 1), got {level!r}") from None
        if not 0.0 < value < 1.0:
            raise ValueError(f"{name} must be in (0, 1), got {level!r}")
        if value < self.min_level:
            raise ValueError(f"{name}={value:g} is below 1/(n_cal + 1) = {self.min_level:.3g}, the smallest p-value "
                             f"{self.n} calibration samples ({self.source}) can give, so no sample could ever be "
                             f"flagged; a level of {value:g} needs at least {rows_needed(value)} calibration normals "
                             "(calibrate with more)")
        return value

    def threshold(self, level: float, name: str = "contamination", more: str = "calibrate with more",
                  stacklevel: int = 2) -> float:
        """The threshold on f of the rule p <= level: f above it is flagged, exactly where ``flags(f, fpr=level)``
        flags, so a new normal sample is flagged with probability at most ``level`` (and close to it).

        Below ``1 / (n + 1)`` no p-value reaches the level: the threshold is then the highest
        calibration score, which flags about ``1 / (n + 1)`` of new normal samples, and a
        ``TooFewCalibrationRows`` warning says so and how many calibration normals the level needs.

        Parameters
        ----------
        level : float
            The level in (0, 1).
        name : str
            The level's name for the warning ("contamination").
        more : str
            What would give more calibration normals, for the warning.
        stacklevel : int
            The warning's, as ``warnings.warn`` takes it (the caller's code, not the estimator's).

        Returns
        -------
        float
            The k-th highest calibration score, k the largest count with ``k / (n + 1) <= level``:
            flag f strictly above it.
        """
        counts = np.arange(self.n)  # c calibration scores >= f give the p-value (1 + c) / (n + 1)
        reached = int(np.count_nonzero((1.0 + counts) / (self.n + 1) <= level))  # in p_values' arithmetic
        if reached == 0:
            warnings.warn(f"{name}={level:g} is below 1/(n_cal + 1) = {self.min_level:.3g}, the smallest p-value "
                          f"{self.n} calibration normals ({self.source}) can give: the threshold is the highest of "
                          f"them, so about {self.min_level:.3g} of new normal samples will be flagged, not "
                          f"{level:g}. {name}={level:g} needs at least {rows_needed(level)} calibration normals "
                          f"({more})", TooFewCalibrationRows, stacklevel=stacklevel)
            reached = 1
        return float(self.scores[self.n - reached])

    def rule(self, level: float) -> str:
        """The name of the rule ``threshold(level)`` draws (an estimator's ``threshold_rule_``).

        Parameters
        ----------
        level : float
            The level, as ``threshold`` takes it.

        Returns
        -------
        str
            "<source>: p-value <= <level>", or, below ``1 / (n + 1)``, "<source>: above all <n>
            (too few for p-value <= <level>)".
        """
        if level < self.min_level:
            return f"{self.source}: above all {self.n} (too few for p-value <= {level:g})"
        return f"{self.source}: p-value <= {level:g}"

    def flags(self, f, fpr=None, fdr=None) -> np.ndarray:
        """Which samples are flagged as anomalous: p <= fpr, or Benjamini-Hochberg at fdr over the batch.

        Parameters
        ----------
        f : array-like
            Dissimilarities of new samples.
        fpr : float or None
            The false-alarm rate per sample.
        fdr : float or None
            The false-discovery rate of the batch (give one of the two).

        Returns
        -------
        numpy.ndarray
            True where flagged.
        """
        if (fpr is None) == (fdr is None):
            raise ValueError("give one of fpr (false-alarm rate per sample) or fdr (false-discovery rate of the batch)")
        level = self.check_level(fpr, "fpr") if fpr is not None else self.check_level(fdr, "fdr")
        p = self.p_values(f)
        if fpr is not None or p.size == 0:
            return p <= level
        flagged = scipy.stats.false_discovery_control(p, method="bh") <= level
        if not flagged.any():
            self._warn_out_of_reach(p, level)
        return flagged

    def _warn_out_of_reach(self, p: np.ndarray, level: float) -> None:
        """BH flagged nothing although some samples score above every calibration normal:
        their p-value 1/(n + 1) passes at this level over m samples only when at least
        m / (level (n + 1)) samples share it. Said, since silence reads as "no anomalies"
        when it may mean "too few calibration normals to tell"."""
        top = int(np.count_nonzero(p <= self.min_level))
        if top == 0:
            return
        m = p.size
        rows = int(np.ceil(m * self.min_level / level - 1e-9))
        normals = int(np.ceil(m / (top * level) - 1e-9)) - 1
        warnings.warn(f"fdr={level:g} flagged none of {m} samples, although {top} score above all {self.n} "
                      f"calibration normals: their p-value, 1/(n_cal + 1) = {self.min_level:.3g}, passes "
                      f"Benjamini-Hochberg at {level:g} over {m} samples only when at least {rows} samples share it. "
                      f"With {normals} or more calibration normals {top} such samples could be flagged: calibrate "
                      "with more normals (or score fewer samples at a time)", UserWarning, stacklevel=4)

    def proba(self, f) -> np.ndarray:
        """PyOD's ``predict_proba`` columns (normal, anomaly): (p, 1 - p).

        The anomaly column is 1 - the conformal p-value, the share of
        calibration normals scoring below f (ties aside): a rank among normal
        data, not the posterior probability that the sample is an anomaly.

        Parameters
        ----------
        f : array-like
            Dissimilarities of new samples.

        Returns
        -------
        numpy.ndarray
            (n, 2).
        """
        p = self.p_values(f)
        return np.column_stack([p, 1.0 - p])

    def state_dict(self) -> dict:
        """The calibration as plain tensors and strings.

        Returns
        -------
        dict
            ``scores`` (float64) and ``source``.
        """
        return {"scores": torch.as_tensor(self.scores, dtype=torch.float64), "source": self.source}

    @classmethod
    def from_state_dict(cls, state: dict | None) -> "Calibration | None":
        """The calibration a state holds.

        Parameters
        ----------
        state : dict or None
            A ``state_dict``, or None.

        Returns
        -------
        Calibration or None
            None for no calibration (and states saved before they were kept).
        """
        if state is None:
            return None
        return cls(state["scores"], state["source"])


def normal_only(y, n: int) -> None:
    """Calibration labels, if given, must all be +1: a labelled anomaly among the
    calibration normals would make every p-value too large (decisions too lenient)."""
    if y is None:
        return
    labels = y.detach().cpu().numpy() if isinstance(y, torch.Tensor) else np.asarray(y)
    if labels.shape != (n,):
        raise ValueError(f"y must hold one label per calibration sample ({n}), got shape {labels.shape}")
    anomalies = int(np.count_nonzero(labels != 1))
    if anomalies:
        raise ValueError(f"the calibration set holds {anomalies} sample(s) not labelled normal (+1): conformal "
                         "p-values need normal samples only; leave the anomalies out of the calibration set")


class ConformalProba:
    """``predict_proba`` for a detector with ``_calibration()`` and ``dissimilarity(X)``.

    ``_calibration()`` gives a ``Calibration`` or raises ``NotCalibrated``:
    one owner for LpSVDD and DLMSVDD.
    """

    @property
    def predict_proba(self):
        """PyOD's columns (normal, anomaly) as (p, 1 - p), p the conformal p-value.

        The anomaly column is the share of calibration normals scoring below
        the sample: a calibrated rank among normal data, not the posterior
        probability of an anomaly. Exists once the model is calibrated (else
        ``dlmsvdd_ext.conformal.NotCalibrated``): ``predict_proba(X)`` returns
        an (n, 2) array. PyOD's ``method`` keyword is taken: "conformal" (the
        default) is the one method; PyOD's "linear" and "unify", rescalings of
        the training scores, are refused with a ValueError that says so.
        """
        self._calibration()
        return self._predict_proba

    def _predict_proba(self, X, method: str = "conformal") -> np.ndarray:
        """PyOD's convention, columns (normal, anomaly): (p, 1 - p) with p the
        conformal p-value. The anomaly column is the share of calibration
        normals scoring below the sample: a calibrated rank among normal data,
        not the posterior probability of an anomaly."""
        if method != "conformal":
            raise ValueError(f"predict_proba(method={method!r}): PyOD's 'linear' and 'unify' rescale the training "
                             "scores; this model's probabilities are conformal (column 1 is 1 - the p-value against "
                             "its calibration normals), its one method: predict_proba(X) or method='conformal'")
        return self._calibration().proba(self.dissimilarity(X))


class NotCalibrated(ValueError, AttributeError):
    """A model without calibration normals asked for p-values.

    An AttributeError too (as scikit-learn's NotFittedError), so that ``hasattr(model,
    "predict_proba")`` is False until the model is calibrated, as scikit-learn's
    ``available_if`` methods are (its generic checks call predict_proba where
    hasattr says it exists)."""


def missing(model_name: str, why: str = "") -> NotCalibrated:
    """The refusal when a model has no calibration set."""
    return NotCalibrated(f"{model_name} has no calibration normals{why}: call calibrate(X_cal) with normal samples "
                      "the fit never trained on to get p-values, fpr/fdr decisions and predict_proba")
