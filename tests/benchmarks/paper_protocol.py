"""The paper's protocol on its own image sets, Fashion-MNIST and CIFAR-10 (issue 50), DLM-SVDD beside
its peers in the same run, on the same rows.

Three protocols (``--protocol``):

* ``labelled`` (Table II): each class normal in turn, labelled anomalies drawn from the other classes
  at ``ratio`` of the normal count, the stratified 80/20 validation split, the full test set
  (``tasks.make_task``); test AUROC. Methods: DLM-SVDD at its defaults (``TrainConfig`` with the
  data, class, ratio and seed; the small CNN from scratch), the same with the CNN frozen (the
  paper's "fixed CNN" ablation: the boundary alone on the starting network), Deep SAD and a
  supervised classifier on the same CNN trained alike (``benchmarks.image_peers``), and two
  detectors on the pixels (the network inputs, flattened, of the same training rows): the distance
  to the 5th nearest training normal (kNN, PyOD's default; it reads no anomaly label) and
  ``LpSVDD`` with the labels at its defaults.
* ``unlabelled`` (goal 3): one class normal, no label: ``benchmarks.one_class_images`` (``DLMSVDD()``
  against the kNN distance and the other detectors on the pixels).
* ``long-tailed`` (Table V): the training pool long-tailed at ``rho`` (``protocols.long_tailed_pool``),
  every other class of the pool anomalous; test balanced accuracy at the validation threshold of
  DLM-SVDD and its frozen CNN.

Each finished (protocol, method, class, ratio or rho, seed) is a line of the output file (its test
``auroc``, its ``seconds``, and for the trained methods ``val_auroc``, ``kept_epoch``, ``epochs`` and
``val_curve``, each epoch's validation AUROC); a run started again skips what the file holds. ``python tests/benchmarks/paper_protocol.py --help``.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np
import torch
from sklearn.neighbors import NearestNeighbors

from dlmsvdd_ext import LpSVDD

from dlmsvdd import DLMSVDD, TrainConfig, datasets, metrics, tasks

# The paper's Table II (AUROC, mean over the ten classes; DLM-SVDD with an ImageNet-pretrained
# ResNet-50) and Table V (balanced accuracy, %, CIFAR-10-LT).
PAPER = {
    ("fashion_mnist", 0.1): {"DLM-SVDD (paper, ResNet-50 ImageNet)": 0.976, "Deep SAD (paper)": 0.882},
    ("fashion_mnist", 0.5): {"DLM-SVDD (paper, ResNet-50 ImageNet)": 0.987},
    ("fashion_mnist", 0.75): {"DLM-SVDD (paper, ResNet-50 ImageNet)": 0.988, "Deep SAD (paper)": 0.981},
    ("cifar10", 0.1): {"DLM-SVDD (paper, ResNet-50 ImageNet)": 0.977, "Deep SAD (paper)": 0.860,
                       "single-kernel lp-SVDD (paper)": 0.958},
    ("cifar10", 0.5): {"DLM-SVDD (paper, ResNet-50 ImageNet)": 0.982, "single-kernel lp-SVDD (paper)": 0.969},
    ("cifar10", 0.75): {"DLM-SVDD (paper, ResNet-50 ImageNet)": 0.984, "Deep SAD (paper)": 0.925,
                        "single-kernel lp-SVDD (paper)": 0.972},
}
PAPER_ONE_CLASS = {"cifar10": {"Deep SVDD (paper)": 0.648}}
PAPER_LONG_TAILED = {  # balanced accuracy (%), CIFAR-10-LT
    100: {"DLM-SVDD (paper, joint)": 86.79, "DLM-SVDD (paper, fixed CNN)": 59.50},
    50: {"DLM-SVDD (paper, joint)": 89.11, "DLM-SVDD (paper, fixed CNN)": 65.18},
    10: {"DLM-SVDD (paper, joint)": 92.59, "DLM-SVDD (paper, fixed CNN)": 58.84},
}
LABELLED = ("DLM-SVDD", "DLM-SVDD, CNN frozen", "Deep SAD (same CNN)", "classifier (same CNN)", "kNN (k=5) on pixels",
            "LpSVDD on pixels")
LONG_TAILED = ("DLM-SVDD", "DLM-SVDD, CNN frozen")
PROTOCOLS = ("labelled", "unlabelled", "long-tailed")
K_DISTANCE = 5


def load_source(data: str, root):
    """The image source of ``data``: the fetch script's array file when the root holds it (the
    tensor pipeline, batches sliced whole; the same pixels as torchvision's files), else
    ``datasets.load``."""
    file = Path(root) / datasets.ARRAY_FILES[data] if data in datasets.ARRAY_FILES and root else None
    if file is not None and file.is_file():
        classes = {"cifar10": datasets.CIFAR10_CLASSES, "fashion_mnist": datasets.FASHION_MNIST_CLASSES}[data]
        return datasets.image_arrays(file, data, classes)
    return datasets.load(data, root)


def flat_inputs(data) -> np.ndarray:
    """The network inputs of a task's set, one flattened float64 row per image."""
    if hasattr(data, "take"):
        return data.take(np.arange(len(data)))[0].flatten(1).double().numpy()
    return np.stack([data[i][0].flatten().double().numpy() for i in range(len(data))])


