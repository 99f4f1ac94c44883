"""The alpha-step at the paper's scale (``benchmarks.paper_rule``: 6000
clustered 2048-d float32 features, exact RBF kernel), against the paper's way
of solving it. Run:
    pytest tests/benchmarks/test_bench_solver.py -o addopts="" --benchmark-only -s
"""

import json
import statistics
import subprocess
import sys
import time

import pytest
from sklearn.svm import OneClassSVM

from benchmarks import paper_rule
from benchmarks.paper_rule import N_ANOMALY, N_NORMAL, D
from dlmsvdd_ext import LpSVDD


@pytest.fixture(scope="module")
def data():
    return paper_rule.data()


def test_alpha_step_against_the_paper_way(benchmark, data):
    X, t, gamma = data
    rounds = 2
    times = {"apg": [], "pairwise": []}
    rule = paper_rule.paper_rule_against_reference(X, t, gamma, rounds)
    for _ in range(rounds):
        s, apg = paper_rule.ours(X, t, gamma, "apg", tol=1e-6)
        times["apg"].append(s)
        s, pairwise = paper_rule.ours(X, t, gamma, "pairwise", max_iter=200000, tol=1e-6)
        times["pairwise"].append(s)
    med = {"reference": rule["reference_s"], "paper": rule["paper_s"],
           **{k: statistics.median(v) for k, v in times.items()}}
    _, optimum = paper_rule.ours(X, t, gamma, "apg", tol=1e-9)
    f_opt = optimum.objective
    f_ref = rule["reference_objective"]
    paper = rule["paper"]
    report = {
        "seconds": med,
        "speedup_paper_vs_reference": rule["ratio"],
        "speedup_apg_vs_reference": med["reference"] / med["apg"],
        "speedup_pairwise_vs_reference": med["reference"] / med["pairwise"],
        "paper_vs_reference_objective_rel": rule["objective_rel"],
        "reference_above_optimum_rel": (f_ref - f_opt) / f_opt,
        "iterations": {"paper": paper.n_iter, "apg": apg.n_iter, "pairwise": pairwise.n_iter},
        "apg_kernel_products": apg.n_matvec,
        "apg_rel_gap": apg.gap / apg.objective,
        "pairwise_rel_gap": pairwise.gap / pairwise.objective,
    }
    benchmark.extra_info.update(report)
    print("\n" + json.dumps(report, indent=1))
    assert apg.converged and pairwise.converged
    assert report["paper_vs_reference_objective_rel"] <= 1e-3
    benchmark.pedantic(lambda: None, rounds=1)


_MEMORY_SCRIPT = """
import resource, sys, torch
from benchmarks.features import clustered_features
from dlmsvdd_ext.dual import DualProblem
from dlmsvdd_ext.kernel_operator import exact_rbf_operator
from dlmsvdd_ext.solver import solve
X, t = clustered_features({n}, {m}, {d}, seed=0)
gamma = float(sys.argv[2])
# Resident now (not the high-water mark, which still holds the data generator's temporaries).
before = next(int(line.split()[1]) for line in open("/proc/self/status") if line.startswith("VmRSS:"))
if sys.argv[1] == "reference":
    baselines.paper_frank_wolfe(X, t, gamma, iterations=1000)
else:
    solve(exact_rbf_operator(X, gamma, 1024), DualProblem.from_labels(t), method=sys.argv[1], max_iter=1000, tol=1e-6)
print((resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) / 1024)
"""


def test_alpha_step_peak_memory(benchmark, data):
    """Peak resident memory each method adds to its input, each in a fresh process (MB)."""
    _, _, gamma = data
    script = _MEMORY_SCRIPT.format(n=N_NORMAL, m=N_ANOMALY, d=D)
    peak = {}
    for method in ("reference", "paper", "apg", "pairwise"):
        out = subprocess.run([sys.executable, "-c", script, method, repr(float(gamma))], check=True,
                             capture_output=True, text=True).stdout
        peak[method] = float(out.strip().splitlines()[-1])
    benchmark.extra_info.update({f"peak_mb_{k}": v for k, v in peak.items()})
    print("\npeak memory added (MB): " + ", ".join(f"{k} {v:.0f}" for k, v in peak.items()))
    benchmark.pedantic(lambda: None, rounds=1)


def test_lpsvdd_against_one_class_svm(benchmark, data):
    """Fit on the 4000 normal samples and score 2000 others, same gamma."""
    X, t, gamma = data
    Xn = X[t > 0].numpy()
    Xs = X[t < 0].numpy()
    t0 = time.perf_counter()
    ours = LpSVDD(nu=1.0, gamma=gamma).fit(Xn)
    fit_ours = time.perf_counter() - t0
    t0 = time.perf_counter()
    ours.score_samples(Xs)
    score_ours = time.perf_counter() - t0
    t0 = time.perf_counter()
    ocsvm = OneClassSVM(gamma=gamma).fit(Xn)
    fit_svm = time.perf_counter() - t0
    t0 = time.perf_counter()
    ocsvm.score_samples(Xs)
    score_svm = time.perf_counter() - t0
    report = {"fit_s": {"lpsvdd": fit_ours, "ocsvm": fit_svm}, "score_s": {"lpsvdd": score_ours, "ocsvm": score_svm},
              "fit_speedup": fit_svm / fit_ours, "score_speedup": score_svm / score_ours,
              "lpsvdd_iterations": ours.n_iter_}
    benchmark.extra_info.update(report)
    print("\n" + json.dumps(report, indent=1))
    benchmark.pedantic(lambda: None, rounds=1)
