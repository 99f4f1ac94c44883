"""dlmsvdd: Deep Large-Margin lp-SVDD, the torch training driver.

* ``DLMSVDD``: the alternating trainer and the trained detector.
* ``TrainConfig``: every option, with the paper's defaults.
* ``datasets``, ``protocols``, ``tasks``: image sources, one-vs-rest and long-tailed protocols.
* ``metrics``: thresholds and scores.

The layers, each importing only those below it: ``dlmsvdd.data`` (sources,
protocols, tasks), ``dlmsvdd.training`` (config, models, trainer, parallel,
metrics, memory), ``dlmsvdd.experiments`` (run folders, sweeps, presets,
reports), and ``dlmsvdd.cli`` on top.
"""

from dlmsvdd_ext import __version__

from .data import protocols, tasks
from .data import sources as datasets
from .training import DLMSVDD, TrainConfig, metrics

__all__ = ["DLMSVDD", "TrainConfig", "datasets", "metrics", "protocols", "tasks", "__version__"]
