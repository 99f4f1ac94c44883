"""Tables as users hold them, turned into the float arrays ``LpSVDD`` and ``DLMSVDD`` take,
and the recorded rule that does it (``TableEncoding``).

Taken wherever an array is: numpy arrays, pandas DataFrames, lists of rows, and the
CSV cells ``dlmsvdd.data.tables`` reads (``Table.from_cells``). A scipy sparse matrix is
refused (``.toarray()`` makes it dense). pandas is not a dependency: it is only ever
met in what a user hands in.

The rule, fitted on the rows given to ``fit`` (the CLI: the training rows):

* **columns**: a DataFrame's column names (when they are all text) are recorded;
  scoring takes the columns by name (in any order) and refuses a missing or an
  extra column by its name. Without names, by position (the width is checked).
* **categorical columns**: those named in ``categorical``, a pandas ``category``
  column, and any column with a cell of text that is not a number (a CSV cell
  "1.5" is a number). One-hot over the training categories, in sorted order; a
  category unseen in training encodes as all zeros and is scored, not refused.
  Categories are compared as text: a number as its shortest text (1 and 1.0 are
  one category), text as written ("01" is not "1").
* **missing cells** (None, NaN, pandas' NA, an empty CSV cell): refused with the
  row and the column when ``missing`` is None (the default); with ``missing=
  "impute"``, a numeric cell becomes its column's training median, a categorical
  one all zeros in its one-hot columns, and every column with a missing cell in the
  training rows gets an indicator column (1 missing, 0 present; scikit-learn's
  ``SimpleImputer(add_indicator=True)`` rule), so a missing cell is a category of
  its own. A cell missing at scoring in a column that had none in training is
  imputed without an indicator. Infinite cells are always refused.

The encoded columns: the input's, in order, each categorical column replaced by its
one-hot columns, then the indicator columns (``TableEncoding.feature_names``).

``codes`` is the float form in between, and what an export takes: a numeric cell
as it is, a categorical cell as the index of its category in ``categories`` (any
other number: unseen), a missing cell NaN. ``TableEncode`` is the rest of the rule
in plain torch operations (ONNX and TorchScript export them); Python scoring runs
the same module.
"""

from __future__ import annotations

import math
import sys
from dataclasses import dataclass
from numbers import Real

import numpy as np
import torch
import torch.nn as nn
from sklearn.impute import SimpleImputer
from sklearn.preprocessing import OneHotEncoder

MISSING = (None, "impute")


def is_table(data, name: str = "X") -> bool:
    """Whether ``data`` is a table this module reads rather than a dataset.

    A ``Table``, pandas DataFrames and Series, and lists or tuples of rows (a list whose
    first item is an ``(input, target)`` pair with a tensor input is a dataset).

    Parameters
    ----------
    data : object
        What was handed in.
    name : str
        Its name in the message of a refusal.

    Returns
    -------
    bool
        True for a table.

    Raises
    ------
    ValueError
        ``data`` is a scipy sparse matrix, with what to do.
    """
    refuse_sparse(data, name)
    if isinstance(data, Table) or _is_pandas(data):
        return True
    if isinstance(data, (list, tuple)):
        first = data[0] if len(data) else None
        return not (isinstance(first, tuple) and len(first) == 2 and isinstance(first[0], torch.Tensor))
    return False


def refuse_sparse(data, name: str = "X") -> None:
    """Refuse a scipy sparse matrix or array, saying how to make it dense.

    Parameters
    ----------
    data : object
        What was handed in.
    name : str
        Its name in the message.

    Raises
    ------
    ValueError
        ``data`` is sparse.
    """
    sparse = sys.modules.get("scipy.sparse")  # only ever met when scipy is loaded
    if sparse is not None and sparse.issparse(data):
        raise ValueError(f"{name} is a scipy sparse matrix ({data.shape[0]} x {data.shape[1]}); dlmsvdd takes dense "
                         f"arrays: pass {name}.toarray()")


