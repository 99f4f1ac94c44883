"""Issue 46: do the decisions keep their promise on new data? The realised false-alarm share of
fresh normal rows at the default threshold (contamination 0.1), at ``predict(X, fpr=0.05)`` and the
false-discovery proportion of ``predict(X, fdr=0.1)`` (Benjamini-Hochberg over a batch of 900 new
normals and 100 anomalies), with the power beside them (AUROC, the share of anomalies flagged), for
``LpSVDD()`` and ``DLMSVDD()`` at their defaults, fitted without labels and with a few.

    python tests/benchmarks/calibration_study.py synthetic OUT.json     # n x d grid, N(0, I) normals
    python tests/benchmarks/calibration_study.py kernels OUT.json       # every kernel, n 1000 (and 20,000)
    python tests/benchmarks/calibration_study.py sets OUT.json [DIR]    # held-out normals of data sets
    CALIBRATION_SETS=MVTec,CIFAR,SVHN CALIBRATION_SCALING=none python ... sets OUT.json   # a subset, unscaled
    python tests/benchmarks/calibration_study.py table AFTER.json [BEFORE.json]
    python tests/benchmarks/calibration_study.py times                  # LpSVDD's fit with and without cross-fitting

Run it with ``OMP_NUM_THREADS=1``. ``sets`` reads every ``*.npz`` (``X``, ``y`` with 1 = anomaly) of
DIR (default: ADBench's development sets, ../shared/data/adbench-dev): the rates are meant to be
checked again on data sets that were not used here. The same script run on an older checkout (its
PYTHONPATH) gives the "before" records: a rule that checkout refuses is recorded as such.

Data. Synthetic: n training rows of N(0, I_d) (with labels: n / 20 labelled anomalies more), 2000
fresh normal rows and 500 anomalies of N(0, 1.25^2 I_d) (variance-inflated: hard in 2-d, plain in
128-d). Data sets: at most 10,000 rows (a seeded draw), the normal rows split 70 / 30 (seeded), the
70% train (with labels: and 25% of 70% of the anomalies, labelled; the other training anomalies are
left out), min-max scaled by the training rows; the 30% are the new normals, the anomalies not
trained on are the anomalies. Nothing here chooses anything: the rules were set before these runs.

Rates. A conformal rule's realised share varies with its calibration draw: over draws of n_cal
exchangeable calibration scores the rule p <= level flags a new normal row with probability
mu = floor(level (n_cal + 1)) / (n_cal + 1), its conditional rate having the Beta variance
mu (1 - mu) / (n_cal + 2). So besides the realised share's binomial (Clopper-Pearson) interval, a
table gives the 95% interval the pooled share falls in when the rule is exact (those two variances
over the fits pooled, ``expected_interval``); "in" says whether the realised share lies in it.
"""

from __future__ import annotations

import json
import math
import os
import sys
import time
import warnings
from pathlib import Path

import numpy as np
import scipy.stats
from sklearn.metrics import roc_auc_score

CONTAMINATION, FPR, FDR = 0.1, 0.05, 0.1
N_NEW, N_ANOMALIES = 2000, 500
ANOMALY_SCALE = 1.25  # anomalies: N(0, 1.25^2 I_d), hard to tell in 2-d, plain in 128-d
BATCH_NORMALS, BATCH_ANOMALIES = 900, 100  # the BH batch
SIZES, DIMENSIONS = (100, 300, 1000, 5000), (2, 8, 32, 128, 512)
# fits per cell: the calibration draw's spread shrinks with n_cal, so small cells take more fits
SEEDS = {100: 40, 300: 20, 1000: 8, 5000: 3}
LABELLED_SHARE = 0.05  # synthetic with labels: n * this labelled anomalies
SET_SEEDS = (0, 1, 2)
SET_LABELLED = 0.25  # data sets with labels: this share of the training anomalies labelled
MAX_ROWS, NEW_SHARE = 10_000, 0.3
DEV_SETS = Path(__file__).resolve().parents[2].parent / "shared" / "data" / "adbench-dev"
KERNELS = ("exact", "nystrom", "rpcholesky", "rff", "qmc_rff", "orf", "sorf", "fastfood")


def fit_lpsvdd(X, y, seed, **params):
    from dlmsvdd_ext import LpSVDD

    return LpSVDD(random_state=seed, **params).fit(X, y)


def fit_dlmsvdd(X, y, seed):
    from dlmsvdd import DLMSVDD

    return DLMSVDD(seed=seed, verbose=0).fit(X.astype(np.float32), y)


