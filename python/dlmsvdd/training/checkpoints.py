"""Checkpoint files: a trained model (``model.pt``) and the training state of an
unfinished run (``checkpoint.pt``, written after every epoch; see
docs/user-guide/run-folders.md, "Resuming a run").

Both are ``torch.save``'d dicts of tensors, numbers, strings, lists and dicts,
which ``torch.load(weights_only=True)`` reads (nothing in them runs code), with
``format`` (the layout's version) and ``kind`` ("model" or "training"). They
are written atomically: a temporary file in the same folder, flushed to disk,
then renamed over the old one, so a run killed while writing leaves the old
file or the new one, never a torn one.

The training state holds everything the next epoch depends on: the network,
the optimiser, the boundary (LpSVDD's state: the bandwidth ``gamma_`` and the
dual ``alpha`` its warm start continues from), the history, the best epoch so
far and its weights, and the random generators of torch (CPU and CUDA), numpy
and Python (under torchrun every process's). The data loaders need no state:
their generators are seeded from (seed, epoch) at every epoch.
"""

from __future__ import annotations

import math
import random
import re
import warnings
from pathlib import Path

import numpy as np
import torch
import torch.distributed as dist

from dlmsvdd_ext.placement import cpu_copy

from .atomic import open_atomic
from .models import SMALL_CNN_BRANCH_NORM

FORMAT = 1  # the layout of both kinds; a reader refuses a newer one
MODEL, TRAINING = "model", "training"
# fields of the configuration a resumed run may change: they do not change the numbers
RUN_ONLY = ("verbose", "device", "output")
# configuration fields renamed since earlier versions wrote them: old name -> new name. Stored
# configurations (models, checkpoints, run records) are read under the new names
# (``upgraded_config``); a user's configuration that spells the old one is refused, with the new.
RENAMED_FIELDS = {"backend": "kernel"}  # issue 35: one name with LpSVDD's
# resolved fields added since earlier versions wrote a state, with the value those versions trained with
RESOLVED_SINCE = {"lr_schedule": "constant", "labelled_nu": 1.2, "labelled_slack_scale": 1.0,
                  "labelled_softplus_scale": 1.0, "labelled_ema_half_life": 0.0, "labelled_deep_sad_weight": 0.0}
# and the small CNN's shape fields added since, which only a small CNN's state resolves (others leave them None)
SMALL_CNN_RESOLVED_SINCE = {"cnn_branch_norm": SMALL_CNN_BRANCH_NORM}
# and those whose value was another resolved field's: labelled anomalies trained at "lr"
RESOLVED_AS = {"labelled_lr": "lr"}


def resolved_then(saved: dict) -> dict:
    """A state's stored resolved configuration with the fields added since as the version that wrote
    it trained them (``RESOLVED_SINCE``, ``RESOLVED_AS``), under this version's names."""
    saved = upgraded_config(saved)
    since = {**RESOLVED_SINCE, **{k: saved[v] for k, v in RESOLVED_AS.items() if v in saved}}
    if saved.get("backbone") == "small_cnn":
        since.update(SMALL_CNN_RESOLVED_SINCE)
    return {**since, **saved}


def upgraded_config(values: dict) -> dict:
    """A stored configuration under this version's field names (``RENAMED_FIELDS``)."""
    values = dict(values)
    for old, new in RENAMED_FIELDS.items():
        if old in values:
            values.setdefault(new, values.pop(old))
    return values


def write(path, state: dict, kind: str) -> None:
    """``state`` with ``format`` and ``kind`` added, atomically at ``path``; every tensor in it is
    written from the CPU, so that a file written on a GPU loads on any machine."""
    with open_atomic(path, "wb") as f:
        torch.save(cpu_copy({"format": FORMAT, "kind": kind, **state}), f)


def read(path, kind: str) -> dict:
    """The checkpoint at ``path``, refused with a message that says why when it
    is missing, empty, not a dlmsvdd checkpoint, newer than this version reads,
    or the other kind."""
    path = Path(path)
    if not path.is_file():
        raise ValueError(f"no checkpoint at {str(path)!r}")
    if path.stat().st_size == 0:
        raise ValueError(f"{path} is empty (0 bytes): not a dlmsvdd checkpoint; was it written completely?")
    try:
        with warnings.catch_warnings():  # torch's note on a plain pickle's protocol: the error below says it
            warnings.filterwarnings("ignore", message="Detected pickle protocol", category=UserWarning)
            state = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as err:  # noqa: BLE001 - pickle, zip and torch errors alike: not a checkpoint of ours
        raise ValueError(f"{path} is not a dlmsvdd checkpoint{_load_error(err)}") from None
    if not isinstance(state, dict) or not isinstance(state.get("format"), int):
        raise ValueError(f"{path} is not a dlmsvdd checkpoint (a torch file without dlmsvdd's 'format')")
    if state["format"] > FORMAT:
        raise ValueError(f"{path} was written by a newer dlmsvdd (checkpoint format {state['format']}; this version "
                         f"reads format {FORMAT} and older): upgrade dlmsvdd to read it")
    found = state.get("kind", MODEL)  # format 1 model files were written before there were two kinds
    if found != kind:
        if found == TRAINING:
            raise ValueError(f"{path} is the training state of an unfinished run, not a model: continue it with "
                             f"`dlmsvdd train --resume {path.parent}`")
        raise ValueError(f"{path} is a trained model, not the training state of an unfinished run")
    return state