def config_for(source, normal_class: int, seed: int, overrides: dict, ratio=None, rho=None) -> TrainConfig:
    """DLM-SVDD's configuration for a task: the defaults, the task's fields and ``overrides``."""
    return TrainConfig(data=source.name, normal_class=normal_class, ratio=ratio, rho=rho, seed=seed, verbose=0,
                       **overrides)


def _dlmsvdd(task, config: TrainConfig, device: str) -> dict:
    start = time.perf_counter()
    model = DLMSVDD(config, device=device).fit(task.train, task.val)
    seconds = time.perf_counter() - start
    f_test, t_test = model.scores(task.test)
    summary = metrics.summary(t_test, f_test, model.threshold_)
    return {"auroc": summary["auroc"], "balanced_accuracy": summary["balanced_accuracy"], "seconds": seconds,
            "epochs": model.training_params_["epochs"], "kept_epoch": model.best_epoch_,
            "val_auroc": metrics.auroc(*model.scores(task.val)[::-1]),
            # each epoch's validation AUROC (the boundary of that epoch): whether the fit still gained at its end
            "val_curve": [row.get("val_auroc") for row in model.history_]}


def labelled_task(source, normal_class: int, ratio: float, seed: int, overrides: dict, methods, device: str = "cpu"):
    """Each method's record on one task of the labelled protocol."""
    from benchmarks.image_peers import fit_peer

    task = tasks.make_task(source, normal_class, ratio=ratio, seed=seed)
    config = config_for(source, normal_class, seed, overrides, ratio=ratio)
    t_test = task.test.targets
    out = {}
    for method in methods:
        if method == "DLM-SVDD":
            out[method] = _dlmsvdd(task, config, device)
        elif method == "DLM-SVDD, CNN frozen":
            out[method] = _dlmsvdd(task, config_for(source, normal_class, seed, {**overrides, "frozen": True},
                                                    ratio=ratio), device)
        elif method in ("Deep SAD (same CNN)", "classifier (same CNN)"):
            fitted = fit_peer("deep_sad" if method.startswith("Deep SAD") else "classifier", task, config, device)
            out[method] = {"auroc": metrics.auroc(t_test, fitted.pop("test_scores")), **fitted}
        else:
            start = time.perf_counter()
            X_train, X_test = flat_inputs(task.train), flat_inputs(task.test)
            y_train = task.train.targets
            if method == "kNN (k=5) on pixels":
                knn = NearestNeighbors(n_neighbors=K_DISTANCE).fit(X_train[y_train > 0])
                scores = knn.kneighbors(X_test)[0][:, -1]
            elif method == "LpSVDD on pixels":
                scores = LpSVDD(random_state=seed).fit(X_train, y_train).dissimilarity(X_test)
            else:
                raise ValueError(f"unknown method {method!r}; choose from {LABELLED}")
            out[method] = {"auroc": metrics.auroc(t_test, scores), "seconds": time.perf_counter() - start}
    return out