ESTIMATORS = {"LpSVDD": fit_lpsvdd, "DLMSVDD": fit_dlmsvdd}


def _flags(predict, X, **level):
    """The rows a rule flags (bool), or None where this checkout refuses the rule (no calibration)."""
    try:
        return np.asarray(predict(X, **level)) == -1
    except ValueError:  # dlmsvdd_ext.conformal.NotCalibrated: LpSVDD before issue 46
        return None


def measure(model, normals: np.ndarray, anomalies: np.ndarray, dtype=np.float64) -> dict:
    """One fit's counts on new rows: false alarms and anomalies flagged by each rule, the BH batch's
    false-discovery proportion and power, the AUROC and the calibration size."""
    normals, anomalies = normals.astype(dtype), anomalies.astype(dtype)
    f = np.r_[model.dissimilarity(normals), model.dissimilarity(anomalies)]
    truth = np.r_[np.zeros(len(normals)), np.ones(len(anomalies))]
    record = {"n_new": len(normals), "n_anomalies": len(anomalies), "auroc": float(roc_auc_score(truth, f)),
              "n_cal": int(getattr(model, "n_calibration_", 0) or 0), "rule": str(model.threshold_rule_)}
    both = np.r_[normals, anomalies]
    for name, level in (("default", {}), ("fpr", {"fpr": FPR})):
        flagged = _flags(model.predict, both, **level)
        record[f"{name}_false"] = None if flagged is None else int(flagged[:len(normals)].sum())
        record[f"{name}_found"] = None if flagged is None else int(flagged[len(normals):].sum())
    batch = np.r_[normals[:BATCH_NORMALS], anomalies[:BATCH_ANOMALIES]]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # BH flagging none says so; counted here
        flagged = _flags(model.predict, batch, fdr=FDR)
    if flagged is not None:
        normal = np.arange(len(batch)) < min(BATCH_NORMALS, len(normals))
        record["fdp"] = float((flagged & normal).sum() / max(1, flagged.sum()))
        record["bh_power"] = float(flagged[~normal].mean())
    return record


def _run(estimator: str, X, y, seed, normals, anomalies, **params) -> dict:
    fit = ESTIMATORS[estimator]
    start = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # convergence and too-few-rows warnings: the records say what happened
        model = fit(X, y, seed, **params)
    seconds = time.perf_counter() - start
    dtype = np.float32 if estimator == "DLMSVDD" else np.float64
    return {"estimator": estimator, "seed": seed, "fit_seconds": seconds, **measure(model, normals, anomalies, dtype)}


def synthetic_case(n: int, d: int, seed: int, labelled: bool):
    rng = np.random.default_rng([46, n, d, seed])
    X = rng.standard_normal((n, d))
    y = np.ones(n, dtype=int)
    if labelled:
        A = rng.standard_normal((max(1, int(n * LABELLED_SHARE)), d)) * ANOMALY_SCALE
        X, y = np.r_[X, A], np.r_[y, -np.ones(len(A), dtype=int)]
    return X, y, rng.standard_normal((N_NEW, d)), rng.standard_normal((N_ANOMALIES, d)) * ANOMALY_SCALE


