"""
The kernel-approximation study: Fig. 4 and its Pareto front
===========================================================

The ``approx`` preset is the paper's kernel-approximation study as a sweep:
the exact kernel once and the seven approximations at several budgets m, each
a full DLM-SVDD training run. ``dlmsvdd report`` then writes the study's
tables, the Pareto-efficient points (no other point has a higher AUROC, a
shorter fit and a smaller peak memory together: the paper's Table IV) and the
paper's Fig. 4. Here at a tiny size so that it runs in this page's build:
digits, normal class 3 against every other class (about 1000 training
images), one epoch, m = 32 and 128: 15 runs. On two shared CPU cores the times
are milliseconds and noisy; the command-line version at the preset's digits
size is in the user guide (``dlmsvdd sweep --preset approx --digits``).
"""

# %%
import tempfile
from pathlib import Path

import matplotlib.pyplot as plt

from dlmsvdd.experiments import presets, sweep_report

preset = presets.load("approx", digits=True,
                      overrides={"normal_class": 3, "epochs": 1, "n_components": [32, 128], "verbose": 0})
print(len(preset.tasks()), "runs")
folder = Path(tempfile.mkdtemp()) / "approx"
preset.run(folder, progress=False)  # one run folder per task; a re-run skips the finished ones
written = sweep_report.write_report(folder)
print([p.name for p in written])

# %%
# The Pareto-efficient points, as ``approx_pareto.md`` holds them
print((folder / "approx_pareto.md").read_text())

# %%
# The figure the report writes, ``approx_study.png``: (a) AUROC, (b) build +
# solve seconds, (c) peak memory against m, the exact kernel dashed; (d)
# AUROC against fit time with the Pareto front. One class, one seed and one
# epoch: the differences between backends here are within a run's noise.
fig, ax = plt.subplots(figsize=(12, 9))
ax.imshow(plt.imread(folder / "approx_study.png"))
ax.set_axis_off()
fig.tight_layout()
