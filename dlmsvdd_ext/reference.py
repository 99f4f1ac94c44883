"""Reference implementations written the usual torch (or numpy) way: the baselines the
compiled kernels are measured against (benchmarks and `dlmsvdd bench`)."""

import math

import numpy as np
import torch
from scipy.linalg import solve_triangular

BLOCK = 1024


def rbf_matvec(X, Y, v, gamma):
    """K(X, Y) @ v in row blocks of 1024: mm for the cross term, norms, exp, mv."""
    y_norm = (Y * Y).sum(1)
    out = torch.empty(X.shape[0], dtype=X.dtype, device=X.device)
    for i in range(0, X.shape[0], BLOCK):
        xb = X[i:i + BLOCK]
        sq = (xb * xb).sum(1)[:, None] + y_norm[None, :] - 2.0 * (xb @ Y.T)
        out[i:i + BLOCK] = torch.exp(-gamma * sq.clamp_min_(0)) @ v
    return out


def rbf_gram(X, Y, gamma):
    """K(X, Y) with addmm for the expansion and an in-place exp."""
    x_norm = (X * X).sum(1, keepdim=True)
    y_norm = (Y * Y).sum(1)
    K = torch.addmm(x_norm + y_norm, X, Y.T, beta=1.0, alpha=-2.0)
    return K.clamp_min_(0).mul_(-gamma).exp_()


def cross_product(X, Y):
    """The bare matrix product of the same shape, in the same row blocks: the
    ceiling for a distinct X and Y."""
    for i in range(0, X.shape[0], BLOCK):
        X[i:i + BLOCK] @ Y.T


def paper_frank_wolfe(X, t, gamma, p=2.0, nu=1.2, iterations=1000):
    """The alpha-step written the paper's way: dense float64 K precomputed,
    vanilla Frank-Wolfe (step 2/(tau+2)) from uniform weights within each
    class, K a updated from the two new columns. Returns (alpha, objective).
    c1 = 1/|I_N|, c2 = 1/|I_A| as in the paper."""
    X = X.double()
    t = t.double()
    sq = (X * X).sum(1)
    K = torch.exp(-gamma * (sq[:, None] + sq[None, :] - 2.0 * (X @ X.T)).clamp_min_(0))
    normal = t > 0
    n_normal, n_anomaly = int(normal.sum()), int((~normal).sum())
    q = p / (p - 1.0)

    def cbar(c):
        return 0.5 * (c * p) ** (-1.0 / (p - 1.0)) * (1.0 - 1.0 / p)

    pen = torch.where(normal, torch.tensor(cbar(1.0 / n_normal) * 2.0 ** q, dtype=torch.float64),
                      torch.tensor(cbar(1.0 / n_anomaly) * 2.0 ** q, dtype=torch.float64))
    mu_n, mu_a = (nu + 1) / 2, (nu - 1) / 2
    alpha = torch.where(normal, torch.tensor(mu_n / n_normal, dtype=torch.float64),
                        torch.tensor(mu_a / n_anomaly, dtype=torch.float64))
    Ka = K @ (alpha * t)
    idx_n, idx_a = torch.nonzero(normal).flatten(), torch.nonzero(~normal).flatten()
    for tau in range(iterations):
        g = 2 * t * Ka + q * pen * alpha ** (q - 1)
        i = idx_n[torch.argmin(g[idx_n])]
        l = idx_a[torch.argmin(g[idx_a])]
        lam = 2.0 / (tau + 2.0)
        alpha *= 1 - lam
        alpha[i] += lam * mu_n
        alpha[l] += lam * mu_a
        Ka = (1 - lam) * Ka + lam * (mu_n * K[:, i] - mu_a * K[:, l])
    objective = float((pen * alpha ** q).sum() + (alpha * t) @ Ka)
    return alpha, objective