def numeric(X, name: str = "X"):
    """A table without a recorded encoding as a numpy array of numbers (tensors as they are).

    Parameters
    ----------
    X : array-like
        A numpy array, tensor, DataFrame or list of rows.
    name : str
        Its name in messages.

    Returns
    -------
    numpy.ndarray or torch.Tensor
        The numbers; a tensor or a numeric numpy array comes back as it is.

    Raises
    ------
    ValueError
        Sparse input, or a cell of text (the model was fitted on numbers only).
    """
    refuse_sparse(X, name)
    if isinstance(X, torch.Tensor) or (isinstance(X, np.ndarray) and X.dtype.kind in "biufc"):
        return X
    table = Table.of(X, name)
    if table is None:  # not 2-D: the caller's shape check says so
        return np.asarray(X)
    text = [j for j in range(table.width) if table.has_text(j, name)]
    if text:
        raise ValueError(f"{name}: column {table.label(text[0])!r} holds text, and this model was fitted on numbers "
                         "only; fit on a DataFrame with that column (categorical columns are one-hot encoded)")
    return np.stack([_numbers(table, j, name) for j in range(table.width)], axis=1)


def fit_encoding(X, categorical=None, missing=None, rows=None, name: str = "X") -> "TableEncoding | None":
    """The encoding of a table, fitted on its rows ``rows`` (None: all); None when none is needed.

    None for a tensor, an array that is not 2-D (images), and a numeric array
    without column names when ``categorical`` and ``missing`` are None: such
    input is taken as it is, as before encodings existed.

    Parameters
    ----------
    X : array-like
        The table.
    categorical : list of str or int, or None
        Columns to encode as categories although they hold numbers (names, or
        positions for a table without names).
    missing : None or "impute"
        None: a missing cell is refused; "impute": see the module's docstring.
    rows : array-like of int or None
        The rows the encoding is fitted on.
    name : str
        The table's name in messages.

    Returns
    -------
    TableEncoding or None
        The rule.
    """
    if missing not in MISSING:
        raise ValueError(f"missing must be None (refuse missing cells) or 'impute', got {missing!r}")
    if categorical is not None and (isinstance(categorical, (str, bytes)) or not hasattr(categorical, "__iter__")):
        raise ValueError(f"categorical must be a list of column names (or positions), got {categorical!r}")
    if isinstance(X, torch.Tensor) or (isinstance(X, np.ndarray) and X.dtype.kind in "biufc"
                                       and not categorical and missing is None):
        return None  # the common case, decided without a copy
    refuse_sparse(X, name)
    table = Table.of(X, name)
    if table is None:  # images, or a shape the caller refuses
        return None
    forced = table.positions(list(categorical or ()), name)
    kinds = [j in forced or table.categorical[j] or table.has_text(j, name) for j in range(table.width)]
    if table.names is None and not any(kinds) and missing is None:
        return None
    picked = np.arange(table.n_rows) if rows is None else np.asarray(rows)
    categories = []
    for j in range(table.width):
        if not kinds[j]:
            categories.append(None)
            continue
        keys = _keys(table.columns[j][picked])
        present = keys[np.array([k is not None for k in keys], dtype=bool)]
        found = OneHotEncoder(handle_unknown="ignore").fit(present.reshape(-1, 1)).categories_[0] if len(present) else []
        categories.append(tuple(str(c) for c in found))
    encoding = TableEncoding(table.names, table.width, tuple(categories), missing, (0.0,) * table.width, ())
    if missing is None:
        return encoding
    codes = encoding.codes(table, name)[picked]
    imputer = SimpleImputer(strategy="median", add_indicator=True, keep_empty_features=True).fit(codes)
    fill = tuple(0.0 if kinds[j] else float(imputer.statistics_[j]) for j in range(table.width))
    indicators = () if imputer.indicator_ is None else tuple(int(j) for j in imputer.indicator_.features_)
    return TableEncoding(table.names, table.width, tuple(categories), missing, fill, indicators)