def _load_error(err: Exception) -> str:
    """What torch.load found wrong with a file, without its advice to load it
    with weights_only=False: that would run whatever code the file holds."""
    text = str(err)
    found = re.search(r"Unsupported global: GLOBAL (\S+)", text)
    if found:
        return (f": it holds a Python object ({found.group(1)}) where a checkpoint holds only tensors, numbers, "
                "strings, lists and dicts (such files are not loaded: loading them could run code)")
    if "WeightsUnpickler error:" in text:  # a pickle torch's safe reader cannot follow
        detail = " ".join(text.split("WeightsUnpickler error:")[1].split("Check the documentation")[0].split())
        return f": a pickle that is not a torch file of tensors, numbers, strings, lists and dicts ({detail})"
    return f" (torch.load: {type(err).__name__}: {text})"[:500]


# the fields DLMSVDD.load reads; what happened to the file, and what to do, when one is wrong
MODEL_FIELDS = ("config", "in_channels", "network", "boundary", "threshold", "best_epoch", "history")
DAMAGED = "the file is damaged or was edited: use the model.pt its training wrote, or train again"


def check_model(state: dict, path) -> None:
    """A model file (as ``read`` returns it) with every field ``DLMSVDD.load``
    reads and finite numbers where it scores with them: the threshold, the
    network's and the boundary's tensors and numbers (its history aside: a
    record, not used to score). NaN anywhere there would make every image's
    comparison with the threshold false: all called normal, without a word."""
    missing = [repr(k) for k in MODEL_FIELDS if k not in state]
    if missing:
        raise ValueError(f"{path} is not a complete dlmsvdd model: it lacks {', '.join(missing)}; {DAMAGED}")
    for key in ("config", "network", "boundary"):
        if not isinstance(state[key], dict):
            raise ValueError(f"{path}: its {key} is a {type(state[key]).__name__}, not a dict; {DAMAGED}")
    threshold = state["threshold"]
    if isinstance(threshold, bool) or not isinstance(threshold, (int, float)) or not math.isfinite(threshold):
        raise ValueError(f"{path}: its threshold is {threshold!r}, not a finite number; {DAMAGED}")
    boundary = {k: v for k, v in state["boundary"].items() if k != "history"}
    for name, value in [*_numbers(state["network"], "network"), *_numbers(boundary, "boundary")]:
        if isinstance(value, torch.Tensor) and not torch.isfinite(value).all():
            raise ValueError(f"{path}: {name} holds NaN or infinite values; {DAMAGED}")
        if isinstance(value, float) and not math.isfinite(value):
            raise ValueError(f"{path}: {name} is {value!r}, not a finite number; {DAMAGED}")
    check_boundary(state["boundary"], path)


def check_boundary(boundary: dict, path) -> None:
    """The boundary's arrays fit each other as a fit leaves them: one alpha >= 0 and one
    label (+1 / -1) per training sample, the support where alpha > 0, one dual
    coefficient (and, for the exact kernel, one support vector) per support index, the
    calibration scores one flat list. An edit that breaks this would load and score,
    silently, with a boundary no fit could give."""
    def refuse(what: str):
        raise ValueError(f"{path}: its boundary {what}; {DAMAGED}")

    arrays = {k: boundary.get(k) for k in ("alpha", "labels", "support", "dual_coef")}
    for name, value in arrays.items():
        if not isinstance(value, torch.Tensor) or value.dim() != 1:
            refuse(f"'{name}' is not a flat tensor ({_shape(value)})")
    alpha, labels, support = arrays["alpha"], arrays["labels"], arrays["support"]
    if alpha.shape != labels.shape:
        refuse(f"has {len(alpha)} alpha values for {len(labels)} labels")
    if (alpha < 0).any() or not ((labels == 1) | (labels == -1)).all():
        refuse("holds a negative alpha or a label other than +1 and -1")
    if not torch.equal(support.long(), torch.nonzero(alpha > 0).flatten()):
        refuse("'support' is not where alpha > 0")
    rows = {"dual_coef": arrays["dual_coef"], "support_vectors": boundary.get("support_vectors")}
    for name, value in rows.items():
        if value is not None and (not isinstance(value, torch.Tensor) or len(value) != len(support)):
            refuse(f"has {_shape(value)} for '{name}', one per support index ({len(support)})")
    calibration = boundary.get("calibration")  # not a dict: refused as an incomplete state by the loader
    scores = calibration.get("scores") if isinstance(calibration, dict) else None
    if isinstance(calibration, dict) and (not isinstance(scores, torch.Tensor) or scores.dim() != 1):
        refuse(f"calibration scores are not a flat tensor ({_shape(scores)})")


