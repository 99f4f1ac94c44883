"""The training layer: the configuration, backbones, the alternating trainer
(``DLMSVDD``), multi-process training, metrics and memory probes. Imports the
data layer and ``dlmsvdd_ext`` only."""

from . import metrics
from .config import TrainConfig
from .trainer import DLMSVDD

__all__ = ["DLMSVDD", "TrainConfig", "metrics"]
