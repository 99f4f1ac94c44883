"""What a run leaves behind: resolved config, metrics, per-epoch history, plots
(the paper's Fig. 3 convergence curves, the ROC curve), and a log."""

from __future__ import annotations

import json
import logging
import os
import secrets
from pathlib import Path

import numpy as np

from .plotting import pyplot


def write_atomic(path, text: str) -> None:
    """Writes ``path`` whole or not at all: into a temporary file beside it,
    flushed to the disk, then renamed over it. A full disk or a kill mid-write
    leaves the previous file (or none), never a truncated one."""
    path = Path(path)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{secrets.token_hex(4)}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)  # 0o666: the umask applies, as for open()
    try:
        with os.fdopen(fd, "w") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    folder = os.open(path.parent, os.O_RDONLY)  # the rename itself reaches the disk with the folder's entry
    try:
        os.fsync(folder)
    finally:
        os.close(folder)


def write_json(path: Path, data) -> None:
    write_atomic(path, json.dumps(data, indent=2, default=float) + "\n")


def write_yaml(path: Path, data: dict) -> None:
    import yaml

    write_atomic(path, yaml.safe_dump(data, sort_keys=False))


def attach_log(folder: Path) -> logging.Handler:
    """Copies the package's log records into folder/log.txt."""
    handler = logging.FileHandler(folder / "log.txt")
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(message)s"))
    logger = logging.getLogger("dlmsvdd")
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    return handler



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