def long_tailed_task(source, normal_class: int, rho: float, seed: int, overrides: dict, methods, device="cpu"):
    """DLM-SVDD (and its frozen CNN) on one class of the long-tailed pool: test balanced accuracy
    at the validation threshold, and AUROC."""
    task = tasks.make_task(source, normal_class, rho=rho, seed=seed)
    out = {}
    for method in methods:
        extra = {"frozen": True} if method == "DLM-SVDD, CNN frozen" else {}
        config = config_for(source, normal_class, seed, {"selection": "balanced_accuracy", **overrides, **extra},
                            rho=rho)
        out[method] = {**_dlmsvdd(task, config, device), "n_train": len(task.train)}
    return out


def unlabelled_task(source, normal_class: int, seed: int):
    """``benchmarks.one_class_images``'s methods on one class, no label."""
    from benchmarks import one_class_images

    anomalous, scored = one_class_images.task_scores(source, normal_class, seed)
    return {name: {"auroc": metrics.auroc(np.where(anomalous, -1, 1), scores), "seconds": seconds}
            for name, (scores, seconds) in scored.items()}


def _done(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()] if path.is_file() else []


def run(data: str, root, protocol: str, output, classes, seeds, ratios=(0.1, 0.75), rhos=(100, 50, 10), methods=None,
        overrides=None, device: str = "cpu", log=print) -> list[dict]:
    """Every task of a protocol not yet in ``output`` (JSON lines), appended as it finishes; all records."""
    if protocol not in PROTOCOLS:
        raise ValueError(f"unknown protocol {protocol!r}; choose from {PROTOCOLS}")
    overrides = overrides or {}
    output = Path(output)
    records = _done(output)
    source = load_source(data, root)
    settings = {"labelled": ratios, "long-tailed": rhos, "unlabelled": (None,)}[protocol]
    key = "rho" if protocol == "long-tailed" else "ratio"
    for seed in seeds:
        for setting in settings:
            for c in classes:
                task_key = {"data": data, "protocol": protocol, "class": c, key: setting, "seed": seed,
                            "overrides": overrides}
                have = {r["method"] for r in records if all(r.get(k) == v for k, v in task_key.items())}
                wanted = [m for m in (methods or {"labelled": LABELLED, "long-tailed": LONG_TAILED}.get(protocol, ()))
                          if m not in have]
                if protocol != "unlabelled" and not wanted or protocol == "unlabelled" and have:
                    continue
                start = time.perf_counter()
                if protocol == "labelled":
                    result = labelled_task(source, c, setting, seed, overrides, wanted, device)
                elif protocol == "long-tailed":
                    result = long_tailed_task(source, c, setting, seed, overrides, wanted, device)
                else:
                    result = unlabelled_task(source, c, seed)
                new = [{**task_key, "method": m, "threads": torch.get_num_threads(), "device": device, **r}
                       for m, r in result.items()]
                with output.open("a") as f:
                    f.writelines(json.dumps(r) + "\n" for r in new)
                records += new
                log(f"{data} {protocol} class {c} {key} {setting} seed {seed} ({time.perf_counter() - start:.0f} s): "
                    + ", ".join(f"{r['method']} {r.get('auroc') or 0:.4f} ({r['seconds']:.0f} s)" for r in new))
    return records


def mean_over_classes(records: list[dict], method: str, metric: str = "auroc", **task) -> tuple[float, float, int]:
    """(mean over the classes, averaged over seeds; std of the seeds' means; the classes counted), of the
    records of ``method`` matching ``task``: seeds missing a class are left out of the mean."""
    rows = [r for r in records if r["method"] == method and all(r.get(k) == v for k, v in task.items())]
    classes = sorted({r["class"] for r in rows})
    by_seed = {}
    for r in rows:
        by_seed.setdefault(r["seed"], {})[r["class"]] = r[metric]
    means = [np.mean(list(v.values())) for v in by_seed.values() if len(v) == len(classes)]
    if not means:
        return float("nan"), float("nan"), 0
    return float(np.mean(means)), float(np.std(means)), len(classes)


