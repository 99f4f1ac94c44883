"""
A table with a categorical column and missing cells
===================================================

Payments as a pandas DataFrame: an amount, the channel it came through (text)
and the payer's age, with some ages missing. ``DLMSVDD`` takes the DataFrame
as it is: the channel is one-hot encoded over the training categories, and
with ``missing="impute"`` a missing age becomes the training median with an
indicator column ``missing(age)``. The rule is recorded in the model (and in
``model.pt``); new rows are taken by column name, a channel never seen in
training is scored (all zeros in the one-hot columns), not refused. The ONNX
export takes the rows as codes: numbers, the category's index, NaN for a
missing cell.
"""

# %%
import tempfile
from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np
import onnxruntime as ort
import pandas as pd
from sklearn.metrics import roc_auc_score

from dlmsvdd import DLMSVDD


def payments(n, rng):
    channel = rng.choice(["web", "shop", "phone"], n, p=[0.6, 0.3, 0.1])
    amount = rng.lognormal(3 + 0.5 * (channel == "shop"), 0.4)  # shops see larger payments
    age = rng.normal(45, 12, n).round()
    age[rng.random(n) < 0.05] = np.nan  # 5% of the ages missing
    frame = pd.DataFrame({"amount": amount, "channel": channel, "age": age})
    anomalous = rng.random(n) < 0.05
    # anomalies: phone payments of shop-sized amounts by young payers
    frame.loc[anomalous, "channel"] = "phone"
    frame.loc[anomalous, "amount"] = rng.lognormal(3.6, 0.4, anomalous.sum())
    frame.loc[anomalous, "age"] = rng.normal(28, 6, anomalous.sum()).round()
    return frame, np.where(anomalous, -1, 1)


rng = np.random.default_rng(0)
train, y_train = payments(800, rng)
test, y_test = payments(400, rng)
y_train[(y_train < 0) & (np.arange(len(y_train)) % 3 > 0)] = 1  # a third of the anomalies labelled
model = DLMSVDD(missing="impute", epochs=10, seed=0, verbose=0).fit(train, y_train)
encoding = model.preprocessing_.encoding
print("encoded columns:", encoding.feature_names())
print("medians filled in:", {c: v for c, v, found in zip(encoding.columns, encoding.fill, encoding.categories)
                             if found is None})
print(f"test AUROC {roc_auc_score(y_test < 0, model.dissimilarity(test)):.3f}")

# %%
# New rows, by name
# -----------------
# The columns in another order, an unseen channel and a missing age: each
# row is scored.
new = pd.DataFrame({"age": [50.0, 21.0, None], "channel": ["web", "phone", "kiosk"],
                    "amount": [18.0, 70.0, 20.0]})
print(new.assign(dissimilarity=model.dissimilarity(new), prediction=model.predict(new)))

# %%
# The export takes codes
# ----------------------
# ``encoding.codes`` turns a DataFrame into what the ONNX graph takes
# (``encoding.expects()`` says it in words, and so does the file's metadata).
path = model.export(Path(tempfile.mkdtemp()) / "payments.onnx")
print(encoding.expects())
codes = encoding.codes(test).astype(np.float32)
f_onnx, decision, _ = ort.InferenceSession(str(path)).run(None, {"images": codes})
f = model.dissimilarity(test)
print("ONNX equal to 1e-5:", np.allclose(f_onnx, f, rtol=1e-5, atol=5e-6),
      "decisions equal:", np.array_equal(decision, model.predict(test)))

fig, ax = plt.subplots(figsize=(7, 4))
bins = np.linspace(f.min(), f.max(), 40)
for label, rows in (("normal", y_test > 0), ("anomaly", y_test < 0), ("normal, age missing", (y_test > 0)
                                                                       & test.age.isna().to_numpy())):
    ax.hist(f[rows], bins=bins, alpha=0.6, label=label)
ax.set(xlabel="dissimilarity f(x)", ylabel="test rows", title="scores of the test payments")
ax.legend()
fig.tight_layout()
