"""``dlmsvdd score --explain K``: the K most responsible columns of each row (``DLMSVDD.explain``), as
extra columns of the score CSV; for images, the K most responsible pixels and every map written
beside the CSV (all maps in one ``.npy``, one PNG each)."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from dlmsvdd_ext import explain as attribution


def column_names(model, X, images: bool) -> list[str]:
    """The names of the columns of X (a table's column names, else positions) or of its pixels
    (``[channel,row,col]``, or ``[row,col]`` for grey images given as (N, H, W))."""
    if images:
        return ["[" + ",".join(map(str, index)) + "]" for index in np.ndindex(*np.shape(X)[1:])]
    encoding = model.stored_preprocessing().encoding
    if encoding is not None:
        return [encoding.label(j) for j in range(encoding.width)]
    return [str(j) for j in range(model.stored_preprocessing().width)]


def explained_columns(model, X, k: int, output: Path | None, images: bool,
                      method: str = "auto") -> tuple[list[str], list[list[str]]]:
    """The CSV's extra header and cells: ``top1`` .. ``topK`` (the names) and their attributions;
    for images also ``map`` (the PNG beside ``output``; the maps' array is ``<output>.explain.npy``).

    Parameters
    ----------
    model : dlmsvdd.DLMSVDD
        The loaded model.
    X : array-like
        The raw rows scored (vectors, a table's rows or images).
    k : int
        How many columns (pixels) per row.
    output : pathlib.Path or None
        The CSV file (None: standard output, refused for images: their maps need a place).
    images : bool
        Whether the model takes images (else vectors or a table's rows).
    method : str
        ``DLMSVDD.explain``'s method.

    Returns
    -------
    header : list of str
        The extra columns' names.
    cells : list of list of str
        One list per row.
    """
    names = column_names(model, X, images)
    attribution.check_k(k, len(names))
    if images and output is None:
        raise ValueError("--explain on images writes their maps beside the CSV: give --output FILE")
    A = np.asarray(model.explain(X, method=method), dtype=np.float64)
    top, values = attribution.top_columns(A.reshape(len(A), -1), k, names)
    header = [h for i in range(1, k + 1) for h in (f"top{i}", f"top{i}_attribution")]
    cells = [[c for name, v in zip(r, vs) for c in (name, f"{v:.6g}")] for r, vs in zip(top, values)]
    if images:
        header.append("map")
        for i, path in enumerate(write_maps(A, output)):
            cells[i].append(str(path))
    return header, cells


def write_maps(A: np.ndarray, output: Path) -> list[Path]:
    """The maps as ``<output>.explain.npy`` and one PNG per image in ``<output>.explain/`` (channels
    summed; red where the attribution is positive, blue where negative, white at 0, scaled per image)."""
    import matplotlib

    matplotlib.use("Agg")  # files only, no display
    import matplotlib.pyplot as plt

    np.save(output.with_name(output.name + ".explain.npy"), A)
    folder = output.with_name(output.name + ".explain")
    folder.mkdir(exist_ok=True)
    paths = []
    for i, a in enumerate(A):
        image = a if a.ndim == 2 else a.sum(0)
        scale = float(np.abs(image).max()) or 1.0
        path = folder / f"{i}.png"
        plt.imsave(path, image, cmap="bwr", vmin=-scale, vmax=scale)
        paths.append(path)
    return paths