def labelled_table(records: list[dict], data: str) -> str:
    """Markdown: methods x ratios, mean test AUROC over the classes run (seeds averaged), the paper's
    figures beside, and the mean seconds per task."""
    rows = [r for r in records if r["data"] == data and r["protocol"] == "labelled"]
    ratios = sorted({r["ratio"] for r in rows})
    methods = [m for m in LABELLED if any(r["method"] == m for r in rows)]
    lines = ["| method | " + " | ".join(f"ratio {q:g}" for q in ratios) + " | s per task |",
             "|---|" + "---|" * (len(ratios) + 1)]
    for m in methods:
        cells = []
        for q in ratios:
            mean, std, n = mean_over_classes(rows, m, ratio=q)
            cells.append("--" if not n else f"{mean:.4f}" + (f" ± {std:.4f}" if std > 0 else "")
                         + ("" if n == 10 else f" ({n} classes)"))
        seconds = np.mean([r["seconds"] for r in rows if r["method"] == m])
        lines.append(f"| {m} | " + " | ".join(cells) + f" | {seconds:.0f} |")
    for name in dict.fromkeys(k for q in ratios for k in PAPER.get((data, q), {})):
        lines.append(f"| {name} | " + " | ".join(f"{PAPER.get((data, q), {}).get(name, float('nan')):.3f}"
                                                 .replace("nan", "--") for q in ratios) + " | |")
    return "\n".join(lines)


def unlabelled_table(records: list[dict], data: str) -> str:
    """Markdown: the unlabelled protocol's methods, mean test AUROC over the classes run, mean seconds."""
    rows = [r for r in records if r["data"] == data and r["protocol"] == "unlabelled"]
    methods = list(dict.fromkeys(r["method"] for r in rows))
    lines = ["| method | mean AUROC | classes | s per task |", "|---|---|---|---|"]
    for m in methods:
        mean, std, n = mean_over_classes(rows, m)
        seconds = np.mean([r["seconds"] for r in rows if r["method"] == m])
        lines.append(f"| {m} | {mean:.4f}" + (f" ± {std:.4f}" if std > 0 else "") + f" | {n} | {seconds:.0f} |")
    for name, value in PAPER_ONE_CLASS.get(data, {}).items():
        lines.append(f"| {name} | {value:.3f} | 10 | |")
    return "\n".join(lines)


def long_tailed_table(records: list[dict], data: str = "cifar10") -> str:
    """Markdown: balanced accuracy (%) at the validation threshold, mean over the classes run, per rho,
    the paper's CIFAR-10-LT figures beside."""
    rows = [r for r in records if r["data"] == data and r["protocol"] == "long-tailed"]
    rhos = sorted({r["rho"] for r in rows}, reverse=True)
    lines = ["| method | " + " | ".join(f"rho {q:g}" for q in rhos) + " | s per task |", "|---|" + "---|" * (len(rhos) + 1)]
    for m in LONG_TAILED:
        if not any(r["method"] == m for r in rows):
            continue
        cells = []
        for q in rhos:
            mean, _, n = mean_over_classes(rows, m, "balanced_accuracy", rho=q)
            cells.append("--" if not n else f"{100 * mean:.2f}" + ("" if n == 10 else f" ({n} classes)"))
        seconds = np.mean([r["seconds"] for r in rows if r["method"] == m])
        lines.append(f"| {m} | " + " | ".join(cells) + f" | {seconds:.0f} |")
    for name in dict.fromkeys(k for q in rhos for k in PAPER_LONG_TAILED.get(q, {})):
        lines.append(f"| {name} | " + " | ".join(f"{PAPER_LONG_TAILED[q][name]:.2f}" if q in PAPER_LONG_TAILED else "--"
                                                 for q in rhos) + " | |")
    return "\n".join(lines)


