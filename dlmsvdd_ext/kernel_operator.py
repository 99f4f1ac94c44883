"""The kernel matrix as the solver sees it, under a memory budget.

* ``DenseKernel``: K materialised (the fused Gram kernel, symmetric tiles once).
* ``RbfOnTheFly``: K never stored; products computed from the features, columns
  for Frank-Wolfe computed on demand and kept in an LRU cache.
* ``LowRankKernel``: a factor ``Z`` with ``K ~ Z Z^T``; products in O(N m).

``exact_rbf_operator`` picks the first or the second from the budget, as
libsvm's ``cache_size`` does; ``cache_bytes("auto")`` makes that budget a
fraction of the memory the machine (or the GPU) has free.

Products are float64 whatever the matrix's dtype: ``matvec`` takes and
returns float64 vectors and every sum over N runs in float64 (``ops.matvec64``
and ``ops.rmatvec64``: float32 storage, float64 accumulation, one read of the
matrix), so the solver's certificate is exact for the arithmetic it uses
(float32 sums over N rounded at 1e-7 of the objective, and the gap could not
fall below that). A materialised K and a factor Z stay in the dtype they were
computed in (they are the memory: a float32 Z at N = 1e6, m = 256 is 1 GB
where a float64 copy beside it took 2 GB more), and the compiled Frank-Wolfe
loop reads their float32 columns under a float64 state. The on-the-fly
kernel works on a float64 copy of X (O(N d)), so its products and columns are
float64.
"""

from __future__ import annotations

import os

import torch

from . import ops
from .validation import all_finite

POWER_ITERATIONS = 30  # at most, for the factor's lambda_max (LowRankKernel.lambda_max_bound)
POWER_TOL = 1e-3  # relative change of the estimate that ends them
CACHE_FRACTION = 0.5  # of the free memory, for cache_size="auto"


def available_memory(device: torch.device | str = "cpu") -> int:
    """Bytes this process can still allocate on ``device``: on a GPU what the
    driver reports free plus what torch's allocator holds unused; on the CPU
    ``MemAvailable`` (psutil when installed, else /proc/meminfo), capped by a
    cgroup (container) limit when there is one."""
    device = torch.device(device)
    if device.type == "cuda":
        free, _ = torch.cuda.mem_get_info(device)
        return int(free + torch.cuda.memory_reserved(device) - torch.cuda.memory_allocated(device))
    try:
        import psutil

        available = int(psutil.virtual_memory().available)
    except ImportError:
        available = _meminfo_available()
    limit = _cgroup_room()
    return available if limit is None else min(available, limit)


