"""The run configuration: the task, the model, the boundary and the optimiser,
with the paper's defaults, read from keyword arguments, a YAML file or flags."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from pathlib import Path

from dlmsvdd_ext import params as boundary_params

from ..data.sources import DATASETS
from .models import BACKBONES
from .selection import RULES

SELECTIONS = ("auroc", "balanced_accuracy")
# How a network is trained, for the fields left at None: the paper's (its backbones start from
# pretrained weights), and the one for a backbone trained from scratch: step 0 on the task's own
# training images (training.pretrain), the larger step of a network that starts far from a good
# representation, and the epoch selection that small validation sets can support
# (training.selection). README, "When DLM-SVDD helps".
RECIPES = {"paper": {"lr": 1e-4, "pretrain": "none", "selection_rule": "best"},
           "scratch": {"lr": 1e-3, "pretrain": "batchnorm", "selection_rule": "latest"}}
# "batchnorm": the BatchNorm statistics on the training images; "autoencoder": pretrain_steps of an
# autoencoder, then the statistics (training.pretrain)
PRETRAINS = ("none", "batchnorm", "autoencoder")


@dataclass
class TrainConfig:
    # the task
    data: str = "digits"
    root: str | None = None
    split_dir: str | None = None  # ImageNet-LT split files (default: root)
    normal_class: int = 0
    ratio: float | None = 0.1  # labelled anomalies per normal sample
    rho: float | None = None  # long-tailed pool with imbalance rho (then every other class is anomalous)
    fine_labels: bool = False  # CIFAR-100: 100 fine classes instead of 20 superclasses
    val_fraction: float = 0.2
    # the network
    backbone: str = "resnet50"
    weights: str | None = "imagenet"  # "imagenet" (local torch cache), a state-dict file, or None
    image_size: int | None = None  # default: 224 for ImageNet weights and natural images, else native
    frozen: bool = False  # the paper's "fixed CNN": only the boundary is learned
    # "paper", "scratch" or "auto": scratch for a built-in backbone without weights, else paper
    recipe: str = "auto"
    pretrain: str | None = None  # step 0 before the first epoch: one of PRETRAINS; None: the recipe's
    pretrain_steps: int = 100  # of the autoencoder (pretrain="autoencoder")
    # the boundary (alpha-step)
    backend: str = "exact"
    n_components: int = 1024
    p: float = 2.0
    nu: float = 1.2
    c1: float | None = None
    c2: float | None = None
    gamma: float | str = "median"  # "median": once from the initial features; "per-epoch"; or a fixed value
    solver: str = "apg"
    fw_max_iter: int = 1000
    fw_tol: float = 1e-6
    # the omega-step
    epochs: int = 30
    lr: float | None = None  # None: the recipe's (1e-4 for the paper, 1e-3 from scratch)
    weight_decay: float = 1e-4
    batch_size: int = 128
    grad_clip: float = 1.0
    softplus_power: float = 1.0
    selection: str = "auroc"  # validation metric for the best epoch
    selection_rule: str | None = None  # "best" or "latest" (training.selection); None: the recipe's
    # the run
    seed: int = 0
    device: str = "auto"
    num_workers: int = 0
    verbose: int = 1
    output: str | None = None
    extra: dict = field(default_factory=dict)  # free-form notes stored with the run

    def validate(self) -> "TrainConfig":
        def need(ok, message):
            if not ok:
                raise ValueError(message)

        if isinstance(self.weights, str) and self.weights.lower() == "none":  # as flags and YAML spell it
            self.weights = None

        need(self.data in DATASETS, f"data must be one of {DATASETS}, got {self.data!r}")
        need(self.backbone in BACKBONES + ("custom",),
             f"backbone must be one of {BACKBONES} (or 'custom' with a module), got {self.backbone!r}")
        need(self.ratio is None or (isinstance(self.ratio, (int, float)) and 0 < self.ratio <= 10),
             f"ratio must be in (0, 10] (anomalies per normal sample), got {self.ratio!r}")
        need(self.rho is None or self.rho >= 1, f"rho must be >= 1, got {self.rho!r}")
        need(0 < self.val_fraction < 1, f"val_fraction must be in (0, 1), got {self.val_fraction}")
        need(self.epochs >= 0, f"epochs must be >= 0, got {self.epochs}")
        need((self.lr is None or self.lr > 0) and self.batch_size >= 1 and self.grad_clip > 0
             and self.weight_decay >= 0, "lr, batch_size and grad_clip must be positive, weight_decay >= 0")
        need(self.recipe in ("auto", *RECIPES), f"recipe must be 'auto' or one of {tuple(RECIPES)}, got {self.recipe!r}")
        need(self.pretrain is None or self.pretrain in PRETRAINS,
             f"pretrain must be one of {PRETRAINS} (or None: the recipe's), got {self.pretrain!r}")
        need(isinstance(self.pretrain_steps, int) and not isinstance(self.pretrain_steps, bool)
             and self.pretrain_steps >= 0, f"pretrain_steps must be a whole number >= 0, got {self.pretrain_steps!r}")
        need(self.selection in SELECTIONS, f"selection must be one of {SELECTIONS}, got {self.selection!r}")
        need(self.selection_rule is None or self.selection_rule in RULES,
             f"selection_rule must be one of {RULES} (or None: the recipe's), got {self.selection_rule!r}")
        need(self.softplus_power > 0, f"softplus_power must be positive, got {self.softplus_power}")
        # the boundary's hyper-parameters are the estimator's: checked by its table, under the config's names
        boundary_params.check(self.boundary_params(), names=self.BOUNDARY_NAMES)
        return self

    # LpSVDD's parameter -> the config field that sets it
    BOUNDARY_NAMES = {"kernel": "backend", "max_iter": "fw_max_iter", "tol": "fw_tol"}

    def boundary_params(self) -> dict:
        """The LpSVDD parameters this configuration sets (the trainer adds the
        seed, warm starts and, under torchrun, the sharded solver)."""
        names = {"p", "nu", "c1", "c2", "gamma", "kernel", "n_components", "solver", "max_iter", "tol"}
        return {key: getattr(self, self.BOUNDARY_NAMES.get(key, key)) for key in sorted(names)}

    def training_params(self) -> dict:
        """The recipe, lr, pretrain and selection_rule as the run uses them: the values given, else the recipe's.
        Resolved when used, not stored, so that a changed backbone or weights changes them."""
        recipe = self.recipe
        if recipe == "auto":
            recipe = "scratch" if self.backbone in BACKBONES and self.weights is None else "paper"
        values = {key: getattr(self, key) for key in RECIPES[recipe]}
        return {"recipe": recipe, **{k: RECIPES[recipe][k] if v is None else v for k, v in values.items()}}

    @property
    def imagenet_input(self) -> bool:
        """Pretrained torchvision weights expect ImageNet-normalised RGB at 224 pixels."""
        return self.backbone != "small_cnn" and self.weights is not None

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, values: dict) -> "TrainConfig":
        names = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(values) - names)
        if unknown:
            raise ValueError(f"unknown configuration keys {unknown}; known: {sorted(names)}")
        return cls(**values).validate()

    @classmethod
    def from_yaml(cls, path) -> "TrainConfig":
        import yaml

        text = Path(path).read_text()
        values = yaml.safe_load(text) or {}
        if not isinstance(values, dict):
            raise ValueError(f"{path}: expected a mapping of configuration keys")
        return cls.from_dict({k.replace("-", "_"): v for k, v in values.items()})