def synthetic(log=print) -> list[dict]:
    records = []
    for labelled in (False, True):
        for n in SIZES:
            for d in DIMENSIONS:
                for seed in range(SEEDS[n] if not labelled else max(2, SEEDS[n] // 2)):
                    X, y, normals, anomalies = synthetic_case(n, d, seed, labelled)
                    for estimator in ESTIMATORS:
                        records.append({"case": "synthetic", "n": n, "d": d, "labelled": labelled,
                                        **_run(estimator, X, y if labelled else None, seed, normals, anomalies)})
                if log:
                    log(f"synthetic labelled={labelled} n={n} d={d} done", flush=True)
    return records


def kernels(log=print) -> list[dict]:
    """LpSVDD on every kernel (m = 256) at n = 1000, d = 32 and 128, and "auto" at 20,000 rows (Nystrom,
    1000 normals held out)."""
    records = []
    for kernel in KERNELS:
        for d in (32, 128):
            for seed in range(8):
                X, _, normals, anomalies = synthetic_case(1000, d, seed, False)
                records.append({"case": "kernels", "kernel": kernel, "n": 1000, "d": d, "labelled": False,
                                **_run("LpSVDD", X, None, seed, normals, anomalies, kernel=kernel)})
            if log:
                log(f"kernel {kernel} d={d} done", flush=True)
    for d in (8, 128):
        for seed in range(10):
            X, _, normals, anomalies = synthetic_case(20_000, d, seed, False)
            records.append({"case": "kernels", "kernel": "auto", "n": 20_000, "d": d, "labelled": False,
                            **_run("LpSVDD", X, None, seed, normals, anomalies)})
    return records


def set_case(X, y, seed: int, labelled: bool, scaling: str = "minmax"):
    """The held-out-normals protocol on one set (module docstring); ``scaling`` "none" leaves the
    rows as they are (the min-max scaler is fitted on every training row, the rows that calibrate
    among them, so it is a preprocessing step those rows are in-sample for)."""
    from sklearn.preprocessing import MinMaxScaler

    X, y = np.asarray(X, dtype=np.float64), np.asarray(y).astype(int).ravel()
    rng = np.random.default_rng(seed)
    if len(y) > MAX_ROWS:
        keep = np.sort(rng.choice(len(y), MAX_ROWS, replace=False))
        X, y = X[keep], y[keep]
    normal, anomalous = rng.permutation(np.flatnonzero(y == 0)), rng.permutation(np.flatnonzero(y == 1))
    new = int(round(NEW_SHARE * len(normal)))
    train, new_normals = normal[new:], normal[:new]
    targets = np.ones(len(train), dtype=int)
    test_anomalies = anomalous
    if labelled:
        trained = anomalous[int(round(NEW_SHARE * len(anomalous))):]
        chosen = trained[:max(1, math.ceil(SET_LABELLED * len(trained) - 1e-9))]
        test_anomalies = anomalous[:len(anomalous) - len(trained)]
        train, targets = np.r_[train, chosen], np.r_[targets, -np.ones(len(chosen), dtype=int)]
    scale = MinMaxScaler().fit(X[train]).transform if scaling == "minmax" else np.asarray
    return scale(X[train]), targets, scale(X[new_normals]), scale(X[test_anomalies])


def sets(folder: Path = DEV_SETS, log=print) -> list[dict]:
    """Every set of ``folder`` (those whose names hold one of CALIBRATION_SETS's comma-separated
    substrings), min-max scaled unless CALIBRATION_SCALING is "none"."""
    wanted = [w for w in os.environ.get("CALIBRATION_SETS", "").split(",") if w]
    scaling = os.environ.get("CALIBRATION_SCALING", "minmax")
    records = []
    for path in sorted(Path(folder).glob("*.npz")):
        if wanted and not any(w.lower() in path.stem.lower() for w in wanted):
            continue
        with np.load(path, allow_pickle=False) as data:
            X, y = data["X"], data["y"]
        family = "embeddings" if path.stem.split("_")[0] in ("CIFAR10", "SVHN", "MVTec-AD") else "tabular"
        for labelled in (False, True):
            for seed in SET_SEEDS:
                X_train, targets, normals, anomalies = set_case(X, y, seed, labelled, scaling)
                for estimator in ESTIMATORS:
                    records.append({"case": "sets", "set": path.stem, "family": family, "labelled": labelled,
                                    "scaling": scaling,
                                    **_run(estimator, X_train, targets if labelled else None, seed, normals,
                                           anomalies)})
        if log:
            log(f"{path.stem} done", flush=True)
    return records


def times(repeats: int = 5) -> str:
    """LpSVDD's fit seconds without calibration (``calibration=None``: the boundary alone, the fit
    before issue 46 less its in-sample quantile) and with the default cross-fitting, interleaved in
    one process (the best of ``repeats`` each), on N(0, I_d) rows."""
    from dlmsvdd_ext import LpSVDD

    lines = ["| n | d | kernel | fit s, calibration=None | fit s, cross-fitted | ratio | n_cal |",
             "|" + " --- |" * 7]
    for n, d in ((100, 8), (300, 32), (1000, 32), (1000, 128), (5000, 32), (5000, 128), (10_000, 128), (50_000, 32),
                 (200_000, 32)):
        X = np.random.default_rng(0).standard_normal((n, d)).astype(np.float32)
        best = {None: math.inf, "auto": math.inf}
        for _ in range(repeats):
            for calibration in best:
                start = time.perf_counter()
                model = LpSVDD(random_state=0, calibration=calibration).fit(X)
                best[calibration] = min(best[calibration], time.perf_counter() - start)
        lines.append(f"| {n:,} | {d} | {model.kernel_} | {best[None]:.3f} | {best['auto']:.3f} | "
                     f"{best['auto'] / best[None]:.2f} | {model.n_calibration_} |")
    return "\n".join(lines)


# ---- the tables

def exact_rate(level: float, n_cal: int) -> float:
    """floor(level (n_cal + 1)) / (n_cal + 1): the rate p <= level flags exchangeable new scores at
    (below 1 / (n_cal + 1): the rows above every calibration score, 1 / (n_cal + 1))."""
    return max(1, math.floor(level * (n_cal + 1) + 1e-9)) / (n_cal + 1)


def expected_interval(level: float, fits: list[dict]) -> tuple[float, float, float]:
    """The pooled share an exact conformal rule gives over these fits: its mean and 95% interval
    (each fit's Beta variance of its conditional rate and the binomial variance of its new rows)."""
    m = np.array([r["n_new"] for r in fits], dtype=np.float64)
    mu = np.array([exact_rate(level, r["n_cal"]) for r in fits])
    var_rate = mu * (1 - mu) / (np.array([r["n_cal"] for r in fits]) + 2.0)
    var = (m ** 2 * var_rate + m * (mu * (1 - mu) - var_rate)).sum() / m.sum() ** 2
    mean = float((m * mu).sum() / m.sum())
    return mean, mean - 1.96 * math.sqrt(var), mean + 1.96 * math.sqrt(var)


def answered(fits: list[dict], key: str) -> list[dict]:
    """The fits whose rule answered (not refused: no calibration, or a level below 1 / (n_cal + 1))."""
    return [r for r in fits if r[key] is not None]


def realised(fits: list[dict], key: str) -> tuple[float, float, float] | None:
    """The pooled share of new normal rows flagged by the fits that answered, and its
    Clopper-Pearson 95% interval (None: every fit refused)."""
    fits = answered(fits, key)
    if not fits:
        return None
    k, n = sum(r[key] for r in fits), sum(r["n_new"] for r in fits)
    interval = scipy.stats.binomtest(k, n).proportion_ci(0.95, method="exact")
    return k / n, interval.low, interval.high


def _rate_cell(fits, key, level) -> str:
    """"realised [binomial 95%] | exact rule's mean [95%]", the realised share marked when it lies
    outside the exact rule's interval."""
    got = realised(fits, key)
    if got is None:
        return "refused | "
    share, low, high = got
    mean, e_low, e_high = expected_interval(level, answered(fits, key))
    mark = "" if e_low <= share <= e_high else " (outside)"
    refused = len(fits) - len(answered(fits, key))
    note = f" ({refused} fits refused: too few calibration normals)" if refused else ""
    return f"{share:.3f} [{low:.3f}, {high:.3f}]{mark}{note} | {mean:.3f} [{max(0.0, e_low):.3f}, {e_high:.3f}]"


def _mean(fits, key) -> float | None:
    values = [r.get(key) for r in fits]
    return None if any(v is None for v in values) else float(np.mean(values))


def _share_found(fits, key) -> float | None:
    fits = answered(fits, key)
    if not fits:
        return None
    return sum(r[key] for r in fits) / sum(r["n_anomalies"] for r in fits)


def _fmt(value) -> str:
    return "refused" if value is None else f"{value:.3f}"


def _cell(key: tuple) -> list[str]:
    """The row's leading cells: labels, then the case's own keys (n, d; kernel, n, d; family)."""
    return ["yes" if key[2] else "no", *(f"{k:,}" if isinstance(k, int) else str(k) for k in key[3:])]


def _heads(case: str) -> list[str]:
    return ["labels", *{"synthetic": ["n", "d"], "kernels": ["kernel", "n", "d"], "sets": ["family"]}[case]]


def groups(records: list[dict]) -> dict:
    """Records grouped by what a table row shows."""
    out = {}
    for r in records:
        if r["case"] == "sets":
            key = (r["case"], r["estimator"], r["labelled"], r["family"])
        elif r["case"] == "kernels":
            key = (r["case"], r["estimator"], r["labelled"], r["kernel"], r["n"], r["d"])
        else:
            key = (r["case"], r["estimator"], r["labelled"], r["n"], r["d"])
        out.setdefault(key, []).append(r)
    return out


def rates_table(records: list[dict], estimator: str) -> str:
    """One estimator's realised rates beside their targets: per row the fits pooled, the realised
    share of new normal rows flagged with its binomial (Clopper-Pearson) 95% interval, the exact
    conformal rule's share with the 95% interval it falls in (``expected_interval``), and the BH
    batches' mean false-discovery proportion."""
    chosen = [r for r in records if r["estimator"] == estimator]
    if not chosen:
        return ""
    heads = _heads(chosen[0]["case"])
    lines = ["| " + " | ".join(heads) + " | fits | n_cal | contamination 0.1: realised [binomial 95%] | exact rule "
             "[95%] | fpr 0.05: realised [binomial 95%] | exact rule [95%] | fdr 0.1: mean FDP (se) |",
             "|" + " --- |" * (len(heads) + 7)]
    for key, fits in groups(chosen).items():
        fdp = [r["fdp"] for r in fits if "fdp" in r]
        fdr = f"{np.mean(fdp):.3f} ({np.std(fdp, ddof=1) / math.sqrt(len(fdp)):.3f})" if len(fdp) > 1 else "refused"
        n_cal = sorted({r["n_cal"] for r in fits})
        lines.append("| " + " | ".join(_cell(key)) + f" | {len(fits)} | "
                     f"{n_cal[0]}{'' if len(n_cal) == 1 else '-' + str(n_cal[-1])} | "
                     f"{_rate_cell(fits, 'default_false', CONTAMINATION)} | {_rate_cell(fits, 'fpr_false', FPR)} | "
                     f"{fdr} |")
    return "\n".join(lines)


def power_table(after: list[dict], before: list[dict] | None, estimator: str, seconds: bool = True) -> str:
    """One estimator's AUROC, the share of new normal rows the default rule flags and the share of
    anomalies each rule flags, and the fit seconds, before -> after (where ``before`` is given)."""
    chosen = [r for r in after if r["estimator"] == estimator]
    if not chosen:
        return ""
    old = groups(before) if before else {}
    heads = _heads(chosen[0]["case"])
    lines = ["| " + " | ".join(heads) + " | AUROC | default: normals flagged | default: anomalies flagged | "
             "fpr 0.05: anomalies flagged | fdr 0.1: anomalies flagged |" + (" fit s |" if seconds else ""),
             "|" + " --- |" * (len(heads) + 5 + seconds)]

    def pair(fits_after, fits_before, value):
        now = value(fits_after)
        return _fmt(now) if fits_before is None else f"{_fmt(value(fits_before))} -> {_fmt(now)}"

    for key, fits in groups(chosen).items():
        prior = old.get(key)
        cells = [pair(fits, prior, lambda f: _mean(f, "auroc")),
                 pair(fits, prior, lambda f: None if realised(f, "default_false") is None
                      else realised(f, "default_false")[0]),
                 pair(fits, prior, lambda f: _share_found(f, "default_found")),
                 pair(fits, prior, lambda f: _share_found(f, "fpr_found")),
                 pair(fits, prior, lambda f: _mean(f, "bh_power") if all("bh_power" in r for r in f) else None)]
        if seconds:  # one process's wall time: compare only within a run, on a quiet machine
            cells.append(pair(fits, prior, lambda f: _mean(f, "fit_seconds")))
        lines.append("| " + " | ".join(_cell(key)) + " | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def summary(records: list[dict]) -> str:
    """How many rows' realised shares lie outside the exact rule's 95% interval, per estimator and rule
    (about 1 in 20 would, by chance alone)."""
    out = []
    for estimator in ESTIMATORS:
        rows = [fits for key, fits in groups(records).items() if key[1] == estimator]
        for key, level in (("default_false", CONTAMINATION), ("fpr_false", FPR)):
            outside = 0
            for fits in rows:
                got = realised(fits, key)
                if got is not None:
                    _, low, high = expected_interval(level, answered(fits, key))
                    outside += not low <= got[0] <= high
            out.append(f"{estimator} {key.split('_')[0]}: {outside} of {len(rows)} rows outside")
    return "; ".join(out)


def tables(after: list[dict], before: list[dict] | None = None, seconds: bool = True) -> str:
    parts = []
    for estimator in ESTIMATORS:
        parts += [f"{estimator}: rates", rates_table(after, estimator), "",
                  f"{estimator}: power" + (" (before -> after)" if before else ""),
                  power_table(after, before, estimator, seconds), ""]
    return "\n".join(parts + [summary(after)])


def main(argv: list[str]) -> int:
    command = argv[0] if argv else "table"
    if command == "table":
        after = json.loads(Path(argv[1]).read_text())
        before = json.loads(Path(argv[2]).read_text()) if len(argv) > 2 else None
        print(tables(after, before))
        return 0
    if command == "times":
        print(times())
        return 0
    out = Path(argv[1])
    if command == "synthetic":
        records = synthetic()
    elif command == "kernels":
        records = kernels()
    elif command == "sets":
        records = sets(Path(argv[2]) if len(argv) > 2 else Path(os.environ.get("CALIBRATION_DATA", DEV_SETS)))
    else:
        raise SystemExit(f"unknown command {command!r}: synthetic, kernels, sets or table")
    out.write_text(json.dumps(records))
    print(tables(records))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
