"""DLMSVDD: the alternating trainer (feature pass, alpha-step, omega-step) and the
trained detector (scores, prediction, checkpoints)."""

from __future__ import annotations

import copy
import dataclasses
import logging
import platform
import time

import numpy as np
import sklearn.base
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel
from torch.utils.data import DataLoader, Dataset, DistributedSampler
from tqdm.auto import tqdm

import dlmsvdd_ext
from dlmsvdd_ext import LpSVDD

from . import memory, metrics, parallel, pretrain, selection
from .config import TrainConfig
from .models import FeatureNet, build_backbone

log = logging.getLogger("dlmsvdd")

CHECKPOINT_FORMAT = 1


def margin_violation_loss(f: torch.Tensor, t: torch.Tensor, b_normal: float, b_anomaly: float,
                          power: float = 1.0) -> torch.Tensor:
    """The paper's eq. (cnn_softplus_loss): mean softplus^power(f - b_N) over the
    normal samples plus mean softplus^power(b_A - f) over the anomalous ones."""
    normal = t > 0
    loss = f.new_zeros(())
    if normal.any():
        loss = loss + F.softplus(f[normal] - b_normal).pow(power).mean()
    if (~normal).any():
        loss = loss + F.softplus(b_anomaly - f[~normal]).pow(power).mean()
    return loss


def versions() -> dict:
    return {"dlmsvdd": dlmsvdd_ext.__version__, "dlmsvdd_ext": dlmsvdd_ext.__version__, "torch": str(torch.__version__),
            "numpy": np.__version__, "python": platform.python_version()}


def resolve_device(name: str) -> torch.device:
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    return torch.device(name)


