"""
Export and scoring through onnxruntime
======================================

``DLMSVDD.export`` writes one self-contained scorer: the preprocessing the
model was trained with, the network, the kernel boundary, the threshold and
the calibration normals, as an ONNX graph. onnxruntime runs it without
dlmsvdd (or torch). Its scores equal ``dissimilarity``'s to float32's
rounding. Needs the ``export`` extra (``pip install "dlmsvdd[export]"``).
"""

# %%
import tempfile
from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np
import onnxruntime as ort

from dlmsvdd import DLMSVDD, TrainConfig, datasets, tasks
from dlmsvdd.data.tasks import pixels

task = tasks.make_task(datasets.digits(), normal_class=3, ratio=0.1, seed=0)
model = DLMSVDD(TrainConfig(epochs=10, verbose=0)).fit(task.train, task.val)
folder = Path(tempfile.mkdtemp())
path = model.export(folder / "model.onnx")

# %%
# Scoring raw images
# ------------------
# The graph takes raw images, (N, 1, 8, 8) float32 in [0, 1] for this task,
# and returns f, the decision (+1 normal, -1 anomaly) and the conformal
# p-value.
images, targets = pixels(task.test)
images = images.reshape(-1, 1, 8, 8).astype(np.float32)
session = ort.InferenceSession(str(path))
print([(i.name, i.shape, i.type) for i in session.get_inputs()])
print([o.name for o in session.get_outputs()])
f_onnx, decision, p_value = session.run(None, {"images": images})
f_torch = model.dissimilarity(task.test)
relative = np.abs(f_onnx - f_torch) / np.maximum(np.abs(f_torch), 1e-12)
print("equal to 1e-5 relative (5e-6 absolute near 0):", np.allclose(f_onnx, f_torch, rtol=1e-5, atol=5e-6))
print("decisions equal:", np.array_equal(decision, model.predict(task.test)))

# %%
# An image the scorer cannot read is never called normal: pixels 0-255 given
# as floats are out of [0, 1], and get f NaN and decision -1.
bad = images[:2] * 255
print(session.run(None, {"images": bad})[:2])

fig, (ax_s, ax_d) = plt.subplots(1, 2, figsize=(10, 4))
anomalous = targets < 0
ax_s.loglog(f_torch[~anomalous], f_onnx[~anomalous], ".", ms=4, label="normal")
ax_s.loglog(f_torch[anomalous], f_onnx[anomalous], ".", ms=4, alpha=0.5, label="anomalies")
ax_s.set(xlabel="DLMSVDD.dissimilarity", ylabel="onnxruntime 'dissimilarity'", title="the same scores")
ax_s.legend(fontsize=8)
ax_d.hist(relative, bins=40)
ax_d.set(xlabel="relative difference", ylabel="images", title="float32 rounding")
fig.tight_layout()