def goal_rows(records: list[dict], data: str) -> list[tuple[str, bool]]:
    """Issue 50's goal rows on the records of ``data``: (the row in words with its figures, whether it holds).

    Labelled: on Fashion-MNIST DLM-SVDD's mean AUROC at or above the paper's at each ratio run; on
    CIFAR-10 at or above every peer of the run and the paper's Deep SAD. Unlabelled: ``DLMSVDD()`` at
    or above the kNN distance on the pixels, and on CIFAR-10 above the paper's Deep SVDD (0.648).
    """
    rows = []
    labelled = [r for r in records if r["data"] == data and r["protocol"] == "labelled"]
    for ratio in sorted({r["ratio"] for r in labelled}):
        own, _, n = mean_over_classes(labelled, "DLM-SVDD", ratio=ratio)
        if not n:
            continue
        paper = PAPER.get((data, ratio), {})
        others = {m: mean_over_classes(labelled, m, ratio=ratio)[0] for m in LABELLED[1:]
                  if any(r["method"] == m and r["ratio"] == ratio for r in labelled)}
        if data == "fashion_mnist" and "DLM-SVDD (paper, ResNet-50 ImageNet)" in paper:
            target = paper["DLM-SVDD (paper, ResNet-50 ImageNet)"]
            rows.append((f"ratio {ratio:g}: DLM-SVDD {own:.4f} >= the paper's {target:.3f} ({n} classes)", own >= target))
        if data != "fashion_mnist":
            for m, value in others.items():
                rows.append((f"ratio {ratio:g}: DLM-SVDD {own:.4f} >= {m} {value:.4f} ({n} classes)", own >= value))
            if "Deep SAD (paper)" in paper:
                target = paper["Deep SAD (paper)"]
                rows.append((f"ratio {ratio:g}: DLM-SVDD {own:.4f} >= the paper's Deep SAD {target:.3f}", own >= target))
    unlabelled = [r for r in records if r["data"] == data and r["protocol"] == "unlabelled"]
    if unlabelled:
        own, _, n = mean_over_classes(unlabelled, "DLMSVDD()")
        knn = mean_over_classes(unlabelled, "kNN (k=5)")[0]
        rows.append((f"no labels: DLMSVDD() {own:.4f} >= kNN on the pixels {knn:.4f} ({n} classes)", own >= knn))
        for name, target in PAPER_ONE_CLASS.get(data, {}).items():
            rows.append((f"no labels: DLMSVDD() {own:.4f} > {name} {target:.3f}", own > target))
    return rows


def method_names(text: str) -> list[str]:
    """``--methods``: names separated by commas, where a name may hold a comma itself ("DLM-SVDD, CNN
    frozen"): at each piece the longest run of pieces that makes a known name is taken, else the piece
    alone (``run`` then says which names there are)."""
    known = set(LABELLED) | set(LONG_TAILED)
    pieces = [p.strip() for p in text.split(",") if p.strip()]
    names, i = [], 0
    while i < len(pieces):
        take = next((k for k in range(len(pieces) - i, 0, -1) if ", ".join(pieces[i:i + k]) in known), 1)
        names.append(", ".join(pieces[i:i + take]))
        i += take
    return names


def main(argv=None) -> int:
    from dlmsvdd.experiments.presets import parse_assignment

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", default="fashion_mnist", help="fashion_mnist or cifar10 (any image source)")
    parser.add_argument("--root", required=True, help="the data root (the fetch script's folder)")
    parser.add_argument("--protocol", default="labelled", choices=PROTOCOLS)
    parser.add_argument("--classes", default="0,1,2,3,4,5,6,7,8,9")
    parser.add_argument("--ratios", default="0.1,0.75")
    parser.add_argument("--rhos", default="100,50,10")
    parser.add_argument("--seeds", default="0")
    parser.add_argument("--methods", help=f"comma-separated, of {LABELLED} (default: all of the protocol's)")
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                        help="DLM-SVDD's TrainConfig fields (the peers follow its recipe), e.g. epochs=10")
    parser.add_argument("--threads", type=int, help="torch threads (default: torch's)")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--output", required=True, help="JSON lines, appended; finished tasks are skipped")
    args = parser.parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    numbers = lambda text, kind: [kind(v) for v in text.split(",")]  # noqa: E731
    records = run(args.data, args.root, args.protocol, args.output, numbers(args.classes, int),
                  numbers(args.seeds, int), numbers(args.ratios, float), numbers(args.rhos, float),
                  method_names(args.methods) if args.methods else None,
                  dict(parse_assignment(text) for text in args.set), args.device)
    print({"labelled": labelled_table, "unlabelled": unlabelled_table,
           "long-tailed": long_tailed_table}[args.protocol](records, args.data))
    for row, holds in goal_rows(records, args.data):
        print(f"{'holds' if holds else 'FAILS'}: {row}")
    return 0


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    sys.exit(main())