class DLMSVDD:
    """Deep large-margin lp-SVDD.

    ``fit(train, val)`` takes torch datasets of ``(image, target)`` with target
    +1 (normal) or -1 (anomaly); a dataset with an ``augmented()`` method (the
    task sets of ``dlmsvdd.tasks``) gives the omega-step its augmented view.
    Scores: ``dissimilarity`` is f(x), the squared RKHS distance to the centre
    (higher = more anomalous); ``score_samples = -f``; ``predict`` is +1
    (normal) below the validation threshold of maximal balanced accuracy, -1 above.

    Under torchrun (or with torch.distributed initialised) every process runs
    the same calls on its shard of the data; see ``dlmsvdd.training.parallel``.
    """

    def __init__(self, config: TrainConfig | None = None, backbone: nn.Module | None = None, **overrides):
        config = dataclasses.replace(config or TrainConfig(), **overrides)
        if backbone is not None:
            config.backbone, config.weights = "custom", None
        self.config = config.validate()
        self.custom_backbone = backbone
        self.group_, self.device = parallel.join(resolve_device(config.device))
        self.history_: list[dict] = []

    # ---- building blocks

    def _build_network(self, in_channels: int) -> FeatureNet:
        cfg = self.config
        if cfg.backbone == "custom":
            if self.custom_backbone is None:
                raise ValueError("backbone 'custom' needs the nn.Module itself: DLMSVDD(..., backbone=module)")
            backbone = self.custom_backbone
        else:
            backbone, _ = build_backbone(cfg.backbone, cfg.weights, in_channels)
        return FeatureNet(backbone).to(self.device)

    def _loader(self, dataset: Dataset, shuffle: bool, seed: int = 0) -> DataLoader:
        generator = torch.Generator().manual_seed(seed)
        return DataLoader(dataset, batch_size=self.config.batch_size, shuffle=shuffle, generator=generator,
                          num_workers=self.config.num_workers, drop_last=shuffle and len(dataset) > self.config.batch_size)

    def _features(self, data: Dataset) -> tuple[torch.Tensor, np.ndarray]:
        """phi of every sample of this process's shard (all of them when alone), in
        eval mode (no augmentation), and the targets."""
        if self.group_ is not None:
            data = self.group_.shard(data)
        self.network_.eval()
        feats, targets = [], []
        with torch.no_grad():
            for x, t in self._loader(data, shuffle=False):
                feats.append(self.network_(x.to(self.device)))
                targets.append(torch.as_tensor(t))
        return torch.cat(feats), torch.cat(targets).numpy()

    def _alpha_step(self, feats: torch.Tensor, targets: np.ndarray, restart: bool = False) -> LpSVDD:
        """Steps 2 and 3: the kernel backend on the features and the dual solved
        (warm-started from the previous epoch unless ``restart``), b_N and b_A."""
        if self.group_ is not None:
            return self.svdd_.fit_sharded(feats, targets, restart=restart)
        return self.svdd_.fit(feats, targets, restart=restart)

    def _validate(self, val: Dataset | None) -> dict:
        """Step 5: validation AUROC and balanced accuracy of the current network
        and boundary (nothing when validation lacks a class)."""
        if val is None:
            return {}
        f_val, t_val = self.scores(val)
        if not metrics.has_both_classes(t_val):
            return {}
        threshold = metrics.best_threshold(t_val, f_val)
        return {"val_auroc": metrics.auroc(t_val, f_val),
                "val_balanced_accuracy": metrics.balanced_accuracy(t_val, f_val, threshold),
                "val_n_anomalous": int((t_val < 0).sum())}

    @staticmethod
    def _alpha_record(svdd: LpSVDD) -> dict:
        """What the history keeps of an alpha-step."""
        return {"gamma": svdd.gamma_, "objective": svdd.objective_, "gap": svdd.gap_, "n_iter": svdd.n_iter_,
                "fw_gap": [float(g) for g in svdd.history_.get("gap", [])], "b_normal": svdd.b_normal_,
                "b_anomaly": svdd.b_anomaly_, "seconds_build": svdd.build_seconds_,
                "seconds_solve": svdd.solve_seconds_}

    def _omega_loader(self, augmented: Dataset, epoch: int) -> DataLoader:
        """The epoch's shuffled mini-batches; with several processes each rank
        gets its part of every batch (the global batch size stays batch_size)."""
        cfg = self.config
        if self.group_ is None:
            return self._loader(augmented, shuffle=True, seed=cfg.seed + epoch)
        world = self.group_.world_size
        sampler = DistributedSampler(augmented, num_replicas=world, rank=self.group_.rank, shuffle=True, seed=cfg.seed)
        sampler.set_epoch(epoch)
        batch = max(1, cfg.batch_size // world)
        return DataLoader(augmented, batch_size=batch, sampler=sampler, num_workers=cfg.num_workers,
                          drop_last=len(sampler) > batch)

    def _pretrain(self, train: Dataset, augmented: Dataset, kind: str, lr: float) -> list[float]:
        """Step 0 (``dlmsvdd.training.pretrain``), for a backbone from scratch: the
        autoencoder on the augmented training images if asked for, then the
        BatchNorm statistics on the training images as the features pass sees them.
        Every process runs it on all of them (DDP then starts all from rank 0's weights)."""
        losses = []
        if kind == "autoencoder":
            cfg = self.config
            losses = pretrain.autoencoder(self.network_, self._loader(augmented, shuffle=True, seed=cfg.seed),
                                          cfg.pretrain_steps, lr, cfg.weight_decay, self.device)
            if losses:
                log.info("autoencoder: %d steps, loss %.4g -> %.4g", len(losses), losses[0], losses[-1])
        if kind in ("batchnorm", "autoencoder"):
            pretrain.calibrate_batchnorm(self.network_, self._loader(train, shuffle=False), self.device)
        return losses

    def _omega_step(self, loader: DataLoader, optimizer, bar_level: bool) -> list[float]:
        cfg, svdd = self.config, self.svdd_
        network = self.ddp_ or self.network_  # DDP averages the gradients over the ranks
        network.train()
        losses = []
        for x, t in tqdm(loader, desc="omega-step", leave=False, disable=not bar_level):
            f = svdd.torch_dissimilarity(network(x.to(self.device)))
            loss = margin_violation_loss(f, t.to(self.device), svdd.b_normal_, svdd.b_anomaly_, cfg.softplus_power)
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            nn.utils.clip_grad_norm_(self.network_.parameters(), cfg.grad_clip)
            optimizer.step()
            losses.append(float(loss.detach()))
        if self.ddp_ is not None:
            self.group_.sync_buffers(self.network_)
        return losses

    # ---- training

    def fit(self, train: Dataset, val: Dataset | None = None) -> "DLMSVDD":
        """Alternating optimisation for config.epochs epochs (none with a frozen
        backbone), best epoch by validation, then the boundary refitted from the
        best weights' non-augmented training features."""
        cfg = self.config
        if len(train) == 0:
            raise ValueError("the training set is empty")
        torch.manual_seed(cfg.seed)
        example, _ = train[0]
        self.in_channels_ = example.shape[0]
        self.network_ = self._build_network(self.in_channels_)
        recipe = cfg.training_params()
        augmented = train.augmented() if hasattr(train, "augmented") else train
        self.pretrain_losses_ = self._pretrain(train, augmented, recipe["pretrain"], recipe["lr"])
        if cfg.frozen:
            self.network_.requires_grad_(False)
        self.ddp_ = None
        if self.group_ is not None and not cfg.frozen:
            self.ddp_ = DistributedDataParallel(self.network_, device_ids=None if self.device.type == "cpu"
                                                else [self.device])
        self.n_train_ = len(train)
        solver = cfg.solver
        if self.group_ is not None and LpSVDD.sharded_solver(solver) != solver:
            solver = LpSVDD.sharded_solver(solver)
            log.info("the sharded alpha-step runs %s instead of %s", solver, cfg.solver)
        self.svdd_ = LpSVDD(**{**cfg.boundary_params(), "solver": solver}, random_state=cfg.seed, warm_start=True)
        optimizer = None if cfg.frozen else torch.optim.Adam(
            self.network_.parameters(), lr=recipe["lr"], weight_decay=cfg.weight_decay)
        epochs = 0 if cfg.frozen else cfg.epochs
        kept = selection.EpochSelection(recipe["selection_rule"], cfg.selection)
        self.history_ = []
        quiet = cfg.verbose < 1 or (self.group_ is not None and not self.group_.is_main)
        bar = tqdm(range(epochs + 1), desc="DLM-SVDD", disable=quiet)
        for epoch in bar:  # the paper's steps, the omega-step after the selection's snapshot
            start = time.perf_counter()
            feats, targets = self._features(train)  # 1. features of the training set, eval mode
            t_features = time.perf_counter()
            svdd = self._alpha_step(feats, targets)  # 2-3. kernel build and dual solve: b_N, b_A
            row = {"epoch": epoch, **self._alpha_record(svdd), "seconds_features": t_features - start,
                   "seconds_alpha": time.perf_counter() - t_features}
            row.update(self._validate(val))  # 5. validation and the selection's snapshot
            kept.offer(epoch, row, lambda: copy.deepcopy(self.network_.state_dict()))
            if epoch < epochs:  # 4. omega-step on the margin-violation loss, boundary fixed
                start = time.perf_counter()
                batch_losses = self._omega_step(self._omega_loader(augmented, epoch), optimizer,
                                                cfg.verbose >= 2 and not quiet)
                row.update(omega_loss=float(np.mean(batch_losses)), omega_batch_losses=batch_losses,
                           seconds_omega=time.perf_counter() - start)
            self.history_.append(row)
            bar.set_postfix({k: f"{row[k]:.4g}" for k in ("val_auroc", "omega_loss", "gap") if k in row})
            log.info("epoch %d: %s", epoch, {k: v for k, v in row.items() if not isinstance(v, list)})
        self.best_epoch_ = kept.epoch
        self.network_.load_state_dict(kept.state)
        self._refit(train, val)
        return self

    def _refit(self, train: Dataset, val: Dataset | None) -> None:
        """The boundary from scratch on the best weights, and the decision threshold."""
        self._alpha_step(*self._features(train), restart=True)
        f_val, t_val = self.scores(val) if val is not None else (None, None)
        if val is not None and metrics.has_both_classes(t_val):
            self.threshold_ = metrics.best_threshold(t_val, f_val)
        else:  # no anomalies to calibrate on: the sphere's radius
            self.threshold_ = float(self.svdd_.r2_)

    def measure_alpha_step(self, train: Dataset) -> dict:
        """One more alpha-step on the trained network's features, from scratch and
        under a peak-memory probe (``dlmsvdd.training.memory``): its build and solve seconds
        and the peak bytes above the features. A separate pass, so the probe's
        overhead touches neither training nor the model's boundary. Under torchrun
        every process runs it on its shard and reports its own peak."""
        feats, targets = self._features(train)
        svdd = sklearn.base.clone(self.svdd_).set_params(gamma=self.svdd_.gamma_, warm_start=False)
        fit = svdd.fit if self.group_ is None else svdd.fit_sharded
        with memory.peak(self.device) as probe:
            fit(feats, targets)
        factor = getattr(svdd.backend_, "Z_", None)
        n = len(train)
        return {"build_seconds": svdd.build_seconds_, "solve_seconds": svdd.solve_seconds_,
                "peak_bytes": probe.bytes, "memory_method": probe.method, "n_train": n,
                "n_features": feats.shape[1], "rank": None if factor is None else factor.shape[1],
                "full_kernel_bytes": n * n * feats.element_size()}

    # ---- scoring

    def scores(self, data) -> tuple[np.ndarray, np.ndarray]:
        """f(x) and the targets of a dataset (or a tensor of images) in one pass
        (every process scores its shard; all get all the scores)."""
        if isinstance(data, torch.Tensor):
            data = torch.utils.data.TensorDataset(data, torch.ones(len(data), dtype=torch.long))
        feats, targets = self._features(data)
        f, targets = self.svdd_.dissimilarity(feats), torch.as_tensor(targets)
        if self.group_ is not None:
            f, targets = self.group_.gather(f, len(data)), self.group_.gather(targets.to(f.device), len(data))
        return f.cpu().numpy(), targets.cpu().numpy()

    def dissimilarity(self, data) -> np.ndarray:
        """f(x) for a dataset of (image, target) or a tensor of images; higher = more anomalous."""
        return self.scores(data)[0]

    def score_samples(self, data) -> np.ndarray:
        """-f(x): higher = more normal (scikit-learn's convention)."""
        return -self.dissimilarity(data)

    def predict(self, data) -> np.ndarray:
        """+1 normal (f below the validation threshold), -1 anomaly."""
        return metrics.predict(self.dissimilarity(data), self.threshold_)

    def evaluate(self, data) -> dict:
        """AUROC and balanced accuracy (at the validation threshold) on a labelled dataset."""
        f, targets = self.scores(data)
        return {**metrics.summary(targets, f, self.threshold_), "n": len(f), "n_anomalous": int((targets < 0).sum())}

    # ---- checkpoints

    def save(self, path) -> None:
        """Weights, boundary, threshold, config, history and package versions
        (with several processes: from one of them; all hold the same model)."""
        torch.save({"format": CHECKPOINT_FORMAT, "config": self.config.to_dict(), "in_channels": self.in_channels_,
                    "network": self.network_.state_dict(), "boundary": self.svdd_.state_dict(),
                    "threshold": self.threshold_, "best_epoch": self.best_epoch_, "history": self.history_,
                    "versions": versions()}, path)

    @classmethod
    def load(cls, path, backbone: nn.Module | None = None, device: str | None = None) -> "DLMSVDD":
        """A saved model; scores exactly as the one that was saved. A custom
        backbone must be passed again (its architecture is code, not data)."""
        state = torch.load(path, map_location="cpu", weights_only=True)
        if not isinstance(state, dict) or state.get("format") != CHECKPOINT_FORMAT:
            raise ValueError(f"{path} is not a dlmsvdd checkpoint (format {CHECKPOINT_FORMAT})")
        values = dict(state["config"])
        if device is not None:
            values["device"] = device
        if values["backbone"] == "custom" and backbone is None:
            raise ValueError("this checkpoint has a custom backbone: pass the same nn.Module as backbone=")
        values["weights"] = None  # the checkpoint holds the weights
        model = cls(TrainConfig(**values), backbone=backbone)
        model.in_channels_ = state["in_channels"]
        model.network_ = model._build_network(model.in_channels_)
        model.network_.load_state_dict(state["network"])
        model.svdd_ = LpSVDD.from_state_dict(state["boundary"], device=model.device)
        model.threshold_, model.best_epoch_, model.history_ = state["threshold"], state["best_epoch"], state["history"]
        return model
