"""What a run leaves behind: resolved config, metrics, per-epoch history, plots
(the paper's Fig. 3 convergence curves, the ROC curve), and a log."""

from __future__ import annotations

import csv
import json
import logging
import numbers
from pathlib import Path

import numpy as np

from ..training.atomic import open_atomic
from .plotting import pyplot


def write_atomic(path, text: str) -> None:
    """Writes ``path`` whole or not at all (``dlmsvdd.training.atomic``)."""
    with open_atomic(path) as f:
        f.write(text)


def write_json(path: Path, data) -> None:
    write_atomic(path, json.dumps(data, indent=2, default=float) + "\n")


def write_yaml(path: Path, data: dict) -> None:
    import yaml

    write_atomic(path, yaml.safe_dump(data, sort_keys=False))


def attach_log(folder: Path, append: bool = False) -> logging.Handler:
    """Copies the package's log records into folder/log.txt (a new one, or appended to)."""
    handler = logging.FileHandler(folder / "log.txt", mode="a" if append else "w")
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(message)s"))
    logger = logging.getLogger("dlmsvdd")
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    return handler


def scalar_columns(history: list[dict]) -> list[str]:
    """The history's per-epoch numbers (not its per-iteration lists), in order of first appearance."""
    columns = {}
    for row in history:
        columns.update({k: None for k, v in row.items() if isinstance(v, numbers.Real)})
    return list(columns)


def write_history_csv(history: list[dict], path: Path) -> None:
    """One row per epoch, one column per number of the history (empty where an epoch has none)."""
    columns = scalar_columns(history)
    with open(path, "w", newline="") as f:
        writer = csv.DictWriter(f, columns, extrasaction="ignore")
        writer.writeheader()
        writer.writerows(history)


class TensorBoard:
    """Each epoch's numbers as TensorBoard scalars under folder/tensorboard
    (needs the ``tensorboard`` package; a clear error before training if it is missing)."""

    def __init__(self, folder: Path):
        try:
            from torch.utils.tensorboard import SummaryWriter
        except ImportError:
            raise ValueError("--tensorboard needs the tensorboard package: pip install tensorboard") from None
        self.writer = SummaryWriter(str(folder / "tensorboard"))

    def __call__(self, row: dict) -> None:
        for key, value in row.items():
            if isinstance(value, numbers.Real) and key != "epoch":
                self.writer.add_scalar(key, value, row["epoch"])
        self.writer.flush()

    def close(self) -> None:
        self.writer.close()


def moving_average(values, window: int) -> np.ndarray:
    """Centred moving average (the paper smooths its loss curves over 11 epochs)."""
    values = np.asarray(values, dtype=float)
    window = max(1, min(window, len(values)))
    kernel = np.ones(window) / window
    padded = np.pad(values, (window // 2, window - 1 - window // 2), mode="edge")
    return np.convolve(padded, kernel, mode="valid")


def plot_convergence(history: list[dict], path: Path, smoothing: int = 11) -> None:
    """(a) relative Frank-Wolfe gap g_tau / g_1 of the first, middle and last
    alpha-steps; (b) the margin-violation loss per epoch and its moving average."""
    plt = pyplot()
    fig, (ax_gap, ax_loss) = plt.subplots(1, 2, figsize=(9, 3.4))
    picks = sorted({0, len(history) // 2, len(history) - 1})
    for i in picks:
        gaps = np.asarray(history[i]["fw_gap"], dtype=float)
        if gaps.size and gaps[0] > 0:
            ax_gap.semilogy(np.arange(1, gaps.size + 1), np.maximum(gaps / gaps[0], 1e-16),
                            label=f"epoch {history[i]['epoch']}")
    ax_gap.set(xlabel="iteration", ylabel="relative FW gap", title="(a) alpha-step")
    ax_gap.legend(fontsize=8)
    losses = [row["omega_loss"] for row in history if "omega_loss" in row]
    if losses:
        epochs = np.arange(1, len(losses) + 1)
        ax_loss.plot(epochs, losses, alpha=0.4, label="per epoch")
        ax_loss.plot(epochs, moving_average(losses, smoothing), label=f"{smoothing}-epoch average")
        ax_loss.legend(fontsize=8)
    ax_loss.set(xlabel="epoch", ylabel="margin-violation loss", title="(b) omega-step")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def plot_roc(targets, scores, path: Path, title: str = "") -> None:
    from sklearn.metrics import roc_auc_score, roc_curve

    plt = pyplot()
    anomalous = np.asarray(targets) < 0
    fpr, tpr, _ = roc_curve(anomalous, scores)
    fig, ax = plt.subplots(figsize=(4, 4))
    ax.plot(fpr, tpr, label=f"AUROC {roc_auc_score(anomalous, scores):.4f}")
    ax.plot([0, 1], [0, 1], "k:", lw=0.8)
    ax.set(xlabel="false positive rate", ylabel="true positive rate (anomalies)", title=title)
    ax.legend(loc="lower right")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


TIMED_STEPS = ("seconds_features", "seconds_alpha", "seconds_build", "seconds_solve", "seconds_omega")


def timing_summary(history: list[dict]) -> dict:
    """Mean seconds per epoch of the feature pass, the alpha-step (and its two
    parts: kernel build, dual solve) and the omega-step."""
    return {f"mean_{k}": float(np.mean([row[k] for row in history if k in row]))
            for k in TIMED_STEPS if any(k in row for row in history)}
