"""Issue 49: the defaults judged on data they were not chosen on. Both protocols of
../shared/data/adbench-dev/README.md on the 37 development sets, seeds 0-2, per family, each default
beside the estimate of how the rule it was chosen by does on sets it was not chosen on.

How a rule is chosen and how that choice is judged, without any test row:

* every candidate rule of a choice (``UNLABELLED_RULES``: the views DLMSVDD scores by without labels;
  ``DEEP_WEIGHTS``: the deep model's weight beside them with labels; ``LPSVDD_LABEL_RULES``: LpSVDD's
  label weight) is fitted on the fit rows of each task's validation cut
  (``adbench_protocol.validation_task``: the training rows split 70/30, the labelled anomalies in the
  fit rows) and scored by AUROC on its held-out rows; and fitted on the training split and scored on
  the test split;
* leave-sets-out: for each set of a family, the candidate of best mean validation AUROC over the
  family's other sets (seeds 0-2, both fractions for a labelled choice) is taken, and its test
  AUROC on the left-out set recorded; the mean of those is the estimate beside the default's plain
  test mean. A rule that wins only on the sets it was chosen on shows there as a gap.

The deep weight's choice made the default (``input_consensus.deep_weight``: full on tables,
``min(1, n_A / 20)`` on embeddings, in every fold); the default's record equals its candidate's.
The defaults themselves (``DLMSVDD()``, ``LpSVDD()``) are fitted as a user would, on the training
split, with the peers at their defaults in the same run on the same splits: kNN, LOF, ECOD (PyOD),
IsolationForest, OneClassSVM (scikit-learn), Deep SVDD (deepod) without labels; XGBoost, an RBF SVC
(scikit-learn), Deep SAD, DevNet and PReNet (deepod) with labels. Every (protocol, part, set, seed,
method) result is one JSON line in the cache (``Cache``), so an interrupted run resumes where it
stopped and nothing is computed twice.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np
from scipy.stats import rankdata
from sklearn.metrics import roc_auc_score

from dlmsvdd_ext import LpSVDD, ops
from dlmsvdd_ext.consensus import Consensus
from dlmsvdd_ext.svdd import (FULL_WEIGHT_ANOMALIES, LOCAL_GAMMA_SCALE, LOCAL_GAMMA_SCALE_ONE_CLASS, MEDIAN_SAMPLES,
                              NU_WITH_ANOMALIES)

from benchmarks import adbench_methods as labelled
from benchmarks import adbench_protocol as protocol
from benchmarks import adbench_unsupervised as unsupervised
from benchmarks.adbench_methods import _targets

UNLABELLED = 0.0  # the unsupervised protocol's "la"
FRACTIONS = protocol.LABELLED_FRACTIONS
FAMILIES = ("tabular", "image embeddings")

# ---- the choices and their candidates

# Without labels: the views of the input (dlmsvdd_ext.consensus.Consensus's members) DLMSVDD scores by.
UNLABELLED_RULES = {
    "LpSVDD + IsolationForest (the default on tables)": dict(members=("LpSVDD", "IsolationForest")),
    "kNN, the nearest row (the default on embeddings)": dict(members=("kNN",), k_distance=1),
    "LpSVDD + kNN (5th) + LOF (issue 38)": dict(members=("LpSVDD", "kNN", "LOF"), k_distance=5),
    "LpSVDD": dict(members=("LpSVDD",)),
    "IsolationForest": dict(members=("IsolationForest",)),
    "LpSVDD + kNN (nearest)": dict(members=("LpSVDD", "kNN"), k_distance=1),
}


def full_weight(n_labelled: int) -> float:
    return 1.0


def label_count_weight(n_labelled: int) -> float:
    return min(1.0, n_labelled / FULL_WEIGHT_ANOMALIES)


# With labels: the deep model's weight beside the views' mean z-score (from one fit: the weights differ
# only in how the fitted parts are summed).
DEEP_WEIGHTS = {"full weight (issue 38)": full_weight,
                f"min(1, labels / {FULL_WEIGHT_ANOMALIES})": label_count_weight}


def lpsvdd_label_rule(full_at: int, scale: float):
    """LpSVDD with labels at nu = 1 + (NU_WITH_ANOMALIES - 1) min(1, n_A / full_at) and gamma = scale /
    median squared distance (the default: full_at FULL_WEIGHT_ANOMALIES, scale LOCAL_GAMMA_SCALE)."""
    def method(X, s, seed):
        nu = 1.0 + (NU_WITH_ANOMALIES - 1.0) * min(1.0, int(s.sum()) / full_at)
        gamma = scale / ops.median_sq_distance(X, max_samples=MEDIAN_SAMPLES, seed=seed)
        return LpSVDD(nu=nu, gamma=gamma, random_state=seed).fit(X, _targets(s)).dissimilarity
    return method


LPSVDD_LABEL_RULES = {f"full weight at {k} labels, gamma {scale:g} / median": lpsvdd_label_rule(k, scale)
                      for k in (FULL_WEIGHT_ANOMALIES, 100) for scale in (LOCAL_GAMMA_SCALE, LOCAL_GAMMA_SCALE_ONE_CLASS)}

# ---- the defaults and the peers


def dlmsvdd_parts(X, s, seed) -> dict:
    """``DLMSVDD()`` fitted with the labels ``s`` (none: ``fit(X)``): a scorer of each DEEP_WEIGHTS rule
    (its deep model's robust z-score times the weight plus the views' mean z-score), and the default's."""
    from dlmsvdd import DLMSVDD

    y = _targets(s) if s.any() else None
    model = DLMSVDD(seed=seed, verbose=0).fit(X.astype(np.float32), y)
    part = model.input_consensus_
    n_labelled = int(s.sum())

    if not n_labelled:
        return {"default": lambda Z: model.dissimilarity(Z.astype(np.float32))}
    last = {}

    def pieces(Z):
        if last.get("Z") is not Z:  # every scorer reads the same test rows: score and split them once
            Z32 = Z.astype(np.float32)
            views = part.member_weight * part.consensus_.dissimilarity(model.preprocess(Z32).double()).numpy()
            total = model.dissimilarity(Z32)
            last.update(Z=Z, parts=(total, (total - views) / part.weight, views))
        return last["parts"]

    def weighted(weight):
        def scorer(Z):
            _, deep, views = pieces(Z)
            return weight * deep + views
        return scorer

    return {"default": lambda Z: pieces(Z)[0],
            **{name: weighted(weight(n_labelled)) for name, weight in DEEP_WEIGHTS.items()}}