def _meminfo_available() -> int:
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    try:  # other POSIX systems: the free pages (an underestimate: no reclaimable cache)
        return int(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_AVPHYS_PAGES"))
    except (ValueError, OSError, AttributeError):
        return 1 << 30  # nothing to ask: the old fixed default


def _cgroup_room() -> int | None:
    """The cgroup v2 memory limit minus the current use, or None without a limit."""
    try:
        with open("/sys/fs/cgroup/memory.max") as f:
            limit = f.read().strip()
        if limit == "max":
            return None
        with open("/sys/fs/cgroup/memory.current") as f:
            return max(0, int(limit) - int(f.read().strip()))
    except (OSError, ValueError):
        return None


def cache_bytes(cache_size, device: torch.device | str = "cpu") -> int:
    """The kernel's memory budget in bytes: ``cache_size`` MB, or for "auto"
    ``CACHE_FRACTION`` of ``available_memory(device)``."""
    if cache_size == "auto":
        return int(CACHE_FRACTION * available_memory(device))
    return int(float(cache_size) * 2**20)


class KernelOperator:
    """K (n x n): float64 products, the columns source for compiled
    Frank-Wolfe, and a bound on its top eigenvalue."""

    n: int
    dtype: torch.dtype
    device: torch.device
    nbytes: int = 0  # memory held beyond the inputs

    def matvec(self, v: torch.Tensor) -> torch.Tensor:
        """K v for a float64 v, as float64, every sum in float64."""
        raise NotImplementedError

    def fw_source(self) -> dict:
        """Keyword arguments for ``ops.fw_solve``: source, matrix, gamma, cache_slots."""
        raise NotImplementedError

    def lambda_max_bound(self) -> float:
        """An upper bound on the largest eigenvalue of K (for the gradient's Lipschitz constant)."""
        raise NotImplementedError

    def diagonal(self) -> torch.Tensor:
        """K's diagonal as float64 (the trace of a principal block bounds its top
        eigenvalue: the solver's per-class step sizes)."""
        raise NotImplementedError


class DenseKernel(KernelOperator):
    def __init__(self, K: torch.Tensor):
        if K.ndim != 2 or K.shape[0] != K.shape[1]:
            raise ValueError(f"K must be square, got shape {tuple(K.shape)}")
        self.K = K
        self.n, self.dtype, self.device = K.shape[0], K.dtype, K.device
        self.nbytes = K.numel() * K.element_size()

    def matvec(self, v):
        return ops.matvec64(self.K, v.to(torch.float64))

    def fw_source(self):
        return {"source": "dense", "matrix": self.K}

    def lambda_max_bound(self):
        # Gershgorin: the largest absolute row sum, in blocks of rows small
        # beside K (the alpha-step's peak memory is K itself).
        return max(float(self.K[i:i + 64].abs().sum(1).max()) for i in range(0, self.n, 64))

    def diagonal(self):
        return self.K.diagonal().to(torch.float64)


class RbfOnTheFly(KernelOperator):
    """The exact kernel of X, never stored: products by the fused compiled
    ``rbf_matvec`` and Frank-Wolfe columns in an LRU cache, on a float64 copy
    of X (O(N d)): the kernel of the given features, computed in float64."""

    def __init__(self, X: torch.Tensor, gamma: float, cache_bytes: int):
        self.X, self.gamma = X.to(torch.float64).contiguous(), float(gamma)
        self.n, self.dtype, self.device = X.shape[0], torch.float64, X.device
        column_bytes = self.n * 8
        self.cache_slots = max(2, int(cache_bytes // column_bytes))
        self.nbytes = self.cache_slots * column_bytes + (0 if self.X is X else self.X.numel() * 8)

    def matvec(self, v):
        return ops.rbf_matvec(self.X, None, v.to(torch.float64), self.gamma)

    def fw_source(self):
        return {"source": "features", "matrix": self.X, "gamma": self.gamma, "cache_slots": self.cache_slots}

    def lambda_max_bound(self):
        # RBF entries are positive, so the largest row sum is K @ 1's maximum.
        return float(self.matvec(torch.ones(self.n, dtype=torch.float64, device=self.device)).max())

    def diagonal(self):
        return torch.ones(self.n, dtype=torch.float64, device=self.device)  # k(x, x) = 1


class LowRankKernel(KernelOperator):
    """K = Z Z^T from a factor Z (n x m) kept in its dtype: products in float64
    by two passes over it (``ops.rmatvec64`` then ``ops.matvec64``)."""

    DIAGONAL_ROWS = 8192  # rows widened to float64 at a time for the diagonal

    def __init__(self, Z: torch.Tensor, cache_bytes: int = 64 << 20):
        if Z.ndim != 2:
            raise ValueError(f"Z must be 2-D (n, m), got shape {tuple(Z.shape)}")
        if Z.dtype not in (torch.float32, torch.float64):
            raise ValueError(f"the kernel factor Z must be float32 or float64, got {Z.dtype}")
        if not all_finite(Z):
            raise ValueError("the kernel factor Z has NaN or infinite entries (gamma too large for the "
                             f"features' {Z.dtype}, or non-finite features)")
        self.Z = Z.contiguous()
        self.n, self.dtype, self.device = Z.shape[0], Z.dtype, Z.device
        column_bytes = self.n * Z.element_size()
        self.cache_slots = max(2, int(cache_bytes // column_bytes))
        self.nbytes = self.cache_slots * column_bytes + (0 if self.Z is Z else self.Z.numel() * Z.element_size())

    def matvec(self, v):
        return ops.matvec64(self.Z, ops.rmatvec64(self.Z, v.to(torch.float64)))

    def diagonal(self) -> torch.Tensor:
        """K_ii = ||Z_i||^2 in float64 (in blocks of rows: no N x m temporary)."""
        out = torch.empty(self.n, dtype=torch.float64, device=self.device)
        for i in range(0, self.n, self.DIAGONAL_ROWS):
            block = self.Z[i:i + self.DIAGONAL_ROWS].to(torch.float64)
            out[i:i + self.DIAGONAL_ROWS] = torch.einsum("ij,ij->i", block, block)
        return out

    def fw_source(self):
        return {"source": "factor", "matrix": self.Z, "cache_slots": self.cache_slots}

    def lambda_max_bound(self):
        # ||Z||_2^2 <= ||Z||_F^2 is loose; power iterations on Z^T Z (two
        # passes over Z each; forming the m x m Gram costs N m^2, about ten
        # passes at m = 256) with a safety factor are tight, and the solver
        # backtracks anyway. They stop once the estimate settles: an RBF
        # kernel's top eigenvalue stands far above the next (its near-constant
        # mode), so a handful of the 30 allowed are used, not all (issue 25:
        # 30 took 40% of a 300k-row solve).
        m = self.Z.shape[1]
        g = torch.Generator(device="cpu").manual_seed(0)
        u = torch.randn(m, generator=g, dtype=torch.float64).to(self.device)
        u /= u.norm()  # a unit start: ||Z^T Z u|| of unit vectors only grows towards lambda_max
        est = 0.0
        for _ in range(POWER_ITERATIONS):
            w = ops.rmatvec64(self.Z, ops.matvec64(self.Z, u))
            previous, est = est, float(w.norm())
            if est == 0.0:
                return 0.0
            u = w / est
            if est - previous <= POWER_TOL * est:
                break
        return 1.1 * est


def exact_rbf_operator(X: torch.Tensor, gamma: float, cache_size_mb: float | str = "auto") -> KernelOperator:
    """The exact RBF kernel of the rows of X under the budget ``cache_bytes(cache_size_mb)``:

    * materialised in X's dtype when its n^2 entries fit (float32 features
      give a float32 K, as their scores are computed in float32 too: half the
      memory of a float64 K and its Gram in half the time; the products and
      the solver state stay float64);
    * otherwise computed on the fly from a float64 copy of X, with an LRU
      cache of columns filling the budget.
    """
    budget = cache_bytes(cache_size_mb, X.device)
    n = X.shape[0]
    if n * n * X.element_size() <= budget:
        return DenseKernel(ops.rbf_gram(X, None, gamma))
    return RbfOnTheFly(X, gamma, budget)
