"""Out-of-sample scores of ``LpSVDD``'s training normals: what its threshold and its conformal
calibration are drawn from.

Why (issue 46): a row the boundary was fitted on scores lower than any new row. Its own weight
alpha_i in the centre ``a`` adds ``2 a_i k(x_i, x_i)`` to ``k(x_i)^T a``, about 2 / n at the default
c = 1/n, while the kernel values between rows shrink with the bandwidth and the dimension; on 300
rows of N(0, I_128) the default one-class fit scored every new normal row above the training
normals' 0.9 quantile (it called all of them anomalous at ``contamination=0.1``). A threshold or a
conformal calibration needs scores of rows the scoring model did not fit.

What: K-fold cross-fitting over the training normals (``FOLDS`` = 5; Barber, Candes, Ramdas,
Tibshirani, "Predictive inference with the jackknife+", Ann. Statist. 2021, for the CV+ family).
Each fold model is the whole fit's construction on the rows outside one fold of normals (every
labelled anomaly stays in): the same bandwidth ``gamma_``, ``nu_``, kernel and budget, and for an
approximation the whole fit's feature map (``KernelBackend.on_rows``: the same landmarks or
frequencies), solved afresh. It scores the normals of its fold, which it never saw. The model that
``LpSVDD`` keeps is still fitted on every row.

A fold model is fitted on fewer rows, and one term of f depends on that alone: f(x) = k(x, x) -
2 k(x)^T a + a^T K a, where a^T K a, the centre's squared norm, holds the diagonal sum
``sum_i a_i^2 k(x_i, x_i)``, about 1/m for a fit on m rows. A fold model's f is larger by about
1/m_fold - 1/n on every row, a shift that exceeds the spread of new rows' scores in high
dimension (taken as they come, the cross-fitted scores set a threshold at 0.1 that flagged none of
the new normal rows of N(0, I_128) at 300 training rows, and 0.5% at 1000). So each fold score is
put on the whole fit's scale: its f less
the fold's a^T K a plus the whole fit's, i.e. the fold's ``k(x, x) - 2 k(x)^T a`` (an average of
kernel values with weights summing to one, which does not drift with m) completed by the whole
fit's constant. Measured (tests/benchmarks/calibration_study.py, docs/results/calibration.md):
over n 100-5000 and d 2-512, with and without labels, the realised false-alarm share of new
normal rows then lay within the exact conformal rule's 95% interval in 38 of 40 rows at 0.1 (the
other two below it) and 40 of 40 at 0.05. It is not exact: a fold model is not the kept model.

A held-out row that is one of the whole fit's landmarks (Nystrom, RPCholesky) is left out of the
calibration: the map represents it exactly, a new row only approximately. When every training row
is a landmark the map is the exact kernel's, and none is left out.

Cost: a fold model costs about (1 - 1/K)^2 of the whole fit with the exact kernel and 1 - 1/K with
an approximation. Folds are fitted until ``CALIBRATION_ROWS`` normals are scored (all five below
1000 training normals, one from 5000): the fit took 1.9-2.2 times as long at 1000 rows (0.03 s to
0.06-0.07 s) and 1.5-1.7 times at 5000-10,000 (docs/results/calibration.md). A fold model trains on
nearly as many rows as the whole fit whatever the fold's size (the alignment above needs it), so
from ``HOLD_OUT_FROM`` training normals on, where ``CALIBRATION_ROWS`` of them are at most 5% of
the data, they are held out instead: the boundary is fitted on the other rows and scores them (split
conformal, exact in finite samples, and no slower than the fit without calibration).
"""

from __future__ import annotations

import warnings

import numpy as np
import torch
from sklearn.base import clone
from sklearn.exceptions import ConvergenceWarning
from sklearn.model_selection import KFold

from . import conformal
from .kernel_choice import SlowFitWarning

FOLDS = 5  # K of the cross-fitting: each fold model trains on 80% of the normals
# Normals scored out of sample before the folds stop: at 1000 the false-alarm share that the
# threshold gives, which varies with the calibration draw, has a standard deviation of 0.0095 at a
# level of 0.1 and 0.007 at 0.05 (sqrt(level (1 - level) / n)); more folds would add fit time only.
CALIBRATION_ROWS = 1000
HOLD_OUT_FROM = 20 * CALIBRATION_ROWS  # training normals from which CALIBRATION_ROWS are held out instead
SOURCE = "cross-fitted training normals"  # ``calibration_source_`` of a fit's calibration
HELD_OUT = "held-out training normals"  # ... from HOLD_OUT_FROM normals on
MORE = "fit on more normal rows, or calibrate(X_cal) with more normals the fit never trained on"


