"""Solvers of the large-margin lp-SVDD dual, all certified by the Frank-Wolfe gap.

* ``"apg"`` (default): accelerated projected gradient with exact projection onto
  the two scaled simplices, adaptive (gradient) restart, a step per class
  from a bound on its block's curvature, with backtracking (``_class_metric``).
  One kernel product per iteration.
* ``"pairwise"``: pairwise Frank-Wolfe with exact line search (SMO-like),
  compiled loop, columns from the kernel operator; good warm-started.
* ``"paper"``: vanilla Frank-Wolfe with step 2/(tau+2), as published.

For any feasible alpha, ``gap = <alpha - s, grad F(alpha)>`` with ``s`` the linear
oracle's vertex bounds ``F(alpha) - F*``. Every method stops when
``0 <= gap <= tol * F(alpha)`` (a relative suboptimality certificate; a gap
within float64 rounding of zero, ``StoppingRule.ROUNDING``, counts as zero), when the
gap stops falling (``StoppingRule``), or at ``max_iter``. The state and the
certificate are float64 whatever the dtype of K (see ``kernel_operator``); the
compiled Frank-Wolfe loop reads a float32 K's or Z's columns under a float64
state (``_compiled_frank_wolfe``).

The boundary is recovered from the dual's KKT multipliers (``recovery="kkt"``,
exact for the dual as written), or by the paper's averaging (``"paper"``).
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field

import torch

from . import ops
from .dual import DualProblem
from .kernel_operator import KernelOperator
from .params import METHODS


@dataclass
class SolveResult:
    alpha: torch.Tensor
    Ka: torch.Tensor  # K (alpha * t)
    objective: float
    gap: float
    n_iter: int
    n_matvec: int  # full kernel products (columns not counted)
    converged: bool
    method: str
    history: dict = field(default_factory=dict)  # "objective", "gap": per iteration
    seconds: float = 0.0
    stalled: bool = False  # stopped because the gap stopped falling (or went negative or non-finite)
    status: str = ""  # why it stopped, in words


@dataclass
class Boundary:
    b_normal: float  # b_N = r^2 - rho^2
    b_anomaly: float  # b_A = r^2 + rho^2
    r2: float
    rho2: float
    aKa: float  # a^T K a, the constant of the score

    @classmethod
    def from_offsets(cls, b_normal: float, b_anomaly: float, aKa: float) -> "Boundary":
        return cls(b_normal=b_normal, b_anomaly=b_anomaly, r2=0.5 * (b_normal + b_anomaly),
                   rho2=0.5 * (b_anomaly - b_normal), aKa=aKa)


class StoppingRule:
    """When a solver loop stops, and what it records.

    The one stopping rule of every Python solver loop (APG here, sharded Frank-Wolfe in
    ``dlmsvdd_ext.distributed``; the compiled Frank-Wolfe loop is replayed
    through it afterwards, ``replay``).

    ``done(oracle)`` records an oracle pass's objective and gap and says whether
    to stop:

    * converged when ``0 <= gap <= tol * |objective|``, a gap within
      ``ROUNDING * |objective|`` of zero counting as zero (so tol = 0 means
      "to float64's rounding");
    * stalled when the gap is negative beyond that rounding or either is not
      finite (overflow: the certificate means nothing, it never counts as converged),
      or when the gap stopped falling: the smallest gap of the last
      ``max(window, n_iter // 2)`` passes is not ``STALL_DROP`` times the
      smallest before them (a sublinear 1/t rate still halves it over that
      window; rounding noise does not). ``window`` is ``WINDOW`` passes for
      APG, whose every iteration updates all weights (its gap can sit still
      for a hundred iterations and then fall again at p near 1.1, q ~ 10), and
      the number of samples for Frank-Wolfe, which moves two weights per
      iteration (``frank_wolfe_window``);
    * out of iterations after ``max_iter`` steps (each ``step()``).

    Parameters
    ----------
    max_iter : int
        The iteration limit.
    tol : float
        The certificate's relative tolerance.
    window : int or None
        The stall window (None: ``WINDOW``).
    """

    STALL_DROP = 0.9
    WINDOW = 200
    # The gap's float64 rounding, relative to the objective: the sums over N
    # behind it were measured off by up to 7e-16 of it (N <= 2000), so a gap
    # within this band of zero is zero (a trivially solved problem's first gap
    # came out as -1.25e-16 and was refused); -1e-12 still is not.
    ROUNDING = 1e-13

    def __init__(self, max_iter: int, tol: float, window: int | None = None):
        self.max_iter, self.tol = int(max_iter), float(tol)
        self.window = self.WINDOW if window is None else int(window)
        self.history = {"objective": [], "gap": []}
        self._best: list[float] = []  # running minimum of the gap
        self.n_iter = 0
        self.converged = self.stalled = False
        self.status = ""

    def done(self, oracle: dict) -> bool:
        objective, gap = float(oracle["objective"]), float(oracle["gap"])
        self.history["objective"].append(objective)
        self.history["gap"].append(gap)
        if self.certifies(objective, gap, self.tol):
            self.converged = True
            return self.stop(stalled=False, status="converged")
        if not (math.isfinite(objective) and math.isfinite(gap)):
            return self.stop(stalled=True, status=f"the objective ({objective}) or the gap ({gap}) is not finite")
        if gap < 0:
            return self.stop(stalled=True, status=f"the gap is negative ({gap:.3g}): rounding exceeds it")
        self._best.append(min(gap, self._best[-1]) if self._best else gap)
        k = len(self._best) - 1
        span = max(self.window, k // 2)
        if k >= span and self._best[k] > self.STALL_DROP * self._best[k - span]:
            return self.stop(stalled=True, status=f"the gap stopped falling (by less than "
                              f"{1 - self.STALL_DROP:.0%} in the last {span} iterations)")
        if self.n_iter == self.max_iter:
            return self.stop(stalled=False, status=f"max_iter = {self.max_iter} reached")
        return False

    @classmethod
    def certifies(cls, objective: float, gap: float, tol: float) -> bool:
        """The certificate: a finite gap in [0, tol |objective|], where a gap
        within ``ROUNDING`` |objective| of zero (either sign) counts as zero."""
        band = cls.ROUNDING * abs(objective)
        return math.isfinite(objective) and -band <= gap <= max(tol * abs(objective), band)

    def stop(self, stalled: bool, status: str) -> bool:
        """Ends the run (a loop that cannot go on: status says why)."""
        self.stalled, self.status = stalled, status
        return True

    def step(self) -> None:
        self.n_iter += 1

    @classmethod
    def frank_wolfe_window(cls, n: int) -> int:
        return max(cls.WINDOW, int(n))

    @classmethod
    def replay(cls, history: dict, max_iter: int, tol: float, window: int | None = None) -> "StoppingRule":
        """The rule fed a finished run's history (the compiled loop's): where it
        would have stopped and why."""
        rule = cls(max_iter, tol, window)
        for objective, gap in zip(history["objective"], history["gap"]):
            if rule.done({"objective": objective, "gap": gap}):
                break
            rule.step()
        return rule


def solve(op: KernelOperator, problem: DualProblem, method: str = "apg", max_iter: int = 1000,
          tol: float = 1e-6, alpha0: torch.Tensor | None = None) -> SolveResult:
    """Minimises the dual over the kernel ``op`` from ``alpha0`` (default: uniform within each class)."""
    if method not in METHODS:
        raise ValueError(f"method must be one of {METHODS}, got {method!r}")
    if int(max_iter) < 0:
        raise ValueError(f"max_iter must be >= 0, got {max_iter}")
    if not (tol >= 0):
        raise ValueError(f"tol must be >= 0, got {tol}")
    if op.n != problem.t.numel():
        raise ValueError(f"the kernel has {op.n} rows but there are {problem.t.numel()} labels")
    start = time.perf_counter()
    alpha = problem.uniform_alpha() if alpha0 is None else alpha0.to(torch.float64).clone()
    problem.check_feasible(alpha)
    Ka = op.matvec(alpha * problem.t)
    if method == "apg":
        result = _apg(op, problem, alpha, Ka, int(max_iter), float(tol))
    else:
        result = _compiled_frank_wolfe(op, problem, alpha, Ka, method, int(max_iter), float(tol))
    result.seconds = time.perf_counter() - start
    return result


def _compiled_frank_wolfe(op: KernelOperator, problem: DualProblem, alpha: torch.Tensor, Ka: torch.Tensor,
                          method: str, max_iter: int, tol: float) -> SolveResult:
    """The compiled loop (``ops.fw_solve``): a float64 state over the kernel's
    columns in its own dtype (a float32 K or Z is widened entry by entry as
    it is read), its history replayed through the ``StoppingRule``."""
    t = problem.t
    state, Ka_state = alpha.to(torch.float64), Ka.to(torch.float64)  # fresh: solve made them
    info = ops.fw_solve(state, Ka_state, t, problem.coefs(), method="vanilla" if method == "paper" else "pairwise",
                        max_iter=max_iter, tol=tol, **op.fw_source())
    hist = {"objective": info["history_objective"].tolist(), "gap": info["history_gap"].tolist()}
    objective, gap = hist["objective"][-1], hist["gap"][-1]
    converged = StoppingRule.certifies(objective, gap, tol)
    rule = StoppingRule.replay(hist, max_iter, tol, StoppingRule.frank_wolfe_window(problem.t.numel()))
    stalled = not converged and (rule.stalled or info["n_iter"] < max_iter)
    if converged:
        status = "converged"
    elif rule.stalled:
        status = f"{rule.status} (at iteration {rule.n_iter} of the {info['n_iter']} the compiled loop ran)"
    elif info["n_iter"] < max_iter:  # nothing was left to move
        status = f"the compiled loop stopped at iteration {info['n_iter']} (nothing left to move) with gap {gap:.3g}"
    else:
        status = f"max_iter = {max_iter} reached"
    return SolveResult(state, Ka_state, objective, gap, info["n_iter"], 1, converged, method, hist, stalled=stalled,
                       status=status)


def _class_metric(op: KernelOperator, problem: DualProblem,
                  alpha: torch.Tensor) -> tuple[float, tuple[float, float], float]:
    """APG's step sizes, one per class: ``(L, (w_normal, w_anomaly), mu)`` for
    the upper quadratic model ``F(y + d) <= F(y) + g^T d + L/2 sum(w d^2)``
    (w = 1 on the class with the largest curvature, below 1 on the other) and
    mu, the strong convexity in the same metric (0 unless q = 2).

    Why per class: the Hessian is 2 T K T + diag(penalty curvature), and the
    curvature of a class's block is about 2 lambda_max(K_kk) + 2 pen_k. With
    the default c_k = 1/|I_k| (pen_k = |I_k| / 2 at p = 2) that is of order
    |I_k|: a handful of labelled anomalies make a block hundreds of times
    flatter than the normal one. One step 1/L for both barely moves the
    anomalous weights, and mu = 2 min(pen) makes the momentum's condition
    number L / mu ~ |I_N| / |I_A| (measured on adbench-dev: 8x the one-class
    iterations). With a step per class each block is as well conditioned as
    the one-class problem. The projection stays exact: w is constant on each
    class, so the scaled projection is each class's Euclidean one.

    The metric: m_k = 2 lambda_k + curv_k with lambda_k >= lambda_max(K_kk)
    (the whole kernel's bound, or the block's trace if smaller: a few
    anomalies). Each block alone is bounded by it; the coupling K_NA is not
    (though feasible steps sum to zero within each class, which removes
    K's large constant mode, and on every adbench-dev set it held at once).
    Doubled, it is a bound: K PSD gives ||K_NA|| <= sqrt(lambda_N lambda_A),
    and then diag(4 lambda_k + curv_k) >= H (Schur complement), so the
    solver's backtracking on L stops after one doubling at p = 2.
    A class with fewer than two samples or no mass never moves: it does not
    count (mu would otherwise come from a block that is fixed).
    """
    coefs = problem.coefs()
    q = problem.q
    lam = op.lambda_max_bound()
    diag = None
    classes = []  # (class index, lambda_k, penalty curvature, strong convexity) of each class that moves
    for k, (mask, pen, mass) in enumerate(((problem.normal, coefs["pen_normal"], problem.mu_normal),
                                           (~problem.normal, coefs["pen_anomaly"], problem.mu_anomaly))):
        if int(mask.sum()) < 2 or mass == 0.0:
            continue
        if diag is None:
            diag = op.diagonal()
        lam_k = min(lam, float(diag[mask].sum()))
        if q == 2.0:
            curv, strong = 2.0 * pen, 2.0 * pen
        else:  # the penalty's curvature at the current weights: a first guess
            curv, strong = q * (q - 1) * pen * float(alpha[mask].max()) ** (q - 2), 0.0
        classes.append((k, lam_k, curv, strong))
    m = [2.0 * lam_k + curv for _, lam_k, curv, _ in classes]
    L = max(m, default=1.0)  # nothing moves: alpha is the only feasible point
    w = [1.0, 1.0]  # normal, anomalous
    mu = math.inf
    for (k, _, _, strong), m_k in zip(classes, m):
        w[k] = m_k / L
        mu = min(mu, strong * L / m_k)
    return L, (w[0], w[1]), mu


class CompiledApgSteps:
    """APG's O(N) work in compiled passes: the gradient step fused with its
    projection (``ops.apg_step``) and, after the kernel product, one pass for
    the oracle at the new point and the backtracking's and restart's sums
    (``ops.apg_check``). ``dlmsvdd_ext.reference.TorchApgSteps`` is the same
    in torch operations, the reference the tests hold these to.
    ``cuda_emulation``: the CUDA kernels' code on CPU tensors (tests)."""

    def __init__(self, problem: DualProblem, cuda_emulation: bool = False):
        self.t, self.coefs, self.emulate = problem.t, problem.coefs(), bool(cuda_emulation)

    def oracle(self, x: torch.Tensor, Kx: torch.Tensor) -> dict:
        return ops.dual_oracle(x, Kx, self.t, self.coefs, cuda_emulation=self.emulate)

    def step(self, x, x_prev, Kx, Kx_prev, beta: float, steps: tuple[float, float]) -> torch.Tensor:
        return ops.apg_step(x, x_prev, Kx, Kx_prev, self.t, self.coefs, beta, steps, cuda_emulation=self.emulate)

    def check(self, x, x_prev, Kx, Kx_prev, x_new, Kx_new, beta: float, steps: tuple[float, float]) -> dict:
        return ops.apg_check(x, x_prev, Kx, Kx_prev, x_new, Kx_new, self.t, self.coefs, beta, steps,
                             cuda_emulation=self.emulate)


def _apg(op: KernelOperator, problem: DualProblem, alpha: torch.Tensor, Ka: torch.Tensor,
         max_iter: int, tol: float, steps=None) -> SolveResult:
    """Projected gradient with Nesterov momentum in the metric L diag(w) of
    ``_class_metric`` (a step size per class): x+ = P(y - grad F(y) / (L w)),
    y = x + beta (x - x_prev). K y follows linearly from K x and K x_prev, so
    each iteration costs one kernel product; its O(N) work is ``steps``'
    (default ``CompiledApgSteps``: two compiled passes and the projection's few).

    For p = 2 the dual is a strongly convex quadratic, with mu from the
    penalty, and the momentum is the constant (sqrt(L) - sqrt(mu)) /
    (sqrt(L) + sqrt(mu)). Otherwise beta follows FISTA's sequence. The
    momentum restarts when it points against the step taken (O'Donoghue and
    Candes' gradient scheme, in the same metric: scale-free, unlike comparing
    objective values, which stall in rounding near the optimum), and L grows
    by backtracking whenever the quadratic upper model fails.
    """
    steps = CompiledApgSteps(problem) if steps is None else steps
    t = problem.t
    L, w, mu = _class_metric(op, problem, alpha)
    n_matvec = 2  # the start's product and the bound
    x, Kx, x_prev, Kx_prev = alpha, Ka, alpha, Ka
    theta = 1.0
    # Objective values carry the rounding of float64 sums: the upper-model
    # test allows that much, so rounding cannot inflate L.
    slack = 64 * torch.finfo(torch.float64).eps
    rule = StoppingRule(max_iter, tol)
    oracle = steps.oracle(x, Kx)
    while not rule.done(oracle):
        rule.step()
        theta_next = 0.5 * (1.0 + math.sqrt(1.0 + 4.0 * theta * theta))
        for _ in range(60):  # backtracking on the upper quadratic model
            if mu > 0:
                beta = (math.sqrt(L) - math.sqrt(mu)) / (math.sqrt(L) + math.sqrt(mu))
            else:
                beta = (theta - 1.0) / theta_next
            metric = (L * w[0], L * w[1])
            x_new = steps.step(x, x_prev, Kx, Kx_prev, beta, metric)
            Kx_new = op.matvec(x_new * t)
            n_matvec += 1
            oracle = steps.check(x, x_prev, Kx, Kx_prev, x_new, Kx_new, beta, metric)
            F_new = oracle["objective"]
            model = oracle["objective_y"] + oracle["g_dot_d"] + 0.5 * oracle["step_d2"]
            if F_new <= model + slack * max(abs(model), abs(F_new)):
                break
            L *= 2.0
        if oracle["restart"] > 0:  # the next step starts without momentum
            x_prev, Kx_prev, x, Kx, theta = x_new, Kx_new, x_new, Kx_new, 1.0
        else:
            x_prev, Kx_prev, x, Kx, theta = x, Kx, x_new, Kx_new, theta_next
    hist = rule.history
    return SolveResult(x, Kx, hist["objective"][-1], hist["gap"][-1], rule.n_iter, n_matvec, rule.converged, "apg",
                       hist, stalled=rule.stalled, status=rule.status)


def recover_boundary(problem: DualProblem, alpha: torch.Tensor, Ka: torch.Tensor, recovery: str = "kkt",
                     support_tol: float = 1e-6, diag: torch.Tensor | None = None) -> Boundary:
    """Radius and margin from a (near-)optimal alpha.

    ``"kkt"``: at the optimum every support vector's gradient equals its class's
    multiplier, lambda_N = min_{I_N} g and lambda_A = min_{I_A} g, so
    ``b_N = 1 + a^T K a - lambda_N`` and ``b_A = 1 + a^T K a + lambda_A``
    (k(z, z) = 1 for the RBF kernel). Exact for the dual as written, and not
    fooled by tiny weights.
    ``"paper"``: averages ``f_i - eps_i`` over normal and ``f_l + eps_l`` over
    anomalous support vectors (alpha above ``support_tol`` times the class's
    largest weight) with the paper's ``eps = (alpha / (c p))^(1/(p-1))``.
    This slack is 2^(q-1) times smaller than the one the dual implies, so the
    result is biased; kept for reproduction.
    Without anomalies (or nu = 1) rho^2 = 0 and b_A = b_N = r^2.

    ``diag``: K_ii where the scores do not take k(z, z) = 1 (a spectral map's
    ||z_i||^2, ``kernels.KernelBackend.unit_diagonal``). The dual keeps the
    constant 1 in place of its term sum_i alpha_i t_i K_ii, so its KKT
    conditions make f_i minus the slack term equal to b_N + K_ii - 1 on the
    normal support: "kkt" then puts the boundary at the alpha-weighted class
    mean of K_ii in place of 1, and "paper" averages f_i with their K_ii.
    """
    if recovery not in ("kkt", "paper"):
        raise ValueError(f"recovery must be 'kkt' or 'paper', got {recovery!r}")
    info = ops.dual_oracle(alpha, Ka, problem.t, problem.coefs())
    if recovery == "kkt":
        return kkt_boundary(problem, info, diagonal_means(problem, alpha, diag))
    aKa = info["quadratic"]
    one_class = not problem.has_anomalies or problem.mu_anomaly == 0.0
    f = (1.0 if diag is None else diag.double()) - 2.0 * Ka.double() + aKa
    a64 = alpha.double()
    normal = problem.normal

    def class_mean(mask, c, sign):
        w = a64[mask]
        sv = w > support_tol * float(w.max())
        eps = (w[sv] / (c * problem.p)) ** (1.0 / (problem.p - 1.0))
        return float((f[mask][sv] + sign * eps).mean())

    b_normal = class_mean(normal, problem.c1, -1.0)
    b_anomaly = b_normal if one_class else class_mean(~normal, problem.c2, +1.0)
    return Boundary.from_offsets(b_normal, b_anomaly, aKa)


def diagonal_means(problem: DualProblem, alpha: torch.Tensor, diag: torch.Tensor | None,
                   total=lambda sums: sums) -> tuple[float, float]:
    """The normal and anomalous classes' alpha-weighted means of K_ii (1, 1
    without ``diag``); ``total`` sums a shard's partial sums over the ranks."""
    if diag is None:
        return 1.0, 1.0
    weighted = alpha.double() * diag.double()
    normal = problem.t > 0
    sums = total(torch.stack([weighted[normal].sum(), weighted[~normal].sum()]))
    mu_anomaly = problem.mu_anomaly if problem.mu_anomaly > 0 else 1.0  # no anomalous weight: unused
    return float(sums[0]) / problem.mu_normal, float(sums[1]) / mu_anomaly


def kkt_boundary(problem: DualProblem, oracle: dict, diag_means: tuple[float, float] = (1.0, 1.0)) -> Boundary:
    """The boundary from the KKT multipliers of an oracle pass (``ops.dual_oracle``
    or its sharded merge): lambda_N = min_{I_N} g, lambda_A = min_{I_A} g;
    ``diag_means`` from :func:`diagonal_means` (k(z, z) = 1: (1, 1))."""
    aKa = oracle["quadratic"]
    b_normal = diag_means[0] + aKa - oracle["g_fw_normal"]
    one_class = not problem.has_anomalies or problem.mu_anomaly == 0.0
    b_anomaly = b_normal if one_class else diag_means[1] + aKa + oracle["g_fw_anomaly"]
    return Boundary.from_offsets(b_normal, b_anomaly, aKa)
