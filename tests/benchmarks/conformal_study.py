"""Decision rules on digits one-vs-rest (issue 29): the realised false-positive rate on
the test normals and the power (share of test anomalies flagged) of the conformal rule
(p-value <= level, calibrated on the validation normals) beside the contamination-quantile
rule (flag f at or above the validation normals' 1 - level quantile), at the same levels,
for 10 classes x 3 seeds, with labelled anomalies (ratio 0.1) and without (one-class).

    python tests/benchmarks/conformal_study.py [EPOCHS]

A level below 1 / (n_cal + 1) is refused by the conformal rule (reported as such).
"""

from __future__ import annotations

import sys

import numpy as np

from dlmsvdd import DLMSVDD, datasets, tasks

LEVELS = (0.01, 0.05, 0.1)


def one_task(source, normal_class: int, ratio: float | None, seed: int, epochs: int) -> list[dict]:
    task = tasks.make_task(source, normal_class, ratio=ratio or 0.0, seed=seed)
    one_class = not ratio
    model = DLMSVDD(backbone="small_cnn", epochs=epochs, verbose=0, seed=seed, **({"nu": 1.0} if one_class else {}))
    model.fit(task.train, task.val)
    f_val, t_val = model.scores(task.val)
    f, t = model.scores(task.test)
    normal, anomalous = t > 0, t < 0
    rows = []
    for level in LEVELS:
        quantile = np.percentile(f_val[t_val > 0].astype(np.float64), 100 * (1 - level))
        rules = {"quantile": f >= quantile}
        if level >= 1 / (model.n_calibration_ + 1):
            rules["conformal"] = model.decide(f, fpr=level) < 0
            rules["bh"] = model.decide(f, fdr=level) < 0
        for rule, flagged in rules.items():
            rows.append({"class": normal_class, "seed": seed, "ratio": ratio, "level": level, "rule": rule,
                         "n_cal": model.n_calibration_, "fpr": float(flagged[normal].mean()),
                         "power": float(flagged[anomalous].mean()),
                         "fdp": float((flagged & normal).sum() / max(1, flagged.sum()))})
    return rows


def study(epochs: int = 2) -> list[dict]:
    source = datasets.digits()
    rows = []
    for ratio in (0.1, None):
        for seed in range(3):
            for c in range(10):
                rows += one_task(source, c, ratio, seed, epochs)
                print(f"ratio {ratio} seed {seed} class {c} done", file=sys.stderr, flush=True)
    return rows


def table(rows: list[dict]) -> str:
    lines = ["| labelled anomalies | level | quantile FPR | quantile power | conformal FPR | conformal power | "
             "BH FDP | BH power |", "| --- | --- | --- | --- | --- | --- | --- | --- |"]
    for ratio in (0.1, None):
        for level in LEVELS:
            cells = []
            for rule, keys in (("quantile", ("fpr", "power")), ("conformal", ("fpr", "power")),
                               ("bh", ("fdp", "power"))):
                chosen = [r for r in rows if r["ratio"] == ratio and r["level"] == level and r["rule"] == rule]
                cells += ([f"{np.mean([r[k] for r in chosen]):.3f}" for k in keys] if chosen else ["refused"] * 2)
            lines.append(f"| {'ratio 0.1' if ratio else 'none'} | {level:g} | " + " | ".join(cells) + " |")
    n_cal = sorted({r["n_cal"] for r in rows})
    lines.append(f"\ncalibration normals per task: {n_cal[0]}-{n_cal[-1]}")
    return "\n".join(lines)


if __name__ == "__main__":
    import json

    epochs = int(sys.argv[1]) if len(sys.argv) > 1 else 2
    results = study(epochs)
    print(json.dumps(results))
    print(table(results))