def fit(model, X_t: torch.Tensor, t: torch.Tensor, *, restart: bool = False) -> conformal.Calibration | None:
    """Fit ``model``'s boundary and return the calibration of its out-of-sample scores (the module
    docstring): cross-fitted training normals, or from ``HOLD_OUT_FROM`` normals on, held-out ones
    (their rows are ``model.calibration_rows_``).

    Parameters
    ----------
    model : dlmsvdd_ext.LpSVDD
        The estimator to fit.
    X_t : torch.Tensor
        The training features (n, d).
    t : torch.Tensor
        Their labels, +1 normal and -1 anomaly.
    restart : bool
        As in ``LpSVDD.fit``.

    Returns
    -------
    dlmsvdd_ext.conformal.Calibration or None
        None with fewer than 2 training normals (nothing to hold out).
    """
    normal = np.flatnonzero(t.cpu().numpy() > 0)
    if len(normal) >= HOLD_OUT_FROM:
        held = np.sort(np.random.default_rng(model.random_state).permutation(normal)[:CALIBRATION_ROWS])
        kept = torch.as_tensor(np.setdiff1d(np.arange(len(t)), held, assume_unique=True), device=X_t.device)
        model._fit_boundary(X_t[kept], t[kept], restart=restart, stacklevel=4)  # here, LpSVDD.fit, its caller
        model.calibration_rows_ = held
        with torch.no_grad():
            f = model._dissimilarity(X_t[torch.as_tensor(held, device=X_t.device)].to(model.dual_coef_.dtype))
        return conformal.Calibration(f, HELD_OUT)
    model._fit_boundary(X_t, t, restart=restart, stacklevel=4)
    scores = cross_fitted(model, X_t, t)
    return None if scores is None else conformal.Calibration(scores, SOURCE)


def cross_fitted(model, X_t: torch.Tensor, t: torch.Tensor) -> np.ndarray | None:
    """Out-of-fold dissimilarities of the training normals of a fitted ``LpSVDD``, on its scale.

    Parameters
    ----------
    model : dlmsvdd_ext.LpSVDD
        Fitted on ``X_t`` and ``t`` (its map, bandwidth and ``aKa_``).
    X_t : torch.Tensor
        The training features (n, d), as the fit took them.
    t : torch.Tensor
        Their labels, +1 normal and -1 anomaly.

    Returns
    -------
    numpy.ndarray or None
        One score per normal scored (float64; every normal below ``CALIBRATION_ROWS`` of them,
        landmark rows aside), or None with fewer than 2 normals (nothing to hold out).
    """
    normal = np.flatnonzero(t.cpu().numpy() > 0)
    if len(normal) < 2:
        return None
    landmarks = getattr(model.backend_, "landmark_rows_", None)
    if landmarks is not None and len(landmarks) >= len(t):
        landmarks = None  # every row a landmark: the exact kernel's map, which treats new rows alike
    folds = KFold(min(FOLDS, len(normal)), shuffle=True, random_state=model.random_state)
    scores, kept, short = [], 0, 0
    for _, held in folds.split(normal):
        held = normal[held]
        rows = np.setdiff1d(np.arange(len(t)), held, assume_unique=True)
        if landmarks is not None:
            held = np.setdiff1d(held, landmarks, assume_unique=True)
        fold_scores, converged = _fold_scores(model, X_t, t, rows, held)
        scores.append(fold_scores)
        short += not converged
        kept += len(held)
        if kept >= CALIBRATION_ROWS:
            break
    if short:  # once, not once per fold
        warnings.warn(f"{short} of the {len(scores)} cross-fitting fold models stopped without their certificate; "
                      "their scores calibrate the threshold and the p-values. Raise max_iter or loosen tol",
                      ConvergenceWarning, stacklevel=4)  # cross_fitted, fit, LpSVDD.fit, its caller
    return np.concatenate(scores)


def _fold_scores(model, X_t: torch.Tensor, t: torch.Tensor, rows: np.ndarray,
                 held: np.ndarray) -> tuple[np.ndarray, bool]:
    """The held rows' f under a fold model fitted on ``rows``, on the whole fit's scale, and
    whether that model's solve reached its certificate."""
    if len(held) == 0:  # every held row a landmark: nothing to score
        return np.zeros(0), True
    fold = clone(model).set_params(gamma=model.gamma_, nu=model.nu_, kernel=model.kernel_,
                                   n_components=model.n_components_, calibration=None, contamination="radius",
                                   warm_start=False, categorical=None, missing=None)
    index = torch.as_tensor(rows, device=X_t.device)
    X_fold = X_t[index]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", SlowFitWarning)  # said once, by the whole fit
        warnings.simplefilter("ignore", ConvergenceWarning)  # counted by cross_fitted, said once
        fold._fit_boundary(X_fold, t[index], backend=model.backend_.on_rows(X_fold))
    with torch.no_grad():
        f = fold._dissimilarity(X_t[torch.as_tensor(held, device=X_t.device)].to(fold.dual_coef_.dtype))
    return f.double().cpu().numpy() - fold.aKa_ + model.aKa_, bool(fold.converged_)
