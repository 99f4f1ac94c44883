"""The tables and plots of a finished sweep folder (``dlmsvdd report``).

Writes, next to the task folders (or into ``output``):

* ``runs.csv``: one row per finished run;
* ``auroc_<data>.{csv,md}``: one-vs-rest AUROC per class and mean (Table II layout);
* ``long_tailed.{csv,md}``: balanced accuracy per rho / shot group (Table V layout);
* ``approx_study.{csv,md}``, ``approx_pareto.{csv,md}``, ``approx_study.png``:
  when the sweep varies only the kernel and budget (Table IV, Fig. 4);
* ``methods.md``: with two methods or more, the Skillings-Mack test of them
  (average ranks, p-value) over data set x class x ratio blocks;
* ``report.md``: all the Markdown tables, in that order.
"""

from __future__ import annotations

from pathlib import Path

from . import approx_study, tables


def _write(path: Path, text: str, written: list) -> None:
    path.write_text(text)
    written.append(path)


def _study_title(records: list[dict]) -> str:
    c = records[0]["config"]
    classes = len({r["config"]["normal_class"] for r in records})
    seeds = len({r["config"]["seed"] for r in records})
    ratio = "all other classes" if c["ratio"] is None else f"ratio {c['ratio']}"
    return f"Kernel approximations on {c['data']} ({ratio}; {classes} classes x {seeds} seed(s))"


def write_report(folder, output=None, keys=None) -> list[Path]:
    """Write the report of a finished sweep: tables (CSV, Markdown) and plots.

    Parameters
    ----------
    folder : str or pathlib.Path
        The sweep folder.
    output : str, pathlib.Path or None
        Where to write (default: the sweep folder).
    keys : list of str or None
        The configuration fields that name a method (default: those that vary).

    Returns
    -------
    list of pathlib.Path
        The files written.
    """
    records = tables.load_records(folder)
    out = Path(output) if output is not None else Path(folder)
    out.mkdir(parents=True, exist_ok=True)
    keys = tables.method_keys(records) if keys is None else list(keys)
    unknown = [k for k in keys if k not in records[0]["config"]]
    if unknown:
        raise ValueError(f"unknown method keys {unknown}; they must be configuration fields")
    written: list[Path] = []
    sections = [f"# Sweep report: {Path(folder).name}\n\n{len(records)} finished runs; methods told apart by "
                f"{', '.join(keys) or 'nothing (one method)'}.\n"]
    _write(out / "runs.csv", tables.runs_csv(records, keys), written)

    one_vs_rest = [r for r in records if not tables.is_long_tailed(r["config"])]
    for data in dict.fromkeys(r["config"]["data"] for r in one_vs_rest):
        table = tables.one_vs_rest_table([r for r in one_vs_rest if r["config"]["data"] == data], keys)
        _write(out / f"auroc_{data}.csv", table.csv(), written)
        _write(out / f"auroc_{data}.md", table.markdown(), written)
        sections.append(table.markdown())

    if any(tables.is_long_tailed(r["config"]) for r in records):
        table = tables.long_tailed_table(records, keys)
        _write(out / "long_tailed.csv", table.csv(), written)
        _write(out / "long_tailed.md", table.markdown(), written)
        sections.append(table.markdown())

    comparison = tables.method_comparison(records, keys)
    if comparison is not None:
        _write(out / "methods.md", comparison, written)
        sections.append(comparison)

    if approx_study.applies(records) and set(keys) <= approx_study.STUDY_KEYS:
        pts = approx_study.points(records)
        title = _study_title(records)
        _write(out / "approx_study.csv", approx_study.csv(pts), written)
        full = approx_study.markdown(pts, f"{title}: every kernel and budget")
        front = approx_study.pareto_markdown(pts, f"{title}: Pareto-efficient points and the exact reference")
        _write(out / "approx_study.md", full, written)
        _write(out / "approx_pareto.md", front, written)
        _write(out / "approx_pareto.csv", approx_study.csv([p for p in pts if p.m is None or p.efficient]), written)
        approx_study.plot(pts, out / "approx_study.png", title)
        written.append(out / "approx_study.png")
        sections += [full, front]

    _write(out / "report.md", "\n".join(sections), written)
    return written
