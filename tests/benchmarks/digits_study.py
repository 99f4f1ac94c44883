"""Benchmark studies on scikit-learn's bundled digits, one-vs-rest: the detectors on raw
pixels, and DLM-SVDD (its default, the paper's recipe, the fixed CNN) beside them on
the same tasks."""

from __future__ import annotations

import time

import numpy as np
from sklearn.linear_model import LogisticRegression
from sklearn.svm import SVC, OneClassSVM

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


# DLM-SVDD as a user gets it for the small CNN from scratch (every other field at its
# default), and the variants the table puts beside it.
DIGITS_CNN = dict(data="digits", backbone="small_cnn", weights=None, verbose=0)
DLMSVDD_VARIANTS = {
    "dlmsvdd": {},  # the default: the "scratch" recipe
    "dlmsvdd_autoencoder": {"pretrain": "autoencoder"},  # the scratch recipe with an autoencoder first
    "dlmsvdd_no_step0": {"pretrain": "none"},  # ablations of the default: without the BatchNorm statistics,
    "dlmsvdd_best_epoch": {"selection_rule": "best"},  # with the paper's best-epoch selection,
    "dlmsvdd_one_branch": {"cnn_branches": 1},  # and with one CNN branch, the default before (test_bench_training_noise.py)
    "dlmsvdd_paper": {"recipe": "paper"},  # the paper's recipe: no step 0, lr 1e-4, batch 128, best epoch
    "dlmsvdd_old_demo": {"recipe": "paper", "lr": 1e-3, "batch_size": 64},  # `dlmsvdd demo` before issue 16
    "dlmsvdd_frozen": {"frozen": True},  # the default's starting CNN, fixed: the boundary alone
}
PIXEL_METHODS = ("lpsvdd_pixels", "ocsvm_pixels", "svc_pixels", "logreg_pixels")
METHODS = (*DLMSVDD_VARIANTS, *PIXEL_METHODS)
LABELS = {"dlmsvdd": "DLM-SVDD (default)", "dlmsvdd_autoencoder": "DLM-SVDD (default + autoencoder)",
          "dlmsvdd_no_step0": "DLM-SVDD (default without step 0)",
          "dlmsvdd_best_epoch": "DLM-SVDD (default, best validation epoch)",
          "dlmsvdd_one_branch": "DLM-SVDD (default, one CNN branch)", "dlmsvdd_paper": "DLM-SVDD (paper recipe)",
          "dlmsvdd_old_demo": "DLM-SVDD (old demo: paper, lr 1e-3, batch 64)",
          "dlmsvdd_frozen": "DLM-SVDD, CNN frozen (default's start)", "lpsvdd_pixels": "LpSVDD on pixels",
          "ocsvm_pixels": "OneClassSVM on pixels (normals only)", "svc_pixels": "RBF SVC on pixels (sklearn)",
          "logreg_pixels": "logistic regression on pixels (sklearn)"}


def _timed(fit):
    start = time.perf_counter()
    scores = fit()
    return scores, time.perf_counter() - start


def pixel_scores(X_tr, y_tr, X_te, seed: int) -> dict:
    """Dissimilarities (higher = more anomalous) on the test pixels and fit seconds of the
    raw-pixel detectors, all on the same training images and labels: LpSVDD and OneClassSVM
    (normals only, the same gamma) at the median bandwidth, scikit-learn's RBF SVC and
    logistic regression (defaults) on labelled normals vs anomalies."""
    def lpsvdd():
        # the configuration issue 16's table measured: the defaults before issue 28 (nu 1.2, the median)
        model = LpSVDD(nu=1.2, gamma="median", random_state=seed).fit(X_tr, y_tr)
        return model.dissimilarity(X_te), model.gamma_

    (f, gamma), seconds = _timed(lpsvdd)
    out = {"lpsvdd_pixels": (f, seconds)}
    out["ocsvm_pixels"] = _timed(lambda: -OneClassSVM(gamma=gamma).fit(X_tr[y_tr > 0]).score_samples(X_te))
    out["svc_pixels"] = _timed(lambda: -SVC().fit(X_tr, y_tr).decision_function(X_te))
    out["logreg_pixels"] = _timed(lambda: -LogisticRegression(max_iter=1000).fit(X_tr, y_tr).decision_function(X_te))
    return out


def digits_method_row(normal_class: int, ratio: float, seed: int, methods=METHODS) -> dict:
    """Test AUROC and fit seconds of each method on one task (DLM-SVDD's include
    pretraining and the final refit), and the epoch each DLM-SVDD variant kept ("<name>@epoch")."""
    task = tasks.make_task(datasets.digits(), normal_class, ratio=ratio, seed=seed)
    X_tr, y_tr = pixels(task.train)
    X_te, t_te = pixels(task.test)
    row = {"class": normal_class, "ratio": ratio, "seed": seed}
    for name in (m for m in methods if m in DLMSVDD_VARIANTS):
        config = TrainConfig(**{**DIGITS_CNN, **DLMSVDD_VARIANTS[name], "normal_class": normal_class,
                                "ratio": ratio, "seed": seed})
        model, row[f"{name}_seconds"] = _timed(lambda: DLMSVDD(config).fit(task.train, task.val))
        row[name] = model.evaluate(task.test)["auroc"]
        row[f"{name}@epoch"] = model.best_epoch_
    for name, (f, seconds) in pixel_scores(X_tr, y_tr, X_te, seed).items():
        if name in methods:
            row[name], row[f"{name}_seconds"] = metrics.auroc(t_te, f), seconds
    return row


