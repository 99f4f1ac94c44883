"""Issue 38, the plan for ``Consensus`` as DLMSVDD's score (goals 3 and 4), on validation rows only:
with a few labelled anomalies, does the input consensus add to the labelled detectors?

``DLMSVDD()`` here is the deep model alone (``input_consensus=False``), as it was measured before the
input consensus joined its score; the sum below is what ``DLMSVDD()`` with labels now scores by.

Each semi-supervised task (``adbench_protocol.make_task``, la 0.05 and 0.25) is cut by
``adbench_protocol.validation_task`` (fit rows with their labels, validation rows held out of the
training rows; never the test rows). Scores: ``DLMSVDD()`` and ``LpSVDD()`` with the labels,
``Consensus()`` on the fit rows without them, and each labelled detector's robust z-score (median and
MAD of its fit rows' scores) plus the consensus's mean member z-score: the labelled detector weighs
as much as the three views of the input together. One alternative beside it: the deep model's weight
``min(1, n_A / FULL_WEIGHT_ANOMALIES)`` with n_A labelled anomalies (``LpSVDD``'s rule for its nu:
one or two labels cannot overrule the unlabelled rows).
"""

from __future__ import annotations

import numpy as np
from sklearn.metrics import roc_auc_score

from dlmsvdd_ext import LpSVDD
from dlmsvdd_ext.consensus import Consensus
from dlmsvdd_ext.svdd import FULL_WEIGHT_ANOMALIES

from benchmarks import adbench_protocol as protocol
from benchmarks.adbench_methods import _targets
from benchmarks.unsupervised_ensembles import robust_z

FRACTIONS = (0.05, 0.25)


def task_record(X, y, name: str, la: float, seed: int) -> dict:
    inner = protocol.validation_task(protocol.make_task(X, y, seed, la, name))
    t = _targets(inner.labelled.astype(int))
    fit, val = inner.X_train, inner.X_test
    from dlmsvdd import DLMSVDD

    deep = DLMSVDD(seed=seed, verbose=0, input_consensus=False).fit(fit.astype(np.float32), t)  # as before it
    lp = LpSVDD(random_state=seed).fit(fit, t)
    scores = {"DLMSVDD": (deep.dissimilarity(fit.astype(np.float32)), deep.dissimilarity(val.astype(np.float32))),
              "LpSVDD": (lp.dissimilarity(fit), lp.dissimilarity(val))}
    consensus = Consensus(random_state=seed).fit(fit).dissimilarity(val)
    record = {"set": name, "seed": seed, "la": la, "family": protocol.family(name),
              "Consensus": roc_auc_score(inner.y_test, consensus)}
    z = {m: robust_z(*pair) for m, pair in scores.items()}
    for m, pair in scores.items():
        record[m] = roc_auc_score(inner.y_test, pair[1])
        record[f"{m} + Consensus"] = roc_auc_score(inner.y_test, z[m] + consensus / 3)
    weight = min(1.0, int((t < 0).sum()) / FULL_WEIGHT_ANOMALIES)  # the label-count weight
    record["DLMSVDD x label weight + Consensus"] = roc_auc_score(inner.y_test, weight * z["DLMSVDD"] + consensus / 3)
    return record


def run(sets, seeds, log=print) -> list[dict]:
    """One record per (set, la, seed): each score's validation AUROC."""
    records = []
    for name in sets:
        X, y = protocol.load(name)
        for la in FRACTIONS:
            for seed in seeds:
                records.append(task_record(X, y, name, la, seed))
                if log:
                    log(", ".join(f"{k} {v:.3f}" if isinstance(v, float) else f"{v}" for k, v in records[-1].items()))
    return records
