"""The large-margin lp-SVDD dual (the paper's eq. 3) in the form the solvers use.

    F(alpha) = cbar1 sum_{I_N} (2 alpha_i)^q + cbar2 sum_{I_A} (2 alpha_l)^q + a^T K a,
    a = alpha * t,  q = p / (p - 1),  cbar_k = 0.5 (c_k p)^(-1/(p-1)) (1 - 1/p),
    alpha >= 0,  sum(alpha) = nu,  t^T alpha = 1.

The feasible set is a product of two scaled simplices: the normal weights sum to
``mu_normal = (nu + 1) / 2`` and the anomalous ones to ``mu_anomaly = (nu - 1) / 2``.

The solver state (labels, weights, gradient) is float64 whatever the
features' dtype: the certificate is a difference of nearly equal sums.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from . import ops, params


@dataclass(frozen=True)
class DualProblem:
    t: torch.Tensor  # +1 normal, -1 anomaly, float64, on the features' device
    p: float
    nu: float
    c1: float
    c2: float
    # Class sizes of the whole training set: those of t, unless t is one
    # process's shard of it (dlmsvdd_ext.distributed).
    n_normal: int
    n_anomaly: int

    @classmethod
    def from_labels(cls, t: torch.Tensor, p: float = 2.0, nu: float = 1.2,
                    c1: float | None = None, c2: float | None = None,
                    counts: tuple[int, int] | None = None, slack_scale: float = 1.0) -> "DualProblem":
        """Validates the hyper-parameters; c1, c2 default to slack_scale/|I_N| and slack_scale/|I_A|.
        ``counts`` = (|I_N|, |I_A|) of the whole set when t is a shard of it.
        The labels are kept as float64."""
        if t.ndim != 1 or t.numel() == 0:
            raise ValueError("labels must be a non-empty 1-D array")
        if not bool(((t == 1) | (t == -1)).all()):
            raise ValueError("labels must be +1 (normal) or -1 (anomaly)")
        if counts is None:
            n_normal = int((t > 0).sum())
            n_anomaly = t.numel() - n_normal
        else:
            n_normal, n_anomaly = (int(c) for c in counts)
        if n_normal == 0:
            raise ValueError("there are no normal samples (label +1)")
        params.check({"p": p, "nu": nu, "c1": c1, "c2": c2, "slack_scale": slack_scale})
        if n_anomaly == 0 and nu != 1:
            raise ValueError(f"without anomalies nu must be 1 (one-class SVDD), got {nu}")
        c1 = slack_scale / n_normal if c1 is None else float(c1)
        c2 = (slack_scale / n_anomaly if n_anomaly else 1.0) if c2 is None else float(c2)
        problem = cls(t=t.to(torch.float64), p=float(p), nu=float(nu), c1=c1, c2=c2, n_normal=n_normal,
                      n_anomaly=n_anomaly)
        problem.check_range(torch.float64)
        return problem

    def check_range(self, dtype: torch.dtype, scores_only: bool = False) -> None:
        """Refuses a problem whose values overflow ``dtype`` (the solver state's):
        the penalties pen_k, the largest the objective (|a^T K a| <= nu^2 for an
        RBF kernel, the penalty <= pen_k mu_k^q) and the gradient can be, with
        room for sums over the samples. nu = 1e300 or c1 = 1e-300 at p = 1.1
        end here instead of in an IndexError or an inf deep in the solver.
        ``scores_only``: just nu^2, the range of the scores f(x) (the features'
        dtype, in which they are computed)."""
        limit = torch.finfo(dtype).max / 1024
        try:
            c = self.coefs()
            sizes = {"nu^2 (the scale of a^T K a and of the scores)": self.nu ** 2}
            for k in () if scores_only else ("normal", "anomaly"):
                pen, mu = c[f"pen_{k}"], c[f"mu_{k}"]
                sizes[f"pen_{k}"] = pen
                sizes[f"pen_{k} mu^q"] = pen * mu ** self.q
                sizes[f"q pen_{k} mu^(q-1)"] = self.q * pen * mu ** (self.q - 1.0)
        except OverflowError:
            sizes = {"the penalty": math.inf}
        too_big = [name for name, value in sizes.items() if not value <= limit]
        if too_big:
            raise ValueError(f"nu = {self.nu:g}, p = {self.p:g}, c1 = {self.c1:g}, c2 = {self.c2:g} make the dual's "
                             f"{too_big[0]} overflow {dtype} (largest {torch.finfo(dtype).max:g}); use a smaller nu, "
                             "c closer to 1/n" + ("" if dtype == torch.float64 else ", or float64 features"))

    # -- derived constants
    @property
    def q(self) -> float:
        return self.p / (self.p - 1.0)

    def cbar(self, c: float) -> float:
        return 0.5 * (c * self.p) ** (-1.0 / (self.p - 1.0)) * (1.0 - 1.0 / self.p)

    @property
    def mu_normal(self) -> float:
        return (self.nu + 1.0) / 2.0

    @property
    def mu_anomaly(self) -> float:
        return (self.nu - 1.0) / 2.0

    @property
    def normal(self) -> torch.Tensor:
        return self.t > 0

    @property
    def has_anomalies(self) -> bool:
        return self.n_anomaly > 0

    def coefs(self) -> dict:
        """The constants the compiled routines take: penalties pen_k = cbar_k 2^q."""
        two_q = 2.0 ** self.q
        return {"q": self.q, "pen_normal": self.cbar(self.c1) * two_q, "pen_anomaly": self.cbar(self.c2) * two_q,
                "mu_normal": self.mu_normal, "mu_anomaly": self.mu_anomaly}

    # -- vectors
    def penalty_weights(self) -> torch.Tensor:
        c = self.coefs()
        return self._per_class(c["pen_normal"], c["pen_anomaly"])

    def _per_class(self, normal_value: float, anomaly_value: float) -> torch.Tensor:
        """A vector holding one value on normal samples and another on anomalous
        ones, built in the labels' dtype (torch.where on Python floats would
        round through float32)."""
        out = torch.full_like(self.t, anomaly_value)
        out[self.normal] = normal_value
        return out

    def penalty_derivative(self, alpha: torch.Tensor) -> torch.Tensor:
        """d/d alpha of the penalty; also each sample's slack implied by the dual.

        For q = 2 the quadratic extends to negative alpha (momentum steps may
        leave the feasible set); other powers are taken at max(alpha, 0)."""
        q = self.q
        if q == 2.0:
            return 2.0 * self.penalty_weights() * alpha
        return q * self.penalty_weights() * alpha.clamp_min(0) ** (q - 1.0)

    def uniform_alpha(self) -> torch.Tensor:
        """Uniform weights within each class (the usual Frank-Wolfe start)."""
        return self._per_class(self.mu_normal / self.n_normal, self.mu_anomaly / max(self.n_anomaly, 1))

    def project(self, v: torch.Tensor) -> torch.Tensor:
        """Euclidean projection onto the feasible set (each class onto its scaled
        simplex), compiled, in O(N) passes (``ops.simplex_project``)."""
        return ops.simplex_project(v.to(torch.float64).contiguous(), self.t, self.mu_normal, self.mu_anomaly)

    def check_feasible(self, alpha: torch.Tensor) -> None:
        if alpha.shape != self.t.shape:
            raise ValueError(f"alpha must have shape {tuple(self.t.shape)}, got {tuple(alpha.shape)}")
        if not bool(torch.isfinite(alpha).all()) or bool((alpha < 0).any()):
            raise ValueError("alpha must be finite and non-negative")
        for mask, mu, name in ((self.normal, self.mu_normal, "normal"), (~self.normal, self.mu_anomaly, "anomalous")):
            if mask.any():
                s = float(alpha[mask].double().sum())
                if abs(s - mu) > 1e-5 * max(mu, 1.0):
                    raise ValueError(f"alpha's {name} weights sum to {s}, the constraints need {mu}")

