"""Tables of a finished sweep, laid out as the paper's.

* ``one_vs_rest_table``: test AUROC per normal class and their mean (rows) for
  each anomaly ratio and method (columns), mean +- std over seeds.
* ``long_tailed_table``: balanced accuracy (%) of each class's detector at its
  validation threshold, averaged over classes, per imbalance rho (and, for
  ImageNet-LT, per many / medium / few-shot group and all), one row per method.

A record is what a sweep task leaves in ``result.json`` (its config, test and
validation metrics, timing). The *method* of a record is given by the config
fields that vary across the sweep other than the task axes (data, class,
seed, ratio, rho): kernel, frozen, gamma, ... so an ablation's variants land
side by side. Standard deviations are population ones (numpy's default), so
one seed gives 0, not NaN.
"""

from __future__ import annotations

import csv
import io
import json
import logging
import math
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from ..training import checkpoints
from . import sweep_folder

log = logging.getLogger("dlmsvdd")
TASK_AXES = ("data", "normal_class", "seed", "ratio", "rho")
NOT_METHOD = TASK_AXES + ("output", "verbose", "device", "num_workers", "root", "split_dir", "extra")
# ImageNet-LT's groups by the normal class's number of training images (the pool, before the validation split)
SHOT_GROUPS = (("many", 101, math.inf), ("medium", 20, 100), ("few", 0, 19))


# ---- records

def load_records(folder) -> list[dict]:
    """The records of a sweep folder's finished tasks (``*/result.json``), in task-name
    order, each with its ``name`` (the folder's, also the record's "task"). A file
    that is not a whole record (empty, truncated, without what the tables read) is
    skipped with a warning naming it and why."""
    records, skipped = [], []
    for path in sorted(Path(folder).glob(f"*/{sweep_folder.RESULT}")):
        record, problem = sweep_folder.read(path)
        if record is not None:
            problem = sweep_folder.lacks(record)
        if problem is not None:
            log.warning("%s: skipped, %s; a re-run of the sweep runs this task again", path, problem)
            skipped.append(f"{path} ({problem})")
        else:
            # configurations written by earlier versions, under this one's field names
            record = {**record, "config": checkpoints.upgraded_config(record.get("config", {}))}
            records.append({**record, "name": path.parent.name})
    if not records:
        raise ValueError(f"{folder}: no finished tasks (no readable */result.json"
                         + (f"; skipped {', '.join(skipped)})" if skipped else ")"))
    return records



def _key(value):
    return json.dumps(value, sort_keys=True)  # lists and dicts are unhashable


def method_keys(records: list[dict]) -> list[str]:
    """Config fields that vary across the records, other than the task axes, in config order."""
    configs = [r["config"] for r in records]
    if not configs:
        return []
    return [k for k in configs[0] if k not in NOT_METHOD and len({_key(c.get(k)) for c in configs}) > 1]


def method_label(config: dict, keys) -> str:
    """'rff, m=128', 'frozen=True, gamma=median': the kernel by its name, the budget
    as m (none for the exact kernel), other fields as key=value; one method: 'DLM-SVDD'."""
    parts = []
    for k in keys:
        if k == "kernel":
            parts.append(str(config.get(k)))
        elif not (k == "n_components" and config.get("kernel") == "exact"):
            parts.append(f"{'m' if k == 'n_components' else k}={config.get(k)}")
    return ", ".join(parts) or "DLM-SVDD"


def is_long_tailed(config: dict) -> bool:
    return config.get("rho") is not None or config.get("data") == "imagenet_lt"


def class_train_count(record: dict) -> int:
    """Training images of the normal class in the task's pool (train + validation)."""
    task = record["task_summary"]
    return int(task["train_normal"] + task["val_normal"])


def shot_group(count: int) -> str:
    for name, low, high in SHOT_GROUPS:
        if low <= count <= high:
            return name
    raise ValueError(f"a class's training count must be >= 0, got {count}")


# ---- statistics

@dataclass(frozen=True)
class Stat:
    mean: float
    std: float
    n: int

    @classmethod
    def of(cls, values) -> "Stat":
        values = np.asarray(list(values), dtype=float)
        if values.size == 0:
            raise ValueError("no values to summarise")
        return cls(float(values.mean()), float(values.std()), int(values.size))

    def text(self, digits: int = 3, scale: float = 1.0) -> str:
        return f"{self.mean * scale:.{digits}f} ± {self.std * scale:.{digits}f}"


