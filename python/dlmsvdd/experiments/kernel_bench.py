"""A short kernel benchmark: the compiled RBF kernel-vector product against the
torch baseline, interleaved in one process so machine noise hits both alike."""

from __future__ import annotations

import statistics
import time

import torch

from dlmsvdd_ext import ops, reference


def unit_rows(n: int, d: int, seed: int) -> torch.Tensor:
    """n random points on the unit sphere in R^d, like L2-normalised CNN features."""
    g = torch.Generator().manual_seed(seed)
    return torch.nn.functional.normalize(torch.randn(n, d, generator=g), dim=1)


def time_interleaved(fns: dict, rounds: int, settle: float = 0.0, warm: bool = False) -> dict[str, float]:
    """Median seconds per call of each function, calling them in turn each round.

    ``settle`` seconds of sleep before each call let the previous library's
    idle threads go to sleep: OpenBLAS's spin for ~0.1 s after a call (its
    THREAD_TIMEOUT) and would take one of the cores from whatever runs next
    (on 2 cores that halved the speed of the maps timed after scikit-learn).
    ``warm`` calls each function once, untimed, just before its timed call:
    in this VM the first large allocation after another library has freed a
    few hundred MB is slow (a 20 ms map took 40-50 ms), and that belongs to
    the memory's history, not to the function.
    """
    times: dict[str, list[float]] = {name: [] for name in fns}
    for _ in range(rounds):
        for name, fn in fns.items():
            if settle:
                time.sleep(settle)
            if warm:
                fn()
            t0 = time.perf_counter()
            fn()
            times[name].append(time.perf_counter() - t0)
    return {name: statistics.median(t) for name, t in times.items()}


def matvec_comparison(n: int, d: int, rounds: int = 3, seed: int = 0) -> dict[str, float]:
    """Seconds for K(X, Y) v and K(X, X) v, ours and torch's, and the speed-ups."""
    X, Y = unit_rows(n, d, seed), unit_rows(n, d, seed + 1)
    v = torch.randn(n, generator=torch.Generator().manual_seed(seed + 2))
    gamma = 1.0
    t = time_interleaved({
        "ours_xy": lambda: ops.rbf_matvec(X, Y, v, gamma),
        "torch_xy": lambda: reference.rbf_matvec(X, Y, v, gamma),
        "ours_xx": lambda: ops.rbf_matvec(X, None, v, gamma),
        "torch_xx": lambda: reference.rbf_matvec(X, X, v, gamma),
    }, rounds)
    t["speedup_xy"] = t["torch_xy"] / t["ours_xy"]
    t["speedup_xx"] = t["torch_xx"] / t["ours_xx"]
    return t


def run(sizes: list[tuple[int, int]], rounds: int = 3, echo=print) -> list[dict]:
    echo(f"dlmsvdd_ext CPU kernels ({ops.cpu_isa()}, {torch.get_num_threads()} threads) "
         f"vs torch {torch.__version__}: rbf_matvec, median of {rounds} interleaved rounds")
    echo(f"{'N':>7} {'d':>6} | {'ours X!=Y':>10} {'torch':>8} {'speed-up':>8} | {'ours Y=X':>9} {'torch':>8} {'speed-up':>8}")
    rows = []
    for n, d in sizes:
        t = matvec_comparison(n, d, rounds)
        echo(f"{n:>7} {d:>6} | {t['ours_xy']:>9.3f}s {t['torch_xy']:>7.3f}s {t['speedup_xy']:>7.2f}x | "
             f"{t['ours_xx']:>8.3f}s {t['torch_xx']:>7.3f}s {t['speedup_xx']:>7.2f}x")
        rows.append({"n": n, "d": d, **t})
    return rows
