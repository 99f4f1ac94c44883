"""Reference implementations written the usual torch way: the baselines the
compiled kernels are measured against (benchmarks and `dlmsvdd bench`)."""

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
