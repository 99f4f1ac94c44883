"""The labelled-anomaly peers of DLM-SVDD on images, trained as DLM-SVDD trains its network (issue 50):
the same small CNN (its recipe's width and branches, seeded alike), the same step 0 (the BatchNorm
statistics of the training images), Adam at the recipe's learning rate and schedule with the same weight decay,
batch size and gradient clipping, the same augmentation, the same number of epochs, each epoch
judged on the same moving average of the weights (``ema_half_life``, ``dlmsvdd.training.weight_average``),
and the epoch kept by the same rule on validation AUROC (``dlmsvdd.training.selection``). Only the
objective differs:

* Deep SAD (Ruff et al., ICLR 2020): the centre c is the mean feature of the training normals under
  the initial network (coordinates within 0.1 of 0 pushed to +-0.1, as its code does); a normal's
  loss is ||phi(x) - c||^2, a labelled anomaly's eta / (||phi(x) - c||^2 + 1e-6) with eta = 1; the
  score is ||phi(x) - c||^2.
* A supervised classifier, the obvious alternative when anomalies are labelled: a linear layer on
  the same features, binary cross-entropy with the anomalies weighted by n_normal / n_anomalous
  (the two classes weigh alike, as DLM-SVDD's loss averages each class apart); the score is the
  anomaly logit.
"""

from __future__ import annotations

import copy
import time

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

from dlmsvdd import TrainConfig, metrics
from dlmsvdd.training import batches, deep_sad, lr_schedule, pretrain, selection
from dlmsvdd.training.config import omega_lr, with_labels_only
from dlmsvdd.training.models import build_backbone
from dlmsvdd.training.weight_average import WeightAverage, judged_on


def _inputs(loader, device):
    for x, t in loader:
        yield x.to(device), t.to(device)


def outputs(net: nn.Module, data, batch_size: int, device) -> tuple[torch.Tensor, np.ndarray]:
    """The network's outputs on every row of ``data`` (eval mode) and the targets."""
    return pretrain.outputs(net, batches.loader(data, batch_size, shuffle=False), device)


class DeepSAD:
    """Deep SAD's objective (``dlmsvdd.training.deep_sad``) on a backbone's features."""

    name = "Deep SAD (same CNN)"

    def head(self, width: int) -> nn.Module:
        return nn.Identity()

    def start(self, net: nn.Module, train, batch_size: int, device) -> None:
        z, t = outputs(net, train, batch_size, device)
        self.centre = deep_sad.centre(z, t)

    def score(self, out: torch.Tensor) -> torch.Tensor:
        return deep_sad.distance(out, self.centre)

    def loss(self, out: torch.Tensor, t: torch.Tensor) -> torch.Tensor:
        return deep_sad.loss(out, t, self.centre)


class Classifier:
    """A linear anomaly logit on a backbone's features, class-balanced binary cross-entropy."""

    name = "classifier (same CNN)"

    def head(self, width: int) -> nn.Module:
        return nn.Linear(width, 1)

    def start(self, net: nn.Module, train, batch_size: int, device) -> None:
        targets = np.asarray(train.targets)
        self.weight = float((targets > 0).sum()) / max(1, int((targets < 0).sum()))

    def score(self, out: torch.Tensor) -> torch.Tensor:
        return out[:, 0]

    def loss(self, out: torch.Tensor, t: torch.Tensor) -> torch.Tensor:
        anomalous = (t < 0).float()
        return F.binary_cross_entropy_with_logits(out[:, 0], anomalous,
                                                  pos_weight=torch.tensor(self.weight, device=out.device))


PEERS = {"deep_sad": DeepSAD, "classifier": Classifier}


def fit_peer(kind: str, task, config: TrainConfig, device="cpu") -> dict:
    """Train a peer on a task's training set, the epoch kept by validation AUROC; its test scores.

    ``train_peer``'s parameters; returns its record with ``test_scores`` (higher = more anomalous).
    """
    net, peer, record = train_peer(kind, task, config, device)
    out, _ = outputs(net, task.test, config.batch_size, device)
    return {"test_scores": peer.score(out).cpu().numpy(), **record}


