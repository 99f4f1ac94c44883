"""Reference implementations written the usual torch way: the baselines the
compiled kernels are measured against (benchmarks and `dlmsvdd bench`)."""

import math

import torch

BLOCK = 1024


def rbf_matvec(X, Y, v, gamma):
    """K(X, Y) @ v in row blocks of 1024: mm for the cross term, norms, exp, mv."""
    y_norm = (Y * Y).sum(1)
    out = torch.empty(X.shape[0], dtype=X.dtype)
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
