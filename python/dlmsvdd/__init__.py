"""dlmsvdd: Deep Large-Margin lp-SVDD, the torch training driver.

* ``DLMSVDD``: the alternating trainer and the trained detector.
* ``TrainConfig``: every option, with the paper's defaults.
* ``datasets``, ``protocols``, ``tasks``: image sources, one-vs-rest and long-tailed protocols.
* ``models``: backbones; ``metrics``; ``run``: a training run and its folder.
"""

__version__ = "0.1.0"

from . import datasets, metrics, protocols, tasks  # noqa: E402
from .config import TrainConfig  # noqa: E402
from .trainer import DLMSVDD  # noqa: E402

__all__ = ["DLMSVDD", "TrainConfig", "datasets", "metrics", "protocols", "tasks", "__version__"]