def _consensus(params: dict):
    def method(X, s, seed):
        return Consensus(random_state=seed, **params).fit(X).dissimilarity
    return method


def _without_labels(method):
    """An unsupervised protocol's method(X, seed) as method(X, s, seed): it never reads ``s``."""
    return lambda X, s, seed: method(X, seed)


UNLABELLED_PEERS = {name: _without_labels(method) for name, method in unsupervised.METHODS.items()
                    if not name.startswith(("DLM-SVDD", "Consensus", "LpSVDD"))}  # kNN, LOF, ECOD, IF, OCSVM, Deep SVDD
LABELLED_PEERS = {name: method for name, method in labelled.METHODS.items()
                  if name.startswith(("XGBoost", "RBF SVC", "Deep SAD", "DevNet", "PReNet"))}
DLMSVDD_DEFAULT = "DLM-SVDD (defaults)"
LPSVDD_DEFAULT = "LpSVDD (defaults)"


# ---- the cache


class Cache:
    """One JSON line per (protocol la, part, set, seed, method): its AUROC and fit seconds (or why it
    was skipped). ``get`` runs what is missing and appends it; a later run reads it back."""

    def __init__(self, path, also=()):
        """``path``: the file appended to; ``also``: other caches read (the shards of a run)."""
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.records = {}
        for file in (*map(Path, also), self.path):
            if file.exists():
                for line in file.read_text().splitlines():
                    if line.strip():
                        r = json.loads(line)
                        self.records[self.key(r)] = r

    @staticmethod
    def key(r: dict) -> tuple:
        return (float(r["la"]), r["part"], r["set"], int(r["seed"]), r["method"])

    def has(self, la, part, name, seed, method) -> bool:
        return (float(la), part, name, int(seed), method) in self.records

    def add(self, record: dict) -> None:
        self.records[self.key(record)] = record
        with self.path.open("a") as handle:
            handle.write(json.dumps(record) + "\n")

    def select(self, **fields) -> list[dict]:
        return [r for r in self.records.values() if all(r.get(k) == v for k, v in fields.items())]


