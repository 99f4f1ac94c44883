"""Tables of feature vectors (measurements, or embeddings of a pretrained
network) and the task a run trains on them.

A table is a ``.npz`` file with arrays ``X`` (N, D) and ``y`` (N,), or a ``.csv``
file (UTF-8, a byte-order mark allowed) with a header row of distinct names and
one label column (named by the run's ``label_column``). Labels: 0 normal, 1
anomaly (ADBench's and PyOD's convention). A CSV's other columns go through
``dlmsvdd_ext.tabular``: text columns (and those named in ``categorical``) are
one-hot encoded, missing cells refused or imputed (``missing``), the rule fitted
on the training rows and kept in the model's preprocessing record.

The task is ADBench's semi-supervised protocol (DESIGN.md, 6): a stratified,
seeded 70/30 train/test split; a fraction ``labelled_fraction`` of the training
anomalies labelled (``ceil``, at least one), the others left among the
training rows as normal (the unlabelled set is not clean); the validation share
held out of the normal training rows (``protocols.train_val_split(anomalies=
False)``); the vectors standardised with the training rows' statistics
(``VectorPreprocessing``).
"""

from __future__ import annotations

import csv
import hashlib
import math
from pathlib import Path

import numpy as np
import torch

from dlmsvdd_ext.tabular import Table, fit_encoding

from . import protocols
from .protocols import Split
from .sources import _split_pool
from .vectors import VectorPreprocessing

TEST_FRACTION = 0.3  # ADBench's split


def _check(X: np.ndarray, y: np.ndarray, name: str, missing=None) -> tuple[np.ndarray, np.ndarray]:
    """The table as float64 X (N, D) and int y in {0, 1}; ValueError saying what is wrong
    (NaN cells are missing ones, kept for ``missing="impute"``)."""
    if X.ndim != 2 or X.shape[0] == 0 or X.shape[1] == 0:
        raise ValueError(f"{name}: X must be a non-empty table (N rows, D columns), got shape {X.shape}")
    y = _labels(y, X.shape[0], name)
    if not np.issubdtype(X.dtype, np.number) or np.iscomplexobj(X):
        raise ValueError(f"{name}: X holds {X.dtype} values, not real numbers")
    X = X.astype(np.float64)
    bad = np.argwhere(np.isinf(X) if missing == "impute" else ~np.isfinite(X))
    if len(bad):
        row, col = bad[0]
        raise ValueError(f"{name}: {len(bad)} cell(s) are NaN, empty or infinite (first: row {row}, column {col}); "
                         "fill or drop them before training, or pass --missing impute")
    return X, y


def _labels(y: np.ndarray, n: int, name: str) -> np.ndarray:
    """y as int in {0, 1}, one per row."""
    if y.shape != (n,):
        raise ValueError(f"{name}: y must hold one label per row ({n}), got shape {y.shape}")
    values = np.unique(y)
    if not np.isin(values, (0, 1)).all():
        raise ValueError(f"{name}: labels must be 0 (normal) or 1 (anomaly); found {values[:5].tolist()}")
    return y.astype(int)


def _read_csv(path: Path, label_column: str, labelled: bool = True) -> tuple[Table, np.ndarray | None]:
    """The CSV's feature cells and its labels (None: not ``labelled`` and no label column)."""
    try:  # utf-8-sig: Excel's "CSV UTF-8" starts with a byte-order mark, which would stick to the first name
        with path.open(newline="", encoding="utf-8-sig") as handle:
            rows = list(csv.reader(handle))
    except UnicodeDecodeError as err:
        raise ValueError(f"{path} is not UTF-8 text ({err}); save it as CSV UTF-8") from None
    if len(rows) < 2:
        raise ValueError(f"{path}: a .csv table needs a header row and at least one data row")
    header = [h.strip() for h in rows[0]]
    repeated = sorted({h for h in header if header.count(h) > 1})
    if repeated:  # a second label column would train as a feature: the answer leaks in
        raise ValueError(f"{path}: two or more columns are named {repeated}; rename or drop the copies")
    if label_column not in header and labelled:
        raise ValueError(f"{path}: no label column {label_column!r} (columns: {header[:20]}); "
                         "name it with --label-column")
    for i, row in enumerate(rows[1:]):
        if len(row) != len(header):
            raise ValueError(f"{path}: data row {i + 1} has {len(row)} cells, the header {len(header)}")
    if label_column not in header:
        return Table.from_cells(header, rows[1:], str(path)), None
    label = header.index(label_column)
    labels = np.empty(len(rows) - 1)
    for i, row in enumerate(rows[1:]):
        text = row[label].strip()
        if text == "":
            raise ValueError(f"{path}: the label column {label_column!r} has empty cells (data row {i + 1})")
        try:
            labels[i] = float(text)
        except ValueError:
            raise ValueError(f"{path}: data row {i + 1}, column {label_column!r} holds {text!r}, "
                             "not a number") from None
    features = [h for j, h in enumerate(header) if j != label]
    return Table.from_cells(features, [row[:label] + row[label + 1:] for row in rows[1:]], str(path)), labels


