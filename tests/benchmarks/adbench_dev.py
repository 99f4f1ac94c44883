"""The adbench-dev data sets (../shared/data/adbench-dev beside the repository)
under ADBench's semi-supervised protocol (its README): at most 10,000 rows,
a 70/30 stratified split, min-max scaling on the training rows, and
ceil(la * n_train_anomalies) training anomalies labelled (at least one), the
rest of the training rows labelled normal. Only the training part is built:
the solver benchmarks need nothing else."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
from sklearn.model_selection import train_test_split
from sklearn.preprocessing import MinMaxScaler

DATA_DIR = Path(__file__).resolve().parents[3] / "shared" / "data" / "adbench-dev"
MAX_ROWS = 10_000
TRAIN_FRACTION = 0.7


def data_sets() -> list[Path]:
    """The .npz files at hand (none when the folder is absent)."""
    return sorted(DATA_DIR.glob("*.npz")) if DATA_DIR.is_dir() else []


def training_rows(path: Path, la: float, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Scaled training features (float64) and labels t (+1 normal or
    unlabelled, -1 labelled anomaly) of one data set for one seed and ``la``."""
    with np.load(path, allow_pickle=False) as f:
        X, y = f["X"].astype(np.float64), f["y"].astype(int)
    rng = np.random.default_rng(seed)
    if X.shape[0] > MAX_ROWS:
        keep = rng.choice(X.shape[0], MAX_ROWS, replace=False)
        X, y = X[keep], y[keep]
    X_train, _, y_train, _ = train_test_split(X, y, train_size=TRAIN_FRACTION, stratify=y, shuffle=True,
                                              random_state=seed)
    X_train = MinMaxScaler().fit_transform(X_train)
    anomalies = np.flatnonzero(y_train == 1)
    labelled = rng.choice(anomalies, max(1, math.ceil(la * anomalies.size)), replace=False)
    t = np.ones(X_train.shape[0])
    t[labelled] = -1.0
    return X_train, t
