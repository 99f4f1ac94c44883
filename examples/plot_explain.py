"""
Why is this row anomalous?
==========================

``explain(X)`` says how much each feature of a row is responsible for its
dissimilarity (``dlmsvdd_ext.explain``): for a table's rows, how far that
feature lies outside the range that the nearest normal rows (in the other
features) hold, in the feature's standard deviations; for images, integrated
gradients of f from the nearest training normal image, in the units of f.
Two pictures: the bars of a few flagged rows of a real table (scikit-learn's
breast-cancer measurements, benign tumours as the normal class), and the maps
over digits that carry a bright 2x2 patch the training images never had.
"""

# %%
import matplotlib.pyplot as plt
import numpy as np
from sklearn.datasets import load_breast_cancer, load_digits
from sklearn.preprocessing import MinMaxScaler

from dlmsvdd import DLMSVDD
from dlmsvdd_ext import LpSVDD

cancer = load_breast_cancer()
benign = cancer.target == 1
rng = np.random.default_rng(0)
train = benign & (rng.random(len(benign)) < 0.7)  # 70% of the benign rows train; the rest are test rows
scaler = MinMaxScaler().fit(cancer.data[train])
model = LpSVDD(random_state=0).fit(scaler.transform(cancer.data[train]))
test = scaler.transform(cancer.data[~train])
flagged = np.flatnonzero(model.predict(test) < 0)
worst = flagged[np.argsort(-model.dissimilarity(test[flagged]))][:3]  # the three highest f among the flagged
A = model.explain(test[worst])
print(f"{len(flagged)} of {len(test)} test rows flagged ({(~benign[~train]).sum()} malignant)")

# %%
# The bars of three flagged rows
# ------------------------------
# Each bar is how far that measurement lies outside the range its look-alikes
# hold, in standard deviations; the eight largest of 30. (``method="repair"``
# gives how much f falls when it alone is put back instead.)
fig, axes = plt.subplots(1, 3, figsize=(12, 3.6), constrained_layout=True)
for ax, row, a in zip(axes, worst, A):
    top = np.argsort(-a)[:8][::-1]
    ax.barh([cancer.feature_names[j] for j in top], a[top], color="tab:red")
    kind = "malignant" if cancer.target[~train][row] == 0 else "benign"
    ax.set_title(f"test row {row} ({kind}): f = {model.dissimilarity(test[row:row + 1])[0]:.3f}")
    ax.set_xlabel("outside its normal range (standard deviations)")
    ax.tick_params(axis="y", labelsize=7)

# %%
# Maps over digits
# ----------------
# DLM-SVDD trained on zeros only; test zeros get a bright 2x2 patch on their
# background. The map (red: raised f) should light up the patch.
digits = load_digits()
zeros = (digits.images[digits.target == 0] / 16.0).astype(np.float32)
order = rng.permutation(len(zeros))
deep = DLMSVDD(epochs=5, seed=0, verbose=0).fit(zeros[order[:120]])
patched = zeros[order[120:126]].copy()
for image in patched:
    r, c = next((r, c) for r in (0, 6) for c in (0, 6) if not image[r:r + 2, c:c + 2].any())
    image[r:r + 2, c:c + 2] = 1.0
maps = deep.explain(patched)
fig, axes = plt.subplots(2, len(patched), figsize=(12, 4.2), constrained_layout=True)
for k, (image, m) in enumerate(zip(patched, maps)):
    axes[0, k].imshow(image, cmap="gray_r")
    scale = np.abs(m).max()
    axes[1, k].imshow(m, cmap="bwr", vmin=-scale, vmax=scale)
    for ax in axes[:, k]:
        ax.set_xticks([]), ax.set_yticks([])
axes[0, 0].set_ylabel("patched image")
axes[1, 0].set_ylabel("explain map")
plt.show()
