"""Are the attributions right? Issue 36's goal-2 cases, on ADBench's development sets and on digits.

Vectors, per set (ADBench's semi-supervised protocol, ``adbench_protocol.make_task``; the estimator
fitted on the task's training rows with its labelled anomalies):

* **shift**: a normal test row with one feature (drawn at random among the non-constant ones) moved
  by 6 training standard deviations (sign drawn at random); hit = the top-1 attribution names it.
* **contextual**: a normal test row the model calls normal with one feature replaced by that
  feature's value in another normal row (a training normal, drawn at random): a value normal for
  the column, possibly wrong for the row. Kept where the model then flags the row (several draws
  per row); hit as above.

Baseline: the feature of largest |z-score| (training normals' mean and standard deviation), which
sees a shifted feature but not a contextual one. Alternatives to the package's method
(``ALTERNATIVES``) are measured on the same rows, for the choice of method.

Images: digits, one class normal; a 2x2 patch of background (pixels 0 in the image) set to the
brightest value; the map's per-image pixel AUROC against the patch mask, mean over images.
"""

from __future__ import annotations

import time

import numpy as np
import torch
from sklearn.metrics import roc_auc_score

from dlmsvdd_ext import explain, feature_ranges

from benchmarks import adbench_protocol as protocol

SHIFT = 6.0  # training standard deviations
ROWS = 100  # normal test rows per set and case
CONTEXT_DRAWS = 20  # (feature, donor) draws per row for the contextual case
SCORED = {"explain": "auto", "repair": "repair"}  # record key -> explain's method: the default, and f's repairs


def z_baseline(X_train_normal: np.ndarray):
    mean, std = X_train_normal.mean(0), X_train_normal.std(0)
    std = np.where(std > 0, std, 1.0)
    return lambda X: np.abs((X - mean) / std)


def shifted_rows(X_test_normal, X_train_normal, rng):
    """(rows, moved feature) for the shift case."""
    std = X_train_normal.std(0)
    usable = np.flatnonzero(std > 0)
    rows = X_test_normal[rng.permutation(len(X_test_normal))[:ROWS]].copy()
    j = rng.choice(usable, len(rows))
    rows[np.arange(len(rows)), j] += SHIFT * std[j] * rng.choice([-1.0, 1.0], len(rows))
    return rows, j


def contextual_rows(X_test_normal, X_train_normal, flagged, rng):
    """(rows, replaced feature) for the contextual case: draws the model flags (``flagged(rows)``
    -> bool), from test normals it does not flag."""
    base = X_test_normal[~flagged(X_test_normal)]
    base = base[rng.permutation(len(base))[:ROWS]]
    usable = np.flatnonzero(X_train_normal.std(0) > 0)
    rows = np.repeat(base, CONTEXT_DRAWS, axis=0)
    j = rng.choice(usable, len(rows))
    donors = X_train_normal[rng.integers(0, len(X_train_normal), len(rows))]
    rows[np.arange(len(rows)), j] = donors[np.arange(len(rows)), j]
    keep = flagged(rows) & (rows != np.repeat(base, CONTEXT_DRAWS, axis=0)).any(1)
    return rows[keep], j[keep]


def hit_rate(attributions: np.ndarray, j: np.ndarray) -> float:
    return float(np.mean(np.argmax(attributions, axis=1) == j)) if len(j) else float("nan")


# ---- the alternatives measured before choosing (issue 36's "How"): each (model's f, rows, reference) -> (n, d)

def _torch_score(model):
    return lambda x: model._dissimilarity(x)


def gradient_times_deviation(f, X, reference):
    """The gradient of f at x times x minus its nearest normal row."""
    b = explain.nearest(X, reference)
    x = X.detach().clone().requires_grad_(True)
    return ((X - b) * torch.autograd.grad(f(x).sum(), x)[0]).detach()


def occlusion(f, X, reference, draws: int = 8, seed: int = 0):
    """f(x) minus the mean f of x with feature j replaced by the values of ``draws`` random normal rows."""
    g = torch.Generator().manual_seed(seed)
    donors = reference[torch.randint(len(reference), (draws,), generator=g)]
    with torch.no_grad():
        fx = f(X)
        out = torch.empty_like(X)
        for j in range(X.shape[1]):
            drops = []
            for d in donors:
                Xj = X.clone()
                Xj[:, j] = d[j]
                drops.append(fx - f(Xj))
            out[:, j] = torch.stack(drops).mean(0)
    return out


def nearest_occlusion(f, X, reference):
    """f(x) minus f of x with feature j set to its nearest normal row's value (one feature back to normal)."""
    b = explain.nearest(X, reference)
    with torch.no_grad():
        fx = f(X)
        out = torch.empty_like(X)
        for j in range(X.shape[1]):
            Xj = X.clone()
            Xj[:, j] = b[:, j]
            out[:, j] = fx - f(Xj)
    return out


