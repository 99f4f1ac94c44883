"""ADBench's semi-supervised protocol on the development sets (../shared/data/adbench-dev/README.md).

For a data set, a seed and a labelled fraction ``la``: more than MAX_ROWS rows -> draw MAX_ROWS
without replacement; a stratified, shuffled 70/30 train/test split; min-max scaling fitted on the
training rows; ceil(la * training anomalies) of them (at least one) labelled, the others left
unlabelled among the normals; test AUROC with the anomalies positive. Small sets are used as they
are (no copying up to 1000 rows, which ADBench's code does by default). Everything is seeded by
``seed``, so every method sees the same splits.
"""

from __future__ import annotations

import json
import math
import os
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from scipy.stats import rankdata
from sklearn.metrics import roc_auc_score
from sklearn.model_selection import train_test_split
from sklearn.preprocessing import MinMaxScaler

# The repository's sibling folder ../shared (CI has it; a user's checkout does not).
DATA_DIR = Path(__file__).resolve().parents[2].parent / "shared" / "data" / "adbench-dev"
MAX_ROWS = 10_000
TEST_SIZE = 0.3
SEEDS = (0, 1, 2)
LABELLED_FRACTIONS = (0.05, 0.25)


class MethodSkipped(Exception):
    """A method that cannot run here (a missing package, an API not there yet): the benchmark
    records the reason and leaves the method out of that task's ranking."""


@dataclass
class Task:
    """One data set, seed and ``la``: ``labelled`` marks the labelled training anomalies (the
    only labels a method may use); ``y_train`` is the truth, kept for diagnostics only."""
    name: str
    seed: int
    la: float
    X_train: np.ndarray
    labelled: np.ndarray  # bool, training rows
    y_train: np.ndarray  # 0/1 truth of the training rows (not for the methods)
    X_test: np.ndarray
    y_test: np.ndarray  # 0/1, 1 = anomaly

    @property
    def s(self) -> np.ndarray:
        """The semi-supervised labels a method gets: 1 labelled anomaly, 0 unlabelled."""
        return self.labelled.astype(np.int64)


def n_labelled(la: float, n_anomalies: int) -> int:
    """ceil(la * n_anomalies), at least 1; the 1e-9 keeps float products such as
    0.05 * 60 = 3.0000000000000004 at 3."""
    return max(1, math.ceil(la * n_anomalies - 1e-9))


def make_task(X: np.ndarray, y: np.ndarray, seed: int, la: float, name: str = "") -> Task:
    """The protocol's steps 1-4 on one set (X, y with 1 = anomaly)."""
    X = np.asarray(X, dtype=np.float64)
    y = np.asarray(y).astype(np.int64).ravel()
    rng = np.random.default_rng(seed)
    if len(y) > MAX_ROWS:
        keep = np.sort(rng.choice(len(y), MAX_ROWS, replace=False))
        X, y = X[keep], y[keep]
    X_train, X_test, y_train, y_test = train_test_split(X, y, test_size=TEST_SIZE, stratify=y, shuffle=True,
                                                        random_state=seed)
    scaler = MinMaxScaler().fit(X_train)  # a constant column is mapped to 0 (scale 1)
    anomalies = np.flatnonzero(y_train == 1)
    labelled = np.zeros(len(y_train), dtype=bool)
    labelled[rng.choice(anomalies, n_labelled(la, len(anomalies)), replace=False)] = True
    return Task(name, seed, la, scaler.transform(X_train), labelled, y_train, scaler.transform(X_test), y_test)


def available_sets() -> list[str]:
    return sorted(p.stem for p in DATA_DIR.glob("*.npz"))


def load(name: str) -> tuple[np.ndarray, np.ndarray]:
    with np.load(DATA_DIR / f"{name}.npz", allow_pickle=False) as data:
        return data["X"], data["y"]


def _env_list(var: str, default, cast=str) -> list:
    value = os.environ.get(var, "").strip()
    return [cast(v) for v in value.split(",") if v.strip()] if value else list(default)


def selection(methods: dict) -> tuple[list[str], list[int], list[float], dict]:
    """Sets, seeds, fractions and methods to run: all, or the subsets named by ADBENCH_SETS
    (comma-separated substrings of set names), ADBENCH_SEEDS, ADBENCH_LA and ADBENCH_METHODS
    (substrings of method names), for quick runs."""
    sets = [s for s in available_sets() if any(k.lower() in s.lower() for k in _env_list("ADBENCH_SETS", [""]))]
    wanted = _env_list("ADBENCH_METHODS", [""])
    chosen = {k: f for k, f in methods.items() if any(w.lower() in k.lower() for w in wanted)}
    return sets, _env_list("ADBENCH_SEEDS", SEEDS, int), _env_list("ADBENCH_LA", LABELLED_FRACTIONS, float), chosen


