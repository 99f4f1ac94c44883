"""The trained detector's decisions: normal or anomalous at its threshold or by a conformal rule, the
conformal p-values and their calibration normals, and the evaluation on labelled rows.

A mixin of ``DLMSVDD`` (the trainer owns the network, the boundary and the scores): what a fitted
model decides from its dissimilarities f(x), which it asks of ``dissimilarity`` and ``scores``.
The threshold and its rule come from ``training.thresholds``; the p-values from
``dlmsvdd_ext.conformal``.
"""

from __future__ import annotations

import numpy as np

from dlmsvdd_ext import conformal

from . import inputs, metrics, thresholds


class Decisions(conformal.ConformalProba):
    """Decisions of a fitted detector: ``decision_function``, ``predict``, ``decide``, ``p_values``,
    ``predict_proba``, ``calibrate``, ``fit_predict``, ``evaluate``.

    The class it is mixed into provides ``_check_fitted``, ``dissimilarity``, ``scores``, ``fit``,
    ``_dataset``, ``_raw_scores``, ``_set_floor``, ``network_``, ``svdd_``, ``config``,
    ``threshold_`` and ``threshold_rule_``.
    """

    def decision_function(self, data) -> np.ndarray:
        """``threshold_ - f(x)`` in float64: positive = normal.

        As scikit-learn's outlier detectors: ``score_samples - offset_``.

        Parameters
        ----------
        data : torch.utils.data.Dataset or array-like
            A dataset of (input, target), or an array of raw inputs as ``fit``
            takes them (run through ``preprocessing_``).

        Returns
        -------
        numpy.ndarray
            ``threshold_ - f(x)`` of every sample.
        """
        self._check_fitted("threshold_")
        return self.threshold_ - self.dissimilarity(data).astype(np.float64)

    @property
    def offset_(self) -> float:
        """``-threshold_``, scikit-learn's offset: ``decision_function = score_samples - offset_``."""
        self._check_fitted("threshold_")
        return -self.threshold_

    def predict(self, data, *, fpr=None, fdr=None) -> np.ndarray:
        """+1 normal, -1 anomaly: at ``threshold_``, or by a conformal rule.

        Parameters
        ----------
        data : torch.utils.data.Dataset or array-like
            A dataset of (input, target), or an array of raw inputs as ``fit``
            takes them (run through ``preprocessing_``).
        fpr : float or None
            -1 where the conformal p-value is <= fpr: each normal sample is
            flagged with probability at most fpr.
        fdr : float or None
            -1 for the samples Benjamini-Hochberg flags at this false-discovery
            rate over ``data``.

        Returns
        -------
        numpy.ndarray
            +1 (normal: f below ``threshold_``) or -1 (anomaly) per sample.

        Raises
        ------
        dlmsvdd_ext.conformal.NotCalibrated
            ``fpr`` or ``fdr`` without calibration normals (see ``p_values``).
        """
        self._check_fitted("threshold_")
        if fpr is not None or fdr is not None:
            self._calibration()  # refused before scoring, not after
        return self.decide(self.dissimilarity(data), fpr=fpr, fdr=fdr)

    def decide(self, f, *, fpr=None, fdr=None) -> np.ndarray:
        """``predict`` on dissimilarities already computed (the CLI's ``score``).

        Parameters
        ----------
        f : array-like
            Dissimilarities f(x).
        fpr, fdr : float or None
            The conformal rules, as in ``predict``.

        Returns
        -------
        numpy.ndarray
            +1 (normal) or -1 (anomaly) per score.
        """
        self._check_fitted("threshold_")
        if fpr is None and fdr is None:
            return metrics.predict(f, self.threshold_)
        return np.where(self._calibration().flags(f, fpr=fpr, fdr=fdr), -1, 1)

    # ---- conformal p-values (dlmsvdd_ext.conformal)

    def calibrate(self, data, y=None) -> "Decisions":
        """Replace the calibration normals (by default the validation normals of ``fit``).

        ``p_values`` and the ``fpr`` / ``fdr`` decisions use them, and so does a
        threshold drawn at ``contamination`` (``threshold_``; the sphere's and the
        balanced-accuracy one stay). ``decision_scores_`` and ``labels_`` stay
        those of ``fit``.

        Parameters
        ----------
        data : torch.utils.data.Dataset or array-like
            Normal samples the model never trained on: an array of raw inputs,
            or a dataset whose targets are all +1.
        y : array-like or None
            Labels of an array ``data``, if given; all must be +1.

        Returns
        -------
        DLMSVDD
            This model.
        """
        self._check_fitted("threshold_")
        if y is not None and not inputs.is_array(data):
            raise ValueError("calibrate(dataset) takes the dataset's targets; labels y go with an array X")
        if self.network_.guard is not None:  # the floor above these rows too, then their scores
            self._set_floor(self._raw_scores(self._dataset(data)))
        f, targets = self.scores(data)
        conformal.normal_only(targets if y is None else y, len(f))
        self.svdd_.calibration_ = conformal.Calibration(f, "calibrate(X_cal)")
        changed = thresholds.recalibrated(self.threshold_rule_, self.config.contamination, self.svdd_.calibration_)
        if changed is not None:  # a contamination threshold follows the calibration normals
            self.threshold_, self.threshold_rule_ = changed
        return self

    def _calibration(self) -> conformal.Calibration:
        self._check_fitted("threshold_")
        if self.svdd_.calibration_ is None:
            raise conformal.missing(type(self).__name__, " (fit had no validation normals, or the model was saved "
                                                         "before calibration was kept)")
        return self.svdd_.calibration_

    @property
    def calibration_(self) -> conformal.Calibration | None:
        """The calibration normals' dissimilarities (``dlmsvdd_ext.conformal.Calibration``), or None."""
        self._check_fitted("threshold_")
        return self.svdd_.calibration_

    @property
    def n_calibration_(self) -> int:
        """How many calibration normals the p-values use (0: none)."""
        self._check_fitted("threshold_")
        return self.svdd_.n_calibration_

    @property
    def calibration_source_(self) -> str | None:
        """Where the calibration normals came from: "validation normals", "calibrate(X_cal)" or None."""
        self._check_fitted("threshold_")
        return self.svdd_.calibration_source_

    def p_values(self, data) -> np.ndarray:
        """Conformal p-values: small = anomalous.

        ``(1 + #{calibration f >= f(x)}) / (n_cal + 1)``; valid when the
        calibration normals and new normal samples are exchangeable. The
        default calibration set, the validation normals, also chose the best
        epoch (and, with labelled anomalies, the threshold): a mild selection
        effect; ``calibrate`` with fresh normals removes it.

        Parameters
        ----------
        data : torch.utils.data.Dataset or array-like
            A dataset of (input, target), or an array of raw inputs as ``fit``
            takes them (run through ``preprocessing_``).

        Returns
        -------
        numpy.ndarray
            One p-value per sample, in (0, 1].
        """
        return self._calibration().p_values(self.dissimilarity(data))

    def fit_predict(self, X, y=None) -> np.ndarray:
        """``fit``, then +1 / -1 for the training data passed (``decision_scores_`` at the threshold).

        Parameters
        ----------
        X : torch.utils.data.Dataset or array-like
            As in ``fit``.
        y : torch.utils.data.Dataset, array-like or None
            As in ``fit``.

        Returns
        -------
        numpy.ndarray
            +1 (normal) or -1 (anomaly) for every row of an array, or every
            sample of the training dataset.
        """
        return metrics.predict(self.fit(X, y).decision_scores_, self.threshold_)

    def evaluate(self, data) -> dict:
        """AUROC and balanced accuracy (at ``threshold_``) on a labelled dataset.

        Parameters
        ----------
        data : torch.utils.data.Dataset
            A dataset of (input, target) with targets +1 / -1.

        Returns
        -------
        dict
            ``auroc``, ``balanced_accuracy``, ``threshold``, ``n`` and ``n_anomalous``.
        """
        self._check_fitted("threshold_")
        f, targets = self.scores(data)
        return {**metrics.summary(targets, f, self.threshold_), "n": len(f), "n_anomalous": int((targets < 0).sum())}