def fitted(X, categorical=None, missing=None, name: str = "X"):
    """What an estimator's ``fit`` does with a table: the encoding and the encoded array.

    Parameters
    ----------
    X : array-like
        The training table (a tensor passes through untouched).
    categorical, missing
        As in ``fit_encoding``.
    name : str
        Its name in messages.

    Returns
    -------
    encoding : TableEncoding or None
        The rule (``fit_encoding``).
    X : array-like
        The encoded float64 columns, or X itself when there is no rule.
    """
    encoding = fit_encoding(X, categorical, missing, name=name)
    return encoding, scored(X, encoding, name)


def scored(X, encoding: "TableEncoding | None", name: str = "X"):
    """A table as an estimator scores it: through its encoding, if it has one.

    Parameters
    ----------
    X : array-like
        The table (a tensor passes through untouched).
    encoding : TableEncoding or None
        The estimator's rule.
    name : str
        Its name in messages.

    Returns
    -------
    array-like
        The encoded float64 columns, or ``numeric(X)`` without a rule.
    """
    if encoding is None or isinstance(X, torch.Tensor):
        return numeric(X, name)
    return encoding.transform(X, name)


@dataclass(frozen=True)
class TableEncoding:
    """The recorded rule that turns a table into numbers (see the module's docstring).

    Parameters
    ----------
    columns : tuple of str or None
        The column names fit saw (None: a table without names, taken by position).
    width : int
        The number of input columns.
    categories : tuple
        Per input column: None (numeric) or its training categories, as text, sorted.
    missing : None or str
        None (missing cells refused) or "impute".
    fill : tuple of float
        Per input column: the value of a missing numeric cell (its training median).
    indicators : tuple of int
        The input columns that have an indicator column, in order.
    """

    columns: tuple[str, ...] | None
    width: int
    categories: tuple[tuple[str, ...] | None, ...]
    missing: str | None
    fill: tuple[float, ...]
    indicators: tuple[int, ...]

    def __post_init__(self):
        problems = []
        if self.columns is not None and len(self.columns) != self.width:
            problems.append(f"{len(self.columns)} names for {self.width} columns")
        if len(self.categories) != self.width or len(self.fill) != self.width:
            problems.append("categories and fill need one entry per column")
        if self.missing not in MISSING:
            problems.append(f"missing {self.missing!r}")
        if not all(math.isfinite(v) for v in self.fill):
            problems.append("a fill value that is not finite")
        if any(not 0 <= j < self.width for j in self.indicators) or list(self.indicators) != sorted(set(self.indicators)):
            problems.append("indicator columns out of range or out of order")
        if problems:
            raise ValueError(f"a table encoding that does not hold together ({'; '.join(problems)})")

    @property
    def n_features(self) -> int:
        """The number of encoded columns."""
        return sum(1 if c is None else len(c) for c in self.categories) + len(self.indicators)

    def label(self, j: int) -> str:
        """Input column ``j``'s name in messages.

        Parameters
        ----------
        j : int
            The column's position.

        Returns
        -------
        str
            Its name, or its position for a table without names.
        """
        return str(j) if self.columns is None else self.columns[j]

    def feature_names(self) -> list[str]:
        """The encoded columns' names.

        Returns
        -------
        list of str
            A numeric column's name, ``name=category`` for a one-hot column,
            ``missing(name)`` for an indicator column (a position without names).
        """
        names = []
        for j, found in enumerate(self.categories):
            names += [self.label(j)] if found is None else [f"{self.label(j)}={c}" for c in found]
        return names + [f"missing({self.label(j)})" for j in self.indicators]

    def expects(self) -> str:
        """What the codes an export takes look like, in words (its metadata).

        Returns
        -------
        str
            The width, each column as a number or a category code, and what NaN means.
        """
        order = "" if self.columns is None else f" (columns {_listed(self.columns, 8)})"
        coded = [f"{self.label(j)!r} ({_listed([f'{k} {c}' for k, c in enumerate(found)], 10)})"
                 for j, found in enumerate(self.categories) if found is not None]
        codes = f", except category codes in {'; '.join(coded)} (another number: unseen)" if coded else ""
        gap = "a missing cell (imputed)" if self.missing == "impute" else "unreadable (decision -1)"
        return f"table rows (N, {self.width}){order}, float32: numbers{codes}; NaN: {gap}"

    def codes(self, X, name: str = "X") -> np.ndarray:
        """The table's cells as the float64 codes ``TableEncode`` takes.

        Parameters
        ----------
        X : array-like
            A table with the columns fit saw (by name when both have names).
        name : str
            Its name in messages.

        Returns
        -------
        numpy.ndarray
            (N, width): numbers, category indices (-1: unseen), NaN for missing cells.

        Raises
        ------
        ValueError
            A missing or extra column, a width other than fit's, text in a
            numeric column, an infinite cell, or a missing cell when ``missing``
            is None, each named by its row and column.
        """
        table = X if isinstance(X, Table) else Table.of(X, name)
        name = table.source or name  # a file's name rather than "X"
        table = self._aligned(table, name)
        out = np.empty((table.n_rows, self.width))
        for j, found in enumerate(self.categories):
            if found is None:
                out[:, j] = _numbers(table, j, name)
            else:
                index = {c: float(k) for k, c in enumerate(found)}
                out[:, j] = [math.nan if k is None else index.get(k, -1.0) for k in _keys(table.columns[j])]
        if self.missing is None:
            table.refuse_missing(name, np.isnan(out))
        return out

    def transform(self, X, name: str = "X") -> np.ndarray:
        """The table's encoded float64 columns (``codes``, then ``TableEncode``).

        Parameters
        ----------
        X : array-like
            A table with the columns fit saw.
        name : str
            Its name in messages.

        Returns
        -------
        numpy.ndarray
            (N, n_features), in the order of ``feature_names``.
        """
        return self.encode(self.codes(X, name))

    def encode(self, codes) -> np.ndarray:
        """Codes as the encoded float64 columns, by ``TableEncode``.

        Parameters
        ----------
        codes : array-like
            (N, width), as ``codes`` gives them.

        Returns
        -------
        numpy.ndarray
            (N, n_features).
        """
        with torch.no_grad():
            return self.module()(torch.as_tensor(np.asarray(codes, dtype=np.float64))).numpy()

    def module(self) -> "TableEncode":
        """The rule after ``codes`` in plain torch operations, for scoring and export.

        Returns
        -------
        TableEncode
            The module: codes (N, width) in, encoded columns (N, n_features) out.
        """
        return TableEncode(self)

    def to_dict(self) -> dict:
        """The rule as plain lists and numbers (a model file stores it).

        Returns
        -------
        dict
            The fields, tuples as lists.
        """
        return {"columns": None if self.columns is None else list(self.columns), "width": self.width,
                "categories": [None if c is None else list(c) for c in self.categories], "missing": self.missing,
                "fill": list(self.fill), "indicators": list(self.indicators)}

    @classmethod
    def from_dict(cls, values: dict) -> "TableEncoding":
        """The rule ``to_dict`` wrote.

        Parameters
        ----------
        values : dict
            ``to_dict``'s output, read from a file.

        Returns
        -------
        TableEncoding
            The rule.

        Raises
        ------
        ValueError
            A field missing or garbled, or fields that do not hold together.
        """
        try:
            return cls(None if values["columns"] is None else tuple(map(str, values["columns"])), int(values["width"]),
                       tuple(None if c is None else tuple(map(str, c)) for c in values["categories"]),
                       values["missing"], tuple(map(float, values["fill"])), tuple(map(int, values["indicators"])))
        except (KeyError, TypeError) as err:
            raise ValueError(f"a table encoding lacks or garbles a field ({type(err).__name__}: {err})") from None

    def _aligned(self, table: "Table", name: str) -> "Table":
        """The table's columns in fit's order: by name when both have names, else by position."""
        if table.width != self.width and (self.columns is None or table.names is None):
            said = "" if self.columns is None else f" ({', '.join(self.columns[:20])})"
            raise ValueError(f"{name} has {table.width} column(s); the model was fitted on {self.width}{said}")
        if self.columns is None or table.names is None:
            return table
        lacking = [c for c in self.columns if c not in table.names]
        extra = [c for c in table.names if c not in self.columns]
        if lacking or extra:
            said = "; ".join(part for part in (lacking and f"lacks column(s) {lacking}",
                                               extra and f"has column(s) {extra} the model was not fitted on") if part)
            raise ValueError(f"{name} {said}; the model takes the columns {list(self.columns)}")
        return table.reordered(self.columns)


