"""ADBench's unsupervised protocol on the development sets (../shared/data/adbench-dev/README.md,
"The unsupervised protocol"): the semi-supervised protocol's steps 1-3 (at most MAX_ROWS rows, a
stratified 70/30 split, min-max scaling on the training rows), then no label at all: every method
fits the whole training split, normals and anomalies alike, and is scored by test AUROC.

The methods are name -> method(X_train, seed) -> scorer (higher = more anomalous), each at its
defaults: the package's detectors get ``fit(X)`` without labels; the peers are PyOD's kNN, LOF and
ECOD, scikit-learn's IsolationForest and OneClassSVM, and deepod's Deep SVDD.
"""

from __future__ import annotations

import importlib

import numpy as np
from sklearn.ensemble import IsolationForest
from sklearn.svm import OneClassSVM

from dlmsvdd_ext import LpSVDD
from dlmsvdd_ext.consensus import Consensus

from benchmarks import adbench_protocol as protocol
from benchmarks.adbench_methods import _version, dlmsvdd_scorer
from benchmarks.adbench_protocol import MethodSkipped

def dlmsvdd_default(X, seed):
    return dlmsvdd_scorer(X, None, seed)


def dlmsvdd_deep_alone(X, seed):
    """The ablation: the deep model alone (``input_consensus=False``: self-labelled, trained), the
    unlabelled default before the input consensus."""
    return dlmsvdd_scorer(X, None, seed, input_consensus=False)


def lpsvdd_default(X, seed):
    return LpSVDD(random_state=seed).fit(X).dissimilarity


def consensus(X, seed):
    """``dlmsvdd_ext.consensus.Consensus`` on its own (members by the rows' width: LpSVDD one-class and
    an isolation forest below 256 columns, the nearest fit row's distance from there), fitted on every
    training row; DLMSVDD's unlabelled default scores by it, fitted on its own training share."""
    return Consensus(random_state=seed).fit(X).dissimilarity


def _pyod(class_name: str):
    def method(X, seed):
        try:
            module = importlib.import_module(f"pyod.models.{class_name.lower()}")
        except ImportError as e:
            raise MethodSkipped("pyod is not installed (pip install 'dlmsvdd[adbench]')") from e
        return getattr(module, class_name)().fit(X).decision_function
    return method


def isolation_forest(X, seed):
    model = IsolationForest(random_state=seed).fit(X)
    return lambda Z: -model.score_samples(Z)


def one_class_svm(X, seed):
    model = OneClassSVM().fit(X)
    return lambda Z: -model.score_samples(Z)


def deep_svdd(X, seed):
    try:
        from deepod.models.tabular import DeepSVDD
    except ImportError as e:
        raise MethodSkipped("deepod is not installed (pip install 'dlmsvdd[adbench]')") from e
    model = DeepSVDD(device="cpu", verbose=0, random_state=seed).fit(X.astype(np.float32))
    return lambda Z: model.decision_function(Z.astype(np.float32))


METHODS = {
    "DLM-SVDD (defaults, fit(X))": dlmsvdd_default,
    "DLM-SVDD deep model alone (ablation, input_consensus=False)": dlmsvdd_deep_alone,
    "LpSVDD (defaults, fit(X))": lpsvdd_default,
    "Consensus (members by the rows' width; dlmsvdd_ext.consensus)": consensus,
    f"kNN (PyOD {_version('pyod')})": _pyod("KNN"),
    f"LOF (PyOD {_version('pyod')})": _pyod("LOF"),
    f"ECOD (PyOD {_version('pyod')})": _pyod("ECOD"),
    "IsolationForest (scikit-learn)": isolation_forest,
    "OneClassSVM (scikit-learn)": one_class_svm,
    f"Deep SVDD (deepod {_version('deepod')})": deep_svdd,
}


def task(X: np.ndarray, y: np.ndarray, seed: int, name: str = "") -> protocol.Task:
    """Steps 1-3 of the protocol; no training row is labelled (``la`` 0 marks the protocol)."""
    labelled = protocol.make_task(X, y, seed, 0.05, name)  # the same split and scaling as every protocol run
    labelled.labelled[:] = False
    labelled.la = 0.0
    return labelled


def run(methods: dict, sets, seeds, log=print) -> list[dict]:
    """One record per (set, seed, method), as ``adbench_protocol.run``'s (``la`` 0.0)."""
    records = []
    for name in sets:
        X, y = protocol.load(name)
        for seed in seeds:
            t = task(X, y, seed, name)
            for method_name, method in methods.items():
                result = protocol.run_method(lambda X_, s, seed_: method(X_, seed_), t)
                records.append({"set": name, "seed": seed, "la": 0.0, "method": method_name,
                                "family": protocol.family(name), **result})
                if log and "auroc" in result:
                    log(f"{name} seed {seed} {method_name}: {result['auroc']:.4f} ({result['fit_seconds']:.2f} s)")
    return records


def table(records: list[dict]) -> str:
    """Mean test AUROC (all sets, and per family), average rank over every (set, seed) task and
    fit seconds, per method, as markdown."""
    overall = protocol.summary(records)
    per_family = {f: protocol.summary([r for r in records if r["family"] == f])
                  for f in sorted({r["family"] for r in records})}
    families = list(per_family)
    head = ("| method | mean AUROC | " + " | ".join(f"{f}" for f in families) + " | average rank | "
            + " | ".join(f"rank, {f}" for f in families) + " | mean fit s |")
    lines = [head, "|---" * (4 + 2 * len(families)) + "|"]
    for m, s in overall.items():
        if not s["tasks"]:
            lines.append(f"| {m} | skipped: {'; '.join(s['skipped'])} |")
            continue
        fam = " | ".join(f"{per_family[f][m]['auroc'].get(0.0, float('nan')):.3f}" for f in families)
        fam_rank = " | ".join(f"{per_family[f][m]['rank']:.2f}" for f in families)
        lines.append(f"| {m} | {s['auroc'][0.0]:.3f} | {fam} | {s['rank']:.2f} | {fam_rank} | "
                     f"{s['fit_seconds']:.2f} |")
    return "\n".join(lines)


OWN = ("DLM-SVDD", "Consensus")  # the package's rows (the ablation among them); the rest are the peers


def candidate_rows(records: list[dict], candidate: str) -> list[tuple[str, bool]]:
    """Goal 3's two rows for the row named ``candidate`` (a prefix): its mean AUROC at or above every
    peer's, and its average rank the best, ranks among it and the seven peers (the package's other
    rows left out)."""
    kept = [r for r in records if r["method"].startswith(candidate) or not r["method"].startswith(OWN)]
    s = protocol.summary(kept)
    own = next(m for m in s if m.startswith(candidate))
    peers = [m for m in s if m != own and s[m]["tasks"]]
    best_mean = max(peers, key=lambda m: s[m]["auroc"][0.0])
    best_rank = min(peers, key=lambda m: s[m]["rank"])
    return [(f"{own}'s mean AUROC {s[own]['auroc'][0.0]:.4f} >= the best peer's ({best_mean}) "
             f"{s[best_mean]['auroc'][0.0]:.4f}", s[own]["auroc"][0.0] >= s[best_mean]["auroc"][0.0]),
            (f"{own}'s average rank {s[own]['rank']:.2f} < the best peer's ({best_rank}) {s[best_rank]['rank']:.2f}",
             s[own]["rank"] < s[best_rank]["rank"])]


def goal_rows(records: list[dict]) -> list[tuple[str, bool]]:
    """Issue 38's goal 3 on a full run: DLM-SVDD's defaults against the peers."""
    return candidate_rows(records, "DLM-SVDD (defaults")