def flat_scores(value, name: str, path) -> np.ndarray:
    """A model file's list of scores (1-d, finite, float64), or a refusal naming the file."""
    if not isinstance(value, torch.Tensor) or value.dim() != 1 or not value.is_floating_point() \
            or not torch.isfinite(value).all():
        raise ValueError(f"{path}: its {name} are not a flat tensor of finite numbers ({_shape(value)}); {DAMAGED}")
    return value.numpy().astype(np.float64)


def _shape(value) -> str:
    """A value's shape in words, for a refusal."""
    if isinstance(value, torch.Tensor):
        return f"shape {tuple(value.shape)}"
    return f"a {type(value).__name__}"


def _numbers(value, name: str):
    """(name, value) of the floating-point tensors and floats in nested dicts and lists."""
    if isinstance(value, dict):
        for key, item in value.items():
            yield from _numbers(item, f"{name}[{key!r}]")
    elif isinstance(value, (list, tuple)):
        for i, item in enumerate(value):
            yield from _numbers(item, f"{name}[{i}]")
    elif (isinstance(value, torch.Tensor) and value.is_floating_point()) or isinstance(value, float):
        yield name, value


def check_config(state: dict, config: dict, path, resolved: dict | None = None) -> None:
    """The training state at ``path`` was written by a run with ``config`` (up to ``RUN_ONLY``)
    and, where the state stores it, the same ``resolved`` configuration: the same fields
    resolved otherwise (a recipe changed by an upgrade) would go on with other numbers."""
    for key, here, label in (("config", config, ""), ("resolved", resolved, "as resolved: ")):
        saved = state.get(key)
        if saved is None or here is None:  # states written before 'resolved' was stored
            continue
        saved = upgraded_config(saved) if key == "config" else resolved_then(saved)
        differ = sorted(k for k in set(saved) | set(here) if k not in RUN_ONLY and saved.get(k) != here.get(k))
        if differ:
            pairs = ", ".join(f"{k}: {saved.get(k)!r} there, {here.get(k)!r} here" for k in differ)
            raise ValueError(f"{path} was written by a run with another configuration ({label}{pairs}); "
                             "resume it with its own configuration and the dlmsvdd version that wrote it")


def run_params(state: dict) -> dict:
    """The epochs and network shape a run recorded of itself (``DLMSVDD._run_params``) in a state
    it wrote; empty for states written before it was recorded (their runs' are what their
    configuration resolves to, ``TrainConfig.recorded_run``)."""
    params = dict(state.get("network_shape") or {})
    if state.get("epochs") is not None:
        params["epochs"] = state["epochs"]
    return params


def rng_states(group=None) -> list[dict]:
    """The random generators' states of this process (with a process group: of
    every process, in rank order; every rank must call this)."""
    numpy_state = np.random.get_state(legacy=False)
    numpy_state["state"]["key"] = torch.from_numpy(numpy_state["state"]["key"].astype(np.int64))
    state = {"torch": torch.get_rng_state(), "numpy": numpy_state, "python": random.getstate(),
             "cuda": torch.cuda.get_rng_state_all() if torch.cuda.is_initialized() else []}
    if group is None:
        return [state]
    states = [None] * group.world_size
    dist.all_gather_object(states, state)
    return states


def set_rng_states(states: list[dict], group=None) -> None:
    """Restores what ``rng_states`` saved, for this process's rank."""
    world = 1 if group is None else group.world_size
    if len(states) != world:
        raise ValueError(f"the checkpoint was written by {len(states)} processes; resume it with as many "
                         f"(this run has {world})")
    state = states[0 if group is None else group.rank]
    torch.set_rng_state(state["torch"])
    numpy_state = dict(state["numpy"])
    numpy_state["state"] = {**numpy_state["state"], "key": state["numpy"]["state"]["key"].numpy().astype(np.uint32)}
    np.random.set_state(numpy_state)
    random.setstate(state["python"])
    if state["cuda"] and torch.cuda.is_available() and len(state["cuda"]) == torch.cuda.device_count():
        torch.cuda.set_rng_state_all(state["cuda"])
