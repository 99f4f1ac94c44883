"""The kernel matrix as the solver sees it, under a memory budget.

* ``DenseKernel``: K materialised (the fused Gram kernel, symmetric tiles once).
* ``RbfOnTheFly``: K never stored; products by the fused ``rbf_matvec``, columns
  for Frank-Wolfe computed on demand and kept in an LRU cache.
* ``LowRankKernel``: a factor ``Z`` with ``K ~ Z Z^T``; products in O(N m).

``exact_rbf_operator`` picks the first or the second from the budget, as
libsvm's ``cache_size`` does.
"""

from __future__ import annotations

import torch

from . import ops


class KernelOperator:
    """K (n x n): products, the columns source for compiled Frank-Wolfe, and a bound on its top eigenvalue."""

    n: int
    dtype: torch.dtype
    device: torch.device
    nbytes: int = 0  # memory held beyond the inputs

    def matvec(self, v: torch.Tensor) -> torch.Tensor:
        raise NotImplementedError

    def fw_source(self) -> dict:
        """Keyword arguments for ``ops.fw_solve``: source, matrix, gamma, cache_slots."""
        raise NotImplementedError

    def lambda_max_bound(self) -> float:
        """An upper bound on the largest eigenvalue of K (for the gradient's Lipschitz constant)."""
        raise NotImplementedError


class DenseKernel(KernelOperator):
    def __init__(self, K: torch.Tensor):
        if K.ndim != 2 or K.shape[0] != K.shape[1]:
            raise ValueError(f"K must be square, got shape {tuple(K.shape)}")
        self.K = K
        self.n, self.dtype, self.device = K.shape[0], K.dtype, K.device
        self.nbytes = K.numel() * K.element_size()

    def matvec(self, v):
        return self.K @ v

    def fw_source(self):
        return {"source": "dense", "matrix": self.K}

    def lambda_max_bound(self):
        # Gershgorin: the largest absolute row sum, in blocks of rows small
        # beside K (the alpha-step's peak memory is K itself).
        return max(float(self.K[i:i + 64].abs().sum(1).max()) for i in range(0, self.n, 64))


class RbfOnTheFly(KernelOperator):
    def __init__(self, X: torch.Tensor, gamma: float, cache_bytes: int):
        self.X, self.gamma = X, float(gamma)
        self.n, self.dtype, self.device = X.shape[0], X.dtype, X.device
        column_bytes = self.n * X.element_size()
        self.cache_slots = max(2, int(cache_bytes // column_bytes))
        self.nbytes = self.cache_slots * column_bytes

    def matvec(self, v):
        return ops.rbf_matvec(self.X, None, v, self.gamma)

    def fw_source(self):
        return {"source": "features", "matrix": self.X, "gamma": self.gamma, "cache_slots": self.cache_slots}

    def lambda_max_bound(self):
        # RBF entries are positive, so the largest row sum is K @ 1's maximum.
        return float(self.matvec(torch.ones(self.n, dtype=self.dtype, device=self.device)).max())


class LowRankKernel(KernelOperator):
    def __init__(self, Z: torch.Tensor, cache_bytes: int = 64 << 20):
        if Z.ndim != 2:
            raise ValueError(f"Z must be 2-D (n, m), got shape {tuple(Z.shape)}")
        self.Z = Z.contiguous()
        self.n, self.dtype, self.device = Z.shape[0], Z.dtype, Z.device
        column_bytes = self.n * Z.element_size()
        self.cache_slots = max(2, int(cache_bytes // column_bytes))
        self.nbytes = self.cache_slots * column_bytes

    def matvec(self, v):
        return self.Z @ (self.Z.T @ v)

    def fw_source(self):
        return {"source": "factor", "matrix": self.Z, "cache_slots": self.cache_slots}

    def lambda_max_bound(self):
        # ||Z||_2^2 <= ||Z||_F^2 is loose; a few power iterations on Z^T Z
        # with a safety factor are tight, and the solver backtracks anyway.
        m = self.Z.shape[1]
        g = torch.Generator(device="cpu").manual_seed(0)
        # In Z's own dtype: a float64 copy of Z would double the alpha-step's memory.
        u = torch.randn(m, generator=g, dtype=torch.float64).to(self.device, self.dtype)
        est = 0.0
        for _ in range(30):
            w = self.Z.T @ (self.Z @ u)
            est = float(w.double().norm())
            if est == 0.0:
                return 0.0
            u = w / est
        return 1.1 * est


def exact_rbf_operator(X: torch.Tensor, gamma: float, cache_size_mb: float = 1024) -> KernelOperator:
    """The exact RBF kernel of the rows of X: materialised when n^2 entries fit
    the budget (in X's dtype), otherwise computed on the fly with an LRU cache
    of columns filling the budget."""
    budget = int(cache_size_mb * 2**20)
    n = X.shape[0]
    if n * n * X.element_size() <= budget:
        return DenseKernel(ops.rbf_gram(X, None, gamma))
    return RbfOnTheFly(X, gamma, budget)
