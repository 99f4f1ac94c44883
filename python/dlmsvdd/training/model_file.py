"""A trained model's file: what ``DLMSVDD.save`` writes and ``DLMSVDD.load`` reads
back (the file format and its checks: ``checkpoints``), so that a loaded model
scores exactly as the saved one."""

from __future__ import annotations

import dataclasses
import logging
import platform

import numpy as np
import torch
import torch.nn as nn

import dlmsvdd_ext
from dlmsvdd_ext import LpSVDD

from ..data.preprocessing import record_from_dict
from . import checkpoints, devices, input_consensus, metrics
from .config import TrainConfig

log = logging.getLogger("dlmsvdd")


def versions() -> dict:
    return {"dlmsvdd": dlmsvdd_ext.__version__, "dlmsvdd_ext": dlmsvdd_ext.__version__, "torch": str(torch.__version__),
            "numpy": np.__version__, "python": platform.python_version()}


def model_state(model) -> dict:
    """What the file holds of a fitted model: weights, boundary, threshold, configuration,
    history, preprocessing, versions."""
    preprocessing = None if model.preprocessing_ is None else model.preprocessing_.to_dict()
    return {
        "config": model.config.to_dict(), "in_channels": model.in_channels_, "input_shape": list(model.input_shape_),
        "preprocessing": preprocessing, "network": model.network_.state_dict(), "boundary": model.svdd_.state_dict(),
        "threshold": model.threshold_, "threshold_rule": model.threshold_rule_,
        "best_epoch": model.best_epoch_, "history": model.history_, "self_labelled": model.self_labelled_,
        "warnings": model.warnings_, "versions": versions(),
        "decision_scores": _decision_scores(model), "reference": getattr(model, "reference_", None),
        "input_consensus": None if model.input_consensus_ is None else model.input_consensus_.state_dict(),
        **({} if getattr(model, "training_params_", None) is None else model._run_params())}


def _decision_scores(model) -> torch.Tensor | None:
    """PyOD's ``decision_scores_`` for the file (None for a model loaded from a file without them)."""
    scores = getattr(model, "decision_scores_", None)
    return None if scores is None else torch.as_tensor(np.asarray(scores), dtype=torch.float64)


def load(cls, path, backbone: nn.Module | None, device: str | None):
    """``DLMSVDD.load`` (see there): the model of class ``cls`` saved in ``path``."""
    state = checkpoints.read(path, checkpoints.MODEL)
    checkpoints.check_model(state, path)
    values = checkpoints.upgraded_config(state["config"])
    values.setdefault("guard", False)  # a model that predates the distance guard was trained without it
    values.setdefault("input_consensus", False)  # nor the input consensus
    known = {f.name for f in dataclasses.fields(TrainConfig)}
    odd = sorted(set(values) - known) + [f"no {k!r}" for k in ("backbone", "device") if k not in values]
    if odd:  # a hand edit: TrainConfig(**values) would fail with a TypeError or KeyError
        raise ValueError(f"{path}: its configuration is not one this dlmsvdd writes ({', '.join(map(str, odd))}); "
                         f"{checkpoints.DAMAGED}")
    if device is None:
        try:
            devices.resolve(values["device"])
        except ValueError as err:
            log.warning("%s; loading %s on the CPU", err, path)
            values["device"] = "cpu"
    else:
        values["device"] = device
    if values["backbone"] == "custom" and backbone is None:
        raise ValueError("this checkpoint has a custom backbone: pass the same nn.Module as backbone=")
    input_shape = tuple(state.get("input_shape") or ())  # not in models saved before it was added
    vectors = len(input_shape) == 1
    # the network it was trained with: the backbone and its recipe's shape, resolved before the weights
    # are dropped (which could change both); a shape field the checkpoint predates: the shape of before
    config = TrainConfig(**values)
    resolved = config.training_params(vectors)
    resolved.update(config.recorded_run(resolved, checkpoints.run_params(state), given=values))
    values["backbone"] = resolved["backbone"] if values["backbone"] == "auto" else values["backbone"]
    values["weights"] = None  # the checkpoint holds the weights
    model = cls(TrainConfig(**values), backbone=backbone)
    model.in_channels_ = state["in_channels"]
    model.input_shape_ = input_shape
    stored = state.get("preprocessing")  # absent from checkpoints written before it was kept
    try:
        model.preprocessing_ = None if stored is None else record_from_dict(stored)
    except (ValueError, TypeError, KeyError, AttributeError) as err:  # a record no version writes
        raise ValueError(f"{path}: its preprocessing record is not one this dlmsvdd reads ({type(err).__name__}: "
                         f"{err}); {checkpoints.DAMAGED}") from None
    model.network_ = model._build_network(model.in_channels_, resolved, vectors)
    model.training_params_ = resolved  # (a file saved again records the same network)
    try:
        model.network_.load_state_dict(state["network"])
    except RuntimeError as err:  # torch's missing or unexpected keys, size mismatches
        detail = "; ".join(line.strip() for line in str(err).splitlines()[1:])[:500]
        raise ValueError(f"{path}: its network does not fit the backbone its configuration builds ({detail}); "
                         f"{checkpoints.DAMAGED}") from None
    try:
        model.svdd_ = LpSVDD.from_state_dict(state["boundary"])
    except (KeyError, TypeError, AttributeError) as err:
        raise ValueError(f"{path}: its boundary is not a complete LpSVDD state ({type(err).__name__}: {err}); "
                         f"{checkpoints.DAMAGED}") from None
    model.threshold_, model.best_epoch_, model.history_ = state["threshold"], state["best_epoch"], state["history"]
    model.warnings_ = state.get("warnings", [])
    model.reference_ = state.get("reference")  # explain's baselines; absent from files written before it
    consensus = state.get("input_consensus")  # absent from files written before it
    model.input_consensus_ = None if consensus is None else input_consensus.InputConsensus.from_state_dict(
        consensus)
    model.self_labelled_ = state.get("self_labelled", 0)  # not in models saved before self-labelling
    model.threshold_rule_ = state.get("threshold_rule", "unrecorded")  # checkpoints before it was kept
    scores = state.get("decision_scores")  # PyOD's fitted attributes; absent from files written before
    if scores is not None:
        model.decision_scores_ = checkpoints.flat_scores(scores, "decision_scores", path)
        model.labels_ = (metrics.predict(model.decision_scores_, model.threshold_) < 0).astype(int)
    devices.place(model, model.device)  # the parts read on the CPU, moved whole
    _check_parts_fit(model, path)
    return model


def _check_parts_fit(model, path) -> None:
    """The loaded network and boundary fit each other: one zero image through
    both, so that a tensor of another shape in the boundary is refused here,
    naming the file, not when (and how) scoring or an export trips on it."""
    if not model.input_shape_:  # models saved before it was recorded
        return
    try:
        with torch.no_grad():
            model.svdd_.dissimilarity(model.network_.eval()(torch.zeros(1, *model.input_shape_, device=model.device)))
    except (RuntimeError, ValueError) as err:
        raise ValueError(f"{path}: its boundary does not fit its network ({err}); {checkpoints.DAMAGED}") from None