def over_classes(runs: dict) -> Stat | None:
    """runs: (class, seed) -> value. The mean over the classes for each seed that
    has every class, then mean +- std over those seeds (None when no seed is
    complete): a seed missing a class would otherwise shift the mean."""
    classes = {c for c, _ in runs}
    per_seed = [np.mean([runs[c, s] for c in classes]) for s in sorted({s for _, s in runs})
                if all((c, s) in runs for c in classes)]
    return Stat.of(per_seed) if per_seed else None


# ---- tables

@dataclass
class Table:
    title: str
    corner: str  # header of the row-label column
    rows: list = field(default_factory=list)
    columns: list = field(default_factory=list)
    cells: dict = field(default_factory=dict)  # (row, column) -> Stat
    scale: float = 1.0  # 100 for percentages
    digits: int = 3

    def markdown(self) -> str:
        rows = [[row] + [self.cells[row, c].text(self.digits, self.scale) if (row, c) in self.cells else "–"
                         for c in self.columns] for row in self.rows]
        return f"**{self.title}**\n\n" + markdown_rows([self.corner, *self.columns], rows)

    def csv(self) -> str:
        """Wide, as the Markdown: per column its mean, std and number of values."""
        rows = []
        for row in self.rows:
            line = [row]
            for c in self.columns:
                stat = self.cells.get((row, c))
                line += ["", "", 0] if stat is None else [stat.mean * self.scale, stat.std * self.scale, stat.n]
            rows.append(line)
        return csv_rows([self.corner] + [f"{c} {part}" for c in self.columns for part in ("mean", "std", "n")], rows)


def markdown_rows(header: list, rows: list[list]) -> str:
    lines = ["| " + " | ".join(map(str, header)) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(map(str, row)) + " |" for row in rows]
    return "\n".join(lines) + "\n"


def csv_rows(header: list, rows: list[list]) -> str:
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(header)
    writer.writerows(rows)
    return out.getvalue()


def _column(parts: list[str]) -> str:
    return " / ".join(p for p in parts if p)


def _collect(records, slots_of, value_of) -> dict:
    """(row, column) -> {(class, seed): value}, each record in the slots slots_of(record)
    gives; two runs of one class and seed in a slot are an error."""
    slots: dict = {}
    for r in records:
        c = r["config"]
        for slot in slots_of(r):
            runs = slots.setdefault(slot, {})
            if (c["normal_class"], c["seed"]) in runs:
                raise ValueError(f"two runs share class {c['normal_class']}, seed {c['seed']} in the cell {slot} "
                                 f"(task {r.get('name')!r}): a config field that varies is not told apart")
            runs[c["normal_class"], c["seed"]] = value_of(r)
    return slots


def _ordered(values) -> list:
    return list(dict.fromkeys(values))


def one_vs_rest_table(records: list[dict], keys=None, metric: str = "auroc") -> Table:
    """Rows: the normal classes and their mean; columns: ratio x method; cells: test
    ``metric``, mean +- std over seeds (the mean row: of the per-seed class means)."""
    records = [r for r in records if not is_long_tailed(r["config"])]
    if not records:
        raise ValueError("no one-vs-rest runs (every run has rho set or is ImageNet-LT)")
    if len({r["config"]["data"] for r in records}) > 1:
        raise ValueError("one table per data set: pass the records of one data set")
    keys = method_keys(records) if keys is None else keys
    records = sorted(records, key=lambda r: (r["config"]["ratio"] is None, r["config"]["ratio"] or 0))
    methods = _ordered(method_label(r["config"], keys) for r in records)

    def column(r):
        ratio = r["config"]["ratio"]
        return _column([f"ratio={'all' if ratio is None else ratio}",
                        method_label(r["config"], keys) if len(methods) > 1 else ""])

    def row(r):
        return r["task_summary"]["class_name"]

    by_class = sorted(records, key=lambda r: r["config"]["normal_class"])
    table = Table(f"{records[0]['config']['data']}: test {metric} (mean ± std over seeds)", "class",
                  rows=_ordered(row(r) for r in by_class) + ["mean"], columns=_ordered(column(r) for r in records))
    slots = _collect(records, lambda r: [(row(r), column(r))], lambda r: r["test"][metric])
    for (row_name, col), runs in slots.items():
        table.cells[row_name, col] = Stat.of(runs.values())
    for col in table.columns:
        merged = {k: v for (_, c), runs in slots.items() if c == col for k, v in runs.items()}
        mean = over_classes(merged)
        if mean is not None:
            table.cells["mean", col] = mean
    return table


