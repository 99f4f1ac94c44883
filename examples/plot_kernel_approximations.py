"""
Kernel approximations: AUROC and seconds against the budget m
=============================================================

The exact kernel's alpha-step multiplies by the n x n kernel matrix; an
approximation of budget m works with a factor Z (n x m) instead. Here
``LpSVDD`` fits the boundary on fixed features, the digits' pixels (the 3s
normal, every other digit anomalous, half of the images for training), with
the exact kernel and with each approximation at budgets m = 16 ... 512, two
seeds each: test AUROC and the fit's seconds (kernel build and dual solve).
"""

# %%
import time

import matplotlib.pyplot as plt
import numpy as np
from sklearn.datasets import load_digits
from sklearn.metrics import roc_auc_score

from dlmsvdd_ext import LpSVDD

X, digit = load_digits(return_X_y=True)
X = X / 16.0
anomalous = digit != 3
y = np.where(anomalous, -1, 1)
train = np.arange(len(y)) % 2 == 0
budgets = [16, 32, 64, 128, 256, 512]
backends = ["nystrom", "rpcholesky", "rff", "orf", "sorf", "fastfood"]
seeds = [0, 1]


def fit_and_score(**params):
    """Test AUROC and build + solve seconds of one fit."""
    model = LpSVDD(**params).fit(X[train], y[train])
    auroc = roc_auc_score(anomalous[~train], model.dissimilarity(X[~train]))
    return auroc, model.build_seconds_ + model.solve_seconds_


LpSVDD(kernel="sorf", n_components=16).fit(X[train], y[train])  # warm-up: first-call costs out of the times
exact = np.mean([fit_and_score(random_state=s) for s in seeds], axis=0)
results = {b: np.array([[fit_and_score(kernel=b, n_components=m, random_state=s) for s in seeds] for m in budgets])
           for b in backends}  # backend -> (budget, seed, [auroc, seconds])
print(f"exact: AUROC {exact[0]:.4f}, {exact[1] * 1e3:.1f} ms")
for b in backends:
    print(f"{b:10}", "  ".join(f"m={m}: {a:.4f}" for m, a in zip(budgets, results[b][:, :, 0].mean(1))))

# %%
# The trade-off
# -------------
# The exact kernel is the dashed line. With about 900 training samples it is
# cheap; the landmark methods (Nystrom, RPCholesky) come close to its AUROC
# at a small m, the spectral maps need a larger m to get there. On larger
# sets the exact kernel's time grows as n^2 and the approximations' as n m.
fig, (ax_a, ax_t) = plt.subplots(1, 2, figsize=(11, 4))
for b in backends:
    auroc, seconds = results[b][:, :, 0], results[b][:, :, 1]
    ax_a.errorbar(budgets, auroc.mean(1), yerr=auroc.std(1), marker="o", ms=4, capsize=2, label=b)
    ax_t.plot(budgets, 1e3 * seconds.mean(1), "o-", ms=4, label=b)
ax_a.axhline(exact[0], color="k", ls="--", label="exact")
ax_t.axhline(1e3 * exact[1], color="k", ls="--", label="exact")
for ax in (ax_a, ax_t):
    ax.set_xscale("log", base=2)
    ax.set_xticks(budgets, [str(m) for m in budgets])
    ax.set_xlabel("budget m")
    ax.grid(alpha=0.3)
ax_a.set(ylabel="test AUROC", title="accuracy against the budget")
ax_t.set(yscale="log", ylabel="build + solve (ms)", title="fit time against the budget")
ax_a.legend(fontsize=8)
fig.tight_layout()
