"""``kernel="auto"``: which kernel a fit of n rows uses, and what an exact kernel would cost.

Why (issue 35): the exact kernel is the reference (no approximation error, a certificate on the
problem as posed) and is fast while its n x n matrix is small; its cost grows as n^2 (at 433,528
rows the float32 matrix alone is 750 GB, so every solver iteration recomputes it: hours). Above
``EXACT_MAX_ROWS`` rows "auto" takes Nystrom at ``AUTO_COMPONENTS`` landmarks, the paper's
recommendation for CIFAR-10-scale problems (Nystrom or RPCholesky at m <= 256), O(n m) per
iteration. Both numbers were chosen from measured fit times and test AUROCs of the exact kernel
and Nystrom on subsamples of the two big tables (docs/results/big-tables.md).

A kernel set by name is kept whatever n is; an exact kernel on a size that makes the fit long is
said up front (``warn_if_slow``), with the estimate and the option that avoids it.
"""

from __future__ import annotations

import functools
import time
import warnings

import torch

from . import ops
from .kernel_operator import cache_bytes

AUTO = "auto"
EXACT_MAX_ROWS = 10_000  # "auto" keeps the exact kernel up to this many training rows
AUTO_APPROXIMATION = "nystrom"
AUTO_COMPONENTS = 256  # "auto"'s largest budget m (a smaller n_components is kept)
# The solver's kernel products an exact fit is expected to take (APG from its uniform start on the
# development sets: tens to a few hundred; the estimate takes this many, so it errs low).
EXPECTED_PRODUCTS = 30
SLOW_FIT_SECONDS = 60.0  # an exact fit estimated longer than this is said up front
PROGRESS_SECONDS = 5.0  # an exact fit estimated longer than this shows its solver's progress
# ... and an approximation's whose factor has this many entries (n x m): 700,000 x 256 (1.8e8) fitted
# in 3.9 s on 2 threads (docs/results/big-tables.md)
PROGRESS_FACTOR_ENTRIES = 2.5e8
_PROBE_ROWS = 2048  # the rows of the product timed to estimate this machine's rate


class SlowFitWarning(UserWarning):
    """The chosen kernel makes this fit long: the warning gives the estimate and what avoids it."""


def choose(kernel: str, n_components: int, n: int) -> tuple[str, int]:
    """The kernel and budget a fit of ``n`` rows uses: ``kernel`` and ``n_components`` as given,
    or for "auto" the exact kernel up to ``EXACT_MAX_ROWS`` rows and Nystrom at
    ``min(n_components, AUTO_COMPONENTS)`` landmarks above."""
    if kernel != AUTO:
        return kernel, n_components
    if n <= EXACT_MAX_ROWS:
        return "exact", n_components
    return AUTO_APPROXIMATION, min(n_components, AUTO_COMPONENTS)


def describe(chosen: str, m: int, n: int) -> str:
    """One line for the log: what "auto" chose (``chosen``, with budget ``m``) for n rows, and why."""
    if chosen == "exact":
        return f"kernel 'auto': exact for {n:,} training rows (exact up to {EXACT_MAX_ROWS:,})"
    return (f"kernel 'auto': {chosen} with m = {m} for {n:,} training rows (the exact kernel's n^2 cost "
            f"above {EXACT_MAX_ROWS:,}; kernel='exact' forces it)")


@functools.lru_cache(maxsize=8)
def _seconds_per_entry(d: int, dtype: torch.dtype, device: str) -> float:
    """Seconds per kernel entry of a fused product on this machine (one timed product of
    _PROBE_ROWS^2 entries, after a warm-up; cached per width, dtype and device)."""
    generator = torch.Generator().manual_seed(0)
    X = torch.rand(_PROBE_ROWS, d, generator=generator, dtype=dtype).to(device)
    v = torch.ones(_PROBE_ROWS, dtype=dtype, device=device)
    ops.rbf_matvec(X[:64], X, v, 1.0)  # warm-up: threads, caches
    if X.is_cuda:
        torch.cuda.synchronize(X.device)
    start = time.perf_counter()
    ops.rbf_matvec(X, X, v, 1.0)
    if X.is_cuda:
        torch.cuda.synchronize(X.device)
    return (time.perf_counter() - start) / _PROBE_ROWS**2


def exact_cost(n: int, d: int, dtype: torch.dtype, device, cache_size="auto") -> dict:
    """The estimated seconds of an exact-kernel fit of ``n`` rows of width ``d``.

    Returns
    -------
    dict
        ``seconds`` (the estimate), ``matrix_bytes`` (the kernel matrix in ``dtype``),
        ``materialised`` (whether that fits the cache budget: then one product builds it and
        the solver's products are plain matrix-vector ones) and ``product_seconds`` (one
        kernel product computed from the features).
    """
    device = torch.device(device)
    entries = float(n) * n
    product = entries * _seconds_per_entry(d, dtype, str(device))
    matrix_bytes = int(entries * torch.finfo(dtype).bits // 8)
    materialised = matrix_bytes <= cache_bytes(cache_size, device)
    # a materialised matrix: one product's work to build, then reading n^2 entries per product
    # (memory-bound: about a tenth of the fused product's time, conservatively)
    seconds = product * (1.0 + 0.1 * EXPECTED_PRODUCTS) if materialised else product * EXPECTED_PRODUCTS
    return {"seconds": seconds, "matrix_bytes": matrix_bytes, "materialised": materialised,
            "product_seconds": product}


def shows_progress(exact_estimate: float | None, n: int, n_components: int, exact: bool) -> bool:
    """Whether a fit shows a bar of its solver's kernel products: an exact kernel estimated longer
    than ``PROGRESS_SECONDS`` (``exact_estimate``), or a factor of ``PROGRESS_FACTOR_ENTRIES``
    entries or more."""
    if exact:
        return exact_estimate is not None and exact_estimate > PROGRESS_SECONDS
    return float(n) * n_components >= PROGRESS_FACTOR_ENTRIES


def _duration(seconds: float) -> str:
    if seconds < 120:
        return f"{seconds:.0f} s"
    if seconds < 7200:
        return f"{seconds / 60:.0f} minutes"
    return f"{seconds / 3600:.1f} hours"


def warn_if_slow(n: int, d: int, dtype: torch.dtype, device, cache_size="auto", stacklevel: int = 3) -> float | None:
    """Warn (``SlowFitWarning``) before an exact-kernel fit estimated longer than
    ``SLOW_FIT_SECONDS``; the estimate in seconds (None below ``EXACT_MAX_ROWS`` rows, where
    it is not worth timing)."""
    if n <= EXACT_MAX_ROWS:
        return None
    cost = exact_cost(n, d, dtype, device, cache_size)
    if cost["seconds"] > SLOW_FIT_SECONDS:
        where = ("held in memory" if cost["materialised"] else
                 "too large to hold, so every solver iteration recomputes it")
        warnings.warn(
            f"kernel='exact' on {n:,} rows: the kernel matrix is {cost['matrix_bytes'] / 1e9:,.1f} GB ({where}); "
            f"one kernel product takes about {_duration(cost['product_seconds'])} here and the solver needs tens "
            f"to hundreds: about {_duration(cost['seconds'])} or more. kernel='auto' (Nystrom at m = "
            f"{AUTO_COMPONENTS} above {EXACT_MAX_ROWS:,} rows) or kernel='nystrom' fits in seconds",
            SlowFitWarning, stacklevel=stacklevel)
    return cost["seconds"]
