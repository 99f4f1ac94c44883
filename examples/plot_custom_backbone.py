"""
The arrays API with a custom backbone
=====================================

``DLMSVDD`` follows scikit-learn and PyOD: ``fit(X, y)`` on numpy arrays of
images (y = +1 normal, -1 labelled anomaly), then ``decision_function``,
``predict``, ``score_samples``. Any ``torch.nn.Module`` that maps a batch of
images to a batch of feature vectors can be the network.
"""

# %%
import matplotlib.pyplot as plt
import numpy as np
import torch
from matplotlib.ticker import NullFormatter
from sklearn.datasets import load_digits
from sklearn.metrics import roc_auc_score
from torch import nn

from dlmsvdd import DLMSVDD


class TinyCNN(nn.Module):
    """Two convolutions, global average pooling and a linear map to 16 features."""

    def __init__(self):
        super().__init__()
        self.layers = nn.Sequential(
            nn.Conv2d(1, 16, 3, padding=1), nn.BatchNorm2d(16), nn.ReLU(), nn.MaxPool2d(2),
            nn.Conv2d(16, 32, 3, padding=1), nn.BatchNorm2d(32), nn.ReLU(),
            nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(32, 16))

    def forward(self, x):
        return self.layers(x)


digits = load_digits()
X = digits.images[:, None] / 16.0                     # (N, 1, 8, 8) float images in [0, 1]
y = np.where(digits.target == 3, 1, -1)
first = np.random.default_rng(0).permutation(len(y)) < 1000  # a random 1000 images to train on
train = first & ((y == 1) | (np.arange(len(y)) % 10 == 0))     # their 3s and a few labelled anomalies
torch.manual_seed(0)
model = DLMSVDD(backbone=TinyCNN(), recipe="scratch", epochs=15, seed=0, verbose=0)
model.fit(X[train], y[train])                         # 20% of the rows, stratified, for validation
print("the recipe as resolved:", model.training_params_)

# %%
# Scores of the held-out images
# -----------------------------
held_out = ~first
f = model.dissimilarity(X[held_out])
print(f"held-out AUROC {roc_auc_score(y[held_out] < 0, f):.4f}; "
      f"predict: {np.mean(model.predict(X[held_out]) == y[held_out]):.3f} accuracy")
epochs = [row["epoch"] for row in model.history_]

fig, (ax_h, ax_e) = plt.subplots(1, 2, figsize=(10, 3.8))
bins = np.geomspace(max(f.min(), 1e-4), f.max(), 40)
ax_h.hist(f[y[held_out] > 0], bins=bins, alpha=0.6, label="normal (3)")
ax_h.hist(f[y[held_out] < 0], bins=bins, alpha=0.6, label="anomalies")
ax_h.axvline(model.threshold_, color="k", ls="--", label="threshold_")
ax_h.set(xscale="log", xlabel="f(x)", ylabel="images", title="held-out scores")
ax_h.xaxis.set_minor_formatter(NullFormatter())
ax_h.legend(fontsize=8)
ax_e.plot(epochs, [row.get("val_auroc", np.nan) for row in model.history_], "o-", ms=3, label="validation AUROC")
ax_e.set(xlabel="epoch", ylabel="validation AUROC", title="training")
ax_l = ax_e.twinx()
ax_l.plot(epochs[:-1], [row["omega_loss"] for row in model.history_[:-1]], color="C1", label="omega-step loss")
ax_l.set_ylabel("margin-violation loss")
lines = ax_e.get_legend_handles_labels(), ax_l.get_legend_handles_labels()
ax_e.legend(lines[0][0] + lines[1][0], lines[0][1] + lines[1][1], loc="lower right", fontsize=8)
fig.tight_layout()

# %%
# Saving and loading
# ------------------
# The module's architecture is code, not data: ``load`` takes it again.
import tempfile
from pathlib import Path

with tempfile.TemporaryDirectory() as folder:
    model.save(Path(folder) / "model.pt")
    loaded = DLMSVDD.load(Path(folder) / "model.pt", backbone=TinyCNN())
print("same scores after loading:", np.array_equal(loaded.dissimilarity(X[held_out]), f))
