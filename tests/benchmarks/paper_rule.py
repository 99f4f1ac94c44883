"""The alpha-step at the paper's scale and its paper-style reference, for the
benchmarks that time them (``test_bench_solver``, ``test_bench_solver_scale``).

N = 6000 clustered features (4000 normal + 2000 anomalous around class centres),
d = 2048, float32, L2-normalised, exact RBF kernel, gamma = 1/median, p = 2,
nu = 1.2, c = 1/n per class. The paper's rule: 1000 vanilla Frank-Wolfe
iterations; the reference: dense float64 K and the same loop in torch
(``dlmsvdd_ext.reference.paper_frank_wolfe``).
"""

import statistics
import time

from benchmarks.features import clustered_features
from dlmsvdd_ext import ops
from dlmsvdd_ext import reference as baselines
from dlmsvdd_ext.dual import DualProblem
from dlmsvdd_ext.kernel_operator import exact_rbf_operator
from dlmsvdd_ext.solver import solve

N_NORMAL, N_ANOMALY, D = 4000, 2000, 2048
ITERATIONS = 1000


def data():
    X, t = clustered_features(N_NORMAL, N_ANOMALY, D, seed=0)
    gamma = 1.0 / ops.median_sq_distance(X, max_samples=2000, seed=0)
    return X, t, gamma


def ours(X, t, gamma, method, **kw):
    """End to end: the kernel (materialised under a 1 GB budget) and the solve; (seconds, result)."""
    t0 = time.perf_counter()
    res = solve(exact_rbf_operator(X, gamma, 1024), DualProblem.from_labels(t), method=method, **kw)
    return time.perf_counter() - t0, res


def paper_rule_against_reference(X, t, gamma, rounds=2) -> dict:
    """The paper's rule, ours and the reference's, interleaved ``rounds``
    times: median seconds, the ratio and the objectives' relative difference."""
    times = {"reference": [], "paper": []}
    for _ in range(rounds):
        t0 = time.perf_counter()
        _, f_ref = baselines.paper_frank_wolfe(X, t, gamma, iterations=ITERATIONS)
        times["reference"].append(time.perf_counter() - t0)
        seconds, paper = ours(X, t, gamma, "paper", max_iter=ITERATIONS, tol=0.0)
        times["paper"].append(seconds)
    med = {k: statistics.median(v) for k, v in times.items()}
    return {"reference_s": med["reference"], "paper_s": med["paper"], "ratio": med["reference"] / med["paper"],
            "objective_rel": abs(paper.objective - f_ref) / f_ref, "reference_objective": f_ref, "paper": paper}
