"""Iterations with labelled anomalies against the one-class fit on the same
rows (issue 25), on the adbench-dev sets (../shared/data/adbench-dev beside
the repository; skipped without them) under ADBench's protocol
(``adbench_protocol``), la in {0.05, 0.25}, seed 0, one thread, the default
``LpSVDD()`` (exact kernel, APG, tol 1e-6). The goal: median ratio <= 2.
Run:
    pytest tests/benchmarks/test_bench_labelled_iterations.py -o addopts="" --benchmark-only -s
"""

import json
import statistics
import time

import numpy as np
import pytest
import torch

from benchmarks.adbench_protocol import DATA_DIR, LABELLED_FRACTIONS, available_sets, load, make_task
from dlmsvdd_ext import LpSVDD


pytestmark = pytest.mark.skipif(not available_sets(), reason=f"no adbench-dev data sets in {DATA_DIR}")


def _fit(X, t=None):
    start = time.perf_counter()
    model = LpSVDD(random_state=0).fit(X, t)
    assert model.converged_, model  # the same certificate in both fits
    return model.n_iter_, time.perf_counter() - start


def _study():
    rows = []
    for name in available_sets():
        for la in LABELLED_FRACTIONS:
            task = make_task(*load(name), seed=0, la=la, name=name)  # the training rows of the protocol's split
            X, t = task.X_train, np.where(task.labelled, -1.0, 1.0)
            one_class, one_class_s = _fit(X)
            labelled, labelled_s = _fit(X, t)
            rows.append({"set": name, "la": la, "n": X.shape[0], "labelled": int((t < 0).sum()),
                         "iter_one_class": one_class, "iter_labelled": labelled,
                         "ratio": labelled / one_class, "s_one_class": round(one_class_s, 3),
                         "s_labelled": round(labelled_s, 3)})
            print(json.dumps(rows[-1]), flush=True)
    return rows


def test_labelled_anomalies_within_twice_the_one_class_iterations(benchmark):
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        rows = benchmark.pedantic(_study, rounds=1)
    finally:
        torch.set_num_threads(threads)
    summary = {}
    for la in LABELLED_FRACTIONS:
        ratios = [r["ratio"] for r in rows if r["la"] == la]
        summary[f"la={la}"] = {"median_ratio": statistics.median(ratios), "max_ratio": max(ratios),
                               "max_iter_labelled": max(r["iter_labelled"] for r in rows if r["la"] == la)}
    benchmark.extra_info.update(summary)
    print("\nset                  la    n     labelled  one-class  labelled  ratio")
    for r in rows:
        print(f"{r['set']:<20} {r['la']:<5} {r['n']:<5} {r['labelled']:<9} {r['iter_one_class']:<10} "
              f"{r['iter_labelled']:<9} {r['ratio']:.2f}")
    print(json.dumps(summary, indent=1))
    assert all(s["median_ratio"] <= 2 for s in summary.values())