def run_method(method, task: Task) -> dict:
    """Fits ``method(X_train, s, seed)`` (it returns a scorer: higher = more anomalous), times
    the fit, and scores the test rows."""
    try:
        start = time.perf_counter()
        scorer = method(task.X_train, task.s, task.seed)
        fit_seconds = time.perf_counter() - start
    except MethodSkipped as skipped:
        return {"skipped": str(skipped)}
    scores = np.asarray(scorer(task.X_test), dtype=np.float64).ravel()
    if not np.all(np.isfinite(scores)):
        return {"auroc": float("nan"), "fit_seconds": fit_seconds, "error": "non-finite scores"}
    return {"auroc": float(roc_auc_score(task.y_test, scores)), "fit_seconds": fit_seconds}


def run(methods: dict, sets, seeds, las, log=print) -> list[dict]:
    """One record per (set, seed, la, method)."""
    records = []
    for name in sets:
        X, y = load(name)
        for seed in seeds:
            for la in las:
                task = make_task(X, y, seed, la, name)
                for method_name, method in methods.items():
                    result = run_method(method, task)
                    records.append({"set": name, "seed": seed, "la": la, "method": method_name, **result})
                    if log and "auroc" in result:
                        log(f"{name} seed {seed} la {la} {method_name}: {result['auroc']:.4f} "
                            f"({result['fit_seconds']:.2f} s)")
    return records


def summary(records: list[dict]) -> dict:
    """Per method: mean AUROC per la, average rank over every (set, seed, la) task (rank 1 =
    best AUROC, ties averaged, among the methods that ran on it), mean and max fit seconds,
    and the reasons of skipped runs."""
    ran = [r for r in records if "auroc" in r]
    methods = list(dict.fromkeys(r["method"] for r in records))
    ranks = {m: [] for m in methods}
    for key in sorted({(r["set"], r["seed"], r["la"]) for r in ran}):
        group = [r for r in ran if (r["set"], r["seed"], r["la"]) == key]
        for r, rank in zip(group, rankdata([-np.nan_to_num(r["auroc"], nan=0.0) for r in group])):
            ranks[r["method"]].append(float(rank))
    out = {}
    for m in methods:
        mine = [r for r in ran if r["method"] == m]
        skipped = sorted({r["skipped"] for r in records if r["method"] == m and "skipped" in r})
        out[m] = {
            "auroc": {la: float(np.mean([r["auroc"] for r in mine if r["la"] == la]))
                      for la in sorted({r["la"] for r in mine})},
            "rank": float(np.mean(ranks[m])) if ranks[m] else float("nan"),
            "fit_seconds": float(np.mean([r["fit_seconds"] for r in mine])) if mine else float("nan"),
            "max_fit_seconds": float(np.max([r["fit_seconds"] for r in mine])) if mine else float("nan"),
            "tasks": len(mine),
            "skipped": skipped,
        }
    return out


def table(summary_: dict, las) -> str:
    """A markdown table of ``summary``."""
    head = "| method | " + " | ".join(f"la = {la}" for la in las) + " | average rank | mean fit s (max) | tasks |"
    lines = [head, "|---" * (len(las) + 4) + "|"]
    notes = []
    for m, s in summary_.items():
        notes += [f"{m}: skipped: {reason}" for reason in s["skipped"]]
        if not s["tasks"]:
            lines.append(f"| {m} | " + " | ".join("skipped" for _ in las) + " | - | - | 0 |")
            continue
        aurocs = " | ".join(f"{s['auroc'].get(la, float('nan')):.3f}" for la in las)
        lines.append(f"| {m} | {aurocs} | {s['rank']:.2f} | {s['fit_seconds']:.2f} ({s['max_fit_seconds']:.1f}) "
                     f"| {s['tasks']} |")
    return "\n".join(lines + notes)


def write_json(records: list[dict], summary_: dict, meta: dict) -> Path:
    """All per-task records, the summary and ``meta`` to $ADBENCH_JSON, or a file in a temporary folder."""
    path = Path(os.environ.get("ADBENCH_JSON") or Path(tempfile.mkdtemp(prefix="adbench-")) / "adbench.json")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"meta": meta, "summary": summary_, "records": records}, indent=1))
    return path


VALIDATION_SIZE = 0.3


def validation_task(task: Task) -> Task:
    """A task made of ``task``'s training rows only, for choosing hyper-parameters without the
    test split: the unlabelled training rows split 70/30 (stratified by their truth) into fit
    and validation rows; every labelled anomaly stays in the fit rows, as a method would use it.
    Validation AUROC is against the truth of the held-out unlabelled rows: the development data's
    own labels, never its test rows."""
    unlabelled = np.flatnonzero(~task.labelled)
    fit_rows, val_rows = train_test_split(unlabelled, test_size=VALIDATION_SIZE, stratify=task.y_train[unlabelled],
                                          shuffle=True, random_state=task.seed)
    fit_rows = np.sort(np.r_[fit_rows, np.flatnonzero(task.labelled)])
    return Task(task.name, task.seed, task.la, task.X_train[fit_rows], task.labelled[fit_rows],
                task.y_train[fit_rows], task.X_train[val_rows], task.y_train[val_rows])


