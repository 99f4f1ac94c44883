"""LpSVDD: the large-margin lp-SVDD on fixed features, as a scikit-learn outlier estimator."""

from __future__ import annotations

import logging
import time
import warnings

import numpy as np
import torch
from sklearn.base import BaseEstimator, OutlierMixin
from sklearn.exceptions import ConvergenceWarning
from sklearn.utils.validation import check_is_fitted

from . import calibration_scores, conformal, explain, kernel_choice, kernels, ops, params, tabular
from .placement import move_tensors
from .progress import ProductProgress
from .dual import DualProblem
from .solver import diagonal_means, kkt_boundary, recover_boundary, solve
from .validation import check_features, check_gamma

KERNELS = kernels.BACKENDS
log = logging.getLogger("dlmsvdd")
MEDIAN_SAMPLES = 2000  # rows the median bandwidth is estimated from (a seeded subset)
# nu="auto" with labelled anomalies (without them nu is 1). The paper's 1.2 puts 0.1 of the weight on
# the labelled anomalies against 1.1 on the unlabelled rows: at c = 1/n the weights stay near uniform,
# the centre is then nearly the unlabelled rows' kernel mean and the labels barely move it (issue 28).
# Chosen on ADBench's development sets by validation AUROC on rows held out of each task's training
# rows, never its test rows (18 sets x seeds 0-2 x la 0.05, 0.25; the argmax of a 6 x 6 grid with
# LOCAL_GAMMA_SCALE: tests/benchmarks/test_bench_adbench_selection.py, which checks these are still
# its choice). The grid is flat near the top (nu 10-50, scales 2-10 within 0.003). DLMSVDD's
# configuration keeps the paper's 1.2.
NU_WITH_ANOMALIES = 20.0
# ... reached with this many labelled anomalies; fewer get nu = 1 + (NU_WITH_ANOMALIES - 1) n_A / this
# (each adds 0.95 to nu, half of it to their share of the weights), so that one or two labels cannot
# overrule hundreds of unlabelled rows. With the full 20 for any count, 1-3 labels on the image
# embeddings scored below the same rows' one-class fit (issue 38, goal 4). Chosen on the development
# sets by validation AUROC on held-out training rows (18 sets x seeds 0-2 x la 0.05, 0.25; this count
# 1, 5, 10, 20, 50: 0.8274, 0.8297, 0.8315, 0.8331, 0.8270; at la 0.05 on the embeddings 0.6806 ->
# 0.7156, above the one-class fit's 0.7078).
FULL_WEIGHT_ANOMALIES = 20
# gamma="local": this many times 1 / median squared distance. At the median bandwidth the score
# (nearly a kernel density estimate, see above) is smoothed over the whole data set, and anomalies
# between or inside clusters of normal data score as normal; chosen with NU_WITH_ANOMALIES.
LOCAL_GAMMA_SCALE = 2.0
# gamma="local" without labelled anomalies (one-class SVDD): a narrower kernel, nearer a k-nearest-
# neighbour score. Chosen on ADBench's development sets under the unsupervised protocol by AUROC on
# rows held out of each task's training rows, never its test rows (18 sets x seeds 0-2, scales 2, 4,
# 8, 16: mean 0.740, 0.753, 0.753, 0.745; issue 38, tests/benchmarks/adbench_unsupervised.py).
LOCAL_GAMMA_SCALE_ONE_CLASS = 8.0
NO_THRESHOLD = "none"  # threshold_rule_ of a fit without calibration normals: predict waits for calibrate


def _features(X, name: str = "X", device=None) -> tuple[torch.Tensor, bool]:
    """X checked (``validation.check_features``), detached, on ``device``, and
    whether it came as a numpy-like array (results then go back as numpy)."""
    T = check_features(X, name).detach()
    if device is not None:
        T = T.to(device)
    return T, not isinstance(X, torch.Tensor)


def _labels(y, n: int, like: torch.Tensor) -> torch.Tensor:
    if y is None:
        return torch.ones(n, dtype=torch.float64, device=like.device)
    y_arr = y.detach().cpu().numpy() if isinstance(y, torch.Tensor) else np.asarray(y)
    if y_arr.ndim != 1 or y_arr.shape[0] != n:
        raise ValueError(f"y must be 1-D with one label per sample ({n}), got shape {y_arr.shape}")
    if not np.all(np.isin(y_arr, (1, -1))):
        bad = np.unique(y_arr[~np.isin(y_arr, (1, -1))])[:5]
        # Refused, not read otherwise or ignored: y is the anomaly supervision, and
        # class labels taken as all-normal would be a silent wrong answer.
        raise ValueError(f"y must hold +1 (normal) or -1 (anomaly); found {bad.tolist()}. y is the anomaly "
                         "supervision, not a class label: omit it to fit every sample as normal")
    return torch.as_tensor(y_arr.astype(np.float64), device=like.device)


def _synchronized_clock(device: torch.device) -> float:
    """perf_counter once the device's queued work is done (CUDA kernels run asynchronously)."""
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    return time.perf_counter()


