"""Images, one class normal, without any label (issues 38 and 50, goal 3's image row): ``DLMSVDD()``
as a user without labels runs it on images, against a k-nearest-neighbour distance and the other
detectors on the pixels, all on the same rows. Any image source ``dlmsvdd.datasets.load`` reads
runs (digits by default; Fashion-MNIST or CIFAR-10 from a data root).

A task is ``tasks.make_task(source, c, ratio=0)``: the training and validation images are the class's
own (clean), the test images every class. Every method fits the images ``DLMSVDD.fit`` is given
(its training and validation sets, without labels; as the network takes them, so the pixels up to
one scale and shift per channel, which none of these detectors sees) and scores the test images:

* ``DLMSVDD()``: at its defaults (the small CNN from scratch, trained one-class, beside the nearest
  training image's distance in two views of the images: ``dlmsvdd.training.input_consensus``);
* the same fit's parts (the network; the pixels' and the contrast-normalised pixels' views,
  ``training.image_views``) alone and in other sums: both views, the network with the pixels' view
  alone, the default's sum without asinh, the network at other weights (``WEIGHTS``): the choices
  the default makes;
* kNN: the distance to the 5th nearest fit image (PyOD's kNN default, "largest"; goal 3's bar);
* ``LpSVDD()`` one-class and scikit-learn's ``OneClassSVM`` (its defaults), and
  ``dlmsvdd_ext.consensus.Consensus`` on the pixels as they are (``scale=False``; members by width,
  as feature vectors' would be).

``protocol="development"`` runs the same on the source's training pool split again
(``digits_study.development_source``, whose held-out share is never the test pool): the protocol
any choice for images is made on. ``fit_per_class`` fits on at most that many images of a class
(``digits_study.capped``), as a user with a small sample would.
"""

from __future__ import annotations

import copy
import time

import numpy as np
import torch
from sklearn.neighbors import NearestNeighbors
from sklearn.svm import OneClassSVM

from dlmsvdd_ext import LpSVDD
from dlmsvdd_ext.consensus import Consensus

from dlmsvdd import DLMSVDD, TrainConfig, datasets, metrics, tasks
from dlmsvdd.training import input_consensus
from dlmsvdd.training.input_consensus import IMAGE_DEEP_WEIGHT

from benchmarks.digits_study import DIGITS_CNN, capped, development_source

K_DISTANCE = 5  # PyOD's kNN default: the distance to the 5th nearest fit row
SEEDS = (0, 1, 2)
WEIGHTS = (0.125, 0.5, 1.0)  # the network's weights beside the views' mean, other than the default's
NETWORK, PLAIN = "network alone", "the default's sum without asinh"
METHODS = ("DLMSVDD()", NETWORK, "pixels view alone", "contrast view alone", "both views alone",
           "network + pixels view", PLAIN, *(f"network at {w:g}" for w in WEIGHTS), "kNN (k=5)", "LpSVDD()",
           "OneClassSVM", "Consensus(scale=False)")
GOAL = ("DLMSVDD()", "kNN (k=5)")  # issue 38: the first at or above the second


def kth_distance(neighbours: NearestNeighbors, rows: np.ndarray) -> np.ndarray:
    """The distance of each row to its k-th nearest fit row of a fitted ``NearestNeighbors``."""
    return neighbours.kneighbors(rows)[0][:, -1]


def knn_distance(fit_rows: np.ndarray, rows: np.ndarray, k: int = K_DISTANCE) -> np.ndarray:
    """The distance of each row to its k-th nearest fit row."""
    return kth_distance(NearestNeighbors(n_neighbors=k).fit(fit_rows), rows)


def flat_inputs(data) -> np.ndarray:
    """The network inputs of a task's set, one flattened row per image (float64)."""
    return np.stack([data[i][0].flatten().double().numpy() for i in range(len(data))])


