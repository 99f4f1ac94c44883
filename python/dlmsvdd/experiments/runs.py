"""A training run end to end: the task from the config, the fit, the test
scores, and the run folder (config, metrics, history, plots, model, log), with
the training state in ``checkpoint.pt`` after every epoch until the run ends."""

from __future__ import annotations

import dataclasses
import logging
import os
import shutil
import time
from pathlib import Path

import numpy as np

from ..data import sources, tables
from ..data.tables import make_table_task
from ..data.tasks import Task, make_task
from ..training import atomic, checkpoints, export, metrics
from ..training.config import TrainConfig
from ..training.model_file import versions
from ..training.trainer import DLMSVDD
from . import run_outputs

log = logging.getLogger("dlmsvdd")


def build_task(cfg: TrainConfig) -> Task:
    """The task the config describes (one-vs-rest on images, or the semi-supervised
    protocol on a table); every check on the data runs here."""
    if cfg.data == "table":
        return make_table_task(cfg.path, cfg.label_column, cfg.labelled_fraction, cfg.seed, cfg.val_fraction,
                               cfg.path_sha256, cfg.categorical, cfg.missing)
    source = sources.load(cfg.data, cfg.root, fine_labels=cfg.fine_labels, split_dir=cfg.split_dir)
    channels = source.channels if cfg.resolved_backbone() in ("small_cnn", "custom") else 3
    image_size = cfg.image_size or (224 if cfg.imagenet_input else None)
    return make_task(source, cfg.normal_class, ratio=cfg.ratio, rho=cfg.rho, seed=cfg.seed,
                     val_fraction=cfg.val_fraction, channels=channels, image_size=image_size,
                     imagenet_stats=cfg.imagenet_input)


def pin_table(cfg: TrainConfig) -> TrainConfig:
    """A table run's configuration as the run keeps it: the file's absolute path and its
    SHA-256 (``tables.fingerprint``), so that ``evaluate`` and ``score`` find the file from any
    working directory and refuse it once it changed. Other data, or no file: ``cfg`` itself."""
    if cfg.data != "table" or cfg.path is None or not Path(cfg.path).is_file():
        return cfg
    path = Path(cfg.path).resolve()
    # a copy: a sweep compares the configuration it asked for with its records
    return dataclasses.replace(cfg, path=str(path), path_sha256=cfg.path_sha256 or tables.fingerprint(path))


def default_output(cfg: TrainConfig) -> Path:
    task = f"table-{Path(cfg.path or 'table').stem}" if cfg.data == "table" else f"{cfg.data}-class{cfg.normal_class}"
    return Path("runs") / f"{task}-{cfg.kernel}-seed{cfg.seed}-{time.strftime('%Y%m%d-%H%M%S')}"


CHECKPOINT = "checkpoint.pt"  # the training state of an unfinished run


def train(cfg: TrainConfig, resume: bool = False) -> tuple[DLMSVDD, dict, Path | None]:
    """Train on the configuration's task and write the run folder.

    Under torchrun every process trains and scores its shard; rank 0 writes
    the folder (the others get None). Every check on the configuration, the data and the device runs before the
    folder is made; a run that fails before its first epoch is saved removes
    what it wrote (the folder, if it made it). A fresh run replaces what an
    earlier run left in the folder, its checkpoint first. ``resume``: continue the
    unfinished run in ``cfg.output`` from its ``checkpoint.pt`` (``cfg`` must be
    that run's configuration, up to verbose and device); the checkpoint is
    removed once ``model.pt`` is written. A table run keeps its file's absolute
    path and SHA-256 (``pin_table``).

    Parameters
    ----------
    cfg : dlmsvdd.TrainConfig
        The configuration; ``cfg.output`` names the folder (None: a name from
        the task and the time).
    resume : bool
        Continue the unfinished run in ``cfg.output``.

    Returns
    -------
    model : dlmsvdd.DLMSVDD
        The trained model.
    result : dict
        What ``metrics.json`` holds: ``test``, ``val``, ``best_epoch``,
        ``timing``, ``alpha_step``, ``task_summary``, ...
    folder : pathlib.Path or None
        The run folder (None on ranks other than 0).
    """
    cfg = cfg.validate() if resume else pin_table(cfg.validate())  # a resumed run's configuration is its own
    folder = Path(cfg.output) if cfg.output else default_output(cfg)
    checkpoint = folder / CHECKPOINT
    if folder.exists() and not folder.is_dir():
        raise ValueError(f"the output {str(folder)!r} exists and is not a folder; choose another --output")
    if resume and not checkpoint.is_file():
        raise ValueError(f"{folder} holds no unfinished run to resume (no {CHECKPOINT})")
    task = build_task(cfg)  # data errors surface before the folder or the network exist
    model = DLMSVDD(cfg)  # joins torchrun's process group, if any
    writer = model.group_ is None or model.group_.is_main
    made, handler, before, board = None, None, set(), None
    if writer:
        before = set(os.listdir(folder)) if folder.is_dir() else set()
        made = _make_folder(folder)
    try:
        if writer:
            handler = run_outputs.attach_log(folder, append=resume)
        if writer and not resume:
            atomic.remove(checkpoint)  # an earlier run's: it must not be resumed with this configuration
            run_outputs.write_yaml(folder / "config.yaml", cfg.to_yaml_dict())
            board = run_outputs.TensorBoard(folder) if cfg.tensorboard else None
        log.info("task %s", task.summary())
        start = time.perf_counter()
        model.fit(task.train, task.val, checkpoint=checkpoint, resume=resume, callback=board)
        seconds = time.perf_counter() - start
        f_test, t_test = model.scores(task.test)
        result = {"test": metrics.summary(t_test, f_test, model.threshold_), "threshold_rule": model.threshold_rule_,
                  "val": model.evaluate(task.val), "best_epoch": model.best_epoch_, "epochs": model.training_params_["epochs"],
                  "warnings": model.warnings_, "kernel": model.kernel_,
                  "n_components": None if model.kernel_ == "exact" else model.svdd_.n_components_,
                  "seconds": seconds, "timing": run_outputs.timing_summary(model.history_),
                  "alpha_step": model.measure_alpha_step(task.train), "task_summary": task.summary(),
                  "device": str(model.device), "processes": 1 if model.group_ is None else model.group_.world_size,
                  "versions": versions()}
        if writer:
            write_run(folder, model, result, t_test, f_test, f"{cfg.data} class {task.class_name}")
            atomic.remove(checkpoint)  # finished: model.pt holds what the run is for
    except BaseException:
        if writer and not checkpoint.exists():  # a failed start: nothing of it stays behind
            _remove_new(folder, made, before, handler)
            handler = None
        raise
    finally:
        if board is not None:
            board.close()
        if handler is not None:
            _detach(handler)
    return model, result, folder if writer else None