def _auroc(y, scores) -> float:
    scores = np.asarray(scores, dtype=np.float64).ravel()
    return float(roc_auc_score(y, scores)) if np.all(np.isfinite(scores)) else float("nan")


def _record(cache: Cache, task: protocol.Task, part: str, method: str, run, log) -> None:
    """Fit ``run(X, s, seed)`` -> {name: scorer} (or a scorer) on the task's fit rows unless every name it
    gives is cached; one record per scorer."""
    try:
        start = time.perf_counter()
        scorers = run(task.X_train, task.s, task.seed)
        seconds = time.perf_counter() - start
    except protocol.MethodSkipped as skipped:
        cache.add({"la": task.la, "part": part, "set": task.name, "seed": task.seed, "method": method,
                   "family": protocol.family(task.name), "skipped": str(skipped)})
        return
    if callable(scorers):
        scorers = {"": scorers}
    for suffix, scorer in scorers.items():
        name = method if not suffix else f"{method}: {suffix}"
        record = {"la": task.la, "part": part, "set": task.name, "seed": task.seed, "method": name,
                  "family": protocol.family(task.name), "auroc": _auroc(task.y_test, scorer(task.X_test)),
                  "fit_seconds": seconds, "n_labelled": int(task.s.sum())}
        cache.add(record)
        if log:
            log(f"{task.name} seed {task.seed} la {task.la} {part} {name}: {record['auroc']:.4f} ({seconds:.2f} s)")


def _methods(la: float, part: str) -> dict:
    """What runs on a (protocol, part): candidates on both parts; the defaults and the peers on the test
    split only (DLMSVDD's fit gives its DEEP_WEIGHTS candidates, so it runs on both with labels)."""
    if la == UNLABELLED:
        methods = {f"rule: {k}": _consensus(v) for k, v in UNLABELLED_RULES.items()}
        if part == "test":
            methods.update({DLMSVDD_DEFAULT: dlmsvdd_parts,
                            LPSVDD_DEFAULT: lambda X, s, seed: LpSVDD(random_state=seed).fit(X).dissimilarity,
                            **UNLABELLED_PEERS})
        return methods
    methods = {DLMSVDD_DEFAULT: dlmsvdd_parts, **{f"LpSVDD rule: {k}": v for k, v in LPSVDD_LABEL_RULES.items()}}
    if part == "test":
        methods.update({LPSVDD_DEFAULT: labelled.lpsvdd_labels, **LABELLED_PEERS})
    return methods


def _expected(method: str, la: float) -> list[str]:
    """The record names a method's run writes (DLMSVDD's: its default and each DEEP_WEIGHTS candidate)."""
    if method == DLMSVDD_DEFAULT:
        return [f"{method}: default"] + ([f"{method}: {k}" for k in DEEP_WEIGHTS] if la != UNLABELLED else [])
    return [method]