class TableEncode(nn.Module):
    """Codes (N, width) -> the encoded columns (N, n_features), float64.

    Every output column reads one input column (``source``): a numeric column
    as it is (a NaN filled with ``fill`` under "impute"), a one-hot column as
    ``code == its category``, an indicator as ``isnan``. Without "impute" a NaN
    or infinite code stays NaN in the output: the row is unreadable and its
    score NaN, never normal. Elementwise operations over buffers only, so
    ONNX and TorchScript export it as it is.
    """

    def __init__(self, encoding: TableEncoding):
        super().__init__()
        source, code, kind, fill = [], [], [], []
        for j, found in enumerate(encoding.categories):
            count = 1 if found is None else len(found)
            source += [j] * count
            code += [-1.0] if found is None else [float(k) for k in range(count)]
            kind += [0 if found is None else 1] * count
            fill += [encoding.fill[j]] * count
        source += list(encoding.indicators)
        code += [-1.0] * len(encoding.indicators)
        kind += [2] * len(encoding.indicators)
        fill += [0.0] * len(encoding.indicators)
        self.width = encoding.width
        self.impute = encoding.missing == "impute"
        self.expects = encoding.expects()
        self.register_buffer("source", torch.tensor(source, dtype=torch.long))
        self.register_buffer("code", torch.tensor(code, dtype=torch.float64).view(1, -1))
        self.register_buffer("fill", torch.tensor(fill, dtype=torch.float64).view(1, -1))
        self.register_buffer("numeric", torch.tensor([k == 0 for k in kind]).view(1, -1))
        self.register_buffer("onehot", torch.tensor([k == 1 for k in kind]).view(1, -1))

    def forward(self, codes: torch.Tensor) -> torch.Tensor:
        if codes.dim() != 2 or codes.shape[1] != self.width:
            raise ValueError("got an array of shape " + str(list(codes.shape)) + "; the model expects " + self.expects)
        x = torch.index_select(codes.double(), 1, self.source)
        gap = torch.isnan(x)
        unreadable = x - x  # 0, or NaN for a NaN or infinite code
        numbers = x
        if self.impute:  # a missing cell is a value of its own; an infinite one stays unreadable
            unreadable = torch.where(gap, torch.zeros_like(x), unreadable)
            numbers = torch.where(gap, self.fill, x)
        onehot = (x == self.code).double() + unreadable
        return torch.where(self.numeric, numbers, torch.where(self.onehot, onehot, gap.double()))


