"""
The Frank-Wolfe certificate: gap against iterations
===================================================

Every solver of the lp-SVDD dual stops on the Frank-Wolfe gap, which bounds
how far the objective is from its optimum: ``gap <= tol * objective`` is the
certificate. ``history_`` keeps the gap of every iteration. Three solvers on
the same problem (the digits' pixels, the 3s normal, one labelled anomaly per
ten normal images), to ``tol = 1e-8``: accelerated projected gradient (the
default), pairwise Frank-Wolfe and the paper's vanilla Frank-Wolfe.
"""

# %%
import warnings

import matplotlib.pyplot as plt
import numpy as np
from sklearn.datasets import load_digits
from sklearn.exceptions import ConvergenceWarning

from dlmsvdd_ext import LpSVDD

X, digit = load_digits(return_X_y=True)
X = X / 16.0
y = np.where(digit == 3, 1, -1)
keep = (y == 1) | (np.arange(len(y)) % 10 == 0)
fits = {}
for solver in ("apg", "pairwise", "paper"):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", ConvergenceWarning)
        fits[solver] = LpSVDD(solver=solver, tol=1e-8, max_iter=3000).fit(X[keep], y[keep])
    m = fits[solver]
    print(f"{solver:9} {m.n_iter_:5d} iterations, relative gap {m.gap_ / m.objective_:.2e}, "
          f"converged_ {m.converged_}, stalled_ {m.stalled_}")
    for w in caught:
        print("   ", str(w.message)[:150])

# %%
# The paper's step 2/(tau + 2) falls as 1/tau: its gap stops falling long
# before the tolerance, the stopping rule says so (``stalled_``, a
# ``ConvergenceWarning``) instead of calling the fit converged.
fig, ax = plt.subplots(figsize=(6, 4))
for solver, m in fits.items():
    relative = np.asarray(m.history_["gap"]) / abs(m.objective_)
    ax.loglog(np.arange(1, relative.size + 1), np.maximum(relative, 1e-16), label=f"{solver} ({m.n_iter_} it.)")
ax.axhline(1e-8, color="k", ls=":", lw=1, label="tol")
ax.set(xlabel="iteration", ylabel="relative Frank-Wolfe gap", title="certificates of three solvers")
ax.legend(fontsize=8)
ax.grid(alpha=0.3, which="both")
fig.tight_layout()