def _make_folder(folder: Path) -> Path | None:
    """Makes ``folder`` (and missing parents); returns the topmost folder it made, if any."""
    top = next((p for p in reversed([folder, *folder.parents]) if not p.exists()), None)
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        raise ValueError(f"cannot create the run folder {str(folder)!r}: {err.strerror or err}") from None
    if not os.access(folder, os.W_OK):  # only a folder that existed can fail this: one made here is ours
        raise ValueError(f"the run folder {str(folder)!r} is not writable; choose another --output")
    return top


def _detach(handler: logging.Handler) -> None:
    logging.getLogger("dlmsvdd").removeHandler(handler)
    handler.close()


def _remove_new(folder: Path, made: Path | None, before: set, handler) -> None:
    """Removes what a failed start wrote: the folders it made, else its new files."""
    if handler is not None:
        _detach(handler)
    if made is not None:
        shutil.rmtree(made, ignore_errors=True)
        return
    for name in set(os.listdir(folder)) - before:
        path = folder / name
        shutil.rmtree(path, ignore_errors=True) if path.is_dir() else path.unlink(missing_ok=True)


def unfinished(folder) -> dict | None:
    """The unfinished run in ``folder``: {"next_epoch", "epochs", "config"} of its
    checkpoint, or None when there is none."""
    path = Path(folder) / CHECKPOINT
    if not path.is_file():
        return None
    state = checkpoints.read(path, checkpoints.TRAINING)
    epochs = state.get("epochs")  # what the run trains (checkpoints before budget_rows: its configuration's)
    if epochs is None:
        epochs = state["config"]["epochs"]
    if epochs is None:  # left to the recipe: what the run resolved it to
        epochs = state["resolved"]["epochs"]
    return {"next_epoch": state["next_epoch"], "epochs": epochs, "config": state["config"]}


def write_run(folder: Path, model: DLMSVDD, result: dict, t_test, f_test, title: str) -> None:
    """Metrics, history, plots, test scores and the checkpoint; the exports an earlier
    run left here under their default names (``dlmsvdd export RUN``) are removed."""
    run_outputs.write_json(folder / "metrics.json", result)
    run_outputs.write_json(folder / "history.json", model.history_)
    run_outputs.write_history_csv(model.history_, folder / "history.csv")
    run_outputs.plot_convergence(model.history_, folder / "convergence.png")
    run_outputs.plot_roc(t_test, f_test, folder / "roc.png", title)
    np.savetxt(folder / "test_scores.csv", np.c_[t_test, f_test], delimiter=",", header="target,dissimilarity",
               comments="")
    for suffix in export.SUFFIXES.values():  # an earlier model's exports would score unlike the new model.pt
        atomic.remove(folder / f"model{suffix}")
    model.save(folder / "model.pt")
    log.info("test %s", result["test"])


def load_model(path, device: str | None = None) -> DLMSVDD:
    """A checkpoint file, or a run folder holding model.pt; ``device``: where to
    score (default: where it was trained, or the CPU when this machine lacks it)."""
    path = Path(path)
    if path.is_dir():
        if not (path / "model.pt").is_file() and (path / CHECKPOINT).is_file():
            raise ValueError(f"{path} is an unfinished run (no model.pt yet): continue it with "
                             f"`dlmsvdd train --resume {path}`")
        path = path / "model.pt"
    return DLMSVDD.load(path, device=device)