class Table:
    """A table's columns as 1-D arrays (float64 numbers, or objects: text, numbers, missing
    cells), with its names (None: none) and whether pandas marked a column categorical."""

    def __init__(self, names, columns: list[np.ndarray], categorical: list[bool] | None = None,
                 row_word: str = "row", first_row: int = 0, source: str | None = None):
        self.names = None if names is None else tuple(names)
        self.columns = columns
        self.categorical = categorical or [False] * len(columns)
        self.row_word, self.first_row, self.source = row_word, first_row, source
        if self.names is not None:
            seen = {n for n in self.names if self.names.count(n) > 1}
            if seen:
                raise ValueError(f"the table has two or more columns named {sorted(seen)}; rename or drop them "
                                 "(a duplicated label column would otherwise train as a feature)")

    @property
    def width(self) -> int:
        """The number of columns."""
        return len(self.columns)

    @property
    def n_rows(self) -> int:
        """The number of rows."""
        return len(self.columns[0]) if self.columns else 0

    def label(self, j: int) -> str:
        """Column ``j``'s name (its position without names)."""
        return str(j) if self.names is None else self.names[j]

    def row(self, i: int) -> str:
        """Row ``i`` in messages ("row 3", or a CSV's "data row 4")."""
        return f"{self.row_word} {int(i) + self.first_row}"

    def has_text(self, j: int, name: str) -> bool:
        """Whether column ``j`` holds a cell of text that is not a number (a CSV's "1.5" is one).

        Parameters
        ----------
        j : int
            The column's position.
        name : str
            The table's name in the message of a refusal.

        Returns
        -------
        bool
            True for a column of text: a categorical one.

        Raises
        ------
        TypeError
            A cell that is neither text, a number nor missing (a dict, a date), with its column.
        """
        if self.columns[j].dtype != object:
            return False
        try:
            return bool(_text_cells(self.columns[j]).any())
        except TypeError as err:  # scikit-learn's check_dtype_object expects a TypeError here
            raise TypeError(f"{name}: column {self.label(j)!r}: {err}") from None

    def refuse_missing(self, name: str, gaps: np.ndarray | None = None) -> None:
        """Refuse the table's missing cells (``gaps``: their mask, if known), naming the first.

        Parameters
        ----------
        name : str
            The table's name in the message.
        gaps : numpy.ndarray or None
            (N, width) booleans; None: found here.

        Raises
        ------
        ValueError
            A missing cell, with its row and column.
        """
        if gaps is None:
            gaps = np.stack([np.isnan(c) if c.dtype != object else np.array([_missing_cell(v) for v in c], dtype=bool)
                             for c in self.columns], axis=1)
        found = np.argwhere(gaps)
        if len(found):
            i, j = found[0]
            raise ValueError(f"{name}: {len(found)} missing cell(s) (empty, None or NaN); first: {self.row(i)}, "
                             f"column {self.label(j)!r}. Fill or drop them, or fit with missing='impute' "
                             "(the command line's --missing impute)")

    def __array__(self, dtype=None, copy=None):
        """The cells as float64 numbers (NaN: missing) when every column holds numbers, else as objects."""
        if any(self.has_text(j, "the table") for j in range(self.width)):
            cells = np.stack(self.columns, axis=1).astype(object)
        else:
            cells = np.stack([_numbers(self, j, "the table") for j in range(self.width)], axis=1)
        return cells if dtype is None else cells.astype(dtype)

    def reordered(self, names) -> "Table":
        """The columns ``names``, in that order."""
        at = [self.names.index(n) for n in names]
        return Table(names, [self.columns[j] for j in at], [self.categorical[j] for j in at], self.row_word,
                     self.first_row, self.source)

    def positions(self, wanted: list, name: str) -> set[int]:
        """The positions of columns named (or numbered, without names) in ``wanted``."""
        if self.names is not None:
            unknown = [w for w in wanted if w not in self.names]
            if unknown:
                raise ValueError(f"categorical names {unknown}, which {name} does not have (columns: "
                                 f"{list(self.names)[:20]})")
            return {self.names.index(w) for w in wanted}
        wanted = [int(w) if isinstance(w, str) and w.isdigit() else w for w in wanted]  # "0,2" from a flag
        bad = [w for w in wanted if not (isinstance(w, int) and 0 <= w < self.width)]
        if bad:
            raise ValueError(f"categorical {bad}: {name} has no column names, so categorical takes positions "
                             f"0 to {self.width - 1}")
        return set(wanted)

    @classmethod
    def from_cells(cls, names, rows: list[list], source: str | None = None, row_word: str = "data row",
                   first_row: int = 1) -> "Table":
        """A table from text cells (a CSV's), empty cells missing.

        Parameters
        ----------
        names : list of str
            The header.
        rows : list of list of str
            The data rows, each as long as the header.
        source : str or None
            Where the cells come from (a file), the table's name in messages.
        row_word : str
            How a row is named in messages.
        first_row : int
            The number of the first row in messages.

        Returns
        -------
        Table
            Its columns as objects: text, or None where a cell is empty.
        """
        cells = np.array([[cell.strip() or None for cell in row] for row in rows], dtype=object).reshape(
            len(rows), len(names))
        return cls(names, [cells[:, j] for j in range(len(names))], None, row_word, first_row, source)

    @classmethod
    def of(cls, X, name: str = "X") -> "Table | None":
        """X's columns (None when X is not 2-D)."""
        if isinstance(X, Table):
            return X
        if _is_pandas(X):
            if getattr(X, "ndim", 1) != 2:
                return None
            names = [str(c) for c in X.columns] if all(isinstance(c, str) for c in X.columns) else None
            columns, categorical = [], []
            for j in range(X.shape[1]):
                column = X.iloc[:, j]
                marked = str(column.dtype) == "category"
                categorical.append(marked)
                if marked or column.dtype.kind not in "biuf":
                    columns.append(column.astype(object).to_numpy())
                else:
                    columns.append(column.to_numpy(dtype=np.float64, na_value=np.nan))
            return cls(names, columns, categorical)
        array = np.asarray(X)
        if array.dtype.kind in "USO" and isinstance(X, (list, tuple)):
            array = np.asarray(X, dtype=object)  # numbers stay numbers beside text
        if array.ndim != 2:
            return None
        if array.dtype.kind == "c":
            raise ValueError(f"{name} holds complex values, not real numbers")
        kind = "f" if array.dtype.kind in "biuf" else "O"
        return cls(None, [array[:, j].astype(np.float64 if kind == "f" else object) for j in range(array.shape[1])])


