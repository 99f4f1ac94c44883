"""A training run end to end: the task from the config, the fit, the test
scores, and the run folder (config, metrics, history, plots, checkpoint, log)."""

from __future__ import annotations

import logging
import time
from pathlib import Path

import numpy as np

from ..data import sources
from ..data.tasks import Task, make_task
from ..training import metrics
from ..training.config import TrainConfig
from ..training.trainer import DLMSVDD, versions
from . import run_outputs

log = logging.getLogger("dlmsvdd")


def build_task(cfg: TrainConfig) -> Task:
    """The one-vs-rest task the config describes; every check on the data runs here."""
    source = sources.load(cfg.data, cfg.root, fine_labels=cfg.fine_labels, split_dir=cfg.split_dir)
    channels = source.channels if cfg.backbone in ("small_cnn", "custom") else 3
    image_size = cfg.image_size or (224 if cfg.imagenet_input else None)
    return make_task(source, cfg.normal_class, ratio=cfg.ratio, rho=cfg.rho, seed=cfg.seed,
                     val_fraction=cfg.val_fraction, channels=channels, image_size=image_size,
                     imagenet_stats=cfg.imagenet_input)


def default_output(cfg: TrainConfig) -> Path:
    return Path("runs") / f"{cfg.data}-class{cfg.normal_class}-{cfg.backend}-seed{cfg.seed}-{time.strftime('%Y%m%d-%H%M%S')}"


def train(cfg: TrainConfig) -> tuple[DLMSVDD, dict, Path | None]:
    """Trains on the config's task and writes the run folder; returns the model,
    the metrics and the folder. Under torchrun every process trains and
    scores its shard; rank 0 writes the folder (the others get None)."""
    cfg.validate()
    task = build_task(cfg)  # data errors surface before the folder or the network exist
    model = DLMSVDD(cfg)  # joins torchrun's process group, if any
    writer = model.group_ is None or model.group_.is_main
    folder = (Path(cfg.output) if cfg.output else default_output(cfg)) if writer else None
    handler = None
    if writer:
        folder.mkdir(parents=True, exist_ok=True)
        handler = run_outputs.attach_log(folder)
    try:
        if writer:
            run_outputs.write_yaml(folder / "config.yaml", cfg.to_dict())
        log.info("task %s", task.summary())
        start = time.perf_counter()
        model.fit(task.train, task.val)
        seconds = time.perf_counter() - start
        f_test, t_test = model.scores(task.test)
        result = {"test": metrics.summary(t_test, f_test, model.threshold_), "threshold_rule": model.threshold_rule_,
                  "val": model.evaluate(task.val), "best_epoch": model.best_epoch_, "epochs": cfg.epochs,
                  "seconds": seconds, "timing": run_outputs.timing_summary(model.history_),
                  "alpha_step": model.measure_alpha_step(task.train), "task_summary": task.summary(),
                  "device": str(model.device), "processes": 1 if model.group_ is None else model.group_.world_size,
                  "versions": versions()}
        if writer:
            write_run(folder, model, result, t_test, f_test, f"{cfg.data} class {task.class_name}")
    finally:
        if handler is not None:
            logging.getLogger("dlmsvdd").removeHandler(handler)
            handler.close()
    return model, result, folder


def write_run(folder: Path, model: DLMSVDD, result: dict, t_test, f_test, title: str) -> None:
    """Metrics, history, plots, test scores and the checkpoint."""
    run_outputs.write_json(folder / "metrics.json", result)
    run_outputs.write_json(folder / "history.json", model.history_)
    run_outputs.plot_convergence(model.history_, folder / "convergence.png")
    run_outputs.plot_roc(t_test, f_test, folder / "roc.png", title)
    np.savetxt(folder / "test_scores.csv", np.c_[t_test, f_test], delimiter=",", header="target,dissimilarity",
               comments="")
    model.save(folder / "model.pt")
    log.info("test %s", result["test"])


def load_model(path) -> DLMSVDD:
    """A checkpoint file, or a run folder holding model.pt."""
    path = Path(path)
    if path.is_dir():
        path = path / "model.pt"
    if not path.is_file():
        raise ValueError(f"no checkpoint at {str(path)!r}")
    return DLMSVDD.load(path)