def train_peer(kind: str, task, config: TrainConfig, device="cpu") -> tuple[nn.Module, object, dict]:
    """Train a peer on a task's training set; the weights of the epoch kept by validation AUROC.

    Parameters
    ----------
    kind : str
        "deep_sad" or "classifier".
    task : dlmsvdd.data.tasks.Task
        The task (DLM-SVDD's: the same rows).
    config : TrainConfig
        DLM-SVDD's configuration: its recipe's epochs (on this training set and device: ``budget_rows``),
        learning rate with labels and its schedule, network shape and selection rule, and its weight
        decay, batch size, gradient clipping and seed.
    device : str or torch.device
        Where the network trains.

    Returns
    -------
    net : torch.nn.Module
        The trained network, ``nn.Sequential(backbone, head)``, at the kept epoch's weights.
    peer : DeepSAD or Classifier
        Its objective (``peer.score`` of the network's outputs: higher = more anomalous).
    record : dict
        ``val_auroc``, ``val_curve`` (each epoch's validation AUROC), ``kept_epoch``, ``epochs``,
        ``seconds``.
    """
    peer = PEERS[kind]()
    # DLM-SVDD's epochs on this training set and device
    params = config.training_params(n_train=len(task.train), device=device)
    start_time = time.perf_counter()
    torch.manual_seed(config.seed)
    channels = task.train[0][0].shape[0]
    backbone, width = build_backbone("small_cnn", None, channels, params["cnn_width"], params["cnn_branches"],
                                     params["cnn_branch_norm"])
    net = nn.Sequential(backbone, peer.head(width)).to(device)
    size = config.batch_size
    if params["pretrain"] != "none":
        pretrain.calibrate_batchnorm(net, batches.loader(task.train, size, shuffle=False), device)
    peer.start(backbone, task.train, size, device)
    lr = omega_lr(params, config.lr is not None, True)  # the rate of DLM-SVDD's omega-steps with labels
    optimizer = torch.optim.Adam(net.parameters(), lr=lr, weight_decay=config.weight_decay)
    half_life = with_labels_only(params, "ema_half_life", config.ema_half_life, True)  # DLM-SVDD's with labels
    kept, average, curve = selection.START, None, []
    augmented = task.train.augmented()
    for epoch in range(params["epochs"] + 1):
        with judged_on(average, net):
            out, t_val = outputs(net, task.val, size, device)
            row = {"val_auroc": metrics.auroc(t_val, peer.score(out).cpu().numpy()),
                   "val_n_anomalous": int((t_val < 0).sum())}
            kept = selection.offer(kept, epoch, row, "auroc", params["selection_rule"],
                                   lambda: copy.deepcopy(net.state_dict()))
            curve.append(row["val_auroc"])
        if epoch == params["epochs"]:
            break
        if average is None and half_life > 0:
            average = WeightAverage(net, half_life)
        net.train()
        lr_schedule.apply(optimizer, lr, params["lr_schedule"], epoch, params["epochs"])
        loader = batches.loader(augmented, size, shuffle=True, seed=config.seed + epoch,
                                drop_last=len(augmented) > size)
        for x, t in _inputs(loader, device):
            loss = peer.loss(net(x), t)
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            nn.utils.clip_grad_norm_(net.parameters(), config.grad_clip)
            optimizer.step()
            if average is not None:
                average.update(net, len(loader))
    net.load_state_dict(kept[2])
    seconds = time.perf_counter() - start_time
    out_val, t_val = outputs(net, task.val, size, device)
    return net, peer, {"val_auroc": metrics.auroc(t_val, peer.score(out_val).cpu().numpy()), "val_curve": curve,
                       "kept_epoch": kept[1], "epochs": params["epochs"], "seconds": seconds}
