"""Sweeps: a grid of training runs, each in its own folder, resumable.

A sweep is a base configuration and a grid (config field -> list of values);
every combination is a task, run in a sub-folder of the sweep folder named by
its grid values (``sweep_folder.task_name``: safe, bounded, unique). The
folder's records are the truth (``sweep_folder``): a re-run skips the tasks
whose ``result.json`` holds the configuration asked for, re-runs those without
a readable record or with a ``failed.json``, and refuses to start when a
result was trained with other settings (``free_folder`` finds a folder for
them). A failure is written to ``failed.json`` (with the traceback) and the
other tasks go on. One sweep at a time runs in a folder (its lock).

The ``local`` engine runs tasks one after another in this process or, with
``workers`` > 1, each in a fresh process of its own, ``workers`` at a time, so
a worker that dies is one failed task; the ``ray`` engine makes each task a Ray
task with its own CPU/GPU request, on a local Ray instance or a cluster.
"""

from __future__ import annotations

import contextlib
import itertools
import logging
import os
import signal
import traceback
from dataclasses import dataclass, field
from multiprocessing import get_context
from pathlib import Path

from ..training.config import RESOLVED, TrainConfig
from . import run_outputs, sweep_folder
from .sweep_folder import FAILED, RESULT

log = logging.getLogger("dlmsvdd")
ENGINES = ("local", "ray")


@dataclass
class Sweep:
    """A grid of training runs: a base configuration and lists of values.

    Every configuration is checked when the sweep is made, before anything runs.

    Parameters
    ----------
    base : dict
        ``TrainConfig`` fields every task shares.
    grid : dict
        Field -> list of values; the tasks are their product.
    """

    base: dict = field(default_factory=dict)
    grid: dict = field(default_factory=dict)

    def __post_init__(self):
        TrainConfig.from_dict(dict(self.base))  # unknown keys and bad values fail here, before any run
        for key, values in self.grid.items():
            if not isinstance(values, (list, tuple)) or not values:
                raise ValueError(f"grid entry {key!r} must be a non-empty list of values")
            for value in values:
                TrainConfig.from_dict({**self.base, key: value})
        check_unique(self.tasks(), "the sweep")

    @classmethod
    def from_yaml(cls, path) -> "Sweep":
        """The sweep a YAML file describes (sections ``base`` and ``grid``).

        Parameters
        ----------
        path : str or pathlib.Path
            The file.

        Returns
        -------
        Sweep
            The sweep, checked.
        """
        import yaml

        spec = yaml.safe_load(Path(path).read_text()) or {}
        unknown = set(spec) - {"base", "grid"}
        if unknown:
            raise ValueError(f"{path}: unknown sections {sorted(unknown)}; expected 'base' and 'grid'")
        return cls(spec.get("base") or {}, spec.get("grid") or {})

    def tasks(self) -> list[tuple[str, dict]]:
        """Every combination of the grid, in grid order.

        Returns
        -------
        list of tuple
            (task folder name, configuration values) pairs.
        """
        keys = list(self.grid)
        return [(sweep_folder.task_name(dict(zip(keys, values))), {**self.base, **dict(zip(keys, values))})
                for values in itertools.product(*(self.grid[k] for k in keys))]


def check_unique(tasks, what: str) -> None:
    names = [name for name, _ in tasks]
    if len(names) != len(set(names)):
        twice = next(name for name in names if names.count(name) > 1)
        raise ValueError(f"{what} gives the same task twice ({twice!r}); make its grid values and parts distinct")


class WorkerDied(RuntimeError):
    """A task's process ended without leaving a record (killed, crashed, out of memory)."""


def task_config(values: dict, task_folder: Path) -> TrainConfig:
    """The configuration a task runs with (and its records store)."""
    return TrainConfig.from_dict({**values, "output": str(task_folder), "verbose": 0})


def _configs(cfg: TrainConfig) -> dict:
    """A record's configuration: as asked, and as the run uses it (what a re-run compares)."""
    return {"config": cfg.to_dict(), RESOLVED: cfg.resolved()}


def _run_task(name: str, values: dict, folder: str, threads: int | None = None) -> dict:
    """One task in its folder: in this process, a process of its own, or a Ray worker.

    ``threads`` fixes torch's thread count (and with it OpenMP's, shared with the
    compiled kernels): reductions split over a different number of threads round
    differently, so the same seed gives the same numbers only at the same count.
    """
    import torch

    from . import runs

    task_dir = Path(folder) / name
    task_dir.mkdir(parents=True, exist_ok=True)
    before = torch.get_num_threads()  # restored: the sequential engine runs tasks in the caller's process
    try:
        if threads is not None:
            torch.set_num_threads(threads)
        cfg = task_config(values, task_dir)
        _, result, _ = runs.train(cfg)
        record = {"task": name, "status": "done", **_configs(cfg), **result}
        run_outputs.write_json(task_dir / RESULT, record)
    except Exception as err:  # noqa: BLE001 - a failed task is recorded, the sweep goes on
        record = _record_failure(task_dir, name, values, err)
    finally:
        torch.set_num_threads(before)
    return record