def run(cache: Cache, sets, seeds, fractions=(UNLABELLED, *FRACTIONS), log=print) -> None:
    """Every (protocol, part, set, seed, method) not yet in the cache."""
    for name in sets:
        X, y = protocol.load(name)
        for seed in seeds:
            for la in fractions:
                test = unsupervised.task(X, y, seed, name) if la == UNLABELLED else protocol.make_task(X, y, seed, la,
                                                                                                      name)
                for part, task in (("validation", protocol.validation_task(test)), ("test", test)):
                    for method, fit in _methods(la, part).items():
                        if all(cache.has(la, part, name, seed, m) for m in _expected(method, la)) \
                                or cache.has(la, part, name, seed, method):  # done, or skipped (the reason cached)
                            continue
                        _record(cache, task, part, method, fit, log)


# ---- leave sets out, tables


def _means(records: list[dict]) -> dict:
    by = {}
    for r in records:
        if "auroc" in r:
            by.setdefault(r["method"], []).append(r["auroc"])
    return {m: float(np.mean(v)) for m, v in by.items()}


def leave_sets_out(cache: Cache, candidates: list[str], family: str, fractions) -> dict:
    """For each set of the family: the candidate of best mean validation AUROC over the family's other
    sets (and the given protocol fractions), and that candidate's test AUROCs on the left-out set.
    Returns {"chosen": {set: candidate}, "test": [records of the left-out sets, method "leave-sets-out"]}."""
    val = [r for r in cache.records.values() if r["part"] == "validation" and r.get("family") == family
           and r["la"] in fractions and r["method"] in candidates and "auroc" in r]
    test = [r for r in cache.records.values() if r["part"] == "test" and r.get("family") == family
            and r["la"] in fractions and r["method"] in candidates and "auroc" in r]
    chosen, out = {}, []
    for name in sorted({r["set"] for r in test}):
        means = _means([r for r in val if r["set"] != name])
        best = max(candidates, key=lambda m: means.get(m, -1.0))
        chosen[name] = best
        out += [dict(r, method="leave-sets-out") for r in test if r["set"] == name and r["method"] == best]
    return {"chosen": chosen, "test": out}


def ranks(records: list[dict]) -> dict:
    """Average rank (1 = best, ties shared) of each method over the (set, seed, la) tasks where every
    method ran."""
    methods = sorted({r["method"] for r in records})
    tasks = {}
    for r in records:
        if "auroc" in r:
            tasks.setdefault((r["set"], r["seed"], r["la"]), {})[r["method"]] = r["auroc"]
    complete = [t for t in tasks.values() if all(m in t for m in methods)]
    if not complete:
        return {}
    table = np.array([[np.nan_to_num(t[m], nan=0.0) for m in methods] for t in complete])
    return dict(zip(methods, rankdata(-table, axis=1).mean(0)))