def read_table(path, label_column: str = "label", missing=None) -> tuple[np.ndarray | Table, np.ndarray]:
    """X and y (N,) in {0, 1} of a .npz or .csv table file: X (N, D) float64 from a .npz,
    a ``dlmsvdd_ext.tabular.Table`` of the CSV's cells (``np.asarray`` gives its numbers).
    Missing cells (NaN, empty) are refused with their row and column unless ``missing``
    is "impute"."""
    path = Path(path) if path is not None else None
    if path is None or not path.is_file():
        raise ValueError(f"table data needs a .npz or .csv file (--path FILE); {str(path)!r} is not a file")
    if path.suffix.lower() == ".csv":
        table, y = _read_csv(path, label_column)
        if missing is None:
            table.refuse_missing(str(path))
        return table, _labels(y, table.n_rows, str(path))
    elif path.suffix.lower() == ".npz":
        try:
            with np.load(path, allow_pickle=False) as arrays:
                missing = {"X", "y"} - set(arrays.files)
                if missing:
                    raise ValueError(f"{path}: a .npz table holds arrays X and y; missing {sorted(missing)} "
                                     f"(found {arrays.files})")
                X, y = arrays["X"], arrays["y"]
        except (OSError, EOFError) as err:
            raise ValueError(f"{path} is not a readable .npz file ({err})") from None
        if np.issubdtype(y.dtype, np.floating) and np.isfinite(y).all() and (y == np.round(y)).all():
            y = y.astype(int)
    else:
        raise ValueError(f"{path}: table files are .npz (arrays X, y) or .csv (with a label column)")
    return _check(np.asarray(X), np.asarray(y), str(path), missing)


def read_rows(path, label_column: str = "label") -> Table:
    """The feature cells of a .csv table to score (its label column, if it has one, left out)."""
    path = Path(path)
    if not path.is_file() or path.suffix.lower() != ".csv":
        raise ValueError(f"--csv {str(path)!r} is not a .csv file")
    return _read_csv(path, label_column, labelled=False)[0]


def labelled_anomalies(anomalies: np.ndarray, fraction: float | None, seed: int) -> np.ndarray:
    """The anomalies given as labelled: ceil(fraction x count), at least one, drawn at random (None: all;
    0: none, the unsupervised protocol)."""
    if fraction is None or len(anomalies) == 0:
        return anomalies
    if fraction == 0:
        return anomalies[:0]
    # the 1e-9: a float product such as 0.05 x 60 = 3.0000000000000004 is 3, not 4
    count = min(len(anomalies), max(1, math.ceil(fraction * len(anomalies) - 1e-9)))
    return np.sort(np.random.default_rng(seed).choice(anomalies, count, replace=False))


def fingerprint(path) -> str:
    """The SHA-256 of a file's bytes, in hex: what a run records of the table it trained on."""
    digest = hashlib.sha256()
    with Path(path).open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def check_unchanged(path, sha256: str) -> None:
    """The table a run trained on is still there, byte for byte: re-split, a changed file
    would give the run other test rows, some of them rows it trained on."""
    if not Path(path).is_file():
        raise ValueError(f"the table this run trained on, {str(path)!r}, is not there any more: put the file back "
                         "at that path, or train a new run on the table where it is now")
    now = fingerprint(path)
    if now != sha256:
        raise ValueError(f"{path} changed since the run trained on it (SHA-256 {str(sha256)[:12]}... then, "
                         f"{now[:12]}... now): its train/test split would not be the run's, and rows it trained on "
                         "could be scored as test rows; restore the file the run trained on, or train a new run on "
                         "the file as it is now")


def make_table_task(path, label_column: str = "label", labelled_fraction: float | None = None, seed: int = 0,
                    val_fraction: float = 0.2, sha256: str | None = None, categorical=None, missing=None):
    """The semi-supervised task on a table (the module's docstring); ``sha256``: the file's
    fingerprint as a run recorded it (``fingerprint``), checked first (None: not checked)."""
    from .tasks import Task

    if sha256 is not None:
        check_unchanged(path, sha256)
    X, y = read_table(path, label_column, missing)
    if (y == 0).sum() < 2:
        raise ValueError(f"{path}: the table has {(y == 0).sum()} normal row(s); at least 2 are needed")
    if (y == 1).sum() == 1:
        raise ValueError(f"{path}: the table has one anomaly; a stratified train/test split needs none or 2+")
    train_rows, test_rows = _split_pool(y, TEST_FRACTION, seed)
    labelled = labelled_anomalies(train_rows[y[train_rows] == 1], labelled_fraction, seed)
    targets = np.where(np.isin(train_rows, labelled), -1, 1)
    train, val = protocols.train_val_split(Split(train_rows, targets), val_fraction, seed, anomalies=False)
    encoding = fit_encoding(X, categorical, missing, rows=train.indices, name=str(path))  # the training rows'
    codes = X if encoding is None else encoding.codes(X, str(path))
    record = VectorPreprocessing.fit_table(codes[train.indices], encoding)
    vectors = record.module()(torch.from_numpy(codes))
    test = Split(test_rows, np.where(y[test_rows] == 1, -1, 1))
    return Task(*(protocols.SplitRows(vectors, split, record) for split in (train, val, test)), 0, "normal")
