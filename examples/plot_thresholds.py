"""
Thresholds and decisions, side by side
======================================

A score needs a line to become a decision. Three lines on the same test
scores: the threshold ``fit`` chose (the middle of the validation gap of
maximal balanced accuracy, since validation holds anomalies), the
conformal false-positive-rate rule ``predict(X, fpr=0.1)`` (the threshold
``fit`` sets without validation anomalies: p-value <= ``contamination``
over the validation normals) and Benjamini-Hochberg's false-discovery-rate
rule ``predict(X, fdr=0.1)`` over the batch.
"""

# %%
import matplotlib.pyplot as plt
import numpy as np
from sklearn.datasets import load_digits

from dlmsvdd import DLMSVDD

digits = load_digits()
X, y = digits.images / 16.0, np.where(digits.target == 3, 1, -1)
first = np.random.default_rng(0).permutation(len(y)) < 1000  # a random 1000 images to train on
train = first & ((y == 1) | (np.arange(len(y)) % 10 == 0))     # their 3s and a few labelled anomalies
test = ~first
model = DLMSVDD(epochs=10, seed=0, verbose=0).fit(X[train], y[train])
f = model.dissimilarity(X[test])
normal = y[test] > 0
print(f"{model.n_calibration_} calibration normals ({model.calibration_source_}); "
      f"threshold_ {model.threshold_:.4g} ({model.threshold_rule_})")

# %%
# The three decisions
# -------------------
decisions = {
    "threshold_": model.predict(X[test]) < 0,
    "fpr = 0.1 (conformal)": model.predict(X[test], fpr=0.1) < 0,
    "fdr = 0.1 (Benjamini-Hochberg)": model.predict(X[test], fdr=0.1) < 0,
}
for name, flagged in decisions.items():
    false_discoveries = (flagged & normal).sum() / max(flagged.sum(), 1)
    print(f"{name:32} FPR {flagged[normal].mean():.3f}  power {flagged[~normal].mean():.3f}  "
          f"FDP {false_discoveries:.3f}")

# %%
# On the scores, and in rates
# ---------------------------
# The rules that are not a fixed threshold are drawn at the lowest score they
# flag.
fig, (ax_f, ax_r) = plt.subplots(1, 2, figsize=(11, 4))
bins = np.geomspace(max(f.min(), 1e-4), f.max(), 40)
ax_f.hist(f[normal], bins=bins, alpha=0.6, label="test normals")
ax_f.hist(f[~normal], bins=bins, alpha=0.6, label="test anomalies")
for (name, flagged), color in zip(decisions.items(), ("k", "C3", "C4")):
    ax_f.axvline(f[flagged].min(), color=color, ls="--", lw=1.2, label=name)
ax_f.set(xscale="log", xlabel="f(x) (dissimilarity)", ylabel="images", title="test scores and where each rule cuts")
ax_f.legend(fontsize=7)
names = list(decisions)
x = np.arange(len(names))
ax_r.bar(x - 0.2, [decisions[n][normal].mean() for n in names], 0.4, label="false positive rate")
ax_r.bar(x + 0.2, [decisions[n][~normal].mean() for n in names], 0.4, label="power (anomalies flagged)")
ax_r.axhline(0.1, color="k", lw=0.8, ls=":")
ax_r.set_xticks(x, [n.replace(" (", "\n(") for n in names], fontsize=7)
ax_r.set(ylim=(0, 1.05), title="rates on the test set")
ax_r.legend(fontsize=8)
fig.tight_layout()

# %%
# Conformal p-values
# ------------------
# ``p_values`` ranks each test score among the calibration normals':
# ``(1 + #{calibration f >= f(x)}) / (n_cal + 1)``; ``fpr=0.1`` flags p <= 0.1.
p = model.p_values(X[test])
fig, ax = plt.subplots(figsize=(5, 3.5))
ax.hist([p[normal], p[~normal]], bins=20, label=["test normals", "test anomalies"])
ax.axvline(0.1, color="C3", ls="--", label="fpr = 0.1")
ax.set(xlabel="conformal p-value", ylabel="images")
ax.legend(fontsize=8)
fig.tight_layout()