def _is_pandas(data) -> bool:
    pandas = sys.modules.get("pandas")  # never imported here: a DataFrame brings it
    return pandas is not None and isinstance(data, (pandas.DataFrame, pandas.Series))


def _missing_cell(value) -> bool:
    if value is None or (isinstance(value, str) and not value.strip()):
        return True
    if isinstance(value, (float, np.floating)):
        return math.isnan(value)
    pandas = sys.modules.get("pandas")
    return pandas is not None and (value is pandas.NA or value is pandas.NaT)


def _text_cells(column: np.ndarray) -> np.ndarray:
    """Which cells of an object column hold text that is not a number (TypeError for a cell
    that is neither: a dict, a list)."""
    def text(value) -> bool:
        if _missing_cell(value) or isinstance(value, (Real, np.number)):
            return False
        if not isinstance(value, (str, bytes)):
            raise TypeError(f"a cell holds a {type(value).__name__}; a cell's argument must be a string or a real "
                            "number (or missing): convert it to a number, or to text for a category")
        try:
            float(value)
            return False
        except (TypeError, ValueError):
            return True
    return np.array([text(v) for v in column], dtype=bool)


def _listed(items, most: int) -> str:
    """Up to ``most`` items, comma-separated, "..." for the rest."""
    return ", ".join(map(str, items[:most])) + (", ..." if len(items) > most else "")