class LpSVDD(conformal.ConformalProba, OutlierMixin, BaseEstimator):
    """Large-margin lp-SVDD (Arashloo 2024) with an RBF kernel, solved to a certified optimum.

    Parameters
    ----------
    p : float >= 1.1
        Slack exponent of the primal; the dual uses q = p / (p - 1). Below
        ``params.P_MIN`` = 1.1 the penalty alpha^q swamps the kernel term in
        float64 (at the default c = 1/n), so such p are refused.
    nu : float >= 1 or "auto"
        Margin weight; the normal weights sum to (nu + 1) / 2 and the anomalous
        ones to (nu - 1) / 2. Without anomalies nu must be 1. "auto" (default):
        ``NU_WITH_ANOMALIES`` = 20 with ``FULL_WEIGHT_ANOMALIES`` = 20 labelled
        anomalies or more, ``1 + 19 n_A / 20`` with fewer (one or two labels
        cannot overrule hundreds of unlabelled rows), 1 (one-class SVDD)
        without (chosen on validation rows of ADBench's development sets; the
        paper's 1.2 leaves the labels a twelfth of the weight); the value used
        is ``nu_``.
    c1, c2 : float or None
        Slack penalties of normal and anomalous samples (default ``slack_scale / |I_N|``,
        ``slack_scale / |I_A|``).
    slack_scale : float
        The default slack penalties' multiple of one over the class sizes (1: the paper's
        ``1 / |I_N|``, ``1 / |I_A|``). Larger makes slack dearer: the boundary fits the data
        closer, ``b_N`` and ``b_A`` nearer the samples' dissimilarities (at 1 ``b_N`` often
        lies far below every normal sample's).
    gamma : "local", "median", "per-epoch" or float
        RBF bandwidth; "median" is 1 / median squared pairwise distance of
        the training features, estimated at a fit (and kept by later fits
        when ``warm_start``: the training driver's "estimated once");
        "local" (default) is ``LOCAL_GAMMA_SCALE`` = 2 times that with labelled
        anomalies and ``LOCAL_GAMMA_SCALE_ONE_CLASS`` = 8 times it without,
        estimated and kept the same way (chosen on ADBench's development sets: the
        median's width smooths the score over the whole data set);
        "per-epoch" re-estimates the median's at every fit, warm-started or not.
    kernel : str
        "auto" (default): the exact kernel up to ``kernel_choice.EXACT_MAX_ROWS``
        = 10,000 training rows, Nystrom at m = min(n_components,
        ``kernel_choice.AUTO_COMPONENTS`` = 256) above (chosen from measured
        times and AUROCs, ``dlmsvdd_ext.kernel_choice``); the choice is
        ``kernel_``, logged when it changes. "exact" (an exact fit estimated
        longer than a minute warns first, ``SlowFitWarning``), or an
        approximation of rank m = n_components: "nystrom", "rff", "qmc_rff",
        "orf", "sorf", "fastfood", "rpcholesky" (see ``dlmsvdd_ext.kernels``).
        The alpha-step then costs O(n m).
    n_components : int
        Approximation budget m (unused by the exact kernel). Nystrom and
        RPCholesky take their landmarks from the training set: a larger m is
        cut to the number of samples, with a warning (``n_components_``).
    solver : "apg", "pairwise" or "paper"
        See ``dlmsvdd_ext.solver``.
    max_iter, tol : int, float
        Stop after max_iter iterations or when the Frank-Wolfe gap is at most
        tol times the dual objective (or earlier, when it stops falling: see
        ``dlmsvdd_ext.solver.StoppingRule``). A fit that ends without that
        certificate leaves ``converged_ = False``, ``stalled_`` and a
        ``sklearn.exceptions.ConvergenceWarning`` saying why.
    cache_size : "auto" or float
        Memory budget in MB for the kernel matrix (materialised when it fits,
        otherwise on-the-fly products and an LRU cache of columns). "auto"
        (default): half the memory free on the features' device when fitting
        (``kernel_operator.cache_bytes``).
    contamination : float in (0, 0.5] or "radius"
        Where ``predict`` draws the line. A number: the share of new normal
        rows called anomalous. ``offset_`` is the threshold of the conformal
        rule p-value <= contamination against the calibration normals (the
        cross-fitted training normals, see ``calibration``), so ``predict(X)``
        flags what ``predict(X, fpr=contamination)`` flags: each new normal
        row with probability at most contamination, and close to it. Default
        0.1 (PyOD's). Not the share of the training rows: the boundary scores
        the rows it was fitted on lower than new ones, so it flags fewer of
        them. A level below 1/(n_cal + 1) warns (``TooFewCalibrationRows``) and
        flags the rows above every calibration normal. "radius": the sphere of
        radius r (``offset_ = -r^2``), the paper's boundary; at the paper's
        c = 1/n many normal samples carry slack, so it can call most (or all)
        of them anomalous.
    recovery : "kkt" or "paper"
        How r^2 and rho^2 are recovered (see ``dlmsvdd_ext.solver.recover_boundary``).
    random_state : int or None
        Seeds the bandwidth's subsample.
    device : str, torch.device or None
        Where to compute; default: where X is.
    warm_start : bool
        Start the solver from the previous fit's alpha when the labels are the
        same (the trainer's epochs re-solve on moving features).
    categorical : list or None
        Table columns one-hot encoded although they hold numbers; text and
        pandas ``category`` columns are anyway (``dlmsvdd_ext.tabular``).
    missing : None or "impute"
        Missing table cells: refused with their row and column (None), or
        imputed with indicator columns. The rule is ``encoding_`` (None for
        numeric arrays without column names; tensors are taken as they are);
        ``n_features_in_`` counts the encoded columns.
    calibration : "auto" or None
        The out-of-sample scores the threshold and the p-values are drawn
        from (``dlmsvdd_ext.calibration_scores``). "auto" (default): the
        training normals' cross-fitted scores, each from a model fitted
        without its fold of normals (5 folds, until 1000 normals are scored);
        from 20,000 training normals on, 1000 normals held out of the fit
        instead (``calibration_rows_``: their rows). ``predict(X, fpr=...)``
        then works after ``fit``. None: none at fit (the training driver and
        the consensus, which calibrate on held-out rows of their own or need
        no threshold): ``predict`` and the p-values wait for
        ``calibrate(X_cal)``.

    Notes
    -----
    Besides the boundary, a fit leaves ``build_seconds_`` (the kernel backend:
    the factor Z of an approximation, or the exact kernel matrix when it fits
    ``cache_size``) and ``solve_seconds_`` (the dual and the boundary recovery).

    Scores: ``dissimilarity(X)`` is the paper's f(x), the squared RKHS distance
    to the centre (higher = more anomalous), >= 0 up to rounding for every
    backend (the spectral maps': the distance in their feature space, see
    ``dissimilarity``); ``score_samples = -f`` (higher =
    more normal); ``decision_function = score_samples - offset_``; ``predict``
    gives +1 where it is >= 0 (normal), -1 elsewhere; ``threshold_rule_``
    names that rule.

    Conformal decisions (``dlmsvdd_ext.conformal``), against the cross-fitted
    training normals after ``fit`` (``calibrate(X_cal)`` with normal samples the
    fit never trained on replaces them; a refit forgets them): ``p_values(X)``,
    ``predict(X, fpr=...)`` (each normal sample flagged with probability at
    most fpr), ``predict(X, fdr=...)`` (Benjamini-Hochberg on the batch) and
    ``predict_proba`` (columns normal, anomaly: p and 1 - p). ``calibration_``
    holds the calibration scores; ``n_calibration_`` and
    ``calibration_source_`` say how many and from where.
    """

    _parameter_constraints = params.CONSTRAINTS

    def __init__(self, *, p=2.0, nu="auto", c1=None, c2=None, slack_scale=1.0, gamma="local", kernel="auto",
                 n_components=256, solver="apg", max_iter=1000, tol=1e-6, cache_size="auto", contamination=0.1,
                 recovery="kkt", random_state=None, device=None, warm_start=False, categorical=None, missing=None,
                 calibration="auto"):
        self.p = p
        self.nu = nu
        self.c1 = c1
        self.c2 = c2
        self.slack_scale = slack_scale
        self.gamma = gamma
        self.kernel = kernel
        self.n_components = n_components
        self.solver = solver
        self.max_iter = max_iter
        self.tol = tol
        self.cache_size = cache_size
        self.contamination = contamination
        self.recovery = recovery
        self.random_state = random_state
        self.device = device
        self.warm_start = warm_start
        self.categorical = categorical
        self.missing = missing
        self.calibration = calibration

    def _check_params(self):
        params.check(self.get_params())

    def _nu(self, n_anomaly: int) -> float:
        """nu for a fit with n_anomaly labelled anomalies (resolves "auto")."""
        if self.nu == "auto":
            return 1.0 + (NU_WITH_ANOMALIES - 1.0) * min(1.0, n_anomaly / FULL_WEIGHT_ANOMALIES)
        return self.nu

    def fit(self, X, y=None, *, restart: bool = False):
        """Fit the boundary on features, to a certified optimum of the dual.

        Parameters
        ----------
        X : numpy.ndarray or torch.Tensor
            Features (n, d), float32 or float64, on the CPU or a CUDA device.
        y : array-like or None
            +1 (normal) or -1 (anomaly) per row (None: all normal).
        restart : bool
            Solve the dual from its uniform start even when ``warm_start`` is
            set (a "median" bandwidth is still kept).

        Returns
        -------
        LpSVDD
            This estimator, fitted.
        """
        self._check_params()
        self.encoding_, X = tabular.fitted(X, self.categorical, self.missing)
        X_t, _ = _features(X, device=self.device)
        t = _labels(y, X_t.shape[0], X_t)
        self.calibration_rows_ = None
        if self.calibration == "auto":  # the boundary, and out-of-sample scores of training normals
            calibration = calibration_scores.fit(self, X_t, t, restart=restart)
        else:
            self._fit_boundary(X_t, t, restart=restart)
            calibration = None
        self._set_calibration(calibration, "the fit had fewer than 2 normal rows to cross-fit"
                              if self.calibration == "auto" else "calibration=None")
        return self

    def _fit_boundary(self, X_t: torch.Tensor, t: torch.Tensor, *, restart: bool = False, backend=None,
                      stacklevel: int = 3):
        """The boundary on features X_t with labels t: the dual solved, the boundary recovered and
        stored. ``backend``: a fitted map to solve on (a cross-fitting fold takes the whole fit's
        map on its rows, ``KernelBackend.on_rows``; its bandwidth and kernel are then this
        estimator's ``gamma`` and ``kernel``, given as they were chosen). ``stacklevel``: where a
        ``ConvergenceWarning`` points, counted from here (3: the caller of ``fit``)."""
        problem = DualProblem.from_labels(t, p=self.p, nu=self._nu(int((t < 0).sum())), c1=self.c1, c2=self.c2,
                                          slack_scale=self.slack_scale)
        problem.check_range(X_t.dtype, scores_only=True)  # scores are computed in the features' dtype
        self.gamma_ = self._bandwidth(X_t.shape[0], X_t.dtype, lambda: ops.median_sq_distance(
            X_t, max_samples=MEDIAN_SAMPLES, seed=self.random_state), one_class=not bool((t < 0).any()))
        estimate = self._choose_kernel(X_t, stacklevel=stacklevel + 2)  # warn_if_slow, _choose_kernel, here
        start = time.perf_counter()
        backend = self._backend(X_t.shape[0], stacklevel + 1).fit(X_t) if backend is None else backend
        operator = backend.operator(self.cache_size)  # the exact kernel is materialised here when it fits
        built = _synchronized_clock(X_t.device)
        if self.solver == "apg" and kernel_choice.shows_progress(estimate, X_t.shape[0], self.n_components_,
                                                                backend.is_exact):
            operator = ProductProgress(operator, self.max_iter, f"LpSVDD {self.kernel_} kernel, {X_t.shape[0]:,} rows")
        try:
            result = solve(operator, problem, method=self.solver, max_iter=self.max_iter, tol=self.tol,
                           alpha0=None if restart else self._warm_alpha(t))
        finally:
            if isinstance(operator, ProductProgress):
                operator.close()
        # a spectral map's K_ii = ||Z_i||^2 is not 1: its scores use it (see dissimilarity)
        diag = None if backend.unit_diagonal else operator.diagonal()
        boundary = recover_boundary(problem, result.alpha, result.Ka, self.recovery, diag=diag)
        # seconds of this fit: the kernel backend (factor or exact matrix), then the dual and the boundary
        self.build_seconds_ = built - start
        self.solve_seconds_ = _synchronized_clock(X_t.device) - built
        # With a factor Z, k(x)^T a = z(x)^T (Z^T a): scoring costs O(m) per point.
        weights = None if backend.is_exact else ops.rmatvec64(operator.Z, result.alpha * t).to(X_t.dtype)
        self._store(X_t, t, result.alpha, backend, weights, result, boundary, X_t.shape[1], problem.nu,
                    stacklevel + 1)
        if not backend.is_exact:
            backend.release_factor()
        return self

    @staticmethod
    def sharded_solver(solver: str) -> str:
        """The solver ``fit_sharded`` runs in place of ``solver``.

        Parameters
        ----------
        solver : str
            A ``solver`` value.

        Returns
        -------
        str
            ``solver`` itself when it shards, else "pairwise" (APG multiplies
            by the whole kernel every iteration).
        """
        from . import distributed

        return solver if solver in distributed.METHODS else "pairwise"

    def fit_sharded(self, X, y=None, *, restart: bool = False):
        """Fit on this process's shard of the training set, without gathering the kernel.

        torch.distributed must be initialised and every rank passes its
        contiguous part of the rows, in rank order, split as
        ``dlmsvdd_ext.distributed.shard_bounds`` does. Solvers "pairwise" and
        "paper"; backends "exact", "nystrom" and the spectral maps
        (RPCholesky's adaptive pivots are not sharded). The fitted estimator
        is the same on every rank and equals ``fit`` on the whole set with
        that solver, up to rounding.

        Parameters
        ----------
        X : numpy.ndarray or torch.Tensor
            This rank's rows of the features.
        y : array-like or None
            Their labels, +1 / -1 (None: all normal).
        restart : bool
            As in ``fit``.

        Returns
        -------
        LpSVDD
            This estimator, fitted on the whole set.
        """
        from . import distributed

        self._check_params()
        if self.solver not in distributed.METHODS:
            raise ValueError(f"fit_sharded runs the Frank-Wolfe solvers {distributed.METHODS}, got {self.solver!r} "
                             "(APG needs whole kernel products every iteration)")
        if self.kernel == "rpcholesky":
            raise ValueError("rpcholesky is not available sharded (its pivots are chosen over the whole set); "
                             "use nystrom or a spectral map")
        if self.recovery != "kkt":
            raise ValueError("fit_sharded recovers the boundary by 'kkt' only")
        if not torch.distributed.is_available() or not torch.distributed.is_initialized():
            raise ValueError("fit_sharded needs torch.distributed initialised (init_process_group, or torchrun)")
        X_t, _ = _features(X, device=self.device)
        t = _labels(y, X_t.shape[0], X_t)
        counts = torch.tensor([X_t.shape[0], int((t > 0).sum()), int((t < 0).sum())], dtype=torch.float64,
                              device=X_t.device)
        torch.distributed.all_reduce(counts)
        n, n_normal, n_anomaly = (int(c) for c in counts.tolist())
        self._choose_kernel(X_t, n_rows=n)  # "auto" never picks rpcholesky
        shard = distributed.Shard(n)
        if X_t.shape[0] != shard.size:
            raise ValueError(f"rank {shard.rank} has {X_t.shape[0]} rows; the split of {n} rows over "
                             f"{shard.world_size} processes gives it rows {shard.start}:{shard.stop}")
        problem = DualProblem.from_labels(t, p=self.p, nu=self._nu(n_anomaly), c1=self.c1, c2=self.c2,
                                          counts=(n_normal, n_anomaly), slack_scale=self.slack_scale)
        problem.check_range(X_t.dtype, scores_only=True)
        self.gamma_ = self._bandwidth(n, X_t.dtype, lambda: distributed.median_sq_distance(
            X_t, shard, max_samples=MEDIAN_SAMPLES, seed=self.random_state), one_class=n_anomaly == 0)
        start = time.perf_counter()
        backend = self._backend(n)
        if backend.is_exact:
            op = distributed.ShardedExact(shard, X_t, self.gamma_)
        else:
            if self.kernel_ == "nystrom":
                backend.fit_landmarks(X_t, shard.rows(X_t, backend.landmark_indices(n)))
            else:  # a spectral map depends on the seed and the dimension only: the same on every rank
                backend.fit(X_t)
            op = distributed.ShardedFactor(shard, backend.Z_)
        built = _synchronized_clock(X_t.device)
        t_all = shard.gather(t)
        warm = None if restart else self._warm_alpha(t_all)
        result, last = distributed.solve(op, problem, method=self.solver, max_iter=self.max_iter, tol=self.tol,
                                         alpha0=None if warm is None else warm[shard.start:shard.stop])
        diag = None if backend.unit_diagonal else torch.einsum("ij,ij->i", op.local, op.local)
        boundary = kkt_boundary(problem, last, diagonal_means(problem, result.alpha, diag, total=shard.sum))
        # this rank's seconds, as in fit (the exact kernel's gather for scoring below is neither)
        self.build_seconds_ = built - start
        self.solve_seconds_ = _synchronized_clock(X_t.device) - built
        a_local = result.alpha * t
        if backend.is_exact:  # scoring needs the support vectors on every rank: O(N d) once per fit
            X_all, weights = shard.gather(X_t), None
            backend.fit(X_all)
        else:
            X_all, weights = None, shard.sum(op.local.T @ a_local).to(X_t.dtype)
        self._store(X_all, t_all, shard.gather(result.alpha), backend, weights, result, boundary, X_t.shape[1],
                    problem.nu)
        # no cross-fitting across processes (a fold would be a fit on a subset of every shard): the
        # training rows' own scores are in-sample, so the threshold waits for held-out normals
        self.calibration_rows_ = None
        self._set_calibration(None, "fit_sharded does not cross-fit")
        if not backend.is_exact:
            backend.release_factor()
        return self

    def _bandwidth(self, n: int, dtype: torch.dtype, median, one_class: bool) -> float:
        """gamma_ for this fit: the given number, or 1 / the median squared
        distance (``median()``; for "local" times LOCAL_GAMMA_SCALE, or
        LOCAL_GAMMA_SCALE_ONE_CLASS for a fit without anomalies), estimated
        now or kept from the previous fit."""
        if not isinstance(self.gamma, str):
            return check_gamma(self.gamma, dtype)
        if self.gamma in ("median", "local") and self.warm_start and getattr(self, "gamma_", None) is not None:
            return self.gamma_  # estimated once, at the first fit
        if n < 2:
            raise ValueError(f"gamma='{self.gamma}' needs at least 2 samples, got n_samples = {n}; "
                             "give gamma as a number")
        median_sq = median()
        if not median_sq > 0:
            raise ValueError("all samples are identical: the median distance is 0; give gamma as a number")
        scale = 1.0 if self.gamma != "local" else LOCAL_GAMMA_SCALE_ONE_CLASS if one_class else LOCAL_GAMMA_SCALE
        return check_gamma(scale / median_sq, dtype)

    def _choose_kernel(self, X_t: torch.Tensor, n_rows: int | None = None, stacklevel: int = 4) -> float | None:
        """``kernel_`` and its budget ``n_components_`` (before ``_backend`` cuts it) for a fit on these
        rows (``n_rows`` of them in all: sharded, every rank's), said in the log when it changes; before
        an exact kernel on many rows, its estimated seconds (a warning when that is long:
        ``kernel_choice.warn_if_slow``)."""
        n = X_t.shape[0] if n_rows is None else n_rows
        previous = getattr(self, "kernel_", None)
        self.kernel_, self.n_components_ = kernel_choice.choose(self.kernel, self.n_components, n)
        if self.kernel == kernel_choice.AUTO and self.kernel_ != previous:
            log.info(kernel_choice.describe(self.kernel_, self.n_components_, n))
        if self.kernel_ != "exact":
            return None
        return kernel_choice.warn_if_slow(n, X_t.shape[1], X_t.dtype, X_t.device, self.cache_size,
                                          stacklevel=stacklevel)

    def _backend(self, n: int, stacklevel: int = 3) -> kernels.KernelBackend:
        """The kernel backend (``kernel_``) for n training samples, its budget (``n_components_``) cut to
        what it can build."""
        m = self.n_components_
        limit = kernels.max_components(self.kernel_, n)
        if limit is not None and m > limit:
            warnings.warn(f"n_components = {m} exceeds the {n} training samples that {self.kernel_} takes its "
                          f"landmarks from; using {limit}", stacklevel=stacklevel)
            m = limit
        self.n_components_ = m
        return kernels.make(self.kernel_, self.gamma_, m, self.random_state)

    def _store(self, X_t, t, alpha, backend, feature_weights, result, boundary, n_features: int, nu: float,
               stacklevel: int = 3):
        """The fitted attributes from a solve; X_t (all rows) is needed for the
        exact kernel only. Scoring runs in the features' dtype (``dual_coef_``'s).
        ``stacklevel``: the ``ConvergenceWarning``'s, counted from here."""
        # the approximation's columns (the factor itself is not kept: ``KernelBackend.release_factor``)
        self.factor_columns_ = None if feature_weights is None else int(feature_weights.shape[0])
        self.support_ = torch.nonzero(alpha > 0).flatten().cpu().numpy()
        support = torch.as_tensor(self.support_, device=alpha.device)
        self.support_vectors_ = X_t[support].contiguous() if feature_weights is None else None
        # baselines of explain (a sharded approximation gathers no rows: it takes reference= there)
        self.reference_ = None if X_t is None else explain.kept_normals(X_t, t > 0, self.random_state)
        dtype = X_t.dtype if feature_weights is None else feature_weights.dtype
        self.dual_coef_ = (alpha * t)[support].to(dtype).contiguous()  # a = alpha * t on the support
        self.backend_ = backend
        self.feature_weights_ = feature_weights
        self.distance_scores_ = not backend.unit_diagonal  # f = ||z(x) - Z^T a||^2 (see _dissimilarity)
        self.alpha_ = alpha.cpu().numpy()
        self.labels_ = t.cpu().numpy()
        self.objective_ = result.objective
        self.gap_ = result.gap
        self.n_iter_ = result.n_iter
        self.converged_ = result.converged
        self.stalled_ = result.stalled
        self.history_ = result.history
        self.nu_ = nu
        self.aKa_ = boundary.aKa
        self.r2_, self.rho2_ = boundary.r2, boundary.rho2
        self.b_normal_, self.b_anomaly_ = boundary.b_normal, boundary.b_anomaly
        self.n_features_in_ = n_features
        if not result.converged:
            # APG's single step size meets the penalty alpha^q's curvature, which
            # varies by orders of magnitude between weights for large q; pairwise
            # Frank-Wolfe's exact line search does not (p = 1.1: 821 iterations).
            hint = " For p < 1.5, solver='pairwise' converges where APG crawls." if (
                result.method == "apg" and self.p < 1.5) else ""
            warnings.warn(f"{type(self).__name__} stopped without its certificate after {result.n_iter} "
                          f"iterations: {result.status}; relative gap {result.gap / abs(result.objective):.3g} "
                          f"(tol {self.tol:g}). Raise max_iter or loosen tol.{hint}",
                          ConvergenceWarning, stacklevel=stacklevel)
        return self

    def _set_calibration(self, calibration: conformal.Calibration | None, why: str = "") -> None:
        """The calibration normals' scores and the threshold ``contamination`` draws from them
        (``offset_``, ``threshold_rule_``): the rule p-value <= contamination
        (``conformal.Calibration.threshold``), so that ``predict(X)`` flags exactly what
        ``predict(X, fpr=contamination)`` does. Without calibration normals (``why`` says why)
        there is no threshold but the sphere's: ``offset_`` holds -r^2 (a finite number, as saved
        files must hold) and ``predict`` asks for ``calibrate(X_cal)`` (``threshold_rule_`` says so)."""
        self.calibration_ = calibration
        if self.contamination == "radius":
            self.offset_, self.threshold_rule_ = -self.r2_, "radius"
        elif calibration is None:
            self.offset_, self.threshold_rule_ = -self.r2_, f"{NO_THRESHOLD} ({why})"
        else:
            # the warning names the caller of fit or calibrate: threshold, this, fit, the caller
            self.offset_ = -calibration.threshold(self.contamination, "contamination", calibration_scores.MORE, 4)
            self.threshold_rule_ = calibration.rule(self.contamination)

    def _legacy_rule(self) -> str:
        """The rule of a state saved before ``threshold_rule_`` was kept: its contamination's then."""
        if self.contamination == "radius":
            return "radius"
        return f"training normals' {1 - self.contamination:g} quantile"

    def _warm_alpha(self, t: torch.Tensor):
        if not self.warm_start or not hasattr(self, "alpha_") or not np.array_equal(self.labels_, t.cpu().numpy()):
            return None
        return torch.as_tensor(self.alpha_, dtype=torch.float64, device=t.device)

    def _kernel_weights(self, X_t: torch.Tensor) -> torch.Tensor:
        """k(x)^T a: fused and memory-light without autograd, differentiable in X_t with it."""
        if self.feature_weights_ is not None:
            return self.backend_.map_rows(X_t, lambda z: z @ self.feature_weights_)
        if X_t.requires_grad:
            return kernels.rbf_kernel(X_t, self.support_vectors_, self.gamma_) @ self.dual_coef_
        return ops.rbf_matvec(X_t, self.support_vectors_, self.dual_coef_, self.gamma_)

    def torch_dissimilarity(self, X: torch.Tensor) -> torch.Tensor:
        """f(x) for a torch tensor, differentiable in X; the boundary stays fixed.

        The trainer's omega-step back-propagates through it.

        Parameters
        ----------
        X : torch.Tensor
            Features (n, d).

        Returns
        -------
        torch.Tensor
            f(x) of every row, with its autograd graph.
        """
        check_is_fitted(self, "dual_coef_")
        if not isinstance(X, torch.Tensor) or X.ndim != 2 or X.shape[1] != self.n_features_in_:
            raise ValueError(f"X must be a 2-D torch tensor with {self.n_features_in_} features")
        return self._dissimilarity(X.to(self.dual_coef_.dtype))

    def _dissimilarity(self, X_t: torch.Tensor) -> torch.Tensor:
        """f(x) = k(x, x) - 2 k(x)^T a + a^T K a: k(x, x) = 1 for the exact kernel
        and the landmark maps; a spectral map's own z(x)^T z(x), which makes f
        the squared distance ||z(x) - Z^T a||^2 in its feature space, computed
        as such (>= 0; with k(x, x) = 1 it went down to -0.37 at m = 2)."""
        if self.distance_scores_:
            return self.backend_.map_rows(X_t, lambda z: (z - self.feature_weights_).square().sum(1))
        return 1.0 - 2.0 * self._kernel_weights(X_t) + self.aKa_

    def _inputs(self, X, name: str = "X"):
        """X checked and encoded as the boundary scores it, in its dtype, and whether it came as numpy."""
        check_is_fitted(self, "dual_coef_")
        X_t, numpy_like = _features(tabular.scored(X, getattr(self, "encoding_", None), name), name,
                                    device=self.dual_coef_.device)
        if X_t.shape[1] != self.n_features_in_:
            raise ValueError(f"{name} has {X_t.shape[1]} features, but {type(self).__name__} is expecting "
                             f"{self.n_features_in_} features as input")
        return X_t.to(self.dual_coef_.dtype), numpy_like

    def _scored(self, X):
        X_t, numpy_like = self._inputs(X)
        with torch.no_grad():
            f = self._dissimilarity(X_t)
        return f, numpy_like

    @staticmethod
    def _out(values: torch.Tensor, numpy_like: bool):
        return values.cpu().numpy() if numpy_like else values

    def dissimilarity(self, X):
        """The paper's f(x), the squared RKHS distance to the centre: higher = more anomalous.

        ``f(x) = ||Phi(x) - C||^2 = k(x, x) - 2 k(x)^T a + a^T K a >= 0`` (up
        to rounding). k(x, x) = 1 (the RBF kernel's) for the exact kernel,
        Nystrom and RPCholesky; z(x)^T z(x) for the spectral maps, whose f is
        the squared distance in their feature space.

        Parameters
        ----------
        X : numpy.ndarray or torch.Tensor
            Features (n, d) as ``fit`` took them.

        Returns
        -------
        numpy.ndarray or torch.Tensor
            f(x) of every row, the same kind of array as X.
        """
        f, numpy_like = self._scored(X)
        return self._out(f, numpy_like)

    def explain(self, X, *, reference=None, method="auto", steps=explain.STEPS):
        """Per-feature attributions: larger = more responsible for the row's dissimilarity.

        ``method="auto"`` (``"range"``): how far x_j lies outside the range
        that the 16 training normals nearest to x in the other features hold,
        in standard deviations of feature j over those normals; 0 inside it
        (``dlmsvdd_ext.feature_ranges.outside``). ``method="repair"``: f(x)
        minus f of x with x_j alone clipped into that range, in the units of
        f. ``"integrated"``: integrated gradients of f from the nearest kept
        normal. None of them sums to anything. A table's one-hot and indicator
        columns are summed into the column they encode. ``"range"`` costs the
        neighbour search (a few times scoring at 50 features), ``"repair"`` a
        scoring pass per feature out of its range on top
        (``docs/user-guide/explain.md``).

        Parameters
        ----------
        X : numpy.ndarray, torch.Tensor or table
            Rows (n, d) as ``fit`` took them.
        reference : array-like or None
            Normal rows to take the ranges from, as X (None: the training
            normals the fit kept, ``reference_``).
        method : {"auto", "range", "repair", "integrated"}
            The attribution (``dlmsvdd_ext.explain``).
        steps : int
            Midpoint steps of the ``"integrated"`` path integral.

        Returns
        -------
        numpy.ndarray or torch.Tensor
            (n, d) attributions (d: X's columns), the same kind of array as X.
        """
        X_t, numpy_like = self._inputs(X)
        if reference is not None:
            reference = self._inputs(reference, "reference")[0]
        elif getattr(self, "reference_", None) is None:
            raise explain.no_reference(type(self).__name__)
        encoding = getattr(self, "encoding_", None)
        groups = None if encoding is None or isinstance(X, torch.Tensor) else explain.column_groups(encoding)
        A = explain.attribute(self._dissimilarity, X_t, self.reference_ if reference is None else reference,
                              method=method, steps=steps, groups=groups)
        return self._out(A, numpy_like)

    def score_samples(self, X):
        """-f(x): higher = more normal.

        Parameters
        ----------
        X : numpy.ndarray or torch.Tensor
            Features (n, d) as ``fit`` took them.

        Returns
        -------
        numpy.ndarray or torch.Tensor
            -f(x) of every row, the same kind of array as X.
        """
        f, numpy_like = self._scored(X)
        return self._out(-f, numpy_like)

    def decision_function(self, X):
        """``score_samples - offset_``: >= 0 normal (see ``contamination``).

        Parameters
        ----------
        X : numpy.ndarray or torch.Tensor
            Features (n, d) as ``fit`` took them.

        Returns
        -------
        numpy.ndarray or torch.Tensor
            The decision value of every row, the same kind of array as X.
        """
        f, numpy_like = self._scored(X)
        return self._out(-f - self._offset(), numpy_like)

    def predict(self, X, *, fpr=None, fdr=None):
        """+1 (normal) where ``decision_function`` >= 0, -1 (anomaly) elsewhere.

        ``threshold_rule_`` names the rule (by default p-value <= ``contamination``
        against the cross-fitted training normals); ``fpr`` and ``fdr`` use the same
        calibration normals.

        Parameters
        ----------
        X : numpy.ndarray or torch.Tensor
            Features (n, d) as ``fit`` took them.
        fpr : float or None
            -1 where the conformal p-value is <= fpr.
        fdr : float or None
            -1 for the samples Benjamini-Hochberg flags at this false-discovery rate over X.

        Returns
        -------
        numpy.ndarray or torch.Tensor
            +1 or -1 per row, the same kind of array as X.
        """
        if fpr is None and fdr is None:
            offset = self._offset()  # refused before scoring, not after
            f, numpy_like = self._scored(X)
            labels = torch.where(-f - offset >= 0, 1, -1)
        else:
            calibration = self._calibration()
            f, numpy_like = self._scored(X)
            flags = calibration.flags(f, fpr=fpr, fdr=fdr)
            labels = torch.as_tensor(np.where(flags, -1, 1), device=f.device)
        return self._out(labels, numpy_like)

    # ---- conformal p-values (dlmsvdd_ext.conformal)

    def calibrate(self, X_cal, y=None, *, source: str = "calibrate(X_cal)"):
        """Keep the dissimilarities of normal samples the fit never trained on, in place of the
        cross-fitted training normals'.

        ``p_values``, the ``fpr`` / ``fdr`` decisions and the default threshold at
        ``contamination`` (``offset_``) use them; a refit forgets them.

        Parameters
        ----------
        X_cal : numpy.ndarray or torch.Tensor
            Normal samples' features (n_cal, d).
        y : array-like or None
            Their labels, if given; all must be +1.
        source : str
            Recorded as ``calibration_source_``.

        Returns
        -------
        LpSVDD
            This estimator.
        """
        f, _ = self._scored(X_cal)
        conformal.normal_only(y, f.shape[0])
        self._set_calibration(conformal.Calibration(f, source))
        return self

    def _calibration(self) -> conformal.Calibration:
        check_is_fitted(self, "dual_coef_")
        if getattr(self, "calibration_", None) is None:
            raise conformal.missing(type(self).__name__)
        return self.calibration_

    def _offset(self) -> float:
        """``offset_``, refused (``conformal.NotCalibrated``) while there is none."""
        check_is_fitted(self, "dual_coef_")
        if self.threshold_rule_.startswith(NO_THRESHOLD):
            raise conformal.missing(type(self).__name__, f" and so no threshold: {self.threshold_rule_}")
        return self.offset_

    @property
    def n_calibration_(self) -> int:
        """Calibration normals held (0: none)."""
        check_is_fitted(self, "dual_coef_")
        return 0 if self.calibration_ is None else self.calibration_.n

    @property
    def calibration_source_(self) -> str | None:
        """Where the calibration normals came from (None: none held)."""
        check_is_fitted(self, "dual_coef_")
        return None if self.calibration_ is None else self.calibration_.source

    def p_values(self, X) -> np.ndarray:
        """Conformal p-values, ``(1 + #{calibration f >= f(x)}) / (n_cal + 1)``: small = anomalous.

        Parameters
        ----------
        X : numpy.ndarray or torch.Tensor
            Features (n, d) as ``fit`` took them.

        Returns
        -------
        numpy.ndarray
            One p-value per row.
        """
        f, _ = self._scored(X)
        return self._calibration().p_values(f)

    # ---- persistence: plain tensors and numbers (torch.load(weights_only=True) reads them)

    _SCALARS = ("gamma_", "objective_", "gap_", "n_iter_", "converged_", "aKa_", "r2_", "rho2_", "b_normal_",
                "b_anomaly_", "offset_", "n_features_in_", "stalled_", "nu_", "distance_scores_", "threshold_rule_",
                "kernel_")

    def state_dict(self) -> dict:
        """The hyper-parameters and the fitted boundary, as plain tensors and numbers.

        ``torch.load(weights_only=True)`` reads it; ``from_state_dict`` rebuilds the estimator.

        Returns
        -------
        dict
            ``params``, ``scalars``, alpha, labels, the support features (exact
            kernel) or the map and its weights (approximations), the solver's
            history and the calibration scores.
        """
        check_is_fitted(self, "dual_coef_")
        exact = self.feature_weights_ is None
        return {
            "params": {k: v for k, v in self.get_params().items() if k != "device"},
            "scalars": {k: getattr(self, k) for k in self._SCALARS},
            "alpha": torch.as_tensor(self.alpha_), "labels": torch.as_tensor(self.labels_),
            "support": torch.as_tensor(self.support_), "dual_coef": self.dual_coef_.cpu(),
            "support_vectors": self.support_vectors_.cpu() if exact else None,
            "feature_weights": None if exact else self.feature_weights_.cpu(),
            "backend": None if exact else self.backend_.state_dict(),
            "history": self.history_,
            "reference": None if getattr(self, "reference_", None) is None else self.reference_.cpu(),
            "calibration": None if self.calibration_ is None else self.calibration_.state_dict(),
            **({} if getattr(self, "encoding_", None) is None else {"encoding": self.encoding_.to_dict()}),
        }

    def to(self, device) -> "LpSVDD":
        """Score (and refit) on ``device``: the fitted boundary's tensors, its kernel map's and
        the ``device`` parameter all move there.

        Parameters
        ----------
        device : str or torch.device
            Where the estimator lives from now on.

        Returns
        -------
        LpSVDD
            This estimator.
        """
        move_tensors(self, device)
        if getattr(self, "backend_", None) is not None:
            self.backend_.to(device)
        self.device = torch.device(device)
        return self

    @classmethod
    def from_state_dict(cls, state: dict, device=None) -> "LpSVDD":
        """The fitted estimator a ``state_dict`` describes.

        Parameters
        ----------
        state : dict
            A ``state_dict``, also of earlier versions.
        device : str, torch.device or None
            Where to score.

        Returns
        -------
        LpSVDD
            The estimator; it scores as the one that was saved.
        """
        # States saved before contamination, stalled_ and nu_ were kept decided by the sphere (their offset_ is -r^2).
        model = cls(**{"contamination": "radius", **state["params"]}, device=device)
        model.stalled_, model.nu_ = False, model.nu
        # States saved before distance_scores_ scored spectral maps with k(x, x) = 1 (their offset_ too): kept.
        model.distance_scores_ = False
        model.threshold_rule_ = model._legacy_rule()  # states saved before it was kept: their contamination's
        # states saved before kernel="auto" named the kernel their parameter gave
        model.kernel_ = state["params"].get("kernel", "exact")
        for k, v in state["scalars"].items():
            setattr(model, k, v)
        model.alpha_, model.labels_ = state["alpha"].numpy(), state["labels"].numpy()
        model.support_ = state["support"].numpy()
        model.dual_coef_ = state["dual_coef"].to(device)
        model.history_ = state["history"]
        reference = state.get("reference")  # absent from states saved before explain: it then takes reference=
        model.reference_ = None if reference is None else reference.to(device)
        model.calibration_ = conformal.Calibration.from_state_dict(state.get("calibration"))  # absent: older states
        model.calibration_rows_ = None  # rows of the training set: not kept
        model.encoding_ = state.get("encoding") and tabular.TableEncoding.from_dict(state["encoding"])
        if state["backend"] is None:
            model.backend_ = kernels.make("exact", model.gamma_)
            model.support_vectors_, model.feature_weights_ = state["support_vectors"].to(device), None
        else:
            model.backend_ = kernels.KernelBackend.from_state_dict(state["backend"], device=device)
            model.feature_weights_ = state["feature_weights"].to(device)
            model.support_vectors_ = None  # an approximation scores through its map
        return model
