"""A lead for issue 38's goal 3, measured on validation rows only: do score ensembles of the input-space
detectors (and of the deep model) beat kNN without labels?

Each unsupervised task (``adbench_unsupervised.task``) is cut by ``adbench_protocol.validation_task``:
the detectors fit 70% of its training rows, without labels, and are scored by AUROC on the other 30%
(the development data's own labels, never the test rows). Members, each at the defaults its peer runs
at: ``LpSVDD()`` one-class, the distance to the 5th nearest training row (PyOD's kNN), the local outlier
factor of 20 neighbours (scikit-learn's LOF, as PyOD's) and ``DLMSVDD()``'s f. An ensemble is the sum of
its members' robust z-scores: (s - median) / (1.4826 MAD), the median and MAD of each member's scores on
its fit rows (the training rows: no validation row is read). IsolationForest is the remaining peer of
the ranks (``ensemble_ranks``).
"""

from __future__ import annotations

import itertools

import numpy as np
from scipy.stats import rankdata
from sklearn.ensemble import IsolationForest
from sklearn.metrics import roc_auc_score
from sklearn.neighbors import LocalOutlierFactor, NearestNeighbors

from dlmsvdd_ext import LpSVDD

from benchmarks import adbench_protocol as protocol
from benchmarks import adbench_unsupervised as unsupervised

K_NEIGHBOUR = 5  # PyOD KNN's default n_neighbors


def robust_z(fit_scores: np.ndarray, scores: np.ndarray) -> np.ndarray:
    centre = np.median(fit_scores)
    spread = 1.4826 * np.median(np.abs(fit_scores - centre))
    return (scores - centre) / (spread if spread > 0 else 1.0)


def member_scores(X_fit: np.ndarray, X_val: np.ndarray, seed: int) -> dict:
    """name -> (scores of the fit rows, scores of the validation rows), higher = more anomalous."""
    from dlmsvdd import DLMSVDD

    out = {}
    lp = LpSVDD(random_state=seed).fit(X_fit)
    out["LpSVDD"] = lp.dissimilarity(X_fit), lp.dissimilarity(X_val)
    nn = NearestNeighbors(n_neighbors=K_NEIGHBOUR + 1).fit(X_fit)  # + 1: a fit row's nearest is itself
    out["kNN"] = nn.kneighbors(X_fit)[0][:, K_NEIGHBOUR], nn.kneighbors(X_val, K_NEIGHBOUR)[0][:, K_NEIGHBOUR - 1]
    lof = LocalOutlierFactor(novelty=True).fit(X_fit)
    out["LOF"] = -lof.negative_outlier_factor_, -lof.score_samples(X_val)
    forest = IsolationForest(random_state=seed).fit(X_fit)
    out["IsolationForest"] = -forest.score_samples(X_fit), -forest.score_samples(X_val)
    deep = DLMSVDD(seed=seed, verbose=0).fit(X_fit.astype(np.float32))
    out["DLMSVDD"] = deep.dissimilarity(X_fit.astype(np.float32)), deep.dissimilarity(X_val.astype(np.float32))
    return out


ENSEMBLE_MEMBERS = ("LpSVDD", "kNN", "LOF", "DLMSVDD")


def run(sets, seeds, log=print) -> list[dict]:
    """One record per (set, seed): each member's and each ensemble's validation AUROC."""
    records = []
    for name in sets:
        X, y = protocol.load(name)
        for seed in seeds:
            inner = protocol.validation_task(unsupervised.task(X, y, seed, name))
            scores = member_scores(inner.X_train, inner.X_test, seed)
            record = {"set": name, "seed": seed, "family": protocol.family(name)}
            record.update({m: roc_auc_score(inner.y_test, v) for m, (_, v) in scores.items()})
            for n in range(2, len(ENSEMBLE_MEMBERS) + 1):
                for combo in itertools.combinations(ENSEMBLE_MEMBERS, n):
                    total = sum(robust_z(*scores[m]) for m in combo)
                    record[" + ".join(combo)] = roc_auc_score(inner.y_test, total)
            records.append(record)
            if log:
                log(f"{name} seed {seed}: " + ", ".join(f"{k} {v:.3f}" for k, v in record.items()
                                                        if isinstance(v, float)))
    return records


def ensemble_ranks(records: list[dict], candidate: str) -> dict:
    """Mean validation AUROC and average rank of ``candidate`` among it and the single detectors
    (LpSVDD, kNN, LOF, IsolationForest, DLMSVDD), its members included."""
    names = [candidate] + [m for m in ("LpSVDD", "kNN", "LOF", "IsolationForest", "DLMSVDD") if m != candidate]
    table = np.array([[r[m] for m in names] for r in records])
    ranks = rankdata(-table, axis=1)  # 1 = best; ties share their mean rank
    return {m: {"auroc": float(table[:, i].mean()), "rank": float(ranks[:, i].mean())} for i, m in enumerate(names)}
