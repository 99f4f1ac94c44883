"""A sweep folder on disk: one sub-folder per task with its record, and a lock.

A task's record is the truth about it:

* ``result.json``: the task is finished: ``task`` (its folder's name), ``status``
  "done", ``config`` (the ``TrainConfig`` fields as asked, None where the recipe
  chooses), ``resolved`` (every field as the run used it: ``TrainConfig.resolved``)
  and the run's metrics (``metrics.json``'s content);
* ``failed.json``: the task failed: ``task``, ``status`` "failed", ``config``,
  ``resolved``, ``error`` and ``traceback`` (a dead worker's too, written by the sweep).

Records are written atomically (``run_outputs.write_atomic``), so a record
that exists is whole; one that does not parse (a disk that filled up under an
older version, a hand edit), or a result without what the report reads
(``RESULT_NEEDS``), counts as no record. A task is done only when its
``result.json`` parses and what it was trained with equals what the sweep asks
for, both resolved (``lr`` left to the scratch recipe equals ``lr=0.001``), but
for ``output`` and ``verbose`` (where the run was written, how much it printed);
keys the record lacks count as their defaults (fields added since it was
written), keys it has that the configuration no longer knows are ignored. A
record written before ``resolved`` was stored is resolved from its ``config``
by this version's recipes, the small CNN's shape fields it lacks at the shape
of before (as ``DLMSVDD.load`` does).

The lock (``sweep.lock``, an ``flock``) lets one sweep at a time run in a
folder; the kernel drops it when its holder exits, however it exits.
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import json
import os
import re
import socket
import time
from pathlib import Path

from ..training.config import RESOLVED, SMALL_CNN_FIELDS, TrainConfig

RESULT, FAILED, LOCK = "result.json", "failed.json", "sweep.lock"
NOT_COMPARED = ("output", "verbose")
VALUE_LIMIT = 48  # characters of one grid value in a task's folder name
# what a finished task's record holds at least (what the report reads): the task's axes in its
# config, the test metrics, the validation metrics and the task's sizes; one without them counts as none
RESULT_NEEDS = {"config": ("data", "normal_class", "seed", "ratio", "rho"), "test": ("auroc", "balanced_accuracy"),
                "val": (), "task_summary": ("class_name", "train_normal", "val_normal")}
NAME_LIMIT = 160  # characters of a task's folder name (file systems allow 255 bytes)


class SettingsChanged(ValueError):
    """The folder holds results trained with other settings than the ones asked for."""

    def __init__(self, folder, differences: dict):
        self.differences = differences  # key -> [(stored value, asked value, number of tasks)]
        changes = "; ".join(f"{key}: {stored!r} in the folder, {asked!r} asked ({count} task{'s' * (count > 1)})"
                            for key, pairs in differences.items() for stored, asked, count in pairs)
        super().__init__(f"{folder} holds results trained with other settings ({changes}); they would be "
                         "stale: resume it with its own settings, choose another --output, or add --new-folder "
                         "to run into the first free numbered folder beside it (sweep.free_folder)")


class FolderInUse(ValueError):
    """Another sweep holds the folder's lock."""


# ---- names

def _digest(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:8]


def _safe(value) -> str:
    """A grid value as it reads in a folder name. Characters other than letters,
    digits and ``._+-`` become ``_`` (no path separators), runs of dots too (no
    ``..``), and long values are cut; a value that had to change gets a hash of
    its full text, so that two values never share a name."""
    text = str(value)
    safe = re.sub(r"\.{2,}", "_", re.sub(r"[^A-Za-z0-9._+-]+", "_", text))
    if safe != text or len(safe) > VALUE_LIMIT:
        safe = f"{safe[:VALUE_LIMIT]}~{_digest(text)}"
    return safe


def task_name(values: dict) -> str:
    """The folder name of the task with these grid values (in grid order):
    ``key=value,...`` (``base`` without a grid), bounded to ``NAME_LIMIT``
    characters (cut, with a hash of the whole)."""
    name = ",".join(f"{key}={_safe(value)}" for key, value in values.items()) or "base"
    if len(name) > NAME_LIMIT:
        name = f"{name[:NAME_LIMIT - 9]}~{_digest(name)}"
    return name


def task_dir(folder, name: str) -> Path:
    """``folder/name``, refused unless it is a direct sub-folder of ``folder``."""
    folder = Path(folder)
    path = folder / name
    if Path(name).name != name or name in ("", ".", "..") or path.resolve().parent != folder.resolve():
        raise ValueError(f"task folder {name!r} would not lie directly inside {folder}")
    return path