def _record_failure(task_dir: Path, name: str, values: dict, err: BaseException) -> dict:
    """failed.json, written by the task itself or, when its worker died, by the sweep's process."""
    record = {"task": name, "status": "failed", **_configs(task_config(values, task_dir)),
              "error": f"{type(err).__name__}: {err}", "traceback": "".join(traceback.format_exception(err))}
    task_dir.mkdir(parents=True, exist_ok=True)  # a worker can die before its task made the folder
    run_outputs.write_json(task_dir / FAILED, record)
    return record


def run_sweep(sweep: Sweep, folder, **options) -> list[dict]:
    """Run the sweep's unfinished tasks into a folder.

    Parameters
    ----------
    sweep : Sweep
        The sweep.
    folder : str or pathlib.Path
        The sweep folder; one sub-folder per task.
    **options
        ``dlmsvdd.experiments.sweep.run_tasks``' options: ``engine`` ("local"
        or "ray"), ``workers``, ``threads``, ``address``, ``cpus_per_task``,
        ``gpus_per_task``, ``progress``.

    Returns
    -------
    list of dict
        Every task's record (finished ones read back).
    """
    return run_tasks(sweep.tasks(), folder, **options)


def run_tasks(tasks: list[tuple[str, dict]], folder, engine: str = "local", workers: int = 1,
              threads: int | None = None, address: str | None = None, cpus_per_task: float = 1,
              gpus_per_task: float = 0, progress: bool = True, prepare=None) -> list[dict]:
    """Runs the tasks (name, config values) that ``folder`` holds no result of;
    returns every task's record.

    Holds the folder's lock throughout (``FolderInUse`` when another sweep has
    it) and refuses with ``SettingsChanged``, before anything is written, when a
    task's stored result was trained with another configuration. ``prepare(folder)``
    runs after those checks, before the tasks (the preset writes preset.yaml).

    ``workers``: the local engine's number of task processes (1: in this process).
    ``threads``: torch's thread count in each task (default: torch's own with
    ``local``, ``cpus_per_task`` with ``ray``); equal counts give equal numbers on
    either engine.

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
    check_unique(tasks, "the sweep")
    if engine == "ray":
        _check_ray(address)
    from tqdm.auto import tqdm

    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    with sweep_folder.lock(folder):
        states = _states(tasks, folder)
        stale = [changed for status, _, changed in states if status == "stale"]
        if stale:
            raise sweep_folder.SettingsChanged(folder, _summary(stale))
        if prepare is not None:
            prepare(folder)
        todo = [(name, values) for (name, values), (status, _, _) in zip(tasks, states) if status != "done"]
        for name, _ in todo:  # unreadable or failed: a record written now is this run's
            sweep_folder.clear(sweep_folder.task_dir(folder, name))
        log.info("sweep %s: %d tasks, %d to run", folder, len(tasks), len(todo))
        with tqdm(total=len(todo), desc="sweep", disable=not progress) as bar:
            if engine == "ray":
                _run_on_ray(todo, folder, bar, address, cpus_per_task, gpus_per_task,
                            threads or max(1, int(cpus_per_task)))
            elif workers == 1:
                for name, values in todo:
                    _run_task(name, values, str(folder), threads)
                    bar.update()
            else:
                _run_in_processes(todo, folder, bar, workers, threads)
        return collect_tasks(tasks, folder)


def _states(tasks, folder: Path) -> list[tuple]:
    """``sweep_folder.state`` of every task against the configuration it asks for."""
    return [sweep_folder.state(folder, name, sweep_folder.comparable(task_config(values, folder / name).resolved()))
            for name, values in tasks]


def _summary(changes: list[dict]) -> dict:
    """key -> [(stored, asked, number of tasks)] over the stale tasks' differences."""
    summary: dict = {}
    for changed in changes:
        for key, (stored, asked) in changed.items():
            pairs = summary.setdefault(key, [])
            same = [i for i, (s, a, _) in enumerate(pairs) if (s, a) == (stored, asked)]  # lists are unhashable
            if same:
                pairs[same[0]] = (stored, asked, pairs[same[0]][2] + 1)
            else:
                pairs.append((stored, asked, 1))
    return summary


def free_folder(folder, tasks: list[tuple[str, dict]]) -> Path:
    """The folder a sweep whose settings changed runs into (``--new-folder``).

    A folder that is not a sweep's (no ``sweep.lock``) is passed over.

    Parameters
    ----------
    folder : str or pathlib.Path
        The sweep folder asked for.
    tasks : list of tuple
        The sweep's (name, configuration values) pairs.

    Returns
    -------
    pathlib.Path
        ``folder`` when it holds no result of other settings than the tasks
        ask for; else the first of ``folder-2``, ``folder-3``, ... that is new,
        or a sweep folder holding none, so that the same changed sweep run
        again resumes there.
    """
    folder = Path(folder)
    base = folder if folder.name else folder.resolve()  # "." has no name to number
    candidate, number = folder, 1
    while True:
        ours = number == 1 or not candidate.exists() or (candidate / sweep_folder.LOCK).exists()
        if ours and not any(status == "stale" for status, _, _ in _states(tasks, candidate)):
            return candidate
        number += 1
        candidate = base.with_name(f"{base.name}-{number}")


