"""The kernel-approximation study (the paper's Fig. 4 and Table IV) from a sweep
over backends and budgets m.

Per backend and m, over the runs (classes x seeds): test AUROC, the alpha-step's
seconds per epoch split into kernel build and dual solve (the trainer's
history), and the alpha-step's peak memory (one measured pass per run, see
``dlmsvdd.training.memory``). The exact kernel is one point, its budget irrelevant.
Pareto-efficient points maximise AUROC and minimise fit time (build + solve)
and peak memory.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from dlmsvdd_ext.kernels import BACKENDS

from .plotting import pyplot
from .tables import Stat, csv_rows, markdown_rows, method_keys

STUDY_KEYS = {"kernel", "n_components"}
MB = 2**20



def pareto_efficient(values, maximize) -> np.ndarray:
    """Mask of the Pareto-efficient rows of ``values`` (points x objectives).
    ``maximize[k]`` says whether objective k is maximised (else minimised). A
    point is dominated when another is at least as good in every objective and
    strictly better in one; equal points do not dominate each other."""
    values = np.asarray(values, dtype=float)
    maximize = np.asarray(maximize, dtype=bool)
    if values.ndim != 2 or values.shape[1] != maximize.size:
        raise ValueError(f"values must be (points, {maximize.size}) for {maximize.size} objectives, "
                         f"got shape {values.shape}")
    if not np.isfinite(values).all():
        raise ValueError("values must be finite (a missing measurement cannot be ranked)")
    better = np.where(maximize, values, -values)  # larger is better in every column
    at_least = (better[:, None, :] >= better[None, :, :]).all(-1)  # [j, i]: j at least as good as i everywhere
    strictly = (better[:, None, :] > better[None, :, :]).any(-1)  # [j, i]: j better than i somewhere
    return ~(at_least & strictly).any(0)


@dataclass
class Point:
    kernel: str
    m: int | None  # the budget (config n_components); None for the exact kernel
    auroc: Stat
    build: Stat  # seconds per epoch
    solve: Stat
    fit: Stat  # build + solve, per run
    peak_mb: Stat
    full_kernel_mb: float  # what storing the full N x N kernel takes (the exact backend's dense K)
    rank: float | None  # mean columns of the factor Z (data-dependent maps cap m at N and drop null directions)
    efficient: bool = False

    @property
    def label(self) -> str:
        return "exact" if self.m is None else f"{self.kernel} m={self.m}"


def applies(records: list[dict]) -> bool:
    """A study of backends / budgets: they vary, and nothing else does (besides task axes)."""
    keys = set(method_keys(records))
    return bool(keys) and keys <= STUDY_KEYS


def _budget(config: dict) -> int | None:
    return None if config["kernel"] == "exact" else int(config["n_components"])


def points(records: list[dict]) -> list[Point]:
    """One point per backend and budget, exact first, then the backends in
    ``dlmsvdd_ext.kernels.BACKENDS`` order, m ascending; Pareto flags set."""
    groups: dict = {}
    for r in records:
        if "alpha_step" not in r or "mean_seconds_build" not in r.get("timing", {}):
            raise ValueError(f"task {r.get('name')!r} has no alpha-step measurements (build / solve seconds, "
                             "peak memory): it was run before they were recorded; run it again")
        groups.setdefault((r["config"]["kernel"], _budget(r["config"])), []).append(r)
    out = []
    for (kernel, m), runs in sorted(groups.items(), key=lambda kv: (BACKENDS.index(kv[0][0]), kv[0][1] or 0)):
        build = [r["timing"]["mean_seconds_build"] for r in runs]
        solve = [r["timing"]["mean_seconds_solve"] for r in runs]
        ranks = [r["alpha_step"]["rank"] for r in runs if r["alpha_step"].get("rank") is not None]
        out.append(Point(kernel, m, Stat.of(r["test"]["auroc"] for r in runs), Stat.of(build), Stat.of(solve),
                         Stat.of(np.add(build, solve)), Stat.of(r["alpha_step"]["peak_bytes"] / MB for r in runs),
                         float(np.mean([r["alpha_step"]["full_kernel_bytes"] for r in runs])) / MB,
                         float(np.mean(ranks)) if ranks else None))
    mask = pareto_efficient([[p.auroc.mean, p.fit.mean, p.peak_mb.mean] for p in out], [True, False, False])
    for p, flag in zip(out, mask):
        p.efficient = bool(flag)
    return out


# ---- tables

def _g(x: float) -> str:
    return f"{x:.3g}"


HEADER = ["kernel", "m", "Z columns", "AUROC", "build (s)", "solve (s)", "fit (s)", "peak (MB)", "Pareto"]


def _markdown_row(p: Point) -> list:
    return [p.kernel, "–" if p.m is None else p.m, "–" if p.rank is None else f"{p.rank:.0f}", p.auroc.text(4),
            _g(p.build.mean), _g(p.solve.mean), _g(p.fit.mean), _g(p.peak_mb.mean), "yes" if p.efficient else ""]


def markdown(pts: list[Point], title: str) -> str:
    """Every point (the study's full table)."""
    return f"**{title}**\n\n" + markdown_rows(HEADER, [_markdown_row(p) for p in pts])


def pareto_markdown(pts: list[Point], title: str) -> str:
    """Table IV: the exact kernel (the reference) and the Pareto-efficient approximations."""
    chosen = [p for p in pts if p.m is None or p.efficient]
    return f"**{title}**\n\n" + markdown_rows(HEADER[:-1], [_markdown_row(p)[:-1] for p in chosen])


def csv(pts: list[Point]) -> str:
    header = ["kernel", "m", "z_columns", "n_runs"] + [f"{name}_{part}" for name in
                                                        ("auroc", "build_s", "solve_s", "fit_s", "peak_mb")
                                                        for part in ("mean", "std")] + ["full_kernel_mb", "pareto"]
    rows = [[p.kernel, p.m, p.rank, p.auroc.n] + [v for s in (p.auroc, p.build, p.solve, p.fit, p.peak_mb)
                                                   for v in (s.mean, s.std)] + [p.full_kernel_mb, p.efficient]
            for p in pts]
    return csv_rows(header, rows)


# ---- the figure

def _band(ax, x, stats: list[Stat], color, log: bool):
    mean = np.array([s.mean for s in stats])
    low, high = mean - [s.std for s in stats], mean + [s.std for s in stats]
    if log:  # a band below zero has no place on a log axis: clip it to a tenth of the mean
        low = np.maximum(low, mean / 10)
    ax.fill_between(x, low, high, color=color, alpha=0.12, lw=0)


def _log_ticks(axis) -> None:
    """Plain numbers at 1, 2, 5 x 10^k (the default labels the minor ticks of a
    narrow log range in overlapping scientific notation)."""
    from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter

    axis.set_major_locator(LogLocator(subs=(1.0, 2.0, 5.0)))
    axis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
    axis.set_minor_formatter(NullFormatter())


def plot(pts: list[Point], path: Path, title: str = "") -> None:
    """The paper's Fig. 4: (a) AUROC, (b) build + solve seconds, (c) peak memory,
    each against m with +-1 std bands over the runs and the exact kernel dashed
    (in (c): the memory of the full N x N kernel, the measured exact peak dotted);
    (d) AUROC against fit time, marker size growing with m, exact as a star, the
    (AUROC, time) Pareto front as a step line, the points efficient in AUROC,
    time and memory ringed in black."""
    from matplotlib.ticker import NullFormatter


    plt = pyplot()
    exact = next((p for p in pts if p.m is None), None)
    approx = [p for p in pts if p.m is not None]
    backends = list(dict.fromkeys(p.kernel for p in approx))
    colors = {b: plt.get_cmap("tab10")(i) for i, b in enumerate(backends)}
    budgets = sorted({p.m for p in approx})

    fig, axes = plt.subplots(2, 2, figsize=(12, 9))
    (ax_a, ax_b), (ax_c, ax_d) = axes
    panels = ((ax_a, "auroc", "test AUROC", False, "(a) accuracy vs budget"),
              (ax_b, "fit", "build + solve seconds per epoch", True, "(b) alpha-step time vs budget"),
              (ax_c, "peak_mb", "alpha-step peak memory (MB)", True, "(c) peak memory vs budget"))
    for ax, attr, ylabel, log, heading in panels:
        for b in backends:
            series = [p for p in approx if p.kernel == b]
            x, stats = [p.m for p in series], [getattr(p, attr) for p in series]
            ax.plot(x, [s.mean for s in stats], "o-", color=colors[b], label=b, ms=4)
            _band(ax, x, stats, colors[b], log)
        ax.set_xscale("log", base=2)
        ax.set_xticks(budgets, [str(m) for m in budgets])
        ax.xaxis.set_minor_formatter(NullFormatter())
        if log:
            ax.set_yscale("log")
            _log_ticks(ax.yaxis)
        ax.set(xlabel="budget m", ylabel=ylabel, title=heading)
        ax.grid(alpha=0.3, which="both" if log else "major")
    if exact is not None:
        for ax, value in ((ax_a, exact.auroc.mean), (ax_b, exact.fit.mean), (ax_c, exact.full_kernel_mb)):
            ax.axhline(value, color="k", ls="--", lw=1.2, label="exact")
        ax_c.axhline(exact.peak_mb.mean, color="k", ls=":", lw=1.2)
        # the two lines can nearly coincide: the lower one is labelled below itself
        below = -11 if exact.full_kernel_mb <= exact.peak_mb.mean else 3
        ax_c.annotate("exact: full N x N kernel", (0.01, exact.full_kernel_mb), xycoords=("axes fraction", "data"),
                      xytext=(0, below), textcoords="offset points", fontsize=8)
        ax_c.annotate("exact: measured peak", (0.01, exact.peak_mb.mean), xycoords=("axes fraction", "data"),
                      xytext=(0, -8 - below), textcoords="offset points", fontsize=8)

    _pareto_panel(ax_d, exact, approx, colors, budgets)
    handles, labels = ax_a.get_legend_handles_labels()
    fig.legend(handles, labels, loc="lower center", ncol=len(labels), fontsize=9, frameon=False)
    if title:
        fig.suptitle(title)
    fig.tight_layout(rect=(0, 0.04, 1, 0.97 if title else 1))
    fig.savefig(path, dpi=120)
    plt.close(fig)


def _pareto_panel(ax, exact, approx, colors, budgets):
    sizes = {m: 20 + 45 * i for i, m in enumerate(budgets)}  # marker area grows with m
    for p in approx:
        ax.errorbar(p.fit.mean, p.auroc.mean, yerr=p.auroc.std, fmt="none", ecolor=colors[p.kernel], alpha=0.3)
        ax.scatter(p.fit.mean, p.auroc.mean, s=sizes[p.m], color=colors[p.kernel], zorder=3,
                   edgecolors="k" if p.efficient else "none", linewidths=1.0)
    everything = approx + ([exact] if exact is not None else [])
    if exact is not None:
        ax.scatter(exact.fit.mean, exact.auroc.mean, marker="*", s=260, color="k", zorder=4, label="exact")
    front = [p for p, keep in zip(everything, pareto_efficient(
        [[p.auroc.mean, p.fit.mean] for p in everything], [True, False])) if keep]
    front.sort(key=lambda p: p.fit.mean)
    ax.step([p.fit.mean for p in front], [p.auroc.mean for p in front], where="post", color="k", lw=1, alpha=0.6,
            label="Pareto front (AUROC, time)")
    for m in (budgets[0], budgets[-1]):  # a key to the marker sizes
        ax.scatter([], [], s=sizes[m], color="0.6", label=f"m = {m}")
    ax.scatter([], [], s=40, color="w", edgecolors="k", label="efficient in AUROC, time, memory")
    ax.set_xscale("log")
    _log_ticks(ax.xaxis)
    ax.set(xlabel="build + solve seconds per epoch", ylabel="test AUROC", title="(d) accuracy-efficiency trade-off")
    ax.grid(alpha=0.3, which="both")
    ax.legend(fontsize=8, loc="best")