# ---- records

def read(path) -> tuple[dict | None, str | None]:
    """(the record in ``path``, None), or (None, why it is not one) for a missing,
    empty, truncated or otherwise unreadable file."""
    path = Path(path)
    try:
        text = path.read_text()
    except FileNotFoundError:
        return None, "missing"
    except (OSError, UnicodeDecodeError) as err:
        return None, f"unreadable ({err})"
    if not text.strip():
        return None, "empty file"
    try:
        record = json.loads(text)
    except ValueError as err:
        return None, f"not JSON, truncated? ({err})"
    if not isinstance(record, dict) or not isinstance(record.get("config"), dict):
        return None, "not a task record (no 'config')"
    if "task_summary" not in record and isinstance(record.get("task"), dict):  # sweeps before 'task_summary'
        record["task_summary"] = record["task"]
    return record, None


def lacks(result: dict) -> str | None:
    """What a finished task's record lacks of ``RESULT_NEEDS``, in words, or None."""
    missing = []
    for part, keys in RESULT_NEEDS.items():
        if isinstance(result.get(part), dict):
            missing += [f"{part}.{key}" for key in keys if key not in result[part]]
        else:
            missing.append(part)
    return f"not a whole task record (no {', '.join(missing)})" if missing else None


def comparable(config: dict) -> dict:
    """A resolved configuration as a record stores it (JSON types), for comparison."""
    return json.loads(json.dumps(config, default=float))


_DEFAULTS = comparable(TrainConfig().to_dict())


def trained_with(record: dict) -> dict:
    """Every field as the record's run used it: its ``resolved``, or for a record written
    before that was stored, its ``config`` resolved now (see the module's docstring)."""
    if isinstance(record.get(RESOLVED), dict):
        return record[RESOLVED]
    known = {f.name for f in dataclasses.fields(TrainConfig)}
    values = {**SMALL_CNN_FIELDS, **{k: v for k, v in record["config"].items() if k in known}}
    try:
        return comparable(TrainConfig(**values).resolved())
    except (TypeError, ValueError, KeyError):  # values this version cannot resolve: compared as stored
        return {**_DEFAULTS, **values}


def differences(stored: dict, asked: dict) -> dict:
    """key -> (stored value, asked value) for every compared key that differs."""
    return {key: (stored.get(key, _DEFAULTS.get(key)), value) for key, value in asked.items()
            if key not in NOT_COMPARED and stored.get(key, _DEFAULTS.get(key)) != value}


def state(folder, name: str, asked: dict) -> tuple[str, dict | None, dict]:
    """(status, record, differing keys) of a task: "done" (its result was trained
    with ``asked``, a resolved configuration), "stale" (with other settings), "failed", or "missing"."""
    result, _ = read(Path(folder) / name / RESULT)
    if result is not None and lacks(result) is None:
        changed = differences(trained_with(result), asked)
        return ("stale" if changed else "done"), result, changed
    failed, _ = read(Path(folder) / name / FAILED)
    return ("failed", failed, {}) if failed is not None else ("missing", None, {})


def clear(task_folder: Path) -> None:
    """Removes a task's records before it runs again (unreadable, failed or stale)."""
    for file in (RESULT, FAILED):
        (task_folder / file).unlink(missing_ok=True)


# ---- the lock

@contextlib.contextmanager
def lock(folder):
    """Holds ``folder/sweep.lock`` for the block, or raises ``FolderInUse``
    naming the holder. The file stays; an ``flock`` left by a process that died is
    released by the kernel, so a stale file is simply taken over."""
    import fcntl

    path = Path(folder) / LOCK
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o666)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise FolderInUse(f"{folder} is in use by another sweep ({_holder(path)}); wait for it to finish, "
                              "or stop it, or choose another --output") from None
        holder = {"pid": os.getpid(), "host": socket.gethostname(), "since": time.strftime("%Y-%m-%d %H:%M:%S")}
        os.ftruncate(fd, 0)
        os.pwrite(fd, (json.dumps(holder) + "\n").encode(), 0)
        yield
    finally:
        os.close(fd)  # drops the lock


def _holder(path: Path) -> str:
    try:
        holder = json.loads(path.read_text())
        return f"pid {holder['pid']} on {holder['host']}, since {holder['since']}"
    except (OSError, ValueError, KeyError, TypeError):  # it took the lock but has not written itself yet
        return "pid not written yet"