# The methods that are this package's (the rest are the baselines issue 28 measures against)
OWN_METHODS = ("DLM-SVDD", "LpSVDD")
EMBEDDING_PREFIXES = ("CIFAR10", "SVHN", "MVTec")  # the ResNet-18 embedding sets; the rest are tabular


def family(name: str) -> str:
    return "image embeddings" if name.startswith(EMBEDDING_PREFIXES) else "tabular"


def labels_never_hurt_rows(records: list[dict]) -> list[tuple[str, bool]]:
    """Issue 38's goal 4: per family and labelled fraction, each estimator with labels at least as
    good (mean test AUROC) as its fit without them on the same rows."""
    rows = []
    for estimator in ("DLM-SVDD", "LpSVDD"):
        with_labels = "DLM-SVDD (default, vectors)" if estimator == "DLM-SVDD" else "LpSVDD with labels (defaults)"
        without = f"{estimator} without labels (fit(X), the same rows)"
        for fam in ("tabular", "image embeddings"):
            for la in sorted({r["la"] for r in records}):
                def mean(method):
                    values = [r["auroc"] for r in records if r["method"] == method and r["la"] == la
                              and family(r["set"]) == fam and "auroc" in r]
                    return float(np.mean(values)) if values else float("nan")
                a, b = mean(with_labels), mean(without)
                rows.append((f"{fam}, la {la}: {estimator} with labels {a:.4f} >= without {b:.4f}", a >= b))
    return rows
UNSUPERVISED_BASELINES = ("IsolationForest", "OneClassSVM")


def goal_rows(records: list[dict]) -> list[tuple[str, bool]]:
    """Issue 28's goal rows on a run of the whole protocol: (the row with its numbers, whether it holds).
    DLM-SVDD's rank is taken among it and the labelled baselines the goal names (XGBoost, Deep SAD,
    DevNet, PReNet, the RBF SVC); the summary's rank is over every method."""
    s = summary(records)
    name = {key: next(m for m in s if m.startswith(key)) for key in
            ("DLM-SVDD", "LpSVDD with labels (defaults)", "LpSVDD one-class", "Deep SAD", "RBF SVC",
             *UNSUPERVISED_BASELINES)}
    dlm, lab, one = name["DLM-SVDD"], name["LpSVDD with labels (defaults)"], name["LpSVDD one-class"]
    baselines = [m for m in s if not m.startswith(OWN_METHODS + UNSUPERVISED_BASELINES) and s[m]["tasks"]]
    versus = summary([r for r in records if r["method"] in (dlm, *baselines)])
    las = sorted(s[dlm]["auroc"])
    rows = []
    for la in las:
        best = max(baselines, key=lambda m: s[m]["auroc"].get(la, -1.0))
        rows.append((f"la {la}: DLM-SVDD {s[dlm]['auroc'][la]:.3f} >= best baseline ({best}) "
                     f"{s[best]['auroc'][la]:.3f}", s[dlm]["auroc"][la] >= s[best]["auroc"][la]))
    runner_up = min((m for m in baselines), key=lambda m: versus[m]["rank"])
    rows.append((f"DLM-SVDD's average rank among it and the baselines {versus[dlm]['rank']:.2f} < next "
                 f"({runner_up}) {versus[runner_up]['rank']:.2f}", versus[dlm]["rank"] < versus[runner_up]["rank"]))
    ratio = s[dlm]["fit_seconds"] / s[name["Deep SAD"]]["fit_seconds"]
    rows.append((f"DLM-SVDD's mean fit time {ratio:.2f}x Deep SAD's <= 3x", ratio <= 3.0))
    for la in las:
        others = [one, *(name[m] for m in UNSUPERVISED_BASELINES)]
        top = max(others, key=lambda m: s[m]["auroc"][la])
        rows.append((f"la {la}: LpSVDD with labels {s[lab]['auroc'][la]:.3f} > its one-class fit, IsolationForest and "
                     f"OneClassSVM (best {s[top]['auroc'][la]:.3f})", s[lab]["auroc"][la] > s[top]["auroc"][la]))
    svc = name["RBF SVC"]
    rows.append((f"la {las[-1]}: LpSVDD with labels {s[lab]['auroc'][las[-1]]:.3f} >= RBF SVC "
                 f"{s[svc]['auroc'][las[-1]]:.3f}", s[lab]["auroc"][las[-1]] >= s[svc]["auroc"][las[-1]]))
    gain = s[lab]["auroc"][las[-1]] - s[lab]["auroc"][las[0]]
    rows.append((f"LpSVDD with labels gains {gain:+.3f} from la {las[0]} to {las[-1]}", gain > 0))
    return rows
