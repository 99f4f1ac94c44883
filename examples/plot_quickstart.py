"""
Quickstart: DLM-SVDD on digits, and its ROC curve
=================================================

One class of scikit-learn's digits is normal, the nine others anomalous; the
training set holds the normal images and one labelled anomaly per ten of
them (``ratio=0.1``). DLM-SVDD trains the small CNN from scratch (its
"scratch" recipe) and the kernel boundary together, then scores the test
images: f(x), the squared distance to the centre in the kernel's feature
space, higher for anomalies.
"""

# %%
# The task and the model
# ----------------------
# ``tasks.make_task`` splits the pool one-vs-rest, seeded: training (80%) and
# validation (20%) from the training pool, the test set from the test pool.
import matplotlib.pyplot as plt
import numpy as np
from sklearn.metrics import roc_auc_score, roc_curve

from dlmsvdd import DLMSVDD, TrainConfig, datasets, tasks

task = tasks.make_task(datasets.digits(), normal_class=3, ratio=0.1, seed=0)
print(task.summary())
model = DLMSVDD(TrainConfig(backbone="small_cnn", weights=None, verbose=0))
model.fit(task.train, task.val)
print(model.evaluate(task.test))

# %%
# The ROC curve of the test scores
# --------------------------------
# The anomaly is the positive class and the score is f(x). The threshold
# ``predict`` uses (``threshold_``, here the middle of the validation gap of
# maximal balanced accuracy) is one point on this curve.
f, targets = model.scores(task.test)
anomalous = targets < 0
fpr, tpr, _ = roc_curve(anomalous, f)
at_threshold = model.predict(task.test) < 0

fig, ax = plt.subplots(figsize=(4.5, 4.5))
ax.plot(fpr, tpr, label=f"DLM-SVDD, AUROC {roc_auc_score(anomalous, f):.4f}")
ax.plot(at_threshold[~anomalous].mean(), at_threshold[anomalous].mean(), "ko",
        label=f"threshold_ ({model.threshold_rule_})")
ax.plot([0, 1], [0, 1], "k:", lw=0.8)
ax.set(xlabel="false positive rate", ylabel="true positive rate (anomalies)", title="digits, normal class 3")
ax.legend(loc="lower right", fontsize=8)
fig.tight_layout()

# %%
# The training, epoch by epoch
# ----------------------------
# ``history_`` holds one row per epoch: the alpha-step's Frank-Wolfe gap per
# iteration, the omega-step's loss, the validation AUROC and the seconds of
# each step. A run folder (``dlmsvdd train``) plots the first two as
# ``convergence.png``, with this function:
import tempfile
from pathlib import Path

from dlmsvdd.experiments import run_outputs

with tempfile.TemporaryDirectory() as folder:
    path = Path(folder) / "convergence.png"
    run_outputs.plot_convergence(model.history_, path)
    image = plt.imread(path)
fig, ax = plt.subplots(figsize=(9, 3.4))
ax.imshow(image)
ax.set_axis_off()
fig.tight_layout()

print("validation AUROC per epoch:", np.round([row.get("val_auroc", np.nan) for row in model.history_], 4))