def task_scores(source, normal_class: int, seed: int) -> tuple[np.ndarray, dict]:
    """Whether each test image is anomalous, and name -> (test scores, fit seconds) of every method."""
    task = tasks.make_task(source, normal_class, ratio=0.0, seed=seed)
    fit_rows = np.vstack([flat_inputs(task.train), flat_inputs(task.val)])
    X_test, t_test = flat_inputs(task.test), task.test.targets
    out = {}

    def timed(name, fit):
        start = time.perf_counter()
        model = fit()
        out[name] = (model, time.perf_counter() - start)

    config = TrainConfig(**{**DIGITS_CNN, "data": source.name, "normal_class": normal_class, "seed": seed})
    timed("DLMSVDD()", lambda: DLMSVDD(config).fit(task.train, task.val))
    timed("kNN (k=5)", lambda: NearestNeighbors(n_neighbors=K_DISTANCE).fit(fit_rows))
    timed("LpSVDD()", lambda: LpSVDD(random_state=seed).fit(fit_rows))
    timed("OneClassSVM", lambda: OneClassSVM().fit(fit_rows))
    timed("Consensus(scale=False)", lambda: Consensus(random_state=seed, scale=False).fit(fit_rows))
    model, seconds = out.pop("DLMSVDD()")
    scores = {name: out[name][0].dissimilarity(X_test) for name in ("LpSVDD()", "Consensus(scale=False)")}
    scores.update({"DLMSVDD()": model.dissimilarity(task.test), "kNN (k=5)": kth_distance(out["kNN (k=5)"][0], X_test),
                   "OneClassSVM": -out["OneClassSVM"][0].score_samples(X_test)})
    z, (pixels, contrast) = parts(model, task.test)

    def summed(weight, views, compress=True):  # the library's sum of the parts, at another weight, views or form
        return input_consensus.total(torch.as_tensor(z), [torch.as_tensor(v) for v in views], weight, 0.0, 1.0,
                                     1.0 / len(views), compress).numpy()

    scores.update({NETWORK: z, "pixels view alone": pixels, "contrast view alone": contrast,
                   "both views alone": summed(0.0, (pixels, contrast)),
                   "network + pixels view": summed(IMAGE_DEEP_WEIGHT, (pixels,)),
                   PLAIN: summed(IMAGE_DEEP_WEIGHT, (pixels, contrast), compress=False),
                   **{f"network at {w:g}": summed(w, (pixels, contrast)) for w in WEIGHTS}})
    seconds = {**{name: s for name, (_, s) in out.items()}, **{name: seconds for name in METHODS if name not in out}}
    return t_test < 0, {name: (scores[name], seconds[name]) for name in METHODS}


def parts(model: DLMSVDD, data) -> tuple[np.ndarray, list]:
    """A fitted image model's parts of its score of ``data`` (``input_consensus.InputConsensus``):
    the network's robust z-score (by the training images' f) and each view's consensus score."""
    combination = model.input_consensus_
    network = copy.copy(model)
    network.input_consensus_ = None  # the same fit, scored by its network and boundary alone
    z = (network.dissimilarity(data) - combination.centre_) / combination.spread_
    inputs = torch.stack([data[i][0] for i in range(len(data))])
    with torch.no_grad():
        views = [v.cpu().numpy() for v in combination._views(inputs)]
    return z, views


def image_source(data: str = "digits", root=None, protocol: str = "test", fit_per_class: int | None = None):
    """The images a run takes: ``datasets.load(data, root)``, or for ``protocol="development"`` its
    training pool split again (``digits_study.development_source``; the test pool is not read); with
    at most ``fit_per_class`` training images of a class when given (``digits_study.capped``)."""
    if protocol not in ("test", "development"):
        raise ValueError(f"protocol {protocol!r}: 'test' or 'development'")
    full = datasets.digits() if data == "digits" else datasets.load(data, root)
    if protocol == "development":
        return development_source(full=full, fit_per_class=fit_per_class)
    return full if fit_per_class is None else capped(full, fit_per_class)


def run(data: str = "digits", root=None, protocol: str = "test", seeds=SEEDS, classes=None, log=print,
        fit_per_class: int | None = None) -> list[dict]:
    """One record per (class, seed, method): test AUROC and fit seconds (``classes``: every class
    of the source when None)."""
    source = image_source(data, root, protocol, fit_per_class)
    records = []
    for seed in seeds:
        for c in range(len(source.classes)) if classes is None else classes:
            anomalous, scored = task_scores(source, c, seed)
            for name, (scores, seconds) in scored.items():
                records.append({"class": c, "seed": seed, "method": name,
                                "auroc": metrics.auroc(np.where(anomalous, -1, 1), scores), "fit_seconds": seconds})
            log(f"seed {seed} class {c}: " + ", ".join(f"{r['method']} {r['auroc']:.4f}"
                                                       for r in records[-len(scored):]))
    return records


def table(records: list[dict]) -> str:
    """Mean AUROC over the classes, its mean and standard deviation over the seeds, mean fit seconds."""
    seeds = sorted({r["seed"] for r in records})
    lines = ["| method | mean AUROC (± over seeds) | mean fit s |", "|---|---|---|"]
    for m in METHODS:
        per_seed = [np.mean([r["auroc"] for r in records if r["method"] == m and r["seed"] == s]) for s in seeds]
        seconds = np.mean([r["fit_seconds"] for r in records if r["method"] == m])
        lines.append(f"| {m} | {np.mean(per_seed):.4f} ± {np.std(per_seed):.4f} | {seconds:.2f} |")
    return "\n".join(lines)


def goal_row(records: list[dict]) -> tuple[str, bool]:
    """Issue 38's image row: DLMSVDD()'s mean AUROC at or above the kNN distance's."""
    own, peer = (np.mean([r["auroc"] for r in records if r["method"] == m]) for m in GOAL)
    return f"{GOAL[0]}'s mean AUROC {own:.4f} >= {GOAL[1]}'s {peer:.4f} on the pixels", bool(own >= peer)
