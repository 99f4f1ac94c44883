"""Benchmark studies on scikit-learn's bundled digits, one-vs-rest: the detectors on raw
pixels, and DLM-SVDD (joint and fixed CNN) beside them on the same tasks."""

from __future__ import annotations

import time

import numpy as np
from sklearn.svm import OneClassSVM

from dlmsvdd_ext import LpSVDD, ops

from dlmsvdd import DLMSVDD, TrainConfig, datasets, metrics, tasks
from dlmsvdd.data.tasks import pixels




def digits_task(normal_class: int, ratio: float = 0.5, seed: int = 0):
    """The trainer's digits task as raw pixels: X_train, y_train (+1/-1), X_test, is_anomaly_test."""
    task = tasks.make_task(datasets.digits(), normal_class, ratio=ratio, seed=seed)
    X_train, y_train = pixels(task.train)
    X_test, t_test = pixels(task.test)
    return X_train, y_train, X_test, t_test < 0


def digits_lpsvdd_study(ratio: float = 0.5, seed: int = 0) -> dict:
    """Mean test AUROC over the 10 classes: LpSVDD at its certified optimum, LpSVDD
    stopped where the paper stops (1000 vanilla Frank-Wolfe iterations), and
    OneClassSVM (libsvm, normal samples only) with the same gamma."""
    from sklearn.metrics import roc_auc_score

    rows = []
    for c in range(10):
        X_tr, y_tr, X_te, anomalous = digits_task(c, ratio, seed)
        gamma = 1.0 / ops.median_sq_distance(X_tr, seed=seed)
        optimum = LpSVDD(gamma=gamma, tol=1e-6).fit(X_tr, y_tr)
        paper = LpSVDD(gamma=gamma, solver="paper", max_iter=1000, tol=0.0).fit(X_tr, y_tr)
        ocsvm = OneClassSVM(gamma=gamma).fit(X_tr[y_tr > 0])
        rows.append({
            "class": c,
            "lpsvdd_optimum": roc_auc_score(anomalous, optimum.dissimilarity(X_te)),
            "lpsvdd_paper_fw": roc_auc_score(anomalous, paper.dissimilarity(X_te)),
            "ocsvm": roc_auc_score(anomalous, -ocsvm.score_samples(X_te)),
            "paper_fw_rel_gap": paper.gap_ / paper.objective_,
            "paper_fw_above_optimum": (paper.objective_ - optimum.objective_) / optimum.objective_,
        })
    mean = {k: float(np.mean([r[k] for r in rows])) for k in rows[0] if k != "class"}
    return {"per_class": rows, "mean": mean}


DIGITS_CNN = dict(data="digits", backbone="small_cnn", weights=None, epochs=30, lr=1e-3, batch_size=64, verbose=0)


def digits_method_row(normal_class: int, ratio: float, seed: int, **config) -> dict:
    """Test AUROC of the four detectors on one task, and DLM-SVDD's seconds per
    epoch in the feature pass, alpha-step and omega-step."""
    task = tasks.make_task(datasets.digits(), normal_class, ratio=ratio, seed=seed)
    X_tr, y_tr = pixels(task.train)
    X_te, t_te = pixels(task.test)
    row = {"class": normal_class, "ratio": ratio, "seed": seed}
    for name, frozen in (("dlmsvdd_joint", False), ("dlmsvdd_fixed_cnn", True)):
        start = time.perf_counter()
        model = DLMSVDD(TrainConfig(**{**DIGITS_CNN, **config, "frozen": frozen, "seed": seed}))
        model.fit(task.train, task.val)
        row[name] = model.evaluate(task.test)["auroc"]
        row[f"{name}_seconds"] = time.perf_counter() - start
        if not frozen:
            for step in ("features", "alpha", "omega"):
                row[f"seconds_{step}"] = float(np.mean([h[f"seconds_{step}"] for h in model.history_
                                                        if f"seconds_{step}" in h]))
    lpsvdd = LpSVDD(random_state=seed).fit(X_tr, y_tr)
    row["lpsvdd_pixels"] = metrics.auroc(t_te, lpsvdd.dissimilarity(X_te))
    ocsvm = OneClassSVM(gamma=lpsvdd.gamma_).fit(X_tr[y_tr > 0])
    row["ocsvm_pixels"] = metrics.auroc(t_te, -ocsvm.score_samples(X_te))
    return row


METHODS = ("dlmsvdd_joint", "dlmsvdd_fixed_cnn", "lpsvdd_pixels", "ocsvm_pixels")


def digits_method_table(ratios=(0.1, 0.5, 0.75), seeds=(0, 1, 2), classes=range(10), **config) -> dict:
    """Mean test AUROC over the classes per ratio and method: mean and std over seeds."""
    rows = [digits_method_row(c, r, s, **config) for r in ratios for s in seeds for c in classes]
    table = {}
    for r in ratios:
        per_seed = {m: [np.mean([x[m] for x in rows if x["ratio"] == r and x["seed"] == s]) for s in seeds]
                    for m in METHODS}
        table[r] = {m: (float(np.mean(v)), float(np.std(v))) for m, v in per_seed.items()}
    timing = {k: float(np.mean([x[k] for x in rows])) for k in ("seconds_features", "seconds_alpha", "seconds_omega")}
    return {"rows": rows, "table": table, "timing": timing}
