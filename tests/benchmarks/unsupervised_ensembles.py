"""How ``Consensus`` was chosen (issue 38, goal 3), on validation rows only: which sums of the
unsupervised detectors' robust z-scores beat kNN without labels?

Each unsupervised task (``adbench_unsupervised.task``) is cut by ``adbench_protocol.validation_task``:
the detectors fit 70% of its training rows, without labels, and are scored by AUROC on the other 30%
(the development data's own labels, never the test rows). Every detector is the unsupervised
benchmark's own (``adbench_unsupervised.METHODS``: the package's defaults and the seven peers, each at
its defaults). An ensemble is the sum of its members' robust z-scores, (s - median) / (1.4826 MAD),
the median and MAD of each member's scores of its fit rows (``consensus.robust_centre_and_spread``;
no validation row is read). Its average rank is among it and the seven peers (``ensemble_ranks``).
Two more records: ``Consensus`` itself (min-max scaling each column by its fit rows first), and
without that scaling on the rows standardised per column by the fit rows' mean and standard
deviation, as DLMSVDD's network takes feature vectors (the rows as given are min-max scaled).
"""

from __future__ import annotations

import itertools

import numpy as np
from scipy.stats import rankdata
from sklearn.metrics import roc_auc_score

from dlmsvdd_ext.consensus import Consensus, robust_centre_and_spread

from benchmarks import adbench_protocol as protocol
from benchmarks import adbench_unsupervised as unsupervised

# short name -> the unsupervised benchmark's method of that name (prefix); "DLMSVDD" is the deep model
# alone, the unlabelled default these sums were measured against (the default now scores by Consensus)
DETECTORS = {"DLMSVDD": "DLM-SVDD deep model alone", "LpSVDD": "LpSVDD", "kNN": "kNN", "LOF": "LOF", "ECOD": "ECOD",
             "IsolationForest": "IsolationForest", "OneClassSVM": "OneClassSVM", "DeepSVDD": "Deep SVDD"}
PEERS = ("LpSVDD", "kNN", "LOF", "ECOD", "IsolationForest", "OneClassSVM", "DeepSVDD")
ENSEMBLE_MEMBERS = ("LpSVDD", "kNN", "LOF", "IsolationForest", "ECOD", "DLMSVDD")


def _method(prefix: str):
    return next(m for name, m in unsupervised.METHODS.items() if name.startswith(prefix))


def robust_z(fit_scores: np.ndarray, scores: np.ndarray) -> np.ndarray:
    centre, spread = robust_centre_and_spread(fit_scores)
    return (scores - centre) / spread


def member_scores(X_fit: np.ndarray, X_val: np.ndarray, seed: int) -> dict:
    """short name -> (scores of the fit rows, scores of the validation rows), higher = more anomalous."""
    out = {}
    for short, prefix in DETECTORS.items():
        scorer = _method(prefix)(X_fit, seed)
        out[short] = np.asarray(scorer(X_fit), float), np.asarray(scorer(X_val), float)
    return out


def run(sets, seeds, log=print) -> list[dict]:
    """One record per (set, seed): each detector's and each ensemble's (two to four members of
    ENSEMBLE_MEMBERS) validation AUROC."""
    records = []
    for name in sets:
        X, y = protocol.load(name)
        for seed in seeds:
            inner = protocol.validation_task(unsupervised.task(X, y, seed, name))
            scores = member_scores(inner.X_train, inner.X_test, seed)
            record = {"set": name, "seed": seed, "family": protocol.family(name)}
            record.update({m: roc_auc_score(inner.y_test, v) for m, (_, v) in scores.items()})
            for n in (2, 3, 4):
                for combo in itertools.combinations(ENSEMBLE_MEMBERS, n):
                    total = sum(robust_z(*scores[m]) for m in combo)
                    record[" + ".join(combo)] = roc_auc_score(inner.y_test, total)
            record["Consensus"] = roc_auc_score(
                inner.y_test, Consensus(random_state=seed).fit(inner.X_train).dissimilarity(inner.X_test))
            # without its min-max scaling, on the rows standardised per column (as DLMSVDD's network takes them)
            mean, std = inner.X_train.mean(0), inner.X_train.std(0)
            std[std == 0] = 1.0
            standardised = Consensus(random_state=seed, scale=False).fit((inner.X_train - mean) / std)
            record["Consensus unscaled, standardised rows"] = roc_auc_score(
                inner.y_test, standardised.dissimilarity((inner.X_test - mean) / std))
            records.append(record)
            if log:
                log(f"{name} seed {seed}: " + ", ".join(f"{k} {v:.3f}" for k, v in record.items()
                                                        if isinstance(v, float)))
    return records


def ensemble_ranks(records: list[dict], candidate: str) -> dict:
    """Mean validation AUROC and average rank (1 = best, ties share their mean rank) of ``candidate``
    among it and the seven peers (its members among them)."""
    names = [candidate] + [m for m in PEERS if m != candidate]
    table = np.array([[r[m] for m in names] for r in records])
    ranks = rankdata(-table, axis=1)
    return {m: {"auroc": float(table[:, i].mean()), "rank": float(ranks[:, i].mean())} for i, m in enumerate(names)}
