"""A bar over the solver's kernel products, for fits long enough to need one.

Why (issue 35): a fit the kernel's cost makes long (an exact kernel on a big table) would otherwise
run silent for minutes. The APG solver costs one kernel product per step (more while it
backtracks), so counting products is counting its work.
"""

from __future__ import annotations

from tqdm.auto import tqdm


class ProductProgress:
    """``op`` (a ``KernelOperator``) that advances a bar at every ``matvec``; everything else is
    ``op``'s. ``close()`` ends the bar."""

    def __init__(self, op, total: int, desc: str):
        self._op = op
        self._bar = tqdm(total=total, desc=desc, unit="product", leave=False)

    def __getattr__(self, name):
        return getattr(self._op, name)

    def matvec(self, v):
        out = self._op.matvec(v)
        self._bar.update()
        return out

    def close(self) -> None:
        self._bar.close()