def _key(value) -> str | None:
    """A cell's category as text (None: missing): a number as its shortest text."""
    if _missing_cell(value):
        return None
    if isinstance(value, (Real, np.number)) and not isinstance(value, (bool, np.bool_)):
        number = float(value)
        return str(int(number)) if number.is_integer() else repr(number)
    return str(value)


def _keys(column: np.ndarray) -> np.ndarray:
    return np.array([_key(v) for v in column], dtype=object)


def _numbers(table: Table, j: int, name: str) -> np.ndarray:
    """Column ``j`` as float64 numbers, NaN for missing cells; text refused by row and column."""
    column = table.columns[j]
    if column.dtype != object:
        values = column.astype(np.float64)
    else:
        values = np.empty(len(column))
        for i, cell in enumerate(column):
            if _missing_cell(cell):
                values[i] = math.nan
                continue
            try:
                values[i] = float(cell)
            except (TypeError, ValueError):
                raise ValueError(f"{name}: {table.row(i)}, column {table.label(j)!r} holds {cell!r}, not a number "
                                 "(the column was numeric when the model was fitted)") from None
    infinite = np.flatnonzero(np.isinf(values))
    if len(infinite):
        raise ValueError(f"{name} holds NaN or infinite values: {table.row(infinite[0])}, column {table.label(j)!r} is "
                         f"{values[infinite[0]]}; only finite numbers are taken")
    return values