def digits_method_table(ratios=(0.1, 0.5, 0.75), seeds=(0, 1, 2), classes=range(10), methods=METHODS) -> dict:
    """Per ratio and method: the mean test AUROC over the classes, its mean and std over
    the seeds, and the mean fit seconds."""
    rows = [digits_method_row(c, r, s, methods) for r in ratios for s in seeds for c in classes]
    table = {}
    for r in ratios:
        at = [x for x in rows if x["ratio"] == r]
        table[r] = {}
        for m in methods:
            per_seed = [np.mean([x[m] for x in at if x["seed"] == s]) for s in seeds]
            table[r][m] = {"mean": float(np.mean(per_seed)), "std": float(np.std(per_seed)),
                           "seconds": float(np.mean([x[f"{m}_seconds"] for x in at]))}
    return {"rows": rows, "table": table}


def markdown_table(table: dict, methods=METHODS) -> str:
    """The table as the documentation shows it (docs/results/digits.md): a row per method, a column per ratio
    (mean +- std over seeds), the mean fit seconds over all tasks."""
    ratios = list(table)
    lines = ["| method | " + " | ".join(f"ratio {r}" for r in ratios) + " | fit seconds |",
             "|---" * (len(ratios) + 2) + "|"]
    for m in methods:
        cells = [f"{table[r][m]['mean']:.4f} ± {table[r][m]['std']:.4f}" for r in ratios]
        seconds = np.mean([table[r][m]["seconds"] for r in ratios])
        lines.append(f"| {LABELS[m]} | " + " | ".join(cells) + f" | {seconds:.2f} |")
    return "\n".join(lines)


def development_source(seed: int = 100, full=None, fit_per_class: int | None = None):
    """A source's training pool alone (digits' by default), split again (stratified, 30% held out as
    the test pool): a protocol to choose settings on that never reads the source's test pool.
    ``fit_per_class``: keep at most that many training images of each class (``capped``)."""
    from dlmsvdd.data.sources import Source, TensorImages, _split_pool

    full = datasets.digits() if full is None else full
    images, labels = pool_arrays(full)
    train, held_out = _split_pool(labels, 0.3, seed)
    source = Source(full.name, TensorImages(images[train], labels[train]),
                    TensorImages(images[held_out], labels[held_out]), labels[train], labels[held_out], full.classes,
                    channels=full.channels, image_size=full.image_size, stats=full.stats)
    return source if fit_per_class is None else capped(source, fit_per_class, seed)


def pool_arrays(source, pool: str = "train"):
    """A source's training (or test) pool as one tensor of images and their labels."""
    from dlmsvdd.data.sources import TensorImages, array_pool

    images, labels = getattr(source, pool), getattr(source, f"{pool}_labels")
    if isinstance(images, TensorImages):
        return images.images, labels
    if hasattr(images, "data"):  # torchvision's pools: their pixels as one array
        return array_pool(np.asarray(images.data), labels, source.name)[0], labels
    raise ValueError(f"{source.name}: its {pool} pool is not one array of images")


def capped(source, fit_per_class: int, seed: int = 100):
    """The source with at most ``fit_per_class`` training images of each class (a seeded draw) and
    its test pool as it is: a fit on a few hundred images of a class, as users with a small sample
    hold them."""
    from dlmsvdd.data.sources import Source, TensorImages

    images, labels = pool_arrays(source)
    rng = np.random.default_rng(seed)
    keep = np.sort(np.concatenate([rng.permutation(np.flatnonzero(labels == c))[:fit_per_class]
                                   for c in np.unique(labels)]))
    test = TensorImages(*pool_arrays(source, "test"))  # one pipeline for both pools: the tensor one
    return Source(source.name, TensorImages(images[keep], labels[keep]), test, labels[keep],
                  source.test_labels, source.classes, channels=source.channels, image_size=source.image_size,
                  stats=source.stats)


def training_noise_study(variants: dict, inits=(0, 1, 2, 3), ratios=(0.1, 0.5, 0.75), classes=range(10)) -> dict:
    """How much of DLM-SVDD's seed spread is its own training's, per variant of the default
    (``variants``: name -> TrainConfig fields over ``DIGITS_CNN``): on the development
    protocol, each task's split fixed (seed 0) and only the network's seed varied. Per
    ratio and variant: the mean held-out AUROC, the standard deviation over the network
    seeds of the mean over classes, the per-task standard deviation (root mean over tasks
    of the variance over seeds) and the mean fit seconds."""
    source = development_source()
    out = {}
    for ratio in ratios:
        for name, fields in variants.items():
            auroc = np.empty((len(classes), len(inits)))
            seconds = []
            for i, c in enumerate(classes):
                task = tasks.make_task(source, c, ratio=ratio, seed=0)
                for j, seed in enumerate(inits):
                    config = TrainConfig(**{**DIGITS_CNN, **fields, "normal_class": c, "ratio": ratio, "seed": seed})
                    model, s = _timed(lambda: DLMSVDD(config).fit(task.train, task.val))
                    auroc[i, j] = model.evaluate(task.test)["auroc"]
                    seconds.append(s)
            out[(ratio, name)] = {"mean": float(auroc.mean()), "seed_std": float(np.std(auroc.mean(0))),
                                  "task_std": float(np.sqrt(np.mean(np.var(auroc, axis=1, ddof=1)))),
                                  "seconds": float(np.mean(seconds))}
    return out
