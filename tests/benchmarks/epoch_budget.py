"""How many epochs (and how large a small CNN) an image task needs (issue 50, goal 5): one run of
``epochs`` epochs per task, its network's weights kept at every epoch, gives what a run of any
E <= epochs epochs would have given (the same seeded draws up to epoch E: the omega-step's batches
are seeded by the epoch), so every epoch budget is measured for the cost of the longest.

For each budget E: the epoch the selection rule keeps among epochs 0..E (from the run's validation
history), the boundary refitted on its weights (as ``fit`` ends), its validation AUROC (what a
choice may look at) and its test AUROC (reported, never chosen on), and the seconds the first E
epochs took. ``python -m benchmarks.epoch_budget --help``.
"""

from __future__ import annotations

import argparse
import copy
import json
import sys
import time
from pathlib import Path

import numpy as np
import torch

from dlmsvdd import DLMSVDD, TrainConfig, metrics, tasks
from dlmsvdd.training import selection

BUDGETS = (1, 2, 3, 4, 5, 6, 8, 10, 11, 12, 15, 18, 20, 25, 30)


class SnapshotDLMSVDD(DLMSVDD):
    """DLMSVDD keeping the weights each epoch's selection sees (before the epoch's omega-step; the
    last epoch's after the run's last omega-step): the network's own, or with a moving average of
    them (``ema_half_life``) the average's."""

    def _omega_step(self, loader, optimizer, bar_level, average=None, anchor=None):
        self._average = average
        self.snapshots_.append(copy.deepcopy(self._judged()))
        return super()._omega_step(loader, optimizer, bar_level, average, anchor)

    def _judged(self) -> dict:
        return self.network_.state_dict() if self._average is None else self._average.state

    def _fit(self, train, val, callback, checkpoint, resume):
        self.snapshots_, self._average = [], None
        epochs = self.config.epochs

        def keep_last(row):  # the last epoch has no omega-step: its weights are those the last one left
            if row["epoch"] == epochs:
                self.snapshots_.append(copy.deepcopy(self._judged()))
            if callback is not None:
                callback(row)

        return super()._fit(train, val, keep_last, checkpoint, resume)


def kept_epoch(history: list[dict], budget: int, rule: str, metric: str = "auroc") -> int:
    """The epoch a run of ``budget`` epochs keeps: ``selection.offer`` over its history rows 0..budget."""
    kept = selection.START
    for row in history[:budget + 1]:
        kept = selection.offer(kept, row["epoch"], row, metric, rule, lambda: None)
    return kept[1]


def budget_rows(model: SnapshotDLMSVDD, task, budgets) -> list[dict]:
    """Each budget's kept epoch, refitted boundary, validation and test AUROC and training seconds."""
    rule = model.training_params_["selection_rule"]
    seconds = np.cumsum([sum(row.get(k, 0.0) for k in ("seconds_features", "seconds_alpha", "seconds_omega"))
                         for row in model.history_])
    rows = []
    for budget in budgets:
        if budget >= len(model.history_):
            break
        epoch = kept_epoch(model.history_, budget, rule)
        model.network_.load_state_dict(model.snapshots_[epoch])
        model._refit(task.train, task.val)
        f_val, t_val = model.scores(task.val)
        f_test, t_test = model.scores(task.test)
        rows.append({"epochs": budget, "kept_epoch": epoch, "val_auroc": metrics.auroc(t_val, f_val),
                     "test_auroc": metrics.auroc(t_test, f_test), "train_seconds": float(seconds[budget])})
    return rows


def run_task(source, normal_class: int, ratio: float, seed: int, epochs: int, overrides: dict,
             budgets=BUDGETS) -> dict:
    """One task's run of ``epochs`` epochs and every budget up to it."""
    task = tasks.make_task(source, normal_class, ratio=ratio, seed=seed)
    config = TrainConfig(data=source.name, normal_class=normal_class, ratio=ratio, seed=seed, epochs=epochs,
                         verbose=0, **overrides)
    start = time.perf_counter()
    model = SnapshotDLMSVDD(config).fit(task.train, task.val)
    fit_seconds = time.perf_counter() - start
    history = [{k: row.get(k) for k in ("epoch", "val_auroc", "seconds_features", "seconds_alpha", "seconds_omega")}
               for row in model.history_]
    return {"data": source.name, "normal_class": normal_class, "ratio": ratio, "seed": seed, "overrides": overrides,
            "threads": torch.get_num_threads(), "fit_seconds": fit_seconds, "n_train": len(task.train),
            "history": history, "budgets": budget_rows(model, task, [b for b in budgets if b <= epochs])}


def network_name(overrides: dict) -> str:
    """The small CNN a record's overrides build, as "width x branches" (the recipe's 32 x 4 by default)."""
    return f"{overrides.get('cnn_width', 32)} x {overrides.get('cnn_branches', 4)}"


def table(records: list[dict], budgets=(10, 15, 18, 20, 25, 30)) -> str:
    """Markdown: one row per network and task, the validation / test AUROC at each budget (E epochs:
    the epoch the selection keeps among 0..E, its boundary refitted); "--" where the run did not
    measure that budget."""
    lines = ["| network | class | ratio | " + " | ".join(f"E{b} val / test" for b in budgets) + " |",
             "|---|---|---|" + "---|" * len(budgets)]
    for r in records:
        at = {b["epochs"]: b for b in r["budgets"]}
        cells = [f"{at[b]['val_auroc']:.4f} / {at[b]['test_auroc']:.4f}" if b in at else "--" for b in budgets]
        lines.append(f"| {network_name(r['overrides'])} | {r['normal_class']} | {r['ratio']:g} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main(argv=None) -> int:
    from benchmarks.paper_protocol import load_source

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", default="fashion_mnist")
    parser.add_argument("--root", required=True, help="the data root (or the .npz file for image_arrays)")
    parser.add_argument("--classes", default="0", help="comma-separated normal classes")
    parser.add_argument("--ratios", default="0.1", help="comma-separated ratios")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--epochs", type=int, default=30)
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                        help="TrainConfig fields (typed as the config types them), e.g. cnn_width=16")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--output", required=True, help="JSON lines, one per task (appended)")
    args = parser.parse_args(argv)
    from dlmsvdd.experiments.presets import parse_assignment

    torch.set_num_threads(args.threads)
    overrides = dict(parse_assignment(text) for text in args.set)
    source = load_source(args.data, args.root)
    for ratio in (float(r) for r in args.ratios.split(",")):
        for c in (int(c) for c in args.classes.split(",")):
            record = run_task(source, c, ratio, args.seed, args.epochs, overrides)
            with open(args.output, "a") as f:
                f.write(json.dumps(record) + "\n")
            last = record["budgets"][-1]
            print(f"class {c} ratio {ratio}: {record['fit_seconds']:.0f} s, "
                  + ", ".join(f"E{b['epochs']} val {b['val_auroc']:.4f} test {b['test_auroc']:.4f}"
                              for b in record["budgets"]), flush=True)
    return 0


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    sys.exit(main())