def integrated(steps):
    return lambda f, X, reference: explain.integrated(f, X, reference, steps=steps)


def leave_out_nearest_repair(f, X, reference):
    """f(x) minus f of x with feature j set to the value of the reference row nearest to x without j."""
    return feature_ranges.attribute(f, X, reference, neighbours=1, pool=len(reference))


def range_repair(neighbours, pool=None):
    """The package's repairs with other numbers of neighbours, or the whole reference searched (pool None)."""
    return lambda f, X, reference: feature_ranges.attribute(f, X, reference, neighbours=neighbours,
                                                            pool=pool or len(reference))


def outside(pool=None):
    """The package's default (how far outside the range, in standard deviations) with another pool."""
    return lambda f, X, reference: feature_ranges.outside(X, reference, pool=pool or len(reference))


def _range_parts(f, X, reference):
    """(repairs of f, distance outside the range, the range's width) of the package's search."""
    reference = reference.to(X.device, X.dtype)
    lo, hi = feature_ranges.ranges(X, reference)
    distance = torch.relu(lo - X) + torch.relu(X - hi)
    return feature_ranges.attribute(f, X, reference), distance, hi - lo


def outside_where_repair_lowers_f(f, X, reference):
    repairs, distance, _ = _range_parts(f, X, reference)
    return distance / feature_ranges.column_scale(reference.to(X.dtype)) * (repairs > 0)


def repair_times_outside(f, X, reference):
    repairs, distance, _ = _range_parts(f, X, reference)
    return repairs.clamp(min=0) * distance / feature_ranges.column_scale(reference.to(X.dtype))


def outside_in_widths(f, X, reference):
    _, distance, width = _range_parts(f, X, reference)
    return distance / (width + 1e-3 * feature_ranges.column_scale(reference.to(X.dtype)))


ALTERNATIVES = {"IG from nearest normal, 1 step": integrated(1), "IG, 2 steps": integrated(2),
                "IG, 8 steps": integrated(8), "gradient at x x (x - nearest normal)": gradient_times_deviation,
                "occlusion by 8 normal rows' values": occlusion,
                "occlusion by the nearest normal row's value": nearest_occlusion,
                "repair to the nearest row without j's value": leave_out_nearest_repair,
                "range repair, 8 rows": range_repair(8), "range repair, 16 rows": range_repair(16),
                "range repair, 32 rows": range_repair(32), "range repair, 32 of 256 rows": range_repair(32, 256),
                "outside in sd, 16 of 32 rows": outside(32), "outside in sd, 16 of 128 rows": outside(128),
                "outside in sd, 16 of all rows": outside(), "outside in sd where the repair lowers f":
                outside_where_repair_lowers_f, "repair x outside in sd": repair_times_outside,
                "outside in widths of the range": outside_in_widths}


def lpsvdd_case(task):
    """LpSVDD at its defaults on the task: (explain(X), flagged(X), f-and-reference for alternatives)."""
    from dlmsvdd_ext import LpSVDD

    model = LpSVDD(random_state=task.seed).fit(task.X_train, np.where(task.labelled, -1, 1))
    alt = (_torch_score(model), lambda X: torch.as_tensor(X, dtype=model.dual_coef_.dtype), model.reference_)
    return (lambda X, method="auto": model.explain(X, method=method)), lambda X: model.predict(X) < 0, alt


def dlmsvdd_case(task):
    """DLMSVDD at its defaults (float32 rows, as the ADBench benchmark fits it)."""
    from dlmsvdd import DLMSVDD

    model = DLMSVDD(seed=task.seed, verbose=0).fit(task.X_train.astype(np.float32), np.where(task.labelled, -1, 1))
    network, svdd = model.network_.eval(), model.svdd_

    def f(x):  # f of the network's input (the standardised columns), as DLMSVDD.explain attributes it
        return svdd._dissimilarity(network(x).to(svdd.dual_coef_.dtype))

    alt = (f, lambda X: model._images(X.astype(np.float32)).to(model.device), model.reference_.to(model.device))
    return (lambda X, method="auto": model.explain(X.astype(np.float32), method=method),
            lambda X: model.predict(X.astype(np.float32)) < 0, alt)


ESTIMATORS = {"LpSVDD": lpsvdd_case, "DLMSVDD": dlmsvdd_case}


