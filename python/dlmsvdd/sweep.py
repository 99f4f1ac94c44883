"""Sweeps: a grid of training runs, each in its own folder, resumable.

A sweep is a base configuration and a grid (config field -> list of values);
every combination is a task with a stable name built from its grid values.
A task whose folder holds ``result.json`` is finished and skipped on a re-run;
a failure is written to ``failed.json`` (with the traceback) and the other
tasks go on. The ``local`` engine runs tasks one after another or in a pool of
worker processes.
"""

from __future__ import annotations

import itertools
import json
import logging
import traceback
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from multiprocessing import get_context
from pathlib import Path

from .config import TrainConfig

log = logging.getLogger("dlmsvdd")
ENGINES = ("local",)


@dataclass
class Sweep:
    base: dict = field(default_factory=dict)
    grid: dict = field(default_factory=dict)

    def __post_init__(self):
        TrainConfig.from_dict(dict(self.base))  # unknown keys and bad values fail here, before any run
        for key, values in self.grid.items():
            if not isinstance(values, (list, tuple)) or not values:
                raise ValueError(f"grid entry {key!r} must be a non-empty list of values")
            for value in values:
                TrainConfig.from_dict({**self.base, key: value})

    @classmethod
    def from_yaml(cls, path) -> "Sweep":
        import yaml

        spec = yaml.safe_load(Path(path).read_text()) or {}
        unknown = set(spec) - {"base", "grid"}
        if unknown:
            raise ValueError(f"{path}: unknown sections {sorted(unknown)}; expected 'base' and 'grid'")
        return cls(spec.get("base") or {}, spec.get("grid") or {})

    def tasks(self) -> list[tuple[str, dict]]:
        """(name, config values) for every combination, in grid order."""
        keys = list(self.grid)
        out = []
        for values in itertools.product(*(self.grid[k] for k in keys)):
            name = ",".join(f"{k}={v}" for k, v in zip(keys, values)) or "base"
            out.append((name, {**self.base, **dict(zip(keys, values))}))
        return out


def _run_task(name: str, values: dict, folder: str) -> dict:
    """One task in its folder (runs in a worker process with the pool)."""
    from . import run

    task_dir = Path(folder) / name
    task_dir.mkdir(parents=True, exist_ok=True)
    (task_dir / "failed.json").unlink(missing_ok=True)
    try:
        cfg = TrainConfig.from_dict({**values, "output": str(task_dir), "verbose": 0})
        _, result, _ = run.train(cfg)
        record = {"task": name, "status": "done", "config": cfg.to_dict(), **result}
        (task_dir / "result.json").write_text(json.dumps(record, indent=2, default=float) + "\n")
    except Exception as err:  # noqa: BLE001 - a failed task is recorded, the sweep goes on
        record = {"task": name, "status": "failed", "error": f"{type(err).__name__}: {err}",
                  "traceback": traceback.format_exc()}
        (task_dir / "failed.json").write_text(json.dumps(record, indent=2) + "\n")
    return record


def is_done(folder: Path, name: str) -> bool:
    return (folder / name / "result.json").is_file()


def run_sweep(sweep: Sweep, folder, engine: str = "local", workers: int = 1, progress: bool = True) -> list[dict]:
    """Runs the unfinished tasks; returns every task's record (finished ones read back)."""
    if engine not in ENGINES:
        raise ValueError(f"engine must be one of {ENGINES}, got {engine!r}")
    if workers < 1:
        raise ValueError(f"workers must be >= 1, got {workers}")
    from tqdm.auto import tqdm

    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    todo = [(name, values) for name, values in sweep.tasks() if not is_done(folder, name)]
    log.info("sweep %s: %d tasks, %d to run", folder, len(sweep.tasks()), len(todo))
    bar = tqdm(total=len(todo), desc="sweep", disable=not progress)
    if workers == 1:
        for name, values in todo:
            _run_task(name, values, str(folder))
            bar.update()
    else:  # spawn: fresh interpreters, no forked OpenMP or torch state
        with ProcessPoolExecutor(workers, mp_context=get_context("spawn")) as pool:
            for future in [pool.submit(_run_task, name, values, str(folder)) for name, values in todo]:
                future.result()
                bar.update()
    bar.close()
    return collect(sweep, folder)


def collect(sweep: Sweep, folder) -> list[dict]:
    """The records of a sweep's tasks: done, failed, or missing (not run yet)."""
    folder = Path(folder)
    records = []
    for name, _ in sweep.tasks():
        for file in ("result.json", "failed.json"):
            path = folder / name / file
            if path.is_file():
                records.append(json.loads(path.read_text()))
                break
        else:
            records.append({"task": name, "status": "missing"})
    return records
