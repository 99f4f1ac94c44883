"""DLMSVDD: the alternating trainer (feature pass, alpha-step, omega-step), its refit, threshold
and checkpoints (the omega-step's loss: ``margin_loss``; the trained detector's scores: ``scoring``;
its decisions: ``decisions``; its file: ``model_file``)."""

from __future__ import annotations

import copy
import dataclasses
import logging
import time
import warnings

import numpy as np
import sklearn.base
import torch
from sklearn.exceptions import ConvergenceWarning
import torch.nn as nn
from sklearn.base import BaseEstimator, OutlierMixin
from torch.nn.parallel import DistributedDataParallel
from torch.utils.data import DataLoader, Dataset, DistributedSampler
from tqdm.auto import tqdm

from dlmsvdd_ext import LpSVDD, kernel_choice, tabular

from ..data import protocols
from ..data.preprocessing import Preprocessing
from ..data.vectors import VectorPreprocessing
from . import (batches, checkpoints, deep_sad, devices, divergence, epoch_rows, explain, guard, input_consensus,
               inputs, lr_schedule, memory, metrics, model_file, parallel, precision, pretrain, resident, selection,
               self_labels, thresholds)
from .config import SHAPE_FIELDS, TrainConfig, omega_lr, resolved_for_labels, with_labels_only
from .decisions import Decisions
from .margin_loss import margin_violation_loss, violation_counts, violation_shares
from .scoring import Scoring
from .weight_average import WeightAverage, judged_on
from .models import FeatureNet, build_backbone

log = logging.getLogger("dlmsvdd")