def vector_study(name: str, estimator: str, seed: int = 0, la: float = 0.05, alternatives: bool = False) -> dict:
    """Hit rates on one development set: the package's explain, |z| and (optionally) the alternatives."""
    X, y = protocol.load(name)
    task = protocol.make_task(X, y, seed, la, name)
    normal_train = task.X_train[(task.y_train == 0) & ~task.labelled]
    normal_test = task.X_test[task.y_test == 0]
    explain_rows, flagged, alt = ESTIMATORS[estimator](task)
    z = z_baseline(normal_train)
    rng = np.random.default_rng(seed)
    record = {"set": name, "estimator": estimator}
    for case, (rows, j) in {"shift": shifted_rows(normal_test, normal_train, rng),
                            "contextual": contextual_rows(normal_test, normal_train, flagged, rng)}.items():
        record[f"{case}_n"] = len(j)
        for key, method in SCORED.items():
            record[f"{case}_{key}"] = hit_rate(explain_rows(rows, method), j) if len(j) else float("nan")
        record[f"{case}_z"] = hit_rate(z(rows), j)
        if case == "shift":  # the rows the model flags: a small shift of a low-variance feature may not be seen
            seen = flagged(rows) if len(j) else np.zeros(0, dtype=bool)
            record["shift_flagged_n"] = int(seen.sum())
            for key, method in SCORED.items():
                record[f"shift_flagged_{key}"] = (hit_rate(explain_rows(rows[seen], method), j[seen]) if seen.any()
                                                  else float("nan"))
            record["shift_flagged_z"] = hit_rate(z(rows[seen]), j[seen])
        if alternatives and alt is not None and len(j):
            f, as_tensor, reference = alt
            for label, method in ALTERNATIVES.items():
                record[f"{case}_{label}"] = hit_rate(method(f, as_tensor(rows), reference).detach().cpu().numpy(), j)
    return record


def digits_patch_study(normal_class: int = 0, seed: int = 0, n_images: int = 100, estimator: str = "LpSVDD") -> dict:
    """Mean per-image pixel AUROC of the map against a 2x2 bright patch put on background."""
    from sklearn.datasets import load_digits

    digits = load_digits()
    images = (digits.images / 16.0).astype(np.float32)  # [0, 1]
    normal = images[digits.target == normal_class]
    rng = np.random.default_rng(seed)
    order = rng.permutation(len(normal))
    train, test = normal[order[: len(normal) // 2]], normal[order[len(normal) // 2:]][:n_images]
    patched, masks = test.copy(), np.zeros(test.shape, dtype=bool)
    for k, image in enumerate(patched):
        corners = [(r, c) for r in range(7) for c in range(7) if not image[r:r + 2, c:c + 2].any()]
        r, c = corners[rng.integers(len(corners))]
        image[r:r + 2, c:c + 2] = 1.0
        masks[k, r:r + 2, c:c + 2] = True
    if estimator == "LpSVDD":
        from dlmsvdd_ext import LpSVDD

        model = LpSVDD(random_state=seed).fit(train.reshape(len(train), -1))
        maps = model.explain(patched.reshape(len(patched), -1)).reshape(patched.shape)
    else:
        from dlmsvdd import DLMSVDD

        model = DLMSVDD(seed=seed, verbose=0).fit(train)
        maps = model.explain(patched)
    aurocs = [roc_auc_score(m.ravel(), a.ravel()) for m, a in zip(masks, maps)]
    return {"estimator": estimator, "normal_class": normal_class, "n_images": len(aurocs),
            "pixel_auroc": float(np.mean(aurocs))}


def speed_ratio(estimator: str = "LpSVDD", n: int = 10_000, d: int = 50, seed: int = 0) -> dict:
    """explain / score seconds for n rows of d features (a model fitted on 7,000 Gaussian rows), timed
    in this process, for the default method and the repairs; the better of two runs each."""
    rng = np.random.default_rng(seed)
    train, rows = rng.normal(size=(7000, d)), rng.normal(size=(n, d))
    if estimator == "LpSVDD":
        from dlmsvdd_ext import LpSVDD

        model = LpSVDD(random_state=seed).fit(train)
    else:
        from dlmsvdd import DLMSVDD

        model = DLMSVDD(seed=seed, verbose=0, epochs=1).fit(train.astype(np.float32))
        rows = rows.astype(np.float32)

    def best(call):
        times = []
        for _ in range(2):
            start = time.perf_counter()
            call(rows)
            times.append(time.perf_counter() - start)
        return min(times)

    score = best(model.dissimilarity)
    explained = {key: best(lambda X: model.explain(X, method=method)) for key, method in SCORED.items()}
    return {"estimator": estimator, "score_seconds": score, "explain_seconds": explained["explain"],
            "ratio": explained["explain"] / score, "repair_seconds": explained["repair"],
            "repair_ratio": explained["repair"] / score}