def long_tailed_table(records: list[dict], keys=None) -> Table:
    """Rows: methods; columns: data set and rho (ImageNet-LT: many / medium / few /
    all); cells: test balanced accuracy (%) averaged over classes, mean +- std over seeds."""
    records = [r for r in records if is_long_tailed(r["config"])]
    if not records:
        raise ValueError("no long-tailed runs (rho set, or ImageNet-LT)")
    keys = method_keys(records) if keys is None else keys
    records = sorted(records, key=lambda r: (r["config"]["data"], -(r["config"]["rho"] or 0)))
    table = Table("balanced accuracy (%) at the validation threshold, mean over classes (± std over seeds)",
                  "method", rows=_ordered(method_label(r["config"], keys) for r in records), scale=100.0, digits=2)

    def groups(r):
        c = r["config"]
        if c["data"] == "imagenet_lt" and c["rho"] is None:
            return [f"{c['data']} {shot_group(class_train_count(r))}", f"{c['data']} all"]
        return [f"{c['data']} rho={c['rho']}"]

    slots = _collect(records, lambda r: [(method_label(r["config"], keys), g) for g in groups(r)],
                     lambda r: r["test"]["balanced_accuracy"])
    order = _ordered(g for r in records for g in groups(r))
    shots = [f"imagenet_lt {name}" for name, _, _ in SHOT_GROUPS] + ["imagenet_lt all"]  # the paper's order
    table.columns = [g for g in order if g not in shots] + [g for g in shots if g in order]
    for slot, runs in slots.items():
        stat = over_classes(runs)
        if stat is not None:
            table.cells[slot] = stat
    return table


def runs_csv(records: list[dict], keys=None) -> str:
    """One row per run: its task, method and metrics (for analyses of one's own)."""
    keys = method_keys(records) if keys is None else keys
    header = ["name", "method", "data", "normal_class", "class_name", "class_train_count", "ratio", "rho", "seed",
              "test_auroc", "test_balanced_accuracy", "val_auroc", "val_balanced_accuracy", "best_epoch", "seconds",
              "mean_seconds_build", "mean_seconds_solve", "mean_seconds_omega", "alpha_peak_mb"]
    rows = []
    for r in records:
        c, timing, alpha = r["config"], r.get("timing", {}), r.get("alpha_step", {})
        peak = alpha.get("peak_bytes")
        rows.append([r.get("name"), method_label(c, keys), c["data"], c["normal_class"], r["task_summary"]["class_name"],
                     class_train_count(r), c["ratio"], c["rho"], c["seed"], r["test"]["auroc"],
                     r["test"]["balanced_accuracy"], r["val"].get("auroc"), r["val"].get("balanced_accuracy"),
                     r.get("best_epoch"), r.get("seconds"), timing.get("mean_seconds_build"),
                     timing.get("mean_seconds_solve"), timing.get("mean_seconds_omega"),
                     None if peak is None else peak / 2**20])
    return csv_rows(header, rows)


# ---- comparing methods

def method_comparison(records: list[dict], keys=None) -> str | None:
    """The Skillings-Mack test of the methods over blocks (data set, class, ratio
    or rho), as in the paper's table captions: each block's value is the test
    AUROC (one-vs-rest) or balanced accuracy (long-tailed) averaged over seeds; a
    method missing from a block is a missing entry. Markdown with the average
    ranks and the p-value; None with fewer than two methods."""
    from . import stats

    keys = method_keys(records) if keys is None else keys
    methods = _ordered(method_label(r["config"], keys) for r in records)
    if len(methods) < 2:
        return None
    values: dict = {}
    for r in records:
        c = r["config"]
        metric = "balanced_accuracy" if is_long_tailed(c) else "auroc"
        block = (c["data"], c["normal_class"], c["ratio"], c["rho"])
        values.setdefault(block, {}).setdefault(method_label(c, keys), []).append(r["test"][metric])
    matrix = np.full((len(values), len(methods)), np.nan)
    for i, by_method in enumerate(values.values()):
        for j, m in enumerate(methods):
            if m in by_method:
                matrix[i, j] = np.mean(by_method[m])
    title = (f"**Skillings-Mack test of the methods** (blocks: data set x class x ratio or rho, {len(values)} of "
             "them; test AUROC, balanced accuracy for long-tailed runs; mean over seeds)")
    try:
        result = stats.skillings_mack(matrix)
    except ValueError as err:  # e.g. a disconnected design: say why instead of failing the report
        return f"{title}: not computed ({err})\n"
    ranks = [[m, f"{rank:.2f}"] for m, rank in zip(methods, result.average_ranks)]
    return (f"{title}: statistic {result.statistic:.3f}, df {result.df}, p = {result.p_value:.3g} "
            f"({result.n_blocks_used} blocks used; rank 1 = best)\n\n" + markdown_rows(["method", "average rank"], ranks))