class DLMSVDD(Scoring, Decisions, OutlierMixin, BaseEstimator):
    """Deep large-margin lp-SVDD: a network and a kernel boundary trained together.

    ``fit(train, val)`` takes torch datasets of ``(image, target)`` with target
    +1 (normal) or -1 (anomaly); a dataset with an ``augmented()`` method (the
    task sets of ``dlmsvdd.tasks``) gives the omega-step its augmented view,
    and one with a ``preprocessing`` record (``dlmsvdd.data.preprocessing``)
    tells the model how raw images become its input (kept in checkpoints and
    exports). ``fit(X, y=None)`` takes an array instead (numpy or torch; for
    vectors also a pandas DataFrame or a list of rows, with text, categorical
    and missing cells as ``dlmsvdd_ext.tabular`` says) with y
    in {+1, -1} (None: all normal): images, (N, C, H, W) or grey (N, H, W)
    (uint8 is scaled to [0, 1], floats go to the network as they are), split
    into training and a stratified, seeded ``val_fraction`` for validation
    (``validation_fraction`` is scikit-learn's spelling of it); or feature
    vectors (N, D) (a table, embeddings of a pretrained network), standardised
    with the training rows' statistics (``dlmsvdd.data.vectors``) and given to
    the MLP (``backbone="auto"`` or ``"mlp"``), the validation share held out
    of the normal rows only (every labelled anomaly trains).

    Parameters
    ----------
    config : TrainConfig or None
        The configuration (default: ``TrainConfig()``).
    backbone : torch.nn.Module, str or None
        A backbone name (a ``TrainConfig.backbone`` value), or a module of
        one's own that maps a batch of inputs to feature vectors (N, d); the
        configuration's backbone is then "custom".
    **overrides
        Fields of ``TrainConfig`` that replace the configuration's, checked
        (``validation_fraction`` for ``val_fraction``). ``get_params`` and
        ``set_params`` see the same fields, as in scikit-learn.

    Notes
    -----
    Scores: ``dissimilarity`` is f(x), the squared RKHS distance to the centre
    (higher = more anomalous); ``score_samples = -f``; ``decision_function =
    threshold_ - f`` (positive = normal); ``predict`` is +1 (normal) below the
    threshold ``threshold_``, -1 at or above it. Scoring takes datasets of
    network inputs, or arrays of raw inputs (images or vectors as ``fit`` takes
    them), which every entry point runs through the model's preprocessing
    record ``preprocessing_`` (what ``preprocess`` and the export run).
    PyOD's fitted attributes: ``decision_scores_`` (the scores of the data
    passed to fit: the validation rows' out of sample, as new rows'; the
    training rows' in-sample, lower than new rows', with the input consensus
    each row scored without itself among its neighbours, as kNN and LOF score
    their training rows), ``threshold_`` and ``labels_`` (0 normal, 1 anomaly).

    Feature vectors are scored by the deep model's f plus the consensus of
    detectors on the input (``input_consensus``, default; without labelled
    anomalies the consensus alone, and the network is not trained); images
    without labelled anomalies by the network trained one-class beside the
    nearest training image's distance in two views of the images (see
    ``dlmsvdd.training.input_consensus``): ``dissimilarity`` and every score
    below are then that combined score, not f.

    Conformal decisions: after fit the model is calibrated on the validation
    normals (``calibration_source_``, ``n_calibration_``; ``calibrate`` with
    other normal data replaces them); ``p_values``, ``predict(X, fpr=...)``,
    ``predict(X, fdr=...)`` and ``predict_proba`` use them (see
    ``dlmsvdd_ext.conformal``). Saved with the model.

    ``threshold_rule_`` says how the threshold was set
    (``dlmsvdd.training.thresholds``): the validation threshold of maximal
    balanced accuracy when validation has both classes; otherwise the rule
    p-value <= contamination against the validation normals (held out, and
    scored by nothing fitted on them: at most contamination of new normal
    rows flagged, and close to it) or, without validation normals, the
    training normals' quantile, in-sample, with a warning; the sphere's r^2
    only for ``contamination="radius"``.

    An alpha-step that stops without its certificate is recorded in its
    epoch's history row (``converged``, ``stalled``); ``fit`` then warns once
    (``ConvergenceWarning``) listing the epochs, instead of at every epoch.

    Under torchrun (or with torch.distributed initialised) every process runs
    the same calls on its shard of the data; see ``dlmsvdd.training.parallel``.
    """

    def __init__(self, config: TrainConfig | None = None, backbone: nn.Module | str | None = None, **overrides):
        self._configure(config or TrainConfig(), backbone, overrides)
        self.history_: list[dict] = []

    def _configure(self, config: TrainConfig, backbone, overrides: dict) -> None:
        """The configuration with overrides (a backbone name is a config value,
        an nn.Module the custom backbone), checked, and the device it names."""
        overrides = dict(overrides)
        if isinstance(backbone, str):
            overrides["backbone"], backbone = backbone, None
        if "validation_fraction" in overrides:
            overrides["val_fraction"] = overrides.pop("validation_fraction")
        config = TrainConfig.from_dict({**config.to_dict(), **overrides})  # unknown names refused
        if backbone is not None:
            config.backbone, config.weights = "custom", None
        elif config.backbone == "custom":  # set_params keeps the module it was given
            backbone = getattr(self, "custom_backbone", None)
        self.config = config.validate()
        self.custom_backbone = backbone
        self.group_, device = parallel.join(devices.resolve(config.device), auto=config.device == "auto")
        self.device = devices.indexed(device)

    def get_params(self, deep: bool = True) -> dict:
        """The configuration's fields, as scikit-learn's estimators give their parameters.

        Parameters
        ----------
        deep : bool
            Unused (no nested estimators); scikit-learn's signature.

        Returns
        -------
        dict
            Every ``TrainConfig`` field; ``backbone`` is the custom module, if any.
        """
        values = {f.name: getattr(self.config, f.name) for f in dataclasses.fields(self.config)}
        return {**values, "backbone": self.custom_backbone or self.config.backbone}

    def set_params(self, **params) -> "DLMSVDD":
        """Change configuration fields (checked); a fitted model keeps its weights until the next fit.

        Parameters
        ----------
        **params
            ``TrainConfig`` fields and their new values; ``backbone`` may be a module.

        Returns
        -------
        DLMSVDD
            This model.
        """
        self._configure(self.config, params.pop("backbone", None), params)
        return self

    def __repr__(self) -> str:
        default = TrainConfig()
        changed = {k: v for k, v in self.get_params().items() if k == "backbone" or getattr(default, k) != v}
        return f"{type(self).__name__}({', '.join(f'{k}={v!r}' for k, v in changed.items())})"

    # ---- building blocks

    def _build_network(self, in_channels: int, params: dict, vectors: bool) -> FeatureNet:
        """The backbone ``params["backbone"]`` with the feature head, shaped by its
        fields of ``params`` (the small CNN's cnn_*, the MLP's mlp_*); in_channels:
        the images' channels or the vectors' length."""
        name = params["backbone"]
        if name == "custom":
            if self.custom_backbone is None:
                raise ValueError("backbone 'custom' needs the nn.Module itself: DLMSVDD(..., backbone=module)")
            backbone = self.custom_backbone
        else:
            if vectors != (name == "mlp"):
                takes = "feature vectors (N, D)" if name == "mlp" else "images (N, C, H, W)"
                given = "feature vectors" if vectors else "images"
                raise ValueError(f"backbone {name!r} takes {takes}, and was given {given}; use backbone 'auto' "
                                 f"(the MLP for vectors, the small CNN for images) or a custom nn.Module")
            self.config.check_shape_fields(name)
            shape = {k: params[k] for k in SHAPE_FIELDS.get(name, {})}
            backbone, _ = build_backbone(name, self.config.weights, in_channels, **shape)
        distance_guard = guard.DistanceGuard(self.input_shape_) if self.config.guard else None
        return FeatureNet(backbone, distance_guard).to(self.device)

    def _loader(self, dataset: Dataset, shuffle: bool, seed: int = 0, batch_size: int | None = None) -> DataLoader:
        size = batch_size or self.config.batch_size
        return batches.loader(dataset, size, shuffle, seed, self.config.num_workers,
                              drop_last=shuffle and len(dataset) > size)

    def _features(self, data: Dataset) -> tuple[torch.Tensor, np.ndarray]:
        """phi of every sample of this process's shard (all of them when alone), in
        eval mode (no augmentation), and the targets."""
        size = batches.eval_batch_size(self.config.batch_size, len(self.input_shape_) == 1)
        rows = resident.held(getattr(self, "_holding", {}), data) if self.group_ is None else None
        if rows is not None:  # held on the device for the fit
            source = rows.in_order(size)
        else:
            if self.group_ is not None:
                data = self.group_.shard(data)
            source = ((x.to(self.device, non_blocking=True), t) for x, t in self._loader(data, False, batch_size=size))
        self.network_.eval()
        feats, targets = [], []
        with torch.no_grad(), precision.scoring():
            for x, t in source:
                feats.append(self.network_(self._memory_format(x)))
                targets.append(torch.as_tensor(t))
        return torch.cat(feats), torch.cat(targets).cpu().numpy()

    def _memory_format(self, x: torch.Tensor) -> torch.Tensor:
        """A batch of images in the network's memory format (``channels_last`` when asked for)."""
        return x.contiguous(memory_format=torch.channels_last) if self.config.channels_last and x.dim() == 4 else x

    def _hold(self, train: Dataset, val: Dataset | None) -> None:
        """The fit's rows kept on the device when they fit there (``dlmsvdd.training.resident``):
        the training rows when their augmentation (if any) is a batch transform, the validation rows."""
        self._holding = {}
        if self.group_ is not None:
            return
        holdable, augment = resident.augmentation_of(train)
        size = batches.eval_batch_size(self.config.batch_size, len(self.input_shape_) == 1)
        for data, wanted in ((train, holdable), (val, val is not None)):
            rows = resident.ResidentRows.hold(data, self.device, size, augment if data is train else None) \
                if wanted else None
            if rows is not None:
                self._holding[id(data)] = rows

    def _alpha_step(self, feats: torch.Tensor, targets: np.ndarray, restart: bool = False) -> LpSVDD:
        """Steps 2 and 3: the kernel backend on the features and the dual solved
        (warm-started from the previous epoch unless ``restart``), b_N and b_A.
        A fit without its certificate does not warn here: its history row
        records it (``_alpha_record``) and ``fit`` warns once."""
        fit = self.svdd_.fit if self.group_ is None else self.svdd_.fit_sharded
        # "auto": the recipe's with labelled anomalies, 1 without, on every process alike
        cfg, params = self.config, self.training_params_
        labelled = parallel.any_true(bool((targets < 0).any()), self.group_, self.device)
        self.svdd_.nu = resolved_for_labels(cfg.nu, labelled, params["labelled_nu"])
        self.svdd_.slack_scale = resolved_for_labels(cfg.slack_scale, labelled, params["labelled_slack_scale"])
        self.softplus_scale_ = resolved_for_labels(cfg.softplus_scale, labelled, params["labelled_softplus_scale"])
        self.omega_lr_ = omega_lr(params, cfg.lr is not None, labelled)  # lr left to the recipe: likewise
        self.ema_half_life_ = with_labels_only(params, "ema_half_life", cfg.ema_half_life, labelled)
        self.deep_sad_weight_ = with_labels_only(params, "deep_sad_weight", cfg.deep_sad_weight, labelled)
        solve_on = devices.solve_device(self.device, feats.shape[0]) if self.group_ is None else self.device
        self.svdd_.device = solve_on
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ConvergenceWarning)
            warnings.simplefilter("ignore", kernel_choice.SlowFitWarning)  # said once, when the fit started
            svdd = fit(feats.to(solve_on), targets, restart=restart)
        svdd.to(self.device)  # the boundary lives with the model (a small one was solved on the CPU)
        if self.network_.guard is not None:  # its scale follows the bandwidth (training rows: unaffected)
            self.network_.guard.set_bandwidth(svdd.gamma_)
        return svdd

    def _validate(self, val: Dataset | None) -> dict:
        """Step 5: validation AUROC and balanced accuracy of the current network
        and boundary (nothing when validation lacks a class)."""
        known = None if val is None else self_labels.targets_of(val)
        if val is None or (known is not None and not metrics.has_both_classes(known)):
            return {}  # nothing to measure (feature vectors validate on normal rows only): not scored
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
        return {"rows": len(svdd.alpha_), "kernel": svdd.kernel_,
                "n_components": None if svdd.kernel_ == "exact" else svdd.n_components_,
                "gamma": svdd.gamma_, "objective": svdd.objective_, "gap": svdd.gap_, "n_iter": svdd.n_iter_,
                "converged": bool(svdd.converged_), "stalled": bool(svdd.stalled_),
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

    @staticmethod
    def _augmented(train: Dataset) -> Dataset:
        """The training images under the omega-step's augmentation (tasks' sets have one)."""
        return train.augmented() if hasattr(train, "augmented") else train

    def _pretrain(self, train: Dataset, kind: str, resumed: bool) -> list[float]:
        """Step 0 (``dlmsvdd.training.pretrain``), for a backbone from scratch: the
        autoencoder or Deep SAD's training on the augmented training images if asked for,
        then the BatchNorm statistics on the training images as the features pass sees them.
        Every process runs it on all of them (DDP then starts all from rank 0's weights).
        A resumed fit skips it: the state it continues holds the weights and statistics."""
        cfg, losses = self.config, []
        if resumed:
            return losses
        rows = self._loader(train, shuffle=False)  # the training images as the features pass sees them
        if kind in ("autoencoder", "deep_sad"):
            loader = self._loader(self._augmented(train), shuffle=True, seed=cfg.seed)
        if kind == "autoencoder":
            losses = pretrain.autoencoder(self.network_, loader,
                                          cfg.pretrain_steps, self.training_params_["lr"], cfg.weight_decay,
                                          self.device)
        elif kind == "deep_sad":
            # the centre from the data's statistics, as Deep SAD's network computes it after its own pretraining
            pretrain.calibrate_batchnorm(self.network_, rows, self.device)
            targets = self_labels.targets_of(train)
            # the rate the omega-steps will take (with labelled anomalies the recipe's labelled_lr)
            lr = omega_lr(self.training_params_, cfg.lr is not None, targets is not None and bool((targets < 0).any()))
            # the backbone's own outputs, as the Deep SAD peer trains them; phi normalises them after
            losses = pretrain.deep_sad(self.network_.backbone, loader, rows, cfg.pretrain_steps, lr,
                                       cfg.weight_decay, cfg.grad_clip, self.device)
        if losses:
            log.info("%s: %d steps, loss %.4g -> %.4g", kind, len(losses), losses[0], losses[-1])
        if kind != "none":
            pretrain.calibrate_batchnorm(self.network_, rows, self.device)
        return losses

    def _omega_batches(self, rows: Dataset, epoch: int):
        """The epoch's shuffled mini-batches on the device, and how many: drawn from the held inputs
        (``resident``), else from a data loader of the augmented view."""
        held = resident.held(self._holding, rows) if self.group_ is None else None
        if held is not None:
            size, drop_last = self.config.batch_size, len(held) > self.config.batch_size
            count = len(held) // size if drop_last else -(-len(held) // size)
            return held.shuffled(size, self.config.seed + epoch, drop_last), count
        loader = self._omega_loader(self._augmented(rows), epoch)
        return ((x.to(self.device, non_blocking=True), t.to(self.device, non_blocking=True)) for x, t in loader), \
            len(loader)

    def _omega_step(self, batches_: tuple, optimizer, bar_level: bool, average: WeightAverage | None = None,
                    anchor: deep_sad.Anchor | None = None) -> tuple[list[float], str | None, dict]:
        """Step 4: the batch losses, what broke if a batch's features or loss were not finite
        (the fit then stops, keeping the best epoch before it), and the shares of the epoch's rows
        that violated their margins (``margin_loss.violation_shares``; empty when it broke).
        ``average``, if any, follows every step; with an ``anchor`` Deep SAD's loss around it joins the
        margin loss at ``deep_sad_weight``. The check does not wait for the device
        (``divergence.FiniteChecks``): on a GPU a non-finite batch is found a few batches later,
        and the batches after it are not reported."""
        cfg, svdd = self.config, self.svdd_
        network = self.ddp_ or self.network_  # DDP averages the gradients over the ranks
        network.train()
        losses, checks = [], divergence.FiniteChecks(self.device, self.group_)
        violations = torch.zeros(4, dtype=torch.float64, device=self.device)  # margin_loss.violation_counts
        batch_iter, count = batches_
        bad = None
        for x, t in tqdm(batch_iter, total=count, desc="omega-step", leave=False, disable=not bar_level):
            with precision.omega_step(cfg.precision, self.device):
                with precision.network_autocast(cfg.precision, self.device):
                    z = network(self._memory_format(x))
                z = z.float()  # the boundary computes in float32 (bf16 autocast ends with the network)
                f = svdd.torch_dissimilarity(z)
                loss = margin_violation_loss(f, t, svdd.b_normal_, svdd.b_anomaly_, cfg.softplus_power,
                                              self.softplus_scale_)
                if anchor is not None:
                    loss = loss + self.deep_sad_weight_ * deep_sad.anchored_loss(z, t, anchor)
                losses.append(loss.detach())
                violations += violation_counts(f.detach(), t, svdd.b_normal_, svdd.b_anomaly_)
                bad = checks.add(z, loss)
                if bad is not None:
                    break
                optimizer.zero_grad(set_to_none=True)
                loss.backward()
                nn.utils.clip_grad_norm_(self.network_.parameters(), cfg.grad_clip)
                optimizer.step()
                if average is not None:
                    average.update(self.network_, count)
        bad = checks.first_bad(wait=True) if bad is None else bad
        values = torch.stack(losses).cpu().tolist() if losses else []
        if bad is not None:
            values = values[:bad + 1]
            return values, (f"the omega-step's features or loss are not finite "
                            f"(batch {bad + 1}, loss {values[-1]:.4g})"), {}
        if self.group_ is not None:  # every rank's rows
            self.group_.sum_(violations)
        shares = violation_shares(violations.cpu())
        if self.ddp_ is not None:
            self.group_.sync_buffers(self.network_)
            if average is not None:  # its batch-norm statistics were each rank's own too
                self.group_.sync_tensors(average.state.values())
        return values, None, shares

    # ---- training

    def fit(self, X, y=None, *, checkpoint=None, resume: bool = False, callback=None) -> "DLMSVDD":
        """Train the network and the boundary by alternating optimisation.

        ``config.epochs`` epochs (none with a frozen backbone), the best epoch by
        validation, then the boundary refitted from the best weights'
        non-augmented training features, and the threshold. With a moving
        average of the weights (``ema_half_life``; with labelled anomalies on
        images from scratch by default) each epoch is judged, and kept, on the
        average (``dlmsvdd.training.weight_average``). With ``deep_sad_weight``
        (likewise by default) Deep SAD's loss joins the margin loss in every
        network step (``dlmsvdd.training.deep_sad.anchored_loss``).

        Non-finite or collapsed features or loss stop the epochs early
        (``dlmsvdd.training.divergence``): the best epoch so far is kept, with a
        ``DivergenceWarning`` and a line in ``warnings_``, or, with
        ``on_divergence="error"``, ``TrainingDiverged`` is raised.

        ``checkpoint``: a file the training state is written to after every
        epoch (``dlmsvdd.training.checkpoints``); with ``resume`` the fit
        continues from it (written by a run of this configuration) and ends as
        the run that wrote it would have, bit for bit at the same thread count.

        ``fit(train, val=None)``: datasets of (image, target). ``fit(X, y=None)``:
        an array of images and targets in {+1, -1} (None: all normal, one-class
        training, which needs ``nu=1``), split into training and a stratified
        validation share ``val_fraction`` (seeded by ``seed``; the split of
        ``dlmsvdd.tasks``). ``callback(row)`` is called with each epoch's
        history row as it finishes.

        Parameters
        ----------
        X : torch.utils.data.Dataset or array-like
            The training dataset of (image, target), or an array of images
            (N, C, H, W) or (N, H, W), or of feature vectors (N, D) (a
            DataFrame or a list of rows too; ``categorical`` and ``missing``
            set how its columns are encoded).
        y : torch.utils.data.Dataset, array-like or None
            With a dataset ``X``: the validation dataset (None: none). With an
            array ``X``: the targets, +1 normal and -1 anomaly (None: all normal).
        checkpoint : str, pathlib.Path or None
            A file the training state is written to after every epoch.
        resume : bool
            Continue from ``checkpoint``.
        callback : callable or None
            Called with each epoch's history row.

        Returns
        -------
        DLMSVDD
            This model, fitted.

        Raises
        ------
        dlmsvdd.training.divergence.TrainingDiverged
            Training broke down and ``on_divergence="error"`` (or at the first epoch).
        """
        if inputs.is_array(X):
            encoding = tabular.fit_encoding(X, self.config.categorical, self.config.missing)
            images = inputs.array_inputs(X, encoding=encoding)
            train, val = self._array_split(images, y, encoding)
            inputs.enough_rows(len(images), len(train), self.config.val_fraction)
        elif inputs.is_array(y):
            raise ValueError("fit(train, val) takes a validation dataset; labels y go with an array of images X")
        else:
            images, train, val = None, X, y
        with precision.scoring(), precision.reproducible(self.config.deterministic):  # the omega-step alone runs
            self._fit(train, val, callback, checkpoint, resume)                       # at config.precision
        devices.place(self, self.device)  # every part the fit made lives where the model does
        self.decision_scores_ = self._fit_rows_scores(train, val, images is not None)
        self.labels_ = (metrics.predict(self.decision_scores_, self.threshold_) < 0).astype(int)
        return self

    def _array_split(self, images: torch.Tensor, y, encoding=None) -> tuple[Dataset, Dataset]:
        """Training and validation sets of an array of images or vectors (``protocols.train_val_split``;
        vectors: validation from the normal rows, standardised with the training rows' statistics;
        a table's codes: encoded by ``encoding`` first)."""
        n = images.shape[0]
        if y is None:
            targets = np.ones(n, dtype=int)
        else:
            targets = y.detach().cpu().numpy() if isinstance(y, torch.Tensor) else np.asarray(y)
            if targets.shape != (n,):
                raise ValueError(f"y must hold one target per image ({n}), got shape {targets.shape}")
            if not np.isin(targets, (1, -1)).all():
                raise ValueError(f"y must hold +1 (normal) or -1 (anomaly); found {np.unique(targets)[:5].tolist()}")
            targets = targets.astype(int)
        if (targets > 0).all() and self.config.nu not in ("auto", 1):  # the dual's rule, said before any training
            raise ValueError(f"without anomalies (y None or all +1) the boundary is one-class SVDD, which needs "
                             f"nu=1 (got nu={self.config.nu}): leave nu at 'auto' (the default) or set nu=1")
        vectors = images.dim() == 2
        train, val = protocols.train_val_split(protocols.Split(np.arange(n), targets), self.config.val_fraction,
                                               self.config.seed, anomalies=not vectors)
        record = None
        if vectors:
            record = VectorPreprocessing.fit_table(images[train.indices], encoding)
            with torch.no_grad():
                images = record.module()(images)
        return protocols.SplitRows(images, train, record), protocols.SplitRows(images, val, record)

    def _fit(self, train: Dataset, val: Dataset | None, callback, checkpoint, resume: bool) -> None:
        cfg = self.config
        if len(train) < inputs.MIN_TRAIN:
            raise ValueError(f"the training set has {len(train)} sample(s); training needs at least {inputs.MIN_TRAIN}")
        if resume and checkpoint is None:
            raise ValueError("resume=True continues from a checkpoint file: pass checkpoint=")
        self.self_labelled_, self.self_labels_, self.input_consensus_ = 0, None, None
        # feature vectors without labelled anomalies are scored by the input consensus alone: nothing to train
        untrained = input_consensus.scores_alone(cfg.input_consensus, train)
        if cfg.nu == "auto" and not untrained:  # without labelled anomalies, label a few (training.self_labels)
            fraction = cfg.training_params(train[0][0].dim() == 1)["self_labelling"]  # the recipe's, unless set
            train, self.self_labelled_ = self_labels.relabel(train, fraction, cfg.seed)
            self.self_labels_ = train.targets if self.self_labelled_ else None
            if self.self_labelled_:
                log.info("no labelled anomalies: %d training rows self-labelled anomalous", self.self_labelled_)
        state = checkpoints.read(checkpoint, checkpoints.TRAINING) if resume else None  # the one read
        optimizer = self._start(train, val, state)
        try:
            self._hold(train, val)
            self._epochs(train, val, optimizer, callback, checkpoint, state, untrained)
        finally:
            self._holding = {}  # the held rows are the fit's alone
            if self._built_format is not None:  # channels_last was asked for: back to the network's own
                self.network_.to(memory_format=self._built_format)

    def _epochs(self, train: Dataset, val: Dataset | None, optimizer, callback, checkpoint, resumed: dict | None,
                untrained: bool) -> None:
        """The epochs (none when ``untrained``; from the training state ``resumed`` when given), the
        best one's weights, the final boundary and threshold (``_refit``)."""
        cfg = self.config
        if cfg.kernel == "exact":  # up front: the final boundary is fitted on every training row
            kernel_choice.warn_if_slow(len(train), self._feature_width(train), torch.float32, self.device,
                                       stacklevel=4)
        best = selection.START  # (best validation value, epoch, network weights) of the epoch kept so far
        self.history_, self.warnings_, first = [], [], 0
        average = None  # the weights' moving average (training.weight_average), once the labels have decided it
        anchor = None  # the reference of Deep SAD's loss beside the margin loss (training.deep_sad), likewise
        if resumed is not None:
            first, best, average, anchor = self._restore_training(resumed, checkpoint, optimizer)
            log.info("resumed from %s at epoch %d", checkpoint, first)
        epochs = 0 if cfg.frozen or untrained else self.training_params_["epochs"]
        quiet = cfg.verbose < 1 or (self.group_ is not None and not self.group_.is_main)
        bar = tqdm(range(first, epochs + 1), initial=first, total=epochs + 1, desc="DLM-SVDD", disable=quiet)
        for epoch in bar:  # the paper's steps, the omega-step after the selection's snapshot
            start = time.perf_counter()
            rows = epoch_rows.draw(train, self.training_params_["epoch_rows"], cfg.seed, epoch)
            # steps 1-3 and 5 on the averaged weights when there is an average, the omega-step on the network's own
            with judged_on(average, self.network_):
                feats, targets = self._features(rows)  # 1. features of the epoch's training rows, eval mode
                problem = divergence.feature_problem(feats, getattr(self.svdd_, "gamma_", None), self.group_)
                if problem is not None:
                    self._diverged(epoch, problem, best)
                    break
                t_features = time.perf_counter()
                svdd = self._alpha_step(feats, targets)  # 2-3. kernel build and dual solve: b_N, b_A
                if anchor is None and self.deep_sad_weight_ > 0 and optimizer is not None:
                    # fixed from the features as the joint epochs start, as Deep SAD fixes its centre
                    anchor = deep_sad.anchor(feats, targets, self.group_)
                row = {"epoch": epoch, **self._alpha_record(svdd), "seconds_features": t_features - start,
                       "seconds_alpha": time.perf_counter() - t_features}
                row.update(self._validate(val))  # 5. validation, and the epoch to keep
                best = selection.offer(best, epoch, row, cfg.selection, self.training_params_["selection_rule"],
                                       lambda: copy.deepcopy(self.network_.state_dict()))
            if average is None and self.ema_half_life_ > 0 and optimizer is not None:
                average = WeightAverage(self.network_, self.ema_half_life_)  # from the weights step 0 left
            if epoch < epochs:  # 4. omega-step on the margin-violation loss, boundary fixed
                start = time.perf_counter()
                row["lr"] = lr_schedule.apply(optimizer, self.omega_lr_, self.training_params_["lr_schedule"], epoch,
                                              epochs)
                row["ema_half_life"] = self.ema_half_life_
                batch_losses, problem, shares = self._omega_step(self._omega_batches(rows, epoch), optimizer,
                                                                 cfg.verbose >= 2 and not quiet, average, anchor)
                row.update(omega_loss=float(np.mean(batch_losses)), omega_batch_losses=batch_losses, **shares,
                           seconds_omega=time.perf_counter() - start)
            self.history_.append(row)
            if callback is not None:
                callback(row)
            if problem is not None:
                self._diverged(epoch, problem, best)
                break
            bar.set_postfix({k: f"{row[k]:.4g}" for k in ("val_auroc", "omega_loss", "gap") if k in row})
            log.info("epoch %d: %s", epoch, {k: v for k, v in row.items() if not isinstance(v, list)})
            if checkpoint is not None:
                self._save_training(checkpoint, epoch + 1, best, optimizer, average, anchor)
        self.best_epoch_ = best[1]
        self.network_.load_state_dict(best[2])
        self._refit(train, val)
        short = [row["epoch"] for row in self.history_ if not row["converged"]]
        if short or not self.svdd_.converged_:
            warnings.warn(f"the alpha-step stopped without its certificate in epochs {short}"
                          f"{'' if self.svdd_.converged_ else ' and in the final refit'} (history_ rows: "
                          "'converged', 'stalled', 'gap'); raise fw_max_iter or loosen fw_tol",
                          ConvergenceWarning, stacklevel=3)
        return self

    def _start(self, train: Dataset, val: Dataset | None = None, resumed: dict | None = None):
        """The network (seeded), its DDP wrapper under torchrun, the boundary
        estimator and the optimiser (None with a frozen backbone); a resumed run's
        (``resumed``: its training state) network and epochs as it started."""
        cfg = self.config
        torch.manual_seed(cfg.seed)
        example, _ = train[0]
        vectors = example.dim() == 1
        self.in_channels_, self.input_shape_ = example.shape[0], tuple(example.shape)
        # how raw inputs become the network's: the dataset's record, or inputs taken as they are
        self.preprocessing_ = getattr(train, "preprocessing", None) or (
            Preprocessing.identity(example.shape) if example.dim() == 3
            else VectorPreprocessing.identity(example.shape[0]) if vectors else None)
        # the backbone, the recipe's lr, step 0, selection rule and network shape
        # the network and epochs by the rows' budget on the CPU; a resumed run's as it started
        self.training_params_ = cfg.training_params(vectors, n_train=len(train), device=self.device)
        if resumed is not None:
            # the shape of the recipe as asked, not as this machine's budget makes it: states written before
            # runs recorded their network were trained with that
            recipe = cfg.training_params(vectors)
            self.training_params_.update(cfg.recorded_run(recipe, checkpoints.run_params(resumed)))
        self.network_ = self._build_network(self.in_channels_, self.training_params_, vectors)
        self.pretrain_losses_ = self._pretrain(train, self.training_params_["pretrain"], resumed is not None)
        if self.network_.guard is not None:
            # the training rows alone: the validation normals calibrate, so they must meet it as new rows do
            self.guard_ = self.network_.guard.fit(lambda: (x.to(self.device) for x, _ in self._loader(train, False)))
        self._built_format = None  # set when the fit changes the network's memory format
        if cfg.frozen:
            self.network_.requires_grad_(False)
        elif cfg.channels_last and example.dim() == 3:  # NHWC convolutions (tensor cores)
            # the fit ends in the format the network was built in (the small CNN's own is channels-last)
            self._built_format = precision.memory_format(self.network_)
            self.network_.to(memory_format=torch.channels_last)
        self.ddp_ = None
        if self.group_ is not None and not cfg.frozen:
            self.ddp_ = DistributedDataParallel(self.network_, device_ids=None if self.device.type == "cpu"
                                                else [self.device])
        self.n_train_ = len(train)
        solver = cfg.solver
        if self.group_ is not None and LpSVDD.sharded_solver(solver) != solver:
            solver = LpSVDD.sharded_solver(solver)
            log.info("the sharded alpha-step runs %s instead of %s", solver, cfg.solver)
        # calibration=None: no cross-fitting per epoch; the validation normals calibrate (training.thresholds)
        self.svdd_ = LpSVDD(**{**cfg.boundary_params(), "solver": solver}, random_state=cfg.seed, warm_start=True,
                            calibration=None)
        return None if cfg.frozen else torch.optim.Adam(self.network_.parameters(), lr=self.training_params_["lr"],
                                                        weight_decay=cfg.weight_decay)

    def _feature_width(self, train: Dataset) -> int:
        """The width of the network's features (one training row through it)."""
        self.network_.eval()
        with torch.no_grad():
            return int(self.network_(train[0][0][None].to(self.device)).shape[1])

    def _diverged(self, epoch: int, problem: str, best: tuple) -> None:
        """Training broke down at ``epoch``: raise, or warn and let the best earlier epoch stand."""
        if best[2] is None:
            raise divergence.TrainingDiverged(  # before any training step: nothing to roll back to
                f"the initial network's features are unusable: {problem}; check the data (are the training "
                "inputs all alike?) and the backbone's weights")
        hint = f"lower the learning rate (lr {getattr(self, 'omega_lr_', self.training_params_['lr']):g})"
        if self.config.on_divergence == "error":
            raise divergence.TrainingDiverged(f"training diverged at epoch {epoch}: {problem}; {hint}")
        message = (f"training stopped at epoch {epoch}: {problem}; keeping epoch {best[1]}, the best before it "
                   f"({hint}, or on_divergence='error' to fail instead)")
        self.warnings_.append(message)
        log.warning(message)
        warnings.warn(message, divergence.DivergenceWarning, stacklevel=3)

    def _save_training(self, path, next_epoch: int, best: tuple, optimizer, average: WeightAverage | None,
                       anchor: deep_sad.Anchor | None) -> None:
        """The training state after an epoch (every rank gathers its random
        generators; the main process writes)."""
        rng = checkpoints.rng_states(self.group_)
        if self.group_ is not None and not self.group_.is_main:
            return
        checkpoints.write(path, {
            "config": self.config.to_dict(), "resolved": self.config.resolved(len(self.input_shape_) == 1), "next_epoch": next_epoch,
            **self._run_params(),  # the run's epochs and network, after budget_rows
            "input_shape": list(self.input_shape_),
            "network": self.network_.state_dict(), "optimizer": None if optimizer is None else optimizer.state_dict(),
            "boundary": self.svdd_.state_dict(), "history": self.history_,
            "best": {"key": best[0], "epoch": best[1], "network": best[2]}, "rng": rng,
            "average": None if average is None else average.state_dict(),
            "deep_sad_anchor": None if anchor is None else anchor._asdict()},
            checkpoints.TRAINING)

    def _run_params(self) -> dict:
        """What a fit's state records of its own run beyond its configuration: the epochs and the
        network's shape fields, as the budget of rows made them (``checkpoints.run_params``)."""
        params = self.training_params_
        return {"epochs": params["epochs"],
                "network_shape": {k: params[k] for k in SHAPE_FIELDS.get(params["backbone"], {}) if k in params}}

    def _restore_training(self, state: dict, path, optimizer
                          ) -> tuple[int, tuple, WeightAverage | None, deep_sad.Anchor | None]:
        """Continues where ``_save_training`` left off (``state``, read from ``path``,
        written by a run of this configuration): the next epoch, the best so far, the
        weights' moving average and Deep SAD's anchor (None: none yet, or a state written
        before there was one)."""
        checkpoints.check_config(state, self.config.to_dict(), path, self.config.resolved(len(self.input_shape_) == 1))
        self.network_.load_state_dict(state["network"])
        if optimizer is not None:
            optimizer.load_state_dict(state["optimizer"])
        self.svdd_ = LpSVDD.from_state_dict(state["boundary"], device=self.device)
        self.history_ = state["history"]
        checkpoints.set_rng_states(state["rng"], self.group_)
        best, average = state["best"], state.get("average")
        average = None if average is None else WeightAverage.from_state_dict(average, self.network_)
        anchor = state.get("deep_sad_anchor")  # states written before it trained without the term
        anchor = None if anchor is None else deep_sad.Anchor(anchor["centre"].to(self.device), anchor["scale"])
        return state["next_epoch"], (best["key"], best["epoch"], best["network"]), average, anchor

    def _refit(self, train: Dataset, val: Dataset | None) -> None:
        """The boundary from scratch on the best weights, the input consensus, the decision
        threshold; the scores of the rows given (``_given``, which ``fit`` makes ``decision_scores_``)."""
        feats, targets = self._features(train)
        self._alpha_step(feats, targets, restart=True)
        self.reference_ = explain.reference_inputs(train, self.config.seed)  # explain's baselines
        if self.network_.guard is not None:
            self._set_floor(self._gathered_scores(feats, targets, len(train), guarded=False)[0],
                            *([] if val is None else [self._raw_scores(val)]))
        scored = self._gathered_scores(feats, targets, len(train))  # one pass over the training rows
        n_labelled = int((np.asarray(scored[1]) < 0).sum()) - self.self_labelled_  # by the user, not self-labelled
        if input_consensus.applies(self.config.input_consensus, len(self.input_shape_) == 1, n_labelled):
            # the training rows alone (the validation rows set the threshold)
            self.input_consensus_ = input_consensus.fit(self._inputs(train), scored[0], n_labelled, self.config.seed,
                                                         self.device, self.preprocessing_)
        given = {input_consensus.TRAINING: self._given_scores(scored)}
        if val is not None:  # scored as new rows: nothing that scores them was fitted on them
            given[input_consensus.VALIDATION] = self.scores(val)
        f_val, t_val = given.get(input_consensus.VALIDATION, (None, None))
        self.threshold_, self.threshold_rule_, self.svdd_.calibration_ = thresholds.decide(
            self.config.contamination, self.svdd_.r2_, f_val, t_val, lambda: given[input_consensus.TRAINING])
        self._given = {part: f for part, (f, _) in given.items()}  # fit's decision_scores_ take them

    def _given_scores(self, scored) -> tuple[np.ndarray, np.ndarray]:
        """The scores and targets of the training rows ``fit`` was given: f (``scored``: their (f,
        targets)), or with the input consensus the combined score, each row left out of its own
        neighbours."""
        f, targets = scored
        if self.input_consensus_ is not None:
            f = self.input_consensus_.given_scores(torch.as_tensor(f)).numpy()
        return f, targets

    def _fit_rows_scores(self, train: Dataset, val: Dataset | None, array: bool) -> np.ndarray:
        """PyOD's ``decision_scores_``: the scores of the rows passed to fit (an array's: every row, in
        its order; a dataset's: the training rows), as ``_refit`` left them."""
        given, self._given = self._given, None
        scores = given[input_consensus.TRAINING]
        if not array:
            return scores
        every = np.empty(len(train) + len(val), dtype=scores.dtype)
        every[train.split.indices] = scores
        every[val.split.indices] = given[input_consensus.VALIDATION]
        return every

    def _set_floor(self, *scores: np.ndarray) -> None:
        """The guard's floor: the largest f of these rows within the data (training, validation or
        calibration rows), so that rows beyond the data score above all of them."""
        finite = np.concatenate([np.asarray(s, dtype=np.float64).ravel() for s in scores])
        floor = float(finite.max()) if finite.size else 0.0
        self.network_.guard.floor.fill_(max(floor, float(self.network_.guard.floor)))

    def measure_alpha_step(self, train: Dataset) -> dict:
        """Run one more alpha-step on the trained network's features under a peak-memory probe.

        From scratch, in a separate pass, so the probe's overhead touches
        neither training nor the model's boundary (``dlmsvdd.training.memory``).
        Under torchrun every process runs it on its shard and reports its own
        peak.

        Parameters
        ----------
        train : torch.utils.data.Dataset
            The training dataset.

        Returns
        -------
        dict
            ``build_seconds``, ``solve_seconds``, ``converged`` (no warning:
            training already warned), ``peak_bytes`` above the features,
            ``memory_method``, ``n_train``, ``n_features``, ``rank`` (the factor's
            columns, None for the exact kernel) and ``full_kernel_bytes``.
        """
        if getattr(self, "self_labels_", None) is not None:  # the targets the fit trained on
            train = self_labels.Relabelled(train, self.self_labels_)
        feats, targets = self._features(train)
        svdd = sklearn.base.clone(self.svdd_).set_params(gamma=self.svdd_.gamma_, warm_start=False)
        fit = svdd.fit if self.group_ is None else svdd.fit_sharded
        with memory.peak(self.device) as probe, warnings.catch_warnings():
            warnings.simplefilter("ignore", ConvergenceWarning)
            fit(feats, targets)
        n = len(train)
        return {"build_seconds": svdd.build_seconds_, "solve_seconds": svdd.solve_seconds_,
                "converged": bool(svdd.converged_), "peak_bytes": probe.bytes, "memory_method": probe.method, "n_train": n,
                "n_features": feats.shape[1], "rank": svdd.factor_columns_,
                "full_kernel_bytes": n * n * feats.element_size()}

    # ---- devices and checkpoints

    def to(self, device) -> "DLMSVDD":
        """Move the model whole to ``device``: network and guard, boundary (kernel map and
        calibration), input consensus (``dlmsvdd.training.devices``).

        Parameters
        ----------
        device : str or torch.device
            "auto", "cpu", "cuda", "cuda:N" (checked: this machine must have it).

        Returns
        -------
        DLMSVDD
            This model, scoring on ``device`` from now on.
        """
        self.config.device = str(device)
        devices.place(self, devices.resolve(str(device)))
        return self

    def save(self, path) -> None:
        """Save the model: weights, boundary, threshold, configuration, history, preprocessing, versions.

        Written atomically (with several processes: from one of them; all hold
        the same model); ``load`` reads it (``dlmsvdd.training.model_file``).

        Parameters
        ----------
        path : str or pathlib.Path
            The file to write (``model.pt`` in a run folder).
        """
        self._check_fitted("threshold_")
        checkpoints.write(path, model_file.model_state(self), checkpoints.MODEL)

    @classmethod
    def load(cls, path, backbone: nn.Module | None = None, device: str | None = None) -> "DLMSVDD":
        """A saved model; it scores exactly as the one that was saved.

        Parameters
        ----------
        path : str or pathlib.Path
            A file written by ``save``.
        backbone : torch.nn.Module or None
            The custom backbone's module, for a model trained with one (its
            architecture is code, not data).
        device : str or None
            Where to score (default: where it was trained, or the CPU when this
            machine lacks that device).

        Returns
        -------
        DLMSVDD
            The model.

        Raises
        ------
        ValueError
            A file that is not a complete model of this format, with what is wrong.
        """
        return model_file.load(cls, path, backbone, device)