def fwht_torch(X, normalized=False):
    """Walsh-Hadamard transform of the last dimension (a power of two), the usual
    vectorised torch butterfly: per level, view the rows as (L/2h, 2, h) blocks
    and stack (a + b, a - b). Sylvester order, as scipy.linalg.hadamard."""
    L = X.shape[-1]
    if L < 2 or L & (L - 1):
        raise ValueError(f"the last dimension must be a power of two >= 2, got {L}")
    Y = X.reshape(-1, L)
    h = 1
    while h < L:
        pairs = Y.view(-1, L // (2 * h), 2, h)
        a, b = pairs[:, :, 0, :], pairs[:, :, 1, :]
        Y = torch.stack((a + b, a - b), dim=2).view(-1, L)
        h *= 2
    Y = Y.reshape(X.shape)
    return Y / math.sqrt(L) if normalized else Y


def block_rpcholesky_numpy(X, gamma, rank, seed=0, block_size=64, stoptol=1e-12):
    """Block RPCholesky of the RBF kernel of X (n, d) written the usual numpy way,
    after Chen, Epperly, Tropp, Webber's reference code (block_cholesky_helper,
    'regularize' strategy): per round, 2b pivots drawn with replacement from the
    residual diagonal, the first b distinct kept; their kernel columns from one
    matrix product; the previous factor projected out; a shifted Cholesky of the
    b x b core and a triangular solve. Returns (F (n, k) in X's dtype, pivots)."""
    X = np.asarray(X)
    n = X.shape[0]
    rng = np.random.default_rng(seed)
    sq = np.einsum("ij,ij->i", X, X)
    diags = np.ones(n)  # K_ii = 1
    trace0 = diags.sum()
    F = np.zeros((n, rank), dtype=X.dtype)
    pivots = []
    k = 0
    while k < rank:
        b = min(block_size, rank - k)
        draws = rng.choice(n, size=2 * b, p=diags / diags.sum(), replace=True)
        _, first = np.unique(draws, return_index=True)
        idx = draws[np.sort(first)][:b]
        G = X @ X[idx].T  # kernel columns K(X, X_idx) from the features
        G *= -2.0
        G += sq[:, None]
        G += sq[idx][None, :]
        np.maximum(G, 0.0, out=G)
        G *= -gamma
        np.exp(G, out=G)
        G -= F[:, :k] @ F[idx, :k].T
        C = G[idx].astype(np.float64)
        shift = np.finfo(X.dtype).eps * len(idx) * 2.0  # eps * b * 2 max(diag), as the reference code
        R = np.linalg.cholesky(C + shift * np.eye(len(idx))).astype(X.dtype)
        new = solve_triangular(R, G.T, lower=True, check_finite=False).T
        F[:, k:k + len(idx)] = new
        diags -= np.einsum("ij,ij->i", new, new, dtype=np.float64)
        np.maximum(diags, 0.0, out=diags)
        pivots.extend(idx.tolist())
        k += len(idx)
        if diags.sum() <= stoptol * trace0:
            break
    return F[:, :k], np.array(pivots, dtype=np.int64)


def nystrom_torch(X, gamma, m, seed=0):
    """Nystrom features written the usual torch way (the paper's form):
    uniform landmarks U, W = K(U, U) = V L V^T, Z = K(X, U) V (L + delta I)^(-1/2)."""
    g = torch.Generator().manual_seed(seed)
    idx = torch.randperm(X.shape[0], generator=g)[:m]
    U = X[idx]
    C = torch.exp(-gamma * torch.cdist(X, U).square())
    W = torch.exp(-gamma * torch.cdist(U, U).square())
    w, V = torch.linalg.eigh(W)
    return C @ (V / (w.clamp_min(0) + 1e-6).sqrt())


def project_simplex(v, mass):
    """Projection of v onto {x >= 0, sum(x) = mass} in torch: max(v - theta, 0)
    with the threshold of ``simplex_threshold``."""
    if mass == 0.0 or v.numel() == 0:
        return torch.zeros_like(v)
    return (v.double() - simplex_threshold(v, mass)).clamp_min(0).to(v.dtype)


def simplex_threshold(v, mass):
    """The theta with sum(max(v - theta, 0)) = mass (mass > 0) by Michelot's
    algorithm in torch, compacting the survivors: theta = (sum over S of v -
    mass) / |S| for S = {v > theta}, from S = all until S stops shrinking (the
    compiled ``ops.simplex_project`` runs the same steps as passes over all of v)."""
    live = v.double()
    count = live.numel()
    theta = (float(live.sum()) - mass) / count
    while True:
        live = live[live > theta]
        if live.numel() == count or live.numel() == 0:  # converged (or v held NaN: theta is NaN)
            return theta if live.numel() else math.nan
        count = live.numel()
        theta = (float(live.sum()) - mass) / count


def project_classes(problem, v):
    """The dual's projection (each class onto its scaled simplex) in torch."""
    out = torch.zeros_like(v)
    normal = problem.normal
    out[normal] = project_simplex(v[normal], problem.mu_normal)
    out[~normal] = project_simplex(v[~normal], problem.mu_anomaly)
    return out


class TorchApgSteps:
    """APG's O(N) work as the solver did it in torch operations before it was
    compiled (``dlmsvdd_ext.solver.CompiledApgSteps`` has the same methods):
    the reference its tests compare iterates with."""

    def __init__(self, problem):
        self.problem = problem

    def _point(self, x, x_prev, Kx, Kx_prev, beta):
        p = self.problem
        y = x + beta * (x - x_prev)
        Ky = Kx + beta * (Kx - Kx_prev)
        return y, Ky, 2.0 * p.t * Ky + p.penalty_derivative(y)

    def _metric(self, steps):
        return self.problem._per_class(*steps)

    def oracle(self, x, Kx):
        from . import ops

        return ops.dual_oracle(x, Kx, self.problem.t, self.problem.coefs())

    def step(self, x, x_prev, Kx, Kx_prev, beta, steps):
        y, _, g = self._point(x, x_prev, Kx, Kx_prev, beta)
        return project_classes(self.problem, y - g / self._metric(steps))

    def check(self, x, x_prev, Kx, Kx_prev, x_new, Kx_new, beta, steps):
        p = self.problem
        y, Ky, g = self._point(x, x_prev, Kx, Kx_prev, beta)
        w = self._metric(steps)
        d = x_new - y
        a = y if p.q == 2.0 else y.clamp_min(0)
        out = self.oracle(x_new, Kx_new)
        out["objective_y"] = float((p.penalty_weights() * a ** p.q).sum() + (p.t * y * Ky).sum())
        out["g_dot_d"] = float(g @ d)
        out["step_d2"] = float((w * d) @ d)
        out["restart"] = float((w * (y - x_new) * (x_new - x)).sum())
        return out


def apg_torch(op, problem, max_iter=1000, tol=1e-6):
    """The solver's APG from the uniform start with ``TorchApgSteps``."""
    from . import solver

    alpha = problem.uniform_alpha()
    return solver._apg(op, problem, alpha, op.matvec(alpha * problem.t), int(max_iter), float(tol),
                       steps=TorchApgSteps(problem))