def unlabelled_table(cache: Cache) -> tuple[str, list[tuple[str, bool]]]:
    """Markdown: per family, mean test AUROC and average rank among DLM-SVDD and the seven peers
    (LpSVDD() one-class among them), the candidates' validation and test means, and the leave-sets-out
    estimate; with goal 1's rows."""
    lines, goals = [], []
    candidates = [f"rule: {k}" for k in UNLABELLED_RULES]
    peers = [LPSVDD_DEFAULT, *UNLABELLED_PEERS]
    for family in FAMILIES:
        test = cache.select(la=UNLABELLED, part="test", family=family)
        val = cache.select(la=UNLABELLED, part="validation", family=family)
        loso = leave_sets_out(cache, candidates, family, (UNLABELLED,))
        compared = [r for r in test if r["method"] in (f"{DLMSVDD_DEFAULT}: default", *peers)]
        rank = ranks(compared)
        rank_loso = ranks([r for r in compared if r["method"] in peers] + loso["test"])
        means, val_means = _means(test), _means(val)
        n_sets = len({r["set"] for r in test})
        lines += [f"\n{family} ({n_sets} sets x seeds, test AUROC; rank among DLM-SVDD and the 7 peers)",
                  "| method | mean test AUROC | average rank | mean validation AUROC |", "|---|---|---|---|"]
        dlm = f"{DLMSVDD_DEFAULT}: default"
        lines.append(f"| **DLMSVDD().fit(X)** | {means.get(dlm, np.nan):.4f} | {rank.get(dlm, np.nan):.2f} | |")
        loso_mean = float(np.mean([r["auroc"] for r in loso["test"]])) if loso["test"] else np.nan
        picked = ", ".join(f"{c.removeprefix('rule: ')} x{list(loso['chosen'].values()).count(c)}"
                           for c in dict.fromkeys(loso["chosen"].values()))
        lines.append(f"| leave-sets-out estimate (chosen: {picked}) | {loso_mean:.4f} | "
                     f"{rank_loso.get('leave-sets-out', np.nan):.2f} | |")
        for m in peers:
            lines.append(f"| {m} | {means.get(m, np.nan):.4f} | {rank.get(m, np.nan):.2f} | |")
        for m in candidates:
            lines.append(f"| candidate {m.removeprefix('rule: ')} | {means.get(m, np.nan):.4f} | | "
                         f"{val_means.get(m, np.nan):.4f} |")
        best_mean = max(peers, key=lambda m: means.get(m, -1.0))
        best_rank = min(peers, key=lambda m: rank.get(m, np.inf))
        goals += [(f"{family}: DLMSVDD().fit(X) mean {means.get(dlm, np.nan):.4f} >= best peer ({best_mean}) "
                   f"{means.get(best_mean, np.nan):.4f}", means.get(dlm, -1) >= means.get(best_mean, np.inf)),
                  (f"{family}: DLMSVDD().fit(X) average rank {rank.get(dlm, np.nan):.2f} <= best peer's "
                   f"({best_rank}) {rank.get(best_rank, np.nan):.2f}", rank.get(dlm, np.inf) <= rank.get(best_rank, -1)),
                  (f"{family}: leave-sets-out estimate {loso_mean:.4f} >= best peer's mean "
                   f"{means.get(best_mean, np.nan):.4f}", loso_mean >= means.get(best_mean, np.inf))]
    return "\n".join(lines), goals