def _serve(conn) -> None:
    """A worker process: runs the tasks sent on ``conn`` one at a time, answering
    each. It ends when the sweep's process dies, as a pool worker would: no task
    goes on writing into a folder whose lock is gone."""
    import threading
    from multiprocessing import parent_process
    from multiprocessing.connection import wait

    def watch():
        wait([parent_process().sentinel])
        os._exit(1)

    threading.Thread(target=watch, daemon=True).start()
    while (job := conn.recv()) is not None:
        task, args = job
        task(*args)
        conn.send(True)


def _run_in_processes(todo, folder: Path, bar, workers: int, threads) -> None:
    """The tasks on ``workers`` worker processes (spawned: no forked OpenMP or
    torch state), each worker one task at a time, so that a worker that dies
    (killed, crashed) is that task's failure; a fresh worker takes its place."""
    from multiprocessing.connection import wait

    context = get_context("spawn")
    waiting, idle, busy = list(todo), [], {}  # busy: worker's connection -> (process, name, values)
    try:
        while waiting or busy:
            while waiting and len(busy) < workers:
                while idle and not idle[-1][1].is_alive():  # died between tasks (the OOM killer's pick, say)
                    idle.pop()[1].join()
                conn, process = idle.pop() if idle else _start_worker(context)
                name, values = waiting.pop(0)
                try:  # _run_task looked up now, not bound at import: tests replace it
                    conn.send((_run_task, (name, values, str(folder), threads)))
                except OSError:  # it died before it took the task: recorded, not retried in a loop
                    process.join()
                    _record_death(folder, name, values, process.exitcode)
                    bar.update()
                    continue
                busy[conn] = (process, name, values)
            ready = set(wait([*busy, *(process.sentinel for process, _, _ in busy.values())]))
            for conn, (process, name, values) in list(busy.items()):
                if conn not in ready and process.sentinel not in ready:
                    continue
                del busy[conn]
                try:
                    conn.recv()
                    idle.append((conn, process))
                except (EOFError, OSError):  # it died during the task
                    process.join()
                    if not any((folder / name / file).exists() for file in (RESULT, FAILED)):
                        _record_death(folder, name, values, process.exitcode)
                bar.update()
    finally:  # done or interrupted: no worker outlives the sweep
        for conn, process in idle:
            with contextlib.suppress(OSError):  # one that died idle has nothing to stop
                conn.send(None)
        for process, _, _ in busy.values():
            process.terminate()
        for process in [process for _, process in idle] + [process for process, _, _ in busy.values()]:
            process.join()


def _start_worker(context):
    conn, child = context.Pipe()
    process = context.Process(target=_serve, args=(child,))
    process.start()
    child.close()
    return conn, process


def _record_death(folder: Path, name: str, values: dict, exitcode: int) -> None:
    if exitcode < 0:
        how = f"was killed by {signal.Signals(-exitcode).name}"
        how += " (as the out-of-memory killer does)" if -exitcode == signal.SIGKILL else ""
    else:
        how = f"exited with code {exitcode}"
    err = WorkerDied(f"the task's worker process {how} before it recorded a result; a re-run of the sweep retries it")
    try:
        _record_failure(folder / name, name, values, err)
    except OSError as write_err:  # a full disk: the task stays unrecorded and is re-run next time
        log.error("task %s: %s; could not record it: %s", name, err, write_err)


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
        pending = {task.remote(name, values, str(folder), threads): (name, values) for name, values in todo}
        while pending:  # in the order they finish, for the progress bar
            (ref,), _ = ray.wait(list(pending), num_returns=1)
            name, values = pending.pop(ref)
            try:
                ray.get(ref)
            except ray.exceptions.RayError as err:  # the worker died (crash, out of memory, lost node)
                _record_failure(folder / name, name, values, err)
            bar.update()
    finally:
        if not connected:
            ray.shutdown()


def collect(sweep: Sweep, folder) -> list[dict]:
    """The records of a sweep's tasks (``collect_tasks``)."""
    return collect_tasks(sweep.tasks(), folder)


def collect_tasks(tasks: list[tuple[str, dict]], folder) -> list[dict]:
    """Each task's record: its result ("done"), its failure ("failed"), or a stub
    with status "stale" (a result of other settings: ``changed`` names the keys)
    or "missing" (no readable record: not run yet, or unreadable)."""
    folder = Path(folder)
    records = []
    for (name, _), (status, record, changed) in zip(tasks, _states(tasks, folder)):
        if status in ("done", "failed"):
            records.append(record)
        else:
            records.append({"task": name, "status": status, **({"changed": sorted(changed)} if changed else {})})
    return records
