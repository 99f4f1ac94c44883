"""Sweeps: a grid of training runs, each in its own folder, resumable.

A sweep is a base configuration and a grid (config field -> list of values);
every combination is a task with a stable name built from its grid values.
A task whose folder holds ``result.json`` is finished and skipped on a re-run;
a failure is written to ``failed.json`` (with the traceback) and the other
tasks go on. The ``local`` engine runs tasks one after another or in a pool of
worker processes; the ``ray`` engine makes each task a Ray task with its own
CPU/GPU request, on a local Ray instance or an existing cluster.
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

from ..training.config import TrainConfig

log = logging.getLogger("dlmsvdd")
ENGINES = ("local", "ray")


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


def _run_task(name: str, values: dict, folder: str, threads: int | None = None) -> dict:
    """One task in its folder: in this process, a pool worker or a Ray worker.

    ``threads`` fixes torch's thread count (and with it OpenMP's, shared with the
    compiled kernels): reductions split over a different number of threads round
    differently, so the same seed gives the same numbers only at the same count.
    """
    import torch

    from . import runs

    task_dir = Path(folder) / name
    task_dir.mkdir(parents=True, exist_ok=True)
    (task_dir / "failed.json").unlink(missing_ok=True)
    before = torch.get_num_threads()  # restored: the sequential engine runs tasks in the caller's process
    try:
        if threads is not None:
            torch.set_num_threads(threads)
        cfg = TrainConfig.from_dict({**values, "output": str(task_dir), "verbose": 0})
        _, result, _ = runs.train(cfg)
        record = {"task": name, "status": "done", "config": cfg.to_dict(), **result}
        (task_dir / "result.json").write_text(json.dumps(record, indent=2, default=float) + "\n")
    except Exception as err:  # noqa: BLE001 - a failed task is recorded, the sweep goes on
        record = _record_failure(task_dir, name, err)
    finally:
        torch.set_num_threads(before)
    return record


def _record_failure(task_dir: Path, name: str, err: BaseException) -> dict:
    """failed.json, written by the task itself or, when its worker died, by the Ray driver."""
    record = {"task": name, "status": "failed", "error": f"{type(err).__name__}: {err}",
              "traceback": "".join(traceback.format_exception(err))}
    task_dir.mkdir(parents=True, exist_ok=True)  # a worker can die before its task made the folder
    (task_dir / "failed.json").write_text(json.dumps(record, indent=2) + "\n")
    return record


def is_done(folder: Path, name: str) -> bool:
    return (folder / name / "result.json").is_file()


def run_sweep(sweep: Sweep, folder, engine: str = "local", workers: int = 1, threads: int | None = None,
              address: str | None = None, cpus_per_task: float = 1, gpus_per_task: float = 0,
              progress: bool = True) -> list[dict]:
    """Runs the unfinished tasks; returns every task's record (finished ones read back).

    ``workers``: the local engine's pool size (1: in this process). ``threads``:
    torch's thread count in each task (default: torch's own with ``local``,
    ``cpus_per_task`` with ``ray``); equal counts give equal numbers on either engine.

    The ray engine makes each task a Ray task asking for ``cpus_per_task`` CPUs
    and ``gpus_per_task`` GPUs. It uses this process's Ray connection if
    ``ray.init`` was already called (with your own ``runtime_env``, say);
    otherwise ``address=None`` starts a local instance, shut down at the end, and
    an address ("auto", "host:port", "ray://host:port") connects to that cluster,
    whose nodes all need dlmsvdd installed and ``folder`` on a shared file system.
    """
    if engine not in ENGINES:
        raise ValueError(f"engine must be one of {ENGINES}, got {engine!r}")
    if workers < 1:
        raise ValueError(f"workers must be >= 1, got {workers}")
    if threads is not None and threads < 1:
        raise ValueError(f"threads must be >= 1, got {threads}")
    if not cpus_per_task > 0 or not gpus_per_task >= 0:
        raise ValueError(f"cpus_per_task must be > 0 and gpus_per_task >= 0, got {cpus_per_task} and {gpus_per_task}")
    if engine == "ray":
        _check_ray(address)
    from tqdm.auto import tqdm

    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    todo = [(name, values) for name, values in sweep.tasks() if not is_done(folder, name)]
    log.info("sweep %s: %d tasks, %d to run", folder, len(sweep.tasks()), len(todo))
    with tqdm(total=len(todo), desc="sweep", disable=not progress) as bar:
        if engine == "ray":
            _run_on_ray(todo, folder, bar, address, cpus_per_task, gpus_per_task,
                        threads or max(1, int(cpus_per_task)))
        elif workers == 1:
            for name, values in todo:
                _run_task(name, values, str(folder), threads)
                bar.update()
        else:  # spawn: fresh interpreters, no forked OpenMP or torch state
            with ProcessPoolExecutor(workers, mp_context=get_context("spawn")) as pool:
                for future in [pool.submit(_run_task, name, values, str(folder), threads) for name, values in todo]:
                    future.result()
                    bar.update()
    return collect(sweep, folder)


def _check_ray(address) -> None:
    """Ray is installed, the address is usable, and Ray's workers will import the packages this process uses."""
    try:
        import ray
    except ImportError as err:
        raise ImportError("the ray engine needs ray: pip install 'dlmsvdd[ray]'") from err
    if ray.is_initialized() and address is not None:
        raise ValueError(f"this process is already connected to Ray; address={address!r} would be ignored")
    import dlmsvdd
    import dlmsvdd_ext

    # Ray starts its workers in the driver's working directory, first on their sys.path:
    # a source checkout there (whose dlmsvdd_ext has no compiled module) would shadow ours.
    for module in (dlmsvdd_ext, dlmsvdd):
        shadow = Path.cwd() / module.__name__
        if shadow.is_dir() and shadow.resolve() != Path(module.__file__).parent.resolve():
            raise ValueError(f"the ray engine cannot start from {Path.cwd()}: its workers would import "
                             f"{shadow} instead of {Path(module.__file__).parent}; run from another directory")


def _run_on_ray(todo, folder: Path, bar, address, cpus_per_task, gpus_per_task, threads) -> None:
    import ray

    if not todo:  # nothing to run: no instance to start
        return
    connected = ray.is_initialized()
    if not connected:  # "local" starts a new instance even when RAY_ADDRESS or a `ray start` cluster exists
        ray.init(address=address or "local")
    try:
        # max_retries=0: a task that kills its worker would run four times; a re-run of the sweep retries it
        task = ray.remote(num_cpus=cpus_per_task, num_gpus=gpus_per_task, max_retries=0)(_run_task)
        pending = {task.remote(name, values, str(folder), threads): name for name, values in todo}
        while pending:  # in the order they finish, for the progress bar
            (ref,), _ = ray.wait(list(pending), num_returns=1)
            name = pending.pop(ref)
            try:
                ray.get(ref)
            except ray.exceptions.RayError as err:  # the worker died (crash, out of memory, lost node)
                _record_failure(folder / name, name, err)
            bar.update()
    finally:
        if not connected:
            ray.shutdown()


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