def labelled_table(cache: Cache) -> tuple[str, list[tuple[str, bool]]]:
    """Markdown: per family and labelled fraction, mean test AUROC of both estimators with labels, their
    unlabelled fits on the same rows (the unsupervised protocol's, whose training split is the same), the
    leave-sets-out estimates of the labelled choices, and the peers with labels; with goal 2's rows."""
    lines, goals = [], []
    deep = [f"{DLMSVDD_DEFAULT}: {k}" for k in DEEP_WEIGHTS]
    lp = [f"LpSVDD rule: {k}" for k in LPSVDD_LABEL_RULES]
    for family in FAMILIES:
        unl = _means(cache.select(la=UNLABELLED, part="test", family=family))
        deep_loso = leave_sets_out(cache, deep, family, FRACTIONS)
        lp_loso = leave_sets_out(cache, lp, family, FRACTIONS)
        for la in FRACTIONS:
            test = cache.select(la=la, part="test", family=family)
            means, rank = _means(test), ranks([r for r in test if r["method"] in (
                f"{DLMSVDD_DEFAULT}: default", LPSVDD_DEFAULT, *LABELLED_PEERS)])
            val_means = _means(cache.select(la=la, part="validation", family=family))
            n_sets = len({r["set"] for r in test})
            dlm, dlm_unl = means.get(f"{DLMSVDD_DEFAULT}: default", np.nan), unl.get(f"{DLMSVDD_DEFAULT}: default", np.nan)
            lpl, lp_unl = means.get(LPSVDD_DEFAULT, np.nan), unl.get(LPSVDD_DEFAULT, np.nan)
            est = {k: float(np.mean([r["auroc"] for r in v["test"] if r["la"] == la]) if v["test"] else np.nan)
                   for k, v in (("deep", deep_loso), ("lp", lp_loso))}
            lines += [f"\n{family}, la {la} ({n_sets} sets x seeds; test AUROC; rank among the two estimators and "
                      "the labelled peers)",
                      "| method | with labels | without labels (same rows) | average rank | validation |",
                      "|---|---|---|---|---|",
                      f"| **DLMSVDD()** | {dlm:.4f} | {dlm_unl:.4f} | "
                      f"{rank.get(f'{DLMSVDD_DEFAULT}: default', np.nan):.2f} | |",
                      f"| DLMSVDD's deep weight, leave-sets-out estimate | {est['deep']:.4f} | | | |",
                      f"| **LpSVDD()** | {lpl:.4f} | {lp_unl:.4f} | {rank.get(LPSVDD_DEFAULT, np.nan):.2f} | |",
                      f"| LpSVDD's label rule, leave-sets-out estimate | {est['lp']:.4f} | | | |"]
            for m in LABELLED_PEERS:
                lines.append(f"| {m} | {means.get(m, np.nan):.4f} | | {rank.get(m, np.nan):.2f} | |")
            for m in deep + lp:
                lines.append(f"| candidate {m} | {means.get(m, np.nan):.4f} | | | {val_means.get(m, np.nan):.4f} |")
            best_peer = max(LABELLED_PEERS, key=lambda m: means.get(m, -1.0))
            goals += [(f"{family}, la {la}: DLMSVDD() with labels {dlm:.4f} >= without {dlm_unl:.4f}", dlm >= dlm_unl),
                      (f"{family}, la {la}: LpSVDD() with labels {lpl:.4f} >= without {lp_unl:.4f}", lpl >= lp_unl),
                      (f"{family}, la {la}: DLMSVDD() with labels {dlm:.4f} >= best labelled peer ({best_peer}) "
                       f"{means.get(best_peer, np.nan):.4f}", dlm >= means.get(best_peer, np.inf))]
    return "\n".join(lines), goals


def report(cache: Cache) -> str:
    """Both protocols' tables and the goal rows of issue 49 (1: without labels; 2: labels never hurt)."""
    unlabelled, goals_1 = unlabelled_table(cache)
    labelled_, goals_2 = labelled_table(cache)
    rows = "\n".join(f"{'holds' if ok else 'FAILS'}: {row}" for row, ok in goals_1 + goals_2)
    return (f"## Without labels\n{unlabelled}\n\n## With labels\n{labelled_}\n\n## Goal rows\n{rows}\n")


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--cache", required=True, help="JSON lines, appended; what it holds is not run again")
    parser.add_argument("--also", action="append", default=[], help="other caches to read (a run's other shards)")
    parser.add_argument("--sets", default="", help="comma-separated substrings of set names (default: all 37)")
    parser.add_argument("--seeds", default="0,1,2")
    parser.add_argument("--protocols", default="unlabelled,labelled", help="unlabelled, labelled or both")
    parser.add_argument("--shard", default="0/1", help="i/n: this process runs every n-th set from the i-th")
    parser.add_argument("--report", action="store_true", help="print the tables from the caches; run nothing")
    args = parser.parse_args(argv)
    cache = Cache(args.cache, args.also)
    if not args.report:
        wanted = [k.strip().lower() for k in args.sets.split(",")]
        sets = [s for s in protocol.available_sets() if any(k in s.lower() for k in wanted)]
        index, count = (int(v) for v in args.shard.split("/"))
        fractions = (((UNLABELLED,) if "unlabelled" in args.protocols else ())
                     + (FRACTIONS if "labelled" in args.protocols.replace("unlabelled", "") else ()))
        run(cache, sets[index::count], [int(v) for v in args.seeds.split(",")], fractions)
    print(report(cache))


if __name__ == "__main__":
    main()
